//! #45: an example's `deploy/` RBAC is proven, not only written down. Its
//! CRD and `rbac.yaml` are applied to a ward-apiserver authorizing with
//! RBAC; its binary runs against that server as its ServiceAccount (a token
//! from TokenRequest in its kubeconfig) and does its job; with one verb
//! taken out of its ClusterRole it fails with the 403 that names it.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use ward_apiserver::auth::AuthorizationMode;
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

    /// The first line `wanted` accepts, within [`WAIT`]; every line read
    /// on a miss.
    fn wait_for(&self, wanted: impl Fn(&str) -> bool) -> Result<String, Vec<String>> {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) if wanted(&line) => return Ok(line),
                Ok(line) => seen.push(line),
                Err(_) => break,
            }
        }
        Err(seen)
    }
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

/// The LWS example's CRD and RBAC applied as shipped (with
/// `statefulset_verbs` instead of its ClusterRole's, if given), a
/// LeaderWorkerSet `name` created, and a kubeconfig in `dir` for the
/// controller's ServiceAccount (a token from TokenRequest).
async fn deploy_lws(
    server: &ApiServer,
    statefulset_verbs: Option<&[&str]>,
    name: &str,
    dir: &std::path::Path,
) -> std::path::PathBuf {
    let admin = server.client();
    apply(&admin, include_str!("../../lws/deploy/crd.yaml"), &|_| {}).await;
    apply(&admin, include_str!("../../lws/deploy/rbac.yaml"), &|obj| {
        if let (Some(verbs), "ClusterRole") =
            (statefulset_verbs, obj["kind"].as_str().unwrap_or(""))
        {
            for rule in obj["rules"].as_array_mut().unwrap() {
                if rule["resources"] == json!(["statefulsets"]) {
                    rule["verbs"] = json!(verbs);
                }
            }
        }
    })
    .await;
    post(
        &admin,
        "/apis/leaderworkerset.x-k8s.io/v1/namespaces/default/leaderworkersets",
        &json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2,
                "workerTemplate": {"spec": {"containers": [{"name": "w", "image": "busybox"}]}}}}}),
    )
    .await;
    let answer = post(
        &admin,
        "/api/v1/namespaces/kube-system/serviceaccounts/ward-lws/token",
        &json!({"spec": {}}),
    )
    .await;
    let token = answer["status"]["token"].as_str().unwrap();
    let path = dir.join(format!("{name}.kubeconfig"));
    let addr = server.addr().unwrap();
    std::fs::write(&path, ward_apiserver::kubeconfig_yaml(addr, token)).unwrap();
    path
}

/// The LWS controller's deploy/rbac.yaml is all it needs, and needs all of
/// it: as `kube-system/ward-lws` it gives a LeaderWorkerSet its
/// StatefulSet; without `create` on StatefulSets (server-side apply
/// creates them: kube-apiserver authorizes such a patch as a create too)
/// it logs the 403 that names the missing permission.
#[test]
fn the_lws_controller_runs_on_its_deployed_rbac_and_no_less() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // Clients are made (and their buffers spawned) on this runtime.
    let _in_rt = rt.enter();
    let dir = tempfile::tempdir().unwrap();
    let lws = env!("CARGO_BIN_EXE_lws");

    let server = rt.block_on(rbac_server());
    let kc = rt.block_on(deploy_lws(&server, None, "deployed", dir.path()));
    let run = Run::start(lws, &["run", "--cluster"], &kc);
    let sts: Api<StatefulSet> = Api::namespaced(server.client(), "default");
    let found = rt.block_on(async {
        let deadline = tokio::time::Instant::now() + WAIT;
        while tokio::time::Instant::now() < deadline {
            let items = sts.list(&ListParams::default()).await.unwrap().items;
            if items
                .iter()
                .any(|s| s.metadata.name.as_deref() == Some("deployed"))
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    });
    drop(run);
    rt.block_on(server.shutdown());
    assert!(
        found,
        "no StatefulSet for the LeaderWorkerSet within {WAIT:?}"
    );

    let server = rt.block_on(rbac_server());
    let less: &[&str] = &["get", "list", "watch", "patch"];
    let kc = rt.block_on(deploy_lws(&server, Some(less), "lacking", dir.path()));
    let run = Run::start(lws, &["run", "--cluster"], &kc);
    let said = run.wait_for(|l| {
        l.contains("cannot create resource") && l.contains("statefulsets") && l.contains("apps")
    });
    drop(run);
    rt.block_on(server.shutdown());
    let line = said
        .unwrap_or_else(|seen| panic!("no 403 naming the missing verb in:\n{}", seen.join("\n")));
    assert!(
        line.contains("system:serviceaccount:kube-system:ward-lws"),
        "{line}"
    );
}
