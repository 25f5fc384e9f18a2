//! Objects as leaves (`spec.template.spec.containers[0].image`) and the
//! differences between two runs' leaves, which the oracle reports.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// One way a run's end state differs from the reference run's.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Difference {
    /// The object (`apps/statefulsets/default/test`).
    pub object: String,
    /// The field (`spec.replicas`); empty when the whole object is there
    /// in one run only.
    pub path: String,
    /// Its value in the reference run (None: absent).
    pub reference: Option<Value>,
    /// Its value in this run (None: absent).
    pub got: Option<Value>,
    /// Found in a value the object took on the way, not in its end state
    /// (see [the oracle](super::oracle)); `reference` is then one of the
    /// values unperturbed runs' objects of that name and owner took there.
    pub passing: bool,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| match v {
            None => "absent".to_string(),
            Some(v) => {
                let s = v.to_string();
                if s.len() > 240 {
                    format!("{}…", &s[..s.floor_char_boundary(240)])
                } else {
                    s
                }
            }
        };
        if self.path.is_empty() {
            match &self.got {
                None => write!(f, "{}: present unperturbed, absent here", self.object)?,
                got => write!(f, "{}: absent unperturbed, here {}", self.object, show(got))?,
            }
        } else {
            write!(
                f,
                "{} {}: {} unperturbed, {} here",
                self.object,
                self.path,
                show(&self.reference),
                show(&self.got)
            )?;
        }
        if self.passing {
            f.write_str(" (in passing)")?;
        }
        Ok(())
    }
}

pub(crate) fn flatten(v: &Value, path: String, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (k, v) in o {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                flatten(v, p, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, v) in a.iter().enumerate() {
                flatten(v, format!("{path}[{i}]"), out);
            }
        }
        leaf => {
            out.insert(path, leaf.clone());
        }
    }
}

/// `a[3].b` → `a[*].b`: noise learned at one index is noise at every one.
pub(crate) fn general(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[*");
            }
            ']' => {
                in_index = false;
                out.push(']');
            }
            _ if in_index => {}
            c => out.push(c),
        }
    }
    out
}
