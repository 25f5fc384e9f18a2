//! `cargo bench --bench reconcile_cost`: what one reconcile costs, bare
//! kube-runtime against a guarded controller, a write at a time
//! (`ward_workspace::bench::cost`). Each variant runs once with no writes
//! and once with `WARD_COST_WRITES` (default 2000) on `WARD_COST_OBJECTS`
//! (default 1000) objects; the CPU per reconcile is the difference.
//!
//! For a profiler, one run: `WARD_COST_VARIANT=guarded WARD_COST_WRITES=2000
//! valgrind --tool=callgrind target/release/deps/reconcile_cost-*` (and
//! `WARD_COST_WRITES=0` for the baseline; `none` runs the writes with no
//! controller; `WARD_COST_NODE_WATCH=1` adds an idle metadata watch of
//! the Nodes). docs/benchmarks.md has the method and the figures.

use std::time::Duration;

use ward_workspace::bench::churn::Variant;
use ward_workspace::bench::cost::{self, CostConfig};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let env = |name: &str| std::env::var(name).ok();
    let objects = env("WARD_COST_OBJECTS")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let writes = env("WARD_COST_WRITES")
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let variants: Vec<(&str, Option<Variant>)> = match env("WARD_COST_VARIANT").as_deref() {
        None => vec![
            ("bare", Some(Variant::Bare)),
            ("guarded", Some(Variant::Guarded)),
        ],
        Some("bare") => vec![("bare", Some(Variant::Bare))],
        Some("guarded") => vec![("guarded", Some(Variant::Guarded))],
        Some("guarded-get") => vec![("guarded-get", Some(Variant::GuardedGet))],
        Some("guarded-shared") => vec![("guarded-shared", Some(Variant::GuardedShared))],
        Some("unguarded") => vec![("unguarded", Some(Variant::Unguarded))],
        Some("none") => vec![("none", None)],
        Some(other) => {
            eprintln!(
                "WARD_COST_VARIANT: bare, guarded, guarded-get, guarded-shared, unguarded or none, not {other:?}"
            );
            std::process::exit(2);
        }
    };
    let rt = ward_workspace::bench::runtime();
    for (name, variant) in variants {
        let config = CostConfig {
            variant,
            objects,
            nodes: 64,
            writes,
            timeout: Duration::from_secs(600),
            node_watch: env("WARD_COST_NODE_WATCH").is_some_and(|v| v == "1"),
        };
        match rt.block_on(cost::run(&config)) {
            Ok(r) => ward_base::outln!(
                "{name}: {} writes, {} reconciles, {:.3} s CPU ({:.1} us per write), {:.3} s wall, {} owner reads",
                writes,
                r.reconciles,
                r.cpu,
                r.cpu * 1e6 / writes.max(1) as f64,
                r.wall,
                r.owner_reads
            ),
            Err(e) => {
                eprintln!("{name}: {e}");
                std::process::exit(1);
            }
        }
    }
}
