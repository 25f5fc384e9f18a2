//! The `ward-apiserver` binary: listens on the port it reports, writes a
//! kubeconfig kubectl can use, stamps objects with the wall clock, and
//! stops cleanly on Ctrl-C (SIGINT).

// Instrumented fuzzing builds (docs/apiserver.md, "Fuzzing") link the fuzzer runtime
// through the library; this test does not otherwise use it.
#[cfg(fuzzing)]
use ward_apiserver as _;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary on a free loopback port with `args` and its kubeconfig
/// written to `kc`, once its first line says where it listens (the
/// kubeconfig is written by then): the process and that address.
fn start(kc: &Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ward-apiserver"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .arg("--kubeconfig")
        .arg(kc)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Read through a borrow: the pipe stays open for what it prints later.
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("ward-apiserver listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    (child, addr)
}

#[test]
fn binary_serves_kubectl_and_stops_on_sigint() {
    let dir = std::env::temp_dir().join(format!("ward-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    let (mut child, addr) = start(&kc, &[]);
    assert!(addr.starts_with("127.0.0.1:"));
    assert!(!addr.ends_with(":0"), "the bound port is printed, not 0");
    let kubeconfig = std::fs::read_to_string(&kc).unwrap();
    assert!(
        kubeconfig.contains(&format!("server: http://{addr}")),
        "{kubeconfig}"
    );

    let kubectl = Command::new("kubectl")
        .args(["get", "ns", "-o", "name", "--request-timeout=20s"])
        .env("KUBECONFIG", &kc)
        .env("HOME", &dir)
        .output()
        .expect("kubectl is needed: install it (the Google Cloud SDK kubectl component) and put it on PATH");
    assert!(
        kubectl.status.success(),
        "{}",
        String::from_utf8_lossy(&kubectl.stderr)
    );
    let names = String::from_utf8(kubectl.stdout).unwrap();
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(names.contains(&format!("namespace/{ns}")), "{names}");
    }
    // As on a cluster, every namespace holds the root CA's ConfigMap.
    assert_eq!(root_ca_configmaps(&kc, &dir), 4);

    // It stamps objects with the wall clock, as kube-apiserver does: each
    // creationTimestamp is the whole second of a time between the request
    // and its answer. Over a second of requests, a clock behind the wall
    // clock by a fraction of a second shows in one of them.
    let wall = || jiff::Timestamp::now().as_second();
    let start = Instant::now();
    for i in 0.. {
        let before = wall();
        let created = Command::new("kubectl")
            .args(["create", "configmap", &format!("stamp-{i}")])
            .args(["-o", "jsonpath={.metadata.creationTimestamp}"])
            .env("KUBECONFIG", &kc)
            .env("HOME", &dir)
            .output()
            .unwrap();
        let after = wall();
        let stamp = String::from_utf8(created.stdout).unwrap();
        let at: jiff::Timestamp = stamp.parse().unwrap_or_else(|e| panic!("{stamp:?}: {e}"));
        assert!(
            (before..=after).contains(&at.as_second()),
            "stamped {stamp}, made between {before} and {after} (seconds)"
        );
        if start.elapsed() > Duration::from_millis(1100) {
            break;
        }
    }

    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "ward-apiserver did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// How many `kube-root-ca.crt` ConfigMaps the server at `kc` holds.
fn root_ca_configmaps(kc: &Path, home: &Path) -> usize {
    let out = Command::new("kubectl")
        .args([
            "get",
            "configmaps",
            "-A",
            "-o",
            "name",
            "--request-timeout=20s",
        ])
        .env("KUBECONFIG", kc)
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = String::from_utf8(out.stdout).unwrap();
    names
        .lines()
        .filter(|l| *l == "configmap/kube-root-ca.crt")
        .count()
}

/// `--no-root-ca-configmaps`: namespaces hold only what clients write, as
/// under envtest.
#[test]
fn without_root_ca_configmaps_namespaces_hold_only_what_clients_write() {
    let dir = std::env::temp_dir().join(format!("ward-bin-noca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    let (mut child, _) = start(&kc, &["--no-root-ca-configmaps"]);
    let found = root_ca_configmaps(&kc, &dir);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(found, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn binary_reports_a_bind_failure_with_exit_code_2() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_ward-apiserver"))
        .args(["--listen", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen on"));
}

#[test]
fn feature_gates_turn_sharded_lists_on_and_unknown_gates_are_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_ward-apiserver"))
        .args(["--listen", "127.0.0.1:0", "--feature-gates", "Bogus=true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unrecognized feature gate: Bogus"), "{err}");

    let dir = std::env::temp_dir().join(format!("ward-gates-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("kubeconfig");
    // Go's bool spellings; a gate named twice takes the last value.
    let gates = [
        "--feature-gates",
        "ShardedListAndWatch=false",
        "--feature-gates",
        "ShardedListAndWatch=True",
    ];
    let (mut child, _) = start(&kc, &gates);
    let sel = "shardRange(object.metadata.uid,%270x0000000000000000%27,%270x8000000000000000%27)";
    let raw = Command::new("kubectl")
        .args([
            "get",
            "--raw",
            &format!("/api/v1/namespaces?shardSelector={sel}"),
        ])
        .env("KUBECONFIG", &kc)
        .env("HOME", &dir)
        .output()
        .expect("kubectl on PATH");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        raw.status.success(),
        "{}",
        String::from_utf8_lossy(&raw.stderr)
    );
    let list: serde_json::Value = serde_json::from_slice(&raw.stdout).unwrap();
    assert_eq!(
        list["metadata"]["shardInfo"]["selector"],
        "shardRange(object.metadata.uid,'0x0000000000000000','0x8000000000000000')"
    );
}
