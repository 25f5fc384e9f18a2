//! Every metric Ward records: name, type, labels and help text, in one
//! table ([`METRICS`]) that describes them to the recorder (the `# HELP`
//! lines), sets the reconcile-duration histogram's buckets, and that the
//! metric table of docs/production.md is checked against.
//!
//! Counters whose label values are known in advance are present at zero
//! from the start: the fixed ones once [`register`] runs, the per-kind,
//! per-guard and per-lease ones when a controller or an election starts.

use metrics::Unit;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

/// A metric's type in the Prometheus exposition format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    /// A monotonic count.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Observations in buckets, with their sum and count.
    Histogram,
}

impl MetricType {
    /// The name Prometheus' `# TYPE` line uses.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        }
    }
}

/// One metric Ward records.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Its name.
    pub name: &'static str,
    /// Its type.
    pub kind: MetricType,
    /// Its label names.
    pub labels: &'static [&'static str],
    /// Its `# HELP` text.
    pub help: &'static str,
}

/// `ward_reconciles_total`'s `result` label values.
pub const RECONCILE_RESULTS: &[&str] = &[
    "success",
    "error",
    "skipped",
    "waiting",
    "guard_error",
    "unowned",
    "cancelled",
];
/// `ward_guard_verdicts_total`'s `verdict` label values.
pub const VERDICTS: &[&str] = &["proceed", "wait", "skip"];
/// `ward_stale_triggers_total`'s `source` label values.
pub const STALE_SOURCES: &[&str] = &["owner", "wake"];
/// `ward_consistent_reads_total`'s `from` label values.
pub const CONSISTENT_SOURCES: &[&str] = &["cache", "get"];
/// `ward_occ_*`'s `verb` label values.
pub const OCC_VERBS: &[&str] = &["update", "delete"];
/// `ward_leader_transitions_total`'s `event` label values.
pub const LEADER_EVENTS: &[&str] = &["acquired", "lost", "released"];
/// `ward_leader_renew_failures_total`'s `reason` label values.
pub const RENEW_FAILURES: &[&str] = &["timeout", "conflict", "error"];
/// `ward_leader_late_renewals_total`'s `result` label values.
pub const LATE_RENEWALS: &[&str] = &["conflict", "renewed", "error"];
/// `ward_leader_acquire_attempts_total`'s `result` label values.
pub const ACQUIRE_RESULTS: &[&str] = &["acquired", "held", "conflict", "error"];

/// `ward_shard_handovers_total`'s `event` label values.
pub const SHARD_EVENTS: &[&str] = &["claimed", "released", "withdrawn", "cancelled", "lost"];

/// The reconcile-duration histogram's bucket bounds, in seconds: a
/// reconcile is a few API calls, so 1 ms to 30 s.
pub const RECONCILE_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Every metric Ward records.
pub const METRICS: &[Metric] = &[
    Metric {
        name: "ward_reconciles_total",
        kind: MetricType::Counter,
        labels: &["kind", "result"],
        help: "Reconciles by outcome: success, error (the reconciler's), skipped or waiting (a guard's verdict), guard_error; a sharded controller's unowned (its slot not active here) or cancelled (its slot lost mid-reconcile).",
    },
    Metric {
        name: "ward_reconcile_duration_seconds",
        kind: MetricType::Histogram,
        labels: &["kind"],
        help: "Time from a reconcile's start to its outcome, guards included.",
    },
    Metric {
        name: "ward_guard_verdicts_total",
        kind: MetricType::Counter,
        labels: &["guard", "verdict"],
        help: "Guard verdicts: proceed, wait or skip.",
    },
    Metric {
        name: "ward_queue_depth",
        kind: MetricType::Gauge,
        labels: &["kind"],
        help: "Objects waiting on a guard or backing off after an error (kube-runtime's own queue is not observable).",
    },
    Metric {
        name: "ward_stale_triggers_total",
        kind: MetricType::Counter,
        labels: &["source"],
        help: "Triggers naming a replaced object: owner (a child of a replaced owner woke the live one), wake (a guard wake-up for an object since replaced).",
    },
    Metric {
        name: "ward_fresh_reads_total",
        kind: MetricType::Counter,
        labels: &[],
        help: "Quorum reads sent by guards' fresh reads (coalesced checks share one).",
    },
    Metric {
        name: "ward_fresh_rv_reads_total",
        kind: MetricType::Counter,
        labels: &[],
        help: "One-item quorum LISTs sent to learn the server's current resourceVersion for consistent reads (coalesced checks share one).",
    },
    Metric {
        name: "ward_consistent_reads_total",
        kind: MetricType::Counter,
        labels: &["from"],
        help: "Consistent reads by where they were answered: cache (the watch cache had caught up) or get (a quorum GET).",
    },
    Metric {
        name: "ward_occ_conflicts_total",
        kind: MetricType::Counter,
        labels: &["verb"],
        help: "Optimistic-concurrency conflicts that made OccPatch re-read and decide again.",
    },
    Metric {
        name: "ward_occ_gave_up_total",
        kind: MetricType::Counter,
        labels: &["verb"],
        help: "OccPatch writes abandoned after their deadline or attempt cap.",
    },
    Metric {
        name: "ward_leader",
        kind: MetricType::Gauge,
        labels: &["lease", "identity"],
        help: "1 while this candidate leads, else 0 (a follower shows 0).",
    },
    Metric {
        name: "ward_leader_transitions_total",
        kind: MetricType::Counter,
        labels: &["lease", "identity", "event"],
        help: "Leadership acquired, lost or released.",
    },
    Metric {
        name: "ward_leader_acquire_attempts_total",
        kind: MetricType::Counter,
        labels: &["lease", "identity", "result"],
        help: "Attempts to take the Lease: acquired, held (another candidate holds it), conflict (another wrote first), error.",
    },
    Metric {
        name: "ward_leader_renew_failures_total",
        kind: MetricType::Counter,
        labels: &["lease", "identity", "reason"],
        help: "Renews that failed: timeout (past the lease), conflict, error.",
    },
    Metric {
        name: "ward_leader_late_renewals_total",
        kind: MetricType::Counter,
        labels: &["lease", "identity", "result"],
        help: "Renews abandoned at their deadline that completed later: conflict, renewed (then given back), error.",
    },
    Metric {
        name: "ward_shard_slots_owned",
        kind: MetricType::Gauge,
        labels: &["ring", "identity"],
        help: "Slots (of 128) this sharded member reconciles now.",
    },
    Metric {
        name: "ward_shard_members",
        kind: MetricType::Gauge,
        labels: &["ring", "identity"],
        help: "Live members of the ring in this member's last view, itself included.",
    },
    Metric {
        name: "ward_shard_server_filtering",
        kind: MetricType::Gauge,
        labels: &["ring", "identity"],
        help: "1 when the server applies the shard's shardSelector (KEP-5866), 0 while the member filters client-side.",
    },
    Metric {
        name: "ward_shard_handovers_total",
        kind: MetricType::Counter,
        labels: &["ring", "identity", "event"],
        help: "Slots claimed, released, withdrawn (another member listed them first), lost (the Lease not renewed in time); reconciles cancelled by a hand-over.",
    },
    Metric {
        name: "ward_ready",
        kind: MetricType::Gauge,
        labels: &["check"],
        help: "1 while the readiness check passes, else 0.",
    },
];

/// A `PrometheusBuilder` with Ward's histogram buckets; use it for a
/// recorder you install yourself (Ward's [`install_recorder`](super::install_recorder)
/// does).
#[must_use]
pub fn prometheus_builder() -> PrometheusBuilder {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("ward_reconcile_duration_seconds".into()),
            RECONCILE_BUCKETS,
        )
        // Non-empty constant buckets: this cannot fail.
        .expect("non-empty buckets")
}

/// Describe every metric to the installed recorder (its `# HELP` line) and
/// set the counters with fixed labels to zero. Idempotent; Ward calls it
/// when a recorder is installed through it, and when a controller or an
/// election starts.
pub fn register() {
    for m in METRICS {
        let unit = m.name.ends_with("_seconds").then_some(Unit::Seconds);
        match (m.kind, unit) {
            (MetricType::Counter, _) => metrics::describe_counter!(m.name, m.help),
            (MetricType::Gauge, _) => metrics::describe_gauge!(m.name, m.help),
            (MetricType::Histogram, Some(u)) => metrics::describe_histogram!(m.name, u, m.help),
            (MetricType::Histogram, None) => metrics::describe_histogram!(m.name, m.help),
        }
    }
    for source in STALE_SOURCES {
        metrics::counter!("ward_stale_triggers_total", "source" => *source).increment(0);
    }
    for verb in OCC_VERBS {
        metrics::counter!("ward_occ_conflicts_total", "verb" => *verb).increment(0);
        metrics::counter!("ward_occ_gave_up_total", "verb" => *verb).increment(0);
    }
    metrics::counter!("ward_fresh_reads_total").increment(0);
    metrics::counter!("ward_fresh_rv_reads_total").increment(0);
    for from in CONSISTENT_SOURCES {
        metrics::counter!("ward_consistent_reads_total", "from" => *from).increment(0);
    }
}

/// One controller's per-kind series, registered once when it starts (the
/// handles of the recorder installed then; none installed: they do nothing).
pub(crate) struct ControllerMetrics {
    /// `ward_reconciles_total`, one per [`RECONCILE_RESULTS`] value, in order.
    reconciles: Vec<metrics::Counter>,
    /// `ward_reconcile_duration_seconds`.
    pub(crate) duration: metrics::Histogram,
    /// `ward_queue_depth`.
    pub(crate) queue_depth: metrics::Gauge,
    /// `ward_guard_verdicts_total`: per guard (in the controller's order),
    /// one per [`VERDICTS`] value, in order.
    verdicts: Vec<Vec<metrics::Counter>>,
}

impl ControllerMetrics {
    /// `ward_reconciles_total` for `result` (one of [`RECONCILE_RESULTS`]).
    pub(crate) fn reconciled(&self, result: &str) {
        if let Some(i) = RECONCILE_RESULTS.iter().position(|r| *r == result) {
            self.reconciles[i].increment(1);
        }
    }

    /// `ward_guard_verdicts_total` for the controller's `guard`th guard and
    /// `verdict` (one of [`VERDICTS`]).
    pub(crate) fn verdict(&self, guard: usize, verdict: &str) {
        if let (Some(counters), Some(i)) = (
            self.verdicts.get(guard),
            VERDICTS.iter().position(|v| *v == verdict),
        ) {
            counters[i].increment(1);
        }
    }
}

/// Present a controller's per-kind and per-guard series at zero; the
/// handles it records its per-kind series with.
pub(crate) fn register_controller(kind: &str, guards: &[&'static str]) -> ControllerMetrics {
    register();
    let reconciles = RECONCILE_RESULTS
        .iter()
        .map(|result| {
            let c = metrics::counter!("ward_reconciles_total", "kind" => kind.to_string(), "result" => *result);
            c.increment(0);
            c
        })
        .collect();
    let queue_depth = metrics::gauge!("ward_queue_depth", "kind" => kind.to_string());
    queue_depth.set(0.0);
    // Registering the histogram renders its buckets at zero.
    let duration =
        metrics::histogram!("ward_reconcile_duration_seconds", "kind" => kind.to_string());
    let verdicts = guards
        .iter()
        .map(|guard| {
            VERDICTS
                .iter()
                .map(|verdict| {
                    let c = metrics::counter!("ward_guard_verdicts_total", "guard" => *guard, "verdict" => *verdict);
                    c.increment(0);
                    c
                })
                .collect()
        })
        .collect();
    ControllerMetrics {
        reconciles,
        duration,
        queue_depth,
        verdicts,
    }
}

/// Present an election's per-lease series at zero (the gauge at 0).
pub(crate) fn register_election(lease: &str, identity: &str) {
    register();
    let labels = |k: &'static str, v: &'static str| {
        [
            ("lease", lease.to_string()),
            ("identity", identity.to_string()),
            (k, v.to_string()),
        ]
    };
    metrics::gauge!("ward_leader", "lease" => lease.to_string(), "identity" => identity.to_string())
        .set(0.0);
    for (name, key, values) in [
        ("ward_leader_transitions_total", "event", LEADER_EVENTS),
        (
            "ward_leader_acquire_attempts_total",
            "result",
            ACQUIRE_RESULTS,
        ),
        ("ward_leader_renew_failures_total", "reason", RENEW_FAILURES),
        ("ward_leader_late_renewals_total", "result", LATE_RENEWALS),
    ] {
        for v in values {
            metrics::counter!(name, &labels(key, v)).increment(0);
        }
    }
}

/// Present a shard member's series at zero.
pub(crate) fn register_shard(ring: &str, identity: &str) {
    register();
    let labels = [
        ("ring", ring.to_string()),
        ("identity", identity.to_string()),
    ];
    for gauge in [
        "ward_shard_slots_owned",
        "ward_shard_members",
        "ward_shard_server_filtering",
    ] {
        metrics::gauge!(gauge, &labels).set(0.0);
    }
    for event in SHARD_EVENTS {
        let [r, i] = labels.clone();
        metrics::counter!(
            "ward_shard_handovers_total",
            &[r, i, ("event", event.to_string())]
        )
        .increment(0);
    }
}

/// Set the `ward_ready` gauge of one check.
pub(crate) fn ready_gauge(check: &str, ok: bool) {
    metrics::gauge!("ward_ready", "check" => check.to_string()).set(if ok { 1.0 } else { 0.0 });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_prometheus_safe() {
        let mut names: Vec<_> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METRICS.len(), "a metric listed twice");
        for m in METRICS {
            assert!(m.name.starts_with("ward_"), "{}", m.name);
            assert!(
                m.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}",
                m.name
            );
            assert_eq!(
                m.kind == MetricType::Counter,
                m.name.ends_with("_total"),
                "{}: counters and only counters end in _total",
                m.name
            );
        }
    }

    /// docs/production.md's table lists every metric with its type and labels.
    #[test]
    fn the_production_guide_lists_every_metric() {
        let readme = include_str!("../../../docs/production.md");
        for m in METRICS {
            let labels = if m.labels.is_empty() {
                "-".to_string()
            } else {
                m.labels.join(", ")
            };
            let row = format!("| `{}` | {} | {} |", m.name, m.kind.as_str(), labels);
            assert!(
                readme.lines().any(|l| l.starts_with(&row)),
                "docs/production.md has no row starting {row:?}"
            );
        }
    }
}
