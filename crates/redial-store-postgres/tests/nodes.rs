//! What only a shared store does, against a real PostgreSQL server (`DATABASE_URL`): several
//! nodes migrating at once, one maintenance leader at a time with failover, wake-ups across nodes,
//! and concurrent leasing from separate stores.

use redial_store::testkit::{at, new_job};
use redial_store::{LeaseParams, Store, Wake};
use redial_store_postgres::PgStore;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a test waits for something another session makes happen (a dead session's locks
/// freeing, a notification arriving) before it fails: a bound for a hung test, not a measure.
const WAIT: Duration = Duration::from_secs(60);

async fn schema() -> redial_store_postgres::DbConfig {
    redial_store_postgres::testing::fresh_test_schema().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_migrate_once() {
    let config = schema().await;
    let starts = (0..4).map(|_| {
        let c = config.clone();
        tokio::spawn(async move { PgStore::connect_with(c, 1).await })
    });
    for s in starts {
        let store = s.await.expect("joined").expect("every node starts");
        store.ping().await.expect("ping");
    }
}

/// A database an older Redial left, with jobs in it, is brought up to date at start: the jobs
/// are kept and read back, names compare byte by byte (migration 7), and the table's
/// statistics, which a column's type change drops, are there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_schema_with_jobs_is_brought_up_to_date() {
    let config = schema().await;
    redial_store_postgres::testing::migrate_to(&config, 6)
        .await
        .expect("schema 6");
    let (client, connection) = config.connect().await.expect("connect");
    let driver = tokio::spawn(connection);
    let version: i32 = client
        .query_one("SELECT version FROM redial_schema", &[])
        .await
        .expect("version")
        .get(0);
    assert_eq!(version, 6);
    let job = new_job("b-job", "q");
    let request = serde_json::to_string(&job.request).expect("request");
    for id in ["b-job", "B-job"] {
        client
            .execute(
                "INSERT INTO jobs (id, queue, endpoint, state, request, priority, run_at, tags, \
                 created_at, updated_at) VALUES ($1, 'q', $2, 'ready', $3, 0, $4, '[]', $4, $4)",
                &[&id, &job.endpoint, &request, &job.run_at.as_unix_millis()],
            )
            .await
            .expect("a job as version 6 kept it");
    }
    let store = PgStore::connect_with(config.clone(), 1)
        .await
        .expect("the store migrates at start");
    let (got, _) = store
        .job_get(&"b-job".into())
        .await
        .expect("get")
        .expect("the job is kept");
    assert_eq!((got.queue.as_str(), got.request), ("q", job.request));
    let version: i32 = client
        .query_one("SELECT version FROM redial_schema", &[])
        .await
        .expect("version")
        .get(0);
    assert!(version >= 7, "migrated: {version}");
    let collations: Vec<(String, Option<String>)> = client
        .query(
            "SELECT column_name::text, collation_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = 'jobs' \
             AND column_name IN ('endpoint', 'grp', 'id', 'queue') ORDER BY column_name",
            &[],
        )
        .await
        .expect("columns")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let c = Some("C".to_owned());
    assert_eq!(
        collations,
        [
            ("endpoint".to_owned(), c.clone()),
            ("grp".to_owned(), c.clone()),
            ("id".to_owned(), c.clone()),
            ("queue".to_owned(), c)
        ]
    );
    let ids: Vec<String> = client
        .query("SELECT id FROM jobs ORDER BY id", &[])
        .await
        .expect("ids")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, ["B-job", "b-job"], "bytes order");
    let with_stats: i64 = client
        .query_one(
            "SELECT COUNT(*) FROM pg_stats WHERE schemaname = current_schema() \
             AND tablename = 'jobs' AND attname IN ('queue', 'id')",
            &[],
        )
        .await
        .expect("stats")
        .get(0);
    assert_eq!(
        with_stats, 2,
        "statistics taken again after the type change"
    );
    drop(client);
    let _ = driver.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_the_role_moves_when_it_goes() {
    let config = schema().await;
    let a = PgStore::connect_with(config.clone(), 1).await.expect("a");
    let b = PgStore::connect_with(config.clone(), 1).await.expect("b");
    assert!(a.try_lead().await.expect("a asks"));
    assert!(
        a.try_lead().await.expect("a asks again"),
        "it keeps the role"
    );
    assert!(!b.try_lead().await.expect("b asks"));
    drop(a);
    // A's sessions end with it; B takes over at one of its next ticks.
    let mut took = false;
    let give_up = Instant::now() + WAIT;
    while Instant::now() < give_up {
        if b.try_lead().await.expect("b asks") {
            took = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(took, "the role moved to the remaining node");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_in_different_schemas_each_have_a_leader() {
    let one = PgStore::connect_with(schema().await, 1).await.expect("one");
    let other = PgStore::connect_with(schema().await, 1)
        .await
        .expect("other");
    assert!(one.try_lead().await.expect("one asks"));
    assert!(
        other.try_lead().await.expect("other asks"),
        "the role is per schema, not per database"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_enqueued_on_one_node_wakes_the_others() {
    let config = schema().await;
    let a = PgStore::connect_with(config.clone(), 1).await.expect("a");
    let b = PgStore::connect_with(config.clone(), 1).await.expect("b");
    let mut wakes = b.subscribe().expect("a shared store has wake-ups");
    // The listener connects in the background: enqueue until a wake-up arrives.
    let mut n = 0;
    let give_up = Instant::now() + WAIT;
    let wake = loop {
        n += 1;
        a.job_insert(new_job(&format!("w{n}"), "emails"))
            .await
            .expect("insert");
        match tokio::time::timeout(Duration::from_millis(200), wakes.recv()).await {
            Ok(w) => break w.expect("a wake-up"),
            Err(_) if Instant::now() < give_up => continue,
            Err(_) => panic!("no wake-up reached the other node"),
        }
    };
    assert_eq!(wake, Wake::Queue("emails".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_leasing_at_once_never_share_a_job() {
    let config = schema().await;
    let stores: Vec<Arc<PgStore>> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(Arc::new(
                PgStore::connect_with(config.clone(), 2)
                    .await
                    .expect("store"),
            ));
        }
        v
    };
    let jobs: Vec<_> = (0..600)
        .map(|n| new_job(&format!("j{n}"), "default"))
        .collect();
    stores[0].job_insert_batch(jobs).await.expect("insert");
    let mut tasks = Vec::new();
    for (i, s) in stores.iter().enumerate() {
        for k in 0..4 {
            let s = s.clone();
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let got = s
                        .job_lease_available(LeaseParams {
                            queue: "default".into(),
                            limit: 7,
                            owner: format!("node{i}-{k}"),
                            now: at(0),
                            lease_until: at(30),
                        })
                        .await
                        .expect("lease");
                    if got.is_empty() {
                        return mine;
                    }
                    mine.extend(got.into_iter().map(|j| j.id.0));
                }
            }));
        }
    }
    let mut seen = HashSet::new();
    for t in tasks {
        for id in t.await.expect("joined") {
            assert!(seen.insert(id.clone()), "{id} leased twice");
        }
    }
    assert_eq!(seen.len(), 600);
}

/// A node that dies (its sessions end) has its leases rescued at the next maintenance tick, not
/// when they expire; a node still alive keeps its leases, and so does one that never said it was
/// alive (an older version, during a rolling upgrade), until its leases expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_nodes_leases_are_rescued_before_they_expire() {
    use redial_store::{JobState, RescueParams};
    let config = schema().await;
    let a = PgStore::connect_with(config.clone(), 1).await.expect("a");
    let b = PgStore::connect_with(config.clone(), 1).await.expect("b");
    a.node_announce("node-a").await.expect("a announces");
    b.node_announce("node-b").await.expect("b announces");
    for (id, owner) in [("ja", "node-a"), ("jb", "node-b"), ("jold", "node-old")] {
        b.job_insert(new_job(id, "q")).await.expect("insert");
        let leased = b
            .job_lease_available(LeaseParams {
                queue: "q".into(),
                limit: 1,
                owner: owner.into(),
                now: at(0),
                // Far from expiring: only the node's death can end these leases early.
                lease_until: at(3600),
            })
            .await
            .expect("lease");
        assert_eq!(leased.len(), 1, "{id}");
    }
    let rescue = |store: PgStore| async move {
        store
            .job_rescue_expired(RescueParams {
                now: at(10),
                max_stalls: 3,
                presence_grace: Duration::ZERO,
            })
            .await
            .expect("rescue")
    };
    // Everyone alive (or unknown): nothing to rescue; the leader has seen a and b alive.
    assert_eq!(rescue(b.clone()).await.requeued, 0);
    drop(a);
    // A's sessions end with it: its job is back at one of B's next ticks.
    let mut requeued = 0;
    let give_up = Instant::now() + WAIT;
    while Instant::now() < give_up {
        requeued += rescue(b.clone()).await.requeued;
        if requeued > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(requeued, 1, "node-a's lease was rescued");
    let state = |id: &'static str| {
        let b = b.clone();
        async move { b.job_get(&id.into()).await.expect("get").expect("exists").0 }
    };
    let ja = state("ja").await;
    assert_eq!((ja.state, ja.stalls), (JobState::Ready, 1));
    assert_eq!(state("jb").await.state, JobState::Running, "b is alive");
    assert_eq!(
        state("jold").await.state,
        JobState::Running,
        "a node never seen alive keeps its lease until it expires"
    );
}

/// A server that takes no writes (a standby, or `default_transaction_read_only`) is not ready,
/// and a write to it is "unavailable" (503 at the API), not an internal error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_server_is_not_ready() {
    let mut config = schema().await;
    // Migrated while writable; then every session of this store is read-only.
    PgStore::connect_with(config.clone(), 1)
        .await
        .expect("migrated");
    let options = format!(
        "{} -c default_transaction_read_only=on",
        config.pg_mut().get_options().unwrap_or("")
    );
    config.pg_mut().options(&options);
    let store = PgStore::connect_with(config, 1)
        .await
        .expect("connects to a read-only server");
    match store.ping().await {
        Err(redial_store::StoreError::Unavailable(why)) => {
            assert!(why.contains("read-only"), "{why}")
        }
        other => panic!("a read-only server is not ready: {other:?}"),
    }
    match store.job_insert(new_job("ro", "q")).await {
        Err(redial_store::StoreError::Unavailable(_)) => {}
        other => panic!("a write to a read-only server is unavailable: {other:?}"),
    }
}

/// A node whose connections blink (a database restart, `pg_terminate_backend`) is not dead: it
/// goes on sending the jobs it leased and takes its presence lock back at its next tick. The
/// rescue that finds its lock free only notes it; the node's next announcement clears that; only
/// a node silent for the whole grace has its leases ended. (Before, the first rescue ended them,
/// and a second node sent those jobs again while the first was still sending them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_connection_blinked_keeps_its_leases() {
    use redial_store::{JobState, RescueParams};
    let config = schema().await;
    let a = PgStore::connect_with(config.clone(), 1).await.expect("a");
    let b = PgStore::connect_with(config.clone(), 1).await.expect("b");
    a.node_announce("node-a").await.expect("a announces");
    b.job_insert(new_job("ja", "q")).await.expect("insert");
    let leased = a
        .job_lease_available(LeaseParams {
            queue: "q".into(),
            limit: 1,
            owner: "node-a".into(),
            now: at(0),
            lease_until: at(3600),
        })
        .await
        .expect("lease");
    assert_eq!(leased.len(), 1);
    let rescue = |grace: Duration| {
        let b = b.clone();
        async move {
            b.job_rescue_expired(RescueParams {
                now: at(10),
                max_stalls: 3,
                presence_grace: grace,
            })
            .await
            .expect("rescue")
            .requeued
        }
    };
    let (client, connection) = config.connect().await.expect("connect");
    tokio::spawn(connection);
    // Ends node a's presence session, as a restart of the server would.
    let blink = || async {
        client
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks \
                 WHERE locktype = 'advisory' AND classid = $1::int::oid AND granted \
                 AND objid = hashtext(current_schema() || ':node-a')::oid",
                &[&0x7264_6c32_i32],
            )
            .await
            .expect("terminate")
    };
    let free = || async {
        client
            .query_one(
                "SELECT count(*) = 0 FROM pg_locks WHERE locktype = 'advisory' \
                 AND classid = $1::int::oid AND objid = hashtext(current_schema() || ':node-a')::oid",
                &[&0x7264_6c32_i32],
            )
            .await
            .expect("locks")
            .get::<_, bool>(0)
    };
    assert_eq!(blink().await, 1, "node a's presence session ended");
    let give_up = Instant::now() + WAIT;
    while !free().await {
        assert!(Instant::now() < give_up, "the lock never freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Found free: noted, not rescued, however short the grace.
    assert_eq!(rescue(Duration::ZERO).await, 0);
    // Node a's next tick takes it back: alive, not rescued.
    a.node_announce("node-a").await.expect("a announces again");
    assert_eq!(rescue(Duration::ZERO).await, 0);
    assert_eq!(rescue(Duration::ZERO).await, 0);
    let state = b
        .job_get(&"ja".into())
        .await
        .expect("get")
        .expect("exists")
        .0;
    assert_eq!(state.state, JobState::Running, "still node a's");
    // Once more, and this time node a stays silent: within the grace, kept; past it, rescued.
    assert_eq!(blink().await, 1);
    while !free().await {
        assert!(Instant::now() < give_up, "the lock never freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(rescue(Duration::from_secs(3600)).await, 0, "noted");
    assert_eq!(
        rescue(Duration::from_secs(3600)).await,
        0,
        "within the grace"
    );
    assert_eq!(rescue(Duration::ZERO).await, 1, "past it: rescued");
    let state = b
        .job_get(&"ja".into())
        .await
        .expect("get")
        .expect("exists")
        .0;
    assert_eq!((state.state, state.stalls), (JobState::Ready, 1));
}

/// A job in flight when the schema moves to version 19 (a lease written as `ready` with an
/// owner, logged in `leases`) is still running after it: read as running, passed over by a
/// lease, and rescued once its lease expires, with its stall counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_in_flight_across_migration_19_is_still_running_and_rescued() {
    use redial_store::{JobState, RescueParams};
    let config = schema().await;
    redial_store_postgres::testing::migrate_to(&config, 18)
        .await
        .expect("schema 18");
    let (client, connection) = config.connect().await.expect("connect");
    tokio::spawn(connection);
    for (id, state, owner, until) in [
        ("flying", "running", Some("old-node"), Some(at(30))),
        ("waiting", "ready", None, None),
    ] {
        let job = new_job(id, "q");
        let request = serde_json::to_string(&job.request).expect("request");
        client
            .execute(
                "INSERT INTO jobs (id, queue, endpoint, state, request, priority, run_at, tags, \
                 created_at, updated_at, lease_owner, lease_until) \
                 VALUES ($1, 'q', $2, $3, $4, 0, $5, '[]', $5, $5, $6, $7)",
                &[
                    &id,
                    &job.endpoint,
                    &state,
                    &request,
                    &job.run_at.as_unix_millis(),
                    &owner,
                    &until.map(|t| t.as_unix_millis()),
                ],
            )
            .await
            .expect("a job as version 18 kept it");
    }
    let store = PgStore::connect_with(config.clone(), 1)
        .await
        .expect("the store migrates at start");
    let get = |id: &'static str| {
        let store = store.clone();
        async move {
            store
                .job_get(&id.into())
                .await
                .expect("get")
                .expect("kept")
                .0
        }
    };
    let flying = get("flying").await;
    assert_eq!(
        (flying.state, flying.lease_owner.as_deref()),
        (JobState::Running, Some("old-node"))
    );
    let leased = store
        .job_lease_available(LeaseParams {
            queue: "q".into(),
            limit: 10,
            owner: "new-node".into(),
            now: at(1),
            lease_until: at(3600),
        })
        .await
        .expect("lease");
    let ids: Vec<&str> = leased.iter().map(|j| j.id.0.as_str()).collect();
    assert_eq!(ids, ["waiting"], "the job in flight is not leased twice");
    let rescue = |now| {
        store.job_rescue_expired(RescueParams {
            now,
            max_stalls: 3,
            presence_grace: Duration::ZERO,
        })
    };
    assert_eq!(
        rescue(at(10)).await.expect("rescue").requeued,
        0,
        "not expired yet"
    );
    assert_eq!(rescue(at(31)).await.expect("rescue").requeued, 1);
    let flying = get("flying").await;
    assert_eq!(
        (flying.state, flying.stalls, flying.lease_owner),
        (JobState::Ready, 1, None)
    );
    assert_eq!(
        get("waiting").await.state,
        JobState::Running,
        "its lease runs to 3600"
    );
}
