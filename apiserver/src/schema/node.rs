//! One node of a compiled structural schema: what [`super::parse`] builds
//! and pruning, defaulting and validation walk.

use std::collections::BTreeMap;

use serde_json::Value;

/// The type a schema node declares (`type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// `object`.
    Object,
    /// `array`.
    Array,
    /// `string`.
    String,
    /// `integer`.
    Integer,
    /// `number`.
    Number,
    /// `boolean`.
    Boolean,
}

impl Type {
    pub(super) fn name(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }
}

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ListType {
    /// `atomic`, or not given.
    #[default]
    Atomic,
    /// `set`: items are unique scalars.
    Set,
    /// `map`: items are objects unique by `x-kubernetes-list-map-keys`.
    Map(Vec<String>),
}

/// One node of a structural schema, compiled.
#[derive(Debug, Clone, Default)]
pub struct Schema {
    /// `type`; None when not given (allowed only under
    /// `x-kubernetes-int-or-string` or `x-kubernetes-preserve-unknown-fields`,
    /// and inside `allOf`/`anyOf`/`oneOf`/`not`).
    pub ty: Option<Type>,
    /// `format`.
    pub format: Option<String>,
    /// `properties`, by name.
    pub properties: BTreeMap<String, Schema>,
    /// `items`.
    pub items: Option<Box<Schema>>,
    /// `additionalProperties` as a schema (`true` is a schema with no type
    /// that keeps what it holds).
    pub additional: Option<Box<Schema>>,
    /// `required`.
    pub required: Vec<String>,
    /// `nullable`.
    pub nullable: bool,
    /// `default`.
    pub default: Option<Value>,
    /// `enum`.
    pub enumeration: Vec<Value>,
    /// `pattern`, with its compiled form.
    pub pattern: Option<(String, regex::Regex)>,
    /// `minimum` and whether it is exclusive.
    pub minimum: Option<(f64, bool)>,
    /// `maximum` and whether it is exclusive.
    pub maximum: Option<(f64, bool)>,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `minLength`.
    pub min_length: Option<u64>,
    /// `maxLength`.
    pub max_length: Option<u64>,
    /// `minItems`.
    pub min_items: Option<u64>,
    /// `maxItems`.
    pub max_items: Option<u64>,
    /// `minProperties`.
    pub min_properties: Option<u64>,
    /// `maxProperties`.
    pub max_properties: Option<u64>,
    /// `allOf`.
    pub all_of: Vec<Schema>,
    /// `anyOf`.
    pub any_of: Vec<Schema>,
    /// `oneOf`.
    pub one_of: Vec<Schema>,
    /// `not`.
    pub not: Option<Box<Schema>>,
    /// `x-kubernetes-preserve-unknown-fields`.
    pub preserve_unknown: bool,
    /// `x-kubernetes-embedded-resource`.
    pub embedded: bool,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `x-kubernetes-list-type` (and its map keys).
    pub list_type: ListType,
    /// `x-kubernetes-validations`, compiled ([`crate::schema::cel`]).
    pub rules: Vec<std::sync::Arc<crate::schema::cel::Rule>>,
    /// Whether this node or any below it has a `default` (defaulting skips
    /// what has none).
    pub(crate) has_defaults: bool,
}

impl Schema {
    /// Whether this node or one below it has `x-kubernetes-validations`.
    #[must_use]
    pub fn has_rules(&self) -> bool {
        !self.rules.is_empty()
            || self.properties.values().any(Schema::has_rules)
            || self.items.as_deref().is_some_and(Schema::has_rules)
            || self.additional.as_deref().is_some_and(Schema::has_rules)
    }

    /// Whether the node keeps fields it does not declare.
    pub(super) fn keeps_unknown(&self) -> bool {
        self.preserve_unknown
    }

    /// The schema of property `name` of an object, if declared (or the
    /// `additionalProperties` schema).
    pub(super) fn property(&self, name: &str) -> Option<&Schema> {
        self.properties.get(name).or(self.additional.as_deref())
    }
}
