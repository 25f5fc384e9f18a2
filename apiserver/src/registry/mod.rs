//! The kinds the server serves: the built-in list and what a fresh
//! cluster holds, one strategy file per kind (`kind/`), the configuration
//! kinds' specs (`spec/`), the table of served resources (built-ins plus
//! CRDs), and the known fields of every kind.
//!
//! Below the store: a kind says how its objects behave; it never stores
//! one, nor sees a request.

pub mod bootstrap;
pub mod builtins;
pub mod fields;
pub mod kind;
pub mod resources;
pub mod spec;
pub mod versions;
