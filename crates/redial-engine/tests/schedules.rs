//! Schedules in the engine, on a manual clock: occurrences become ordinary jobs under ids derived
//! from the schedule and the instant; a restart after a gap applies each schedule's missed-run
//! policy; two nodes checking the same schedule at once enqueue each occurrence once (PostgreSQL,
//! `DATABASE_URL`). No loop runs: each test calls `Engine::schedules_check` itself.

use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{
    derived_idempotency_key, Engine, EngineConfig, JobTemplate, ManualClock, MissedRule,
    ScheduleDefinition, ScheduleError, ScheduleRule,
};
use redial_policy::Timestamp;
use redial_store::{HttpRequest, JobFilter, JobId, JobListParams, Store};
use redial_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::Duration;

/// 2026-11-30T00:00:00Z.
const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);
const HOUR: Duration = Duration::from_secs(3600);

fn engine(store: Arc<dyn Store>, clock: Arc<ManualClock>, worker: &str) -> Engine {
    let config = EngineConfig {
        worker_id: worker.into(),
        schedules: false,
        ..EngineConfig::default()
    };
    let http = HttpExecutor::new(HttpConfig::default()).expect("http client");
    Engine::new(store, config, clock, Arc::new(http))
}

fn hourly(missed: MissedRule) -> ScheduleDefinition {
    ScheduleDefinition {
        rule: ScheduleRule::Every {
            interval: HOUR,
            anchor: T0,
        },
        missed,
        job: JobTemplate {
            ordering_key: None,
            callback: None,
            queue: "default".into(),
            endpoint: "https://api.example.com".into(),
            request: HttpRequest {
                method: "POST".into(),
                url: "https://api.example.com/report".into(),
                headers: vec![],
                body: Some("{}".into()),
                timeout_ms: None,
                credentials: None,
            },
            priority: 0,
            tags: vec!["report".into()],
            policy: None,
            group: None,
        },
        source: "api".into(),
    }
}

fn at_hours(h: u64) -> Timestamp {
    T0.saturating_add(HOUR * u32::try_from(h).expect("small"))
}

/// The ids of the jobs a schedule enqueued, oldest first.
async fn occurrences(store: &Arc<dyn Store>, schedule: &str) -> Vec<String> {
    let page = store
        .job_list(JobListParams {
            filter: JobFilter::default(),
            after: None,
            limit: 1000,
        })
        .await
        .expect("list");
    let mut ids: Vec<String> = page
        .jobs
        .into_iter()
        .filter(|j| j.tags.contains(&format!("schedule:{schedule}")))
        .map(|j| j.id.0)
        .collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn an_occurrence_becomes_a_job_with_a_derived_id_and_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("redial.db")).expect("open"));
    let clock = Arc::new(ManualClock::new(T0));
    let e = engine(store.clone(), clock.clone(), "w1");
    let saved = e
        .schedule_save("report", hourly(MissedRule::RunOnce), false)
        .await
        .expect("saved");
    assert_eq!(saved.next_at, Some(at_hours(1)));
    // Not due yet: nothing.
    assert_eq!(e.schedules_check().await.expect("check").enqueued, 0);
    clock.set(at_hours(1).saturating_add(Duration::from_millis(300)));
    let check = e.schedules_check().await.expect("check");
    assert_eq!((check.due, check.enqueued, check.dropped), (1, 1, 0));
    let id = "report@2026-11-30T01:00:00Z";
    let (job, _) = store
        .job_get(&JobId(id.into()))
        .await
        .expect("get")
        .expect("enqueued");
    assert_eq!(job.queue, "default");
    assert_eq!(job.request.url, "https://api.example.com/report");
    assert_eq!(job.run_at, at_hours(1));
    assert_eq!(
        job.idempotency_key.as_deref(),
        Some(derived_idempotency_key("default", id).as_str())
    );
    assert_eq!(job.tags, ["report", "schedule:report"]);
    let s = e.schedule("report").await.expect("kept");
    assert_eq!(
        (s.next_at, s.last_occurrence),
        (Some(at_hours(2)), Some(at_hours(1)))
    );
    // Checked again at the same instant: nothing more.
    assert_eq!(e.schedules_check().await.expect("check").enqueued, 0);

    // Paused: occurrences are not enqueued; resumed: from the next one after now.
    e.schedule_set_paused("report", true).await.expect("paused");
    clock.set(at_hours(3).saturating_add(Duration::from_secs(1)));
    assert_eq!(e.schedules_check().await.expect("check").due, 0);
    let resumed = e
        .schedule_set_paused("report", false)
        .await
        .expect("resumed");
    assert_eq!(resumed.next_at, Some(at_hours(4)));
    assert_eq!(occurrences(&store, "report").await, [id]);

    // Errors say what is wrong.
    assert!(matches!(
        e.schedule_save("report", hourly(MissedRule::Skip), false)
            .await,
        Err(ScheduleError::Exists(_))
    ));
    assert!(matches!(
        e.schedule_save("bad id", hourly(MissedRule::Skip), false)
            .await,
        Err(ScheduleError::Invalid(_))
    ));
    let mut unknown_queue = hourly(MissedRule::Skip);
    unknown_queue.job.queue = "nope".into();
    assert!(matches!(
        e.schedule_save("q", unknown_queue, false).await,
        Err(ScheduleError::Invalid(_))
    ));
    e.schedule_delete("report").await.expect("deleted");
    assert!(matches!(
        e.schedule_delete("report").await,
        Err(ScheduleError::NotFound(_))
    ));
    // The jobs it enqueued stay.
    assert_eq!(occurrences(&store, "report").await, [id]);
}

#[tokio::test]
async fn a_restart_after_a_gap_applies_each_missed_run_policy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redial.db");
    let clock = Arc::new(ManualClock::new(T0));
    {
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("open"));
        let e = engine(store, clock.clone(), "w1");
        for (id, missed) in [
            ("skip", MissedRule::Skip),
            ("once", MissedRule::RunOnce),
            ("all", MissedRule::RunAll { max: 2 }),
        ] {
            e.schedule_save(id, hourly(missed), false)
                .await
                .expect("saved");
        }
        clock.set(at_hours(1));
        assert_eq!(e.schedules_check().await.expect("check").enqueued, 3);
    }
    // Down from 01:00 to 05:30: 02:00, 03:00, 04:00 and 05:00 were missed (05:00 by half an
    // hour, past the grace).
    clock.set(at_hours(5).saturating_add(HOUR / 2));
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("reopen"));
    let e = engine(store.clone(), clock.clone(), "w2");
    let check = e.schedules_check().await.expect("check");
    assert_eq!((check.due, check.enqueued), (3, 3));
    assert_eq!(check.dropped, 4 + 3 + 2);
    let counted = |outcome: &str| {
        e.metrics()
            .counter("redial_schedule_occurrences_total", &[("outcome", outcome)])
    };
    assert_eq!((counted("enqueued"), counted("dropped")), (3, 9));
    assert_eq!(
        occurrences(&store, "skip").await,
        ["skip@2026-11-30T01:00:00Z"]
    );
    assert_eq!(
        occurrences(&store, "once").await,
        ["once@2026-11-30T01:00:00Z", "once@2026-11-30T05:00:00Z"]
    );
    assert_eq!(
        occurrences(&store, "all").await,
        [
            "all@2026-11-30T01:00:00Z",
            "all@2026-11-30T04:00:00Z",
            "all@2026-11-30T05:00:00Z"
        ]
    );
    for id in ["skip", "once", "all"] {
        assert_eq!(
            e.schedule(id).await.expect("kept").next_at,
            Some(at_hours(6)),
            "{id}"
        );
    }
}

/// Two nodes on one PostgreSQL check the same schedules at the same instants, at once: every
/// occurrence is enqueued once, and each schedule moves on once per check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_checking_at_once_enqueue_each_occurrence_once() {
    let config = redial_store_postgres::testing::fresh_test_schema().await;
    let clock = Arc::new(ManualClock::new(T0));
    let mut nodes = Vec::new();
    for worker in ["node-a", "node-b"] {
        let store: Arc<dyn Store> = Arc::new(
            redial_store_postgres::PgStore::connect_with(config.clone(), 4)
                .await
                .expect("connect"),
        );
        nodes.push((store.clone(), engine(store, clock.clone(), worker)));
    }
    let (store, a) = (&nodes[0].0, &nodes[0].1);
    let b = &nodes[1].1;
    let mut every_second = hourly(MissedRule::RunAll { max: 5 });
    every_second.rule = ScheduleRule::Every {
        interval: Duration::from_secs(1),
        anchor: T0,
    };
    for id in ["s1", "s2", "s3"] {
        a.schedule_save(id, every_second.clone(), false)
            .await
            .expect("saved");
    }
    let mut enqueued = 0;
    for _ in 0..40 {
        clock.advance(Duration::from_secs(1));
        let (x, y) = tokio::join!(a.schedules_check(), b.schedules_check());
        enqueued += x.expect("check a").enqueued + y.expect("check b").enqueued;
    }
    assert_eq!(enqueued, 3 * 40, "each occurrence enqueued once");
    for id in ["s1", "s2", "s3"] {
        let ids = occurrences(store, id).await;
        assert_eq!(ids.len(), 40, "{id}: {ids:?}");
        assert_eq!(ids[0], format!("{id}@2026-11-30T00:00:01Z"));
        assert_eq!(ids[39], format!("{id}@2026-11-30T00:00:40Z"));
    }
}

/// A node without a schedule's queue leaves the schedule alone (its jobs would wait in a queue
/// this node does not lease from): nothing enqueued, not moved on, so a node with the queue runs
/// the occurrence.
#[tokio::test]
async fn a_node_without_the_schedules_queue_leaves_it_to_one_with_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redial.db");
    let clock = Arc::new(ManualClock::new(T0));
    let with_reports = |store: Arc<dyn Store>| {
        let mut config = EngineConfig {
            schedules: false,
            ..EngineConfig::default()
        };
        config
            .queues
            .insert("reports".into(), redial_engine::QueueConfig::default());
        let http = HttpExecutor::new(HttpConfig::default()).expect("http client");
        Engine::new(store, config, clock.clone(), Arc::new(http))
    };
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path).expect("open"));
    let mut def = hourly(MissedRule::RunOnce);
    def.job.queue = "reports".into();
    with_reports(store.clone())
        .schedule_save("r", def, false)
        .await
        .expect("saved");
    clock.set(at_hours(1));
    let without = engine(store.clone(), clock.clone(), "w2");
    let check = without.schedules_check().await.expect("check");
    assert_eq!(
        (check.due, check.advanced, check.enqueued, check.dropped),
        (1, 0, 0, 0)
    );
    assert!(occurrences(&store, "r").await.is_empty());
    assert_eq!(
        without.schedule("r").await.expect("kept").next_at,
        Some(at_hours(1))
    );
    // A node with the queue, on the same store, runs it.
    let with = with_reports(store.clone());
    assert_eq!(with.schedules_check().await.expect("check").enqueued, 1);
    assert_eq!(occurrences(&store, "r").await, ["r@2026-11-30T01:00:00Z"]);
}
