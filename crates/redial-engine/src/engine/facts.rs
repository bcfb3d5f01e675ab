//! What one attempt did and what was decided, once, in the names every signal uses. The log
//! event, the attempt's span and the job's closing span are all built from an [`AttemptFacts`],
//! so they cannot disagree: a field added here reaches each of them, and a test holds the log
//! event's fields and the span's attributes to the same list ([`SIGNAL_FIELDS`]).

use crate::otel::{AttrValue, JobContext, SpanData, SpanKind};
use crate::redact;
use redial_policy::{Action, Decision, Timestamp};
use redial_store::{Attempt, Job};
use std::borrow::Cow;
use std::time::Duration;

/// Each fact's name in the log event and in the span (OpenTelemetry semantic conventions where
/// one exists, `redial.*` otherwise). Facts with no value for an attempt are left out of both.
pub(super) const SIGNAL_FIELDS: &[(&str, &str)] = &[
    ("job", "redial.job.id"),
    ("queue", "redial.queue"),
    ("endpoint", "redial.endpoint"),
    ("idempotency_key", "redial.idempotency_key"),
    ("attempt", "redial.attempt"),
    ("attempt_max", "redial.attempt.max"),
    ("deferrals", "redial.deferrals"),
    ("decision", "redial.decision"),
    ("category", "redial.category"),
    ("dead_category", "redial.dead_category"),
    ("delay_ms", "redial.delay_ms"),
    ("server_wait_ms", "redial.server_wait_ms"),
    ("server_wait_source", "redial.server_wait_source"),
    ("held", "redial.held_by"),
    ("http.request.method", "http.request.method"),
    ("server.address", "server.address"),
    ("server.port", "server.port"),
    ("url.full", "url.full"),
    ("http.response.status_code", "http.response.status_code"),
    ("error.type", "error.type"),
    ("duration_ms", "redial.duration_ms"),
    ("reason", "redial.reason"),
];

pub(super) struct AttemptFacts<'a> {
    job: &'a Job,
    attempt: &'a Attempt,
    decision: &'a Decision,
    attempt_max: u32,
    deferrals: u32,
    /// Redacted.
    url: String,
    server_address: String,
    server_port: Option<u16>,
    error_type: Option<Cow<'a, str>>,
    /// When the decision was made (the job's span ends then when the job ends).
    now: Timestamp,
}

impl<'a> AttemptFacts<'a> {
    pub(super) fn new(
        job: &'a Job,
        attempt: &'a Attempt,
        decision: &'a Decision,
        attempt_max: u32,
        deferrals: u32,
        now: Timestamp,
    ) -> Self {
        let parsed = url::Url::parse(&job.request.url).ok();
        let error_type: Option<Cow<'a, str>> = match (attempt.status, &attempt.error) {
            (Some(status), _) if status >= 400 => Some(status.to_string().into()),
            (_, Some(e)) => Some(Cow::Borrowed(e.as_str())),
            _ => None,
        };
        AttemptFacts {
            job,
            attempt,
            decision,
            attempt_max,
            deferrals,
            url: redact::url(&job.request.url),
            server_address: parsed
                .as_ref()
                .and_then(|u| u.host_str().map(str::to_owned))
                .unwrap_or_default(),
            server_port: parsed.as_ref().and_then(|u| u.port_or_known_default()),
            error_type,
            now,
        }
    }

    /// The facts with a value, by their log names (see [`SIGNAL_FIELDS`] for the span's).
    pub(super) fn values(&self) -> Vec<(&'static str, AttrValue)> {
        let (job, a, d) = (self.job, self.attempt, self.decision);
        let s = |v: &str| Some(AttrValue::Str(v.to_owned()));
        let int = |v: u64| Some(AttrValue::Int(i64::try_from(v).unwrap_or(i64::MAX)));
        let values = [
            ("job", s(&job.id.0)),
            ("queue", s(&job.queue)),
            ("endpoint", s(&job.endpoint)),
            (
                "idempotency_key",
                job.idempotency_key.as_deref().and_then(s),
            ),
            ("attempt", int(u64::from(a.number))),
            ("attempt_max", int(u64::from(self.attempt_max))),
            ("deferrals", int(u64::from(self.deferrals))),
            ("decision", s(d.action.as_str())),
            ("category", s(d.classification.category.as_str())),
            ("dead_category", a.dead_category.and_then(|c| s(c.as_str()))),
            ("delay_ms", a.delay_ms.and_then(int)),
            ("server_wait_ms", a.server_wait_ms.and_then(int)),
            (
                "server_wait_source",
                a.server_wait_source.as_deref().and_then(s),
            ),
            ("held", a.held.as_deref().and_then(s)),
            ("http.request.method", s(&job.request.method)),
            ("server.address", s(&self.server_address)),
            (
                "server.port",
                self.server_port.and_then(|p| int(u64::from(p))),
            ),
            ("url.full", s(&self.url)),
            (
                "http.response.status_code",
                a.status.and_then(|c| int(u64::from(c))),
            ),
            ("error.type", self.error_type.as_deref().and_then(s)),
            ("duration_ms", int(a.duration_ms)),
            ("reason", s(&d.reason)),
        ];
        values
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect()
    }

    /// One event per decision, with the span's facts under their log names.
    pub(super) fn log(&self) {
        let (job, a, d) = (self.job, self.attempt, self.decision);
        tracing::info!(
            job = %job.id,
            queue = %job.queue,
            endpoint = %job.endpoint,
            idempotency_key = job.idempotency_key.as_deref(),
            attempt = a.number,
            attempt_max = self.attempt_max,
            deferrals = self.deferrals,
            decision = d.action.as_str(),
            category = d.classification.category.as_str(),
            dead_category = a.dead_category.map(|c| c.as_str()),
            delay_ms = a.delay_ms,
            server_wait_ms = a.server_wait_ms,
            server_wait_source = a.server_wait_source.as_deref(),
            held = a.held.as_deref(),
            "http.request.method" = %job.request.method,
            "server.address" = %self.server_address,
            "server.port" = self.server_port,
            "url.full" = %self.url,
            "http.response.status_code" = a.status,
            "error.type" = self.error_type.as_deref(),
            duration_ms = a.duration_ms,
            reason = %d.reason,
            "attempt decided"
        );
    }

    /// The attempt's span (a client span under the job's).
    pub(super) fn attempt_span(&self, ctx: &JobContext, span_id: [u8; 8]) -> SpanData {
        let attributes = self
            .values()
            .into_iter()
            .map(|(k, v)| (span_name(k), v))
            .collect();
        let start = self.attempt.started_at;
        SpanData {
            trace_id: ctx.trace_id,
            span_id,
            parent_span_id: Some(ctx.job_span_id),
            name: format!("{} {}", self.job.request.method, self.server_address),
            kind: SpanKind::Client,
            start,
            end: start.saturating_add(Duration::from_millis(self.attempt.duration_ms)),
            attributes,
            error: self
                .error_type
                .as_ref()
                .map(|e| format!("{e}: {}", self.decision.reason)),
        }
    }

    /// The job's span, when this decision ends the job: from its enqueue to now.
    pub(super) fn job_span(&self, ctx: &JobContext) -> Option<SpanData> {
        let state = final_state(self.decision.action)?;
        let job = self.job;
        let mut attributes = vec![
            ("redial.state", AttrValue::Str(state.to_owned())),
            (
                "redial.attempts",
                AttrValue::Int(i64::from(self.attempt.number)),
            ),
            (
                "redial.deferrals",
                AttrValue::Int(i64::from(self.deferrals)),
            ),
        ];
        let which = [
            "job",
            "queue",
            "endpoint",
            "idempotency_key",
            "dead_category",
        ];
        attributes.extend(
            self.values()
                .into_iter()
                .filter(|(k, _)| which.contains(k))
                .map(|(k, v)| (span_name(k), v)),
        );
        Some(SpanData {
            trace_id: ctx.trace_id,
            span_id: ctx.job_span_id,
            parent_span_id: ctx.parent_span_id,
            name: format!("redial job {}", job.queue),
            kind: SpanKind::Internal,
            start: job.created_at,
            end: self.now,
            attributes,
            error: matches!(self.decision.action, Action::Dead(_))
                .then(|| self.decision.reason.clone()),
        })
    }
}

/// A fact's span name, from its log name.
fn span_name(log_name: &str) -> &'static str {
    SIGNAL_FIELDS
        .iter()
        .find(|(l, _)| *l == log_name)
        .map_or("redial.unknown", |(_, s)| s)
}

/// The state a decision ends the job in, if it ends it.
pub(super) fn final_state(action: Action) -> Option<&'static str> {
    match action {
        Action::Complete => Some("completed"),
        Action::Dead(_) => Some("dead"),
        Action::Retry { .. } | Action::Defer { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redial_policy::{decide, DeadCategory, JobCounters, Outcome, Policy, SplitMix64};
    use redial_store::{AttemptCategory, AttemptDecision, HttpRequest, JobId, NewJob};
    use std::sync::Arc;
    use std::sync::Mutex as StdMutex;

    /// A job, a dead attempt with every fact set, and the decision behind it.
    fn every_fact() -> (Job, Attempt, Decision) {
        let t0 = Timestamp::from_unix_secs(1_800_000_000);
        let job = NewJob {
            ordering: None,
            callback: None,
            id: JobId::from("j1"),
            queue: "default".into(),
            endpoint: "https://api.example.com".into(),
            request: HttpRequest {
                method: "POST".into(),
                url: "https://api.example.com/v1/x?token=s3cret".into(),
                headers: Vec::new(),
                body: None,
                timeout_ms: None,
                credentials: None,
            },
            idempotency_key: Some("k1".into()),
            priority: 0,
            run_at: t0,
            deadline: None,
            tags: Vec::new(),
            policy: None,
            created_at: t0,
            group: None,
        }
        .into_stored(1);
        let response = redial_policy::Response {
            status: 503,
            headers: vec![("retry-after".into(), "7".into())],
        };
        let counters = JobCounters {
            failures: 2,
            unknown_failures: 0,
            deferrals: 0,
            enqueued_at: t0,
            deadline: None,
            has_idempotency_key: true,
            method: redial_policy::Method::from_name("POST"),
            last_delay: None,
        };
        let mut decision = decide(
            &Outcome::Response(response),
            &counters,
            &Policy::default(),
            t0,
            &mut SplitMix64::new(1),
        );
        // Whatever the policy made of it: this attempt ends the job.
        decision.action = Action::Dead(DeadCategory::TransientExhausted);
        let attempt = Attempt {
            response_body_base64: false,
            response_body_truncated: false,
            number: 3,
            started_at: t0,
            duration_ms: 12,
            status: Some(503),
            error: None,
            error_detail: None,
            category: AttemptCategory::Transient,
            decision: AttemptDecision::Dead,
            dead_category: Some(DeadCategory::TransientExhausted),
            delay_ms: Some(5),
            server_wait_ms: Some(7000),
            server_wait_source: Some("Retry-After".into()),
            reason: "r".into(),
            held: Some("a pause".into()),
            response_headers: Vec::new(),
            response_body: None,
            worker: "w".into(),
        };
        (job, attempt, decision)
    }

    /// Field names of the events seen.
    #[derive(Default)]
    struct Fields(StdMutex<Vec<String>>);

    impl tracing::field::Visit for &Fields {
        fn record_debug(&mut self, field: &tracing::field::Field, _: &dyn std::fmt::Debug) {
            if field.name() != "message" {
                self.0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(field.name().to_owned());
            }
        }
    }

    struct Capture(Arc<Fields>);

    impl tracing::Subscriber for Capture {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut v = &*self.0;
            event.record(&mut v);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// The log event, the attempt's span and `SIGNAL_FIELDS` name the same facts: nothing is in
    /// one signal and missing from another.
    #[test]
    fn the_log_event_and_the_span_carry_the_same_facts() {
        let (job, attempt, decision) = every_fact();
        let facts = AttemptFacts::new(&job, &attempt, &decision, 10, 2, job.created_at);
        let listed: Vec<&str> = SIGNAL_FIELDS.iter().map(|(l, _)| *l).collect();
        let valued: Vec<&str> = facts.values().iter().map(|(k, _)| *k).collect();
        assert_eq!(
            valued, listed,
            "every fact has a value here, in the listed order"
        );

        let seen = Arc::new(Fields::default());
        tracing::subscriber::with_default(Capture(seen.clone()), || facts.log());
        let mut logged = seen.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        logged.sort();
        let mut want: Vec<String> = listed.iter().map(|s| (*s).to_owned()).collect();
        want.sort();
        assert_eq!(logged, want, "the log event's fields are the listed facts");

        let ctx = JobContext::of("j1", None);
        let span = facts.attempt_span(&ctx, [1; 8]);
        let mut spanned: Vec<&str> = span.attributes.iter().map(|(k, _)| *k).collect();
        spanned.sort_unstable();
        let mut want: Vec<&str> = SIGNAL_FIELDS.iter().map(|(_, s)| *s).collect();
        want.sort_unstable();
        assert_eq!(spanned, want, "the span's attributes are the listed facts");
        assert!(
            span.attributes
                .iter()
                .all(|(_, v)| !format!("{v:?}").contains("s3cret")),
            "the URL is redacted"
        );
        let closing = facts.job_span(&ctx).expect("a dead job's span ends");
        assert!(closing
            .attributes
            .iter()
            .any(|(k, v)| *k == "redial.dead_category"
                && matches!(v, AttrValue::Str(s) if s == "transient_exhausted")));
    }
}
