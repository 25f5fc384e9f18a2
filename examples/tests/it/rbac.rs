//! #45: each example's `deploy/` RBAC is proven, not only written down. Its
//! CRD and `rbac.yaml` are applied to a ward-apiserver authorizing with
//! RBAC; its binary runs against that server as its ServiceAccount (a token
//! from TokenRequest in its kubeconfig), as its Deployment or DaemonSet
//! runs it, and does its job; with one verb taken out of one rule it logs
//! the 403 that names it.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::Api;
use kube::runtime::wait::await_condition;
use serde_json::{Value, json};
use ward_apiserver::AuthorizationMode;
use ward_apiserver::{ApiServer, ServerConfig};

const WAIT: Duration = Duration::from_secs(60);

/// The REST path that creates `obj` (the kinds deploy/ manifests hold).
fn collection(obj: &Value) -> String {
    let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
    match obj["kind"].as_str().unwrap_or_default() {
        "CustomResourceDefinition" => {
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions".into()
        }
        "ServiceAccount" => format!("/api/v1/namespaces/{ns}/serviceaccounts"),
        "ClusterRole" => "/apis/rbac.authorization.k8s.io/v1/clusterroles".into(),
        "ClusterRoleBinding" => "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings".into(),
        "Role" => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles"),
        "RoleBinding" => format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"),
        other => panic!("a deploy/ manifest holds a {other}"),
    }
}

async fn post(client: &kube::Client, path: &str, body: &Value) -> Value {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap())
        .unwrap();
    client
        .request::<Value>(req)
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}"))
}

/// Apply every document of the manifests `yaml` as the admin, `edit`
/// changing each first.
async fn apply(client: &kube::Client, yaml: &str, edit: &dyn Fn(&mut Value)) {
    for mut obj in serde_saphyr::from_multiple::<Value>(yaml).unwrap() {
        if obj.is_null() {
            continue;
        }
        edit(&mut obj);
        post(client, &collection(&obj), &obj).await;
    }
}

/// A binary run with `KUBECONFIG`, its stdout and stderr lines merged.
struct Run {
    child: std::process::Child,
    lines: mpsc::Receiver<String>,
}

impl Run {
    fn start(bin: &str, args: &[&str], kubeconfig: &std::path::Path) -> Run {
        let mut child = Command::new(bin)
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        for pipe in [
            Box::new(out) as Box<dyn std::io::Read + Send>,
            Box::new(err),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        Run { child, lines }
    }

    /// The first line `wanted` accepts, within [`WAIT`], with the lines
    /// before it; every line read on a miss.
    fn wait_for(
        &self,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<(String, Vec<String>), Vec<String>> {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if wanted(&line) => return Ok((line, seen)),
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        Err(seen)
    }

    /// The lines logged so far (and not yet read) that tell of a 403.
    fn refusals(&self) -> Vec<String> {
        self.lines.try_iter().filter(|l| refused(l)).collect()
    }
}

/// Whether a log line tells of a 403: its message (`... is forbidden:
/// User ...`) or its reason (`Forbidden`), however the line quotes them.
/// (Not the bare code: "403" turns up in timestamps.)
fn refused(line: &str) -> bool {
    line.contains("forbidden") || line.contains("Forbidden")
}

/// Whether a log line tells of the 403 for `verb` on `resource` in `group`
/// to `user`, worded as kube-apiserver words it.
fn names(line: &str, verb: &str, resource: &str, group: &str, user: &str) -> bool {
    let plain = line.replace("\\\"", "\"");
    plain.contains(&format!(
        "User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\""
    ))
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn rbac_server() -> ApiServer {
    ApiServer::start(
        ServerConfig::default()
            .listen(([127, 0, 0, 1], 0).into())
            .authorization_mode(AuthorizationMode::Rbac),
    )
    .await
    .unwrap()
}

/// An edit of a deploy/ manifest: the verbs of the rule of a Role or
/// ClusterRole that grants exactly `resource` become `verbs`.
struct Less {
    resource: &'static str,
    verbs: &'static [&'static str],
}

impl Less {
    fn apply(&self, obj: &mut Value) {
        if !matches!(obj["kind"].as_str(), Some("Role" | "ClusterRole")) {
            return;
        }
        for rule in obj["rules"].as_array_mut().unwrap() {
            if rule["resources"] == json!([self.resource]) {
                rule["verbs"] = json!(self.verbs);
            }
        }
    }
}

/// One example's deploy/ folder: its CRD, its RBAC and the ServiceAccount
/// (`kube-system/<account>`) its workload runs as.
struct Example {
    crd: &'static str,
    rbac: &'static str,
    account: &'static str,
}

const LWS: Example = Example {
    crd: include_str!("../../lws/deploy/crd.yaml"),
    rbac: include_str!("../../lws/deploy/rbac.yaml"),
    account: "ward-lws",
};

const WHEREABOUTS: Example = Example {
    crd: include_str!("../../whereabouts/deploy/crd.yaml"),
    rbac: include_str!("../../whereabouts/deploy/rbac.yaml"),
    account: "ward-whereabouts-reconciler",
};

const CNS: Example = Example {
    crd: include_str!("../../cns/deploy/crd.yaml"),
    rbac: include_str!("../../cns/deploy/rbac.yaml"),
    account: "ward-cns",
};

/// A fresh RBAC server with `example`'s manifests applied as shipped (or
/// `less` one rule's verbs), and a kubeconfig in `dir` for its
/// ServiceAccount (a token from TokenRequest).
async fn deploy(
    example: &Example,
    less: Option<&Less>,
    dir: &std::path::Path,
) -> (ApiServer, std::path::PathBuf) {
    let server = rbac_server().await;
    let admin = server.client();
    apply(&admin, example.crd, &|_| {}).await;
    apply(&admin, example.rbac, &|obj| {
        if let Some(less) = less {
            less.apply(obj);
        }
    })
    .await;
    let account = example.account;
    let answer = post(
        &admin,
        &format!("/api/v1/namespaces/kube-system/serviceaccounts/{account}/token"),
        &json!({"spec": {}}),
    )
    .await;
    let token = answer["status"]["token"].as_str().unwrap();
    let path = dir.join(format!("{account}-{}.kubeconfig", less.is_some()));
    let addr = server.addr().unwrap();
    std::fs::write(&path, ward_apiserver::kubeconfig_yaml(addr, token)).unwrap();
    (server, path)
}

/// A runtime of two workers, entered: clients are made (and their buffers
/// spawned) on it.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Whether object `name` of `api` comes to satisfy `holds` within
/// [`WAIT`] (watched, as kube-runtime's `await_condition` watches).
async fn comes_to<K>(api: Api<K>, name: &str, holds: impl Fn(Option<&K>) -> bool) -> bool
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    let condition = move |k: Option<&K>| holds(k);
    let watched = await_condition(api, name, condition);
    matches!(tokio::time::timeout(WAIT, watched).await, Ok(Ok(_)))
}

/// Whether `run` logs the 403 for `verb` on `resource` in `group` to
/// `system:serviceaccount:kube-system:<account>` within [`WAIT`]; a panic
/// listing every line it logged if not.
fn logs_refusal(run: &Run, account: &str, verb: &str, resource: &str, group: &str) {
    let user = format!("system:serviceaccount:kube-system:{account}");
    if let Err(seen) = run.wait_for(|l| names(l, verb, resource, group, &user)) {
        panic!(
            "no 403 for {verb} {resource}.{group} in:\n{}",
            seen.join("\n")
        );
    }
}

fn create_lws(rt: &tokio::runtime::Runtime, server: &ApiServer, name: &str) {
    rt.block_on(post(
        &server.client(),
        "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets",
        &json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2,
                "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "busybox"}]}}}}}),
    ));
}

/// Whether LeaderWorkerSet `name` gets its leader StatefulSet.
fn gets_its_statefulset(rt: &tokio::runtime::Runtime, server: &ApiServer, name: &str) -> bool {
    let sts: Api<StatefulSet> = Api::namespaced(server.client(), "default");
    rt.block_on(comes_to(sts, name, |s| s.is_some()))
}

/// The LWS controller's deploy/rbac.yaml is all it needs, and needs all of
/// it, in each of the three ways it runs: alone, behind leader election on
/// the Lease `kube-system/ward-lws`, and as a member of a sharded ring
/// whose Leases live in kube-system. As `kube-system/ward-lws` it gives a
/// LeaderWorkerSet its StatefulSet each way. Without `create` on
/// StatefulSets (server-side apply creates them: kube-apiserver authorizes
/// such a patch as a create too) it logs the 403 that names the missing
/// permission; a member without `watch` on Leases fails the same way.
#[test]
fn the_lws_controller_runs_on_its_deployed_rbac_and_no_less() {
    let rt = runtime();
    let _in_rt = rt.enter();
    let dir = tempfile::tempdir().unwrap();
    let lws = env!("CARGO_BIN_EXE_lws");
    let lease_ns = ["--lease-namespace", "kube-system"];
    let ways: [&[&str]; 3] = [
        &["run", "--cluster"],
        &[
            "run",
            "--cluster",
            "--leader-elect",
            lease_ns[0],
            lease_ns[1],
        ],
        &[
            "run",
            "--cluster",
            "--shard",
            "ring",
            lease_ns[0],
            lease_ns[1],
        ],
    ];
    for way in ways {
        let (server, kc) = rt.block_on(deploy(&LWS, None, dir.path()));
        create_lws(&rt, &server, "deployed");
        let run = Run::start(lws, way, &kc);
        let found = gets_its_statefulset(&rt, &server, "deployed");
        let refusals = run.refusals();
        drop(run);
        rt.block_on(server.shutdown());
        let way = way.join(" ");
        assert!(found, "`lws {way}`: no StatefulSet within {WAIT:?}");
        assert_eq!(refusals, Vec::<String>::new(), "`lws {way}` was refused");
    }

    let no_create = Less {
        resource: "statefulsets",
        verbs: &["get", "list", "watch", "patch"],
    };
    let no_watch = Less {
        resource: "leases",
        verbs: &["get", "list", "create", "update", "delete"],
    };
    for (less, way, verb, group) in [
        (&no_create, ways[0], "create", "apps"),
        (&no_watch, ways[2], "watch", "coordination.k8s.io"),
    ] {
        let (server, kc) = rt.block_on(deploy(&LWS, Some(less), dir.path()));
        create_lws(&rt, &server, "lacking");
        let run = Run::start(lws, way, &kc);
        logs_refusal(&run, LWS.account, verb, less.resource, group);
        drop(run);
        rt.block_on(server.shutdown());
    }
}

/// The whereabouts reconciler's deploy/rbac.yaml is all it needs, and needs
/// all of it: run as its Deployment runs it, as
/// `kube-system/ward-whereabouts-reconciler`, it frees an allocation whose
/// pod is gone; without `patch` on IPPools it logs the 403 that names it.
#[test]
fn the_whereabouts_reconciler_runs_on_its_deployed_rbac_and_no_less() {
    use ward_examples::whereabouts::model::IPPool;

    let rt = runtime();
    let _in_rt = rt.enter();
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_whereabouts");
    let args = [
        "run",
        "--cluster",
        "--mode",
        "guarded",
        "--namespace",
        "default",
        "--interval-secs",
        "60",
        "--grace-secs",
        "30",
    ];
    let pool = |server: &ApiServer| {
        rt.block_on(post(
            &server.client(),
            "/apis/whereabouts.cni.cncf.io/v1alpha1/namespaces/default/ippools",
            &json!({"apiVersion": "whereabouts.cni.cncf.io/v1alpha1", "kind": "IPPool",
                "metadata": {"name": "10.128.40.0-24", "namespace": "default"},
                "spec": {"range": "10.128.40.0/24",
                    "allocations": {"5": {"id": "c1", "podref": "default/gone"}}}}),
        ));
    };

    let (server, kc) = rt.block_on(deploy(&WHEREABOUTS, None, dir.path()));
    pool(&server);
    let run = Run::start(bin, &args, &kc);
    let pools: Api<IPPool> = Api::namespaced(server.client(), "default");
    let freed = rt.block_on(comes_to(pools, "10.128.40.0-24", |p: Option<&IPPool>| {
        p.is_some_and(|p| p.spec.allocations.is_empty())
    }));
    let refusals = run.refusals();
    drop(run);
    rt.block_on(server.shutdown());
    assert!(
        freed,
        "the dead pod's allocation is still there after {WAIT:?}"
    );
    assert_eq!(refusals, Vec::<String>::new());

    let no_patch = Less {
        resource: "ippools",
        verbs: &["get", "list", "watch"],
    };
    let (server, kc) = rt.block_on(deploy(&WHEREABOUTS, Some(&no_patch), dir.path()));
    pool(&server);
    let run = Run::start(bin, &args, &kc);
    logs_refusal(
        &run,
        WHEREABOUTS.account,
        "patch",
        "ippools",
        "whereabouts.cni.cncf.io",
    );
    drop(run);
    rt.block_on(server.shutdown());
}

/// The CNS agent's deploy/rbac.yaml is all it needs, and needs all of it:
/// run as its DaemonSet runs it, as `kube-system/ward-cns`, the guarded
/// agent ingests its node's NodeNetworkConfig (which a network controller
/// running as the admin writes) and is refused nothing; without `watch` on
/// NodeNetworkConfigs, or `list` on Nodes, it logs the 403 that names it.
#[test]
fn the_cns_agent_runs_on_its_deployed_rbac_and_no_less() {
    use ward_examples::cns::cluster::{Host, Writer, WriterConfig};
    use ward_examples::journal::Journal;

    let rt = runtime();
    let _in_rt = rt.enter();
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_cns");
    let args = ["run", "--cluster", "--mode", "guarded", "--node", "n1"];
    // The network controller, as the admin, and the Node it serves.
    let network = |server: &ApiServer| {
        let config = WriterConfig {
            prefixes: [("n1".to_string(), "10.244.1.0/28".to_string())].into(),
            subnet: "10.244.0.0/16".into(),
            program_after: (Duration::from_secs(1), Duration::from_secs(2)),
            retry: Duration::from_millis(200),
            seed: 1,
        };
        let writer = Writer::new(server.client(), Host::default(), config, Journal::new());
        let task = rt.spawn(writer.run());
        rt.block_on(post(
            &server.client(),
            "/api/v1/nodes",
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}),
        ));
        task
    };

    let (server, kc) = rt.block_on(deploy(&CNS, None, dir.path()));
    let writer = network(&server);
    let run = Run::start(bin, &args, &kc);
    let ingested = run.wait_for(|l| l.contains("IPs loaded"));
    let later = run.refusals();
    drop(run);
    writer.abort();
    rt.block_on(server.shutdown());
    let (_, before) = ingested
        .unwrap_or_else(|seen| panic!("the agent ingested no NC; it logged:\n{}", seen.join("\n")));
    let refusals: Vec<_> = before
        .into_iter()
        .filter(|l| refused(l))
        .chain(later)
        .collect();
    assert_eq!(refusals, Vec::<String>::new());

    // Without watch on its NNCs it never sees one; with only get on Nodes
    // the owner-UID guard's watch cache is refused its list (and every
    // check is a GET), which the agent warns of.
    let no_watch = Less {
        resource: "nodenetworkconfigs",
        verbs: &["get", "list"],
    };
    let get_only = Less {
        resource: "nodes",
        verbs: &["get"],
    };
    for (less, verb, group) in [
        (&no_watch, "watch", "acn.azure.com"),
        (&get_only, "list", ""),
    ] {
        let (server, kc) = rt.block_on(deploy(&CNS, Some(less), dir.path()));
        let writer = network(&server);
        let run = Run::start(bin, &args, &kc);
        logs_refusal(&run, CNS.account, verb, less.resource, group);
        drop(run);
        writer.abort();
        rt.block_on(server.shutdown());
    }
}
