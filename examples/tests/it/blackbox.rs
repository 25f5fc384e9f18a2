//! The whereabouts, CNS and LWS example binaries as black boxes
//! (`--cluster`: processes reaching ward-apiserver through KUBECONFIG)
//! under ward-campaign's process campaigns, with the workloads of
//! `examples/{whereabouts,cns,lws}/campaign/` and the checks
//! docs/campaigns.md runs with the `ward-campaign` binary: the naive
//! whereabouts reconciler frees the address of a Pending pod (its end
//! state shows it), the naive CNS agent keeps addresses of a network
//! container it dropped (the state file it writes shows it), the naive LWS
//! controller records a template under the old StatefulSet's hash (its
//! history shows it), in an unperturbed run already; the guarded ones
//! hold, perturbed by every built-in kind.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use ward_campaign::process::workload::{Workload, load_manifests};
use ward_campaign::process::{self, Scenario, Verdict};
use ward_campaign::{Perturbation, perturbations::builtin};

/// The invariant: the pod's allocation survives.
const INVARIANT: &str = r#"test "$(kubectl get ippools 10.10.0.0-24 -o jsonpath={.spec.allocations.47.podref})" = default/web-2"#;

/// Example `name`'s binary (`bin`, run with `--cluster`, `args` and
/// `--mode mode`) on its `campaign/workload.yaml` and CRD.
fn example(name: &str, bin: &str, args: &[&str], mode: &str) -> Scenario {
    let mut controller = vec![bin.to_string(), "--cluster".into()];
    controller.extend(args.iter().map(|a| a.to_string()));
    controller.extend(["--mode".into(), mode.into()]);
    scenario(name, controller, mode)
}

/// `controller` on example `name`'s `campaign/workload.yaml` and CRD.
fn scenario(name: &str, controller: Vec<String>, mode: &str) -> Scenario {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    let workload = Workload::load(&root.join("campaign/workload.yaml")).unwrap();
    let crd = load_manifests(&root.join("deploy/crd.yaml")).unwrap();
    let dir = std::env::temp_dir().join(format!(
        "ward-blackbox-{name}-{mode}-{}",
        std::process::id()
    ));
    let mut s = Scenario::new(controller, workload).manifests(crd).dir(dir);
    s.quiet = Duration::from_millis(500);
    s
}

/// The LWS binary, its history judged by `campaign/judge.py`.
fn lws(mode: &str) -> Scenario {
    let judge = concat!(env!("CARGO_MANIFEST_DIR"), "/lws/campaign/judge.py");
    example("lws", env!("CARGO_BIN_EXE_lws"), &[], mode).judge(vec!["python3".into(), judge.into()])
}

/// The CNS agent, its state file and the live objects checked by
/// `campaign/invariant.py` after the cluster of `campaign/setup.yaml`.
fn cns(mode: &str) -> Scenario {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/cns/campaign");
    let agent = format!(
        "exec {} --cluster --mode {mode} --state-file \"$WARD_RUN_DIR/cns-state.json\"",
        env!("CARGO_BIN_EXE_cns")
    );
    let mut s = scenario("cns", vec!["sh".into(), "-c".into(), agent], mode)
        .invariant(vec!["python3".into(), format!("{root}/invariant.py")]);
    s.manifests
        .extend(load_manifests(Path::new(&format!("{root}/setup.yaml"))).unwrap());
    s
}

/// The whereabouts reconciler, its end state checked by [`INVARIANT`].
fn whereabouts(mode: &str) -> Scenario {
    let bin = env!("CARGO_BIN_EXE_whereabouts");
    example("whereabouts", bin, &["--interval-secs", "1"], mode).invariant(vec![
        "sh".into(),
        "-c".into(),
        INVARIANT.into(),
    ])
}

/// Whether kubectl (the invariant's client) is here; CI requires it.
fn kubectl() -> bool {
    let found = std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || std::env::var_os("WARD_REQUIRE_KUBECTL").is_none(),
        "kubectl is required (WARD_REQUIRE_KUBECTL) and not found"
    );
    found
}

/// The naive unperturbed run is broken with `why`; the guarded one holds
/// unperturbed and perturbed by every built-in kind.
async fn naive_broken_guarded_holds(naive: Scenario, guarded: Scenario, why: &str) {
    let kinds: Vec<Arc<dyn Perturbation>> = builtin();
    // The guarded binary's unperturbed and perturbed runs at once.
    let (naive_runs, guarded_runs) = tokio::join!(
        process::learn(&naive, 1, 1, |_| {}),
        process::sweep(&guarded, 1, &kinds, &[1], 2, |_| {}, |_, _| {})
    );
    let (_, naive_runs) = naive_runs.unwrap();
    let (run, verdict) = &naive_runs[0];
    assert!(run.requests > 0, "{run:?}");
    let Verdict::Broken(found) = verdict else {
        panic!("the naive controller's unperturbed run was judged {verdict:?}");
    };
    assert!(
        found.contains("the invariant failed unperturbed") && found.contains(why),
        "{found}"
    );
    let guarded_runs = guarded_runs.unwrap();
    let base = &guarded_runs.unperturbed;
    assert_eq!(base[0].1, Verdict::Holds, "{:?}", base[0].0.ending);
    let (run, verdict) = &guarded_runs.runs[0];
    assert_eq!(run.plan.len(), 6, "every built-in kind: {:?}", run.plan);
    assert_eq!(
        *verdict,
        Verdict::Holds,
        "plan {:#?}: {:?}",
        run.plan,
        run.ending
    );
    // Passed: the runs' folders go (a failure keeps them for a look).
    for s in [naive, guarded] {
        let _ = std::fs::remove_dir_all(&s.dir);
    }
}

/// The three examples side by side: each run mostly waits on real time
/// (the workloads' pauses, the quiet periods), so one test holds one of
/// the harness's threads for ~11 s instead of three for ~30.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_naive_binaries_break_their_invariant_and_the_guarded_ones_hold() {
    // The LWS binary records a template under the old StatefulSet's hash.
    let lws = naive_broken_guarded_holds(lws("naive"), lws("guarded"), "record the same template");
    if !kubectl() {
        return lws.await;
    }
    tokio::join!(
        lws,
        // The whereabouts reconciler frees a Pending pod's address.
        naive_broken_guarded_holds(
            whereabouts("naive"),
            whereabouts("guarded"),
            "default/web-2",
        ),
        // The CNS agent keeps addresses of a network container it dropped.
        naive_broken_guarded_holds(cns("naive"), cns("guarded"), "I1: 16 IP configs"),
    );
}
