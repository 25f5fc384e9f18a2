//! The objects the benchmarks write, and the clock their stamps use.
//!
//! Every benchmark object is a ConfigMap shaped like a node-scoped
//! configuration record (the CNS NodeNetworkConfig stand-in): two labels, a
//! controller ownerReference to a Node, a `stamp` (the write time, for
//! event-to-reconcile latency), a `rev` and a 256-byte payload — about
//! 650 bytes of JSON once stored.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde_json::{Value, json};
use ward_apiserver::ApiServer;
use ward_apiserver::store::Store;
use ward_apiserver::store::{ResourceInfo, builtin_resources};

/// The namespace every benchmark object lives in.
pub const NAMESPACE: &str = "default";

/// Microseconds since the first call in this process (a monotonic clock
/// shared by writers and reconcilers).
#[must_use]
pub fn now_micros() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    // Never 0, so a stamp of 0 means "before any measurement".
    EPOCH.get_or_init(Instant::now).elapsed().as_micros() as u64 + 1
}

/// The served resource `plural` of the core group (e.g. `configmaps`).
#[must_use]
pub fn core(plural: &str) -> Arc<ResourceInfo> {
    Arc::new(
        builtin_resources()
            .into_iter()
            .find(|r| r.group.is_empty() && r.plural == plural)
            .expect("a built-in core resource"),
    )
}

/// A Node the objects are owned by: (name, uid).
pub type Owner = (String, String);

/// Create `n` Nodes named `bench-node-<i>` directly in the store.
#[must_use]
pub fn create_nodes(store: &Store, n: usize) -> Vec<Owner> {
    let nodes = core("nodes");
    (0..n.max(1))
        .map(|i| {
            let name = format!("bench-node-{i}");
            let obj = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}});
            let stored = store.create(&nodes, obj).expect("creating a bench node");
            (name, stored.uid.to_string())
        })
        .collect()
}

/// A 256-character payload that differs by `i`.
fn payload(i: u64) -> String {
    let mut s = String::with_capacity(256);
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    while s.len() < 256 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    s.truncate(256);
    s
}

/// The benchmark ConfigMap `name` (number `i`), owned by `owner`, stamped `stamp`.
#[must_use]
pub fn configmap(name: &str, i: u64, owner: &Owner, stamp: u64) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"app": "ward-bench", "shard": format!("s{:02}", i % 16)},
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Node",
                "name": owner.0,
                "uid": owner.1,
                "controller": true,
                "blockOwnerDeletion": true
            }]
        },
        "data": {
            "stamp": stamp.to_string(),
            "rev": "0",
            "config": payload(i)
        }
    })
}

/// `old` with a new `stamp` and the next `rev` (an update's body).
#[must_use]
pub fn touched(old: &Value, stamp: u64) -> Value {
    let mut n = old.clone();
    let rev = n["data"]["rev"]
        .as_str()
        .and_then(|r| r.parse::<u64>().ok())
        .unwrap_or(0);
    n["data"]["stamp"] = stamp.to_string().into();
    n["data"]["rev"] = (rev + 1).to_string().into();
    n
}

/// Name of the `i`th preloaded object.
#[must_use]
pub fn name(i: u64) -> String {
    format!("cm-{i:06}")
}

/// Create object `i` (owned round-robin by `owners`, stamp 0) directly in
/// the store; returns its name.
fn create(store: &Store, i: u64, owners: &[Owner]) -> String {
    let name = name(i);
    let owner = &owners[i as usize % owners.len()];
    store
        .create(&core("configmaps"), configmap(&name, i, owner, 0))
        .expect("preloading a bench object");
    name
}

/// Create `n` objects `cm-000000`.. in `server`'s store; returns their
/// names. Every 1000 creates, and at the end, waits for the server's
/// garbage collector (which follows every event) to catch up, so that it
/// never falls behind and rebuilds its graph while the benchmark measures.
pub async fn preload(server: &ApiServer, n: usize, owners: &[Owner]) -> Vec<String> {
    let mut names = Vec::with_capacity(n);
    for i in 0..n as u64 {
        names.push(create(server.store(), i, owners));
        if i % 1000 == 999 {
            server.gc_caught_up().await;
        }
    }
    server.gc_caught_up().await;
    names
}

/// [`preload`] into a bare store (no collector to wait for).
#[must_use]
pub fn preload_store(store: &Store, n: usize, owners: &[Owner]) -> Vec<String> {
    (0..n as u64).map(|i| create(store, i, owners)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_about_650_bytes_and_touch_bumps_rev() {
        let owner = ("bench-node-0".to_string(), "u".repeat(36));
        let v = configmap("cm-000001", 1, &owner, 42);
        let len = v.to_string().len();
        assert!((450..900).contains(&len), "{len}");
        let t = touched(&v, 43);
        assert_eq!(t["data"]["rev"], "1");
        assert_eq!(t["data"]["stamp"], "43");
        assert!(now_micros() > 0);
    }
}
