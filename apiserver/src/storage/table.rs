//! Server-side printing: the `meta.k8s.io/v1` Table that `kubectl get` asks
//! for (`Accept: application/json;as=Table;...`).

use bytes::Bytes;
use serde_json::{Value, json};

use crate::registry::kind::{Column, ColumnDoc};
use crate::registry::resources::ResourceInfo;
use crate::storage::store::StoredObject;

/// Whether an Accept header asks for a Table.
#[must_use]
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table"))
}

/// Name, the kind's own columns, Age, then its wide ones: each with its
/// priority (0, or 1 for what only `-o wide` shows).
fn columns(info: &ResourceInfo) -> impl Iterator<Item = (Column, u8)> {
    let name = Column {
        name: "Name",
        format: "name",
        doc: ColumnDoc::Field("apimachinery.pkg.apis.meta.v1.ObjectMeta", "name"),
        cell: |obj| Value::String(obj["metadata"]["name"].as_str().unwrap_or("").to_string()),
    };
    let age = Column {
        name: "Age",
        format: "",
        doc: ColumnDoc::Field(
            "apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "creationTimestamp",
        ),
        cell: |obj| age(obj["metadata"]["creationTimestamp"].as_str().unwrap_or("")).into(),
    };
    std::iter::once(name)
        .chain(info.strategy.columns().iter().copied())
        .chain(std::iter::once(age))
        .map(|c| (c, 0))
        .chain(info.strategy.wide_columns().iter().map(|c| (*c, 1)))
}

fn age(ts: &str) -> String {
    let Ok(t) = ts.parse::<jiff::Timestamp>() else {
        return "<unknown>".into();
    };
    let secs = jiff::Timestamp::now().duration_since(t).as_secs().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 3 * 3600 => format!("{}m", s / 60),
        s if s < 2 * 86400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86400),
    }
}

fn row(info: &ResourceInfo, obj: &Value) -> Value {
    let cells: Vec<Value> = if info.builtin {
        columns(info).map(|(c, _)| (c.cell)(obj)).collect()
    } else {
        let name = obj["metadata"]["name"].clone();
        std::iter::once(name)
            .chain(super::printer::cells(&info.printer_columns, obj, age))
            .collect()
    };
    json!({
        "cells": cells,
        "object": {
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj["metadata"].clone(),
        }
    })
}

/// A Table of `objects`, with the list's `metadata` (resourceVersion,
/// continue).
#[must_use]
pub fn table(info: &ResourceInfo, objects: &[Value], meta: Value) -> Value {
    let mut defs: Vec<Value> = columns(info)
        .map(|(c, priority)| {
            json!({"name": c.name, "type": "string", "format": c.format, "description": c.doc.text(), "priority": priority})
        })
        .collect();
    if !info.builtin {
        // A custom resource's: Name, then its CRD's columns.
        defs.truncate(1);
        defs.extend(super::printer::definitions(&info.printer_columns));
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": defs,
        "rows": objects.iter().map(|o| row(info, o)).collect::<Vec<_>>(),
    })
}

/// One object as a one-row Table (a watch event of `kubectl get -w`).
#[must_use]
pub fn table_of_one(info: &ResourceInfo, obj: &Value) -> Value {
    let rv = obj["metadata"]["resourceVersion"].as_str().unwrap_or("");
    table(
        info,
        std::slice::from_ref(obj),
        json!({"resourceVersion": rv}),
    )
}

/// A stored object as a watch's one-row Table, at the watch's apiVersion.
#[must_use]
pub fn table_line_of_one(info: &ResourceInfo, obj: &StoredObject) -> Bytes {
    let mut v = obj.value();
    v["apiVersion"] = info.api_version().into();
    Bytes::from(table_of_one(info, &v).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_table_accept() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }

    #[test]
    fn pod_rows_show_kubectls_columns_wide_ones_after_age() {
        let info = crate::registry::resources::builtin_resources()
            .into_iter()
            .find(|r| r.plural == "pods")
            .unwrap();
        let pod = json!({"metadata": {"name": "web-0", "creationTimestamp": "2020-01-01T00:00:00Z"},
                         "status": {"phase": "Pending"}});
        let t = table(&info, &[pod], json!({"resourceVersion": "5"}));
        let columns: Vec<(String, i64)> = (t["columnDefinitions"].as_array().unwrap().iter())
            .map(|c| {
                (
                    c["name"].as_str().unwrap().into(),
                    c["priority"].as_i64().unwrap(),
                )
            })
            .collect();
        let want: Vec<(String, i64)> = [
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1),
        ]
        .map(|(n, p)| (n.to_string(), p))
        .into();
        assert_eq!(columns, want);
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "web-0");
        assert_eq!(cells[2], "Pending");
        assert_eq!(cells[6], "<none>");
    }
}
