//! Two engines sharing one PostgreSQL database (`DATABASE_URL`, which `./scripts/test`
//! provides), on one manual clock, against a receiver on loopback: what one node learns of an
//! endpoint reaches the other through the store.
//!
//! The clock does not move: each node's view is waited for (event-driven, with a generous bound),
//! never timed.

use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{Engine, EngineConfig, ManualClock, QueueConfig, RunningEngine};
use redial_policy::endpoint::EndpointConfig;
use redial_policy::{Policy, Timestamp};
use redial_store::{HttpRequest, JobId, JobState, NewJob, Store};
use redial_test_receiver::{Receiver, Reply};
use std::sync::Arc;
use std::time::Duration;

const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);
/// How long a test waits for something another node does before it fails.
const BOUND: Duration = Duration::from_secs(60);

/// A node of the cluster in schema `schema` that leases only from `queue`.
async fn node(
    schema: &redial_store_postgres::testing::Config,
    clock: Arc<ManualClock>,
    worker: &str,
    queue: &str,
) -> (Arc<dyn Store>, Engine, RunningEngine) {
    let store: Arc<dyn Store> = Arc::new(
        redial_store_postgres::PgStore::connect_with(schema.clone(), 4)
            .await
            .expect("connect"),
    );
    let mut config = EngineConfig {
        worker_id: worker.into(),
        schedules: false,
        endpoint_defaults: EndpointConfig {
            // Every request goes at once: what is shared, not the first contact, is tested.
            first_contact_ramp: false,
            ..EndpointConfig::default()
        },
        ..EngineConfig::default()
    };
    config.queues.clear();
    config
        .queues
        .insert(queue.into(), QueueConfig::new(4, Policy::default()));
    let http = HttpExecutor::new(HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    })
    .expect("client");
    let engine = Engine::new(store.clone(), config, clock, Arc::new(http));
    let running = engine.start().await.expect("start");
    (store, engine, running)
}

async fn enqueue(store: &Arc<dyn Store>, queue: &str, ids: &[String], url: &str, now: Timestamp) {
    let endpoint = url::Url::parse(url)
        .expect("url")
        .origin()
        .ascii_serialization();
    let jobs = ids
        .iter()
        .map(|id| NewJob {
            ordering: None,
            callback: None,
            id: JobId(id.clone()),
            queue: queue.into(),
            endpoint: endpoint.clone(),
            request: HttpRequest {
                method: "GET".into(),
                url: url.into(),
                headers: vec![],
                body: None,
                timeout_ms: Some(5_000),
            },
            idempotency_key: None,
            priority: 0,
            run_at: now,
            deadline: None,
            tags: vec![],
            policy: None,
            created_at: now,
            group: None,
        })
        .collect();
    store.job_insert_batch(jobs).await.expect("insert");
}

/// Waits until `pred` holds, checking every few milliseconds; fails after [`BOUND`].
async fn eventually(what: &str, mut pred: impl AsyncFnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + BOUND;
    while !pred().await {
        assert!(tokio::time::Instant::now() < give_up, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn state(store: &Arc<dyn Store>, id: &str) -> Option<JobState> {
    let (job, _) = store.job_get(&JobId(id.into())).await.expect("read")?;
    Some(job.state)
}

/// A bare 429 one node meets is a signal to the other, which sends to the same endpoint: it
/// sets a pace from what went through it in the last second, as if refused itself, instead of
/// sending at full speed until it meets its own refusals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_429_one_node_meets_paces_the_other() {
    let schema = redial_store_postgres::testing::fresh_test_schema().await;
    let clock = Arc::new(ManualClock::new(T0));
    let rx = Receiver::start().await;
    rx.script("/refuse", vec![Reply::status(429)]);
    let (store_a, a, run_a) = node(&schema, clock.clone(), "node-a", "a").await;
    let (store_b, b, run_b) = node(&schema, clock.clone(), "node-b", "b").await;
    let origin = format!("http://{}", rx.addr());

    // Node b sends five requests to the endpoint, which go through.
    let ids: Vec<String> = (0..5).map(|i| format!("ok{i}")).collect();
    enqueue(&store_b, "b", &ids, &rx.url("/ok"), T0).await;
    b.wake_all();
    eventually("node b's five jobs completed", async || {
        for id in &ids {
            if state(&store_b, id).await != Some(JobState::Completed) {
                return false;
            }
        }
        true
    })
    .await;
    assert_eq!(b.endpoint_views(&[])[&origin].learned_pace, None);

    // Node a meets a bare 429 there: its job is deferred, and both nodes now keep a pace.
    enqueue(&store_a, "a", &["refused".into()], &rx.url("/refuse"), T0).await;
    a.wake_all();
    eventually("node a's job deferred", async || {
        state(&store_a, "refused").await == Some(JobState::Deferred)
    })
    .await;
    let pace_a = a.endpoint_views(&[])[&origin].learned_pace;
    assert_eq!(pace_a, Some(0.5), "nothing went through node a: the floor");
    eventually("node b took in node a's refusal", async || {
        b.endpoint_views(&[])[&origin].learned_pace.is_some()
    })
    .await;
    assert_eq!(
        b.endpoint_views(&[])[&origin].learned_pace,
        Some(5.0),
        "what went through node b in the last second"
    );
    assert_eq!(rx.count("/refuse"), 1);
    run_a.shutdown(Duration::from_secs(5)).await;
    run_b.shutdown(Duration::from_secs(5)).await;
}
