//! The shape of the generated schema (`schema.rs`) and its index.

use std::collections::HashMap;
use std::sync::LazyLock;

/// A protobuf message: its name (`module.Message`, k8s-pb's module path)
/// and fields.
#[derive(Debug)]
pub(crate) struct Message {
    pub name: &'static str,
    pub fields: &'static [Field],
}

/// A field: its tag, JSON name (empty for a Go embedded struct, whose
/// fields JSON inlines into the parent), type, repetition, whether it is a
/// plain Go scalar with `omitempty` (zero means unset: Go writes it to
/// protobuf anyway, its JSON omits it), whether Go's JSON always writes it
/// (`always`: a plain struct, or a field without omitempty, `null` when
/// nil), and whether it is a plain struct (`{}` when empty).
#[derive(Debug)]
pub(crate) struct Field {
    pub tag: u32,
    pub json: &'static str,
    pub ty: Ty,
    pub repeated: bool,
    pub omit_zero: bool,
    pub always: bool,
    pub plain_struct: bool,
}

/// A field's type as the wire carries it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ty {
    String,
    Bool,
    Int32,
    Int64,
    Double,
    /// Bytes (base64 in JSON).
    Bytes,
    Message(&'static str),
    /// `map<string, string>`.
    MapString,
    /// `map<string, bytes>` (base64 values in JSON).
    MapBytes,
    /// `map<string, Message>`.
    MapMessage(&'static str),
}

/// Messages by name, and by lowercased name (kinds' messages are found
/// from `kind`, whose acronyms k8s-pb writes in camel case: `CSIDriver` is
/// `CsiDriver`).
struct Index {
    by_name: HashMap<&'static str, &'static Message>,
    by_lower: HashMap<String, &'static Message>,
}

static INDEX: LazyLock<Index> = LazyLock::new(|| Index {
    by_name: super::schema::MESSAGES
        .iter()
        .map(|m| (m.name, m))
        .collect(),
    by_lower: super::schema::MESSAGES
        .iter()
        .map(|m| (m.name.to_ascii_lowercase(), m))
        .collect(),
});

/// Every message of the table, sorted by name.
pub(crate) fn all_messages() -> &'static [Message] {
    super::schema::MESSAGES
}

/// The message named `name` (`module.Message`).
pub(crate) fn message(name: &str) -> Option<&'static Message> {
    INDEX.by_name.get(name).copied()
}

/// The message of `kind` in `apiVersion`: the kind's own module, or
/// apimachinery's meta/v1 for the kinds every group version shares
/// (Status, DeleteOptions, WatchEvent, PartialObjectMetadata…).
pub(crate) fn message_of_kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    let module = super::schema::MODULES
        .iter()
        .find(|(av, _)| *av == api_version)
        .map(|(_, m)| *m);
    // Go registers meta/v1's kinds in every built-in group version.
    let meta = (module.is_some() || api_version == "meta.k8s.io/v1")
        .then_some("apimachinery.pkg.apis.meta.v1");
    [module, meta].into_iter().flatten().find_map(|m| {
        INDEX
            .by_lower
            .get(&format!("{m}.{kind}").to_ascii_lowercase())
            .copied()
    })
}

impl Field {
    /// What Go's JSON writes for this field left at its zero, when it
    /// writes one (`always`): a plain scalar's zero (`""`, `0`, `false`),
    /// a Time's `null`. Plain structs are `write_plain_structs`'.
    #[must_use]
    pub(crate) fn written_zero(&self) -> Option<serde_json::Value> {
        use serde_json::Value;
        if !self.always || self.repeated || self.json.is_empty() {
            return None;
        }
        Some(match self.ty {
            Ty::String => "".into(),
            Ty::Bool => false.into(),
            Ty::Int32 | Ty::Int64 | Ty::Double => 0.into(),
            Ty::Message(
                "apimachinery.pkg.apis.meta.v1.Time" | "apimachinery.pkg.apis.meta.v1.MicroTime",
            ) => Value::Null,
            _ => return None,
        })
    }
}

impl Message {
    /// The field with `tag`.
    pub(super) fn field(&self, tag: u32) -> Option<&'static Field> {
        self.fields.iter().find(|f| f.tag == tag)
    }

    /// The field JSON names `name`, looked up through Go's embedded
    /// structs (whose fields JSON inlines: the table gives them an empty
    /// JSON name).
    pub(crate) fn json_field(&'static self, name: &str) -> Option<&'static Field> {
        self.fields.iter().find_map(|f| match f.ty {
            Ty::Message(n) if f.json.is_empty() => message(n).and_then(|e| e.json_field(name)),
            _ => (f.json == name).then_some(f),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_kind_and_its_list_has_a_message() {
        for (api_version, kind, ..) in crate::registry::builtins::BUILTINS {
            for kind in [kind.to_string(), format!("{kind}List")] {
                assert!(
                    message_of_kind(api_version, &kind).is_some(),
                    "{api_version} {kind}"
                );
            }
        }
        for (api_version, kind) in [
            ("v1", "Status"),
            ("meta.k8s.io/v1", "DeleteOptions"),
            ("apps/v1", "DeleteOptions"),
            ("policy/v1", "Eviction"),
            ("autoscaling/v1", "Scale"),
            ("authentication.k8s.io/v1", "TokenRequest"),
        ] {
            assert!(message_of_kind(api_version, kind).is_some(), "{kind}");
        }
        assert!(message_of_kind("example.com/v1", "Status").is_none());
    }

    /// schema.rs is what generate.py wrote from the committed data: its
    /// header's digest is FNV-1a 64 of its body, then json_names.txt,
    /// go_omitempty.txt and go_always.txt, as generate.py computes it.
    #[test]
    fn the_schema_is_as_generated() {
        let schema = include_str!("schema.rs");
        let (header, body) = schema.split_once("\n\n").unwrap_or_default();
        let digest = header.lines().find_map(|l| l.strip_prefix("// digest: "));
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for part in [
            body,
            include_str!("../../../proto/json_names.txt"),
            include_str!("../../../proto/go_omitempty.txt"),
            include_str!("../../../proto/go_always.txt"),
        ] {
            for b in part.bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        let content = format!("{h:016x}");
        assert!(
            digest == Some(content.as_str()),
            "apiserver/src/proto/schema.rs is not what apiserver/proto/generate.py \
             wrote (its header's digest {digest:?}, its content's {content}): never \
             edit it by hand; run the generator and commit what it writes"
        );
    }

    #[test]
    fn every_message_a_field_names_is_in_the_schema() {
        let special = ["Time", "MicroTime", "Timestamp", "Duration", "Quantity"];
        for m in super::super::schema::MESSAGES {
            for f in m.fields {
                if let Ty::Message(name) | Ty::MapMessage(name) = f.ty {
                    let short = name.rsplit('.').next().unwrap_or("");
                    assert!(
                        message(name).is_some() || special.contains(&short),
                        "{}.{} refers to {name}",
                        m.name,
                        f.json
                    );
                }
            }
        }
    }
}
