//! `/openapi/v2` as kubectl 1.27 and 1.28 fetch it: gnostic's `OpenAPIv2`
//! `Document` message (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`),
//! encoded from the Swagger 2.0 JSON document `http::openapi::v2` builds.
//!
//! Those kubectls read it to learn whether the server validates fields
//! itself (a PATCH operation with the kind's `x-kubernetes-group-version-kind`
//! extension and a `fieldValidation` query parameter) and which patch types
//! PATCH consumes; without it their default `--validate` fails every
//! `create -f` and `apply`; every kubectl's client-side apply looks its
//! kind's definition up in it, and their `explain` falls back to it
//! without /openapi/v3. Definitions carry their schemas' `$ref`, type,
//! format, properties, items, additionalProperties, required and vendor
//! extensions. Only the parts of the message that document
//! uses are encoded; a key this encoder does not know is an error, so the
//! JSON and protobuf forms cannot drift apart silently. Field numbers are
//! those of gnostic-models' `openapiv2/OpenAPIv2.proto`.

use serde_json::{Map, Value};

use super::ProtoError;
use super::codec::{put_double, put_len, put_varint};

/// The media type kubectl asks for.
pub const MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The Content-Type kube-apiserver answers it with.
pub const CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an `Accept` header asks for the protobuf form.
#[must_use]
pub fn wanted(accept: &str) -> bool {
    accept.split(',').any(|r| {
        let r = r.split(';').next().unwrap_or("").trim();
        r.eq_ignore_ascii_case(MEDIA_TYPE) || r.eq_ignore_ascii_case(CONTENT_TYPE)
    })
}

/// The Swagger 2.0 `doc` as a gnostic `Document`.
pub fn encode(doc: &Value) -> Result<Vec<u8>, ProtoError> {
    let mut out = Vec::new();
    for (k, v) in obj(doc, "the document")? {
        match k.as_str() {
            "swagger" => put_len(1, text(v, k)?.as_bytes(), &mut out),
            "info" => nested(2, &mut out, |o| {
                for (k, v) in obj(v, "info")? {
                    let tag = match k.as_str() {
                        "title" => 1,
                        "version" => 2,
                        _ => return Err(unknown("info", k)),
                    };
                    put_len(tag, text(v, k)?.as_bytes(), o);
                }
                Ok(())
            })?,
            // Paths { repeated NamedPathItem path = 2 }
            "paths" => nested(8, &mut out, |o| {
                for (name, item) in obj(v, "paths")? {
                    nested(2, o, |o| named(name, o, |o| path_item(item, o)))?;
                }
                Ok(())
            })?,
            // Definitions { repeated NamedSchema additional_properties = 1 }
            "definitions" => nested(9, &mut out, |o| {
                for (name, s) in obj(v, "definitions")? {
                    nested(1, o, |o| named(name, o, |o| schema(s, o)))?;
                }
                Ok(())
            })?,
            _ => return Err(unknown("the document", k)),
        }
    }
    Ok(out)
}

/// PathItem { get = 2, put = 3, post = 4, delete = 5, patch = 8 }.
fn path_item(item: &Value, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    for (verb, op) in obj(item, "a path")? {
        let tag = match verb.as_str() {
            "get" => 2,
            "put" => 3,
            "post" => 4,
            "delete" => 5,
            "patch" => 8,
            _ => return Err(unknown("a path", verb)),
        };
        nested(tag, out, |o| operation(op, o))?;
    }
    Ok(())
}

/// Operation { operation_id = 5, consumes = 7, parameters = 8,
/// responses = 9, vendor_extension = 13 }.
fn operation(op: &Value, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    for (k, v) in obj(op, "an operation")? {
        match k.as_str() {
            "operationId" => put_len(5, text(v, k)?.as_bytes(), out),
            "consumes" => {
                for c in list(v, k)? {
                    put_len(7, text(c, k)?.as_bytes(), out);
                }
            }
            // ParametersItem { Parameter parameter = 1 } → Parameter
            // { NonBodyParameter non_body_parameter = 2 } → NonBodyParameter
            // { QueryParameterSubSchema query_parameter_sub_schema = 3 }.
            "parameters" => {
                for p in list(v, k)? {
                    nested(8, out, |o| {
                        nested(1, o, |o| nested(2, o, |o| nested(3, o, |o| query(p, o))))
                    })?;
                }
            }
            // Responses { repeated NamedResponseValue response_code = 1 };
            // ResponseValue { Response response = 1 }; Response { description = 1 }.
            "responses" => nested(9, out, |o| {
                for (code, r) in obj(v, k)? {
                    nested(1, o, |o| {
                        named(code, o, |o| {
                            nested(1, o, |o| {
                                for (k, v) in obj(r, "a response")? {
                                    match k.as_str() {
                                        "description" => put_len(1, text(v, k)?.as_bytes(), o),
                                        _ => return Err(unknown("a response", k)),
                                    }
                                }
                                Ok(())
                            })
                        })
                    })?;
                }
                Ok(())
            })?,
            _ if k.starts_with("x-") => extension(13, k, v, out)?,
            _ => return Err(unknown("an operation", k)),
        }
    }
    Ok(())
}

/// QueryParameterSubSchema { in = 2, description = 3, name = 4, type = 6,
/// unique_items = 20 }.
fn query(p: &Value, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    for (k, v) in obj(p, "a parameter")? {
        match k.as_str() {
            "in" => put_len(2, text(v, k)?.as_bytes(), out),
            "description" => put_len(3, text(v, k)?.as_bytes(), out),
            "name" => put_len(4, text(v, k)?.as_bytes(), out),
            "type" => put_len(6, text(v, k)?.as_bytes(), out),
            "uniqueItems" => put_varint(20, u64::from(flag(v, k)?), out),
            _ => return Err(unknown("a parameter", k)),
        }
    }
    Ok(())
}

/// Schema { _ref = 1, format = 2, title = 3, description = 4, Any
/// default = 5, multiple_of = 6, maximum = 7, exclusive_maximum = 8,
/// minimum = 9, exclusive_minimum = 10, max_length = 11, min_length = 12,
/// pattern = 13, max_items = 14, min_items = 15, unique_items = 16,
/// max_properties = 17, min_properties = 18, required = 19, repeated Any
/// enum = 20, additional_properties = 21 (AdditionalPropertiesItem
/// { Schema schema = 1 | bool boolean = 2 }), type = 22 (TypeItem
/// { repeated value = 1 }), items = 23 (ItemsItem { repeated Schema
/// schema = 1 }), properties = 25 (Properties { repeated NamedSchema
/// additional_properties = 1 }), external_docs = 29 (ExternalDocs
/// { description = 1, url = 2 }), Any example = 30, vendor_extension = 31 }.
fn schema(s: &Value, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    for (k, v) in obj(s, "a schema")? {
        match k.as_str() {
            "$ref" => put_len(1, text(v, k)?.as_bytes(), out),
            "format" => put_len(2, text(v, k)?.as_bytes(), out),
            "title" => put_len(3, text(v, k)?.as_bytes(), out),
            "description" => put_len(4, text(v, k)?.as_bytes(), out),
            "default" => any(5, v, out),
            "multipleOf" => put_double(6, number(v, k)?, out),
            "maximum" => put_double(7, number(v, k)?, out),
            "exclusiveMaximum" => put_varint(8, u64::from(flag(v, k)?), out),
            "minimum" => put_double(9, number(v, k)?, out),
            "exclusiveMinimum" => put_varint(10, u64::from(flag(v, k)?), out),
            "maxLength" => put_varint(11, count(v, k)?, out),
            "minLength" => put_varint(12, count(v, k)?, out),
            "pattern" => put_len(13, text(v, k)?.as_bytes(), out),
            "maxItems" => put_varint(14, count(v, k)?, out),
            "minItems" => put_varint(15, count(v, k)?, out),
            "uniqueItems" => put_varint(16, u64::from(flag(v, k)?), out),
            "maxProperties" => put_varint(17, count(v, k)?, out),
            "minProperties" => put_varint(18, count(v, k)?, out),
            "enum" => list(v, k)?.iter().for_each(|e| any(20, e, out)),
            "externalDocs" => nested(29, out, |o| {
                for (k, v) in obj(v, k)? {
                    match k.as_str() {
                        "description" => put_len(1, text(v, k)?.as_bytes(), o),
                        "url" => put_len(2, text(v, k)?.as_bytes(), o),
                        _ => return Err(unknown("externalDocs", k)),
                    }
                }
                Ok(())
            })?,
            "example" => any(30, v, out),
            "required" => {
                for r in list(v, k)? {
                    put_len(19, text(r, k)?.as_bytes(), out);
                }
            }
            "additionalProperties" => nested(21, out, |o| match v {
                Value::Bool(b) => {
                    put_varint(2, u64::from(*b), o);
                    Ok(())
                }
                _ => nested(1, o, |o| schema(v, o)),
            })?,
            "type" => nested(22, out, |o| {
                match v {
                    Value::Array(types) => {
                        for t in types {
                            put_len(1, text(t, k)?.as_bytes(), o);
                        }
                    }
                    _ => put_len(1, text(v, k)?.as_bytes(), o),
                }
                Ok(())
            })?,
            "items" => nested(23, out, |o| match v {
                Value::Array(items) => items
                    .iter()
                    .try_for_each(|i| nested(1, o, |o| schema(i, o))),
                _ => nested(1, o, |o| schema(v, o)),
            })?,
            "properties" => nested(25, out, |o| {
                for (name, p) in obj(v, k)? {
                    nested(1, o, |o| named(name, o, |o| schema(p, o)))?;
                }
                Ok(())
            })?,
            _ if k.starts_with("x-") => extension(31, k, v, out)?,
            _ => return Err(unknown("a schema", k)),
        }
    }
    Ok(())
}

/// A value of the schema's own (a default, an enum member, an example):
/// `Any { yaml = 2 }`, JSON text, which is YAML.
fn any(tag: u32, v: &Value, out: &mut Vec<u8>) {
    let mut inner = Vec::new();
    put_len(2, v.to_string().as_bytes(), &mut inner);
    put_len(tag, &inner, out);
}

/// A vendor extension: NamedAny { name = 1, Any value = 2 }, the value as
/// `Any { yaml = 2 }` — JSON text, which is YAML.
fn extension(tag: u32, name: &str, v: &Value, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    nested(tag, out, |o| {
        named(name, o, |o| {
            put_len(2, v.to_string().as_bytes(), o);
            Ok(())
        })
    })
}

/// The `Named*` shape: `name = 1` and the value, a message, as field 2.
fn named(
    name: &str,
    out: &mut Vec<u8>,
    value: impl FnOnce(&mut Vec<u8>) -> Result<(), ProtoError>,
) -> Result<(), ProtoError> {
    put_len(1, name.as_bytes(), out);
    nested(2, out, value)
}

/// A message field `tag` whose body `body` writes.
fn nested(
    tag: u32,
    out: &mut Vec<u8>,
    body: impl FnOnce(&mut Vec<u8>) -> Result<(), ProtoError>,
) -> Result<(), ProtoError> {
    let mut inner = Vec::new();
    body(&mut inner)?;
    put_len(tag, &inner, out);
    Ok(())
}

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, ProtoError> {
    v.as_object()
        .ok_or_else(|| ProtoError::Type(format!("{what} is not an object")))
}

fn list<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>, ProtoError> {
    v.as_array()
        .ok_or_else(|| ProtoError::Type(format!("{key:?} is not an array")))
}

fn text<'a>(v: &'a Value, key: &str) -> Result<&'a str, ProtoError> {
    v.as_str()
        .ok_or_else(|| ProtoError::Type(format!("{key:?} is not a string")))
}

fn number(v: &Value, key: &str) -> Result<f64, ProtoError> {
    v.as_f64()
        .ok_or_else(|| ProtoError::Type(format!("{key:?} is not a number")))
}

fn count(v: &Value, key: &str) -> Result<u64, ProtoError> {
    v.as_u64()
        .ok_or_else(|| ProtoError::Type(format!("{key:?} is not a count")))
}

fn flag(v: &Value, key: &str) -> Result<bool, ProtoError> {
    v.as_bool()
        .ok_or_else(|| ProtoError::Type(format!("{key:?} is not a boolean")))
}

fn unknown(what: &str, key: &str) -> ProtoError {
    ProtoError::Type(format!("{key:?} in {what} has no OpenAPIv2 encoding here"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::codec::{Wire, fields};
    use super::*;

    /// The length-delimited fields `tag` of `buf`.
    fn all(buf: &[u8], tag: u32) -> Vec<&[u8]> {
        fields(buf)
            .map(|f| f.expect("valid wire data"))
            .filter_map(|(t, w)| match w {
                Wire::Len(b) if t == tag => Some(b),
                _ => None,
            })
            .collect()
    }

    fn one(buf: &[u8], tag: u32) -> &[u8] {
        let f = all(buf, tag);
        assert_eq!(f.len(), 1, "field {tag}");
        f[0]
    }

    fn string(buf: &[u8], tag: u32) -> &str {
        std::str::from_utf8(one(buf, tag)).expect("UTF-8")
    }

    /// Read back what kubectl's query-parameter verifier reads: the PATCH
    /// operation of a path, its group-version-kind extension and the names
    /// of its query parameters.
    #[test]
    fn kubectl_finds_the_patch_operation_and_its_field_validation() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {"/apis/apps/v1/namespaces/{namespace}/deployments/{name}": {
                "get": {"operationId": "readDeployment", "responses": {"200": {"description": "OK"}}},
                "patch": {
                    "operationId": "patchDeployment",
                    "consumes": ["application/merge-patch+json"],
                    "parameters": [{"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true}],
                    "x-kubernetes-group-version-kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                },
            }},
            "definitions": {"apps.v1.Deployment": {"type": "object",
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}]}},
        });
        let pb = encode(&doc).expect("encodes");
        assert_eq!(string(&pb, 1), "2.0");
        assert_eq!(string(one(&pb, 2), 2), "v1.33.0");
        let path = one(one(&pb, 8), 2);
        assert_eq!(
            string(path, 1),
            "/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
        );
        let item = one(path, 2);
        let patch = one(item, 8);
        assert_eq!(string(patch, 5), "patchDeployment");
        assert_eq!(string(patch, 7), "application/merge-patch+json");
        let ext = one(patch, 13);
        assert_eq!(string(ext, 1), "x-kubernetes-group-version-kind");
        let yaml: Value = serde_json::from_str(string(one(ext, 2), 2)).expect("JSON is YAML");
        assert_eq!(yaml["kind"], "Deployment");
        let q = one(one(one(one(patch, 8), 1), 2), 3);
        assert_eq!((string(q, 4), string(q, 2)), ("fieldValidation", "query"));
        let get = one(item, 2);
        let ok = one(one(get, 9), 1);
        assert_eq!(string(ok, 1), "200");
        assert_eq!(string(one(one(ok, 2), 1), 1), "OK");
        let def = one(one(&pb, 9), 1);
        assert_eq!(string(def, 1), "apps.v1.Deployment");
        assert_eq!(string(one(one(def, 2), 22), 1), "object");
    }

    /// A definition's schema as kube-openapi's proto models read it:
    /// properties, their types, formats, items, maps, `$ref`s and
    /// extensions.
    #[test]
    fn definitions_carry_properties_items_maps_and_refs() {
        let doc = json!({"definitions": {"io.k8s.api.apps.v1.DeploymentSpec": {
            "type": "object",
            "required": ["selector"],
            "properties": {
                "replicas": {"type": "integer", "format": "int32"},
                "template": {"$ref": "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "additionalProperties": true},
                "containers": {"type": "array", "items": {"$ref": "#/definitions/C"},
                               "x-kubernetes-patch-merge-key": "name"},
            },
        }}});
        let pb = encode(&doc).expect("encodes");
        let def = one(one(&pb, 9), 1);
        assert_eq!(string(def, 1), "io.k8s.api.apps.v1.DeploymentSpec");
        let s = one(def, 2);
        assert_eq!(string(one(s, 22), 1), "object");
        assert_eq!(string(s, 19), "selector");
        let props: Vec<(&str, &[u8])> = all(one(s, 25), 1)
            .into_iter()
            .map(|p| (string(p, 1), one(p, 2)))
            .collect();
        let prop = |n: &str| props.iter().find(|(k, _)| *k == n).expect(n).1;
        assert_eq!(string(one(prop("replicas"), 22), 1), "integer");
        assert_eq!(string(prop("replicas"), 2), "int32");
        assert_eq!(
            string(prop("template"), 1),
            "#/definitions/io.k8s.api.core.v1.PodTemplateSpec"
        );
        let map = one(one(prop("labels"), 21), 1);
        assert_eq!(string(one(map, 22), 1), "string");
        let free = fields(one(prop("free"), 21))
            .map(|f| f.expect("valid"))
            .collect::<Vec<_>>();
        assert!(matches!(free.as_slice(), [(2, Wire::Varint(1))]));
        let items = one(one(prop("containers"), 23), 1);
        assert_eq!(string(items, 1), "#/definitions/C");
        let ext = one(prop("containers"), 31);
        assert_eq!(string(ext, 1), "x-kubernetes-patch-merge-key");
    }

    #[test]
    fn value_constraints_are_gnostic_fields() {
        let doc = json!({"definitions": {"X": {"enum": ["a", 1], "pattern": "^a", "minimum": 1.5,
            "exclusiveMinimum": true, "maxLength": 3, "default": {"k": "v"}}}});
        let pb = encode(&doc).expect("encodes");
        let s = one(one(one(&pb, 9), 1), 2);
        let members: Vec<&str> = all(s, 20).into_iter().map(|a| string(a, 2)).collect();
        assert_eq!(members, ["\"a\"", "1"]);
        assert_eq!(string(s, 13), "^a");
        assert_eq!(string(one(s, 5), 2), r#"{"k":"v"}"#);
        let f: Vec<_> = fields(s).map(|f| f.expect("valid")).collect();
        assert!(f.iter().any(|(t, w)| *t == 9 && matches!(w, Wire::Fixed64(b) if f64::from_bits(*b) == 1.5)));
        assert!(
            f.iter()
                .any(|(t, w)| *t == 10 && matches!(w, Wire::Varint(1)))
        );
        assert!(
            f.iter()
                .any(|(t, w)| *t == 11 && matches!(w, Wire::Varint(3)))
        );
    }

    #[test]
    fn a_key_without_an_encoding_is_an_error_not_dropped() {
        for doc in [
            json!({"swagger": "2.0", "basePath": "/"}),
            json!({"paths": {"/x": {"trace": {}}}}),
            json!({"paths": {"/x": {"get": {"summary": "s"}}}}),
            json!({"definitions": {"X": {"oneOf": []}}}),
            json!({"definitions": {"X": {"minLength": -1}}}),
            json!({"definitions": {"X": {"properties": {"a": {"nullable": true}}}}}),
            json!({"swagger": 2}),
        ] {
            assert!(
                matches!(encode(&doc), Err(ProtoError::Type(_))),
                "{doc} should not encode"
            );
        }
    }

    #[test]
    fn accept_headers() {
        assert!(wanted(MEDIA_TYPE));
        assert!(wanted(&format!("{CONTENT_TYPE}, application/json")));
        assert!(!wanted("application/json, */*"));
        assert!(!wanted(""));
    }
}
