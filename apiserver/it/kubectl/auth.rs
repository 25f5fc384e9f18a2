//! kubectl's auth commands against a server authorizing with RBAC over
//! HTTPS (its kubeconfig trusting the server's generated CA): who am
//! I, a ServiceAccount token from `create token` used as a kubeconfig's
//! credential, what it may do before and after a Role grants it (`auth
//! can-i`, 403 worded as kube-apiserver's), and tokens that stop working
//! (a bad one, a recreated ServiceAccount's). Client certificates (CN the
//! user, O the group) as kind's kubeconfigs carry them, and the
//! `kube-root-ca.crt` ConfigMap every namespace holds.

use serde_json::Value;
use ward_apiserver::AuthorizationMode;
use ward_apiserver::{ApiServer, ServerConfig};

use super::{Ctl, find_kubectl, install_hint, kubectl, kubectl_required, says, text};

/// A kubeconfig at `dir/name` for the server `admin` points at, whose
/// user carries `token`.
fn with_token(admin: &Ctl, name: &str, token: &str) -> Ctl {
    let text = std::fs::read_to_string(&admin.kubeconfig).unwrap();
    let (head, _) = text.split_once("    token: ").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join(name);
    std::fs::write(&kubeconfig, format!("{head}    token: {token}\n")).unwrap();
    std::fs::create_dir(dir.path().join("home")).unwrap();
    Ctl {
        bin: admin.bin.clone(),
        kubeconfig,
        dir,
    }
}

/// `kubectl auth can-i args...`: its answer (`yes`, `no`), which it
/// prints on stdout and also says with its exit code.
async fn can_i(k: &Ctl, args: &[&str]) -> String {
    let args = [&["auth", "can-i"], args].concat();
    let out = kubectl(&k.bin, &k.kubeconfig, &args).await;
    let answer = text(&out.stdout).trim().to_string();
    assert_eq!(
        out.status.success(),
        answer == "yes",
        "{args:?}: {answer} {}",
        text(&out.stderr)
    );
    answer
}

/// kubectl 1.33, or None (the test skipped) where it is not installed
/// and need not be.
pub(super) fn kubectl_1_33() -> Option<std::path::PathBuf> {
    let name = "kubectl.1.33";
    let bin = find_kubectl(name);
    if bin.is_none() {
        assert!(
            !kubectl_required(),
            "{name} not found: {}",
            install_hint(name)
        );
        println!("skipped: {name} is not installed ({})", install_hint(name));
    }
    bin
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_commands_against_rbac() {
    let Some(bin) = kubectl_1_33() else {
        return;
    };
    let config = ServerConfig::default()
        .listen("127.0.0.1:0".parse().unwrap())
        // kubectl sends tokens and impersonation only over TLS.
        .tls(true)
        .authorization_mode(AuthorizationMode::Rbac);
    let server = ApiServer::start(config).await.unwrap();
    let admin = Ctl::of(bin, &server);

    // The kubeconfig the server writes is its admin.
    let me: Value =
        serde_json::from_str(&admin.ok(&["auth", "whoami", "-o", "json"]).await).unwrap();
    assert_eq!(me["status"]["userInfo"]["username"], "ward-admin", "{me}");
    says(
        &me["status"]["userInfo"]["groups"].to_string(),
        "system:masters",
    );
    assert_eq!(can_i(&admin, &["delete", "nodes"]).await, "yes");

    admin.ok(&["create", "namespace", "team"]).await;
    admin
        .ok(&["create", "serviceaccount", "bot", "-n", "team"])
        .await;
    let token = admin.ok(&["create", "token", "bot", "-n", "team"]).await;
    let bot = with_token(&admin, "bot", token.trim());

    let me: Value = serde_json::from_str(&bot.ok(&["auth", "whoami", "-o", "json"]).await).unwrap();
    assert_eq!(
        me["status"]["userInfo"]["username"], "system:serviceaccount:team:bot",
        "{me}"
    );
    says(
        &me["status"]["userInfo"]["groups"].to_string(),
        "system:serviceaccounts:team",
    );

    // Nothing granted yet: 403, worded as kube-apiserver words it.
    says(
        &bot.fails(&["get", "configmaps", "-n", "team"]).await,
        r#"configmaps is forbidden: User "system:serviceaccount:team:bot" cannot list resource "configmaps" in API group "" in the namespace "team""#,
    );
    assert_eq!(
        can_i(&bot, &["list", "configmaps", "-n", "team"]).await,
        "no"
    );

    // A Role and a RoleBinding grant reading ConfigMaps in team only.
    admin
        .ok(&[
            "create",
            "role",
            "cm-reader",
            "--verb=get,list,watch",
            "--resource=configmaps",
            "-n",
            "team",
        ])
        .await;
    admin
        .ok(&[
            "create",
            "rolebinding",
            "bot-reads",
            "--role=cm-reader",
            "--serviceaccount=team:bot",
            "-n",
            "team",
        ])
        .await;
    assert_eq!(
        can_i(&bot, &["list", "configmaps", "-n", "team"]).await,
        "yes"
    );
    assert_eq!(
        can_i(&bot, &["delete", "configmaps", "-n", "team"]).await,
        "no"
    );
    assert_eq!(
        can_i(&bot, &["list", "configmaps", "-n", "default"]).await,
        "no"
    );
    bot.ok(&["get", "configmaps", "-n", "team"]).await;
    says(
        &bot.fails(&["create", "configmap", "x", "-n", "team"]).await,
        r#"configmaps is forbidden: User "system:serviceaccount:team:bot" cannot create resource "configmaps" in API group "" in the namespace "team""#,
    );
    // The admin may act as the bot (impersonation); the bot may not act
    // as anyone.
    let as_bot = "--as=system:serviceaccount:team:bot";
    assert_eq!(
        can_i(&admin, &["list", "configmaps", "-n", "team", as_bot]).await,
        "yes"
    );
    says(
        &admin
            .fails(&[
                "get",
                "secrets",
                "-n",
                "team",
                "--as=system:serviceaccount:team:bot",
            ])
            .await,
        r#"secrets is forbidden: User "system:serviceaccount:team:bot" cannot list resource "secrets""#,
    );
    says(
        &bot.fails(&["get", "configmaps", "-n", "team", "--as=alice"])
            .await,
        r#"users "alice" is forbidden: User "system:serviceaccount:team:bot" cannot impersonate resource "users" in API group "" at the cluster scope"#,
    );
    let rules = bot.ok(&["auth", "can-i", "--list", "-n", "team"]).await;
    says(&rules, "configmaps");
    says(&rules, "selfsubjectaccessreviews.authorization.k8s.io");

    // A token nobody issued, and the token of a ServiceAccount deleted
    // and made again, authenticate nobody.
    let stranger = with_token(&admin, "stranger", "not-a-token");
    says(
        &stranger.fails(&["get", "configmaps", "-n", "team"]).await,
        "You must be logged in to the server",
    );
    admin
        .ok(&["delete", "serviceaccount", "bot", "-n", "team"])
        .await;
    admin
        .ok(&["create", "serviceaccount", "bot", "-n", "team"])
        .await;
    says(
        &bot.fails(&["get", "configmaps", "-n", "team"]).await,
        "You must be logged in to the server",
    );
    server.shutdown().await;
}

/// A kubeconfig whose user is a client certificate the server's CA signed
/// (as kind's admin kubeconfig is) is that certificate's user, CN and O;
/// RBAC decides on them; a certificate another CA signed gets nowhere.
/// Every namespace, the initial ones and a new one, holds the CA in its
/// `kube-root-ca.crt` ConfigMap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_authenticates_client_certificates() {
    let Some(bin) = kubectl_1_33() else {
        return;
    };
    let config = || {
        ServerConfig::default()
            .listen("127.0.0.1:0".parse().unwrap())
            .tls(true)
            .authorization_mode(AuthorizationMode::Rbac)
    };
    let server = ApiServer::start(config()).await.unwrap();
    let cert = |user: &str, group: Option<&str>| {
        let text = server.client_kubeconfig(user, group).unwrap().unwrap();
        assert!(!text.contains("token:"), "{text}");
        Ctl::with_kubeconfig(bin.clone(), &text)
    };

    let admin = cert("kind-admin", Some("system:masters"));
    let me: Value =
        serde_json::from_str(&admin.ok(&["auth", "whoami", "-o", "json"]).await).unwrap();
    assert_eq!(me["status"]["userInfo"]["username"], "kind-admin", "{me}");
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        serde_json::json!(["system:masters", "system:authenticated"]),
        "{me}"
    );
    admin.ok(&["create", "namespace", "fresh"]).await;
    let ca = server.ca_pem().unwrap();
    for ns in [
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "fresh",
    ] {
        let cm = admin
            .json(&["configmap", "kube-root-ca.crt", "-n", ns])
            .await;
        assert_eq!(cm["data"]["ca.crt"], ca, "{ns}");
    }

    let jane = cert("jane", None);
    says(
        &jane.fails(&["get", "pods", "-n", "fresh"]).await,
        r#"pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "fresh""#,
    );
    admin
        .ok(&[
            "create",
            "rolebinding",
            "jane-views",
            "--clusterrole=view",
            "--user=jane",
            "-n",
            "fresh",
        ])
        .await;
    jane.ok(&["get", "pods", "-n", "fresh"]).await;

    // Another server's certificate (another CA): the handshake fails.
    let other = ApiServer::start(config()).await.unwrap();
    let text = other
        .client_kubeconfig("kind-admin", Some("system:masters"))
        .unwrap()
        .unwrap();
    let (_, user) = text.split_once("users:").unwrap();
    let own = server.kubeconfig().unwrap();
    let (head, _) = own.split_once("users:").unwrap();
    let stranger = Ctl::with_kubeconfig(bin.clone(), &format!("{head}users:{user}"));
    let said = stranger.fails(&["get", "pods"]).await;
    assert!(said.contains("remote error: tls:"), "{said}");
    other.shutdown().await;
    server.shutdown().await;
}

/// Faults aimed at a user (`faults::user_client`) reach a process that
/// runs as that user, whatever connections it opens, and no other client:
/// kubectl with a ServiceAccount's token sees a frozen past and has its
/// write refused, while kubectl as the admin, over the same listener,
/// sees and writes the present.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_aimed_at_a_user_reach_its_kubectl_and_no_other_client() {
    use ward_apiserver::faults::{ClientView, WriteAction, WriteFault, user_client};

    let Some(bin) = kubectl_1_33() else {
        return;
    };
    let config = ServerConfig::default()
        .listen("127.0.0.1:0".parse().unwrap())
        .tls(true);
    let server = ApiServer::start(config).await.unwrap();
    let admin = Ctl::of(bin, &server);
    admin.ok(&["create", "serviceaccount", "ctl"]).await;
    let token = admin.ok(&["create", "token", "ctl"]).await;
    let ctl = with_token(&admin, "ctl", token.trim());
    let target = user_client("system:serviceaccount:default:ctl");

    // Frozen now, for the ServiceAccount alone: what is written later is
    // not there for it, even to a quorum read.
    server.faults().set_view(
        target,
        ClientView {
            frozen_at: Some(server.store().current_rv()),
            stale_quorum_reads: true,
            ..ClientView::default()
        },
    );
    admin.ok(&["create", "configmap", "late"]).await;
    says(
        &ctl.fails(&["get", "configmap", "late"]).await,
        r#"configmaps "late" not found"#,
    );
    admin.ok(&["get", "configmap", "late"]).await;
    server.faults().set_view(target, ClientView::default());
    ctl.ok(&["get", "configmap", "late"]).await;

    // Its next write fails; the admin's does not.
    server
        .faults()
        .add_write_fault(WriteFault::next(1, WriteAction::InternalError).client(target))
        .unwrap();
    admin.ok(&["create", "configmap", "by-admin"]).await;
    let said = ctl.fails(&["create", "configmap", "by-ctl"]).await;
    assert!(
        said.contains("InternalError") || said.contains("internal error"),
        "{said}"
    );
    ctl.ok(&["create", "configmap", "by-ctl"]).await;
    server.shutdown().await;
}
