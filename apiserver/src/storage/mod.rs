//! Objects at rest and in motion: the linearizable store and its event
//! history, the write path every kind shares (`strategy`), watches, list
//! filters, and the renderings a read returns (lists, tables,
//! PartialObjectMetadata); CRDs in the store become served kinds (`crd`).
//!
//! The store knows no requests: nothing here imports the HTTP layer,
//! identity or admission.

pub mod crd;
pub mod filter;
pub mod partial;
mod printer;
pub mod render;
pub mod store;
pub mod strategy;
pub mod table;
pub mod watch;
