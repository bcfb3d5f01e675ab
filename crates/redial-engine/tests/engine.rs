//! The engine against a real SQLite file and a real HTTP receiver on loopback. Time is a manual
//! clock: a test moves it past a job's next run and wakes the engine, instead of sleeping; to
//! show that something did not happen, it waits until the engine has done all it can at that
//! instant (`support::settle`). Attempts that must still be running when the test acts wait at a
//! gate the test opens, not behind a delay.

mod support;

use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{AttemptOutput, Clock, Handler, QueueConfig};
use redial_policy::endpoint::EndpointConfig;
use redial_policy::{DeadCategory, HandlerOutcome, Outcome, Policy};
use redial_store::{
    Attempt, ControlKind, HttpRequest, InsertOutcome, Job, JobId, JobState, NewJob, Store,
};
use redial_test_receiver::{Misbehaviour, RawServer, Receiver, Reply};
use std::sync::Arc;
use std::time::Duration;
use support::{EngineBuilder, TestEngine, T0};

fn policy() -> Policy {
    Policy {
        max_attempts: 4,
        server_wait_jitter: Duration::ZERO,
        ..Policy::default()
    }
}

/// These tests' engine: queue `default` runs 4 at once and `custom` 2 (where a test's own
/// handler runs), both on [`policy`].
fn harness() -> EngineBuilder {
    let queue = |concurrency| QueueConfig {
        concurrency,
        policy: policy(),
        groups: Default::default(),
    };
    TestEngine::builder()
        .queue("default", queue(4))
        .queue("custom", queue(2))
        // These tests count runs, leases and slots from the first job on; the first contact's
        // ramp (a few in flight until an endpoint has answered) has tests of its own.
        .endpoint_defaults(EndpointConfig {
            first_contact_ramp: false,
            ..Default::default()
        })
}

/// How these tests enqueue and wait for a job.
impl TestEngine {
    async fn enqueue(
        &self,
        id: &str,
        queue: &str,
        method: &str,
        url: &str,
        timeout_ms: Option<u64>,
    ) {
        let job = NewJob {
            id: JobId::from(id),
            queue: queue.into(),
            endpoint: "test".into(),
            request: HttpRequest {
                method: method.into(),
                url: url.into(),
                headers: vec![("content-type".into(), "application/json".into())],
                body: Some("{\"n\":1}".into()),
                timeout_ms,
            },
            idempotency_key: Some(format!("key-{id}")),
            priority: 0,
            run_at: self.clock.now(),
            deadline: None,
            tags: vec![],
            policy: None,
            created_at: self.clock.now(),
            group: None,
        };
        let out = self.store.job_insert(job).await.expect("insert");
        assert!(matches!(out, InsertOutcome::Inserted(_)));
        self.engine.wake(queue);
    }

    /// Polls until the job satisfies `pred`. Not a timing assertion: the bound only stops a
    /// broken test from hanging forever.
    async fn wait_for(
        &self,
        id: &str,
        what: &str,
        pred: impl Fn(&Job) -> bool,
    ) -> (Job, Vec<Attempt>) {
        for _ in 0..3000 {
            if let Some((job, attempts)) = self.store.job_get(&JobId::from(id)).await.expect("get")
            {
                if pred(&job) {
                    return (job, attempts);
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let state = self.store.job_get(&JobId::from(id)).await.expect("get");
        panic!("job {id} never became {what}: {state:?}");
    }

    async fn wait_state(&self, id: &str, state: JobState) -> (Job, Vec<Attempt>) {
        self.wait_for(id, state.as_str(), |j| j.state == state)
            .await
    }

    /// Moves the clock to the job's next run and wakes the engine.
    async fn run_next(&self, id: &str) {
        let (job, _) = self
            .store
            .job_get(&JobId::from(id))
            .await
            .expect("get")
            .expect("exists");
        if job.run_at > self.clock.now() {
            self.clock.set(job.run_at);
        }
        self.engine.wake_all();
    }
}

#[tokio::test]
async fn rate_limited_job_is_deferred_without_spending_an_attempt() {
    let rx = Receiver::start().await;
    rx.script(
        "/send",
        vec![
            Reply::status(429).header("Retry-After", "30"),
            Reply::status(200),
        ],
    );
    let h = harness().start().await;
    h.enqueue("j1", "default", "POST", &rx.url("/send"), None)
        .await;
    let (job, attempts) = h.wait_state("j1", JobState::Deferred).await;
    assert_eq!(job.run_at, T0.saturating_add(Duration::from_secs(30)));
    assert_eq!((job.attempts, job.deferrals), (0, 1));
    let a = &attempts[0];
    assert_eq!(
        (a.status, a.category.as_str(), a.decision.as_str()),
        (Some(429), "defer", "defer")
    );
    assert_eq!(
        (
            a.server_wait_ms,
            a.server_wait_source.as_deref(),
            a.delay_ms
        ),
        (Some(30_000), Some("Retry-After"), Some(30_000))
    );
    assert_eq!(
        a.reason,
        "429 rate limited; Retry-After 30s; deferral 1 of 20"
    );
    assert!(a
        .response_headers
        .iter()
        .any(|(n, v)| n == "retry-after" && v == "30"));

    // Nothing happens before the server's instant, even when woken.
    h.clock.advance(Duration::from_secs(29));
    h.settle().await;
    assert_eq!(rx.count("/send"), 1);

    h.run_next("j1").await;
    let (job, attempts) = h.wait_state("j1", JobState::Completed).await;
    assert_eq!((job.attempts, job.deferrals, job.runs), (0, 1, 2));
    assert_eq!(attempts[1].decision, "complete");
    assert_eq!(rx.count("/send"), 2);
    h.stop().await;
}

#[tokio::test]
async fn outage_then_recovery_retries_with_backoff_and_the_same_idempotency_key() {
    let rx = Receiver::start().await;
    rx.script(
        "/charge",
        vec![Reply::status(503), Reply::status(502), Reply::status(201)],
    );
    let h = harness().start().await;
    h.enqueue("pay", "default", "POST", &rx.url("/charge"), None)
        .await;
    // Full jitter may choose no delay at all, so a retry can already have run when the test
    // looks: each wait accepts any later state.
    h.wait_for("pay", "retrying once", |j| {
        j.attempts >= 1 && matches!(j.state, JobState::Scheduled | JobState::Completed)
    })
    .await;
    h.run_next("pay").await;
    h.wait_for("pay", "retrying twice", |j| {
        j.attempts >= 2 && matches!(j.state, JobState::Scheduled | JobState::Completed)
    })
    .await;
    h.run_next("pay").await;
    let (job, attempts) = h.wait_state("pay", JobState::Completed).await;
    assert_eq!(job.attempts, 2);
    assert_eq!(
        attempts.iter().map(|a| a.status).collect::<Vec<_>>(),
        [Some(503), Some(502), Some(201)]
    );
    assert!(
        attempts[0].delay_ms.expect("a delay") <= 2_000,
        "first backoff within its 2s schedule"
    );
    let keys: Vec<_> = rx
        .received("/charge")
        .iter()
        .map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert_eq!(
        keys,
        vec![Some("key-pay".to_owned()); 3],
        "the same key on every attempt"
    );
    h.stop().await;
}

#[tokio::test]
async fn permanent_and_exhausted_failures_land_in_their_categories() {
    let rx = Receiver::start().await;
    rx.script(
        "/bad",
        vec![Reply::status(400).body("{\"error\":\"invalid amount\"}")],
    );
    rx.script("/flaky", vec![Reply::status(500)]);
    let h = harness().start().await;
    h.enqueue("bad", "default", "POST", &rx.url("/bad"), None)
        .await;
    h.enqueue("flaky", "default", "POST", &rx.url("/flaky"), None)
        .await;
    let (job, attempts) = h.wait_state("bad", JobState::Dead).await;
    assert_eq!(job.category, Some(DeadCategory::Permanent));
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].response_body.as_deref(),
        Some("{\"error\":\"invalid amount\"}")
    );
    assert_eq!(rx.count("/bad"), 1, "a 400 is never retried");

    for n in 1..=2 {
        // A retry due at once (full jitter may choose no delay) may already have run.
        h.wait_for("flaky", "retrying", |j| {
            j.attempts >= n && matches!(j.state, JobState::Scheduled | JobState::Dead)
        })
        .await;
        h.run_next("flaky").await;
    }
    let (job, attempts) = h.wait_state("flaky", JobState::Dead).await;
    assert_eq!(
        (job.category, job.unknown_attempts),
        (Some(DeadCategory::UnknownExhausted), 3)
    );
    assert!(attempts[0].delay_ms.expect("delay") <= 30_000);
    assert!(job
        .last_reason
        .expect("reason")
        .contains("unknown outcome 3 of 3"));
    h.stop().await;
}

#[tokio::test]
async fn transport_failures_are_told_apart() {
    let reset = RawServer::start(Misbehaviour::Reset).await;
    let garbage = RawServer::start(Misbehaviour::Garbage).await;
    let truncated = RawServer::start(Misbehaviour::Truncated).await;
    let rx = Receiver::start().await;
    rx.script(
        "/slow",
        vec![Reply::status(200).delay(Duration::from_secs(5))],
    );
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let a = l.local_addr().expect("addr");
        drop(l);
        // A secret in the query string: the client's error text names the URL, the record
        // must not.
        format!("http://{a}/?api_key=SECRET-IN-QUERY")
    };
    let h = harness().start().await;
    h.enqueue("reset", "default", "GET", &reset.url("/"), None)
        .await;
    h.enqueue("garbage", "default", "GET", &garbage.url("/"), None)
        .await;
    h.enqueue("truncated", "default", "GET", &truncated.url("/"), None)
        .await;
    h.enqueue("slow", "default", "GET", &rx.url("/slow"), Some(200))
        .await;
    h.enqueue("refused", "default", "GET", &closed, None).await;
    for (id, error, category) in [
        ("reset", "connection-reset", "transient"),
        ("garbage", "malformed-response", "unknown"),
        ("truncated", "truncated-response", "unknown"),
        ("slow", "timeout", "transient"),
        ("refused", "connection-refused", "transient"),
    ] {
        let (_, attempts) = h.wait_for(id, "attempted", |j| j.runs >= 1).await;
        let a = &attempts[0];
        assert_eq!(
            (a.error.as_deref(), a.category.as_str()),
            (Some(error), category),
            "{id}: {a:?}"
        );
        assert_eq!(a.decision, "retry", "{id}");
        assert!(a.error_detail.is_some(), "{id} keeps the error's own words");
        assert!(
            !a.error_detail
                .as_deref()
                .unwrap_or("")
                .contains("SECRET-IN-QUERY"),
            "{id}: {a:?}"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let rx = Receiver::start().await;
    rx.script("/old", vec![Reply::status(302).header("Location", "/new")]);
    let h = harness().start().await;
    h.enqueue("redir", "default", "GET", &rx.url("/old"), None)
        .await;
    let (_, attempts) = h.wait_for("redir", "attempted", |j| j.runs >= 1).await;
    assert_eq!(
        (attempts[0].status, attempts[0].category.as_str()),
        (Some(302), "unknown")
    );
    assert!(attempts[0]
        .response_headers
        .iter()
        .any(|(n, v)| n == "location" && v == "/new"));
    assert!(attempts[0].reason.starts_with("302 redirect"));
    assert_eq!(rx.count("/new"), 0);
    h.stop().await;
}

#[tokio::test]
async fn private_destinations_are_refused_unless_allowed() {
    let rx = Receiver::start().await;
    let h = harness().allow_private_networks(false).start().await;
    h.enqueue("ssrf", "default", "POST", &rx.url("/internal"), None)
        .await;
    h.enqueue(
        "ssrf-name",
        "default",
        "POST",
        &format!("http://localhost:{}/internal", rx.addr().port()),
        None,
    )
    .await;
    // IPv6 spellings of loopback: IPv4-compatible and 6to4 (issue 13).
    let port = rx.addr().port();
    h.enqueue(
        "ssrf-v4compat",
        "default",
        "POST",
        &format!("http://[::127.0.0.1]:{port}/internal"),
        None,
    )
    .await;
    h.enqueue(
        "ssrf-6to4",
        "default",
        "POST",
        &format!("http://[2002:7f00:1::]:{port}/internal"),
        None,
    )
    .await;
    for id in ["ssrf", "ssrf-name", "ssrf-v4compat", "ssrf-6to4"] {
        let (job, attempts) = h.wait_state(id, JobState::Dead).await;
        assert_eq!(job.category, Some(DeadCategory::Permanent));
        assert_eq!(
            attempts[0].error.as_deref(),
            Some("destination-refused"),
            "{id}"
        );
    }
    assert_eq!(
        rx.count("/internal"),
        0,
        "no request reached the private address"
    );
    h.stop().await;
}

#[derive(Debug)]
struct Typed;

#[async_trait::async_trait]
impl Handler for Typed {
    async fn run(&self, job: &Job) -> AttemptOutput {
        let outcome = match job.request.url.as_str() {
            "task:ok" => HandlerOutcome::Success,
            "task:later" if job.deferrals == 0 => HandlerOutcome::DeferUntil {
                until: T0.saturating_add(Duration::from_secs(90)),
                reason: "quota resets at :90".into(),
            },
            "task:later" => HandlerOutcome::Success,
            _ => HandlerOutcome::Permanent {
                reason: "unknown task".into(),
            },
        };
        AttemptOutput::from_outcome(Outcome::Handler(outcome))
    }
}

#[tokio::test]
async fn custom_handlers_return_typed_outcomes() {
    let h = harness()
        .allow_private_networks(false)
        .handler("custom", Arc::new(Typed))
        .start()
        .await;
    h.enqueue("ok", "custom", "RUN", "task:ok", None).await;
    h.enqueue("later", "custom", "RUN", "task:later", None)
        .await;
    h.enqueue("nope", "custom", "RUN", "task:nope", None).await;
    h.wait_state("ok", JobState::Completed).await;
    let (job, attempts) = h.wait_state("nope", JobState::Dead).await;
    assert_eq!(job.category, Some(DeadCategory::Permanent));
    assert_eq!(attempts[0].error_detail.as_deref(), Some("unknown task"));
    let (job, _) = h.wait_state("later", JobState::Deferred).await;
    assert_eq!(job.run_at, T0.saturating_add(Duration::from_secs(90)));
    h.run_next("later").await;
    h.wait_state("later", JobState::Completed).await;
    h.stop().await;
}

#[tokio::test]
async fn cancel_while_running_ends_cancelled() {
    let rx = Receiver::start().await;
    rx.script("/fail", vec![Reply::status(503)]);
    let (gated, mut entered) = gated();
    let h = harness().handler("custom", gated.clone()).start().await;
    h.enqueue("c", "custom", "POST", &rx.url("/fail"), None)
        .await;
    // The attempt is running, held at its gate, when the cancellation comes; a 503 would
    // otherwise schedule a retry.
    assert_eq!(entered.recv().await.expect("entered"), "c");
    h.store
        .job_cancel(&JobId::from("c"), h.clock.now())
        .await
        .expect("cancel");
    gated.open("c");
    let (job, attempts) = h.wait_state("c", JobState::Cancelled).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, Some(503));
    assert!(job
        .last_reason
        .expect("reason")
        .ends_with("cancelled while running"));
    h.stop().await;
}

#[tokio::test]
async fn shutdown_gives_back_leases_of_attempts_that_do_not_finish() {
    let hang = RawServer::start(Misbehaviour::Hang).await;
    let h = harness().start().await;
    h.enqueue("stuck", "default", "POST", &hang.url("/"), Some(60_000))
        .await;
    h.wait_state("stuck", JobState::Running).await;
    let running = {
        let mut h = h;
        let r = h.running.take().expect("running");
        let report = r.shutdown(Duration::from_millis(200)).await;
        assert_eq!(report.released, 1);
        h
    };
    let (job, attempts) = running.wait_state("stuck", JobState::Ready).await;
    assert_eq!((job.attempts, job.stalls, job.lease_owner), (0, 0, None));
    assert!(attempts.is_empty(), "an abandoned attempt is not counted");
}

#[tokio::test]
async fn expired_leases_are_rescued_and_run_again() {
    let rx = Receiver::start().await;
    let h = harness().start().await;
    // Another worker leased the job and died: its lease runs out at T0 + 30s.
    let job = NewJob {
        id: JobId::from("orphan"),
        queue: "elsewhere".into(),
        endpoint: "test".into(),
        request: HttpRequest {
            method: "POST".into(),
            url: rx.url("/orphan"),
            headers: vec![],
            body: None,
            timeout_ms: None,
        },
        idempotency_key: Some("k".into()),
        priority: 0,
        run_at: T0,
        deadline: None,
        tags: vec![],
        policy: None,
        created_at: T0,
        group: None,
    };
    h.store.job_insert(job).await.expect("insert");
    let leased = h
        .store
        .job_lease_available(redial_store::LeaseParams {
            queue: "elsewhere".into(),
            limit: 1,
            owner: "dead-worker".into(),
            now: T0,
            lease_until: T0.saturating_add(Duration::from_secs(30)),
        })
        .await
        .expect("lease");
    assert_eq!(leased.len(), 1);
    h.clock.advance(Duration::from_secs(31));
    let (job, _) = h.wait_state("orphan", JobState::Ready).await;
    assert_eq!(job.stalls, 1);
    assert!(job.last_reason.expect("reason").contains("lease expired"));
    h.stop().await;
}

/// A handler for the "custom" queue (concurrency 2) whose attempts wait at a gate the test
/// opens, then call the job's URL over HTTP. It counts attempts running at once.
#[derive(Debug)]
struct Gated {
    http: HttpExecutor,
    gates: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
    entered: tokio::sync::mpsc::UnboundedSender<String>,
    running: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

impl Gated {
    fn gate(&self, id: &str) -> Arc<tokio::sync::Semaphore> {
        self.gates
            .lock()
            .expect("gates")
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(0)))
            .clone()
    }

    fn open(&self, id: &str) {
        self.gate(id).add_permits(1);
    }
}

#[async_trait::async_trait]
impl Handler for Gated {
    async fn run(&self, job: &Job) -> AttemptOutput {
        use std::sync::atomic::Ordering::SeqCst;
        let now = self.running.fetch_add(1, SeqCst) + 1;
        self.most.fetch_max(now, SeqCst);
        let _ = self.entered.send(job.id.0.clone());
        let _ = self.gate(&job.id.0).acquire().await.expect("gate").forget();
        let out = self.http.run(job).await;
        self.running.fetch_sub(1, SeqCst);
        out
    }
}

/// One job through the endpoint first: its first request goes alone (probe first), and these
/// tests are about what comes after.
async fn warm_up(
    h: &TestEngine,
    g: &Gated,
    rx: &Receiver,
    entered: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    g.open("warm");
    h.enqueue("warm", "custom", "POST", &rx.url("/ok"), None)
        .await;
    h.wait_state("warm", JobState::Completed).await;
    assert_eq!(entered.recv().await.expect("entered"), "warm");
}

fn gated() -> (Arc<Gated>, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let http = HttpExecutor::new(HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    })
    .expect("http client");
    let g = Gated {
        http,
        gates: Default::default(),
        entered: tx,
        running: Default::default(),
        most: Default::default(),
    };
    (Arc::new(g), rx)
}

/// A wake-up that comes while a lease is under way and cannot start one of its own (that lease
/// holds every free slot) is not lost: the lease under way may have read before the job the
/// wake-up is for, so the queue leases again instead of waiting for its next poll (an hour here;
/// a second by default). Looked for after a benchmark on PostgreSQL once gave 205 ms as the 99th
/// percentile from enqueue to first attempt on an idle queue: its poll interval is 200 ms.
#[tokio::test(flavor = "current_thread")]
async fn a_wake_up_during_a_lease_is_not_lost() {
    let rx = Receiver::start().await;
    let mut h = harness().poll_interval(Duration::from_secs(3600)).build();
    let (reached, go) = h.store.hold_next_lease("default");
    h.start().await;
    // The queue's first lease found nothing and waits before it returns.
    reached.await.expect("the first lease");
    h.enqueue("j1", "default", "POST", &rx.url("/ok"), None)
        .await;
    // One thread (the flavour is written out: on more, the loop could take the wake-up only
    // after the lease returned, and the test would pass without the fix): the queue's loop
    // takes the wake-up while the lease is out.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    go.send(()).expect("the lease waits");
    let (_, attempts) = h.wait_state("j1", JobState::Completed).await;
    assert_eq!(attempts.len(), 1);
    h.stop().await;
}

/// A lease that finds nothing starts no other while one is still out: that one will say whether
/// there is more. Before, the queue leased again at once with the slot the empty lease gave back,
/// and again, for as long as the other was out (a review counted 1,241 leases in half a second).
/// The bound below only limits how long the test looks for extra leases: with the fix there are
/// none however long it looks.
#[tokio::test(flavor = "current_thread")]
async fn an_empty_lease_starts_no_other_while_one_is_out() {
    let rx = Receiver::start().await;
    let (gated, mut entered) = gated();
    // Polls an hour apart: every lease here follows a wake-up or another lease.
    let h = harness()
        .handler("custom", gated.clone())
        .poll_interval(Duration::from_secs(3600))
        .start()
        .await;
    warm_up(&h, &gated, &rx, &mut entered).await;
    // g runs and waits at its gate, holding one of the queue's three lease slots.
    h.enqueue("g", "custom", "POST", &rx.url("/ok"), None).await;
    assert_eq!(entered.recv().await.expect("entered"), "g");
    // The next lease takes the two free slots, finds nothing, and is held out.
    let (reached, go) = h.store.hold_next_lease("custom");
    h.engine.wake("custom");
    reached.await.expect("the held lease");
    let (before, _) = h.store.leases("custom");
    // g ends: its slot frees and the queue is woken; one lease starts with it and finds nothing.
    gated.open("g");
    h.wait_state("g", JobState::Completed).await;
    let one_more_done = h
        .store
        .wait_leases("custom", Duration::from_secs(60), |(n, out)| {
            n > before && out == 1
        })
        .await;
    assert!(
        one_more_done,
        "no lease after g ended: {:?}",
        h.store.leases("custom")
    );
    let (after, _) = h.store.leases("custom");
    let again = h
        .store
        .wait_leases("custom", Duration::from_millis(500), |(n, _)| n > after)
        .await;
    assert!(
        !again,
        "the queue leased again while the held lease was out: {:?} (it was {after})",
        h.store.leases("custom")
    );
    go.send(()).expect("the lease waits");
    h.stop().await;
}

/// A queue leases jobs ahead of its free run slots (half its concurrency), but never runs more
/// attempts at once than its concurrency.
#[tokio::test]
async fn jobs_leased_ahead_wait_for_a_run_slot() {
    let rx = Receiver::start().await;
    let (gated, mut entered) = gated();
    let h = harness().handler("custom", gated.clone()).start().await;
    warm_up(&h, &gated, &rx, &mut entered).await;
    for id in ["a", "b"] {
        h.enqueue(id, "custom", "POST", &rx.url("/ok"), None).await;
    }
    let mut first = vec![
        entered.recv().await.expect("entered"),
        entered.recv().await.expect("entered"),
    ];
    first.sort();
    assert_eq!(first, ["a", "b"]);
    h.enqueue("c", "custom", "POST", &rx.url("/ok"), None).await;
    // Leased while both run slots are taken: it waits, its handler not called.
    h.wait_state("c", JobState::Running).await;
    let got = entered.try_recv();
    assert!(got.is_err(), "c started beyond the concurrency: {got:?}");
    gated.open("a");
    assert_eq!(entered.recv().await.expect("entered"), "c");
    gated.open("b");
    gated.open("c");
    for id in ["a", "b", "c"] {
        let (_, attempts) = h.wait_state(id, JobState::Completed).await;
        assert_eq!(attempts.len(), 1);
    }
    assert_eq!(gated.most.load(std::sync::atomic::Ordering::SeqCst), 2);
    h.stop().await;
}

/// A job leased ahead does not start once a result of its endpoint has paused it: it goes back,
/// unsent and uncounted, and runs when the pause is over.
#[tokio::test]
async fn a_job_leased_ahead_is_given_back_when_its_endpoint_pauses() {
    let rx = Receiver::start().await;
    rx.script(
        "/limited",
        vec![
            Reply::status(429).header("Retry-After", "60"),
            Reply::status(200),
        ],
    );
    let (gated, mut entered) = gated();
    let h = harness().handler("custom", gated.clone()).start().await;
    warm_up(&h, &gated, &rx, &mut entered).await;
    h.enqueue("limited", "custom", "POST", &rx.url("/limited"), None)
        .await;
    h.enqueue("slow", "custom", "POST", &rx.url("/ok"), None)
        .await;
    entered.recv().await.expect("entered");
    entered.recv().await.expect("entered");
    h.enqueue("ahead", "custom", "POST", &rx.url("/ok"), None)
        .await;
    h.wait_state("ahead", JobState::Running).await;
    // The 429 pauses the endpoint (all three jobs share it) and frees a run slot.
    gated.open("limited");
    let (job, attempts) = h
        .wait_for("ahead", "given back", |j| j.state == JobState::Ready)
        .await;
    assert!(attempts.is_empty(), "no attempt was made");
    assert_eq!((job.runs, job.attempts, job.stalls), (0, 0, 0));
    assert_eq!(rx.count("/ok"), 1, "only the warm-up");
    assert!(entered.try_recv().is_err(), "the handler was not called");

    gated.open("slow");
    h.wait_state("slow", JobState::Completed).await;
    h.clock.advance(Duration::from_secs(61));
    h.engine.wake_all();
    assert_eq!(entered.recv().await.expect("entered"), "ahead");
    gated.open("ahead");
    gated.open("limited");
    let (_, attempts) = h.wait_state("ahead", JobState::Completed).await;
    assert_eq!(attempts.len(), 1);
    h.wait_state("limited", JobState::Completed).await;
    h.stop().await;
}

/// A shutdown gives back jobs leased ahead at once, unstarted, and counts them as released.
#[tokio::test]
async fn shutdown_gives_back_jobs_leased_ahead_unstarted() {
    let rx = Receiver::start().await;
    let (gated, mut entered) = gated();
    let mut h = harness().handler("custom", gated.clone()).start().await;
    warm_up(&h, &gated, &rx, &mut entered).await;
    for id in ["a", "b"] {
        h.enqueue(id, "custom", "POST", &rx.url("/ok"), None).await;
    }
    entered.recv().await.expect("entered");
    entered.recv().await.expect("entered");
    h.enqueue("c", "custom", "POST", &rx.url("/ok"), None).await;
    h.wait_state("c", JobState::Running).await;
    let report = h
        .running
        .take()
        .expect("running")
        .shutdown(Duration::from_millis(200))
        .await;
    assert_eq!((report.finished, report.released), (0, 3));
    for id in ["a", "b", "c"] {
        let (job, attempts) = h.wait_state(id, JobState::Ready).await;
        assert!(attempts.is_empty());
        assert_eq!((job.runs, job.stalls, job.lease_owner), (0, 0, None));
    }
    assert!(entered.try_recv().is_err(), "c was not started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_paused_by_hand_leases_nothing_until_resumed() {
    let rx = Receiver::start().await;
    let h = harness().start().await;
    let pause = h
        .engine
        .pause(
            ControlKind::Queue,
            "custom",
            None,
            "deploying the receiver".into(),
        )
        .await
        .expect("pause");
    assert_eq!(pause.since, T0);
    h.enqueue("waits", "custom", "POST", &rx.url("/ok"), None)
        .await;
    h.enqueue("goes", "default", "POST", &rx.url("/ok"), None)
        .await;
    h.wait_state("goes", JobState::Completed).await;
    h.clock.set(T0.saturating_add(Duration::from_secs(3600)));
    h.settle().await;
    let (job, attempts) = h
        .store
        .job_get(&JobId::from("waits"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!((job.state, attempts.len()), (JobState::Ready, 0));
    assert_eq!(rx.received("/ok").len(), 1);
    let views = h.engine.queue_views();
    let custom = views.iter().find(|q| q.name == "custom").expect("custom");
    assert_eq!(custom.paused_by_hand.as_ref(), Some(&pause));
    let default = views.iter().find(|q| q.name == "default").expect("default");
    assert_eq!(default.paused_by_hand, None);

    h.engine
        .resume(ControlKind::Queue, "custom")
        .await
        .expect("resume");
    h.wait_state("waits", JobState::Completed).await;
    assert_eq!(rx.received("/ok").len(), 2);
    assert!(h
        .engine
        .queue_views()
        .iter()
        .all(|q| q.paused_by_hand.is_none()));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_pause_with_an_end_ends_by_itself() {
    let rx = Receiver::start().await;
    let h = harness().start().await;
    let until = T0.saturating_add(Duration::from_secs(60));
    h.engine
        .pause(ControlKind::Queue, "custom", Some(until), String::new())
        .await
        .expect("pause");
    h.enqueue("waits", "custom", "POST", &rx.url("/ok"), None)
        .await;
    h.settle().await;
    assert!(rx.received("/ok").is_empty());
    h.clock.set(until);
    h.wait_state("waits", JobState::Completed).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_series_count_attempts_by_category_on_the_engines_clock() {
    let rx = Receiver::start().await;
    rx.script("/flaky", vec![Reply::status(503), Reply::status(200)]);
    let h = harness().start().await;
    h.enqueue("j", "default", "POST", &rx.url("/flaky"), None)
        .await;
    h.wait_for("j", "retrying", |j| j.attempts >= 1).await;
    h.run_next("j").await;
    h.wait_state("j", JobState::Completed).await;
    let minutes = h.engine.series();
    assert_eq!(minutes.len(), redial_engine::series::MINUTES);
    // The manual clock's minutes: the last one holds its instant.
    assert!(minutes.last().expect("a minute").at <= h.clock.now());
    let sum =
        |f: &dyn Fn(&redial_engine::series::Point) -> u64| -> u64 { minutes.iter().map(f).sum() };
    assert_eq!(sum(&|m| m.attempts["transient"]), 1);
    assert_eq!(sum(&|m| m.attempts["success"]), 1);
    assert_eq!((sum(&|m| m.completed), sum(&|m| m.dead)), (1, 0));
    assert!(minutes.iter().any(|m| m.p50_ms.is_some()));
    h.stop().await;
}
