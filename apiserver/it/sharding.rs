//! KEP-5866 server-side sharded list and watch: with the feature on, a
//! `shardSelector` splits a collection into disjoint slices by the FNV-1a
//! hash of each object's uid (or namespace), on every list page, every
//! watch event and deletecollection, echoed in `shardInfo`; off, the option
//! is ignored as kube-apiserver without the gate ignores it.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use ward_apiserver::internals::shard;
use ward_apiserver::{ApiServer, ServerConfig};

use crate::common::{CMS, JSON, assert_status, created, send, without_root_ca};

const LOWER: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const UPPER: &str = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";

fn q(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

async fn sharded_server(on: bool, objects: usize) -> ApiServer {
    let s = ApiServer::start(ServerConfig::default().sharded_list_and_watch(on))
        .await
        .unwrap();
    without_root_ca(&s, "default").await;
    for i in 0..objects {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i:03}")}});
        created(&s, CMS, &cm).await;
    }
    s
}

async fn get(s: &ApiServer, uri: &str) -> Value {
    let r = send(s, "GET", uri, "", "").await;
    assert_eq!(r.code, 200, "{uri}: {:?}", r.body);
    serde_json::from_slice(&r.body).unwrap()
}

fn uids(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["uid"].as_str().unwrap().to_string())
        .collect()
}

fn in_lower(uid: &str) -> bool {
    shard::hash(uid) < 0x8000_0000_0000_0000
}

#[tokio::test]
async fn two_ranges_split_a_list_into_disjoint_halves_and_echo_the_selector() {
    let s = sharded_server(true, 120).await;
    let all = uids(&get(&s, CMS).await);
    assert_eq!(all.len(), 120);
    let lower = get(&s, &format!("{CMS}?shardSelector={}", q(LOWER))).await;
    let upper = get(&s, &format!("{CMS}?shardSelector={}", q(UPPER))).await;
    assert_eq!(lower["metadata"]["shardInfo"], json!({"selector": LOWER}));
    assert_eq!(upper["metadata"]["shardInfo"], json!({"selector": UPPER}));
    let (l, u) = (uids(&lower), uids(&upper));
    assert!(l.iter().all(|uid| in_lower(uid)) && u.iter().all(|uid| !in_lower(uid)));
    assert!(l.is_disjoint(&u));
    assert_eq!(l.union(&u).cloned().collect::<BTreeSet<_>>(), all);
    assert!(l.len() > 30 && u.len() > 30, "{} / {}", l.len(), u.len());
    // Both ranges at once are the whole collection; no selector, no echo.
    let both = get(
        &s,
        &format!("{CMS}?shardSelector={}", q(&format!("{LOWER} || {UPPER}"))),
    )
    .await;
    assert_eq!(uids(&both), all);
    assert!(get(&s, CMS).await["metadata"].get("shardInfo").is_none());

    // Pages: every page echoes, and their union is the unpaged answer.
    let (mut paged, mut cont) = (BTreeSet::new(), String::new());
    loop {
        let page = get(
            &s,
            &format!("{CMS}?limit=7&shardSelector={}&continue={cont}", q(LOWER)),
        )
        .await;
        assert_eq!(page["metadata"]["shardInfo"]["selector"], LOWER);
        paged.extend(uids(&page));
        match page["metadata"]["continue"].as_str() {
            Some(c) => cont = c.to_string(),
            None => break,
        }
    }
    assert_eq!(paged, l);
}

#[tokio::test]
async fn namespaces_hash_whole() {
    let s = sharded_server(true, 0).await;
    for ns in ["team-a", "team-b"] {
        created(&s, "/api/v1/namespaces", &json!({"metadata": {"name": ns}})).await;
        without_root_ca(&s, ns).await;
        for i in 0..3 {
            let cm = json!({"metadata": {"name": format!("cm-{i}")}});
            created(&s, &format!("/api/v1/namespaces/{ns}/configmaps"), &cm).await;
        }
    }
    let h = shard::hash("team-a");
    let sel = format!(
        "shardRange(object.metadata.namespace, '0x{h:016x}', '0x{:016x}')",
        h + 1
    );
    let list = get(&s, &format!("/api/v1/configmaps?shardSelector={}", q(&sel))).await;
    let nss: BTreeSet<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(nss, BTreeSet::from(["team-a"]));
    assert_eq!(list["items"].as_array().unwrap().len(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_watch_sees_only_its_shard_from_initial_events_and_from_a_resource_version() {
    let s = sharded_server(true, 40).await;
    let rv = get(&s, CMS).await["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    for i in 40..80 {
        created(
            &s,
            CMS,
            &json!({"metadata": {"name": format!("cm-{i:03}")}}),
        )
        .await;
    }
    let all = uids(&get(&s, CMS).await);
    let events = |body: &[u8]| -> Vec<Value> {
        body.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    };
    // Resumed from a resourceVersion: the later ADDED events of the shard.
    let uri = format!(
        "{CMS}?watch=1&timeoutSeconds=1&resourceVersion={rv}&shardSelector={}",
        q(LOWER)
    );
    let r = send(&s, "GET", &uri, "", "").await;
    let resumed = events(&r.body);
    assert!(!resumed.is_empty());
    for e in &resumed {
        assert_eq!(e["type"], "ADDED");
        let uid = e["object"]["metadata"]["uid"].as_str().unwrap();
        assert!(in_lower(uid), "{e}");
    }
    // sendInitialEvents: the shard's objects, then the bookmark that ends
    // them (bookmarks pass, they name no object).
    let uri = format!(
        "{CMS}?watch=1&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&shardSelector={}",
        q(UPPER)
    );
    let r = send(&s, "GET", &uri, "", "").await;
    let initial = events(&r.body);
    let added: BTreeSet<String> = initial
        .iter()
        .filter(|e| e["type"] == "ADDED")
        .map(|e| e["object"]["metadata"]["uid"].as_str().unwrap().to_string())
        .collect();
    let want: BTreeSet<String> = all.iter().filter(|u| !in_lower(u)).cloned().collect();
    assert_eq!(added, want);
    assert!(
        initial.iter().any(|e| e["type"] == "BOOKMARK"),
        "{initial:?}"
    );
}

#[tokio::test]
async fn deletecollection_deletes_only_the_shard() {
    let s = sharded_server(true, 30).await;
    let all = uids(&get(&s, CMS).await);
    let r = send(
        &s,
        "DELETE",
        &format!("{CMS}?shardSelector={}", q(LOWER)),
        JSON,
        "",
    )
    .await;
    assert_eq!(r.code, 200, "{:?}", r.body);
    let left = uids(&get(&s, CMS).await);
    let want: BTreeSet<String> = all.iter().filter(|u| !in_lower(u)).cloned().collect();
    assert_eq!(left, want);
}

#[tokio::test]
async fn a_malformed_selector_is_a_400_saying_what_is_wrong() {
    let s = sharded_server(true, 1).await;
    for (sel, want) in [
        ("   ", "empty shard selector is not allowed"),
        (
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')",
            "did you mean \"0x0000000000000000\"?",
        ),
        (
            "shardRange(object.metadata.name, '0x0000000000000000', '0x8000000000000000')",
            "unsupported shard field",
        ),
    ] {
        for watch in ["", "&watch=1"] {
            let r = send(
                &s,
                "GET",
                &format!("{CMS}?shardSelector={}{watch}", q(sel)),
                "",
                "",
            )
            .await;
            let status = assert_status(&r, Some(400), sel);
            let msg = status["message"].as_str().unwrap();
            assert!(
                msg.starts_with("invalid shardSelector: ") && msg.contains(want),
                "{msg}"
            );
        }
    }
}

#[tokio::test]
async fn without_the_feature_the_option_is_ignored() {
    let s = sharded_server(false, 20).await;
    let all = get(&s, CMS).await;
    for sel in [LOWER, "not a selector at all"] {
        let list = get(&s, &format!("{CMS}?shardSelector={}", q(sel))).await;
        assert_eq!(uids(&list), uids(&all), "everything");
        assert!(
            list["metadata"].get("shardInfo").is_none(),
            "no echo: {list}"
        );
    }
}
