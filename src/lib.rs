//! Host package for the workspace's cross-crate tests (`tests/`) and
//! benchmarks (`benches/`): the benchmark logic lives in [`bench`](mod@bench) so that
//! both `cargo bench` and the smoke test (`tests/bench_smoke.rs`) run it.

#![warn(missing_docs)]

pub mod bench;
