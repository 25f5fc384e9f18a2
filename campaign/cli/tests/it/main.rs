//! `ward-campaign` end to end: a controller written as a shell loop over
//! kubectl (a process in no language Ward knows) holds under every
//! perturbation kind, and bad input of every sort is a clear message and
//! exit status 2, never a hang and never a process left behind; and the
//! real upstream LWS and whereabouts controllers, buggy and fixed
//! (`bugs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// Its tests wait ~20 s on real time: libtest starts tests in the order of
// their names, and this one's sorts before most, so the others run beside it.
mod bugs;

/// A test's folder under the temporary directory, removed when the test
/// passes (a failing test's stays, for a look at its runs).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("ward-campaign-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    let p = dir.join(file);
    std::fs::write(&p, text).unwrap();
    p
}

fn campaign(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ward-campaign"))
        .arg("--dir")
        .arg(dir.join("runs"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const SLEEP: &str = "steps:\n  - sleep: 100ms\n";

#[test]
fn a_missing_binary_is_a_clear_could_not_run() {
    let dir = scratch("missing");
    let w = write(&dir, "w.yaml", SLEEP);
    let o = campaign(
        &dir,
        &[
            "--workload",
            w.to_str().unwrap(),
            "--seeds",
            "1",
            "--",
            "/nonexistent/controller",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("could not run") && err.contains("cannot start \"/nonexistent/controller\""),
        "{}",
        text(&o)
    );
}

#[test]
fn a_controller_that_exits_at_once_is_a_could_not_run_with_its_output() {
    let dir = scratch("exits");
    let w = write(&dir, "w.yaml", SLEEP);
    let o = campaign(
        &dir,
        &[
            "--workload",
            w.to_str().unwrap(),
            "--seeds",
            "1",
            "--",
            "sh",
            "-c",
            "echo boom-at-start >&2; exit 3",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("exited before its first API call"),
        "{}",
        text(&o)
    );
    assert!(
        err.contains("exit status: 3") && err.contains("boom-at-start"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_controller_that_never_calls_is_killed_with_its_children() {
    let dir = scratch("silent");
    let w = write(&dir, "w.yaml", SLEEP);
    // A child of the controller's own: the whole process group goes.
    let marker = format!("sleep {}", 900_000 + std::process::id() % 1000);
    let script = format!("{marker} & {marker}");
    let o = campaign(
        &dir,
        &[
            "--workload",
            w.to_str().unwrap(),
            "--seeds",
            "1",
            "--start-timeout",
            "1s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("made no API call within 1s"),
        "{}",
        text(&o)
    );
    let left = Command::new("pgrep")
        .args(["-f", &format!("^{marker}")])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "left behind: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn malformed_input_says_what_and_where() {
    let dir = scratch("malformed");
    let bad = write(
        &dir,
        "w.yaml",
        "steps:\n  - sleep: 1s\n  - wait: {apiVersion: v1, kind: Pod, name: a, for: ready}\n",
    );
    let ok = write(&dir, "ok.yaml", SLEEP);
    let (bad, ok) = (bad.to_str().unwrap(), ok.to_str().unwrap());
    for (args, says) in [
        (
            vec!["--workload", bad],
            "step 2: for: \"ready\": exists, terminating or deleted",
        ),
        (
            vec!["--workload", ok, "--manifests", "/nonexistent.yaml"],
            "cannot read /nonexistent.yaml",
        ),
        (
            vec!["--workload", ok, "--perturb", "chaos"],
            "unknown perturbation \"chaos\"",
        ),
        (
            vec!["--workload", ok, "--seeds", "5..2"],
            "--seeds \"5..2\"",
        ),
    ] {
        let o = campaign(&dir, &[args.as_slice(), &["--", "true"]].concat());
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(says),
            "{}",
            text(&o)
        );
    }
}

/// Whether kubectl (the shell controller's client) is here; CI requires it.
fn kubectl() -> bool {
    let found = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || std::env::var_os("WARD_REQUIRE_KUBECTL").is_none(),
        "kubectl is required (WARD_REQUIRE_KUBECTL) and not found"
    );
    found
}

/// Copies ConfigMap `src`'s `v` into ConfigMap `dst`, forever.
const SHELL_CONTROLLER: &str = r#"
while :; do
  v=$(kubectl get configmap src -o jsonpath='{.data.v}' 2>/dev/null)
  if [ -n "$v" ]; then
    kubectl create configmap dst --from-literal=v="$v" --dry-run=client -o yaml |
      kubectl apply --server-side --force-conflicts --field-manager=copier -f - >/dev/null 2>&1
  fi
  sleep 0.2
done
"#;

#[test]
fn a_shell_controller_holds_under_every_kind_and_the_json_says_so() {
    if !kubectl() {
        return;
    }
    let dir = scratch("shell");
    let w = write(
        &dir,
        "w.yaml",
        "steps:
  - apply: {apiVersion: v1, kind: ConfigMap, metadata: {name: src}, data: {v: one}}
  - wait: {apiVersion: v1, kind: ConfigMap, name: dst, field: data.v, equals: one, timeout: 30s}
  - patch: {apiVersion: v1, kind: ConfigMap, name: src, patch: {data: {v: two}}}
  - wait: {apiVersion: v1, kind: ConfigMap, name: dst, field: data.v, equals: two, timeout: 30s}
",
    );
    let json = dir.join("out.json");
    let o = campaign(
        &dir,
        &[
            "--workload",
            w.to_str().unwrap(),
            "--seeds",
            "2",
            "--unperturbed",
            "1",
            "--quiet",
            "600ms",
            "--horizon",
            "3s",
            "--json",
            json.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            SHELL_CONTROLLER,
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("2 seeds: 2 hold, 0 differ, 0 broken, 0 could not run"),
        "{}",
        text(&o)
    );
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        assert_eq!(r["verdict"]["verdict"], "holds", "{r:#}");
        assert_eq!(r["run"]["plan"].as_array().unwrap().len(), 6, "{r:#}");
        assert!(r["run"]["requests"].as_u64().unwrap() > 0, "{r:#}");
        let lanes: Vec<&str> = r["run"]["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["lane"].as_str())
            .collect();
        for lane in ["workload", "controller", "store", "perturbation"] {
            assert!(lanes.contains(&lane), "no {lane} entry: {r:#}");
        }
    }
}

/// One unperturbed run and one seed with no perturbation of `workload`
/// (and `extra` arguments), the controller a process that reads once and
/// then idles.
fn one_quiet_run(dir: &Path, workload: &Path, extra: &[&str]) -> Output {
    let head = [
        "--workload",
        workload.to_str().unwrap(),
        "--seeds",
        "1",
        "--unperturbed",
        "1",
        "--quiet",
        "200ms",
        "--perturb",
        "none",
    ];
    let tail = [
        "--",
        "sh",
        "-c",
        "kubectl get configmaps >/dev/null; sleep 600",
    ];
    campaign(dir, &[&head[..], extra, &tail[..]].concat())
}

/// Its server stamps objects with the wall clock the controller reads:
/// each creationTimestamp is the whole second of a time between the
/// request and its answer (a workload step checks 14, a second's worth
/// or more: a fixed number, so that every run ends in the same state).
#[test]
fn the_server_stamps_objects_with_the_wall_clock() {
    if !kubectl() {
        return;
    }
    let dir = scratch("stamps");
    let w = write(
        &dir,
        "w.yaml",
        r#"steps:
  - run:
      - sh
      - -c
      - |
        for i in $(seq 14); do
          b=$(date +%s)
          s=$(kubectl create configmap "stamp-$i" -o 'jsonpath={.metadata.creationTimestamp}')
          a=$(date +%s); t=$(date -d "$s" +%s)
          [ "$t" -ge "$b" ] && [ "$t" -le "$a" ] || { echo "stamped $s, made between $b and $a"; exit 1; }
        done
"#,
    );
    let o = one_quiet_run(&dir, &w, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

/// The report of a campaign whose invariant never holds: a page with a
/// section and a timeline per finding, rendered by headless chromium with
/// no console message and its timelines drawn: the screenshot differs from
/// one of the same page with every timeline's drawing taken out (its frame
/// left, so the layout is the same). Where chromium is not installed the
/// structural checks alone run, unless `WARD_REQUIRE_CHROMIUM=1` (which CI
/// sets, after installing Debian's chromium) makes that a failure.
#[test]
fn the_report_is_one_page_with_a_timeline_per_finding() {
    if !kubectl() {
        return;
    }
    let dir = scratch("report");
    let w = write(
        &dir,
        "w.yaml",
        "steps:\n  - apply: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n  - sleep: 200ms\n",
    );
    let html = dir.join("report.html");
    let o = one_quiet_run(
        &dir,
        &w,
        &[
            "--invariant",
            "echo '<no & good>'; false",
            "--report",
            html.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.ends_with("</html>\n"));
    assert_eq!(
        page.matches("<section").count(),
        2,
        "the unperturbed run and seed 0"
    );
    assert_eq!(page.matches("<svg").count(), 2);
    assert!(
        page.contains("&lt;no &amp; good&gt;"),
        "the invariant's output, escaped"
    );
    assert!(
        !page.contains("<script") && !page.contains("src="),
        "self-contained"
    );
    let Ok(chromium) = which("chromium") else {
        assert!(
            std::env::var("WARD_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "chromium is not on PATH (WARD_REQUIRE_CHROMIUM=1)"
        );
        return;
    };
    let blank = dir.join("blank.html");
    std::fs::write(&blank, without_drawings(&page)).unwrap();
    let drawn = screenshot(&chromium, &dir, &html);
    let frames = screenshot(&chromium, &dir, &blank);
    assert!(drawn.len() > 10_000, "a screenshot of the page");
    assert_ne!(drawn, frames, "the timelines drew nothing");
}

/// `page` with every `<svg>`'s content taken out, its element (and so its
/// size and frame) kept.
fn without_drawings(page: &str) -> String {
    let mut out = String::new();
    let mut rest = page;
    while let Some(at) = rest.find("<svg") {
        let open = at + rest[at..].find('>').unwrap() + 1;
        let close = rest[open..].find("</svg>").unwrap() + open;
        out.push_str(&rest[..open]);
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// A PNG of `html` rendered by headless chromium; fails on any console
/// message.
fn screenshot(chromium: &Path, dir: &Path, html: &Path) -> Vec<u8> {
    let png = html.with_extension("png");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--window-size=1100,1400",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("chromium").display()
        ))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(!log.contains("CONSOLE"), "console messages: {log}");
    std::fs::read(&png).unwrap()
}

fn which(name: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .ok_or(())
}

/// Two parts of a campaign split as the Indexed Job of
/// campaign/deploy/indexed-job.yaml splits it (one by
/// `JOB_COMPLETION_INDEX`, one by `--shard-index`), run as local
/// processes and merged; the Job's manifest itself is the setup of both,
/// so the server validates it too.
#[test]
fn a_split_campaign_merges_into_one_table() {
    if !kubectl() {
        return;
    }
    let dir = scratch("shards");
    let w = write(&dir, "w.yaml", "steps:\n  - sleep: 100ms\n");
    let job = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/indexed-job.yaml");
    let part = |i: u64| {
        let json = dir.join(format!("part-{i}.json"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ward-campaign"));
        cmd.arg("--dir").arg(dir.join(format!("runs-{i}")));
        if i == 0 {
            cmd.env("JOB_COMPLETION_INDEX", "0");
        } else {
            cmd.args(["--shard-index", &i.to_string()]);
        }
        let o = cmd
            .args([
                "--shards",
                "2",
                "--seeds",
                "4",
                "--unperturbed",
                "1",
                "--perturb",
                "none",
                "--quiet",
                "200ms",
            ])
            .args([
                "--manifests",
                job,
                "--workload",
                w.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
            ])
            .args(["--", "sh", "-c", "kubectl get jobs >/dev/null; sleep 600"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "part {i}: {}", text(&o));
        json
    };
    let (p0, p1) = (part(0), part(1));
    let seeds = |p: &Path| -> Vec<u64> {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run"]["seed"].as_u64().unwrap())
            .collect()
    };
    assert_eq!((seeds(&p0), seeds(&p1)), (vec![0, 2], vec![1, 3]));
    let all = dir.join("all.json");
    let o = Command::new(env!("CARGO_BIN_EXE_ward-campaign"))
        .args([
            "merge",
            p0.to_str().unwrap(),
            p1.to_str().unwrap(),
            "--json",
            all.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("4 seeds: 4 hold, 0 differ, 0 broken, 0 could not run"),
        "{}",
        text(&o)
    );
    assert_eq!(seeds(&all), vec![0, 1, 2, 3]);
    // A replay of one seed says whether its verdict came back.
    let o = Command::new(env!("CARGO_BIN_EXE_ward-campaign"))
        .arg("--dir")
        .arg(dir.join("replay"))
        .args([
            "--replay",
            "1",
            "--against",
            all.to_str().unwrap(),
            "--unperturbed",
            "1",
        ])
        .args([
            "--perturb",
            "none",
            "--quiet",
            "200ms",
            "--manifests",
            job,
            "--workload",
            w.to_str().unwrap(),
        ])
        .args(["--", "sh", "-c", "kubectl get jobs >/dev/null; sleep 600"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("verdict: holds"), "{}", text(&o));
    assert!(
        out.contains("replay of seed 1: holds then, holds now: the same verdict"),
        "{}",
        text(&o)
    );
    let o = Command::new(env!("CARGO_BIN_EXE_ward-campaign"))
        .args(["merge", p0.to_str().unwrap(), p0.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("seed 0 is in two parts"),
        "{}",
        text(&o)
    );
}

/// SIGTERM (a Job's pod deleted, ^C) stops a campaign and its controller
/// processes with it.
#[test]
fn a_terminated_campaign_leaves_no_process_behind() {
    let dir = scratch("term");
    let w = write(&dir, "w.yaml", SLEEP);
    let marker = format!("sleep {}", 800_000 + std::process::id() % 1000);
    let script = format!("{marker} & {marker}");
    let child = Command::new(env!("CARGO_BIN_EXE_ward-campaign"))
        .arg("--dir")
        .arg(dir.join("runs"))
        .args(["--workload", w.to_str().unwrap(), "--start-timeout", "60s"])
        .args(["--", "sh", "-c", &script])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Anchored: the campaign's own command line names the marker too, and
    // the test must wait for the controller's children, not for it.
    let running = |m: &str| {
        !Command::new("pgrep")
            .args(["-f", &format!("^{m}")])
            .output()
            .unwrap()
            .stdout
            .is_empty()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !running(&marker) {
        assert!(
            std::time::Instant::now() < deadline,
            "the controller never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the child we started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("terminated: stopped"));
    // Signalled processes take a moment to be gone (a loaded machine saw
    // one still listed right after the campaign exited): wait for that,
    // with a deadline, rather than look once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while running(&marker) {
        assert!(
            std::time::Instant::now() < deadline,
            "left behind: {marker}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
