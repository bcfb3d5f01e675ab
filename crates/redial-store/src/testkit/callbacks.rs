//! Completion callbacks: a job that finishes in one of its callback's events has its delivery
//! written with the state change, whatever path finished it; nothing else makes one.

use super::{at, by_seq, get, ids, lease, new_job, record};
use crate::{
    Callback, CallbackEvent, ExpireParams, Job, JobFilter, JobId, JobListParams, JobState, NewJob,
    Recorded, RescueParams, Store, StoreError, StoreResult, Transition,
};
use redial_policy::DeadCategory;
use std::sync::Arc;

/// The callback queue of the suite.
const CB_QUEUE: &str = "callbacks";

fn with_callback(mut job: NewJob, on: &[CallbackEvent]) -> NewJob {
    job.callback = Some(Callback {
        url: "https://hooks.example.com/done".into(),
        on: on.to_vec(),
        headers: vec![("authorization".into(), "Bearer app-secret".into())],
        queue: CB_QUEUE.into(),
        endpoint: "https://hooks.example.com".into(),
    });
    job
}

/// The deliveries in the callback queue, by id.
async fn deliveries(store: &Arc<dyn Store>) -> Vec<Job> {
    let page = store
        .job_list(JobListParams {
            filter: JobFilter {
                queue: Some(CB_QUEUE.into()),
                ..JobFilter::default()
            },
            after: None,
            limit: 100,
        })
        .await
        .expect("list");
    let mut jobs = page.jobs;
    jobs.sort_by(|a, b| a.id.cmp(&b.id));
    jobs
}

/// The job `id` among those `leased`.
fn leased_one(leased: &[Job], id: &str) -> Job {
    leased
        .iter()
        .find(|j| j.id.0 == id)
        .expect("leased")
        .clone()
}

/// The delivery's body, as JSON.
fn body(d: &Job) -> serde_json::Value {
    serde_json::from_str(d.request.body.as_deref().expect("a body")).expect("JSON body")
}

/// Records `transition` for the leased `job` as the engine does: by seq, with the delivery the
/// attempt's expected outcome owes.
async fn record_as_engine(
    store: &Arc<dyn Store>,
    job: &Job,
    owner: &str,
    transition: Transition,
    status: u16,
) -> StoreResult<JobState> {
    let mut p = record(&job.id.0, owner, job.runs + 1, transition);
    by_seq(&mut p, job);
    p.attempt.status = Some(status);
    p.attempt.response_body = Some("{\"charge\":\"ch_1\"}".into());
    p.attempt.response_headers = vec![
        ("content-type".into(), "application/json".into()),
        ("set-cookie".into(), "[redacted]".into()),
    ];
    p.callback = p.delivery(job, &p.plan(job));
    store.job_record_attempt(p).await.map(|r| r.state)
}

pub async fn callbacks_are_written_with_the_state_change(store: Arc<dyn Store>) {
    let all = CallbackEvent::ALL;
    store
        .job_insert(with_callback(new_job("ok", "q"), &CallbackEvent::DEFAULT))
        .await
        .expect("insert");
    store
        .job_insert(with_callback(
            new_job("only-ok", "q"),
            &[CallbackEvent::Completed],
        ))
        .await
        .expect("insert");
    store
        .job_insert(with_callback(new_job("slow", "q"), &all))
        .await
        .expect("insert");
    store
        .job_insert(with_callback(new_job("won", "q"), &all))
        .await
        .expect("insert");
    store
        .job_insert(new_job("plain", "q"))
        .await
        .expect("insert");
    let leased = lease(&store, "q", "w1", at(0), 10).await;
    let job = |id: &str| leased_one(&leased, id);

    // Completed on the fast path: its delivery is there, with the response.
    let ok = job("ok");
    let state = record_as_engine(&store, &ok, "w1", Transition::Complete, 201)
        .await
        .expect("record");
    assert_eq!(state, JobState::Completed);
    let d = deliveries(&store).await;
    assert_eq!(d.len(), 1, "one delivery: {d:?}");
    assert_eq!(
        d[0].id,
        Callback::delivery_id(&ok, CallbackEvent::Completed, 0)
    );
    assert_eq!(d[0].idempotency_key.as_deref(), Some(d[0].id.0.as_str()));
    assert_eq!(
        (d[0].state, d[0].callback.as_ref()),
        (JobState::Ready, None),
        "a delivery has no callback of its own"
    );
    assert_eq!(d[0].request.method, "POST");
    assert_eq!(d[0].request.url, "https://hooks.example.com/done");
    assert!(d[0]
        .request
        .headers
        .contains(&("authorization".into(), "Bearer app-secret".into())));
    let b = body(&d[0]);
    assert_eq!(b["type"], "job.completed");
    assert_eq!(b["data"]["id"], "ok");
    assert_eq!(b["data"]["state"], "completed");
    assert_eq!(b["data"]["idempotency_key"], "key-ok");
    assert_eq!(b["data"]["runs"], 1);
    assert_eq!(b["data"]["response"]["status"], 201);
    assert_eq!(b["data"]["response"]["body"], "{\"charge\":\"ch_1\"}");
    assert_eq!(b["data"]["response"]["body_encoding"], "text");
    assert_eq!(b["data"]["response"]["content_type"], "application/json");
    assert!(
        b["data"]["response"]["headers"].get("set-cookie").is_none(),
        "secret headers stay out: {b}"
    );
    assert_eq!(
        Callback::delivered_for(&d[0].id),
        Some((JobId::from("ok"), CallbackEvent::Completed))
    );

    // The same result again finds the lease gone: no second delivery.
    let again = record_as_engine(&store, &ok, "w1", Transition::Complete, 201).await;
    assert!(matches!(again, Err(StoreError::LeaseLost(_))), "{again:?}");
    assert_eq!(deliveries(&store).await.len(), 1);

    // Dead, but the callback is for completions only; a job without a callback makes none.
    let dead = Transition::Dead {
        category: DeadCategory::Permanent,
    };
    record_as_engine(&store, &job("only-ok"), "w1", dead, 400)
        .await
        .expect("record");
    record_as_engine(&store, &job("plain"), "w1", Transition::Complete, 200)
        .await
        .expect("record");
    assert_eq!(deliveries(&store).await.len(), 1);

    // A cancel waits while "slow" runs; its retry ends it cancelled, through the careful path,
    // which makes the delivery of what did happen.
    store
        .job_cancel(&JobId::from("slow"), at(1))
        .await
        .expect("cancel");
    let state = record_as_engine(
        &store,
        &job("slow"),
        "w1",
        Transition::Retry { at: at(30) },
        503,
    )
    .await
    .expect("record");
    assert_eq!(state, JobState::Cancelled);
    let d = deliveries(&store).await;
    assert_eq!(d.len(), 2, "{d:?}");
    let slow = d
        .iter()
        .find(|d| d.id == Callback::delivery_id(&job("slow"), CallbackEvent::Cancelled, 0))
        .expect("the cancelled delivery");
    assert_eq!(body(slow)["type"], "job.cancelled");
    assert_eq!(body(slow)["data"]["response"]["status"], 503);

    // A cancel waits, but the attempt completes the job: the delivery made for the expected
    // outcome is the one kept (the fast path finds the cancel and takes its own back).
    store
        .job_cancel(&JobId::from("won"), at(1))
        .await
        .expect("cancel");
    let state = record_as_engine(&store, &job("won"), "w1", Transition::Complete, 200)
        .await
        .expect("record");
    assert_eq!(state, JobState::Completed);
    let d = deliveries(&store).await;
    assert_eq!(d.len(), 3, "{d:?}");
    assert!(d
        .iter()
        .any(|d| d.id == Callback::delivery_id(&job("won"), CallbackEvent::Completed, 0)));

    // Deliveries finishing make nothing more (no loops), whatever they carry.
    let leased = lease(&store, CB_QUEUE, "w2", at(2), 10).await;
    assert_eq!(leased.len(), 3);
    for d in &leased {
        record_as_engine(&store, d, "w2", Transition::Complete, 204)
            .await
            .expect("record");
    }
    assert_eq!(deliveries(&store).await.len(), 3);
}

pub async fn callbacks_of_cancels_replays_and_maintenance(store: Arc<dyn Store>) {
    let all = CallbackEvent::ALL;
    // Cancelled while waiting: at once, with no response to show.
    store
        .job_insert(with_callback(new_job("waiting", "q"), &all))
        .await
        .expect("insert");
    store
        .job_cancel(&JobId::from("waiting"), at(1))
        .await
        .expect("cancel");
    let d = deliveries(&store).await;
    assert_eq!(d.len(), 1);
    assert_eq!(body(&d[0])["type"], "job.cancelled");
    assert!(body(&d[0])["data"]["response"].is_null());

    // Dead by its deadline, then replayed and dead again: a delivery per run.
    let mut late = with_callback(new_job("late", "q"), &CallbackEvent::DEFAULT);
    late.deadline = Some(at(10));
    store.job_insert(late).await.expect("insert");
    store
        .job_expire_deadlines(ExpireParams {
            now: at(10),
            reasons: vec![],
        })
        .await
        .expect("expire");
    let (late, _) = get(&store, "late").await;
    assert_eq!(late.state, JobState::Dead);
    store
        .job_replay(&JobId::from("late"), at(11))
        .await
        .expect("replay");
    let leased = lease(&store, "q", "w1", at(11), 10).await;
    let late = leased.iter().find(|j| j.id.0 == "late").expect("leased");
    record_as_engine(
        &store,
        late,
        "w1",
        Transition::Dead {
            category: DeadCategory::Permanent,
        },
        422,
    )
    .await
    .expect("record");
    let ids: Vec<JobId> = deliveries(&store).await.into_iter().map(|d| d.id).collect();
    assert!(ids.contains(&Callback::delivery_id(late, CallbackEvent::Dead, 0)));
    assert!(ids.contains(&Callback::delivery_id(late, CallbackEvent::Dead, 1)));
    assert_eq!(ids.len(), 3, "{ids:?}");

    // Dead by stalls: the rescue makes its delivery.
    store
        .job_insert(with_callback(new_job("stuck", "q2"), &all))
        .await
        .expect("insert");
    lease(&store, "q2", "w1", at(20), 1).await;
    let report = store
        .job_rescue_expired(RescueParams {
            now: at(60),
            max_stalls: 0,
            presence_grace: std::time::Duration::ZERO,
        })
        .await
        .expect("rescue");
    assert_eq!(report.dead, 1);
    let d = deliveries(&store).await;
    assert_eq!(d.len(), 4);
    let stuck = d
        .iter()
        .find(|d| body(d)["data"]["id"] == "stuck")
        .expect("the stalled job's delivery");
    assert_eq!(body(stuck)["data"]["category"], "unknown_exhausted");
}

pub async fn a_delivery_can_go_in_leased_to_its_recorder(store: Arc<dyn Store>) {
    let all = CallbackEvent::ALL;
    for id in ["fast", "cancelled", "second"] {
        store
            .job_insert(with_callback(new_job(id, "q"), &all))
            .await
            .expect("insert");
    }
    let leased = lease(&store, "q", "w1", at(0), 10).await;
    let job = |id: &str| leased_one(&leased, id);
    let as_engine = |job: &Job, transition: Transition| {
        let mut p = record(&job.id.0, "w1", job.runs + 1, transition);
        by_seq(&mut p, job);
        p.callback = p.delivery(job, &p.plan(job));
        p.callback_leased_until = Some(at(61));
        p
    };

    // The fast path: the delivery is in, running, leased to the recorder, and told back as
    // stored.
    let fast = job("fast");
    let recorded = store
        .job_record_attempt(as_engine(&fast, Transition::Complete))
        .await
        .expect("record");
    assert_eq!(recorded.state, JobState::Completed);
    let told = recorded.delivery.expect("the delivery, leased");
    assert_eq!(
        told.id,
        Callback::delivery_id(&fast, CallbackEvent::Completed, 0)
    );
    let stored = get(&store, &told.id.0).await.0;
    assert_eq!(told, stored, "told as stored");
    assert_eq!(
        (
            stored.state,
            stored.lease_owner.as_deref(),
            stored.lease_until,
            stored.runs
        ),
        (JobState::Running, Some("w1"), Some(at(61)), 0)
    );
    assert_eq!(body(&stored)["type"], "job.completed");
    // No other worker can lease it; its recorder records its attempt as any leased job's.
    assert!(lease(&store, CB_QUEUE, "w2", at(2), 10).await.is_empty());
    let mut p = record(&told.id.0, "w1", 1, Transition::Complete);
    by_seq(&mut p, &told);
    let done = store
        .job_record_attempt(p)
        .await
        .expect("record the delivery");
    assert_eq!(done, Recorded::left(JobState::Completed));

    // The job is found otherwise (a cancel waits and the attempt retries): the careful path
    // makes the delivery of what happened, ready as every other one, and tells none.
    let cancelled = job("cancelled");
    store
        .job_cancel(&cancelled.id, at(1))
        .await
        .expect("cancel");
    let recorded = store
        .job_record_attempt(as_engine(&cancelled, Transition::Retry { at: at(30) }))
        .await
        .expect("record");
    assert_eq!(recorded, Recorded::left(JobState::Cancelled));
    let d = Callback::delivery_id(&cancelled, CallbackEvent::Cancelled, 0);
    assert_eq!(get(&store, &d.0).await.0.state, JobState::Ready);
    assert!(store
        .job_get(&Callback::delivery_id(
            &cancelled,
            CallbackEvent::Completed,
            0
        ))
        .await
        .expect("get")
        .is_none());

    // A leased delivery whose recorder goes away is rescued as any lease is, and runs again.
    let second = job("second");
    let told = store
        .job_record_attempt(as_engine(
            &second,
            Transition::Dead {
                category: DeadCategory::Permanent,
            },
        ))
        .await
        .expect("record")
        .delivery
        .expect("leased");
    assert_eq!(body(&told)["type"], "job.dead");
    let report = store
        .job_rescue_expired(RescueParams {
            now: at(62),
            max_stalls: 3,
            presence_grace: std::time::Duration::ZERO,
        })
        .await
        .expect("rescue");
    assert_eq!(report.requeued, 1, "{report:?}");
    let again = lease(&store, CB_QUEUE, "w2", at(63), 10).await;
    let mut expected = vec![d.0.clone(), told.id.0.clone()];
    expected.sort();
    let mut got = ids(&again);
    got.sort();
    assert_eq!(got, expected, "the rescued delivery, beside the ready one");
}

/// Completions that owe deliveries, recorded at once as the engine records them (a store may
/// record them together): each is recorded, each delivery goes in once, leased to its recorder
/// and told back as stored.
pub async fn deliveries_owed_by_completions_recorded_at_once(store: Arc<dyn Store>) {
    const N: usize = 40;
    let all = CallbackEvent::ALL;
    let jobs: Vec<_> = (0..N)
        .map(|i| with_callback(new_job(&format!("o{i:02}"), "q"), &all))
        .collect();
    store.job_insert_batch(jobs).await.expect("batch");
    let leased = lease(&store, "q", "w1", at(0), N as u32).await;
    assert_eq!(leased.len(), N);
    let mut tasks = Vec::new();
    for job in leased {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut p = record(&job.id.0, "w1", job.runs + 1, Transition::Complete);
            by_seq(&mut p, &job);
            p.callback = p.delivery(&job, &p.plan(&job));
            p.callback_leased_until = Some(at(61));
            let recorded = store.job_record_attempt(p).await.expect("record");
            (job, recorded)
        }));
    }
    for t in tasks {
        let (job, recorded) = t.await.expect("task");
        assert_eq!(recorded.state, JobState::Completed, "{}", job.id.0);
        let told = recorded.delivery.expect("the delivery, leased");
        assert_eq!(
            told.id,
            Callback::delivery_id(&job, CallbackEvent::Completed, 0)
        );
        let stored = get(&store, &told.id.0).await.0;
        assert_eq!(told, stored, "told as stored");
        assert_eq!(
            (stored.state, stored.lease_owner.as_deref()),
            (JobState::Running, Some("w1"))
        );
        assert_eq!(body(&stored)["type"], "job.completed");
    }
    assert_eq!(deliveries(&store).await.len(), N, "each delivery once");
}
