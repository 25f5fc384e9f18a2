//! Events, both kinds of them (`v1` and `events.k8s.io/v1`): the fields
//! kube-apiserver lets a field selector name, and the conversion between
//! them. As in kube-apiserver, both are one stored object (a core Event):
//! an Event written through either group is read through the other.

use serde_json::Value;

use super::strategy::{KindStrategy, field_at};

/// The core Event kind (`v1`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CoreEvent;

/// The `events.k8s.io/v1` Event kind.
#[derive(Debug, Clone, Copy, Default)]
pub struct Event;

impl KindStrategy for CoreEvent {
    fn name(&self) -> &'static str {
        "Event"
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]
    }

    /// `source` selects on `source.component`.
    fn field_value<'a>(&self, obj: &'a Value, path: &str) -> &'a Value {
        if path == "source" {
            return &obj["source"]["component"];
        }
        field_at(obj, path)
    }
}

impl KindStrategy for Event {
    fn name(&self) -> &'static str {
        "events.k8s.io/Event"
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ]
    }
}

/// The fields whose names differ: (core `v1`, `events.k8s.io/v1`), as
/// kube-apiserver's conversions map them; every other field keeps its name.
const RENAMED: [(&str, &str); 7] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

/// The core Event's field label for an `events.k8s.io` one (kube-apiserver's
/// field label conversion): both groups' selectors read the stored core
/// Event.
pub(crate) fn core_field_label(label: &str) -> &str {
    const REGARDING: [(&str, &str); 7] = [
        ("regarding.kind", "involvedObject.kind"),
        ("regarding.namespace", "involvedObject.namespace"),
        ("regarding.name", "involvedObject.name"),
        ("regarding.uid", "involvedObject.uid"),
        ("regarding.apiVersion", "involvedObject.apiVersion"),
        (
            "regarding.resourceVersion",
            "involvedObject.resourceVersion",
        ),
        ("regarding.fieldPath", "involvedObject.fieldPath"),
    ];
    if label == "reportingController" {
        return "reportingComponent";
    }
    (REGARDING.iter())
        .find(|(events, _)| *events == label)
        .map_or(label, |(_, core)| core)
}

/// `obj`, a core or an `events.k8s.io` Event, in `desired`'s form (`v1`
/// or `events.k8s.io/v1`). An object already there is left as it is.
pub(crate) fn convert(obj: &mut Value, desired: &str) {
    if obj["apiVersion"] == desired {
        return;
    }
    let to_core = desired == "v1";
    if let Some(map) = obj.as_object_mut() {
        for (core, events) in RENAMED {
            let (from, to) = if to_core {
                (events, core)
            } else {
                (core, events)
            };
            match map.remove(from) {
                Some(v) => {
                    map.insert(to.to_owned(), v);
                }
                None => {
                    map.remove(to);
                }
            }
        }
        // The core Event writes these without omitempty, the
        // events.k8s.io one with it: an empty one is left out there.
        for (core, events) in [
            ("reportingComponent", "reportingController"),
            ("reportingInstance", "reportingInstance"),
        ] {
            if to_core {
                map.entry(core).or_insert_with(|| "".into());
            } else if map.get(events).is_some_and(|v| v == "") {
                map.remove(events);
            }
        }
    }
    obj["apiVersion"] = desired.into();
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_event_converts_both_ways_and_back_to_itself() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p"},
            "message": "m", "reason": "R", "type": "Normal", "count": 2,
            "source": {"component": "c"}, "reportingComponent": "rc", "reportingInstance": "",
            "firstTimestamp": "2026-01-01T00:00:00Z",
        });
        let mut events = core.clone();
        convert(&mut events, "events.k8s.io/v1");
        assert_eq!(
            events,
            json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e", "namespace": "default"},
                "regarding": {"kind": "Pod", "name": "p"},
                "note": "m", "reason": "R", "type": "Normal", "deprecatedCount": 2,
                "deprecatedSource": {"component": "c"}, "reportingController": "rc",
                "deprecatedFirstTimestamp": "2026-01-01T00:00:00Z",
            })
        );
        let mut back = events.clone();
        convert(&mut back, "v1");
        assert_eq!(back, core);
        // Already there: untouched.
        convert(&mut back, "v1");
        assert_eq!(back, core);
    }

    #[test]
    fn an_events_selector_names_the_stored_core_fields() {
        assert_eq!(core_field_label("regarding.name"), "involvedObject.name");
        assert_eq!(
            core_field_label("reportingController"),
            "reportingComponent"
        );
        assert_eq!(core_field_label("type"), "type");
        // Every field an events.k8s.io selector may name is one the core
        // Event is indexed by.
        for label in Event.selectable_fields() {
            assert!(
                CoreEvent
                    .selectable_fields()
                    .contains(&core_field_label(label)),
                "{label}"
            );
        }
    }
}
