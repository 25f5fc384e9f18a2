//! Lists at a resourceVersion: a paginated list pages through one snapshot
//! (its first page's resourceVersion) while writes go on; `Exact` reads an
//! older state, a version the server has not reached is 504, one older
//! than the history kept is 410, as kube-apiserver answers.

use crate::common::without_root_ca;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams, VersionMatch};
use ward_apiserver::{ApiServer, ServerConfig};

/// A seeded xorshift: the churn is the same on every run.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn cm(name: &str, value: &str) -> ConfigMap {
    let mut c = ConfigMap::default();
    c.metadata.name = Some(name.into());
    c.data = Some([("v".to_string(), value.to_string())].into());
    c
}

fn value(c: &ConfigMap) -> (String, String) {
    let name = c.metadata.name.clone().unwrap();
    (name, c.data.as_ref().unwrap()["v"].clone())
}

async fn server(history: usize) -> (ApiServer, Api<ConfigMap>) {
    let server = ApiServer::start(ServerConfig::default().watch_history(history))
        .await
        .unwrap();
    without_root_ca(&server, "default").await;
    let api = Api::namespaced(server.client(), "default");
    (server, api)
}

/// 10,000 objects paged by 500 while every page is followed by 60 seeded
/// writes (updates, deletes and creates, before and after the cursor): the
/// union of the pages is exactly the state at the first page's
/// resourceVersion, and every page says that resourceVersion.
#[tokio::test]
async fn pages_under_churn_are_one_snapshot() {
    const N: usize = 10_000;
    let (_server, api) = server(20_000).await;
    let pp = PostParams::default();
    let mut state: BTreeMap<String, String> = BTreeMap::new();
    for i in 0..N {
        let name = format!("cm-{i:05}");
        api.create(&pp, &cm(&name, "0")).await.unwrap();
        state.insert(name, "0".into());
    }
    let snapshot = state.clone();
    let mut rng = Rng(0x5eed);
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut lp = ListParams::default().limit(500);
    let mut first_rv = None;
    let mut pages = 0;
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        let rv = page.metadata.resource_version.clone().unwrap();
        assert_eq!(
            first_rv.get_or_insert_with(|| rv.clone()),
            &rv,
            "page {pages}"
        );
        for c in &page.items {
            let (name, v) = value(c);
            assert!(seen.insert(name.clone(), v).is_none(), "{name} twice");
        }
        // Churn between pages: a third each of updates, deletes, creates.
        for w in 0..60 {
            let names: Vec<&String> = state.keys().collect();
            let name = names[rng.below(names.len())].clone();
            match w % 3 {
                0 => {
                    let v = format!("{pages}-{w}");
                    let mut fresh = api.get(&name).await.unwrap();
                    fresh.data = Some([("v".to_string(), v.clone())].into());
                    api.replace(&name, &pp, &fresh).await.unwrap();
                    state.insert(name, v);
                }
                1 => {
                    api.delete(&name, &DeleteParams::default()).await.unwrap();
                    state.remove(&name);
                }
                _ => {
                    let new = format!("{name}-new-{pages}-{w}");
                    api.create(&pp, &cm(&new, "new")).await.unwrap();
                    state.insert(new, "new".into());
                }
            }
        }
        match page.metadata.continue_ {
            Some(c) if !c.is_empty() => lp = lp.continue_token(&c),
            _ => break,
        }
    }
    assert_eq!(pages, N / 500);
    assert_eq!(
        seen, snapshot,
        "the pages are the state at the first page's version"
    );
    // And the latest state is what the churn made of it.
    let now = api.list(&ListParams::default()).await.unwrap();
    let now: BTreeMap<String, String> = now.items.iter().map(value).collect();
    assert_eq!(now, state);
    assert_ne!(now, snapshot);
}

#[tokio::test]
async fn exact_reads_an_older_state_and_the_future_is_504() {
    let (server, api) = server(100).await;
    let pp = PostParams::default();
    let created = api.create(&pp, &cm("a", "1")).await.unwrap();
    let rv1 = created.metadata.resource_version.clone().unwrap();
    let mut changed = created.clone();
    changed.data = Some([("v".to_string(), "2".to_string())].into());
    api.replace("a", &pp, &changed).await.unwrap();
    api.create(&pp, &cm("b", "1")).await.unwrap();

    let exact = ListParams::default().at(&rv1).matching(VersionMatch::Exact);
    let then = api.list(&exact).await.unwrap();
    assert_eq!(
        then.metadata.resource_version.as_deref(),
        Some(rv1.as_str())
    );
    let then: Vec<_> = then.items.iter().map(value).collect();
    assert_eq!(then, [("a".to_string(), "1".to_string())]);
    // Not older than an old version: the latest.
    let newer = ListParams::default()
        .at(&rv1)
        .matching(VersionMatch::NotOlderThan);
    assert_eq!(api.list(&newer).await.unwrap().items.len(), 2);
    // A version not reached yet: 504 Timeout, retry after a second.
    let future = (server.store().current_rv() + 10).to_string();
    for m in [VersionMatch::Exact, VersionMatch::NotOlderThan] {
        let lp = ListParams::default().at(&future).matching(m);
        let kube::Error::Api(s) = api.list(&lp).await.unwrap_err() else {
            panic!("not an API error");
        };
        assert_eq!(
            (s.code, s.reason.as_str()),
            (504, "Timeout"),
            "{}",
            s.message
        );
        assert!(
            s.message.starts_with("Too large resource version"),
            "{}",
            s.message
        );
    }
}

#[tokio::test]
async fn a_version_or_token_older_than_the_history_is_410() {
    let (_server, api) = server(20).await;
    let pp = PostParams::default();
    for i in 0..10 {
        api.create(&pp, &cm(&format!("cm-{i}"), "0")).await.unwrap();
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    let old_rv = first.metadata.resource_version.clone().unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    // More writes than the history keeps.
    for i in 0..30 {
        api.create(&pp, &cm(&format!("more-{i}"), "0"))
            .await
            .unwrap();
    }
    let kube::Error::Api(s) = api
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap_err()
    else {
        panic!("not an API error");
    };
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert!(
        s.message
            .starts_with("The provided continue parameter is too old"),
        "{}",
        s.message
    );
    let exact = ListParams::default()
        .at(&old_rv)
        .matching(VersionMatch::Exact);
    let kube::Error::Api(s) = api.list(&exact).await.unwrap_err() else {
        panic!("not an API error");
    };
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert!(
        s.message.starts_with("too old resource version"),
        "{}",
        s.message
    );
}

/// With compaction every 5 minutes (kube-apiserver's etcd compaction), a
/// continue token of a version compacted away is 410 with a token to go
/// on inconsistently: the latest state after the same key, its remaining
/// items counted — what the conformance spec "should support continue
/// listing from the last key if the original version has been compacted
/// away" reads. Time is tokio's paused clock.
#[tokio::test(start_paused = true)]
async fn a_compacted_token_is_410_with_a_token_to_go_on() {
    let every = std::time::Duration::from_secs(300);
    let config = ServerConfig::default()
        .clock(ward_apiserver::Clock::new())
        .compaction_interval(Some(every));
    let server = ApiServer::start(config).await.unwrap();
    without_root_ca(&server, "default").await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let pp = PostParams::default();
    for i in 0..10 {
        api.create(&pp, &cm(&format!("cm-{i}"), "0")).await.unwrap();
    }
    let first = api.list(&ListParams::default().limit(3)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    let next = ListParams::default().limit(3).continue_token(&token);
    // One interval on, the version is still served: a compaction drops
    // only what the one before it saw.
    tokio::time::advance(every).await;
    api.create(&pp, &cm("late-0", "0")).await.unwrap();
    assert_eq!(api.list(&next).await.unwrap().items.len(), 3);
    tokio::time::advance(every).await;
    api.create(&pp, &cm("late-1", "0")).await.unwrap();
    let kube::Error::Api(s) = api.list(&next).await.unwrap_err() else {
        panic!("not an API error");
    };
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    let inconsistent = s
        .metadata
        .and_then(|m| m.continue_)
        .expect("a token to go on");
    let page = api
        .list(&ListParams::default().limit(3).continue_token(&inconsistent))
        .await
        .unwrap();
    let names: Vec<String> = page.items.iter().map(|c| value(c).0).collect();
    assert_eq!(names, ["cm-3", "cm-4", "cm-5"]);
    assert_ne!(
        page.metadata.resource_version,
        first.metadata.resource_version
    );
    // cm-6..9 and late-0, late-1 follow.
    assert_eq!(page.metadata.remaining_item_count, Some(6));
}
