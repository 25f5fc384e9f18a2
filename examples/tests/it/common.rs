//! What the example tests share.

use ward_examples::demo::{self, Cell};
use ward_examples::example::Example;

/// How many seeds the guarded sweeps of the tests run per scenario: 50 on
/// every landing (sized to CI's budget, #61), or `WARD_SEEDS`: `.ci/wide`
/// runs them over 100, the width they had before, and each stop's note
/// gives its figure (e.g. `WARD_SEEDS=2000 .ci/wide` for a wider run;
/// `ward-demo` is the tool for the widest, docs/invariants.md).
pub fn seeds() -> u64 {
    match std::env::var("WARD_SEEDS") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("WARD_SEEDS must be a number of seeds, got {v:?}")),
        Err(_) => 50,
    }
}

/// `E`'s cells of its guarded variants (what the tests run over many seeds).
pub fn guarded<E: Example>() -> Vec<Cell> {
    demo::cells::<E>()
        .into_iter()
        .filter(|c| c.guarded)
        .collect()
}

/// `E`'s guarded variant over [`seeds`] seeds of every scenario, without
/// perturbation: no run breaks an invariant or fails to run.
pub fn guarded_holds_on_every_scenario<E: Example>() {
    let n = seeds();
    let rows = demo::campaign(&guarded::<E>(), &demo::Selection::seeds(0..n), 2, &|| {});
    assert_eq!(rows.len(), 3);
    for r in &rows {
        assert_eq!(r.runs as u64, n);
        assert_eq!((r.violating_runs, r.errors), (0, 0), "{r:?}");
    }
}

/// Whether `violations` include one of `inv`.
pub fn breaks<I: PartialEq>(violations: &[ward_examples::journal::Violation<I>], inv: I) -> bool {
    violations.iter().any(|v| v.invariant == inv)
}

/// An example binary's `crds` prints exactly the CRD shipped in `deployed`.
pub fn crds_match(bin: &str, deployed: &str) {
    let crds = std::process::Command::new(bin)
        .arg("crds")
        .output()
        .unwrap();
    assert!(crds.status.success(), "{bin} crds");
    assert_eq!(String::from_utf8_lossy(&crds.stdout), deployed);
}
