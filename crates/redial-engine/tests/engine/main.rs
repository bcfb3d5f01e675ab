//! The engine against a real SQLite file and a real HTTP receiver on loopback. Time is a manual
//! clock: a test moves it past a job's next run and wakes the engine, instead of sleeping; to
//! show that something did not happen, it waits until the engine has done all it can at that
//! instant (`support::settle`). Attempts that must still be running when the test acts wait at a
//! gate the test opens, not behind a delay.
//!
//! One test binary, a file per area: what becomes of each kind of answer (outcomes.rs), and
//! leases, wake-ups, cancels and shutdowns (leases.rs). The harness settings are here.

mod callbacks;
mod leases;
mod operations;
mod outcomes;

#[path = "../support/mod.rs"]
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

pub(crate) fn policy() -> Policy {
    Policy {
        max_attempts: 4,
        server_wait_jitter: Duration::ZERO,
        ..Policy::default()
    }
}

/// These tests' engine: queue `default` runs 4 at once and `custom` 2 (where a test's own
/// handler runs), both on [`policy`].
pub(crate) fn harness() -> EngineBuilder {
    let queue = |concurrency| QueueConfig::new(concurrency, policy());
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
        let job = self.new_job(id, queue, method, url, timeout_ms);
        let out = self.store.job_insert(job).await.expect("insert");
        assert!(matches!(out, InsertOutcome::Inserted(_)));
        self.engine.wake(queue);
    }

    /// The job these tests enqueue: a small JSON body, an idempotency key, due now.
    fn new_job(
        &self,
        id: &str,
        queue: &str,
        method: &str,
        url: &str,
        timeout_ms: Option<u64>,
    ) -> NewJob {
        NewJob {
            ordering: None,
            callback: None,
            id: JobId::from(id),
            queue: queue.into(),
            endpoint: "test".into(),
            request: HttpRequest {
                method: method.into(),
                url: url.into(),
                headers: vec![("content-type".into(), "application/json".into())],
                body: Some("{\"n\":1}".into()),
                timeout_ms,
                credentials: None,
            },
            idempotency_key: Some(format!("key-{id}")),
            priority: 0,
            run_at: self.clock.now(),
            deadline: None,
            tags: vec![],
            policy: None,
            created_at: self.clock.now(),
            group: None,
        }
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

#[derive(Debug)]
pub(crate) struct Typed;

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

/// A handler for the "custom" queue (concurrency 2) whose attempts wait at a gate the test
/// opens, then call the job's URL over HTTP. It counts attempts running at once.
#[derive(Debug)]
pub(crate) struct Gated {
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
pub(crate) async fn warm_up(
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

pub(crate) fn gated() -> (Arc<Gated>, tokio::sync::mpsc::UnboundedReceiver<String>) {
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
