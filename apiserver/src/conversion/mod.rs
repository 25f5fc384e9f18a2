//! Custom resources served in several versions, converted as
//! apiextensions-apiserver converts them: objects are stored in the CRD's
//! storage version; a read in another version is converted to it, and a
//! write in another version is converted to the storage version before it
//! is stored. `strategy: None` rewrites `apiVersion` only;
//! `strategy: Webhook` sends a ConversionReview v1 to the CRD's conversion
//! webhook over HTTPS (the admission webhooks' client, [`crate::admission::call`]).
//! A built-in kind served in a second group ([`Builtin`]: `events.k8s.io`
//! Events) converts the same way, field by field, into the group it is
//! stored in.
//!
//! Where each conversion happens: a write's (the stored object into the
//! request's version before a patch or an update applies, the result into
//! the storage version) runs in the write's passes, as an admission step
//! does ([`crate::admission::Admission::convert`]); a get's and a list's
//! answers are converted by the handler once they are rendered (one review
//! for a list's items); a watch converts each event before it is sent.

mod webhook;

pub use crate::registry::spec::conversion::{Builtin, Conversion, default, errors};
