//! The structural-schema rules of apiextensions: a node outside value
//! validations names its type and keeps `metadata` to name and
//! generateName; a node under `allOf`/`anyOf`/`oneOf`/`not` only
//! restricts what is specified outside it (and says nothing of types,
//! defaults or extensions), with apiextensions' messages.

use serde_json::{Map, Value};

use super::error::{FieldError, Path};
use super::node::{Schema, Type};

/// Where a node sits, for the messages that differ by place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    Root,
    Field,
    Item,
}

/// Whether a node is a value validation (under `allOf`, `anyOf`, `oneOf`
/// or `not`), which may only restrict what is specified outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nest {
    No,
    Yes,
    /// A branch of the int-or-string `anyOf`, which may name its type.
    TypeAllowed,
}

/// The structural invariants of a node outside value validations.
pub(super) fn structural(
    obj: &Map<String, Value>,
    s: &Schema,
    path: &Path,
    lvl: Level,
    errs: &mut Vec<FieldError>,
) {
    if s.ty == Some(Type::Array) && s.items.is_none() {
        errs.push(FieldError::required(
            &path.child("items"),
            "must be specified",
        ));
    }
    if s.additional.is_some() && lvl == Level::Root {
        errs.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "must not be used at the root",
        ));
    }
    if s.int_or_string && s.preserve_unknown {
        errs.push(FieldError::invalid(
            &path.child("x-kubernetes-preserve-unknown-fields"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string && s.embedded {
        errs.push(FieldError::invalid(
            &path.child("x-kubernetes-embedded-resource"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.embedded && s.ty != Some(Type::Object) {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(match s.ty {
            None => FieldError::required(&path.child("type"), detail),
            Some(t) => FieldError::invalid(&path.child("type"), Value::from(t.name()), detail),
        });
    } else if obj.get("type").is_none_or(|t| t == "") && !s.int_or_string && !s.preserve_unknown {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(&path.child("type"), detail));
    }
    if s.embedded && s.additional.is_some() {
        errs.push(FieldError::forbidden(
            &path.child("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root
        && let Some(t) = s.ty
        && t != Type::Object
    {
        errs.push(FieldError::invalid(
            &path.child("type"),
            Value::from(t.name()),
            "must be object at the root",
        ));
    }
    let resource_like = lvl == Level::Root || s.embedded;
    for key in ["kind", "apiVersion"] {
        if resource_like
            && let Some(p) = s.properties.get(key)
            && p.ty != Some(Type::String)
        {
            errs.push(FieldError::invalid(
                &path.child("properties").key(key).child("type"),
                Value::from(p.ty.map_or("", Type::name)),
                "must be string",
            ));
        }
    }
    if let Some(meta) = s.properties.get("metadata") {
        let mpath = path.child("properties").key("metadata");
        if resource_like && meta.ty != Some(Type::Object) {
            errs.push(FieldError::invalid(
                &mpath.child("type"),
                Value::from(meta.ty.map_or("", Type::name)),
                "must be object",
            ));
        }
        if lvl == Level::Root {
            let raw = obj["properties"]["metadata"].as_object();
            let only_names = raw.is_some_and(|m| {
                m.keys()
                    .all(|k| k == "type" || k == "properties" || k == "default")
                    && m.get("properties")
                        .and_then(Value::as_object)
                        .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"))
            });
            if !only_names {
                errs.push(FieldError::forbidden(
                    &mpath,
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                ));
            }
        }
    }
    if s.embedded && !s.preserve_unknown && s.properties.is_empty() {
        errs.push(FieldError::required(
            &path.child("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// Whether `anyOf` is the int-or-string pattern (`[{type: integer}, {type: string}]`).
pub(super) fn int_or_string_any_of(list: &[Schema]) -> bool {
    list.len() == 2 && list[0].ty == Some(Type::Integer) && list[1].ty == Some(Type::String)
}

/// What a node under `allOf`/`anyOf`/`oneOf`/`not` may not say.
pub(super) fn nested_restrictions(
    obj: &Map<String, Value>,
    s: &Schema,
    path: &Path,
    nest: Nest,
    errs: &mut Vec<FieldError>,
) {
    if obj.contains_key("type") && nest != Nest::TypeAllowed {
        errs.push(FieldError::forbidden(
            &path.child("type"),
            "must be empty to be structural",
        ));
    }
    let forbid = |errs: &mut Vec<FieldError>, key: &str, what: &str| {
        if obj.get(key).is_some_and(|v| v != &Value::Bool(false)) {
            errs.push(FieldError::forbidden(&path.child(key), what.to_string()));
        }
    };
    forbid(
        errs,
        "additionalProperties",
        "must be undefined to be structural",
    );
    forbid(errs, "default", "must be undefined to be structural");
    forbid(errs, "title", "must be empty to be structural");
    forbid(errs, "description", "must be empty to be structural");
    forbid(errs, "nullable", "must be false to be structural");
    for key in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        forbid(errs, key, "must be false to be structural");
    }
    forbid(
        errs,
        "x-kubernetes-list-map-keys",
        "must be empty to be structural",
    );
    forbid(
        errs,
        "x-kubernetes-list-type",
        "must be undefined to be structural",
    );
    forbid(
        errs,
        "x-kubernetes-map-type",
        "must be undefined to be structural",
    );
    forbid(
        errs,
        "x-kubernetes-validations",
        "must be empty to be structural",
    );
    if s.properties.contains_key("metadata") {
        errs.push(FieldError::forbidden(
            &path.child("properties").key("metadata"),
            "must not be specified in a nested context",
        ));
    }
}

/// Every field and item a value validation `v` names is also specified in
/// the structural node `s`.
pub(super) fn complete(
    s: &Schema,
    v: &Schema,
    s_path: &Path,
    v_path: &Path,
    errs: &mut Vec<FieldError>,
) {
    for (k, vp) in &v.properties {
        match s.properties.get(k) {
            None if s.additional.is_none() && !s.preserve_unknown => {
                errs.push(FieldError::required(
                    &s_path.child("properties").key(k),
                    format!(
                        "because it is defined in {}",
                        v_path.child("properties").key(k)
                    ),
                ));
            }
            None => {}
            Some(sp) => complete(
                sp,
                vp,
                &s_path.child("properties").key(k),
                &v_path.child("properties").key(k),
                errs,
            ),
        }
    }
    if let Some(vi) = &v.items {
        match &s.items {
            None => errs.push(FieldError::required(
                &s_path.child("items"),
                format!("because it is defined in {}", v_path.child("items")),
            )),
            Some(si) => complete(si, vi, &s_path.child("items"), &v_path.child("items"), errs),
        }
    }
    for (key, list) in [
        ("allOf", &v.all_of),
        ("anyOf", &v.any_of),
        ("oneOf", &v.one_of),
    ] {
        for (i, n) in list.iter().enumerate() {
            complete(s, n, s_path, &v_path.child(key).index(i), errs);
        }
    }
    if let Some(n) = &v.not {
        complete(s, n, s_path, &v_path.child("not"), errs);
    }
}
