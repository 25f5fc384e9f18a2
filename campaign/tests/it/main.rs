//! ward-campaign's integration tests, one binary: each perturbation kind
//! shown against a probe controller (`probe`), and exact replay for a
//! controller whose behaviour follows hash-map iteration order (`replay`),
//! and the bounds every run keeps: livelock verdicts, plans that aim only
//! at registered controllers, judges of the history (`bounds`).

mod bounds;
mod probe;
mod replay;
