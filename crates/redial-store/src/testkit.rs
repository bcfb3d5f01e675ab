//! The behaviour suite every [`Store`] backend must pass: storage behaviour is defined here, once.
//!
//! A backend's tests call [`store_suite!`](crate::store_suite) with an async constructor of a fresh,
//! empty store; the macro expands to one `#[tokio::test]` per case, so a failure names its case.
//! Extend this suite whenever store behaviour changes.

use crate::*;
use redial_policy::{DeadCategory, Timestamp};
use std::sync::Arc;

/// Expands to one `#[tokio::test]` per behaviour case, each with a fresh store from `$make`, an
/// async expression evaluating to `Arc<dyn Store>`.
#[macro_export]
macro_rules! store_suite {
    ($make:expr) => {
        $crate::store_suite!(@cases $make;
            insert_and_get, insert_future_job_is_scheduled, insert_duplicate_and_conflict,
            batch_is_atomic, lease_order_and_queues, lease_never_hands_a_job_out_twice,
            record_attempt_transitions, record_requires_the_lease, heartbeat_and_release,
            rescue_expired_leases, promote_and_next_run_at, replay_dead_job, dismiss_dead_job,
            cancel_jobs, bulk_dead_letter_actions, list_filters_and_pages, stats_counts,
            cleanup_respects_retention, candidates_leave_out_held_endpoints, lease_ids_takes_only_runnable_jobs,
            lease_admitted_asks_admission_in_lease_order, lease_admitted_holds_first_attempts_takes_retries,
            deadlines_expire_for_held_jobs, endpoint_state_round_trips, endpoint_backlog_counts,
            shared_holds_only_lengthen, recent_dead_letters_and_oldest_deferred);
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store: std::sync::Arc<dyn $crate::Store> = $make.await;
                $crate::testkit::$case(store).await;
            }
        )*
    };
}

/// 2026-11-30T00:00:00Z, the suite's "now".
pub const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0.as_unix_millis() + secs * 1000)
}

/// A job for the suite: a POST to an example endpoint, created at `T0`.
pub fn new_job(id: &str, queue: &str) -> NewJob {
    NewJob {
        id: JobId::from(id),
        queue: queue.to_owned(),
        endpoint: "https://api.example.com".to_owned(),
        request: HttpRequest {
            method: "POST".into(),
            url: "https://api.example.com/v1/charges".into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some("{\"amount\":100}".into()),
            timeout_ms: Some(5000),
        },
        idempotency_key: Some(format!("key-{id}")),
        priority: 0,
        run_at: T0,
        deadline: None,
        tags: vec!["suite".into()],
        policy: None,
        created_at: T0,
    }
}

fn attempt(number: u32, status: u16, decision: &str) -> Attempt {
    Attempt {
        number,
        started_at: T0,
        duration_ms: 12,
        status: Some(status),
        error: None,
        error_detail: None,
        category: AttemptCategory::Transient,
        decision: serde_json::from_value(serde_json::Value::from(decision)).expect("a decision"),
        dead_category: None,
        delay_ms: Some(1000),
        server_wait_ms: None,
        server_wait_source: None,
        reason: format!("{status} test; attempt {number}"),
        held: None,
        response_headers: vec![("content-type".into(), "text/plain".into())],
        response_body: Some("oops".into()),
        worker: "w1".into(),
    }
}

fn record(id: &str, owner: &str, number: u32, transition: Transition) -> RecordAttemptParams {
    let decision = match transition {
        Transition::Complete => "complete",
        Transition::Retry { .. } => "retry",
        Transition::Defer { .. } => "defer",
        Transition::Dead { .. } => "dead",
    };
    RecordAttemptParams {
        id: JobId::from(id),
        seq: None,
        owner: owner.into(),
        now: at(1),
        attempt: attempt(number, 503, decision),
        transition,
        attempts: number,
        unknown_attempts: 0,
        deferrals: 0,
        last_delay_ms: Some(1000),
    }
}

async fn lease(
    store: &Arc<dyn Store>,
    queue: &str,
    owner: &str,
    now: Timestamp,
    limit: u32,
) -> Vec<Job> {
    store
        .job_lease_available(LeaseParams {
            queue: queue.into(),
            limit,
            owner: owner.into(),
            now,
            lease_until: Timestamp::from_unix_millis(now.as_unix_millis() + 30_000),
        })
        .await
        .expect("lease succeeds")
}

fn ids(jobs: &[Job]) -> Vec<String> {
    jobs.iter().map(|j| j.id.0.clone()).collect()
}

async fn get(store: &Arc<dyn Store>, id: &str) -> (Job, Vec<Attempt>) {
    store
        .job_get(&JobId::from(id))
        .await
        .expect("get succeeds")
        .expect("job exists")
}

/// Inserts a job and drives it to dead through one failed attempt.
async fn make_dead(store: &Arc<dyn Store>, id: &str, queue: &str, category: DeadCategory) {
    let mut j = new_job(id, queue);
    j.created_at = T0;
    store.job_insert(j).await.expect("insert");
    let leased = lease(store, queue, "w-dead", at(0), 100).await;
    assert!(leased.iter().any(|j| j.id.0 == id), "job {id} leased");
    for other in leased.iter().filter(|j| j.id.0 != id) {
        store
            .job_release(ReleaseParams {
                owner: "w-dead".into(),
                ids: vec![other.id.clone()],
                now: at(0),
            })
            .await
            .expect("release");
    }
    store
        .job_record_attempt(record(id, "w-dead", 1, Transition::Dead { category }))
        .await
        .expect("record dead");
}

pub async fn insert_and_get(store: Arc<dyn Store>) {
    let out = store
        .job_insert(new_job("a", "default"))
        .await
        .expect("insert");
    let InsertOutcome::Inserted(job) = out else {
        panic!("expected Inserted, got {out:?}")
    };
    assert_eq!(job.state, JobState::Ready);
    let (got, attempts) = get(&store, "a").await;
    assert_eq!(got, job);
    assert!(attempts.is_empty());
    let n = new_job("a", "default");
    assert_eq!(
        (
            got.queue.as_str(),
            &got.request,
            &got.idempotency_key,
            &got.tags,
            got.run_at,
            got.created_at
        ),
        (
            n.queue.as_str(),
            &n.request,
            &n.idempotency_key,
            &n.tags,
            n.run_at,
            n.created_at
        )
    );
    assert_eq!(
        (
            got.attempts,
            got.deferrals,
            got.runs,
            got.replays,
            got.stalls
        ),
        (0, 0, 0, 0, 0)
    );
    assert!(store
        .job_get(&JobId::from("nope"))
        .await
        .expect("get")
        .is_none());
}

pub async fn insert_future_job_is_scheduled(store: Arc<dyn Store>) {
    let mut j = new_job("later", "default");
    j.run_at = at(60);
    let out = store.job_insert(j).await.expect("insert");
    assert_eq!(out.job().state, JobState::Scheduled);
    assert!(lease(&store, "default", "w1", at(59), 10).await.is_empty());
    assert_eq!(
        ids(&lease(&store, "default", "w1", at(60), 10).await),
        ["later"]
    );
}

pub async fn insert_duplicate_and_conflict(store: Arc<dyn Store>) {
    store
        .job_insert(new_job("d", "default"))
        .await
        .expect("insert");
    let again = store
        .job_insert(new_job("d", "default"))
        .await
        .expect("insert again");
    assert!(matches!(again, InsertOutcome::Duplicate(_)), "{again:?}");
    // A retried enqueue carries a new trace context: still the same job.
    let mut traced = new_job("d", "default");
    traced.request.headers.push((
        "traceparent".into(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
    ));
    let out = store.job_insert(traced).await.expect("insert traced");
    assert!(matches!(out, InsertOutcome::Duplicate(_)), "{out:?}");
    let mut different = new_job("d", "default");
    different.request.body = Some("{\"amount\":999}".into());
    let out = store.job_insert(different).await.expect("insert different");
    assert!(matches!(out, InsertOutcome::Conflict(_)), "{out:?}");
    assert_eq!(
        get(&store, "d").await.0.request.body.as_deref(),
        Some("{\"amount\":100}")
    );
    let mut other_queue = new_job("d", "other");
    other_queue.queue = "other".into();
    assert!(matches!(
        store.job_insert(other_queue).await.expect("insert"),
        InsertOutcome::Conflict(_)
    ));
}

pub async fn batch_is_atomic(store: Arc<dyn Store>) {
    store
        .job_insert(new_job("b0", "default"))
        .await
        .expect("insert");
    let mut conflicting = new_job("b0", "default");
    conflicting.request.url = "https://api.example.com/other".into();
    let out = store
        .job_insert_batch(vec![
            new_job("b1", "default"),
            conflicting,
            new_job("b2", "default"),
        ])
        .await
        .expect("batch");
    assert!(matches!(out[1], InsertOutcome::Conflict(_)), "{out:?}");
    assert!(
        store
            .job_get(&JobId::from("b1"))
            .await
            .expect("get")
            .is_none(),
        "nothing half-stored"
    );
    assert!(
        store
            .job_get(&JobId::from("b2"))
            .await
            .expect("get")
            .is_none(),
        "nothing half-stored"
    );

    let out = store
        .job_insert_batch(vec![
            new_job("b1", "default"),
            new_job("b0", "default"),
            new_job("b2", "default"),
        ])
        .await
        .expect("batch");
    assert!(matches!(out[0], InsertOutcome::Inserted(_)));
    assert!(matches!(out[1], InsertOutcome::Duplicate(_)));
    assert!(matches!(out[2], InsertOutcome::Inserted(_)));
    // The same id twice in one batch: the second is a duplicate of the first.
    let out = store
        .job_insert_batch(vec![new_job("b3", "default"), new_job("b3", "default")])
        .await
        .expect("batch");
    assert!(
        matches!(out[0], InsertOutcome::Inserted(_))
            && matches!(out[1], InsertOutcome::Duplicate(_))
    );
}

pub async fn lease_order_and_queues(store: Arc<dyn Store>) {
    let mut jobs = Vec::new();
    for (id, prio, run_at) in [
        ("low-early", 0, -10),
        ("high", 5, 0),
        ("low-late", 0, -5),
        ("future", 9, 100),
    ] {
        let mut j = new_job(id, "q");
        j.priority = prio;
        j.run_at = at(run_at);
        jobs.push(j);
    }
    jobs.push(new_job("elsewhere", "other"));
    store.job_insert_batch(jobs).await.expect("batch");
    let got = lease(&store, "q", "w1", at(0), 2).await;
    assert_eq!(ids(&got), ["high", "low-early"]);
    assert!(got
        .iter()
        .all(|j| j.state == JobState::Running && j.lease_owner.as_deref() == Some("w1")));
    assert_eq!(
        ids(&lease(&store, "q", "w2", at(0), 10).await),
        ["low-late"]
    );
    assert!(lease(&store, "q", "w3", at(0), 10).await.is_empty());
    assert_eq!(
        ids(&lease(&store, "other", "w3", at(0), 10).await),
        ["elsewhere"]
    );
}

pub async fn lease_never_hands_a_job_out_twice(store: Arc<dyn Store>) {
    let jobs: Vec<_> = (0..200)
        .map(|i| new_job(&format!("j{i:03}"), "default"))
        .collect();
    store.job_insert_batch(jobs).await.expect("batch");
    let mut tasks = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = lease(&store, "default", &format!("w{w}"), at(0), 7).await;
                if got.is_empty() {
                    return mine;
                }
                mine.extend(ids(&got));
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(before, all.len(), "a job was leased twice");
    assert_eq!(all.len(), 200);
}

pub async fn record_attempt_transitions(store: Arc<dyn Store>) {
    for id in ["r", "d", "c", "x"] {
        store
            .job_insert(new_job(id, "default"))
            .await
            .expect("insert");
    }
    lease(&store, "default", "w1", at(0), 10).await;

    let state = store
        .job_record_attempt(record("r", "w1", 1, Transition::Retry { at: at(30) }))
        .await
        .expect("record");
    assert_eq!(state, JobState::Scheduled);
    let job = get(&store, "r").await.0;
    assert_eq!(
        (job.state, job.run_at, job.attempts, job.runs),
        (JobState::Scheduled, at(30), 1, 1)
    );
    assert!(job.lease_owner.is_none());
    assert_eq!(job.last_reason.as_deref(), Some("503 test; attempt 1"));

    let mut p = record("d", "w1", 1, Transition::Defer { until: at(60) });
    (p.attempts, p.deferrals) = (0, 1);
    store.job_record_attempt(p).await.expect("record");
    let job = get(&store, "d").await.0;
    assert_eq!(
        (job.state, job.run_at, job.attempts, job.deferrals),
        (JobState::Deferred, at(60), 0, 1)
    );

    // Found by seq, as the engine records.
    let mut p = record("c", "w1", 1, Transition::Complete);
    p.seq = Some(get(&store, "c").await.0.seq);
    store.job_record_attempt(p).await.expect("record");
    let job = get(&store, "c").await.0;
    assert_eq!(
        (job.state, job.finished_at),
        (JobState::Completed, Some(at(1)))
    );

    store
        .job_record_attempt(record(
            "x",
            "w1",
            1,
            Transition::Dead {
                category: DeadCategory::Permanent,
            },
        ))
        .await
        .expect("record");
    let job = get(&store, "x").await.0;
    assert_eq!(
        (job.state, job.category),
        (JobState::Dead, Some(DeadCategory::Permanent))
    );

    // A second attempt on the retried job: the log keeps both, in order.
    lease(&store, "default", "w2", at(30), 10).await;
    store
        .job_record_attempt(record("r", "w2", 2, Transition::Complete))
        .await
        .expect("record");
    let (job, attempts) = get(&store, "r").await;
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(
        attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(attempts[0], attempt(1, 503, "retry"));
    assert_eq!(attempts[1].worker, "w1");
}

pub async fn record_requires_the_lease(store: Arc<dyn Store>) {
    store
        .job_insert(new_job("l", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 1).await;
    let err = store
        .job_record_attempt(record("l", "intruder", 1, Transition::Complete))
        .await
        .expect_err("wrong owner");
    assert!(matches!(err, StoreError::LeaseLost(_)), "{err:?}");
    let (job, attempts) = get(&store, "l").await;
    assert_eq!(job.state, JobState::Running);
    assert!(attempts.is_empty(), "nothing recorded without the lease");
    // The same found by seq, as the engine records.
    let mut p = record("l", "intruder", 1, Transition::Complete);
    p.seq = Some(job.seq);
    let err = store.job_record_attempt(p).await.expect_err("wrong owner");
    assert!(matches!(err, StoreError::LeaseLost(_)), "{err:?}");
    let (job, attempts) = get(&store, "l").await;
    assert_eq!(job.state, JobState::Running);
    assert!(attempts.is_empty(), "nothing recorded without the lease");
    // The holder, by seq, with a number that is not the job's next: the log numbers it.
    let mut p = record("l", "w1", 3, Transition::Complete);
    p.seq = Some(job.seq);
    let state = store.job_record_attempt(p).await.expect("record");
    assert_eq!(state, JobState::Completed);
    let (job, attempts) = get(&store, "l").await;
    assert_eq!((job.state, job.runs), (JobState::Completed, 1));
    assert_eq!(attempts.iter().map(|a| a.number).collect::<Vec<_>>(), [1]);
    // A seq that is not the id's job finds nothing of it.
    let mut p = record("l", "w1", 2, Transition::Complete);
    p.seq = Some(job.seq + 1000);
    let err = store.job_record_attempt(p).await.expect_err("wrong seq");
    assert!(
        matches!(err, StoreError::LeaseLost(_) | StoreError::NotFound(_)),
        "{err:?}"
    );
}

pub async fn heartbeat_and_release(store: Arc<dyn Store>) {
    store
        .job_insert(new_job("h1", "default"))
        .await
        .expect("insert");
    store
        .job_insert(new_job("h2", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 10).await;
    let held = store
        .job_heartbeat(HeartbeatParams {
            owner: "w1".into(),
            ids: vec![JobId::from("h1"), JobId::from("h2"), JobId::from("h3")],
            lease_until: at(100),
        })
        .await
        .expect("heartbeat");
    assert_eq!(held, 2);
    assert_eq!(get(&store, "h1").await.0.lease_until, Some(at(100)));
    let none = store
        .job_heartbeat(HeartbeatParams {
            owner: "w2".into(),
            ids: vec![JobId::from("h1")],
            lease_until: at(200),
        })
        .await
        .expect("heartbeat");
    assert_eq!(none, 0);

    let released = store
        .job_release(ReleaseParams {
            owner: "w1".into(),
            ids: vec![JobId::from("h1")],
            now: at(5),
        })
        .await
        .expect("release");
    assert_eq!(released, 1);
    let (job, _) = get(&store, "h1").await;
    assert_eq!(
        (job.state, job.stalls, job.attempts, job.lease_owner),
        (JobState::Ready, 0, 0, None)
    );
    assert_eq!(
        ids(&lease(&store, "default", "w3", at(5), 10).await),
        ["h1"]
    );
}

pub async fn rescue_expired_leases(store: Arc<dyn Store>) {
    store
        .job_insert(new_job("s", "default"))
        .await
        .expect("insert");
    store
        .job_insert(new_job("fresh", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 1).await; // "s", lease until at(30)
    lease(&store, "default", "w2", at(20), 1).await; // "fresh", lease until at(50)
    let report = store
        .job_rescue_expired(RescueParams {
            now: at(31),
            max_stalls: 1,
        })
        .await
        .expect("rescue");
    assert_eq!(
        report,
        RescueReport {
            requeued: 1,
            dead: 0
        }
    );
    let (job, _) = get(&store, "s").await;
    assert_eq!((job.state, job.stalls), (JobState::Ready, 1));
    assert_eq!(get(&store, "fresh").await.0.state, JobState::Running);

    // The second stall is over the ceiling: dead, unknown_exhausted. "fresh" stalls for the first time.
    lease(&store, "default", "w3", at(40), 1).await;
    let report = store
        .job_rescue_expired(RescueParams {
            now: at(71),
            max_stalls: 1,
        })
        .await
        .expect("rescue");
    assert_eq!(
        report,
        RescueReport {
            requeued: 1,
            dead: 1
        }
    );
    assert_eq!(get(&store, "fresh").await.0.stalls, 1);
    let (job, _) = get(&store, "s").await;
    assert_eq!(
        (job.state, job.category, job.stalls),
        (JobState::Dead, Some(DeadCategory::UnknownExhausted), 2)
    );
    assert!(job.last_reason.expect("a reason").contains("lease expired"));
}

pub async fn promote_and_next_run_at(store: Arc<dyn Store>) {
    assert_eq!(
        store.job_next_run_at("default", T0).await.expect("next"),
        None
    );
    let mut j = new_job("p", "default");
    j.run_at = at(10);
    store.job_insert(j).await.expect("insert");
    let mut j = new_job("p2", "default");
    j.run_at = at(20);
    store.job_insert(j).await.expect("insert");
    let next = |after| store.job_next_run_at("default", after);
    assert_eq!(next(T0).await.expect("next"), Some(at(10)));
    assert_eq!(
        next(at(10)).await.expect("next"),
        Some(at(20)),
        "strictly after"
    );
    assert_eq!(next(at(20)).await.expect("next"), None);
    assert_eq!(
        store.job_next_run_at("other", T0).await.expect("next"),
        None
    );
    assert_eq!(store.job_promote_due(at(9)).await.expect("promote"), 0);
    assert_eq!(store.job_promote_due(at(15)).await.expect("promote"), 1);
    assert_eq!(get(&store, "p").await.0.state, JobState::Ready);
    assert_eq!(get(&store, "p2").await.0.state, JobState::Scheduled);

    // Across priority levels: the earliest time wins, whatever its job's priority.
    for (id, priority, t) in [
        ("hi", 5, 30),
        ("mid", 0, 10),
        ("lo", -3, 20),
        ("lo2", -3, 40),
    ] {
        let mut j = new_job(id, "levels");
        j.priority = priority;
        j.run_at = at(t);
        store.job_insert(j).await.expect("insert");
    }
    let next = |after| store.job_next_run_at("levels", after);
    assert_eq!(next(T0).await.expect("next"), Some(at(10)));
    assert_eq!(next(at(10)).await.expect("next"), Some(at(20)));
    assert_eq!(next(at(20)).await.expect("next"), Some(at(30)));
    assert_eq!(next(at(30)).await.expect("next"), Some(at(40)));
    assert_eq!(next(at(40)).await.expect("next"), None);
}

pub async fn replay_dead_job(store: Arc<dyn Store>) {
    make_dead(&store, "dead1", "default", DeadCategory::TransientExhausted).await;
    store
        .job_insert(new_job("alive", "default"))
        .await
        .expect("insert");
    let job = store
        .job_replay(&JobId::from("dead1"), at(100))
        .await
        .expect("replay");
    assert_eq!(
        (
            job.state,
            job.category,
            job.attempts,
            job.deferrals,
            job.replays
        ),
        (JobState::Ready, None, 0, 0, 1)
    );
    assert_eq!(job.idempotency_key.as_deref(), Some("key-dead1"));
    assert_eq!(job.run_at, at(100));
    assert_eq!(get(&store, "dead1").await.1.len(), 1, "history kept");
    let err = store
        .job_replay(&JobId::from("alive"), at(100))
        .await
        .expect_err("not dead");
    assert!(
        matches!(
            err,
            StoreError::InvalidState {
                state: JobState::Ready,
                ..
            }
        ),
        "{err:?}"
    );
    let err = store
        .job_replay(&JobId::from("ghost"), at(100))
        .await
        .expect_err("missing");
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
}

pub async fn dismiss_dead_job(store: Arc<dyn Store>) {
    make_dead(&store, "dead2", "default", DeadCategory::Permanent).await;
    store
        .job_insert(new_job("alive", "default"))
        .await
        .expect("insert");
    store
        .job_dismiss(&JobId::from("dead2"))
        .await
        .expect("dismiss");
    assert!(store
        .job_get(&JobId::from("dead2"))
        .await
        .expect("get")
        .is_none());
    let err = store
        .job_dismiss(&JobId::from("alive"))
        .await
        .expect_err("not dead");
    assert!(matches!(err, StoreError::InvalidState { .. }), "{err:?}");
    let err = store
        .job_dismiss(&JobId::from("dead2"))
        .await
        .expect_err("gone");
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
}

pub async fn cancel_jobs(store: Arc<dyn Store>) {
    store
        .job_insert(new_job("c1", "default"))
        .await
        .expect("insert");
    let job = store
        .job_cancel(&JobId::from("c1"), at(1))
        .await
        .expect("cancel");
    assert_eq!(
        (job.state, job.finished_at),
        (JobState::Cancelled, Some(at(1)))
    );
    assert!(lease(&store, "default", "w1", at(2), 10).await.is_empty());
    let err = store
        .job_cancel(&JobId::from("c1"), at(3))
        .await
        .expect_err("finished");
    assert!(
        matches!(
            err,
            StoreError::InvalidState {
                state: JobState::Cancelled,
                ..
            }
        ),
        "{err:?}"
    );

    // A running job is marked; its attempt's retry then ends it cancelled.
    store
        .job_insert(new_job("c2", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 10).await;
    let job = store
        .job_cancel(&JobId::from("c2"), at(1))
        .await
        .expect("cancel");
    assert_eq!((job.state, job.cancel_requested), (JobState::Running, true));
    // By seq, as the engine records: the cancel waiting is seen all the same.
    let mut p = record("c2", "w1", 1, Transition::Retry { at: at(10) });
    p.seq = Some(job.seq);
    let state = store.job_record_attempt(p).await.expect("record");
    assert_eq!(state, JobState::Cancelled);
    assert_eq!(get(&store, "c2").await.0.state, JobState::Cancelled);
    assert_eq!(
        get(&store, "c2").await.1.len(),
        1,
        "the attempt is still recorded"
    );

    // ...but a completion still completes.
    store
        .job_insert(new_job("c3", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 10).await;
    store
        .job_cancel(&JobId::from("c3"), at(1))
        .await
        .expect("cancel");
    let state = store
        .job_record_attempt(record("c3", "w1", 1, Transition::Complete))
        .await
        .expect("record");
    assert_eq!(state, JobState::Completed);
    assert_eq!(get(&store, "c3").await.0.state, JobState::Completed);
}

pub async fn bulk_dead_letter_actions(store: Arc<dyn Store>) {
    make_dead(&store, "p1", "default", DeadCategory::Permanent).await;
    make_dead(&store, "p2", "default", DeadCategory::Permanent).await;
    make_dead(&store, "t1", "default", DeadCategory::TransientExhausted).await;
    make_dead(&store, "o1", "other", DeadCategory::Permanent).await;
    store
        .job_insert(new_job("alive", "default"))
        .await
        .expect("insert");
    let filter = JobFilter {
        queue: Some("default".into()),
        category: Some(DeadCategory::Permanent),
        ..JobFilter::default()
    };
    assert_eq!(
        store
            .dead_letter_replay(filter.clone(), at(50))
            .await
            .expect("replay"),
        2
    );
    assert_eq!(get(&store, "p1").await.0.state, JobState::Ready);
    assert_eq!(get(&store, "t1").await.0.state, JobState::Dead);
    assert_eq!(
        store
            .dead_letter_replay(filter, at(50))
            .await
            .expect("replay"),
        0
    );
    // Time range: created before T0 matches nothing.
    let none = JobFilter {
        until: Some(at(0)),
        ..JobFilter::default()
    };
    assert_eq!(store.dead_letter_dismiss(none).await.expect("dismiss"), 0);
    assert_eq!(
        store
            .dead_letter_dismiss(JobFilter::default())
            .await
            .expect("dismiss"),
        2
    );
    assert!(store
        .job_get(&JobId::from("o1"))
        .await
        .expect("get")
        .is_none());
    assert!(store
        .job_get(&JobId::from("alive"))
        .await
        .expect("get")
        .is_some());
}

pub async fn list_filters_and_pages(store: Arc<dyn Store>) {
    let mut jobs = Vec::new();
    for i in 0..25 {
        let mut j = new_job(
            &format!("l{i:02}"),
            if i % 5 == 0 { "other" } else { "default" },
        );
        if i % 2 == 0 {
            j.endpoint = "https://b.example.com".into();
        }
        jobs.push(j);
    }
    store.job_insert_batch(jobs).await.expect("batch");
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .job_list(JobListParams {
                filter: JobFilter {
                    queue: Some("default".into()),
                    ..JobFilter::default()
                },
                after,
                limit: 7,
            })
            .await
            .expect("list");
        assert!(page.jobs.len() <= 7);
        seen.extend(ids(&page.jobs));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(seen.len(), 20);
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "oldest first");
    let page = store
        .job_list(JobListParams {
            filter: JobFilter {
                endpoint: Some("https://b.example.com".into()),
                state: Some(JobState::Ready),
                ..JobFilter::default()
            },
            after: None,
            limit: 100,
        })
        .await
        .expect("list");
    assert_eq!(page.jobs.len(), 13);
    assert_eq!(page.next, None);
}

pub async fn stats_counts(store: Arc<dyn Store>) {
    make_dead(&store, "s1", "default", DeadCategory::Permanent).await;
    store
        .job_insert(new_job("s2", "default"))
        .await
        .expect("insert");
    store
        .job_insert(new_job("s3", "default"))
        .await
        .expect("insert");
    store
        .job_insert(new_job("s4", "other"))
        .await
        .expect("insert");
    let stats = store.stats().await.expect("stats");
    let count = |q: &str, s: JobState| {
        stats
            .by_queue
            .iter()
            .filter(|c| c.queue == q && c.state == s)
            .map(|c| c.count)
            .sum::<u64>()
    };
    assert_eq!(count("default", JobState::Ready), 2);
    assert_eq!(count("default", JobState::Dead), 1);
    assert_eq!(count("other", JobState::Ready), 1);
    assert!(stats.by_queue.iter().any(|c| c.state == JobState::Dead
        && c.category == Some(DeadCategory::Permanent)
        && c.count == 1));
    let endpoint_total: u64 = stats.by_endpoint.iter().map(|c| c.count).sum();
    assert_eq!(endpoint_total, 4);
}

pub async fn cleanup_respects_retention(store: Arc<dyn Store>) {
    make_dead(&store, "old-dead", "default", DeadCategory::Permanent).await; // finished at(1)
    store
        .job_insert(new_job("done", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 10).await;
    store
        .job_record_attempt(record("done", "w1", 1, Transition::Complete))
        .await
        .expect("record");
    store
        .job_insert(new_job("waiting", "default"))
        .await
        .expect("insert");
    // Completed jobs older than at(2) go, dead ones only before at(0): the dead job stays.
    let n = store
        .job_cleanup(CleanupParams {
            completed_before: at(2),
            dead_before: at(0),
            completed_keep: None,
            limit: 100,
        })
        .await
        .expect("cleanup");
    assert_eq!(n, 1);
    assert!(store
        .job_get(&JobId::from("done"))
        .await
        .expect("get")
        .is_none());
    assert!(store
        .job_get(&JobId::from("old-dead"))
        .await
        .expect("get")
        .is_some());
    assert!(store
        .job_get(&JobId::from("waiting"))
        .await
        .expect("get")
        .is_some());
    let n = store
        .job_cleanup(CleanupParams {
            completed_before: at(2),
            dead_before: at(2),
            completed_keep: None,
            limit: 100,
        })
        .await
        .expect("cleanup");
    assert_eq!(n, 1);
    assert!(
        store
            .job_get(&JobId::from("waiting"))
            .await
            .expect("get")
            .is_some(),
        "unfinished jobs never go"
    );

    // A count bound deletes the oldest finished jobs beyond it, whatever their age.
    for i in 0..5 {
        let id = format!("k{i}");
        store
            .job_insert(new_job(&id, "keep"))
            .await
            .expect("insert");
        lease(&store, "keep", "w1", at(0), 1).await;
        let mut p = record(&id, "w1", 1, Transition::Complete);
        p.now = at(10 + i);
        store.job_record_attempt(p).await.expect("record");
    }
    let n = store
        .job_cleanup(CleanupParams {
            completed_before: at(0),
            dead_before: at(0),
            completed_keep: Some(2),
            limit: 100,
        })
        .await
        .expect("cleanup");
    assert_eq!(n, 3);
    for (id, kept) in [("k0", false), ("k2", false), ("k3", true), ("k4", true)] {
        let found = store
            .job_get(&JobId::from(id))
            .await
            .expect("get")
            .is_some();
        assert_eq!(found, kept, "{id}");
    }
}

pub async fn candidates_leave_out_held_endpoints(store: Arc<dyn Store>) {
    let mut jobs = Vec::new();
    for (id, endpoint, attempts_before) in [
        ("a1", "A", 0),
        ("a2", "A", 1),
        ("b1", "B", 0),
        ("b2", "B", 2),
        ("c1", "C", 0),
    ] {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        jobs.push((j, attempts_before));
    }
    for (j, _) in &jobs {
        store.job_insert(j.clone()).await.expect("insert");
    }
    // Give a2 and b2 a failed attempt each, so that they are retries.
    for (j, failures) in &jobs {
        if *failures > 0 {
            let seq = get(&store, &j.id.0).await.0.seq;
            let leased = store
                .job_lease_ids(LeaseIdsParams {
                    seqs: vec![seq],
                    owner: "w".into(),
                    now: at(0),
                    lease_until: at(30),
                })
                .await
                .expect("lease");
            assert_eq!(leased.len(), 1);
            let mut p = record(&j.id.0, "w", 1, Transition::Retry { at: at(0) });
            p.attempts = *failures;
            store.job_record_attempt(p).await.expect("record");
        }
    }
    let cands = |exclude: &[&str], exclude_retries: &[&str], exclude_firsts: &[&str]| {
        let params = CandidateParams {
            queue: "q".into(),
            now: at(1),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            exclude_retries: exclude_retries.iter().map(|s| s.to_string()).collect(),
            exclude_firsts: exclude_firsts.iter().map(|s| s.to_string()).collect(),
            limit: 100,
        };
        let store = store.clone();
        async move { store.job_candidates(params).await.expect("candidates") }
    };
    let all = cands(&[], &[], &[]).await;
    assert_eq!(
        all.iter().map(|c| c.id.0.as_str()).collect::<Vec<_>>(),
        ["a1", "a2", "b1", "b2", "c1"]
    );
    assert_eq!(
        all.iter().map(|c| c.is_retry).collect::<Vec<_>>(),
        [false, true, false, true, false]
    );
    let some = cands(&["A"], &["B"], &[]).await;
    assert_eq!(
        some.iter().map(|c| c.id.0.as_str()).collect::<Vec<_>>(),
        ["b1", "c1"]
    );
    let retries_of_a = cands(&[], &[], &["A", "C"]).await;
    assert_eq!(
        retries_of_a
            .iter()
            .map(|c| c.id.0.as_str())
            .collect::<Vec<_>>(),
        ["a2", "b1", "b2"]
    );
    let params = CandidateParams {
        queue: "q".into(),
        now: at(1),
        exclude: vec![],
        exclude_retries: vec![],
        exclude_firsts: vec![],
        limit: 2,
    };
    assert_eq!(
        store
            .job_candidates(params)
            .await
            .expect("candidates")
            .len(),
        2
    );
    // Candidates are only read: nothing changed.
    assert_eq!(get(&store, "a1").await.0.state, JobState::Ready);
}

/// Admission by a script, keeping what it was asked.
struct Scripted {
    asked: Arc<std::sync::Mutex<Vec<String>>>,
    handed_back: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Admit for Scripted {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        self.asked.lock().expect("lock").push(c.id.0.clone());
        match (c.endpoint.as_str(), c.is_retry) {
            ("A", _) => Verdict::HoldEndpoint,
            ("B", true) => Verdict::Fail,
            ("C", true) => Verdict::HoldRetries,
            _ => Verdict::Take,
        }
    }

    fn not_leased(&mut self, c: &Candidate) {
        self.handed_back.lock().expect("lock").push(c.id.0.clone());
    }
}

/// Inserts jobs of queue "q" as (id, endpoint, retry): a retry has one failed attempt and is
/// due at once.
async fn insert_on_endpoints(store: &Arc<dyn Store>, jobs: &[(&str, &str, bool)]) {
    for &(id, endpoint, retry) in jobs {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        let seq = store.job_insert(j).await.expect("insert").job().seq;
        if retry {
            let leased = store
                .job_lease_ids(LeaseIdsParams {
                    seqs: vec![seq],
                    owner: "w0".into(),
                    now: at(0),
                    lease_until: at(30),
                })
                .await
                .expect("lease");
            assert_eq!(leased.len(), 1);
            let p = record(id, "w0", 1, Transition::Retry { at: at(0) });
            store.job_record_attempt(p).await.expect("record");
        }
    }
}

pub async fn lease_admitted_asks_admission_in_lease_order(store: Arc<dyn Store>) {
    insert_on_endpoints(
        &store,
        &[
            ("a1", "A", false),
            ("a2", "A", false),
            ("b1", "B", false),
            ("b2", "B", true),
            ("c1", "C", false),
            ("c2", "C", true),
            ("d1", "D", false),
            ("d2", "D", false),
        ],
    )
    .await;
    let lease = |max: usize| {
        let store = store.clone();
        async move {
            let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
            let handed_back = Arc::new(std::sync::Mutex::new(Vec::new()));
            let admit = Box::new(Scripted {
                asked: asked.clone(),
                handed_back: handed_back.clone(),
            });
            let params = LeaseAdmittedParams {
                queue: "q".into(),
                now: at(1),
                owner: "w".into(),
                lease_until: at(31),
                max,
            };
            let got = store
                .job_lease_admitted(params, admit)
                .await
                .expect("lease admitted");
            assert!(handed_back.lock().expect("lock").is_empty());
            let asked = asked.lock().expect("lock").clone();
            (ids(&got.taken), ids(&got.failed), asked)
        }
    };
    // A held endpoint is asked once; a retry to fail is leased without counting; at `max`, no
    // more candidates are asked.
    let (taken, failed, asked) = lease(2).await;
    assert_eq!(taken, ["b1", "c1"]);
    assert_eq!(failed, ["b2"]);
    assert_eq!(asked, ["a1", "b1", "b2", "c1"]);
    for id in ["b1", "b2", "c1"] {
        let job = get(&store, id).await.0;
        assert_eq!(job.state, JobState::Running, "{id}");
        assert_eq!(job.lease_owner.as_deref(), Some("w"), "{id}");
    }
    // Held retries leave the endpoint's first attempts free to go.
    let (taken, failed, asked) = lease(10).await;
    assert_eq!(taken, ["d1", "d2"]);
    assert!(failed.is_empty());
    assert_eq!(asked, ["a1", "c2", "d1", "d2"]);
    // What is left is held.
    let (taken, failed, asked) = lease(10).await;
    assert!(taken.is_empty() && failed.is_empty());
    assert_eq!(asked, ["a1", "c2"]);
    assert_eq!(get(&store, "a1").await.0.state, JobState::Ready);
    // Nothing to take, nothing asked.
    let (taken, _, asked) = lease(0).await;
    assert!(taken.is_empty() && asked.is_empty());
}

/// Admission that holds endpoint E's first attempts (E is suspect) and takes everything else.
struct HoldsFirstsOfE {
    asked: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Admit for HoldsFirstsOfE {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        self.asked.lock().expect("lock").push(c.id.0.clone());
        match (c.endpoint.as_str(), c.is_retry) {
            ("E", false) => Verdict::HoldFirsts,
            _ => Verdict::Take,
        }
    }

    fn not_leased(&mut self, _c: &Candidate) {}
}

/// Held first attempts are passed over, and the endpoint's retries behind them are reached in
/// the same lease (they tell whether a suspect endpoint is down or flaky).
pub async fn lease_admitted_holds_first_attempts_takes_retries(store: Arc<dyn Store>) {
    insert_on_endpoints(
        &store,
        &[
            ("e1", "E", false),
            ("e2", "E", false),
            ("f1", "F", false),
            ("e3", "E", true),
            ("e4", "E", false),
            ("e5", "E", true),
        ],
    )
    .await;
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let got = store
        .job_lease_admitted(
            LeaseAdmittedParams {
                queue: "q".into(),
                now: at(1),
                owner: "w".into(),
                lease_until: at(31),
                max: 10,
            },
            Box::new(HoldsFirstsOfE {
                asked: asked.clone(),
            }),
        )
        .await
        .expect("lease admitted");
    let mut taken = ids(&got.taken);
    taken.sort();
    assert_eq!(taken, ["e3", "e5", "f1"]);
    // E's first attempts were asked about once, then passed over.
    let asked = asked.lock().expect("lock").clone();
    assert_eq!(asked.iter().filter(|id| id.starts_with("e1")).count(), 1);
    assert!(
        !asked.iter().any(|id| id == "e2" || id == "e4"),
        "{asked:?}"
    );
    for id in ["e1", "e2", "e4"] {
        assert_eq!(get(&store, id).await.0.state, JobState::Ready, "{id}");
    }
}

pub async fn lease_ids_takes_only_runnable_jobs(store: Arc<dyn Store>) {
    let r1 = store.job_insert(new_job("r1", "q")).await.expect("insert");
    let mut later = new_job("r2", "q");
    later.run_at = at(60);
    let r2 = store.job_insert(later).await.expect("insert");
    let missing = r1.job().seq.max(r2.job().seq) + 1000;
    let wanted = vec![r1.job().seq, r2.job().seq, missing];
    let params = |owner: &str| LeaseIdsParams {
        seqs: wanted.clone(),
        owner: owner.into(),
        now: at(0),
        lease_until: at(30),
    };
    let got = store.job_lease_ids(params("w1")).await.expect("lease");
    assert_eq!(ids(&got), ["r1"]);
    assert_eq!(got[0].lease_owner.as_deref(), Some("w1"));
    assert!(
        store
            .job_lease_ids(params("w2"))
            .await
            .expect("lease")
            .is_empty(),
        "never leased twice"
    );
}

pub async fn deadlines_expire_for_held_jobs(store: Arc<dyn Store>) {
    for (id, endpoint, deadline) in [
        ("e1", "A", Some(10)),
        ("e2", "B", Some(10)),
        ("e3", "A", Some(100)),
        ("e4", "A", None),
    ] {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        j.deadline = deadline.map(at);
        store.job_insert(j).await.expect("insert");
    }
    let n = store
        .job_expire_deadlines(ExpireParams {
            now: at(10),
            reasons: vec![("A".into(), "circuit open until later".into())],
        })
        .await
        .expect("expire");
    assert_eq!(n, 2);
    let (e1, _) = get(&store, "e1").await;
    assert_eq!(
        (e1.state, e1.category),
        (JobState::Dead, Some(DeadCategory::DeadlineExceeded))
    );
    assert_eq!(
        e1.last_reason.as_deref(),
        Some("deadline passed while held by its endpoint: circuit open until later")
    );
    let (e2, _) = get(&store, "e2").await;
    assert_eq!(
        e2.last_reason.as_deref(),
        Some("deadline passed before the job could run")
    );
    assert_eq!(get(&store, "e3").await.0.state, JobState::Ready);
    assert_eq!(get(&store, "e4").await.0.state, JobState::Ready);
}

pub async fn endpoint_state_round_trips(store: Arc<dyn Store>) {
    assert!(store.endpoint_load().await.expect("load").is_empty());
    let rec = |name: &str, state: &str, t| EndpointRecord {
        name: name.into(),
        state: state.into(),
        updated_at: at(t),
    };
    store
        .endpoint_save(vec![rec("A", "{\"a\":1}", 1), rec("B", "{}", 1)])
        .await
        .expect("save");
    store
        .endpoint_save(vec![rec("A", "{\"a\":2}", 2)])
        .await
        .expect("save");
    assert_eq!(
        store.endpoint_load().await.expect("load"),
        vec![rec("A", "{\"a\":2}", 2), rec("B", "{}", 1)]
    );
}

pub async fn recent_dead_letters_and_oldest_deferred(store: Arc<dyn Store>) {
    // Dead at at(1) (make_dead's record time).
    make_dead(&store, "p1", "default", DeadCategory::Permanent).await;
    make_dead(&store, "p2", "default", DeadCategory::Permanent).await;
    make_dead(&store, "t1", "other", DeadCategory::TransientExhausted).await;
    let mut got = store.dead_letters_since(at(1)).await.expect("since");
    got.sort_by(|a, b| a.queue.cmp(&b.queue));
    assert_eq!(
        got,
        vec![
            DeadCount {
                queue: "default".into(),
                category: DeadCategory::Permanent,
                count: 2
            },
            DeadCount {
                queue: "other".into(),
                category: DeadCategory::TransientExhausted,
                count: 1
            },
        ]
    );
    assert!(store
        .dead_letters_since(at(2))
        .await
        .expect("since")
        .is_empty());
    // A replayed job is no dead letter any more.
    store
        .job_replay(&JobId::from("t1"), at(3))
        .await
        .expect("replay");
    assert_eq!(
        store.dead_letters_since(at(0)).await.expect("since").len(),
        1
    );

    // Deferred jobs: the queue's oldest deferral is the earliest `updated_at` among them.
    for (id, defer_at) in [("d1", 5), ("d2", 7)] {
        store.job_insert(new_job(id, "q")).await.expect("insert");
        lease(&store, "q", "w", at(0), 1).await;
        let mut p = record(id, "w", 1, Transition::Defer { until: at(100) });
        p.now = at(defer_at);
        store.job_record_attempt(p).await.expect("defer");
    }
    let stats = store.stats().await.expect("stats");
    assert_eq!(
        stats.oldest_deferred,
        vec![QueueSince {
            queue: "q".into(),
            since: at(5)
        }]
    );
}

pub async fn shared_holds_only_lengthen(store: Arc<dyn Store>) {
    assert!(store
        .endpoint_holds_load(at(0))
        .await
        .expect("load")
        .is_empty());
    let hold = |e: &str, pause: Option<i64>, breaker: Option<i64>, why: &str| SharedHold {
        endpoint: e.into(),
        paused_until: pause.map(at),
        pause_reason: pause.map(|_| format!("pause {why}")),
        breaker_until: breaker.map(at),
        breaker_reason: breaker.map(|_| format!("breaker {why}")),
    };
    store
        .endpoint_holds_share(vec![
            hold("A", Some(30), None, "1"),
            hold("B", None, Some(10), "1"),
        ])
        .await
        .expect("share");
    // A shorter pause does not shorten the stored one; a longer breaker lengthens it.
    store
        .endpoint_holds_share(vec![
            hold("A", Some(20), None, "2"),
            hold("B", None, Some(40), "2"),
        ])
        .await
        .expect("share");
    let mut got = store.endpoint_holds_load(at(0)).await.expect("load");
    got.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    assert_eq!(
        got,
        vec![
            hold("A", Some(30), None, "1"),
            hold("B", None, Some(40), "2")
        ]
    );
    // Holds that ended are not loaded; a hold that half ended keeps its other half.
    store
        .endpoint_holds_share(vec![hold("B", Some(5), None, "3")])
        .await
        .expect("share");
    let mut got = store.endpoint_holds_load(at(35)).await.expect("load");
    got.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    assert_eq!(got, vec![hold("B", None, Some(40), "2")]);
}

pub async fn endpoint_backlog_counts(store: Arc<dyn Store>) {
    for (id, endpoint, run_at) in [
        ("k1", "A", 0),
        ("k2", "A", 0),
        ("k3", "A", 50),
        ("k4", "B", 0),
    ] {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        j.run_at = at(run_at);
        store.job_insert(j).await.expect("insert");
    }
    lease(&store, "q", "w", at(0), 1).await; // k1 runs: not waiting
    let backlog = store.endpoint_backlog(at(1)).await.expect("backlog");
    assert_eq!(
        backlog,
        vec![
            EndpointBacklog {
                endpoint: "A".into(),
                due: 1,
                later: 1
            },
            EndpointBacklog {
                endpoint: "B".into(),
                due: 1,
                later: 0
            },
        ]
    );
}
