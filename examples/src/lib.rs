//! Example controllers rebuilt from real bugs, each with a naive variant
//! that reproduces its bug and a guarded one that does not, and the
//! campaign runner behind `ward-demo`.
//!
//! An example is its model, its controller, its invariants, its scenarios
//! and a short binary; what they all share is [`example`] (the typed
//! [`Example`](example::Example) every one implements), [`run`] (scenario
//! setup and simulated time), [`journal`] and [`cli`]. The feature `sim`
//! (on by default) builds the simulation: the scenarios, [`demo`], the
//! sharding and Mirror examples, on tokio's paused clock (tokio's
//! `test-util`, through `ward-campaign`); without it only what the live
//! binaries run is built: `cargo build --release -p ward-examples
//! --no-default-features --bin lws`.

#![warn(missing_docs)]

pub mod cli;
pub mod cns;
#[cfg(feature = "sim")]
pub mod demo;
pub mod example;
pub mod journal;
pub mod lws;
pub mod meta;
#[cfg(feature = "sim")]
pub mod mirror;
pub mod run;
#[cfg(feature = "sim")]
pub mod sharding;
pub mod whereabouts;
