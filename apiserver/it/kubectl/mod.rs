//! kubectl, unmodified, against ward-apiserver over HTTP: one test per
//! kubectl version, each with its own server, running the same scenario —
//! a CustomResourceDefinition and a custom resource, a ConfigMap and a
//! StatefulSet through create, apply, apply --server-side, get -o json,
//! get -w, patch (json, merge, strategic) and delete.
//!
//! The binaries are `kubectl` on PATH (on the Cloud SDK image a dispatcher
//! that runs the kubectl.1.N matching the server's minor version) and the
//! versioned `kubectl.1.N` (1.27 to 1.33) of the Google Cloud SDK. A test
//! whose binary is not installed is skipped with a printed notice, so a
//! clone on any machine gets a green run — unless `WARD_REQUIRE_KUBECTL=1`
//! (which `.ci/run` sets): then a missing binary fails its test, with what
//! to install. Every version runs with default flags: kubectl 1.27 and 1.28
//! validate through /openapi/v2 (fetched as gnostic protobuf), 1.29+
//! through /openapi/v3.

mod admission;
mod auth;
mod checks;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use ward_apiserver::{ApiServer, ServerConfig};

/// Where the Google Cloud SDK installs its versioned kubectl binaries.
const CLOUD_SDK_BIN: &str = "/usr/lib/google-cloud-sdk/bin";
/// Upper bound on one kubectl run, and on waiting for one `get -w` line.
const WAIT: Duration = Duration::from_secs(60);
const REQUEST_TIMEOUT: &str = "--request-timeout=30s";

/// One test per binary: each runs in parallel with its own server.
macro_rules! kubectl_tests {
    ($($test:ident: $bin:literal;)*) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            scenario($bin).await;
        }
    )*};
}

kubectl_tests! {
    kubectl_on_path: "kubectl";
    kubectl_1_27: "kubectl.1.27";
    kubectl_1_28: "kubectl.1.28";
    kubectl_1_29: "kubectl.1.29";
    kubectl_1_30: "kubectl.1.30";
    kubectl_1_31: "kubectl.1.31";
    kubectl_1_32: "kubectl.1.32";
    kubectl_1_33: "kubectl.1.33";
}

/// The binary `name`: `kubectl` from PATH only, `kubectl.1.N` from PATH or
/// the Cloud SDK; None when it is not installed.
fn find_kubectl(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    if name != "kubectl" {
        dirs.push(CLOUD_SDK_BIN.into());
    }
    dirs.iter().map(|d| d.join(name)).find(|p| p.is_file())
}

/// What to install for `name`.
fn install_hint(name: &str) -> String {
    if name == "kubectl" {
        "install kubectl on PATH".into()
    } else {
        format!(
            "install the Google Cloud SDK kubectl component (`gcloud components install \
             kubectl`), which ships kubectl.1.27 ... 1.33 in {CLOUD_SDK_BIN}"
        )
    }
}

/// Whether a missing kubectl fails its test (`WARD_REQUIRE_KUBECTL=1`).
fn kubectl_required() -> bool {
    std::env::var("WARD_REQUIRE_KUBECTL").is_ok_and(|v| v == "1")
}

/// `bin args...` with `KUBECONFIG` set and `HOME` at the `home` directory
/// beside the kubeconfig (so kubectl's discovery cache is private to a test).
fn command(bin: &Path, kubeconfig: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin);
    c.args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", kubeconfig.with_file_name("home"))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

/// Run kubectl (see [`command`]) with a generous request timeout, and an
/// overall bound.
async fn kubectl(bin: &Path, kubeconfig: &Path, args: &[&str]) -> Output {
    let run = command(bin, kubeconfig, args).arg(REQUEST_TIMEOUT).output();
    match tokio::time::timeout(WAIT, run).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display())),
        Err(_) => panic!("{} {args:?} did not finish within {WAIT:?}", bin.display()),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Assert that kubectl's output `out` contains `what`.
fn says(out: &str, what: &str) {
    assert!(out.contains(what), "expected {what:?} in:\n{out}");
}

/// One kubectl binary and its own kubeconfig, HOME and manifests in a
/// temporary directory.
struct Ctl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
}

impl Ctl {
    /// `bin` with the kubeconfig `server` writes (its admin), in a fresh
    /// temporary directory.
    fn of(bin: PathBuf, server: &ApiServer) -> Ctl {
        Ctl::with_kubeconfig(bin, &server.kubeconfig().unwrap())
    }

    /// `bin` with the kubeconfig `text`, in a fresh temporary directory.
    fn with_kubeconfig(bin: PathBuf, text: &str) -> Ctl {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, text).unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        Ctl {
            bin,
            kubeconfig,
            dir,
        }
    }

    /// Run; it must succeed. Returns stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = kubectl(&self.bin, &self.kubeconfig, args).await;
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "kubectl {args:?}: {stdout}{stderr}");
        stdout
    }

    /// Run; it must fail. Returns stderr.
    async fn fails(&self, args: &[&str]) -> String {
        let out = kubectl(&self.bin, &self.kubeconfig, args).await;
        assert!(!out.status.success(), "kubectl {args:?} succeeded");
        text(&out.stderr)
    }

    /// `verb` (create, apply...) `-f file` holding `yaml`; it must
    /// succeed. Returns stdout.
    async fn with_file(&self, verb: &[&str], file: &str, yaml: &str) -> String {
        let path = self.dir.path().join(file);
        std::fs::write(&path, yaml).unwrap();
        let path = path.to_str().unwrap();
        let args = [verb, &["-f", path]].concat();
        self.ok(&args).await
    }

    /// `get what -o json`, parsed.
    async fn json(&self, what: &[&str]) -> Value {
        let args = [&["get"], what, &["-o", "json"]].concat();
        let out = self.ok(&args).await;
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {args:?}: {e}:\n{out}"))
    }

    /// `patch target --type=ty -p body`; it must succeed.
    async fn patch(&self, target: &str, ty: &str, body: &str) {
        let ty = format!("--type={ty}");
        says(
            &self.ok(&["patch", target, &ty, "-p", body]).await,
            "patched",
        );
    }

    /// `get what` must fail with NotFound.
    async fn gone(&self, what: &str) {
        says(&self.fails(&["get", what]).await, "NotFound");
    }

    /// Start `get args -w`, to read its output line by line.
    fn watch(&self, args: &[&str]) -> Watch {
        let stderr = self.dir.path().join(format!("watch-{}.err", args[0]));
        let mut child = command(&self.bin, &self.kubeconfig, &[&["get"], args].concat())
            .args(["-w", "--request-timeout=5m"])
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let seen = Vec::new();
        Watch {
            child,
            lines,
            seen,
            stderr,
        }
    }
}

/// A running `kubectl get -w`.
struct Watch {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    seen: Vec<String>,
    stderr: PathBuf,
}

impl Watch {
    /// Read lines until one starts with the whitespace-separated `fields`;
    /// fail if the watch ends or prints no such line within `WAIT`.
    async fn expect(&mut self, fields: &[&str]) {
        let (lines, seen) = (&mut self.lines, &mut self.seen);
        let found = tokio::time::timeout(WAIT, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let words: Vec<&str> = line.split_whitespace().collect();
                let hit = words.starts_with(fields);
                seen.push(line);
                if hit {
                    return true;
                }
            }
            false
        })
        .await;
        if found != Ok(true) {
            let _ = self.child.start_kill();
            panic!(
                "get -w never printed {fields:?} ({}); it printed {:#?}; stderr: {}",
                if found.is_err() { "timed out" } else { "ended" },
                self.seen,
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            );
        }
    }

    async fn stop(mut self) {
        self.child.kill().await.unwrap();
    }
}

/// The whole scenario for one kubectl: `name` found as in [`find_kubectl`].
async fn scenario(name: &str) {
    let Some(bin) = find_kubectl(name) else {
        assert!(
            !kubectl_required(),
            "{name} not found (WARD_REQUIRE_KUBECTL=1): {}",
            install_hint(name)
        );
        println!(
            "skipped: {name} is not installed ({}; set WARD_REQUIRE_KUBECTL=1 to make this a failure)",
            install_hint(name)
        );
        return;
    };
    let config = ServerConfig::default().listen("127.0.0.1:0".parse().unwrap());
    let server = ApiServer::start(config).await.unwrap();
    let k = Ctl::of(bin, &server);

    let v: Value = serde_json::from_str(&k.ok(&["version", "-o", "json"]).await).unwrap();
    let client = v["clientVersion"]["gitVersion"].as_str().unwrap_or("?");
    println!("{name}: client {client}");
    if let Some(minor) = name.strip_prefix("kubectl.1.") {
        says(client, &format!("v1.{minor}."));
    }
    says(
        v["serverVersion"]["gitVersion"].as_str().unwrap_or(""),
        "ward",
    );

    custom_resources(&k).await;
    config_maps(&k).await;
    generators(&k).await;
    stateful_sets(&k).await;
    deletion(&k, &server).await;
    shipped_manifests(&k).await;
    checks::field_validation(&k).await;
    checks::explain(&k).await;
    server.shutdown().await;
}

/// kubectl's imperative generators with default flags: from 1.32 their
/// typed clients send protobuf bodies (and prefer protobuf answers), before
/// JSON; either way the server stores the same objects — a pointer's zero
/// (`--replicas=0`) kept, Go's omitted empties (`nodeName: ""`) absent.
async fn generators(k: &Ctl) {
    says(
        &k.ok(&["create", "namespace", "gen"]).await,
        "namespace/gen created",
    );
    let n = ["-n", "gen"];
    let create = |args: &'static [&'static str]| async move {
        says(
            &k.ok(&[&["create"], args, &n[..]].concat()).await,
            "created",
        );
    };
    create(&["configmap", "cm", "--from-literal=a=b", "--from-literal=c="]).await;
    create(&["secret", "generic", "s", "--from-literal=k=v"]).await;
    create(&["service", "clusterip", "svc", "--tcp=80:8080"]).await;
    create(&["deployment", "d", "--image=nginx", "--replicas=0"]).await;
    create(&["serviceaccount", "sa"]).await;
    let cm = k.json(&["configmap", "cm", "-n", "gen"]).await;
    assert_eq!(cm["data"], json!({"a": "b", "c": ""}), "{cm}");
    let s = k.json(&["secret", "s", "-n", "gen"]).await;
    assert_eq!(s["data"], json!({"k": "dg=="}), "{s}");
    let svc = k.json(&["service", "svc", "-n", "gen"]).await;
    let port = &svc["spec"]["ports"][0];
    assert_eq!(
        (&port["port"], &port["targetPort"]),
        (&json!(80), &json!(8080)),
        "{svc}"
    );
    assert_eq!(port["protocol"], "TCP", "{svc}");
    assert!(port.get("nodePort").is_none(), "{svc}");
    // Allocated from the default service CIDR, 10.96.0.0/12.
    let ip = svc["spec"]["clusterIP"].as_str().unwrap_or_default();
    assert!(ip.starts_with("10.96."), "{svc}");
    assert_eq!(svc["spec"]["clusterIPs"], json!([ip]), "{svc}");
    let d = k.json(&["deployment", "d", "-n", "gen"]).await;
    assert_eq!(d["spec"]["replicas"], 0, "{d}");
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["image"], "nginx", "{d}");
    assert!(
        pod.get("nodeName").is_none() && pod.get("hostNetwork").is_none(),
        "{d}"
    );
    // A JWT: header, claims, signature.
    let token = k.ok(&["create", "token", "sa", "-n", "gen"]).await;
    assert!(
        token.starts_with("eyJ") && token.trim().split('.').count() == 3,
        "{token}"
    );
    says(&k.ok(&["delete", "namespace", "gen"]).await, "deleted");
}

/// The example controllers' deploy/ manifests, as a user applies them:
/// CRDs, ServiceAccounts and RBAC (Roles, ClusterRoles and bindings), a
/// DaemonSet and two Deployments.
async fn shipped_manifests(k: &Ctl) {
    let manifests = [
        (
            "lws-crd.yaml",
            include_str!("../../../examples/lws/deploy/crd.yaml"),
        ),
        (
            "lws-rbac.yaml",
            include_str!("../../../examples/lws/deploy/rbac.yaml"),
        ),
        (
            "lws-deployment.yaml",
            include_str!("../../../examples/lws/deploy/deployment.yaml"),
        ),
        (
            "cns-crd.yaml",
            include_str!("../../../examples/cns/deploy/crd.yaml"),
        ),
        (
            "cns-rbac.yaml",
            include_str!("../../../examples/cns/deploy/rbac.yaml"),
        ),
        (
            "cns-daemonset.yaml",
            include_str!("../../../examples/cns/deploy/daemonset.yaml"),
        ),
        (
            "wa-crd.yaml",
            include_str!("../../../examples/whereabouts/deploy/crd.yaml"),
        ),
        (
            "wa-rbac.yaml",
            include_str!("../../../examples/whereabouts/deploy/rbac.yaml"),
        ),
        (
            "wa-deployment.yaml",
            include_str!("../../../examples/whereabouts/deploy/deployment.yaml"),
        ),
    ];
    for (file, yaml) in manifests {
        k.with_file(&["apply"], file, yaml).await;
    }
    let lws = k
        .json(&["deployment", "ward-lws", "-n", "kube-system"])
        .await;
    assert_eq!(lws["spec"]["replicas"], 2);
    let role = k
        .json(&["role", "ward-lws-leader-election", "-n", "kube-system"])
        .await;
    assert_eq!(role["rules"][0]["resources"][0], "leases");
    says(
        &k.ok(&["get", "clusterrolebindings", "-o", "name"]).await,
        "clusterrolebinding.rbac.authorization.k8s.io/ward-lws",
    );
}

pub(super) const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.ward.dev}
spec:
  group: example.ward.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, properties: {spec: {type: object,
      properties: {size: {type: integer}, color: {type: string}}}}}}
";

fn widget(size: u32) -> String {
    format!(
        "apiVersion: example.ward.dev/v1\nkind: Widget\nmetadata:\n  name: w1\n  \
         labels: {{tier: gold}}\nspec:\n  size: {size}\n  color: red\n"
    )
}

/// The managedFields entry of `manager` with `operation`.
fn managed<'a>(obj: &'a Value, manager: &str, operation: &str) -> &'a Value {
    let entries = obj["metadata"]["managedFields"].as_array();
    entries
        .into_iter()
        .flatten()
        .find(|e| e["manager"] == manager && e["operation"] == operation)
        .unwrap_or_else(|| panic!("no {manager}/{operation} in managedFields: {obj}"))
}

/// Assert that the managedFields `entry` owns each of `fields` (paths in
/// its fieldsV1, like `/f:spec/f:size`).
fn owns(entry: &Value, fields: &[&str]) {
    for f in fields {
        assert!(entry["fieldsV1"].pointer(f).is_some(), "{f} not in {entry}");
    }
}

async fn custom_resources(k: &Ctl) {
    says(&k.with_file(&["create"], "crd.yaml", CRD).await, "created");
    let crd = "crd/widgets.example.ward.dev";
    let wait = ["wait", "--for=condition=established", "--timeout=30s", crd];
    says(&k.ok(&wait).await, "condition met");

    let out = k.with_file(&["create"], "w1.yaml", &widget(1)).await;
    says(&out, "widget.example.ward.dev/w1 created");
    let w = k.json(&["widget", "w1"]).await;
    assert_eq!(w["apiVersion"], "example.ward.dev/v1");
    assert_eq!(w["kind"], "Widget");
    assert_eq!(w["spec"], json!({"size": 1, "color": "red"}));
    assert_eq!(w["metadata"]["labels"], json!({"tier": "gold"}));
    assert_eq!(w["metadata"]["generation"], 1);
    assert!(w["metadata"]["uid"].as_str().is_some_and(|u| !u.is_empty()));

    let events = "jsonpath={.type} {.object.metadata.name} {.object.spec.size} \
                  {.object.spec.color}{\"\\n\"}";
    let mut watch = k.watch(&["widgets", "--output-watch-events", "-o", events]);
    watch.expect(&["ADDED", "w1", "1", "red"]).await;

    // Client-side apply: a three-way merge patch computed by kubectl.
    let out = k.with_file(&["apply"], "w1.yaml", &widget(2)).await;
    says(&out, "widget.example.ward.dev/w1 configured");
    watch.expect(&["MODIFIED", "w1", "2", "red"]).await;
    let w = k.json(&["wd", "w1"]).await;
    assert_eq!(w["spec"]["size"], 2);
    assert_eq!(w["metadata"]["generation"], 2);
    let last = &w["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"];
    says(last.as_str().unwrap_or_default(), "\"size\":2");

    // Server-side apply: spec.size belongs to the client-side apply manager.
    let file = k.dir.path().join("w1-ssa.yaml");
    std::fs::write(&file, widget(3)).unwrap();
    let mut ssa = vec!["apply", "--server-side", "-f", file.to_str().unwrap()];
    let err = k.fails(&ssa).await;
    says(&err, "conflict with \"kubectl-client-side-apply\"");
    says(&err, ".spec.size");
    ssa.push("--force-conflicts");
    says(&k.ok(&ssa).await, "serverside-applied");
    watch.expect(&["MODIFIED", "w1", "3", "red"]).await;
    let w = k.json(&["widget", "w1", "--show-managed-fields"]).await;
    assert_eq!(w["spec"]["size"], 3);
    assert_eq!(w["metadata"]["generation"], 3);
    let apply = managed(&w, "kubectl", "Apply");
    assert_eq!(apply["fieldsType"], "FieldsV1");
    owns(apply, &["/f:spec/f:size", "/f:spec/f:color"]);
    owns(apply, &["/f:metadata/f:labels/f:tier"]);
    // Forced: the client-side manager no longer owns spec.size (its entry
    // may be gone altogether once kubectl moved the last-applied annotation).
    let entries = w["metadata"]["managedFields"].as_array().unwrap();
    for csa in entries
        .iter()
        .filter(|e| e["manager"] == "kubectl-client-side-apply")
    {
        assert!(
            csa.pointer("/fieldsV1/f:spec/f:size").is_none(),
            "forced: {csa}"
        );
    }
    let plain = k.json(&["widget", "w1"]).await;
    assert!(plain["metadata"]["managedFields"].is_null(), "{plain}");

    let merge = r#"{"spec":{"color":"blue"}}"#;
    k.patch("widget/w1", "merge", merge).await;
    watch.expect(&["MODIFIED", "w1", "3", "blue"]).await;
    let patch = r#"[{"op":"replace","path":"/spec/size","value":4},
                    {"op":"add","path":"/metadata/labels/patched","value":"json"}]"#;
    k.patch("wd/w1", "json", patch).await;
    watch.expect(&["MODIFIED", "w1", "4", "blue"]).await;
    let w = k.json(&["widget", "w1"]).await;
    assert_eq!(w["spec"], json!({"size": 4, "color": "blue"}));
    let labels = json!({"tier": "gold", "patched": "json"});
    assert_eq!(w["metadata"]["labels"], labels);
    assert_eq!(w["metadata"]["generation"], 5);

    // Custom resources have no strategic merge: 415, object unchanged.
    let smp = r#"{"spec":{"size":9}}"#;
    let strategic = ["patch", "widget/w1", "--type=strategic", "-v=6", "-p", smp];
    says(&k.fails(&strategic).await, "415 Unsupported Media Type");
    let after = k.json(&["widget", "w1"]).await;
    assert_eq!(after["spec"]["size"], 4);
    let rv = |o: &Value| o["metadata"]["resourceVersion"].clone();
    assert_eq!(rv(&after), rv(&w));

    says(&k.ok(&["delete", "widget", "w1"]).await, "\"w1\" deleted");
    watch.expect(&["DELETED", "w1", "4", "blue"]).await;
    watch.stop().await;
    k.gone("widget/w1").await;

    k.ok(&["delete", crd]).await;
    k.gone(crd).await;
    says(&k.fails(&["get", "widgets"]).await, "widgets");
}

fn config_map(data: &str, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels: {{{labels}}}\n\
         data: {{{data}}}\n"
    )
}

async fn config_maps(k: &Ctl) {
    let yaml = config_map("k: \"1\"", "app: demo");
    let out = k.with_file(&["create"], "cm.yaml", &yaml).await;
    says(&out, "configmap/demo created");
    let cm = k.json(&["cm", "demo"]).await;
    assert_eq!(cm["data"], json!({"k": "1"}));
    assert_eq!(cm["metadata"]["labels"], json!({"app": "demo"}));
    assert_eq!(cm["metadata"]["namespace"], "default");

    // A label selector of over 100 KB: its request target is past the 64 KiB
    // that hyper takes, and the server accepts it as kube-apiserver does
    // (request heads up to 1 MiB).
    let values: Vec<String> = (0..14_000).map(|i| format!("v{i:06}")).collect();
    let selector = format!("app in (demo,{})", values.join(","));
    assert!(selector.len() > 100_000);
    let out = k
        .ok(&["get", "configmaps", "-l", &selector, "-o", "name"])
        .await;
    assert_eq!(out.trim(), "configmap/demo");

    // Default (server-side Table) printing, with a column per event.
    let mut watch = k.watch(&["configmaps", "--output-watch-events"]);
    watch.expect(&["EVENT", "NAME", "DATA", "AGE"]).await;
    watch.expect(&["ADDED", "demo", "1"]).await;

    let yaml = config_map("k: \"2\", e: \"5\"", "app: demo");
    let out = k.with_file(&["apply"], "cm.yaml", &yaml).await;
    says(&out, "configmap/demo configured");
    watch.expect(&["MODIFIED", "demo", "2"]).await;
    let cm = k.json(&["configmap", "demo"]).await;
    assert_eq!(cm["data"], json!({"k": "2", "e": "5"}));

    let yaml = config_map("k: \"3\", e: \"5\"", "app: demo, ssa: \"yes\"");
    let verb = ["apply", "--server-side", "--force-conflicts"];
    let out = k.with_file(&verb, "cm-ssa.yaml", &yaml).await;
    says(&out, "serverside-applied");
    let cm = k.json(&["cm", "demo", "--show-managed-fields"]).await;
    assert_eq!(cm["data"]["k"], "3");
    assert_eq!(cm["metadata"]["labels"]["ssa"], "yes");
    let apply = managed(&cm, "kubectl", "Apply");
    owns(apply, &["/f:data/f:k", "/f:data/f:e"]);
    owns(apply, &["/f:metadata/f:labels/f:ssa"]);

    let patch = r#"[{"op":"remove","path":"/data/e"},{"op":"test","path":"/data/k","value":"3"}]"#;
    k.patch("cm/demo", "json", patch).await;
    watch.expect(&["MODIFIED", "demo", "1"]).await;
    let merge = r#"{"data":{"m":"x"},"metadata":{"labels":{"ssa":null}}}"#;
    k.patch("cm/demo", "merge", merge).await;
    watch.expect(&["MODIFIED", "demo", "2"]).await;
    // Built-ins take strategic merge patches.
    let smp = r#"{"data":{"s":"y"}}"#;
    k.patch("cm/demo", "strategic", smp).await;
    watch.expect(&["MODIFIED", "demo", "3"]).await;
    let cm = k.json(&["cm", "demo"]).await;
    assert_eq!(cm["data"], json!({"k": "3", "m": "x", "s": "y"}));
    assert_eq!(cm["metadata"]["labels"], json!({"app": "demo"}));

    // A failing json-patch test changes nothing.
    let bad = r#"[{"op":"test","path":"/data/k","value":"0"},{"op":"remove","path":"/data/k"}]"#;
    let failing = ["patch", "cm/demo", "--type=json", "-p", bad];
    says(
        &k.fails(&failing).await,
        "The request is invalid: the server rejected our request",
    );
    assert_eq!(k.json(&["cm", "demo"]).await["data"]["k"], "3");

    // --dry-run=server: answered as the write would be, never stored.
    let dry = ["apply", "--dry-run=server"];
    let out = k
        .with_file(&dry, "cm-dry.yaml", &config_map("k: \"9\"", "app: demo"))
        .await;
    says(&out, "configmap/demo configured (server dry run)");
    let other = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: dry\ndata: {a: b}\n";
    let out = k
        .with_file(&["create", "--dry-run=server"], "cm-new.yaml", other)
        .await;
    says(&out, "configmap/dry created (server dry run)");
    let out = k
        .ok(&["delete", "configmap", "demo", "--dry-run=server"])
        .await;
    says(&out, "(server dry run)");
    k.gone("configmap/dry").await;
    assert_eq!(k.json(&["cm", "demo"]).await["data"]["k"], "3");

    let out = k.ok(&["delete", "configmap", "demo"]).await;
    says(&out, "configmap \"demo\" deleted");
    watch.expect(&["DELETED", "demo", "3"]).await;
    watch.stop().await;
    k.gone("configmap/demo").await;
}

fn stateful_set(replicas: u32) -> String {
    format!(
        "apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: web
spec:
  replicas: {replicas}
  serviceName: web
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - {{name: nginx, image: \"nginx:1.25\"}}
      - {{name: sidecar, image: \"busybox:1.36\"}}
"
    )
}

/// `name=image` of each container of a StatefulSet.
fn images(sts: &Value) -> Vec<String> {
    let cs = sts["spec"]["template"]["spec"]["containers"].as_array();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let image = |c: &Value| format!("{}={}", s(&c["name"]), s(&c["image"]));
    cs.into_iter().flatten().map(image).collect()
}

async fn stateful_sets(k: &Ctl) {
    let out = k.with_file(&["apply"], "sts.yaml", &stateful_set(1)).await;
    says(&out, "statefulset.apps/web created");
    let sts = k.json(&["statefulset", "web"]).await;
    assert_eq!(sts["metadata"]["generation"], 1);
    assert_eq!(sts["spec"]["replicas"], 1);

    // Strategic merge: containers merge by name, the sidecar stays.
    let smp =
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}"#;
    says(
        &k.ok(&["patch", "sts/web", "-p", smp]).await,
        "statefulset.apps/web patched",
    );
    let sts = k.json(&["sts", "web"]).await;
    assert_eq!(images(&sts), ["nginx=nginx:1.27", "sidecar=busybox:1.36"]);
    assert_eq!(sts["metadata"]["generation"], 2);

    // Client-side apply's three-way merge puts back the manifest's image.
    let out = k.with_file(&["apply"], "sts.yaml", &stateful_set(2)).await;
    says(&out, "statefulset.apps/web configured");
    let sts = k.json(&["sts", "web"]).await;
    assert_eq!(sts["spec"]["replicas"], 2);
    assert_eq!(images(&sts), ["nginx=nginx:1.25", "sidecar=busybox:1.36"]);
    assert_eq!(sts["metadata"]["generation"], 3);

    let table = k.ok(&["get", "sts", "web"]).await;
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["NAME", "READY", "AGE"], "{table}");
    assert_eq!(rows[1][..2], ["web", "0/2"], "{table}");

    // The /scale subresource: kubectl scale, with its precondition.
    let out = k.ok(&["scale", "sts/web", "--replicas=4"]).await;
    says(&out, "statefulset.apps/web scaled");
    let sts = k.json(&["sts", "web"]).await;
    assert_eq!(sts["spec"]["replicas"], 4);
    assert_eq!(sts["metadata"]["generation"], 4);
    let stale = k
        .fails(&["scale", "sts/web", "--replicas=1", "--current-replicas=2"])
        .await;
    says(&stale, "Expected replicas to be 2, was 4");

    k.ok(&["delete", "sts", "web"]).await;
    k.gone("statefulset/web").await;
}

/// A ConfigMap manifest, optionally owned by `owner` (name, uid) and held by a finalizer.
fn owned_cm(name: &str, owner: Option<(&str, &str)>, finalizer: Option<&str>) -> String {
    let mut meta = json!({"name": name});
    if let Some((o, uid)) = owner {
        meta["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": o, "uid": uid,
                                          "controller": true, "blockOwnerDeletion": true}]);
    }
    if let Some(f) = finalizer {
        meta["finalizers"] = json!([f]);
    }
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}).to_string()
}

/// Run kubectl `args` (with `-v=6`, which logs each request), and once it
/// has started watching ConfigMap `name` — so it really waits — remove the
/// finalizers of `name` through an in-process client (another task than
/// kubectl). Returns kubectl's stdout; it must succeed.
async fn release_while_waiting(k: &Ctl, server: &ApiServer, args: &[&str], name: &str) -> String {
    use kube::api::{Api, Patch, PatchParams};
    let mut child = command(&k.bin, &k.kubeconfig, args)
        .args(["-v=6", REQUEST_TIMEOUT])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(child.stderr.take().unwrap()).lines();
    let watching = format!("fieldSelector=metadata.name%3D{name}");
    let mut seen = Vec::new();
    let started = tokio::time::timeout(WAIT, async {
        while let Ok(Some(line)) = log.next_line().await {
            let hit = line.contains("watch=true") && line.contains(&watching);
            seen.push(line);
            if hit {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        started,
        Ok(true),
        "kubectl {args:?} never watched {name}: {seen:#?}"
    );
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::default_namespaced(server.client());
    let release = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    api.patch(name, &PatchParams::default(), &release)
        .await
        .unwrap();
    let drain = tokio::spawn(async move { while let Ok(Some(_)) = log.next_line().await {} });
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("kubectl finishes")
        .unwrap();
    drain.abort();
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}",
        text(&out.stdout)
    );
    text(&out.stdout)
}

/// `delete --cascade=orphan|foreground`, `delete --wait` while another task
/// removes the finalizer, and `wait --for=delete`.
async fn deletion(k: &Ctl, server: &ApiServer) {
    // Orphan: the owner goes, the dependent stays without its reference.
    k.with_file(&["create"], "owner.json", &owned_cm("owner", None, None))
        .await;
    let uid = k.json(&["cm", "owner"]).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    k.with_file(
        &["create"],
        "dep.json",
        &owned_cm("dep", Some(("owner", &uid)), None),
    )
    .await;
    says(
        &k.ok(&["delete", "cm", "owner", "--cascade=orphan"]).await,
        "deleted",
    );
    k.gone("cm/owner").await;
    let dep = k.json(&["cm", "dep"]).await;
    assert!(
        dep["metadata"]["ownerReferences"].is_null(),
        "orphaned: {dep}"
    );

    // Foreground: kubectl waits for the owner, which waits for its dependent.
    k.with_file(&["create"], "owner2.json", &owned_cm("owner2", None, None))
        .await;
    let uid = k.json(&["cm", "owner2"]).await["metadata"]["uid"]
        .as_str()
        .unwrap()
        .to_string();
    k.with_file(
        &["create"],
        "dep2.json",
        &owned_cm("dep2", Some(("owner2", &uid)), None),
    )
    .await;
    says(
        &k.ok(&["delete", "cm", "owner2", "--cascade=foreground"])
            .await,
        "deleted",
    );
    k.gone("cm/owner2").await;
    k.gone("cm/dep2").await;

    // delete --wait returns once another task removes the finalizer.
    k.with_file(
        &["create"],
        "held.json",
        &owned_cm("held", None, Some("ward.dev/hold")),
    )
    .await;
    let delete = ["delete", "cm", "held", "--wait=true"];
    says(
        &release_while_waiting(k, server, &delete, "held").await,
        "deleted",
    );
    k.gone("cm/held").await;

    // wait --for=delete on an object held by a finalizer.
    k.with_file(
        &["create"],
        "held2.json",
        &owned_cm("held2", None, Some("ward.dev/hold")),
    )
    .await;
    k.ok(&["delete", "cm", "held2", "--wait=false"]).await;
    assert!(k.json(&["cm", "held2"]).await["metadata"]["deletionTimestamp"].is_string());
    let wait = ["wait", "--for=delete", "cm/held2", "--timeout=60s"];
    says(
        &release_while_waiting(k, server, &wait, "held2").await,
        "condition met",
    );
    k.gone("cm/held2").await;
}
