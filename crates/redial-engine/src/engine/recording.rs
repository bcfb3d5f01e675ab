//! Recording an attempt: decide, let the endpoint learn, count, tell (log event and span), and
//! write the result.
//!
//! Where an attempt's result goes, in order (`attempt.rs` runs the handler; `record` then):
//! 1. **decide, the endpoint learning** (`redial_policy::endpoint::conclude`: the policy's
//!    `decide`, then `Admitted::finish` with what `Observed::of` makes of the result, then what
//!    the endpoint asks applied to the decision): a pause or an open breaker applies to the next
//!    lease at once;
//! 2. **the run slot frees**;
//! 3. **counters and histograms** (`count_attempt`: attempts, decisions, deferrals, dead letters,
//!    durations, latency);
//! 4. **the recording line**: the lease slot is traded for a place in it, so the queue's next
//!    attempt starts while this one is written; every queue is woken;
//! 5. **the attempt record** (`attempt_record`: status or error, redacted headers, bounded body,
//!    category, decision, delay, the reason line) and **`AttemptFacts`**, from which the log event
//!    ("attempt decided") and the spans (the attempt's; the job's when it ends) are built;
//! 6. **the store** (`job_record_attempt`): applied only if the recorder still holds the lease
//!    (`RecordAttemptParams::recording` in `redial-store/src/recording.rs`), with the job's next state
//!    (`plan`: a cancellation requested meanwhile wins over a retry).
//!
//! A recording that fails as `Unavailable` (a PostgreSQL call that timed out: it may still land)
//! is asked again for as long as the lease lasts, so a database blink does not make a job run
//! twice.

use super::attempt::Ran;
use super::facts::{final_state, AttemptFacts};
use super::lease::Slot;
use super::Inner;
use crate::endpoints::Admitted;
use crate::handler::AttemptOutput;
use crate::otel::JobContext;
use crate::redact;
use redial_policy::endpoint::{conclude, Concluded};
use redial_policy::{Action, Decision, JobCounters, Outcome, Policy, Timestamp};
use redial_store::{Attempt, Job, RecordAttemptParams, StoreError, Transition};
use std::sync::Arc;
use std::time::Duration;

/// Where an attempt's result goes, in order: the policy decides; the endpoint learns (so a pause
/// applies to the next lease at once) and the run slot frees; counters and histograms; a place
/// in the recording line (the next attempt may start meanwhile); the log event and the spans, all
/// from one [`AttemptFacts`]; the store, which applies it only if the lease is still held.
pub(super) async fn record(
    inner: &Arc<Inner>,
    job: &Job,
    ran: Ran,
    mut slot: Slot,
    admission: Admitted,
) {
    let now = inner.clock.now();
    let policy = inner.policy_for(job);
    let Concluded {
        decision,
        after,
        finished,
    } = decided(inner, job, &ran, &policy, admission, now);
    drop(slot.run.take());
    // A finished attempt may have taught a pause or opened a breaker: the other nodes hear of
    // it at once.
    if inner.store.is_shared() {
        inner.holds_to_publish.notify_one();
    }
    count_attempt(inner, job, &ran.output, &decision, ran.duration_ms, now);
    if let Some(since) = finished.recovered_from {
        retries_now(inner, &job.endpoint, since, now).await;
    }
    if inner.endpoints.announce_due() {
        inner.announce_endpoints().await;
    }
    let _recording = slot.enter_recording_line().await;
    inner.wake_after_attempt();
    let span = ran.span;
    let attempt = attempt_record(inner, job, ran, &decision);
    tell(
        inner,
        job,
        &attempt,
        &decision,
        &policy,
        after.deferrals,
        span,
        now,
    );
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let owner = inner.config.worker_id.clone();
    let params = RecordAttemptParams {
        attempts: after.failures,
        unknown_attempts: after.unknown_failures,
        deferrals: after.deferrals,
        last_delay_ms: after.last_delay.map(millis),
        ..RecordAttemptParams::of(job, owner, now, attempt, transition(decision.action))
    }
    .with_delivery(job);
    write(inner, job, params, now).await;
}

/// The decision on the attempt, concluded (`redial_policy::endpoint::conclude`): the policy's,
/// with the endpoint's protection in it (a bare 429 at the endpoint's pace; the failure that made
/// its endpoint suspect retried at once, to tell; a quarantined endpoint's failed probe: the job
/// waits for the next probe and keeps its counters, unless it fails for its own sake, which the
/// endpoint tells by the job's seq); the job's counters after it, and what the endpoint learned.
fn decided(
    inner: &Inner,
    job: &Job,
    ran: &Ran,
    policy: &Policy,
    admission: Admitted,
    now: Timestamp,
) -> Concluded {
    let counters = JobCounters {
        failures: job.attempts,
        unknown_failures: job.unknown_attempts,
        deferrals: job.deferrals,
        enqueued_at: job.created_at,
        deadline: job.deadline,
        has_idempotency_key: ran.carried_key,
        method: redial_policy::Method::from_name(&job.request.method),
        last_delay: job.last_delay_ms.map(Duration::from_millis),
    };
    let took = now.saturating_since(ran.started_at);
    let mut jitter = inner.jitter.lock().unwrap_or_else(|p| p.into_inner());
    conclude(
        &ran.output.outcome,
        &counters,
        policy,
        now,
        &mut *jitter,
        |mut observed| {
            observed.job = u64::try_from(job.seq).ok();
            admission.finish(now, observed, took)
        },
    )
}

/// The attempt told: its log event, and its span (and the job's, when it ends) when sampled.
#[allow(clippy::too_many_arguments)]
fn tell(
    inner: &Inner,
    job: &Job,
    attempt: &Attempt,
    decision: &Decision,
    policy: &Policy,
    deferrals: u32,
    span: Option<(JobContext, [u8; 8])>,
    now: Timestamp,
) {
    // The URL's facts cost a parse: only when a log line or a span will carry them.
    let sampled =
        span.filter(|(ctx, _)| inner.config.tracer.as_ref().is_some_and(|t| t.sampled(ctx)));
    if sampled.is_some() || tracing::enabled!(tracing::Level::INFO) {
        let facts = AttemptFacts::new(job, attempt, decision, policy.max_attempts, deferrals, now);
        facts.log();
        if let (Some(tracer), Some((ctx, span_id))) = (&inner.config.tracer, sampled) {
            tracer.record(facts.attempt_span(&ctx, span_id));
            if let Some(job_span) = facts.job_span(&ctx) {
                tracer.record(job_span);
            }
        }
    }
}

/// Writes the record: the store applies it only while the lease is the recorder's, with the
/// callback delivery a finish owes (leased here to start at once when there is room for it).
async fn write(inner: &Arc<Inner>, job: &Job, mut params: RecordAttemptParams, now: Timestamp) {
    // The callback delivery the finish makes goes in leased to this worker and starts at once
    // when its queue and endpoint have room for it now: no lease of its own, no wait for its
    // queue's loop.
    let mut reserved = params
        .callback
        .as_ref()
        .and_then(|d| inner.reserve_delivery(d, now));
    params.callback_leased_until = reserved.as_ref().map(|r| r.until);
    // The request was sent: its result must be recorded, or the job runs again when its lease
    // ends. A store that cannot serve for a moment (a connection that blinked, a database
    // restarting) is asked again, on a fresh connection, for as long as a lease lasts (the
    // heartbeats keep the lease meanwhile, the attempt being still in flight here).
    let give_up = std::time::Instant::now() + inner.config.lease;
    let mut pause = Duration::from_millis(50);
    let mut tries = 0u32;
    loop {
        tries += 1;
        match inner.store.job_record_attempt(params.clone()).await {
            Ok(recorded) => {
                let started = match (recorded.delivery, reserved.take()) {
                    (Some(delivery), Some(places)) => {
                        places.start(inner, delivery);
                        true
                    }
                    // Asked for by no one: cannot happen. It runs once its lease expires.
                    (Some(delivery), None) => {
                        tracing::error!(job = %delivery.id, "a delivery came back leased without places to run it");
                        false
                    }
                    // It went in ready (or was there): the places go back as `reserved` drops.
                    (None, _) => false,
                };
                inner.finished(job, recorded.state, started);
                if tries > 1 {
                    tracing::info!(job = %job.id, tries, "recorded the attempt once the store could serve again");
                }
                return;
            }
            Err(StoreError::LeaseLost(id)) if tries > 1 => {
                // An earlier try may have committed with its answer lost on the way back (a
                // delivery it put in leased here then runs once that lease expires).
                tracing::warn!(job = %id, tries, "the lease was gone when the attempt was recorded again: recorded by an earlier try whose answer was lost, or rescued meanwhile");
                return;
            }
            Err(StoreError::LeaseLost(id)) => {
                tracing::warn!(job = %id, "the lease was lost before the attempt was recorded; the job runs again");
                return;
            }
            Err(StoreError::Unavailable(e)) if std::time::Instant::now() + pause < give_up => {
                tracing::warn!(job = %job.id, error = %e, tries, "recording the attempt failed; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
            Err(e) => {
                tracing::error!(job = %job.id, error = %e, tries, "recording the attempt failed; the lease will expire and the job runs again");
                return;
            }
        }
    }
}

/// The job's next state, as the store applies it.
fn transition(action: Action) -> Transition {
    match action {
        Action::Complete => Transition::Complete,
        Action::Retry { at, .. } => Transition::Retry { at },
        Action::Defer { until, .. } => Transition::Defer { until },
        Action::Dead(category) => Transition::Dead { category },
    }
}

/// The attempt as the job's log keeps it: what was sent back (status or error, redacted
/// headers, a bounded body), what was decided and why.
fn attempt_record(inner: &Inner, job: &Job, ran: Ran, decision: &Decision) -> Attempt {
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let (status, error, handler_reason) = match &ran.output.outcome {
        Outcome::Response(r) => (Some(r.status), None, None),
        Outcome::Transport(e) => (None, Some(e.as_str().to_owned()), None),
        Outcome::Handler(h) => {
            use redial_policy::HandlerOutcome as H;
            match h {
                H::Success => (None, None, None),
                H::Transient { reason } | H::Permanent { reason } | H::Unknown { reason } => {
                    (None, Some("handler".to_owned()), Some(reason.clone()))
                }
                H::DeferUntil { reason, .. } => (None, None, Some(reason.clone())),
            }
        }
    };
    let wait = decision.classification.server_wait;
    Attempt {
        number: job.runs + 1,
        started_at: ran.started_at,
        duration_ms: ran.duration_ms,
        status,
        error,
        error_detail: ran.output.error_detail.or(handler_reason),
        category: decision.classification.category.into(),
        decision: (&decision.action).into(),
        dead_category: match decision.action {
            Action::Dead(c) => Some(c),
            _ => None,
        },
        delay_ms: decision.action.delay().map(millis),
        server_wait_ms: wait.map(|w| millis(w.requested)),
        server_wait_source: wait.map(|w| w.source.to_owned()),
        // Why the decision was made; what held the job before it ran is the attempt's `held`,
        // not part of the reason (one cause stays one line, however the job was held).
        reason: decision.reason.clone(),
        held: ran.held,
        response_headers: redact::headers(&ran.output.response_headers, 32),
        response_body: ran.output.response_body,
        response_body_base64: ran.output.response_body_base64,
        response_body_truncated: ran.output.response_body_truncated,
        worker: inner.config.worker_id.clone(),
    }
}

/// The attempt's counters and histograms.
pub(super) fn count_attempt(
    inner: &Inner,
    job: &Job,
    output: &AttemptOutput,
    decision: &redial_policy::Decision,
    duration_ms: u64,
    now: Timestamp,
) {
    if !inner.config.count_metrics {
        return;
    }
    inner.series.record(
        now,
        crate::series::Sample {
            category: decision.classification.category,
            duration_ms,
            finished: match decision.action {
                Action::Complete => Some(true),
                Action::Dead(_) => Some(false),
                Action::Retry { .. } | Action::Defer { .. } => None,
            },
        },
    );
    let m = &inner.metrics;
    let endpoint = m.endpoint_label(&job.endpoint);
    let status;
    let outcome = match &output.outcome {
        Outcome::Response(r) => {
            status = r.status.to_string();
            status.as_str()
        }
        Outcome::Transport(e) => e.as_str(),
        Outcome::Handler(_) => "handler",
    };
    m.inc(
        &crate::metrics::ATTEMPTS,
        &[
            ("queue", &job.queue),
            ("endpoint", &endpoint),
            ("outcome", outcome),
            ("category", decision.classification.category.as_str()),
        ],
    );
    m.inc(
        &crate::metrics::DECISIONS,
        &[
            ("queue", &job.queue),
            ("decision", decision.action.as_str()),
        ],
    );
    m.observe(
        &crate::metrics::ATTEMPT_DURATION,
        &[("queue", &job.queue), ("endpoint", &endpoint)],
        duration_ms as f64 / 1000.0,
    );
    match decision.action {
        Action::Defer { .. } => {
            let reason = decision
                .classification
                .server_wait
                .map_or("backoff", |w| w.source);
            m.inc(
                &crate::metrics::DEFERRALS,
                &[
                    ("queue", &job.queue),
                    ("endpoint", &endpoint),
                    ("reason", reason),
                ],
            );
        }
        Action::Dead(category) => {
            m.inc(
                &crate::metrics::DEAD_LETTERS,
                &[("category", category.as_str())],
            );
        }
        Action::Complete | Action::Retry { .. } => {}
    }
    if let Some(state) = final_state(decision.action) {
        m.observe(
            &crate::metrics::JOB_LATENCY,
            &[("queue", &job.queue), ("state", state)],
            now.saturating_since(job.created_at).as_secs_f64(),
        );
    }
}

/// The endpoint's outage is over (its breaker closed on probes that succeeded): the retries it
/// failed since `since` are due now, not after the rest of their backoff; slow start paces them.
/// A store error leaves them to their backoff.
async fn retries_now(inner: &Arc<Inner>, endpoint: &str, since: Timestamp, now: Timestamp) {
    let params = redial_store::RetriesNowParams {
        endpoint: endpoint.to_owned(),
        since,
        now,
    };
    match inner.store.endpoint_retries_now(params).await {
        Ok(0) => {}
        Ok(n) => {
            tracing::info!(endpoint, retries = n, since = %since, "outage over: its retries are due now");
            inner.wake_all();
        }
        Err(e) => {
            tracing::warn!(endpoint, error = %e, "outage over, but its retries keep their backoff: the store failed")
        }
    }
}
