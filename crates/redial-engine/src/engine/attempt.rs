//! One attempt: wait for a run slot, run the handler within its time limit, and hand the
//! result to `record`.

use super::lease::{wait_to_start, Slot};
use super::recording::record;
use super::{traceparent_of, Inner};
use crate::endpoints::Admitted;
use crate::handler::AttemptOutput;
use crate::otel::JobContext;
use futures_util::FutureExt;
use redial_policy::{HandlerOutcome, Outcome, Timestamp, TransportError};
use redial_store::Job;
use std::sync::Arc;
use std::time::Duration;

/// One attempt: wait for a run slot, run, decide, record. Holds its lease slot until the outcome
/// is decided, then a place in the recording line until the result is durable.
pub(super) async fn run_attempt(inner: Arc<Inner>, job: Job, mut slot: Slot, admission: Admitted) {
    let Some((run, admission)) = wait_to_start(&inner, &job, &slot, admission).await else {
        return;
    };
    slot.run = Some(run);
    let held = inner.endpoints.held_by(&job.endpoint, job.run_at);
    let started_at = inner.clock.now();
    let started = std::time::Instant::now();
    let limit = job
        .request
        .timeout_ms
        .map_or(inner.config.default_timeout, Duration::from_millis);
    let handler = inner.handler_for(&job.queue);
    // With tracing on, the request carries this attempt's context (`traceparent`).
    let traced = inner.config.tracer.as_ref().map(|t| {
        let ctx = JobContext::of(&job.id.0, traceparent_of(&job));
        let sampled = t.sampled(&ctx);
        let span_id = t.span_id();
        let mut sent = job.clone();
        sent.request
            .headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("traceparent"));
        sent.request
            .headers
            .push(("traceparent".to_owned(), ctx.traceparent(span_id, sampled)));
        (ctx, span_id, sent)
    });
    let sent = traced.as_ref().map_or(&job, |(_, _, j)| j);
    // The HTTP executor enforces the limit itself; this bound (with a second's slack) holds
    // custom handlers to it too. A handler that panics has an unknown outcome: it may have acted.
    let run = std::panic::AssertUnwindSafe(handler.run(sent)).catch_unwind();
    let output = match tokio::time::timeout(limit + Duration::from_secs(1), run).await {
        Ok(Ok(out)) => out,
        Ok(Err(panic)) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            tracing::error!(job = %job.id, panic = %what, "the handler panicked");
            AttemptOutput::from_outcome(Outcome::Handler(HandlerOutcome::Unknown {
                reason: format!("the handler panicked: {what}"),
            }))
        }
        Err(_) => AttemptOutput {
            error_detail: Some(format!(
                "the handler did not return within {}ms",
                limit.as_millis()
            )),
            ..AttemptOutput::from_outcome(Outcome::Transport(TransportError::Timeout))
        },
    };
    let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let ran = Ran {
        output,
        started_at,
        duration_ms,
        held,
        span: traced.map(|(ctx, span_id, _)| (ctx, span_id)),
        carried_key: handler.carries_idempotency_key(&job),
    };
    record(&inner, &job, ran, slot, admission).await;
    inner.lock_in_flight().remove(&job.id);
    inner.attempt_done.notify_waiters();
}

/// What an attempt did, for its record.
pub(super) struct Ran {
    pub(super) output: AttemptOutput,
    pub(super) started_at: Timestamp,
    pub(super) duration_ms: u64,
    /// What held the job before this attempt, if anything.
    pub(super) held: Option<String>,
    /// The job's trace context and this attempt's span id, when tracing is on.
    pub(super) span: Option<(JobContext, [u8; 8])>,
    /// Whether the request carried an idempotency key (then an unknown outcome is safe to repeat).
    pub(super) carried_key: bool,
}

#[cfg(test)]
mod tests {
    use super::super::lease::lease_ahead;
    use super::*;
    use redial_policy::endpoint::{Observed, ResultClass};
    use redial_policy::{decide, Decision, JobCounters, Policy, SplitMix64};

    fn decided(outcome: Outcome) -> (AttemptOutput, Decision) {
        let t0 = Timestamp::from_unix_secs(1_800_000_000);
        let counters = JobCounters {
            failures: 0,
            unknown_failures: 0,
            deferrals: 0,
            enqueued_at: t0,
            deadline: None,
            has_idempotency_key: true,
            method: redial_policy::Method::from_name("POST"),
            last_delay: None,
        };
        let d = decide(
            &outcome,
            &counters,
            &Policy::default(),
            t0,
            &mut SplitMix64::new(7),
        );
        (AttemptOutput::from_outcome(outcome), d)
    }

    fn response(status: u16, headers: &[(&str, &str)]) -> Outcome {
        Outcome::Response(redial_policy::Response {
            status,
            headers: headers
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
                .collect(),
        })
    }

    /// What each kind of result teaches its endpoint: only failures count against its health,
    /// only 429/503/529 and timeouts are overload, and a server-given wait pauses the endpoint
    /// only when the result is a deferral or a transient failure.
    #[test]
    fn what_a_result_teaches_its_endpoint() {
        let now = Timestamp::from_unix_secs(1_800_000_000);
        let cases: Vec<(Outcome, ResultClass, bool, bool)> = vec![
            (response(200, &[]), ResultClass::Success, false, false),
            (
                response(429, &[("retry-after", "30")]),
                ResultClass::Neutral,
                true,
                true,
            ),
            // A 503 that says when to come back is a deferral; one that does not, a failure.
            (
                response(503, &[("retry-after", "5")]),
                ResultClass::Neutral,
                true,
                true,
            ),
            (response(503, &[]), ResultClass::Failure, true, false),
            (response(500, &[]), ResultClass::Failure, false, false),
            (
                response(400, &[("retry-after", "5")]),
                ResultClass::Neutral,
                false,
                false,
            ),
            (
                Outcome::Transport(TransportError::Timeout),
                ResultClass::Failure,
                true,
                false,
            ),
            (
                Outcome::Transport(TransportError::ConnectionRefused),
                ResultClass::Failure,
                false,
                false,
            ),
        ];
        for (outcome, class, overload, waits) in cases {
            let what = format!("{outcome:?}");
            let (output, d) = decided(outcome);
            let o = Observed::of(&output.outcome, &d, now);
            assert_eq!(o.class, class, "{what}");
            assert_eq!(o.overload, overload, "{what}");
            assert_eq!(
                o.server_wait.is_some(),
                waits,
                "{what}: {:?}",
                o.server_wait
            );
        }
    }

    /// A queue leases ahead half its concurrency (none for a queue of one).
    #[test]
    fn lease_ahead_is_half_the_concurrency() {
        assert_eq!(lease_ahead(1), 0);
        assert_eq!(lease_ahead(2), 1);
        assert_eq!(lease_ahead(100), 50);
    }
}
