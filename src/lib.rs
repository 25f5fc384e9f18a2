//! Host package for the workspace's cross-crate tests (`tests/`) and benchmarks (`benches/`).
