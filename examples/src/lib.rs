//! Example controllers rebuilt from real bugs, each with a naive variant
//! that reproduces its bug and a guarded one that does not, and the
//! campaign runner behind `ward-demo`.

#![warn(missing_docs)]

pub mod cns;
pub mod demo;
pub mod journal;
pub mod lws;
pub mod meta;
pub mod mirror;
pub mod run;
pub mod sharding;
pub mod whereabouts;
