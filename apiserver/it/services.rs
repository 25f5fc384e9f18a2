//! Services get what kube-apiserver's Service registry allocates: a
//! clusterIP from the service CIDR (`10.96.0.0/12` by default), their IP
//! families, node ports from 30000-32767; requests for taken or
//! out-of-range ones are 422 with the real server's messages; updates keep
//! what the client leaves out and may not change a clusterIP; every
//! removal frees what the Service held, and a dry run holds nothing.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Error};
use serde_json::{Value, json};
use ward_apiserver::{ApiServer, ServerConfig};

fn svc(name: &str, spec: Value) -> Service {
    serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name}, "spec": spec}))
    .unwrap()
}

fn port(p: i32) -> Value {
    json!({"port": p, "name": format!("p{p}")})
}

async fn create(api: &Api<Service>, name: &str, spec: Value) -> Result<Service, Error> {
    api.create(&PostParams::default(), &svc(name, spec)).await
}

/// The 422 a create answers, its message.
async fn refused(api: &Api<Service>, name: &str, spec: Value) -> String {
    match create(api, name, spec).await {
        Err(Error::Api(s)) => {
            assert_eq!(
                (s.code, s.reason.as_str()),
                (422, "Invalid"),
                "{}",
                s.message
            );
            s.message
        }
        other => panic!("{name}: expected a 422, got {other:?}"),
    }
}

fn spec_of(s: &Service) -> Value {
    serde_json::to_value(s.spec.as_ref().unwrap()).unwrap()
}

fn cluster_ip(s: &Service) -> String {
    s.spec
        .as_ref()
        .unwrap()
        .cluster_ip
        .clone()
        .unwrap_or_default()
}

fn node_ports(s: &Service) -> Vec<i32> {
    let spec = s.spec.as_ref().unwrap();
    spec.ports
        .iter()
        .flatten()
        .filter_map(|p| p.node_port)
        .collect()
}

fn in_range(ip: &str) -> bool {
    let ip: Ipv4Addr = ip.parse().unwrap();
    let [a, b, ..] = ip.octets();
    a == 10 && (96..112).contains(&b)
}

/// Wait (bounded, on a watch) until `name` is gone from `api`.
async fn gone(api: &Api<Service>, name: &str) {
    let deleted = |s: Option<&Service>| s.is_none();
    tokio::time::timeout(
        Duration::from_secs(10),
        kube::runtime::wait::await_condition(api.clone(), name, deleted),
    )
    .await
    .unwrap_or_else(|_| panic!("{name} still there after 10 s"))
    .unwrap();
}

async fn setup() -> (ApiServer, Client, Api<Service>) {
    let server = ApiServer::start_in_process().await;
    let client = server.client();
    let api = Api::namespaced(client.clone(), "default");
    (server, client, api)
}

#[tokio::test]
async fn services_get_a_cluster_ip_and_ip_families_from_the_range() {
    let (_s, _c, api) = setup().await;
    let a = create(&api, "a", json!({"ports": [port(80)]}))
        .await
        .unwrap();
    let b = create(
        &api,
        "b",
        json!({"type": "ClusterIP", "clusterIP": "", "ports": [port(80)]}),
    )
    .await
    .unwrap();
    for s in [&a, &b] {
        let spec = spec_of(s);
        let ip = cluster_ip(s);
        assert!(in_range(&ip), "{ip}");
        assert_eq!(spec["clusterIPs"], json!([ip]));
        assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
        assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
        assert!(node_ports(s).is_empty());
    }
    assert_ne!(cluster_ip(&a), cluster_ip(&b));
    // As stored, not only as answered.
    assert_eq!(cluster_ip(&api.get("a").await.unwrap()), cluster_ip(&a));
}

#[tokio::test]
async fn headless_and_external_name_services_get_no_address() {
    let (_s, _c, api) = setup().await;
    let h = create(
        &api,
        "h",
        json!({"clusterIP": "None", "selector": {"app": "x"}, "ports": [port(80)]}),
    )
    .await
    .unwrap();
    let spec = spec_of(&h);
    assert_eq!(spec["clusterIP"], "None");
    assert_eq!(spec["clusterIPs"], json!(["None"]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    assert_eq!(spec["ipFamilyPolicy"], "SingleStack");
    // Without a selector, both families are asked for (this cluster has one).
    let bare = create(&api, "bare", json!({"clusterIP": "None"}))
        .await
        .unwrap();
    assert_eq!(spec_of(&bare)["ipFamilyPolicy"], "RequireDualStack");
    assert_eq!(spec_of(&bare)["ipFamilies"], json!(["IPv4"]));
    let e = create(
        &api,
        "e",
        json!({"type": "ExternalName", "externalName": "example.com"}),
    )
    .await
    .unwrap();
    let spec = spec_of(&e);
    for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        assert!(spec.get(k).is_none(), "{k}: {spec}");
    }
}

#[tokio::test]
async fn a_requested_cluster_ip_is_given_once_and_only_from_the_range() {
    let (_s, _c, api) = setup().await;
    let a = create(
        &api,
        "a",
        json!({"clusterIP": "10.96.0.5", "ports": [port(80)]}),
    )
    .await
    .unwrap();
    assert_eq!(spec_of(&a)["clusterIPs"], json!(["10.96.0.5"]));
    assert_eq!(
        refused(
            &api,
            "x",
            json!({"clusterIP": "10.96.0.5", "ports": [port(80)]})
        )
        .await,
        "Service \"x\" is invalid: spec.clusterIPs: Invalid value: [\"10.96.0.5\"]: failed to allocate IP 10.96.0.5: provided IP is already allocated"
    );
    assert_eq!(
        refused(
            &api,
            "y",
            json!({"clusterIP": "192.168.0.5", "ports": [port(80)]})
        )
        .await,
        "Service \"y\" is invalid: spec.clusterIPs: Invalid value: [\"192.168.0.5\"]: failed to allocate IP 192.168.0.5: the provided IP (192.168.0.5) is not in the valid range. The range of valid IPs is 10.96.0.0/12"
    );
    // The default/kubernetes Service holds 10.96.0.1.
    let k = api.get("kubernetes").await.unwrap();
    assert_eq!(cluster_ip(&k), "10.96.0.1");
    assert_eq!(
        refused(
            &api,
            "z",
            json!({"clusterIP": "10.96.0.1", "ports": [port(80)]})
        )
        .await,
        "Service \"z\" is invalid: spec.clusterIPs: Invalid value: [\"10.96.0.1\"]: failed to allocate IP 10.96.0.1: provided IP is already allocated"
    );
    // A create that loses to an existing name is a 409, not a 422.
    let Err(Error::Api(s)) = create(&api, "a", json!({"clusterIP": "10.96.0.5"})).await else {
        panic!("a second create of a succeeded");
    };
    assert_eq!(s.code, 409);
}

#[tokio::test]
async fn node_port_services_get_node_ports_and_requests_are_checked() {
    let (_s, _c, api) = setup().await;
    let np = create(
        &api,
        "np",
        json!({"type": "NodePort", "ports": [port(80), port(81)]}),
    )
    .await
    .unwrap();
    let ports = node_ports(&np);
    assert_eq!(ports.len(), 2);
    assert!(
        ports.iter().all(|p| (30000..=32767).contains(p)),
        "{ports:?}"
    );
    assert_ne!(ports[0], ports[1]);
    assert!(in_range(&cluster_ip(&np)));
    let lb = create(
        &api,
        "lb",
        json!({"type": "LoadBalancer",
        "ports": [{"name": "a", "port": 80, "nodePort": 30080}, port(81)]}),
    )
    .await
    .unwrap();
    assert_eq!(node_ports(&lb)[0], 30080);
    assert!(!ports.contains(&node_ports(&lb)[1]));
    assert_eq!(
        refused(
            &api,
            "x",
            json!({"type": "NodePort",
            "ports": [{"port": 80, "nodePort": 30080}]})
        )
        .await,
        "Service \"x\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    assert_eq!(
        refused(
            &api,
            "y",
            json!({"type": "NodePort",
            "ports": [port(80), {"name": "b", "port": 81, "nodePort": 8080}]})
        )
        .await,
        "Service \"y\" is invalid: spec.ports[1].nodePort: Invalid value: 8080: provided port is not in the valid range. The range of valid ports is 30000-32767"
    );
    // A ClusterIP Service gets none.
    let c = create(&api, "c", json!({"ports": [port(80)]}))
        .await
        .unwrap();
    assert!(node_ports(&c).is_empty());
}

#[tokio::test]
async fn updates_keep_what_is_allocated_and_may_not_change_a_cluster_ip() {
    let (_s, _c, api) = setup().await;
    let a = create(&api, "a", json!({"type": "NodePort", "ports": [port(80)]}))
        .await
        .unwrap();
    let (ip, np) = (cluster_ip(&a), node_ports(&a)[0]);
    // A PUT without clusterIP, clusterIPs or nodePort keeps them.
    let mut put = svc(
        "a",
        json!({"type": "NodePort", "ports": [port(80)], "selector": {"app": "a"}}),
    );
    put.metadata.resource_version = a.metadata.resource_version.clone();
    let b = api
        .replace("a", &PostParams::default(), &put)
        .await
        .unwrap();
    assert_eq!((cluster_ip(&b), node_ports(&b)), (ip.clone(), vec![np]));
    assert_eq!(spec_of(&b)["clusterIPs"], json!([ip]));
    // Changing it is refused.
    let patch = json!({"spec": {"clusterIP": "10.96.0.77"}});
    let Err(Error::Api(s)) = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&patch))
        .await
    else {
        panic!("the clusterIP changed");
    };
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "Service \"a\" is invalid: spec.clusterIPs[0]: Invalid value: [\"10.96.0.77\"]: may not change once set"
    );
    // Away from NodePort releases the node port; back to it allocates one.
    let to_cip = json!({"spec": {"type": "ClusterIP"}});
    let c = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&to_cip))
        .await
        .unwrap();
    assert!(node_ports(&c).is_empty());
    assert_eq!(cluster_ip(&c), ip);
    let other = create(
        &api,
        "other",
        json!({"type": "NodePort",
        "ports": [{"port": 80, "nodePort": np}]}),
    )
    .await
    .unwrap();
    assert_eq!(node_ports(&other), vec![np]);
    let to_np = json!({"spec": {"type": "NodePort"}});
    let d = api
        .patch("a", &PatchParams::default(), &Patch::Merge(&to_np))
        .await
        .unwrap();
    assert_eq!(node_ports(&d).len(), 1);
    assert_ne!(node_ports(&d)[0], np);
    // Server-side apply without clusterIP keeps it too.
    let applied = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"},
        "spec": {"type": "NodePort", "ports": [port(80)]}});
    let e = api
        .patch(
            "a",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap();
    assert_eq!(cluster_ip(&e), ip);
}

#[tokio::test]
async fn every_removal_frees_the_address_and_ports() {
    let (_s, client, api) = setup().await;
    let spec = json!({"type": "NodePort", "clusterIP": "10.96.0.50",
        "ports": [{"port": 80, "nodePort": 30050}]});
    create(&api, "a", spec.clone()).await.unwrap();
    refused(&api, "b", spec.clone()).await;
    api.delete("a", &DeleteParams::default()).await.unwrap();
    gone(&api, "a").await;
    create(&api, "b", spec.clone()).await.unwrap();
    // deletecollection
    api.delete_collection(&DeleteParams::default(), &Default::default())
        .await
        .unwrap();
    gone(&api, "b").await;
    // Namespace deletion.
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "gone"}})).unwrap();
    nss.create(&PostParams::default(), &ns).await.unwrap();
    let in_ns: Api<Service> = Api::namespaced(client.clone(), "gone");
    create(&in_ns, "c", spec.clone()).await.unwrap();
    refused(&api, "d", spec.clone()).await;
    nss.delete("gone", &DeleteParams::default()).await.unwrap();
    gone(&in_ns, "c").await;
    create(&api, "d", spec.clone()).await.unwrap();
    api.delete("d", &DeleteParams::default()).await.unwrap();
    // The garbage collector, once the owner is gone.
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = cms.create(&PostParams::default(), &cm).await.unwrap();
    let mut owned = svc("e", spec.clone());
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "owner".into(),
        uid: owner.metadata.uid.unwrap(),
        ..Default::default()
    }]);
    api.create(&PostParams::default(), &owned).await.unwrap();
    refused(&api, "f", spec.clone()).await;
    cms.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    gone(&api, "e").await;
    create(&api, "f", spec).await.unwrap();
}

#[tokio::test]
async fn a_dry_run_holds_nothing() {
    let (_s, _c, api) = setup().await;
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let first = api
        .create(
            &dry,
            &svc("a", json!({"type": "NodePort", "ports": [port(80)]})),
        )
        .await
        .unwrap();
    assert!(in_range(&cluster_ip(&first)) && node_ports(&first).len() == 1);
    // The real create is given the same: the dry run took nothing.
    let real = create(&api, "a", json!({"type": "NodePort", "ports": [port(80)]}))
        .await
        .unwrap();
    assert_eq!(
        (cluster_ip(&real), node_ports(&real)),
        (cluster_ip(&first), node_ports(&first))
    );
    let spec = json!({"clusterIP": "10.96.0.60", "ports": [port(80)]});
    api.create(&dry, &svc("b", spec.clone())).await.unwrap();
    create(&api, "b", spec).await.unwrap();
    // A refused create holds nothing either.
    refused(
        &api,
        "c",
        json!({"clusterIP": "10.96.0.61",
        "ports": [{"port": 80, "nodePort": 1}], "type": "NodePort"}),
    )
    .await;
    create(
        &api,
        "c",
        json!({"clusterIP": "10.96.0.61", "ports": [port(80)]}),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn concurrent_creates_never_share_an_address_or_a_port() {
    let (_s, _c, api) = setup().await;
    let creates = (0..24).map(|i| {
        let api = api.clone();
        tokio::spawn(async move {
            create(
                &api,
                &format!("s{i}"),
                json!({"type": "NodePort", "ports": [port(80), port(81)]}),
            )
            .await
            .unwrap()
        })
    });
    let mut ips = HashSet::new();
    let mut ports = HashSet::new();
    for c in creates.collect::<Vec<_>>() {
        let s = c.await.unwrap();
        assert!(ips.insert(cluster_ip(&s)));
        for p in node_ports(&s) {
            assert!(ports.insert(p), "{p} given twice");
        }
    }
    assert_eq!((ips.len(), ports.len()), (24, 48));
}

#[tokio::test]
async fn the_range_is_configurable() {
    let server = ApiServer::start(
        ServerConfig::default()
            .service_cluster_ip_range("10.0.0.0/24".parse().unwrap())
            .service_node_port_range(31000..=31001),
    )
    .await
    .unwrap();
    let api: Api<Service> = Api::namespaced(server.client(), "default");
    let a = create(
        &api,
        "a",
        json!({"type": "NodePort", "ports": [port(80), port(81)]}),
    )
    .await
    .unwrap();
    assert!(cluster_ip(&a).starts_with("10.0.0."), "{}", cluster_ip(&a));
    let mut ports = node_ports(&a);
    ports.sort_unstable();
    assert_eq!(ports, vec![31000, 31001]);
    assert_eq!(
        refused(&api, "b", json!({"clusterIP": "10.96.0.9"})).await,
        "Service \"b\" is invalid: spec.clusterIPs: Invalid value: [\"10.96.0.9\"]: failed to allocate IP 10.96.0.9: the provided IP (10.96.0.9) is not in the valid range. The range of valid IPs is 10.0.0.0/24"
    );
    let Err(Error::Api(s)) =
        create(&api, "c", json!({"type": "NodePort", "ports": [port(80)]})).await
    else {
        panic!("a port beyond the range was given");
    };
    assert_eq!(s.code, 500, "{}", s.message);
}
