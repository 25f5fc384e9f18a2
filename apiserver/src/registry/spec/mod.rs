//! The specs of the server's configuration kinds, parsed and checked
//! where the kinds are registered (`kind/`) and read where admission and
//! conversion run: an admission webhook as registered ([`webhook`]), a
//! ValidatingAdmissionPolicy and its bindings ([`policy`]), a CRD's
//! conversion ([`conversion`]). Below the kinds, the store and the
//! request path: they import nothing of those.

pub mod conversion;
pub mod policy;
pub mod webhook;
