//! The differential corpus (#63): the same requests sent to ward-apiserver
//! and to the real kube-apiserver, the answers compared field by field
//! after normalisation ([`normalise`]).
//!
//! - `cases/<area>.yaml`: the requests, case by case. Each case runs in a
//!   namespace of its own (`$NS`, made before it and not part of its
//!   answers); `$CASE` is the case's name, for cluster-scoped objects;
//!   `$RV<n>` and `$UID<n>` are step n's answer's resourceVersion and uid.
//! - `recorded/<area>.json`: kube-apiserver's answers, normalised, with a
//!   fingerprint of each case's requests. `upstream/kube/record`
//!   regenerates them (it starts the real server and runs this test with
//!   `WARD_CORPUS_RECORD` naming its kubeconfig).
//! - `WARD_CORPUS_DUMP=<dir>` writes ward-apiserver's answers there in the
//!   same form, to diff against `recorded/`.
//! - `differences.yaml`: every case ward-apiserver answers differently,
//!   with the first field that differs and why. The test fails on a
//!   difference not listed there, and on a listed one that is gone.
//!
//! What is compared per request: the status code, the Content-Type, the
//! Warning headers, and the body (JSON field by field, a watch's events
//! in order, anything else as text).

mod normalise;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use ward_apiserver::{ApiServer, AuthorizationMode, ServerConfig};

use normalise::{Normaliser, first_difference};

/// How long a watch may take to deliver the events a step reads, and a
/// step with `until` to get its status, on the real server (whose
/// controllers take a moment to serve a CRD or a policy).
const PATIENCE: Duration = Duration::from_secs(30);
/// The same on ward-apiserver, which serves what it stored at once: the
/// patience only bounds how long an answer that differs holds a test up.
const PATIENCE_HERE: Duration = Duration::from_secs(2);

/// One area's cases (`cases/<area>.yaml`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Area {
    /// What the area covers, for a reader of the file.
    #[allow(dead_code)]
    about: String,
    cases: Vec<Case>,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    steps: Vec<Step>,
}

/// One request.
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Step {
    /// `METHOD path?query`.
    req: String,
    /// The Content-Type (default `application/json` when there is a body).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    content_type: Option<String>,
    /// The body, as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<Value>,
    /// The body, as these bytes (bad input).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    accept: Option<String>,
    /// A watch: the number of events its answer is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    events: Option<usize>,
    /// Sent again (for up to [`PATIENCE`]) until it answers this status:
    /// a CRD or a policy takes effect in the real server a moment after
    /// it is written. Only the last answer counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    until: Option<u16>,
    /// Sent again (as `until`) until the answer's JSON has this value at
    /// this pointer: `["/status/allowed", true]` once RBAC's cache in the
    /// real server has seen a new binding.
    #[serde(
        default,
        rename = "untilField",
        skip_serializing_if = "Option::is_none"
    )]
    until_field: Option<(String, Value)>,
}

/// An answer, normalised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Answer {
    status: u16,
    #[serde(rename = "contentType")]
    content_type: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
    body: Value,
}

/// One area's answers of kube-apiserver (`recorded/<area>.json`).
#[derive(Debug, Serialize, Deserialize)]
struct Recorded {
    server: String,
    cases: BTreeMap<String, RecordedCase>,
}

#[derive(Debug, Serialize, Deserialize)]
struct RecordedCase {
    /// The fingerprint of the case's requests when they were recorded.
    requests: String,
    answers: Vec<Answer>,
}

/// A listed difference (`differences.yaml`).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Listed {
    /// `area/case`.
    case: String,
    /// The first field that differs: `step N: /path`.
    first: String,
    why: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Every area, by name, in name order.
fn areas() -> Vec<(String, Area)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("cases"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_stem().unwrap().to_str().unwrap().to_string();
            let text = std::fs::read_to_string(&p).unwrap();
            let area: Area =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, area)
        })
        .collect()
}

/// A fingerprint of a case's requests: a recording of other requests is
/// not compared (the test asks for a new recording instead).
fn fingerprint(case: &Case) -> String {
    let text = serde_json::to_string(&case.steps).unwrap();
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a step may name of the answers before it: `$RV<n>` and `$UID<n>`,
/// step n's `metadata.resourceVersion` and `metadata.uid` as answered.
#[derive(Default)]
struct Seen(Vec<(String, String)>);

impl Seen {
    fn push(&mut self, body: &[u8]) {
        let v: Value = serde_json::from_slice(body).unwrap_or_default();
        let field = |f: &str| v["metadata"][f].as_str().unwrap_or_default().to_string();
        self.0.push((field("resourceVersion"), field("uid")));
    }
}

/// `s` with the case's namespace and name, and the versions and uids seen.
fn substitute(s: &str, case: &str, seen: &Seen) -> String {
    let mut s = s
        .replace("$NS", &format!("corpus-{case}"))
        .replace("$CASE", case);
    // From the last step down: `$RV12` before `$RV1`.
    for (i, (rv, uid)) in seen.0.iter().enumerate().rev() {
        s = s
            .replace(&format!("$RV{}", i + 1), rv)
            .replace(&format!("$UID{}", i + 1), uid);
    }
    s
}

/// Send one step; its status, Content-Type, Warnings and body (a watch's:
/// its first `events` lines).
async fn send(
    client: &kube::Client,
    step: &Step,
    case: &str,
    seen: &Seen,
    patience: Duration,
) -> (u16, String, Vec<String>, Bytes) {
    let (method, path) = step
        .req
        .split_once(' ')
        .unwrap_or_else(|| panic!("{case}: `{}` is not `METHOD path`", step.req));
    let body = match (&step.body, &step.raw) {
        (Some(v), None) => Some(substitute(&v.to_string(), case, seen)),
        (None, Some(raw)) => Some(substitute(raw, case, seen)),
        (None, None) => None,
        _ => panic!("{case}: a step has either `body` or `raw`"),
    };
    // A field manager's default name is the User-Agent's first word: the
    // same for both servers whatever the client stack adds.
    let mut req = http::Request::builder()
        .method(method)
        .uri(substitute(path, case, seen))
        .header("user-agent", "ward-corpus/1");
    let content_type = step
        .content_type
        .as_deref()
        .or(body.as_ref().map(|_| "application/json"));
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    if let Some(accept) = &step.accept {
        req = req.header("accept", accept);
    }
    let req = req
        .body(kube::client::Body::from(
            body.unwrap_or_default().into_bytes(),
        ))
        .unwrap();
    let res = client
        .send(req)
        .await
        .unwrap_or_else(|e| panic!("{case}: {}: {e}", step.req));
    let status = res.status().as_u16();
    let header = |name: &str| -> Vec<String> {
        res.headers()
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    };
    let content_type = header("content-type").join(", ");
    let warnings = header("warning");
    let mut body = res.into_body();
    let mut bytes = BytesMut::new();
    let deadline = Instant::now() + patience;
    loop {
        let lines = bytes.iter().filter(|b| **b == b'\n').count();
        if step.events.is_some_and(|n| lines >= n) {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, body.frame()).await {
            Ok(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data() {
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(Some(Err(e))) => panic!("{case}: {}: reading the body: {e}", step.req),
            Ok(None) | Err(_) => break,
        }
    }
    (status, content_type, warnings, bytes.freeze())
}

/// Run `case` on `client`: its answers, normalised.
async fn run_case(client: &kube::Client, case: &Case, patience: Duration) -> Vec<Answer> {
    let namespace = Step {
        req: "POST /api/v1/namespaces".into(),
        content_type: None,
        body: Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "$NS"}})),
        raw: None,
        accept: None,
        events: None,
        until: None,
        until_field: None,
    };
    let mut seen = Seen::default();
    let (status, ..) = send(client, &namespace, &case.name, &seen, patience).await;
    assert_eq!(status, 201, "{}: making its namespace", case.name);
    let mut n = Normaliser::default();
    let mut answers = Vec::new();
    for step in &case.steps {
        let deadline = Instant::now() + patience;
        let (status, content_type, warnings, bytes) = loop {
            let answer = send(client, step, &case.name, &seen, patience).await;
            let field_differs = step.until_field.as_ref().is_some_and(|(at, want)| {
                let body: Value = serde_json::from_slice(&answer.3).unwrap_or_default();
                body.pointer(at) != Some(want)
            });
            let status_differs = step.until.is_some_and(|want| answer.0 != want);
            if (status_differs || field_differs) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            } else {
                break answer;
            }
        };
        seen.push(&bytes);
        let body = if step.events.is_some() {
            let events = bytes
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .map(|l| match serde_json::from_slice(l) {
                    Ok(e) => normalise::event(&mut n, e),
                    Err(_) => Value::String(String::from_utf8_lossy(l).into_owned()),
                })
                .collect();
            Value::Array(events)
        } else {
            match serde_json::from_slice(&bytes) {
                Ok(v) if content_type.contains("json") => n.value(v),
                _ => Value::String(String::from_utf8_lossy(&bytes).into_owned()),
            }
        };
        answers.push(Answer {
            status,
            content_type,
            warnings,
            body,
        });
    }
    answers
}

/// `area/case` -> `step N: /field`, for every case whose answers differ
/// from the recorded ones; the report, area by area.
fn compare(
    areas: &[(String, Area)],
    ours: &BTreeMap<String, Vec<Answer>>,
) -> (BTreeMap<String, String>, String) {
    let mut differ = BTreeMap::new();
    let mut report =
        String::from("area              cases  equal  different   requests  equal  different\n");
    let mut total = (0, 0);
    // Requests: (answered, equal).
    let mut requests = (0, 0);
    for (name, area) in areas {
        let path = root().join("recorded").join(format!("{name}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}: record kube-apiserver's answers with upstream/kube/record",
                path.display()
            )
        });
        let recorded: Recorded = serde_json::from_str(&text).unwrap();
        let mut equal = 0;
        let before = requests;
        for case in &area.cases {
            let key = format!("{name}/{}", case.name);
            let theirs = recorded
                .cases
                .get(&case.name)
                .unwrap_or_else(|| panic!("{key} is not recorded: run upstream/kube/record"));
            assert_eq!(
                theirs.requests,
                fingerprint(case),
                "{key}'s requests changed since they were recorded: run upstream/kube/record"
            );
            let mine = &ours[&key];
            let mut first = None;
            for (i, (a, b)) in theirs.answers.iter().zip(mine).enumerate() {
                let (mut a, b) = (
                    serde_json::to_value(a).unwrap(),
                    serde_json::to_value(b).unwrap(),
                );
                if let Some(body) = a.get_mut("body").and_then(Value::as_object_mut) {
                    normalise::table_ages(body);
                }
                requests.0 += 1;
                match first_difference(&a, &b, "") {
                    None => requests.1 += 1,
                    Some(f) if first.is_none() => {
                        let shown = |v: &Value| {
                            let s = v.pointer(&f).map_or("(absent)".into(), Value::to_string);
                            s.chars().take(160).collect::<String>()
                        };
                        let _ = writeln!(
                            report,
                            "  {key}: step {} ({}): {f}\n    kube-apiserver: {}\n    ward-apiserver: {}",
                            i + 1,
                            area_step(area, &case.name, i),
                            shown(&a),
                            shown(&b)
                        );
                        first = Some(format!("step {}: {f}", i + 1));
                    }
                    Some(_) => {}
                }
            }
            match first {
                Some(f) => {
                    differ.insert(key, f);
                }
                None => equal += 1,
            }
        }
        let cases = area.cases.len();
        total = (total.0 + cases, total.1 + equal);
        let (asked, same) = (requests.0 - before.0, requests.1 - before.1);
        let _ = writeln!(
            report,
            "{name:<17} {cases:>5} {equal:>6} {:>10} {asked:>10} {same:>6} {:>10}",
            cases - equal,
            asked - same
        );
    }
    let _ = writeln!(
        report,
        "all               {:>5} {:>6} {:>10} {:>10} {:>6} {:>10}  ({:.0}% of requests equal)",
        total.0,
        total.1,
        total.0 - total.1,
        requests.0,
        requests.1,
        requests.0 - requests.1,
        100.0 * requests.1 as f64 / requests.0.max(1) as f64
    );
    (differ, report)
}

/// Step `i`'s request line in case `name` of `area`.
fn area_step(area: &Area, name: &str, i: usize) -> String {
    let case = area.cases.iter().find(|c| c.name == name).unwrap();
    case.steps[i].req.clone()
}

/// Every case on one client, keyed `area/case`.
async fn run_all(
    client: &kube::Client,
    areas: &[(String, Area)],
    patience: Duration,
) -> BTreeMap<String, Vec<Answer>> {
    let mut all = BTreeMap::new();
    for (name, area) in areas {
        for case in &area.cases {
            all.insert(
                format!("{name}/{}", case.name),
                run_case(client, case, patience).await,
            );
        }
    }
    all
}

/// Record kube-apiserver's answers (`WARD_CORPUS_RECORD` names its
/// kubeconfig; `upstream/kube/record` sets it).
async fn record(kubeconfig: &str, areas: &[(String, Area)]) {
    let config = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let version: Value = client
        .request(http::Request::get("/version").body(Vec::new()).unwrap())
        .await
        .unwrap();
    let server = format!("kube-apiserver {}", version["gitVersion"].as_str().unwrap());
    let answers = run_all(&client, areas, PATIENCE).await;
    write(&root().join("recorded"), &server, areas, &answers);
}

/// Write `answers` as `<dir>/<area>.json`, one file per area.
fn write(
    dir: &Path,
    server: &str,
    areas: &[(String, Area)],
    answers: &BTreeMap<String, Vec<Answer>>,
) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, area) in areas {
        let cases = area
            .cases
            .iter()
            .map(|c| {
                let recorded = RecordedCase {
                    requests: fingerprint(c),
                    answers: answers[&format!("{name}/{}", c.name)].clone(),
                };
                (c.name.clone(), recorded)
            })
            .collect();
        let recorded = Recorded {
            server: server.to_string(),
            cases,
        };
        let path = dir.join(format!("{name}.json"));
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&recorded).unwrap() + "\n",
        )
        .unwrap();
        println!("recorded {}", path.display());
    }
}

/// ward-apiserver answers the corpus as kube-apiserver did, but for the
/// differences `differences.yaml` lists (each with its reason).
#[tokio::test]
async fn ward_apiserver_answers_the_corpus_as_kube_apiserver_did() {
    let areas = areas();
    if let Some(kubeconfig) = std::env::var_os("WARD_CORPUS_RECORD") {
        return record(kubeconfig.to_str().unwrap(), &areas).await;
    }
    // Authorized as kube-apiserver is (`--authorization-mode=RBAC`); the
    // in-process client is the admin, in system:masters. The recorded
    // server runs as envtest runs it, without kube-controller-manager:
    // namespaces hold no `kube-root-ca.crt`. It listens (on loopback), as
    // discovery names the address a server listens on.
    let config = ServerConfig::default()
        .authorization_mode(AuthorizationMode::Rbac)
        .root_ca_configmaps(false)
        .listen(([127, 0, 0, 1], 0).into());
    let server = ApiServer::start(config).await.unwrap();
    let ours = run_all(&server.client(), &areas, PATIENCE_HERE).await;
    // ward-apiserver's answers beside kube-apiserver's, for a diff.
    if let Some(dir) = std::env::var_os("WARD_CORPUS_DUMP") {
        write(Path::new(&dir), "ward-apiserver", &areas, &ours);
    }
    let (differ, report) = compare(&areas, &ours);
    println!("{report}");
    let text = std::fs::read_to_string(root().join("differences.yaml")).unwrap();
    let listed: Vec<Listed> = serde_saphyr::from_str(&text).unwrap();
    let listed: BTreeMap<String, (String, String)> = listed
        .into_iter()
        .map(|l| (l.case, (l.first, l.why)))
        .collect();
    let mut wrong = Vec::new();
    for (case, first) in &differ {
        match listed.get(case) {
            Some((f, _)) if f == first => {}
            Some((f, _)) => wrong.push(format!("{case}: now differs at {first}, listed at {f}")),
            None => wrong.push(format!("{case}: differs at {first}, not listed")),
        }
    }
    for case in listed.keys().filter(|c| !differ.contains_key(*c)) {
        wrong.push(format!(
            "{case}: listed, and now answers as kube-apiserver did"
        ));
    }
    assert!(
        wrong.is_empty(),
        "differences.yaml is not what the corpus finds:\n{}\n\n{report}",
        wrong.join("\n")
    );
}
