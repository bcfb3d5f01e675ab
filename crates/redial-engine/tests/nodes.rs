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
    let http = HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    };
    node_with(schema, clock, worker, queue, http).await
}

/// [`node`] with its HTTP executor configured as `http` says.
async fn node_with(
    schema: &redial_store_postgres::testing::Config,
    clock: Arc<ManualClock>,
    worker: &str,
    queue: &str,
    http: HttpConfig,
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
    let http = HttpExecutor::new(http).expect("client");
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
                credentials: None,
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

/// Two nodes draining one queue of an endpoint with OAuth2 client credentials, whose tokens
/// expire on the test's clock: 1,000 jobs in four waves, the clock moved past a token's life
/// between waves. Each node keeps its own token (fetched once a wave, before it expires), so the
/// API refuses at most one request per expiry per node (none, here), and no job dies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_keep_their_own_tokens_across_three_expiries() {
    use redial_engine::credentials::{
        Auth, ClientAuth, Credentials, EndpointCredentials, OAuth2, Secret,
    };
    use redial_engine::Clock;
    let schema = redial_store_postgres::testing::fresh_test_schema().await;
    let clock = Arc::new(ManualClock::new(T0));
    let rx = {
        let clock = clock.clone();
        Receiver::start_with_clock(move || clock.now().saturating_since(T0)).await
    };
    rx.behave(
        "/token",
        redial_test_receiver::Behaviour::TokenServer {
            lifetime: Duration::from_secs(60),
        },
    );
    rx.behave("/api", redial_test_receiver::Behaviour::RequiresToken);
    let origin = format!("http://{}", rx.addr());
    // Each node its own executor, so its own token, as separate processes have.
    let http = || {
        let mut by_endpoint = std::collections::BTreeMap::new();
        by_endpoint.insert(
            origin.clone(),
            Arc::new(EndpointCredentials {
                tls: None,
                auth: Auth::OAuth2(Box::new(OAuth2::new(
                    rx.url("/token"),
                    "redial".into(),
                    Secret::literal("client-secret"),
                    vec![],
                    None,
                    ClientAuth::ClientSecretPost,
                ))),
                allow_job_credentials: false,
            }),
        );
        HttpConfig {
            allow_private_networks: true,
            credentials: Credentials {
                by_endpoint,
                profiles: Default::default(),
                clock: clock.clone(),
            },
            ..HttpConfig::default()
        }
    };
    let (store, a, run_a) = node_with(&schema, clock.clone(), "node-a", "q", http()).await;
    let (_, b, run_b) = node_with(&schema, clock.clone(), "node-b", "q", http()).await;
    for wave in 0..4 {
        let ids: Vec<String> = (0..250).map(|i| format!("w{wave}-{i}")).collect();
        enqueue(&store, "q", &ids, &rx.url("/api"), clock.now()).await;
        a.wake_all();
        b.wake_all();
        let want: u64 = 250 * (wave + 1);
        // Recorded, not only answered: the clock moves on only once no job is in flight.
        eventually("the wave completed", async || {
            let stats = store.stats().await.expect("stats");
            let completed: u64 = stats
                .by_queue
                .iter()
                .filter(|c| c.state == JobState::Completed)
                .map(|c| c.count)
                .sum();
            completed == want
        })
        .await;
        clock.advance(Duration::from_secs(70));
    }
    for wave in 0..4 {
        for i in [0, 249] {
            assert_eq!(
                state(&store, &format!("w{wave}-{i}")).await,
                Some(JobState::Completed)
            );
        }
    }
    let refused = rx
        .received("/api")
        .iter()
        .filter(|r| r.status == 401)
        .count();
    assert!(
        refused <= 6,
        "at most one 401 per expiry per node: {refused}"
    );
    let tokens = rx.received("/token").len();
    assert!(
        (4..=8).contains(&tokens),
        "each node fetches its own, once a wave it sends in: {tokens}"
    );
    println!("two nodes, four waves: {tokens} tokens fetched, {refused} requests refused");
    run_a.shutdown(Duration::from_secs(5)).await;
    run_b.shutdown(Duration::from_secs(5)).await;
}
