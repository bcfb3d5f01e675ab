//! Groups (tenants) end to end: the engine, a real SQLite file and a receiver on loopback that
//! counts what each group sends. A group's limits hold whatever the other groups do, and a
//! small group is not kept waiting behind a big one.
//!
//! Time is virtual where rates are concerned (a manual clock, the receiver on the same clock);
//! concurrency is counted at the receiver, which holds each request a little so that attempts
//! overlap: the bound holds however the machine schedules them.

mod support;

use redial_engine::{Clock, GroupLimits, Groups, ManualClock, QueueConfig};
use redial_policy::endpoint::Rate;
use redial_store::{HttpRequest, JobId, JobState, NewJob, Store};
use redial_test_receiver::{Receiver, Reply};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use support::{receiver_on, EngineBuilder, TestEngine, T0};

/// These tests' engine: one queue, `default`, running `concurrency` at once with `groups`, on
/// `clock`.
fn setup(clock: Arc<ManualClock>, concurrency: usize, groups: Groups) -> EngineBuilder {
    TestEngine::builder()
        .clock(clock)
        .heartbeat(Duration::from_millis(500))
        .queue(
            "default",
            QueueConfig {
                concurrency,
                groups,
                ..QueueConfig::default()
            },
        )
}

/// How these tests enqueue a group's jobs and count them done.
impl TestEngine {
    /// Enqueues `count` jobs of `group` (ids `<group><n>`) to `url`.
    async fn enqueue(&self, group: Option<&str>, prefix: &str, count: usize, url: &str) {
        let now = self.clock.now();
        let batch: Vec<NewJob> = (0..count)
            .map(|i| NewJob {
                ordering: None,
                callback: None,
                id: JobId(format!("{prefix}{i}")),
                queue: "default".into(),
                endpoint: "receiver".into(),
                request: HttpRequest {
                    method: "POST".into(),
                    url: url.to_owned(),
                    headers: vec![],
                    body: None,
                    timeout_ms: Some(10_000),
                    credentials: None,
                },
                idempotency_key: None,
                priority: 0,
                run_at: now,
                deadline: None,
                tags: vec![],
                policy: None,
                created_at: now,
                group: group.map(str::to_owned),
            })
            .collect();
        self.store.job_insert_batch(batch).await.expect("insert");
        self.engine.wake_all();
    }

    async fn completed(&self) -> usize {
        self.store
            .stats()
            .await
            .expect("stats")
            .by_queue
            .iter()
            .filter(|c| c.state == JobState::Completed)
            .map(|c| c.count as usize)
            .sum()
    }

    /// Runs virtual time in `step`s until `n` jobs completed.
    async fn run_until_completed(&self, n: usize, step: Duration) {
        for _ in 0..20_000 {
            self.settle().await;
            if self.completed().await >= n {
                return;
            }
            self.clock.advance(step);
        }
        panic!("never completed {n}: {}", self.completed().await);
    }
}

/// The shortest gap between two requests that arrived at `path`, on the receiver's clock.
fn tightest_gap(rx: &Receiver, path: &str) -> Duration {
    let mut at: Vec<Duration> = rx.received(path).iter().map(|r| r.since_start).collect();
    at.sort();
    at.windows(2)
        .map(|w| w[1] - w[0])
        .min()
        .unwrap_or(Duration::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_keeps_its_rate_and_a_named_group_its_own() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = receiver_on(&clock).await;
    let groups = Groups {
        each: GroupLimits {
            rate: Some(Rate::parse("5/s").expect("rate")),
            ..GroupLimits::default()
        },
        named: BTreeMap::from([(
            "vip".to_owned(),
            GroupLimits {
                rate: Some(Rate::parse("20/s").expect("rate")),
                ..GroupLimits::default()
            },
        )]),
    };
    let s = setup(clock.clone(), 32, groups).start().await;
    s.enqueue(Some("a"), "a", 20, &rx.url("/a")).await;
    s.enqueue(Some("b"), "b", 20, &rx.url("/b")).await;
    s.enqueue(Some("vip"), "v", 40, &rx.url("/vip")).await;
    s.enqueue(None, "u", 20, &rx.url("/u")).await;
    s.run_until_completed(100, Duration::from_millis(10)).await;
    for (path, rate_gap) in [("/a", 200), ("/b", 200), ("/vip", 50)] {
        assert_eq!(rx.count(path), if path == "/vip" { 40 } else { 20 });
        let gap = tightest_gap(&rx, path);
        assert!(
            gap >= Duration::from_millis(rate_gap),
            "{path}: two requests {gap:?} apart, the group's rate allows one per {rate_gap} ms"
        );
    }
    // Ungrouped jobs have no group limit: all 20 went at the first instant.
    let first_u = rx
        .received("/u")
        .iter()
        .filter(|r| r.since_start.is_zero())
        .count();
    assert_eq!(first_u, 20);
    // 20 jobs at 5/s take about 4 s of virtual time: the others did not wait for them.
    let vip_last = rx
        .received("/vip")
        .iter()
        .map(|r| r.since_start)
        .max()
        .expect("vip requests");
    assert!(
        vip_last < Duration::from_millis(2100),
        "vip finished at {vip_last:?}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_group_keeps_its_concurrency_counted_at_the_receiver() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start().await;
    // Each request is held a little, so that attempts overlap.
    for path in ["/a", "/b"] {
        rx.script(
            path,
            vec![Reply::status(200).delay(Duration::from_millis(40)); 30],
        );
    }
    let groups = Groups {
        each: GroupLimits {
            concurrency: Some(2),
            ..GroupLimits::default()
        },
        named: BTreeMap::from([(
            "b".to_owned(),
            GroupLimits {
                concurrency: Some(3),
                ..GroupLimits::default()
            },
        )]),
    };
    let s = setup(clock.clone(), 16, groups).start().await;
    s.enqueue(Some("a"), "a", 30, &rx.url("/a")).await;
    s.enqueue(Some("b"), "b", 30, &rx.url("/b")).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while s.completed().await < 60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {} of 60 completed",
            s.completed().await
        );
        s.engine.wake_all();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rx.count("/a"), 30);
    assert_eq!(rx.count("/b"), 30);
    let (a, b) = (rx.most_in_flight("/a"), rx.most_in_flight("/b"));
    assert!(a <= 2, "group a had {a} requests in flight (limit 2)");
    assert!(b <= 3, "group b had {b} requests in flight (limit 3)");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_group_runs_at_once_behind_a_big_one() {
    let clock = Arc::new(ManualClock::new(T0));
    let rx = receiver_on(&clock).await;
    // One job at a time: the order the queue hands jobs out is the order they arrive.
    let s = setup(clock.clone(), 1, Groups::default()).start().await;
    s.enqueue(Some("big"), "big", 200, &rx.url("/big")).await;
    s.enqueue(Some("small"), "small", 10, &rx.url("/small"))
        .await;
    s.run_until_completed(40, Duration::from_millis(10)).await;
    // Turns alternate: of the first 40 requests, the small group's ten are in.
    assert_eq!(rx.count("/small"), 10);
    s.stop().await;
}
