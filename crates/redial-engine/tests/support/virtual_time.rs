//! Running the engine on virtual time until something holds, as the endpoint and model tests
//! do: their engine (one queue), how they enqueue POST jobs and count them by state, and the
//! loop that moves the manual clock to the next instant something is due.

#![allow(dead_code)] // each test file uses its own part

use super::{receiver_on, EngineBuilder, TestEngine, T0};
use redial_engine::{Clock, ManualClock, QueueConfig};
use redial_policy::{Backoff, Policy, Strategy, Timestamp};
use redial_store::{HttpRequest, JobId, NewJob, Store};
use redial_test_receiver::Behaviour;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// The most clock steps a test takes before it gives up; a bound against a broken test hanging,
/// far above what any test here needs.
pub const MAX_STEPS: usize = 20_000;

/// Backoffs of 50 to 400 ms, for tests that should not wait out the defaults.
pub fn quick_policy() -> Policy {
    let quick = Backoff {
        strategy: Strategy::FullJitter,
        base: Duration::from_millis(50),
        factor: 2.0,
        cap: Duration::from_millis(400),
    };
    Policy {
        transient: quick,
        unknown: quick,
        deferral: quick,
        server_wait_jitter: Duration::from_millis(20),
        ..Policy::default()
    }
}

/// A manual clock at [`T0`].
pub fn manual_clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(T0))
}

/// These tests' engine: one queue, `default`, running `concurrency` at once on `policy`, on
/// `clock` (the receivers' too).
pub fn setup(clock: Arc<ManualClock>, concurrency: usize, policy: Policy) -> EngineBuilder {
    TestEngine::builder()
        .clock(clock)
        .heartbeat(Duration::from_millis(500))
        .queue("default", QueueConfig::new(concurrency, policy))
}

/// How the virtual-time tests enqueue, count and run the clock.
impl TestEngine {
    pub async fn enqueue_posts(
        &self,
        jobs: impl IntoIterator<Item = (String, String, Option<Duration>)>,
    ) {
        let now = self.clock.now();
        let batch: Vec<NewJob> = jobs
            .into_iter()
            .map(|(id, url, deadline)| {
                post_job(id, url, deadline.map(|d| now.saturating_add(d)), now)
            })
            .collect();
        self.store.job_insert_batch(batch).await.expect("insert");
        self.engine.wake_all();
    }

    /// Counts jobs by state, as "state" or "dead:category".
    pub async fn census(&self) -> HashMap<String, usize> {
        let mut out = HashMap::new();
        for c in self.store.stats().await.expect("stats").by_queue {
            let key = match c.category {
                Some(cat) => format!("dead:{cat}"),
                None => c.state.to_string(),
            };
            *out.entry(key).or_default() += c.count as usize;
        }
        out
    }

    /// The next instant after `now` at which something is due: a job's run time, or the end of
    /// an endpoint's pause, quota window, open breaker, or its rate's or pace's next place.
    pub async fn next_due(&self, now: Timestamp) -> Option<Timestamp> {
        let job = self
            .store
            .job_next_run_at("default", now)
            .await
            .expect("next run");
        let holds = self
            .engine
            .endpoint_views(&[])
            .into_values()
            .flat_map(|v| [v.paused_until, v.learned_reset_at, v.breaker_until]);
        holds
            .chain([job, self.engine.next_endpoint_change()])
            .flatten()
            .filter(|t| *t > now)
            .min()
    }

    /// Runs virtual time until `done` holds on the census: at each instant the engine does all
    /// it can, then the clock moves to the next instant something is due, or by `step` if that
    /// comes first (for what the engine keeps to itself, such as a rate limit's next slot).
    pub async fn run_until(
        &self,
        what: &str,
        step: Duration,
        done: impl Fn(&HashMap<String, usize>) -> bool,
    ) -> HashMap<String, usize> {
        match self.try_run_until(step, MAX_STEPS, done).await {
            Ok(c) => c,
            Err(c) => panic!(
                "never reached: {what}; at T0 + {:?}, census {c:?}",
                self.clock.now().saturating_since(T0)
            ),
        }
    }

    /// As [`TestEngine::run_until`], giving up after `steps` steps with the census then.
    pub async fn try_run_until(
        &self,
        step: Duration,
        steps: usize,
        done: impl Fn(&HashMap<String, usize>) -> bool,
    ) -> Result<HashMap<String, usize>, HashMap<String, usize>> {
        for _ in 0..steps {
            self.settle().await;
            let c = self.census().await;
            if done(&c) {
                return Ok(c);
            }
            let now = self.clock.now();
            let by_step = now.saturating_add(step);
            let next = self.next_due(now).await.map_or(by_step, |t| t.min(by_step));
            self.clock.set(next);
        }
        Err(self.census().await)
    }
}

/// How many the census counts as `key`.
pub fn count(c: &HashMap<String, usize>, key: &str) -> usize {
    c.get(key).copied().unwrap_or(0)
}

/// Virtual time moves in steps of at most this while the engine waits for something the test
/// cannot see; 10ms is finer than any limit here (a 50/s rate admits one per 20ms).
pub const STEP: Duration = Duration::from_millis(10);

/// A receiver whose `/limited` is a moving window of 50 a second with flask-limiter's headers
/// (the reset in epoch seconds, rounded up), on `clock`.
pub async fn moving_window_rounding_up(clock: &Arc<ManualClock>) -> redial_test_receiver::Receiver {
    let rx = receiver_on(clock).await;
    let epoch_ms = u64::try_from(T0.as_unix_millis()).expect("after 1970");
    rx.behave(
        "/limited",
        Behaviour::SlidingLogRounded {
            per_second: 50,
            epoch_ms,
        },
    );
    rx
}

/// A POST of nothing to `url`, its endpoint the URL's origin, due at `now`.
pub fn post_job(id: String, url: String, deadline: Option<Timestamp>, now: Timestamp) -> NewJob {
    NewJob {
        ordering: None,
        callback: None,
        id: JobId(id.clone()),
        queue: "default".into(),
        endpoint: url::Url::parse(&url)
            .expect("url")
            .origin()
            .ascii_serialization(),
        request: HttpRequest {
            method: "POST".into(),
            url,
            headers: vec![],
            body: None,
            timeout_ms: Some(5_000),
            credentials: None,
        },
        idempotency_key: Some(id),
        priority: 0,
        run_at: now,
        deadline,
        tags: vec![],
        policy: None,
        created_at: now,
        group: None,
    }
}
