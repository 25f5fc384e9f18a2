//! Defaulting moved to each kind's strategy
//! ([`KindStrategy::default`](crate::kind::KindStrategy::default), one
//! file per kind under [`crate::kind`]); what it covers is in that
//! module's docs.

use serde_json::Value;

use crate::resources::ResourceInfo;

/// Fill in the defaults of `obj`, an object of the built-in `info`.
#[deprecated(since = "0.3.0", note = "use `info.strategy.default(obj)`")]
pub fn apply(info: &ResourceInfo, obj: &mut Value) {
    info.strategy.default(obj);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn apply_is_the_kinds_default() {
        let info = crate::resources::Registry::with_builtins()
            .get("", "v1", "secrets")
            .unwrap();
        let mut obj = serde_json::json!({});
        apply(&info, &mut obj);
        assert_eq!(obj["type"], "Opaque");
    }
}
