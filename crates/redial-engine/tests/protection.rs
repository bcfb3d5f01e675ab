//! Endpoint protection never strands healthy work: a flaky endpoint drains, a breaker's probes
//! always end, a panicking handler and a store error give back what they held. Real SQLite file,
//! real HTTP receiver on loopback, manual clock: the tests move time, never wait on it. Before
//! the clock moves, the engine has done everything it can at the current instant
//! (`support::settle`).

mod support;

use async_trait::async_trait;
use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{AttemptOutput, Clock, Handler, QueueConfig};
use redial_policy::endpoint::{BreakerConfig, BudgetConfig, EndpointConfig, WhenExhausted};
use redial_policy::{DeadCategory, Policy, Timestamp};
use redial_store::*;
use redial_test_receiver::{Receiver, Reply};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::{EngineBuilder, TestEngine, T0};

/// These tests' engine: one queue of 8 on [`policy`], with `limits` on every endpoint.
fn harness(limits: EndpointConfig) -> EngineBuilder {
    TestEngine::builder()
        .poll_interval(Duration::from_millis(20))
        .endpoint_defaults(limits)
        .queue("default", QueueConfig::new(8, policy()))
}

fn policy() -> Policy {
    Policy {
        max_attempts: 5,
        server_wait_jitter: Duration::ZERO,
        ..Policy::default()
    }
}

/// How these tests enqueue, count and drain jobs.
impl TestEngine {
    async fn enqueue(&self, id: &str, method: &str, url: &str) {
        self.enqueue_at(id, method, url, self.clock.now()).await;
    }

    async fn enqueue_at(&self, id: &str, method: &str, url: &str, run_at: Timestamp) {
        let job = NewJob {
            ordering: None,
            callback: None,
            id: JobId::from(id),
            queue: "default".into(),
            endpoint: "api".into(),
            request: HttpRequest {
                method: method.into(),
                url: url.into(),
                headers: vec![],
                body: None,
                timeout_ms: None,
                credentials: None,
            },
            idempotency_key: Some(format!("key-{id}")),
            priority: 0,
            run_at,
            deadline: None,
            tags: vec![],
            policy: None,
            created_at: self.clock.now(),
            group: None,
        };
        let out = self.store.job_insert(job).await.expect("insert");
        assert!(matches!(out, InsertOutcome::Inserted(_)));
    }

    /// Jobs per state.
    async fn counts(&self) -> std::collections::BTreeMap<&'static str, u64> {
        let stats = self.store.stats().await.expect("stats");
        let mut out = std::collections::BTreeMap::new();
        for c in stats.by_queue {
            *out.entry(c.state.as_str()).or_default() += c.count;
        }
        out
    }

    /// Lets the engine do all it can at each instant, then moves the clock forward a second,
    /// until no job is left to run. Returns the virtual time it took. Not a timing assertion:
    /// the bound on rounds only stops a broken test from hanging.
    async fn drain(&self, jobs: u64) -> Duration {
        let start = self.clock.now();
        for _ in 0..3_000 {
            self.settle().await;
            let c = self.counts().await;
            let done = c.get("completed").copied().unwrap_or(0)
                + c.get("dead").copied().unwrap_or(0)
                + c.get("cancelled").copied().unwrap_or(0);
            if done == jobs {
                return self.clock.now().saturating_since(start);
            }
            // To the next job's run time, or a second on (for holds that end by themselves).
            let now = self.clock.now();
            let step = now.saturating_add(Duration::from_secs(1));
            let next = self
                .store
                .job_next_run_at("default", now)
                .await
                .expect("next run")
                .filter(|t| *t > now)
                .map_or(step, |t| t.min(step));
            self.clock.set(next);
        }
        panic!("jobs never drained: {:?}", self.counts().await);
    }

    fn endpoint(&self) -> redial_policy::endpoint::EndpointView {
        self.engine
            .endpoint_views(&["api".to_owned()])
            .remove("api")
            .expect("the endpoint has a view")
    }
}

/// Issue 12, observation 2: every job's first call fails (500 or a reset), every retry succeeds.
/// A plain retry loop drains this in one backoff; Redial used to open its breaker and trickle the
/// retries at 1/s. Now the breaker stays closed and every job completes on its second call.
#[tokio::test]
async fn a_flaky_endpoint_drains_with_its_breaker_closed() {
    let rx = Receiver::start().await;
    let h = harness(EndpointConfig::default()).start().await;
    let n = 120;
    for i in 0..n {
        let path = format!("/flaky/{i}");
        rx.script(&path, vec![Reply::status(500), Reply::status(200)]);
        let method = if i % 2 == 0 { "GET" } else { "POST" };
        h.enqueue(&format!("j{i}"), method, &rx.url(&path)).await;
    }
    let took = h.drain(n).await;
    println!("flaky: drained in {took:?} of virtual time");
    let c = h.counts().await;
    assert_eq!(c.get("completed"), Some(&n), "{c:?}");
    for i in 0..n {
        assert_eq!(
            rx.count(&format!("/flaky/{i}")),
            2,
            "job {i}: one failure, one retry"
        );
    }
    let view = h.endpoint();
    assert_eq!(view.breaker, "closed");
    assert!(
        view.breaker_history.is_empty(),
        "the breaker never moved: {:?}",
        view.breaker_history
    );
    assert_eq!(view.in_flight, 0);
    // Safe to repeat (GET, or a POST with its idempotency key): the transient backoff, 2 s base
    // with full jitter, so the retries are due within 2 s; budget holds would add seconds.
    // A plain retry loop drains when the last retry is due: within the 2 s base, and so does
    // Redial. The tenth failure made the endpoint suspect (first attempts held), and its retry
    // went at once as a probe: it passed, so the held first attempts went at the same instant
    // (before, they waited for the earliest retry's random backoff: up to 3 s in all).
    assert!(
        took <= Duration::from_secs(2),
        "drained in {took:?} of virtual time"
    );
    h.stop().await;
}

/// Issue 12, observation 1: the breaker opened and its probes answered 200, 400, 200. The 400
/// ended its probe without counting, so another probe went, the successes closed the breaker, and
/// every job ran to its end.
#[tokio::test]
async fn a_probe_answered_with_a_400_frees_its_place_and_the_breaker_closes() {
    let limits = EndpointConfig {
        breaker: BreakerConfig {
            min_throughput: 2,
            half_open_probes: 3,
            open_for: Duration::from_secs(5),
            ..BreakerConfig::default()
        },
        retry_budget: BudgetConfig {
            enabled: false,
            ..BudgetConfig::default()
        },
        probe_first: false,
        ..EndpointConfig::default()
    };
    let rx = Receiver::start().await;
    let h = harness(limits).start().await;
    // Two jobs whose retries fail again open the breaker.
    for i in 0..2 {
        let path = format!("/down/{i}");
        rx.script(
            &path,
            vec![Reply::status(503), Reply::status(503), Reply::status(200)],
        );
        h.enqueue(&format!("d{i}"), "GET", &rx.url(&path)).await;
    }
    for _ in 0..200 {
        h.settle().await;
        if h.endpoint().breaker == "open" {
            break;
        }
        h.clock.advance(Duration::from_millis(500));
    }
    assert_eq!(h.endpoint().breaker, "open", "{:?}", h.counts().await);
    // While it is open: jobs whose answers are 400 and 200.
    for (i, status) in [400, 200, 400, 200, 200].into_iter().enumerate() {
        let path = format!("/probe/{i}");
        rx.script(&path, vec![Reply::status(status)]);
        h.enqueue(&format!("p{i}"), "GET", &rx.url(&path)).await;
    }
    h.drain(7).await;
    let c = h.counts().await;
    assert_eq!(
        (c.get("completed"), c.get("dead")),
        (Some(&5), Some(&2)),
        "{c:?}"
    );
    let view = h.endpoint();
    assert_eq!(view.breaker, "closed", "{:?}", view.breaker_history);
    assert_eq!(view.in_flight, 0);
    // What may hold the next job now is slow start after the close, never the breaker.
    assert!(
        view.holding
            .as_deref()
            .is_none_or(|h| h.starts_with("slow start")),
        "{:?}",
        view.holding
    );
    h.stop().await;
}

/// A handler that panics on its first call, then succeeds.
#[derive(Debug, Default)]
struct PanicsOnce {
    panicked: AtomicBool,
}

#[async_trait]
impl Handler for PanicsOnce {
    async fn run(&self, _job: &Job) -> AttemptOutput {
        if !self.panicked.swap(true, Ordering::SeqCst) {
            panic!("boom");
        }
        AttemptOutput::from_outcome(redial_policy::Outcome::Handler(
            redial_policy::HandlerOutcome::Success,
        ))
    }
}

/// A panicking handler is an attempt with an unknown outcome: recorded, retried, and its
/// endpoint's admission given back (with probe_first, a lost admission would hold the endpoint).
#[tokio::test]
async fn a_panicking_handler_is_an_unknown_outcome_and_gives_its_admission_back() {
    let h = harness(EndpointConfig::default())
        .executor(Arc::new(PanicsOnce::default()))
        .start()
        .await;
    h.enqueue("p", "POST", "task:panic").await;
    h.drain(1).await;
    let (job, attempts) = h
        .store
        .job_get(&JobId::from("p"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(attempts[0].category, "unknown");
    assert_eq!(
        attempts[0].error_detail.as_deref(),
        Some("the handler panicked: boom")
    );
    assert_eq!(h.endpoint().in_flight, 0);
    h.stop().await;
}

/// Issue 12: `fill` returned on a failed record of a budget-failed retry before it started the
/// jobs it had just leased, which then stayed `running` until rescued, their endpoint's in-flight
/// count never dropping. Now the leased jobs start first, and the retries whose failure could not
/// be recorded go back to the queue at once.
#[tokio::test]
async fn a_store_error_while_failing_retries_strands_no_lease() {
    let limits = EndpointConfig {
        retry_budget: BudgetConfig {
            ratio: 0.0,
            min_per_second: 0.0,
            when_exhausted: WhenExhausted::Fail,
            ..BudgetConfig::default()
        },
        breaker: BreakerConfig {
            enabled: false,
            ..BreakerConfig::default()
        },
        probe_first: false,
        ..EndpointConfig::default()
    };
    let rx = Receiver::start().await;
    let h = harness(limits).start().await;
    // A job whose first call fails: its retry is what the spent budget fails fast.
    rx.script("/r", vec![Reply::status(503)]);
    h.enqueue("retry", "GET", &rx.url("/r")).await;
    h.engine.wake_all();
    let mut due = None;
    for _ in 0..1_000 {
        let (job, _) = h
            .store
            .job_get(&JobId::from("retry"))
            .await
            .expect("get")
            .expect("exists");
        if job.state == JobState::Scheduled {
            due = Some(job.run_at);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let due = due.expect("the first call failed and a retry was scheduled");
    // Fresh jobs due at the same instant, so that one lease takes them with the retry.
    for i in 0..3 {
        let path = format!("/f/{i}");
        rx.script(&path, vec![Reply::status(200)]);
        h.enqueue_at(&format!("f{i}"), "GET", &rx.url(&path), due)
            .await;
    }
    h.store.fail_next_record();
    h.clock.set(due);
    h.drain(4).await;
    assert_eq!(h.store.records_failed(), 1, "the failure happened");
    let c = h.counts().await;
    assert_eq!(
        (c.get("completed"), c.get("dead")),
        (Some(&3), Some(&1)),
        "{c:?}"
    );
    let (job, _) = h
        .store
        .job_get(&JobId::from("retry"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(job.category, Some(DeadCategory::BudgetExhausted));
    assert_eq!(
        job.stalls, 0,
        "given back, not rescued after its lease expired"
    );
    for i in 0..3 {
        let (job, _) = h
            .store
            .job_get(&JobId::from(format!("f{i}").as_str()))
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(
            (job.state, job.stalls),
            (JobState::Completed, 0),
            "f{i} ran on its lease"
        );
    }
    assert_eq!(h.endpoint().in_flight, 0);
    h.stop().await;
}

/// A key counts only when it is sent: with no method configured to carry it, a POST's unknown
/// outcome is not safe to repeat, whatever key the job has.
#[tokio::test]
async fn an_idempotency_key_that_is_never_sent_makes_nothing_safe_to_repeat() {
    let h = harness(EndpointConfig::default()).start().await;
    h.enqueue_at(
        "k",
        "POST",
        "http://127.0.0.1:9/x",
        T0.saturating_add(Duration::from_secs(3600)),
    )
    .await;
    let (job, _) = h
        .store
        .job_get(&JobId::from("k"))
        .await
        .expect("get")
        .expect("exists");
    let default = HttpExecutor::new(HttpConfig::default()).expect("client");
    assert!(
        default.carries_idempotency_key(&job),
        "POST carries it by default"
    );
    let never = HttpExecutor::new(HttpConfig {
        idempotency_methods: vec![],
        ..HttpConfig::default()
    })
    .expect("client");
    assert!(!never.carries_idempotency_key(&job));
    let mut own_header = job.clone();
    own_header
        .request
        .headers
        .push(("Idempotency-Key".into(), "mine".into()));
    assert!(
        never.carries_idempotency_key(&own_header),
        "the job's own header"
    );
    h.stop().await;
}
