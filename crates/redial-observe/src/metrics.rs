//! Metrics in the Prometheus text format: counters and histograms the engine updates as jobs
//! move, and gauges filled from a snapshot when scraped.
//!
//! Every metric is declared once in [`METRICS`] (name, type, help), so the exposition always
//! lists it, even before its first sample, and the shipped alerting rules and dashboard can be
//! checked against it. Label values come from bounded sets: queue names (configured), states,
//! categories, outcomes (status codes and error kinds), and endpoints, which fold into `other`
//! beyond a configured number.
//!
//! Metric updates are one short lock each; measured, they cost no throughput within noise
//! (BENCHMARKS.md).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric: its name, type, help and (for a histogram) its buckets. Call sites name the
/// constant, so a misspelt metric does not compile, and a histogram carries its own buckets.
#[derive(Debug)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub help: &'static str,
    buckets: &'static [f64],
}

pub const ATTEMPTS: Metric = Metric {
    name: "redial_attempts_total",
    kind: Kind::Counter,
    help: "Attempts made, by queue, endpoint, outcome (HTTP status or error kind) and category.",
    buckets: &[],
};
pub const DECISIONS: Metric = Metric {
    name: "redial_decisions_total",
    kind: Kind::Counter,
    help: "Decisions after attempts, by queue and decision (complete, retry, defer, dead).",
    buckets: &[],
};
pub const DEFERRALS: Metric = Metric {
    name: "redial_deferrals_total",
    kind: Kind::Counter,
    help: "Deferrals, by queue, endpoint and reason (the header that set the wait, or backoff).",
    buckets: &[],
};
pub const DEAD_LETTERS: Metric = Metric {
    name: "redial_dead_letters_total",
    kind: Kind::Counter,
    help: "Jobs that became dead letters, by category.",
    buckets: &[],
};
pub const BUDGET_REJECTIONS: Metric = Metric {
    name: "redial_retry_budget_rejections_total",
    kind: Kind::Counter,
    help: "Retries an endpoint's retry budget held back or failed, by endpoint.",
    buckets: &[],
};
pub const BREAKER_TRANSITIONS: Metric = Metric {
    name: "redial_breaker_transitions_total",
    kind: Kind::Counter,
    help: "Circuit breaker transitions, by endpoint and the state entered.",
    buckets: &[],
};
pub const SCHEDULE_OCCURRENCES: Metric = Metric {
    name: "redial_schedule_occurrences_total",
    kind: Kind::Counter,
    help: "Schedules' occurrences, by outcome: enqueued (as a job, on this node), or dropped (missed, by the schedule's policy, or its queue not configured).",
    buckets: &[],
};
pub const JOBS: Metric = Metric {
    name: "redial_jobs",
    kind: Kind::Gauge,
    help: "Jobs by queue and state (from the store, at most a few seconds old).",
    buckets: &[],
};
pub const DEAD_LETTER_DEPTH: Metric = Metric {
    name: "redial_dead_letter_depth",
    kind: Kind::Gauge,
    help: "Dead letters waiting for people, by queue and category.",
    buckets: &[],
};
pub const OLDEST_DEFERRED_AGE: Metric = Metric {
    name: "redial_oldest_deferred_age_seconds",
    kind: Kind::Gauge,
    help: "Age of the longest-deferred job, by queue.",
    buckets: &[],
};
pub const ENDPOINT_PAUSED: Metric = Metric {
    name: "redial_endpoint_paused",
    kind: Kind::Gauge,
    help: "1 while the endpoint is paused (a server-given wait or a spent quota), else 0.",
    buckets: &[],
};
pub const BREAKER_STATE: Metric = Metric {
    name: "redial_endpoint_breaker_state",
    kind: Kind::Gauge,
    help: "The endpoint's circuit breaker: 0 closed, 1 half-open, 2 open.",
    buckets: &[],
};
pub const ALERT_FIRING: Metric = Metric {
    name: "redial_alert_firing",
    kind: Kind::Gauge,
    help: "1 while the alert rule fires, else 0.",
    buckets: &[],
};
pub const ATTEMPT_DURATION: Metric = Metric {
    name: "redial_attempt_duration_seconds",
    kind: Kind::Histogram,
    help: "Attempt duration, by queue and endpoint.",
    buckets: DURATION_BUCKETS,
};
pub const JOB_LATENCY: Metric = Metric {
    name: "redial_job_latency_seconds",
    kind: Kind::Histogram,
    help: "Enqueue to terminal state, by queue and final state.",
    buckets: LATENCY_BUCKETS,
};

/// Every metric Redial exposes.
pub const METRICS: &[&Metric] = &[
    &ATTEMPTS,
    &DECISIONS,
    &DEFERRALS,
    &DEAD_LETTERS,
    &BUDGET_REJECTIONS,
    &BREAKER_TRANSITIONS,
    &SCHEDULE_OCCURRENCES,
    &JOBS,
    &DEAD_LETTER_DEPTH,
    &OLDEST_DEFERRED_AGE,
    &ENDPOINT_PAUSED,
    &BREAKER_STATE,
    &ALERT_FIRING,
    &ATTEMPT_DURATION,
    &JOB_LATENCY,
];

const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
const LATENCY_BUCKETS: &[f64] = &[
    0.01, 0.1, 1.0, 10.0, 60.0, 300.0, 1800.0, 3600.0, 21600.0, 86400.0,
];

type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Clone)]
struct Histogram {
    buckets: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// Series by [`with_key`]'s key, so that updating one that exists allocates nothing; rendered in
/// (name, labels) order.
#[derive(Debug, Default)]
struct Series {
    counters: HashMap<String, (&'static str, Labels, u64)>,
    histograms: HashMap<String, (&'static str, Labels, Histogram)>,
}

thread_local! {
    static KEY: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Runs `f` with the key of the series (name, labels), written into a buffer reused by this
/// thread. Values are length-prefixed, so no two label sets share a key. `f` must not call back.
fn with_key<R>(name: &str, labels: &[(&'static str, &str)], f: impl FnOnce(&str) -> R) -> R {
    KEY.with(|buffer| {
        let mut key = buffer.borrow_mut();
        key.clear();
        key.push_str(name);
        for (k, v) in labels {
            let _ = write!(key, "\u{0}{k}\u{0}{}\u{0}{v}", v.len());
        }
        f(&key)
    })
}

/// The engine's metrics. Cheap to update: one short lock per update.
#[derive(Debug)]
pub struct Metrics {
    series: Mutex<Series>,
    /// Endpoints that get a label of their own; the rest fold into `other`.
    max_endpoints: usize,
    named: Mutex<HashSet<String>>,
}

/// Gauges as of a scrape.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub gauges: Vec<(&'static str, Labels, f64)>,
}

impl Snapshot {
    pub fn set(&mut self, metric: &Metric, labels: &[(&'static str, &str)], value: f64) {
        self.gauges.push((
            metric.name,
            labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
            value,
        ));
    }
}

impl Metrics {
    /// `configured` endpoints always get their own label; up to `max_endpoints` others do, in
    /// the order they are first seen.
    pub fn new(max_endpoints: usize, configured: impl IntoIterator<Item = String>) -> Metrics {
        let named: HashSet<String> = configured.into_iter().collect();
        Metrics {
            series: Mutex::new(Series::default()),
            max_endpoints: max_endpoints + named.len(),
            named: Mutex::new(named),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Series> {
        self.series.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The label an endpoint gets: its own name, or `other` once the bound is reached.
    pub fn endpoint_label(&self, endpoint: &str) -> String {
        let mut named = self.named.lock().unwrap_or_else(|p| p.into_inner());
        if named.contains(endpoint) {
            return endpoint.to_owned();
        }
        if named.len() < self.max_endpoints {
            named.insert(endpoint.to_owned());
            return endpoint.to_owned();
        }
        "other".to_owned()
    }

    pub fn inc(&self, metric: &Metric, labels: &[(&'static str, &str)]) {
        self.add(metric, labels, 1);
    }

    pub fn add(&self, metric: &Metric, labels: &[(&'static str, &str)], n: u64) {
        let name = metric.name;
        with_key(name, labels, |key| {
            let mut series = self.lock();
            match series.counters.get_mut(key) {
                Some((_, _, v)) => *v += n,
                None => {
                    series
                        .counters
                        .insert(key.to_owned(), (name, owned(labels), n));
                }
            }
        })
    }

    /// Records a duration in seconds in an attempt-duration or job-latency histogram.
    pub fn observe(&self, metric: &Metric, labels: &[(&'static str, &str)], seconds: f64) {
        let (name, buckets) = (metric.name, metric.buckets);
        with_key(name, labels, |key| {
            let mut series = self.lock();
            if !series.histograms.contains_key(key) {
                let h = Histogram {
                    buckets,
                    counts: vec![0; buckets.len()],
                    sum: 0.0,
                    count: 0,
                };
                series
                    .histograms
                    .insert(key.to_owned(), (name, owned(labels), h));
            }
            let Some((_, _, h)) = series.histograms.get_mut(key) else {
                return;
            };
            for (i, le) in h.buckets.iter().enumerate() {
                if seconds <= *le {
                    h.counts[i] += 1;
                }
            }
            h.sum += seconds;
            h.count += 1;
        })
    }

    /// A counter's current value (for tests and the alert evaluator).
    pub fn counter(&self, name: &str, labels: &[(&str, &str)]) -> u64 {
        self.lock()
            .counters
            .values()
            .filter(|(n, l, _)| *n == name && matches(l, labels))
            .map(|(_, _, v)| *v)
            .sum()
    }

    /// The exposition: every declared metric with its HELP and TYPE, the counters and
    /// histograms so far, and the snapshot's gauges.
    pub fn render(&self, snapshot: &Snapshot) -> String {
        let series = self.lock();
        let mut out = String::with_capacity(8192);
        for metric in METRICS {
            let (name, kind, help) = (&metric.name, metric.kind, metric.help);
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {}", kind.as_str());
            match kind {
                Kind::Counter => {
                    let mut rows: Vec<_> = series
                        .counters
                        .values()
                        .filter(|(n, ..)| n == name)
                        .collect();
                    rows.sort_by(|a, b| a.1.cmp(&b.1));
                    for (_, labels, v) in rows {
                        let _ = writeln!(out, "{name}{} {v}", fmt_labels(labels, None));
                    }
                }
                Kind::Gauge => {
                    for (n, labels, v) in &snapshot.gauges {
                        if n == name {
                            let _ = writeln!(out, "{name}{} {}", fmt_labels(labels, None), num(*v));
                        }
                    }
                }
                Kind::Histogram => {
                    let mut rows: Vec<_> = series
                        .histograms
                        .values()
                        .filter(|(n, ..)| n == name)
                        .collect();
                    rows.sort_by(|a, b| a.1.cmp(&b.1));
                    for (_, labels, h) in rows {
                        for (le, c) in h.buckets.iter().zip(&h.counts) {
                            let le = num(*le);
                            let _ =
                                writeln!(out, "{name}_bucket{} {c}", fmt_labels(labels, Some(&le)));
                        }
                        let _ = writeln!(
                            out,
                            "{name}_bucket{} {}",
                            fmt_labels(labels, Some("+Inf")),
                            h.count
                        );
                        let _ =
                            writeln!(out, "{name}_sum{} {}", fmt_labels(labels, None), num(h.sum));
                        let _ =
                            writeln!(out, "{name}_count{} {}", fmt_labels(labels, None), h.count);
                    }
                }
            }
        }
        out
    }
}

fn owned(labels: &[(&'static str, &str)]) -> Labels {
    labels.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

fn matches(have: &Labels, want: &[(&str, &str)]) -> bool {
    want.iter()
        .all(|(k, v)| have.iter().any(|(hk, hv)| hk == k && hv == v))
}

fn num(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// `{a="x",b="y"}` with values escaped as the text format wants; `le` last for buckets.
fn fmt_labels(labels: &Labels, le: Option<&str>) -> String {
    if labels.is_empty() && le.is_none() {
        return String::new();
    }
    let mut out = String::from("{");
    let mut first = true;
    let pairs = labels
        .iter()
        .map(|(k, v)| (*k, v.as_str()))
        .chain(le.map(|l| ("le", l)));
    for (k, v) in pairs {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(k);
        out.push_str("=\"");
        for ch in v.chars() {
            match ch {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_lists_every_metric_and_escapes_labels() {
        let m = Metrics::new(1, ["https://api.stripe.com".to_owned()]);
        assert_eq!(
            m.endpoint_label("https://api.stripe.com"),
            "https://api.stripe.com"
        );
        assert_eq!(m.endpoint_label("https://a.example"), "https://a.example");
        assert_eq!(
            m.endpoint_label("https://b.example"),
            "other",
            "over the bound"
        );
        assert_eq!(m.endpoint_label("https://a.example"), "https://a.example");
        m.inc(&ATTEMPTS, &[("queue", "q\"1"), ("outcome", "503")]);
        m.inc(&ATTEMPTS, &[("queue", "q\"1"), ("outcome", "503")]);
        m.observe(&ATTEMPT_DURATION, &[("queue", "q")], 0.02);
        let mut snap = Snapshot::default();
        snap.set(&JOBS, &[("queue", "q"), ("state", "ready")], 3.0);
        let text = m.render(&snap);
        for Metric { name, kind, .. } in METRICS {
            assert!(
                text.contains(&format!("# TYPE {name} {}", kind.as_str())),
                "{name}"
            );
        }
        assert!(
            text.contains("redial_attempts_total{queue=\"q\\\"1\",outcome=\"503\"} 2"),
            "{text}"
        );
        assert!(text.contains("redial_jobs{queue=\"q\",state=\"ready\"} 3"));
        assert!(text.contains("redial_attempt_duration_seconds_bucket{queue=\"q\",le=\"0.01\"} 0"));
        assert!(text.contains("redial_attempt_duration_seconds_bucket{queue=\"q\",le=\"0.025\"} 1"));
        assert!(text.contains("redial_attempt_duration_seconds_bucket{queue=\"q\",le=\"+Inf\"} 1"));
        assert!(text.contains("redial_attempt_duration_seconds_count{queue=\"q\"} 1"));
        assert_eq!(m.counter("redial_attempts_total", &[("outcome", "503")]), 2);
    }
}
