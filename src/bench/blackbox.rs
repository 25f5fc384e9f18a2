//! Part 6, black-box campaign speed: seeds per minute of `ward-campaign`'s
//! process campaigns (`ward_campaign::process`) against a controller that
//! runs as its own process, every perturbation kind on, and where a
//! seed's time goes (start, workload, settle, teardown).
//!
//! The controller is `WARD_BENCH_CONTROLLER` (a command line; with
//! `WARD_BENCH_WORKLOAD` and `WARD_BENCH_MANIFESTS`, comma-separated), e.g.
//! kube-rs's `configmapgen_controller` built from its repository; by
//! default a shell loop over kubectl that copies a ConfigMap (skipped, and
//! said so, without kubectl). A run of a real process takes real time:
//! most of a seed is the workload's sleeps and the plan's windows, so many
//! seeds run at once on few cores.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use ward_campaign::process::workload::{Workload, load_manifests};
use ward_campaign::process::{self, Scenario};
use ward_campaign::{Perturbation, perturbations::builtin};

/// Sizes of the black-box benchmark.
#[derive(Debug, Clone)]
pub struct BlackboxConfig {
    /// Perturbed seeds (0: the part is off).
    pub seeds: u64,
    /// Seeds at a time.
    pub jobs: usize,
    /// Unperturbed runs first.
    pub unperturbed: usize,
    /// Every built-in kind (else none: the smoke run).
    pub perturb: bool,
    /// Where the default workload and the runs' files go.
    pub dir: PathBuf,
}

/// Part 6's results.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BlackboxResults {
    /// The controller's command line; empty when skipped.
    pub controller: String,
    /// Why the part did not run, if it did not.
    pub skipped: Option<String>,
    /// Perturbed seeds run.
    pub seeds: u64,
    /// Seeds at a time.
    pub jobs: usize,
    /// The kinds on.
    pub kinds: Vec<String>,
    /// Verdicts: holds, differs, broken, could not run.
    pub verdicts: [u64; 4],
    /// Wall seconds, unperturbed runs included.
    pub secs: f64,
    /// Perturbed seeds per minute (unperturbed runs' time included).
    pub seeds_per_min: f64,
    /// Mean milliseconds per seed: start, workload, settle, teardown.
    pub phase_ms: [f64; 4],
}

/// The default controller: copies ConfigMap `src`'s `v` into `dst`.
const COPIER: &str = r#"while :; do
  v=$(kubectl get configmap src -o jsonpath='{.data.v}' 2>/dev/null)
  if [ -n "$v" ]; then
    kubectl create configmap dst --from-literal=v="$v" --dry-run=client -o yaml |
      kubectl apply --server-side --force-conflicts --field-manager=copier -f - >/dev/null 2>&1
  fi
  sleep 0.2
done"#;

const COPIER_WORKLOAD: &str = "steps:
  - apply: {apiVersion: v1, kind: ConfigMap, metadata: {name: src}, data: {v: one}}
  - wait: {apiVersion: v1, kind: ConfigMap, name: dst, field: data.v, equals: one, timeout: 30s}
  - patch: {apiVersion: v1, kind: ConfigMap, name: src, patch: {data: {v: two}}}
  - wait: {apiVersion: v1, kind: ConfigMap, name: dst, field: data.v, equals: two, timeout: 30s}
  - sleep: 2s
";

/// The scenario: the user's controller, or the copier.
fn scenario(dir: &Path) -> Result<Scenario, String> {
    let (controller, workload, manifests) = match std::env::var("WARD_BENCH_CONTROLLER") {
        Ok(cmd) => {
            let workload = std::env::var("WARD_BENCH_WORKLOAD")
                .map_err(|_| "WARD_BENCH_CONTROLLER needs WARD_BENCH_WORKLOAD".to_string())?;
            let mut manifests = Vec::new();
            for m in std::env::var("WARD_BENCH_MANIFESTS")
                .unwrap_or_default()
                .split(',')
            {
                if !m.is_empty() {
                    manifests.extend(load_manifests(Path::new(m)).map_err(|e| e.to_string())?);
                }
            }
            let argv = cmd.split_whitespace().map(str::to_string).collect();
            (argv, PathBuf::from(workload), manifests)
        }
        Err(_) => {
            let kubectl = std::process::Command::new("kubectl")
                .args(["version", "--client"])
                .output()
                .is_ok_and(|o| o.status.success());
            if !kubectl {
                return Err("no kubectl for the default controller".into());
            }
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            let path = dir.join("copier.yaml");
            std::fs::write(&path, COPIER_WORKLOAD).map_err(|e| e.to_string())?;
            let argv = vec!["sh".into(), "-c".into(), COPIER.into()];
            (argv, path, Vec::new())
        }
    };
    let workload = Workload::load(&workload).map_err(|e| e.to_string())?;
    Ok(Scenario::new(controller, workload)
        .manifests(manifests)
        .dir(dir.join("runs")))
}

/// Run part 6.
pub fn run(config: &BlackboxConfig, log: &(dyn Fn(&str) + Sync)) -> BlackboxResults {
    let mut out = BlackboxResults {
        seeds: config.seeds,
        jobs: config.jobs,
        ..BlackboxResults::default()
    };
    if config.seeds == 0 {
        out.skipped = Some("off".into());
        return out;
    }
    let mut scenario = match scenario(&config.dir) {
        Ok(s) => s,
        Err(why) => {
            log(&format!("black-box campaign skipped: {why}"));
            out.skipped = Some(why);
            return out;
        }
    };
    if !config.perturb {
        scenario.quiet = Duration::from_millis(500);
    }
    out.controller = scenario.controller.join(" ");
    let kinds: Vec<Arc<dyn Perturbation>> = if config.perturb {
        builtin()
    } else {
        Vec::new()
    };
    out.kinds = kinds.iter().map(|k| k.kind().to_string()).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let started = Instant::now();
    let seeds: Vec<u64> = (0..config.seeds).collect();
    let runs = runtime.block_on(async {
        let (oracle, _) = process::learn(&scenario, config.unperturbed, config.jobs, |_| {})
            .await
            .map_err(|e| e.to_string())?;
        Ok::<_, String>(
            process::campaign(&scenario, &oracle, &kinds, &seeds, config.jobs, |r, v| {
                log(&format!("  seed {}: {}", r.seed, v.word()));
            })
            .await,
        )
    });
    out.secs = started.elapsed().as_secs_f64();
    let runs = match runs {
        Ok(r) => r,
        Err(why) => {
            log(&format!("black-box campaign could not run: {why}"));
            out.skipped = Some(why);
            return out;
        }
    };
    for (run, verdict) in &runs {
        let i = ["holds", "differs", "broken", "could-not-run"]
            .iter()
            .position(|w| *w == verdict.word())
            .unwrap_or(3);
        out.verdicts[i] += 1;
        let p = run.phases;
        for (sum, d) in out
            .phase_ms
            .iter_mut()
            .zip([p.start, p.workload, p.settle, p.teardown])
        {
            *sum += d.as_secs_f64() * 1000.0 / runs.len() as f64;
        }
    }
    out.seeds_per_min = runs.len() as f64 * 60.0 / out.secs.max(0.001);
    out
}
