//! The Mirror race (owner + same-named child, GC lagging) three ways: bare
//! kube-runtime, `GuardedController` without a guard, and with
//! `AwaitDeletion`. Each runs on an embedded ward-apiserver in simulated
//! time. Exits non-zero if the guarded run writes into the old child or
//! does not end with its own.

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

use ward_base::outln;
use ward_examples::mirror::{Variant, run_simulated};

fn main() -> ExitCode {
    outln!(
        "| controller | writes into M1's child for M2 | ends with M2's own child | recreated after GC |"
    );
    outln!("|---|---|---|---|");
    let mut ok = true;
    for (variant, label) in [
        (Variant::Bare, "kube-runtime Controller"),
        (Variant::Naive, "GuardedController, no guard"),
        (Variant::Guarded, "GuardedController + AwaitDeletion"),
    ] {
        match run_simulated(variant) {
            Ok(o) => {
                outln!(
                    "| {label} | {} | {} | {:?} |",
                    o.writes_to_the_old_child(),
                    o.ends_with_own_child,
                    o.recreated_after
                );
                if variant == Variant::Guarded {
                    ok &= o.writes_to_the_old_child() == 0 && o.ends_with_own_child;
                }
            }
            Err(e) => {
                eprintln!("{label}: {e}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
