//! Where a JSON value sits in a built-in kind's schema, from the generated
//! protobuf field table: which keys an object may have, what its arrays
//! and map entries hold, and which values are opaque (a Go type with its
//! own JSON decoding, whose inside kube-apiserver never checks).

use crate::machinery::proto::{Message, Ty, message, message_of_kind};

const META: &str = "apimachinery.pkg.apis.meta.v1";
const JSON_SCHEMA: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1";

/// Messages that hold Go's `ObjectMeta` as `metadata` but no `TypeMeta`
/// (templates, not kinds): `apiVersion` and `kind` are unknown in them.
const NO_TYPE_META: &[&str] = &[
    "api.batch.v1.JobTemplateSpec",
    "api.core.v1.PersistentVolumeClaimTemplate",
    "api.core.v1.PodTemplateSpec",
    "api.resource.v1.ResourceClaimTemplateSpec",
];

/// The shape of one JSON value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// An object of this message; `top` when it is the request's object
    /// (whose `apiVersion` and `kind` are always known).
    Object {
        /// The message.
        msg: &'static Message,
        /// The request's object itself.
        top: bool,
    },
    /// A field's value: its type, and whether it is a list.
    Field(Ty, bool),
    /// Free JSON decoded into Go's `interface{}` (a patch): every key is
    /// known, duplicates count at any depth.
    Any,
    /// Not checked: a scalar, a type with its own JSON decoding
    /// (Time, Quantity, IntOrString, RawExtension, FieldsV1…), or a value
    /// whose JSON type does not fit (a decoding error elsewhere).
    Opaque,
}

/// What an object's keys are.
pub(crate) enum Keys {
    /// A message's fields.
    Fields(&'static Message, bool),
    /// A map: every key is allowed, each entry has the shape.
    Map(Shape),
}

impl Shape {
    /// The request object of `kind` in `api_version`, if the table has it.
    pub(crate) fn of_kind(api_version: &str, kind: &str) -> Option<Shape> {
        message_of_kind(api_version, kind).map(|msg| Shape::Object { msg, top: true })
    }

    /// How an object in this position is read; None when its keys are not
    /// checked.
    pub(crate) fn keys(self) -> Option<Keys> {
        match self {
            Shape::Object { msg, top } => Some(Keys::Fields(msg, top)),
            Shape::Field(_, true) | Shape::Opaque => None,
            Shape::Any => Some(Keys::Map(Shape::Any)),
            Shape::Field(Ty::MapString | Ty::MapBytes, false) => Some(Keys::Map(Shape::Opaque)),
            Shape::Field(Ty::MapMessage(name), false) => {
                Some(Keys::Map(Shape::Field(Ty::Message(name), false)))
            }
            Shape::Field(Ty::Message(name), false) => {
                object_message(name).map(|msg| Keys::Fields(msg, false))
            }
            Shape::Field(..) => None,
        }
    }

    /// The shape of an array's items (Opaque when this is not a list).
    pub(crate) fn item(self) -> Shape {
        match self {
            Shape::Field(ty, true) => Shape::Field(ty, false),
            Shape::Any => Shape::Any,
            _ => Shape::Opaque,
        }
    }
}

impl Keys {
    /// The shape of the value at `key`, or None when the object may not
    /// have that key (an unknown field).
    pub(crate) fn get(&self, key: &str) -> Option<Shape> {
        match *self {
            Keys::Map(shape) => Some(shape),
            Keys::Fields(msg, top) => field_of(msg, key).or_else(|| {
                (matches!(key, "apiVersion" | "kind") && (top || has_type_meta(msg)))
                    .then_some(Shape::Opaque)
            }),
        }
    }
}

/// The field `key` of `msg` ([`Message::json_field`]).
fn field_of(msg: &'static Message, key: &str) -> Option<Shape> {
    msg.json_field(key).map(|f| Shape::Field(f.ty, f.repeated))
}

/// The message behind a message-typed field whose JSON is an object of
/// fields; None for the types Go decodes on their own.
pub(super) fn object_message(name: &str) -> Option<&'static Message> {
    if is_opaque(name) {
        return None;
    }
    message(name)
}

/// Whether a message is one of the types whose JSON form is their own
/// (kube-apiserver decodes them with their `UnmarshalJSON`, not field by field).
fn is_opaque(name: &str) -> bool {
    let (module, short) = name.rsplit_once('.').unwrap_or(("", name));
    matches!(
        (module, short),
        (
            META,
            "Time" | "MicroTime" | "Timestamp" | "Duration" | "FieldsV1" | "Verbs"
        ) | (
            "apimachinery.pkg.api.resource",
            "Quantity" | "QuantityValue"
        ) | ("apimachinery.pkg.util.intstr", "IntOrString")
            | ("apimachinery.pkg.runtime", "RawExtension" | "Unknown")
            | (
                JSON_SCHEMA,
                "Json"
                    | "JsonSchemaPropsOrArray"
                    | "JsonSchemaPropsOrBool"
                    | "JsonSchemaPropsOrStringArray"
            )
            | (_, "ExtraValue")
    )
}

/// Whether Go's type for `msg` embeds `TypeMeta` (a kind or a list of
/// them: it has `metadata`, and is not a template).
pub(crate) fn has_type_meta(msg: &Message) -> bool {
    !NO_TYPE_META.contains(&msg.name)
        && msg.fields.iter().any(|f| {
            f.json == "metadata"
                && matches!(
                    f.ty,
                    Ty::Message(
                        "apimachinery.pkg.apis.meta.v1.ObjectMeta"
                            | "apimachinery.pkg.apis.meta.v1.ListMeta"
                    )
                )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(shape: Shape, key: &str) -> Option<Shape> {
        shape.keys().and_then(|k| k.get(key))
    }

    #[test]
    fn a_kind_knows_its_fields_type_meta_and_embedded_fields() {
        let deploy = Shape::of_kind("apps/v1", "Deployment").unwrap();
        for key in ["apiVersion", "kind", "metadata", "spec", "status"] {
            assert!(get(deploy, key).is_some(), "{key}");
        }
        assert!(get(deploy, "replicas").is_none());
        let spec = get(deploy, "spec").unwrap();
        let template = get(spec, "template").unwrap();
        // A template has ObjectMeta but no TypeMeta.
        assert!(get(template, "kind").is_none());
        let pod_spec = get(template, "spec").unwrap();
        let container = get(pod_spec, "containers").unwrap().item();
        // Probe inlines ProbeHandler (a Go embedded struct).
        let probe = get(container, "livenessProbe").unwrap();
        assert!(get(probe, "httpGet").is_some());
        assert!(get(probe, "initialDelaySeconds").is_some());
        // A StatefulSet's volumeClaimTemplates are whole PVCs.
        let sts = Shape::of_kind("apps/v1", "StatefulSet").unwrap();
        let pvc = get(get(sts, "spec").unwrap(), "volumeClaimTemplates")
            .unwrap()
            .item();
        assert!(get(pvc, "apiVersion").is_some());
    }

    #[test]
    fn maps_and_opaque_types_take_any_key() {
        let pod = Shape::of_kind("v1", "Pod").unwrap();
        let labels = get(get(pod, "metadata").unwrap(), "labels").unwrap();
        assert!(get(labels, "anything").is_some());
        let c = get(get(pod, "spec").unwrap(), "containers").unwrap().item();
        let limits = get(get(c, "resources").unwrap(), "limits").unwrap();
        // A ResourceList's values are Quantities: not objects of fields.
        assert!(get(limits, "cpu").unwrap().keys().is_none());
        let mf = get(get(pod, "metadata").unwrap(), "managedFields")
            .unwrap()
            .item();
        assert!(get(mf, "fieldsV1").unwrap().keys().is_none());
    }
}
