//! One message between protobuf and JSON, driven by the schema: the
//! generic walk, and the apimachinery types whose JSON form is not their
//! protobuf shape (times, quantities, int-or-string, raw JSON, Go named
//! slices, the JSON-schema unions).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use prost::encoding::{WireType, decode_key, decode_varint, encode_key, encode_varint};
use serde_json::{Map, Number, Value};

use super::ProtoError;
use super::schema_types::{Field, Message, Ty, message, message_of_kind};

/// Nesting deeper than this is refused (a crafted body cannot exhaust the
/// stack; real objects nest a few dozen levels at most).
const MAX_DEPTH: u32 = 100;

const META: &str = "apimachinery.pkg.apis.meta.v1";
const JSON_SCHEMA: &str = "apiextensions_apiserver.pkg.apis.apiextensions.v1";

/// One field's value as the wire carries it.
pub(super) enum Wire<'a> {
    Varint(u64),
    Fixed64(u64),
    Fixed32,
    Len(&'a [u8]),
}

/// The next field of `buf`: its tag and value.
fn next_field<'a>(buf: &mut &'a [u8]) -> Result<(u32, Wire<'a>), ProtoError> {
    let (tag, wt) = decode_key(buf)?;
    let wire = match wt {
        WireType::Varint => Wire::Varint(decode_varint(buf)?),
        WireType::SixtyFourBit => {
            let (b, rest) = buf.split_first_chunk::<8>().ok_or(ProtoError::Truncated)?;
            *buf = rest;
            Wire::Fixed64(u64::from_le_bytes(*b))
        }
        WireType::ThirtyTwoBit => {
            let (_, rest) = buf.split_first_chunk::<4>().ok_or(ProtoError::Truncated)?;
            *buf = rest;
            Wire::Fixed32
        }
        WireType::LengthDelimited => {
            let len = usize::try_from(decode_varint(buf)?).map_err(|_| ProtoError::Truncated)?;
            if len > buf.len() {
                return Err(ProtoError::Truncated);
            }
            let (v, rest) = buf.split_at(len);
            *buf = rest;
            Wire::Len(v)
        }
        WireType::StartGroup | WireType::EndGroup => {
            return Err(ProtoError::Wire("groups are not used by Kubernetes".into()));
        }
    };
    Ok((tag, wire))
}

/// Every field of `buf` in order.
pub(super) fn fields(mut buf: &[u8]) -> impl Iterator<Item = Result<(u32, Wire<'_>), ProtoError>> {
    std::iter::from_fn(move || (!buf.is_empty()).then(|| next_field(&mut buf)))
}

fn wire_mismatch(f: &Field) -> ProtoError {
    ProtoError::Wire(format!("field {:?} has the wrong wire type", f.json))
}

fn utf8(b: &[u8]) -> Result<String, ProtoError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtoError::NotUtf8)
}

/// A `runtime.Unknown`: its typeMeta's apiVersion and kind (fields 1.1
/// and 1.2), raw (2) and contentEncoding (3).
pub(super) struct Unknown<'a> {
    pub api_version: String,
    pub kind: String,
    pub raw: &'a [u8],
    pub content_encoding: String,
}

pub(super) fn read_unknown(buf: &[u8]) -> Result<Unknown<'_>, ProtoError> {
    let mut u = Unknown {
        api_version: String::new(),
        kind: String::new(),
        raw: b"",
        content_encoding: String::new(),
    };
    for field in fields(buf) {
        match field? {
            (1, Wire::Len(type_meta)) => {
                for tm in fields(type_meta) {
                    match tm? {
                        (1, Wire::Len(b)) => u.api_version = utf8(b)?,
                        (2, Wire::Len(b)) => u.kind = utf8(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Len(b)) => u.raw = b,
            (3, Wire::Len(b)) => u.content_encoding = utf8(b)?,
            _ => {}
        }
    }
    Ok(u)
}

pub(super) fn write_unknown(api_version: &str, kind: &str, raw: &[u8], out: &mut Vec<u8>) {
    let mut type_meta = Vec::new();
    put_len(1, api_version.as_bytes(), &mut type_meta);
    put_len(2, kind.as_bytes(), &mut type_meta);
    put_len(1, &type_meta, out);
    put_len(2, raw, out);
    put_len(3, b"", out);
    put_len(4, b"", out);
}

/// `buf` as the JSON object of `msg`. Fields this schema does not know are
/// skipped, as a Go decoder skips them.
pub(super) fn decode_message(
    msg: &'static Message,
    buf: &[u8],
    depth: u32,
) -> Result<Map<String, Value>, ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep);
    }
    let mut out = Map::new();
    for field in fields(buf) {
        let (tag, wire) = field?;
        let Some(f) = msg.field(tag) else { continue };
        match f.ty {
            Ty::MapString | Ty::MapBytes | Ty::MapMessage(_) => {
                let Wire::Len(entry) = wire else {
                    return Err(wire_mismatch(f));
                };
                let (k, v) = decode_entry(f, entry, depth)?;
                if let Value::Object(m) = out
                    .entry(f.json)
                    .or_insert_with(|| Value::Object(Map::new()))
                {
                    m.insert(k, v);
                }
            }
            _ if f.repeated => {
                let values = match (wire, f.ty) {
                    // Packed scalars: one run of values.
                    (Wire::Len(b), Ty::Int32 | Ty::Int64 | Ty::Bool) => {
                        let mut b = b;
                        let mut vs = Vec::new();
                        while !b.is_empty() {
                            vs.push(scalar(f, Wire::Varint(decode_varint(&mut b)?))?);
                        }
                        vs
                    }
                    (wire, _) => vec![decode_value(f, wire, depth)?],
                };
                if let Value::Array(a) = out
                    .entry(f.json)
                    .or_insert_with(|| Value::Array(Vec::new()))
                {
                    a.extend(values);
                }
            }
            _ => match decode_value(f, wire, depth)? {
                // A Go embedded struct: its fields belong to this object.
                Value::Object(inner) if f.json.is_empty() => out.extend(inner),
                Value::Null => {}
                // Go marshals a plain field even when zero; its JSON omits it.
                v if f.omit_zero && is_zero(&v) => {}
                v => {
                    out.insert(f.json.to_string(), v);
                }
            },
        }
    }
    Ok(out)
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

/// A scalar field's value.
fn scalar(f: &Field, wire: Wire<'_>) -> Result<Value, ProtoError> {
    Ok(match (f.ty, wire) {
        (Ty::String, Wire::Len(b)) => Value::String(utf8(b)?),
        (Ty::Bytes, Wire::Len(b)) => Value::String(BASE64.encode(b)),
        (Ty::Bool, Wire::Varint(v)) => Value::Bool(v != 0),
        // int32 is sign-extended to 64 bits on the wire.
        (Ty::Int32, Wire::Varint(v)) => Value::from(v as i64 as i32),
        (Ty::Int64, Wire::Varint(v)) => Value::from(v as i64),
        (Ty::Double, Wire::Fixed64(v)) => {
            Number::from_f64(f64::from_bits(v)).map_or(Value::Null, Value::Number)
        }
        _ => return Err(wire_mismatch(f)),
    })
}

fn decode_value(f: &Field, wire: Wire<'_>, depth: u32) -> Result<Value, ProtoError> {
    match (f.ty, wire) {
        (Ty::Message(name), Wire::Len(b)) => decode_named(name, b, depth + 1),
        (Ty::Message(_), _) => Err(wire_mismatch(f)),
        (_, wire) => scalar(f, wire),
    }
}

/// A map entry: key (1) and value (2).
fn decode_entry(f: &Field, entry: &[u8], depth: u32) -> Result<(String, Value), ProtoError> {
    let (mut key, mut value) = (String::new(), None);
    for field in fields(entry) {
        match field? {
            (1, Wire::Len(b)) => key = utf8(b)?,
            (2, Wire::Len(b)) => {
                value = Some(match f.ty {
                    Ty::MapString => Value::String(utf8(b)?),
                    Ty::MapBytes => Value::String(BASE64.encode(b)),
                    Ty::MapMessage(name) => decode_named(name, b, depth + 1)?,
                    _ => unreachable!("decode_entry is called for maps only"),
                });
            }
            _ => return Err(wire_mismatch(f)),
        }
    }
    // An absent value is the type's zero value.
    let value = value.unwrap_or_else(|| match f.ty {
        Ty::MapMessage(_) => Value::Object(Map::new()),
        _ => Value::String(String::new()),
    });
    Ok((key, value))
}

/// The first length-delimited field `tag` of `buf`, if any.
fn bytes_field(buf: &[u8], tag: u32) -> Result<Option<&[u8]>, ProtoError> {
    for field in fields(buf) {
        if let (t, Wire::Len(b)) = field?
            && t == tag
        {
            return Ok(Some(b));
        }
    }
    Ok(None)
}

/// The varint fields of `buf` by tag (1 and 2 are all the small special
/// messages use).
fn varints(buf: &[u8]) -> Result<[u64; 3], ProtoError> {
    let mut out = [0; 3];
    for field in fields(buf) {
        if let (t @ 1..=2, Wire::Varint(v)) = field? {
            out[t as usize] = v;
        }
    }
    Ok(out)
}

/// A message by name: the special JSON forms first, then the schema.
fn decode_named(name: &'static str, buf: &[u8], depth: u32) -> Result<Value, ProtoError> {
    let (module, short) = name.rsplit_once('.').unwrap_or(("", name));
    match (module, short) {
        (META, "Time" | "MicroTime" | "Timestamp") => {
            // A zero Time marshals as an empty message (JSON null).
            if buf.is_empty() {
                return Ok(Value::Null);
            }
            let [_, secs, nanos] = varints(buf)?;
            Ok(Value::String(format_time(
                secs as i64,
                nanos as i64 as i32,
                short == "MicroTime",
            )?))
        }
        (META, "Duration") => Ok(Value::String(format_duration(varints(buf)?[1] as i64))),
        ("apimachinery.pkg.api.resource", "Quantity" | "QuantityValue") => {
            Ok(Value::String(utf8(bytes_field(buf, 1)?.unwrap_or(b""))?))
        }
        ("apimachinery.pkg.util.intstr", "IntOrString") => {
            let [_, kind, int] = varints(buf)?;
            Ok(if kind == 1 {
                Value::String(utf8(bytes_field(buf, 3)?.unwrap_or(b""))?)
            } else {
                Value::from(int as i64 as i32)
            })
        }
        ("apimachinery.pkg.runtime", "RawExtension")
        | (META, "FieldsV1")
        | (JSON_SCHEMA, "Json") => match bytes_field(buf, 1)? {
            None | Some(b"") => Ok(Value::Null),
            Some(raw) if raw.starts_with(MAGIC) => decode_object(raw),
            Some(raw) => serde_json::from_slice(raw)
                .map_err(|e| ProtoError::Wire(format!("raw JSON of a {short}: {e}"))),
        },
        (
            JSON_SCHEMA,
            "JsonSchemaPropsOrArray" | "JsonSchemaPropsOrBool" | "JsonSchemaPropsOrStringArray",
        ) => decode_schema_union(short, buf, depth),
        (_, "ExtraValue") | (META, "Verbs") => {
            let mut items = Vec::new();
            for field in fields(buf) {
                if let (1, Wire::Len(b)) = field? {
                    items.push(Value::String(utf8(b)?));
                }
            }
            Ok(Value::Array(items))
        }
        _ => {
            let msg = message(name).ok_or_else(|| ProtoError::NoSchema(name.to_string()))?;
            Ok(Value::Object(decode_message(msg, buf, depth)?))
        }
    }
}

/// The JSON-schema unions: a schema, or an array of them / a bool / an
/// array of strings.
fn decode_schema_union(short: &str, buf: &[u8], depth: u32) -> Result<Value, ProtoError> {
    let props = message(&format!("{JSON_SCHEMA}.JsonSchemaProps"))
        .ok_or_else(|| ProtoError::NoSchema("JsonSchemaProps".into()))?;
    // (the tag of the schema, the tag of the alternative)
    let schema_tag = if short == "JsonSchemaPropsOrBool" {
        2
    } else {
        1
    };
    let (mut schema, mut items, mut allows) = (None, Vec::new(), false);
    for field in fields(buf) {
        match field? {
            (t, Wire::Len(b)) if t == schema_tag => {
                schema = Some(Value::Object(decode_message(props, b, depth + 1)?));
            }
            (2, Wire::Len(b)) if short == "JsonSchemaPropsOrArray" => {
                items.push(Value::Object(decode_message(props, b, depth + 1)?));
            }
            (2, Wire::Len(b)) => items.push(Value::String(utf8(b)?)),
            (1, Wire::Varint(v)) => allows = v != 0,
            _ => {}
        }
    }
    Ok(match (short, schema) {
        (_, Some(s)) => s,
        ("JsonSchemaPropsOrBool", None) => Value::Bool(allows),
        _ => Value::Array(items),
    })
}

/// RFC 3339 in UTC as Kubernetes writes it: seconds for Time, microseconds
/// for MicroTime.
fn format_time(secs: i64, nanos: i32, micro: bool) -> Result<String, ProtoError> {
    let ts = jiff::Timestamp::new(secs, nanos).map_err(|e| ProtoError::Wire(e.to_string()))?;
    let fmt = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(ts.strftime(fmt).to_string())
}

fn parse_time(s: &str) -> Result<(i64, i32), ProtoError> {
    let ts: jiff::Timestamp = s
        .parse()
        .map_err(|e| ProtoError::Type(format!("{s:?} is not an RFC 3339 time: {e}")))?;
    Ok((ts.as_second(), ts.subsec_nanosecond()))
}

/// A duration as Go's `time.Duration.String` writes it (`1h2m3s`, `1.5s`,
/// `300ms`, `0s`).
fn format_duration(ns: i64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    let sign = if ns < 0 { "-" } else { "" };
    let u = ns.unsigned_abs();
    let frac = |v: u64, unit: u64| {
        let (whole, rest) = (v / unit, v % unit);
        let digits = unit.ilog10() as usize;
        let rest = format!("{rest:0digits$}");
        let rest = rest.trim_end_matches('0');
        if rest.is_empty() {
            whole.to_string()
        } else {
            format!("{whole}.{rest}")
        }
    };
    if u < 1_000 {
        return format!("{sign}{u}ns");
    }
    if u < 1_000_000 {
        return format!("{sign}{}µs", frac(u, 1_000));
    }
    if u < 1_000_000_000 {
        return format!("{sign}{}ms", frac(u, 1_000_000));
    }
    let (h, rest) = (u / 3_600_000_000_000, u % 3_600_000_000_000);
    let (m, rest) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let s = frac(rest, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{sign}{s}s"),
        (0, m) => format!("{sign}{m}m{s}s"),
        (h, m) => format!("{sign}{h}h{m}m{s}s"),
    }
}

/// A Go duration string (`1h2m3.5s`, `300ms`, `-1.5h`) in nanoseconds.
fn parse_duration(s: &str) -> Result<i64, ProtoError> {
    crate::machinery::validation::go_duration_nanos(s)
        .ok_or_else(|| ProtoError::Type(format!("{s:?} is not a duration")))
}

/// Encode the JSON object `obj` as the message `msg` into `out`. JSON
/// fields the schema does not know are dropped, as a Go decoder drops
/// them; nulls are absent.
pub(super) fn encode_message(
    msg: &'static Message,
    obj: &Map<String, Value>,
    out: &mut Vec<u8>,
    depth: u32,
) -> Result<(), ProtoError> {
    if depth > MAX_DEPTH {
        return Err(ProtoError::TooDeep);
    }
    for f in msg.fields {
        if f.json.is_empty() {
            // A Go embedded struct: its fields are this object's.
            let Ty::Message(name) = f.ty else { continue };
            let inner = message(name).ok_or_else(|| ProtoError::NoSchema(name.to_string()))?;
            let mut nested = Vec::new();
            encode_message(inner, obj, &mut nested, depth + 1)?;
            if !nested.is_empty() {
                put_len(f.tag, &nested, out);
            }
            continue;
        }
        let Some(v) = obj.get(f.json).filter(|v| !v.is_null()) else {
            continue;
        };
        let mismatch =
            |expected: &str| ProtoError::Type(format!("{:?} must be {expected}, not {v}", f.json));
        match f.ty {
            Ty::MapString | Ty::MapBytes | Ty::MapMessage(_) => {
                let map = v.as_object().ok_or_else(|| mismatch("an object"))?;
                // An entry's value is field 2 of the entry message.
                let value = Field {
                    tag: 2,
                    json: f.json,
                    ty: match f.ty {
                        Ty::MapString => Ty::String,
                        Ty::MapBytes => Ty::Bytes,
                        Ty::MapMessage(name) => Ty::Message(name),
                        other => other,
                    },
                    repeated: false,
                    omit_zero: false,
                    always: false,
                    plain_struct: false,
                };
                for (k, item) in map {
                    let mut entry = Vec::new();
                    put_len(1, k.as_bytes(), &mut entry);
                    // A null value is the zero value: absent on the wire.
                    if !item.is_null() {
                        encode_value(&value, item, &mut entry, depth)?;
                    }
                    put_len(f.tag, &entry, out);
                }
            }
            _ if f.repeated => {
                for item in v.as_array().ok_or_else(|| mismatch("an array"))? {
                    encode_value(f, item, out, depth)?;
                }
            }
            _ => encode_value(f, v, out, depth)?,
        }
    }
    Ok(())
}

pub(super) fn put_len(tag: u32, bytes: &[u8], out: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, out);
    encode_varint(bytes.len() as u64, out);
    out.extend_from_slice(bytes);
}

pub(super) fn put_double(tag: u32, v: f64, out: &mut Vec<u8>) {
    encode_key(tag, WireType::SixtyFourBit, out);
    out.extend_from_slice(&v.to_le_bytes());
}

pub(super) fn put_varint(tag: u32, v: u64, out: &mut Vec<u8>) {
    encode_key(tag, WireType::Varint, out);
    encode_varint(v, out);
}

/// An integer from a JSON number (integral floats included, as Go's
/// decoder takes `1.0` for an int).
fn integer(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as i64)
    })
}

fn encode_value(f: &Field, v: &Value, out: &mut Vec<u8>, depth: u32) -> Result<(), ProtoError> {
    let mismatch =
        |expected: &str| ProtoError::Type(format!("{:?} must be {expected}, not {v}", f.json));
    match f.ty {
        Ty::String => put_len(
            f.tag,
            v.as_str().ok_or_else(|| mismatch("a string"))?.as_bytes(),
            out,
        ),
        Ty::Bytes => {
            let s = v.as_str().ok_or_else(|| mismatch("a base64 string"))?;
            let b = BASE64.decode(s).map_err(|_| mismatch("base64"))?;
            put_len(f.tag, &b, out);
        }
        Ty::Bool => put_varint(
            f.tag,
            u64::from(v.as_bool().ok_or_else(|| mismatch("a boolean"))?),
            out,
        ),
        Ty::Int32 => {
            let i = integer(v)
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| mismatch("a 32-bit integer"))?;
            put_varint(f.tag, i64::from(i) as u64, out);
        }
        Ty::Int64 => put_varint(
            f.tag,
            integer(v).ok_or_else(|| mismatch("an integer"))? as u64,
            out,
        ),
        Ty::Double => {
            encode_key(f.tag, WireType::SixtyFourBit, out);
            out.extend_from_slice(
                &v.as_f64()
                    .ok_or_else(|| mismatch("a number"))?
                    .to_le_bytes(),
            );
        }
        Ty::Message(name) => {
            let mut nested = Vec::new();
            encode_named(name, v, &mut nested, depth + 1)?;
            put_len(f.tag, &nested, out);
        }
        Ty::MapString | Ty::MapBytes | Ty::MapMessage(_) => {
            unreachable!("maps are encoded by encode_message")
        }
    }
    Ok(())
}

/// A message by name: the special JSON forms first, then the schema.
fn encode_named(
    name: &'static str,
    v: &Value,
    out: &mut Vec<u8>,
    depth: u32,
) -> Result<(), ProtoError> {
    let (module, short) = name.rsplit_once('.').unwrap_or(("", name));
    let mismatch =
        |expected: &str| ProtoError::Type(format!("a {short} must be {expected}, not {v}"));
    match (module, short) {
        (META, "Time" | "MicroTime" | "Timestamp") => {
            let (secs, nanos) = parse_time(v.as_str().ok_or_else(|| mismatch("a string"))?)?;
            put_varint(1, secs as u64, out);
            put_varint(2, i64::from(nanos) as u64, out);
        }
        (META, "Duration") => put_varint(
            1,
            parse_duration(v.as_str().ok_or_else(|| mismatch("a string"))?)? as u64,
            out,
        ),
        ("apimachinery.pkg.api.resource", "Quantity" | "QuantityValue") => {
            let s = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return Err(mismatch("a string or number")),
            };
            put_len(1, s.as_bytes(), out);
        }
        ("apimachinery.pkg.util.intstr", "IntOrString") => match v {
            Value::String(s) => {
                put_varint(1, 1, out);
                put_len(3, s.as_bytes(), out);
            }
            v => {
                let i = integer(v)
                    .and_then(|i| i32::try_from(i).ok())
                    .ok_or_else(|| mismatch("an integer or string"))?;
                put_varint(1, 0, out);
                put_varint(2, i64::from(i) as u64, out);
            }
        },
        ("apimachinery.pkg.runtime", "RawExtension")
        | (META, "FieldsV1")
        | (JSON_SCHEMA, "Json") => {
            put_len(1, &serde_json::to_vec(v).unwrap_or_default(), out);
        }
        (
            JSON_SCHEMA,
            "JsonSchemaPropsOrArray" | "JsonSchemaPropsOrBool" | "JsonSchemaPropsOrStringArray",
        ) => {
            let props = message(&format!("{JSON_SCHEMA}.JsonSchemaProps"))
                .ok_or_else(|| ProtoError::NoSchema("JsonSchemaProps".into()))?;
            let schema = |obj: &Map<String, Value>, tag: u32, out: &mut Vec<u8>| {
                let mut nested = Vec::new();
                encode_message(props, obj, &mut nested, depth + 1)?;
                put_len(tag, &nested, out);
                Ok::<_, ProtoError>(())
            };
            match (short, v) {
                ("JsonSchemaPropsOrBool", Value::Bool(b)) => put_varint(1, u64::from(*b), out),
                ("JsonSchemaPropsOrBool", Value::Object(o)) => {
                    put_varint(1, 1, out);
                    schema(o, 2, out)?;
                }
                (_, Value::Object(o)) => schema(o, 1, out)?,
                ("JsonSchemaPropsOrArray", Value::Array(items)) => {
                    for item in items {
                        schema(item.as_object().ok_or_else(|| mismatch("schemas"))?, 2, out)?;
                    }
                }
                ("JsonSchemaPropsOrStringArray", Value::Array(items)) => {
                    for item in items {
                        put_len(
                            2,
                            item.as_str().ok_or_else(|| mismatch("strings"))?.as_bytes(),
                            out,
                        );
                    }
                }
                _ => return Err(mismatch("a schema or its alternative")),
            }
        }
        (_, "ExtraValue") | (META, "Verbs") => {
            for item in v.as_array().ok_or_else(|| mismatch("an array"))? {
                put_len(
                    1,
                    item.as_str().ok_or_else(|| mismatch("strings"))?.as_bytes(),
                    out,
                );
            }
        }
        _ => {
            let msg = message(name).ok_or_else(|| ProtoError::NoSchema(name.to_string()))?;
            encode_message(
                msg,
                v.as_object().ok_or_else(|| mismatch("an object"))?,
                out,
                depth,
            )?;
        }
    }
    Ok(())
}

/// The four bytes every Kubernetes protobuf body starts with.
const MAGIC: &[u8] = b"k8s\0";

/// A protobuf body (`k8s\0` + `runtime.Unknown`) as the JSON object it
/// carries, with its `apiVersion` and `kind`.
pub fn decode_object(body: &[u8]) -> Result<Value, ProtoError> {
    let raw = body.strip_prefix(MAGIC).ok_or(ProtoError::NoMagic)?;
    let u = read_unknown(raw)?;
    if !u.content_encoding.is_empty() {
        return Err(ProtoError::Encoding(u.content_encoding));
    }
    let msg = message_of_kind(&u.api_version, &u.kind).ok_or_else(|| ProtoError::UnknownKind {
        api_version: u.api_version.clone(),
        kind: u.kind.clone(),
    })?;
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), u.api_version.into());
    obj.insert("kind".into(), u.kind.into());
    obj.extend(decode_message(msg, u.raw, 1)?);
    Ok(Value::Object(obj))
}

/// A JSON object with `apiVersion` and `kind` as a protobuf body; an error
/// if its kind has no protobuf form (a custom resource, a Table).
pub fn encode_object(v: &Value) -> Result<Vec<u8>, ProtoError> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (s("apiVersion"), s("kind"));
    let msg = message_of_kind(api_version, kind).ok_or_else(|| ProtoError::UnknownKind {
        api_version: api_version.into(),
        kind: kind.into(),
    })?;
    let obj = v
        .as_object()
        .ok_or_else(|| ProtoError::Type("not an object".into()))?;
    let mut raw = Vec::new();
    encode_message(msg, obj, &mut raw, 1)?;
    let mut out = MAGIC.to_vec();
    write_unknown(api_version, kind, &raw, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_and_print_as_go_does() {
        let cases = [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (300_000_000, "300ms"),
            (1_500_000_000, "1.5s"),
            (60_000_000_000, "1m0s"),
            (3_723_000_000_000, "1h2m3s"),
            (-90_000_000_000, "-1m30s"),
        ];
        for (ns, s) in cases {
            assert_eq!(format_duration(ns), s);
            assert_eq!(parse_duration(s).unwrap(), ns, "{s}");
        }
        assert_eq!(parse_duration("1.5h").unwrap(), 5_400_000_000_000);
        assert!(parse_duration("1x").is_err());
        assert!(parse_duration("h").is_err());
    }

    #[test]
    fn times_print_as_kubernetes_writes_them() {
        assert_eq!(format_time(0, 0, false).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_time(1_700_000_000, 123_456_000, true).unwrap(),
            "2023-11-14T22:13:20.123456Z"
        );
        assert_eq!(
            parse_time("2023-11-14T22:13:20.123456Z").unwrap(),
            (1_700_000_000, 123_456_000)
        );
    }

    #[test]
    fn truncated_and_malformed_wire_is_an_error_not_a_panic() {
        let msg = message("api.core.v1.ConfigMap").unwrap();
        for bad in [
            &[0x0a][..],         // a key without its length
            &[0x0a, 0x05, 0x01], // a length past the end
            &[0x0b],             // a group
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ], // varint overflow
        ] {
            assert!(decode_message(msg, bad, 0).is_err(), "{bad:?}");
        }
    }
}
