//! A black-box campaign's setup manifests and workload: YAML read once,
//! checked before any seed runs, and carried out against each seed's
//! server by a client the plan never perturbs.
//!
//! A workload is a list of steps, run in order:
//!
//! ```yaml
//! steps:
//!   - apply: lws.yaml              # every object of a file (relative to the workload's)
//!   - apply:                       # or one object, inline (server-side apply)
//!       apiVersion: v1
//!       kind: ConfigMap
//!       metadata: {name: settings}
//!       data: {level: "1"}
//!   - wait: {apiVersion: apps/v1, kind: StatefulSet, name: test, for: exists, timeout: 10s}
//!   - wait: {apiVersion: apps/v1, kind: StatefulSet, name: test, for: terminating}  # deletionTimestamp set
//!   - wait: {apiVersion: v1, kind: ConfigMap, name: out, field: data.level, equals: "1"}
//!   - patch: {apiVersion: v1, kind: ConfigMap, name: settings, type: merge, patch: {data: {level: "2"}}}
//!   - patch: {apiVersion: apps/v1, kind: Deployment, name: web, subresource: status, patch: {status: {replicas: 1}}}
//!   - delete: {apiVersion: v1, kind: ConfigMap, name: settings, propagationPolicy: Foreground}
//!   - sleep: 500ms
//!   - run: [kubectl, get, configmaps]  # a command, KUBECONFIG and WARD_RUN_DIR set; exit 0 or the step fails
//! ```
//!
//! Objects without a namespace go to `default` when their kind is
//! namespaced; `wait` defaults to `for: exists` and a 30s timeout.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PropagationPolicy};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use serde::Deserialize;
use serde_json::Value;

/// Why a manifest or a workload was refused, or a step failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not the YAML it should be.
    #[error("{path}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        message: String,
    },
    /// A step failed while it ran.
    #[error("step {index} ({step}): {message}")]
    Step {
        /// Its index, from 1.
        index: usize,
        /// The step, as written.
        step: String,
        /// What went wrong.
        message: String,
    },
}

/// One workload step (see the module docs).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Step {
    /// Server-side apply each object, in order.
    Apply(Objects),
    /// Patch one object.
    Patch(PatchStep),
    /// Delete one object.
    Delete(DeleteStep),
    /// Wait for an object to exist, to be gone, or for a field's value.
    Wait(WaitStep),
    /// Do nothing for a while (`500ms`, `2s`, `1m`).
    Sleep(String),
    /// Run a command with KUBECONFIG set; it fails the step unless it exits 0.
    Run(Vec<String>),
}

/// What an `apply` step applies: a file's objects (read when the workload
/// is loaded) or one inline object.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Objects {
    /// A YAML file of one or more documents.
    File(String),
    /// One object.
    Inline(Value),
    /// Resolved: the objects themselves.
    #[serde(skip)]
    Loaded(Vec<Value>),
}

/// Names one object.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// Its apiVersion (`v1`, `apps/v1`).
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its namespace (`default` for a namespaced kind when absent).
    pub namespace: Option<String>,
}

/// A `patch` step.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchStep {
    #[serde(flatten)]
    target: Target,
    /// `merge` (the default), `json` or `strategic`.
    #[serde(rename = "type", default)]
    kind: Option<String>,
    /// A subresource to patch instead of the object (`status`, `scale`).
    subresource: Option<String>,
    patch: Value,
}

/// A `delete` step.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteStep {
    #[serde(flatten)]
    target: Target,
    /// `Background` (the default), `Foreground` or `Orphan`.
    propagation_policy: Option<String>,
}

/// A `wait` step.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WaitStep {
    #[serde(flatten)]
    target: Target,
    /// `exists` (the default), `terminating` (it exists with a
    /// `deletionTimestamp`: a finalizer holds it) or `deleted`.
    #[serde(rename = "for")]
    until: Option<String>,
    /// A dotted path whose value must equal `equals`.
    field: Option<String>,
    equals: Option<Value>,
    /// How long at most (`30s` by default).
    timeout: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    steps: Vec<Step>,
}

/// A loaded workload: its steps, every file read, every value checked.
#[derive(Debug, Clone)]
pub struct Workload {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// How long the steps' sleeps add up to (the plan's horizon, when
    /// none is given).
    pub sleeps: Duration,
}

impl Workload {
    /// Read and check the workload at `path`.
    ///
    /// # Errors
    /// The file or one it names cannot be read, is not YAML, or a step is
    /// malformed (an unknown step, a bad duration, an object without
    /// apiVersion or kind).
    pub fn load(path: &Path) -> Result<Workload, WorkloadError> {
        let text = read(path)?;
        let file: File = serde_saphyr::from_str(&text).map_err(|e| WorkloadError::Malformed {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let bad = |i: usize, message: String| WorkloadError::Malformed {
            path: path.to_path_buf(),
            message: format!("step {}: {message}", i + 1),
        };
        let mut steps = Vec::with_capacity(file.steps.len());
        let mut sleeps = Duration::ZERO;
        for (i, mut step) in file.steps.into_iter().enumerate() {
            match &mut step {
                Step::Apply(objects) => {
                    let loaded = match objects {
                        Objects::File(f) => load_manifests(&dir.join(&*f))?,
                        Objects::Inline(v) => vec![v.clone()],
                        Objects::Loaded(v) => v.clone(),
                    };
                    for o in &loaded {
                        gvk(o).map_err(|m| bad(i, m))?;
                    }
                    *objects = Objects::Loaded(loaded);
                }
                Step::Sleep(d) => sleeps += duration(d).map_err(|m| bad(i, m))?,
                Step::Wait(w) => {
                    if let Some(t) = &w.timeout {
                        duration(t).map_err(|m| bad(i, m))?;
                    }
                    match w.until.as_deref() {
                        None | Some("exists" | "terminating" | "deleted") => {}
                        Some(other) => {
                            return Err(bad(
                                i,
                                format!("for: {other:?}: exists, terminating or deleted"),
                            ));
                        }
                    }
                    if w.field.is_some() != w.equals.is_some() {
                        return Err(bad(i, "field and equals go together".into()));
                    }
                }
                Step::Patch(p) => {
                    if !matches!(
                        p.kind.as_deref(),
                        None | Some("merge" | "json" | "strategic")
                    ) {
                        return Err(bad(i, "type: merge, json or strategic".into()));
                    }
                    if p.subresource
                        .as_deref()
                        .is_some_and(|r| r.is_empty() || r.contains('/'))
                    {
                        return Err(bad(i, "subresource: a name such as status".into()));
                    }
                }
                Step::Delete(d) => {
                    if !matches!(
                        d.propagation_policy.as_deref(),
                        None | Some("Background" | "Foreground" | "Orphan")
                    ) {
                        return Err(bad(
                            i,
                            "propagationPolicy: Background, Foreground or Orphan".into(),
                        ));
                    }
                }
                Step::Run(argv) => {
                    if argv.is_empty() {
                        return Err(bad(i, "run: an empty command".into()));
                    }
                }
            }
            steps.push(step);
        }
        Ok(Workload { steps, sleeps })
    }
}

fn read(path: &Path) -> Result<String, WorkloadError> {
    std::fs::read_to_string(path).map_err(|source| WorkloadError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Every object of the YAML file at `path` (documents in order; a `List`
/// is opened), or of every `.yaml`/`.yml`/`.json` file of a folder, in
/// name order.
///
/// # Errors
/// A file cannot be read or parsed, or an object has no apiVersion or kind.
pub fn load_manifests(path: &Path) -> Result<Vec<Value>, WorkloadError> {
    let meta = std::fs::metadata(path).map_err(|source| WorkloadError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|source| WorkloadError::Read {
                path: path.to_path_buf(),
                source,
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                matches!(
                    p.extension().and_then(|e| e.to_str()),
                    Some("yaml" | "yml" | "json")
                )
            })
            .collect();
        files.sort();
        let mut out = Vec::new();
        for f in files {
            out.extend(load_manifests(&f)?);
        }
        return Ok(out);
    }
    let text = read(path)?;
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&text).map_err(|e| WorkloadError::Malformed {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
    let mut out = Vec::new();
    for doc in docs {
        match doc {
            Value::Null => {}
            Value::Object(ref o) if o.get("kind").and_then(Value::as_str) == Some("List") => {
                out.extend(
                    o.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => out.push(other),
        }
    }
    for (i, o) in out.iter().enumerate() {
        gvk(o).map_err(|m| WorkloadError::Malformed {
            path: path.to_path_buf(),
            message: format!("object {}: {m}", i + 1),
        })?;
    }
    Ok(out)
}

/// `500ms`, `2s`, `1.5s`, `1m`.
pub fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map_or((s, ""), |i| s.split_at(i));
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is no duration (500ms, 2s, 1m)"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        _ => return Err(format!("{s:?} is no duration (500ms, 2s, 1m)")),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| format!("{s:?} is no duration"))
}

fn gvk(o: &Value) -> Result<GroupVersionKind, String> {
    let av = o.get("apiVersion").and_then(Value::as_str);
    let kind = o.get("kind").and_then(Value::as_str);
    let (Some(av), Some(kind)) = (av, kind) else {
        return Err("an object needs apiVersion and kind".into());
    };
    if o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none()
        && o.pointer("/metadata/generateName").is_none()
    {
        return Err(format!("a {kind} without metadata.name"));
    }
    Ok(gvk_of(av, kind))
}

fn gvk_of(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind)
}

/// Carries out steps and manifests against one server.
pub(crate) struct Runner<'a> {
    pub(crate) client: kube::Client,
    pub(crate) kubeconfig: &'a Path,
    /// Where each step's line goes (`step 2: delete …`).
    pub(crate) log: &'a (dyn Fn(String) + Send + Sync),
}

impl Runner<'_> {
    /// Apply `objects` in order (CustomResourceDefinitions and Namespaces
    /// first, so what they define exists for the rest).
    pub(crate) async fn setup(&self, objects: &[Value]) -> Result<(), String> {
        let first = |o: &&Value| {
            matches!(
                o.get("kind").and_then(Value::as_str),
                Some("CustomResourceDefinition" | "Namespace")
            )
        };
        let (early, late): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(first);
        for o in early.into_iter().chain(late) {
            self.apply(o)
                .await
                .map_err(|e| format!("{}: {e}", describe(o)))?;
        }
        Ok(())
    }

    /// Run every step; the first that fails ends the workload.
    pub(crate) async fn run(&self, steps: &[Step]) -> Result<(), WorkloadError> {
        for (i, step) in steps.iter().enumerate() {
            (self.log)(format!("step {}: {}", i + 1, summary(step)));
            self.step(step)
                .await
                .map_err(|message| WorkloadError::Step {
                    index: i + 1,
                    step: summary(step),
                    message,
                })?;
        }
        Ok(())
    }

    async fn step(&self, step: &Step) -> Result<(), String> {
        match step {
            Step::Apply(Objects::Loaded(objects)) => {
                for o in objects {
                    self.apply(o)
                        .await
                        .map_err(|e| format!("{}: {e}", describe(o)))?;
                }
                Ok(())
            }
            Step::Apply(_) => Err("the workload was not loaded".into()),
            Step::Patch(p) => {
                let (api, name) = self.api(&p.target).await?;
                let params = PatchParams::default();
                let patch = match p.kind.as_deref() {
                    Some("json") => Patch::Json(
                        serde_json::from_value(p.patch.clone())
                            .map_err(|e| format!("not a JSON patch: {e}"))?,
                    ),
                    Some("strategic") => Patch::Strategic(&p.patch),
                    _ => Patch::Merge(&p.patch),
                };
                let r = match &p.subresource {
                    Some(sub) => api.patch_subresource(sub, &name, &params, &patch).await,
                    None => api.patch(&name, &params, &patch).await,
                };
                r.map(drop).map_err(|e| e.to_string())
            }
            Step::Delete(d) => {
                let (api, name) = self.api(&d.target).await?;
                let policy = match d.propagation_policy.as_deref() {
                    Some("Foreground") => PropagationPolicy::Foreground,
                    Some("Orphan") => PropagationPolicy::Orphan,
                    _ => PropagationPolicy::Background,
                };
                let params = DeleteParams {
                    propagation_policy: Some(policy),
                    ..DeleteParams::default()
                };
                api.delete(&name, &params)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            Step::Wait(w) => self.wait(w).await,
            Step::Sleep(d) => {
                tokio::time::sleep(duration(d)?).await;
                Ok(())
            }
            Step::Run(argv) => {
                let out = super::supervisor::command(
                    argv,
                    self.kubeconfig,
                    Duration::from_secs(60),
                    None,
                )
                .await?;
                (self.log)(format!("  {}", out.trim_end().replace('\n', "\n  ")));
                Ok(())
            }
        }
    }

    async fn wait(&self, w: &WaitStep) -> Result<(), String> {
        let timeout = w
            .timeout
            .as_deref()
            .map_or(Ok(Duration::from_secs(30)), duration)?;
        let (api, name) = self.api(&w.target).await?;
        let deleted = w.until.as_deref() == Some("deleted");
        let terminating = w.until.as_deref() == Some("terminating");
        let met = |o: &Option<DynamicObject>| match (o, deleted) {
            (None, deleted) => deleted,
            (Some(_), true) => false,
            (Some(o), false) if terminating => o.metadata.deletion_timestamp.is_some(),
            (Some(o), false) => match (&w.field, &w.equals) {
                (Some(field), Some(want)) => {
                    let v = serde_json::to_value(o).unwrap_or_default();
                    field.split('.').try_fold(&v, |v, k| v.get(k)) == Some(want)
                }
                _ => true,
            },
        };
        // A poll: the workload's client is the user's, and what it waits
        // for may come from any writer.
        let polled = async {
            loop {
                let got = api.get_opt(&name).await.map_err(|e| e.to_string())?;
                if met(&got) {
                    return Ok::<(), String>(());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(timeout, polled)
            .await
            .map_err(|_| format!("not met within {}", w.timeout.as_deref().unwrap_or("30s")))?
    }

    async fn apply(&self, o: &Value) -> Result<(), String> {
        let gvk = gvk(o)?;
        let (ar, namespaced) = self.resolve(&gvk).await?;
        let ns = o.pointer("/metadata/namespace").and_then(Value::as_str);
        let api: Api<DynamicObject> = match (namespaced, ns) {
            (true, ns) => Api::namespaced_with(self.client.clone(), ns.unwrap_or("default"), &ar),
            (false, _) => Api::all_with(self.client.clone(), &ar),
        };
        match o.pointer("/metadata/name").and_then(Value::as_str) {
            Some(name) => {
                let params = PatchParams::apply("ward-campaign").force();
                api.patch(name, &params, &Patch::Apply(o)).await.map(drop)
            }
            None => {
                let obj: DynamicObject =
                    serde_json::from_value(o.clone()).map_err(|e| e.to_string())?;
                api.create(&Default::default(), &obj).await.map(drop)
            }
        }
        .map_err(|e| e.to_string())
    }

    async fn api(&self, t: &Target) -> Result<(Api<DynamicObject>, String), String> {
        let (ar, namespaced) = self.resolve(&gvk_of(&t.api_version, &t.kind)).await?;
        let api = if namespaced {
            let ns = t.namespace.as_deref().unwrap_or("default");
            Api::namespaced_with(self.client.clone(), ns, &ar)
        } else {
            Api::all_with(self.client.clone(), &ar)
        };
        Ok((api, t.name.clone()))
    }

    /// The resource of `gvk`, asking discovery for up to 5s (a CRD applied
    /// a moment ago may not be served yet).
    async fn resolve(&self, gvk: &GroupVersionKind) -> Result<(ApiResource, bool), String> {
        let mut last = String::new();
        for _ in 0..50 {
            match kube::discovery::pinned_kind(&self.client, gvk).await {
                Ok((ar, caps)) => return Ok((ar, caps.scope == Scope::Namespaced)),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!(
            "{}/{} is not served: {last}",
            gvk.api_version(),
            gvk.kind
        ))
    }
}

fn describe(o: &Value) -> String {
    let kind = o.get("kind").and_then(Value::as_str).unwrap_or("?");
    let name = o
        .pointer("/metadata/name")
        .or_else(|| o.pointer("/metadata/generateName"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    format!("{kind} {name}")
}

/// A step on one line, as the history prints it.
pub(crate) fn summary(step: &Step) -> String {
    let t = |t: &Target| {
        let ns = t
            .namespace
            .as_deref()
            .map_or(String::new(), |n| format!("{n}/"));
        format!("{} {ns}{}", t.kind, t.name)
    };
    match step {
        Step::Apply(Objects::Loaded(os)) => {
            let names: Vec<String> = os.iter().map(describe).collect();
            format!("apply {}", names.join(", "))
        }
        Step::Apply(Objects::File(f)) => format!("apply {f}"),
        Step::Apply(Objects::Inline(o)) => format!("apply {}", describe(o)),
        Step::Patch(p) => match &p.subresource {
            Some(sub) => format!("patch {} {sub} {}", t(&p.target), p.patch),
            None => format!("patch {} {}", t(&p.target), p.patch),
        },
        Step::Delete(d) => format!(
            "delete {} ({})",
            t(&d.target),
            d.propagation_policy.as_deref().unwrap_or("Background")
        ),
        Step::Wait(w) => {
            let what = match (&w.field, &w.equals, w.until.as_deref()) {
                (Some(f), Some(v), _) => format!("{f} == {v}"),
                (_, _, Some(u)) => u.to_string(),
                _ => "exists".into(),
            };
            format!("wait for {} {what}", t(&w.target))
        }
        Step::Sleep(d) => format!("sleep {d}"),
        Step::Run(argv) => format!("run {}", argv.join(" ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> Result<Workload, WorkloadError> {
        let path = std::env::temp_dir().join(format!(
            "ward-workload-{}-{}.yaml",
            std::process::id(),
            ward_base::fnv1a(yaml.as_bytes())
        ));
        std::fs::write(&path, yaml).unwrap();
        let loaded = Workload::load(&path);
        let _ = std::fs::remove_file(&path);
        loaded
    }

    #[test]
    fn durations() {
        assert_eq!(duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert!(duration("2h").unwrap_err().contains("no duration"));
        assert!(duration("fast").is_err());
    }

    #[test]
    fn a_workload_loads_and_adds_up_its_sleeps() {
        let w = load(
            "steps:\n- apply: {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- sleep: 1s\n- wait: {apiVersion: v1, kind: ConfigMap, name: a, for: deleted, timeout: 2s}\n- sleep: 500ms\n- delete: {apiVersion: v1, kind: ConfigMap, name: a, propagationPolicy: Foreground}\n",
        )
        .unwrap();
        assert_eq!(w.steps.len(), 5);
        assert_eq!(w.sleeps, Duration::from_millis(1500));
        assert_eq!(summary(&w.steps[0]), "apply ConfigMap a");
        assert_eq!(summary(&w.steps[2]), "wait for ConfigMap a deleted");
    }

    #[test]
    fn malformed_workloads_say_where() {
        let e = |y: &str| load(y).unwrap_err().to_string();
        assert!(
            e("steps:\n- jump: 1\n").contains("jump"),
            "{}",
            e("steps:\n- jump: 1\n")
        );
        assert!(e("steps:\n- sleep: soon\n").contains("step 1: \"soon\" is no duration"));
        assert!(
            e("steps:\n- apply: {kind: ConfigMap}\n")
                .contains("step 1: an object needs apiVersion and kind")
        );
        assert!(e("steps:\n- apply: missing.yaml\n").contains("cannot read"));
        assert!(
            e("steps:\n- delete: {apiVersion: v1, kind: Pod, name: a, propagationPolicy: Now}\n")
                .contains("propagationPolicy")
        );
        assert!(
            e("steps:\n- patch: {apiVersion: v1, kind: Pod, name: a, subresource: a/b, patch: {}}\n")
                .contains("step 1: subresource: a name such as status")
        );
        assert!(e("steps: [").contains("w"));
    }
}
