//! An attempt's result, leases kept and lost: recording, heartbeats, release, rescue, promotion.

use super::{at, attempt, by_seq, get, ids, lease, new_job, record, T0};
use crate::{
    Attempt, HeartbeatParams, JobFilter, JobId, JobState, Recorded, ReleaseParams, RescueParams,
    RescueReport, Store, StoreError, Transition,
};
use redial_policy::DeadCategory;
use std::sync::Arc;

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
    assert_eq!(state, Recorded::left(JobState::Scheduled));
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
    by_seq(&mut p, &get(&store, "c").await.0);
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

/// The attempt that ends a job is kept apart from the others (in the job's row); the timeline
/// reads the same through every way a job can end, a replay (one by one and by filter) and a
/// second end.
pub async fn the_attempt_that_ends_a_job_stays_in_its_timeline(store: Arc<dyn Store>) {
    for id in ["f1", "f2"] {
        store
            .job_insert(new_job(id, "default"))
            .await
            .expect("insert");
    }
    let numbers = |attempts: &[Attempt]| attempts.iter().map(|a| a.number).collect::<Vec<_>>();
    let dead = Transition::Dead {
        category: DeadCategory::TransientExhausted,
    };
    for (id, by_seq_too) in [("f1", true), ("f2", false)] {
        lease(&store, "default", "w1", at(0), 10).await;
        store
            .job_record_attempt(record(id, "w1", 1, Transition::Retry { at: at(2) }))
            .await
            .expect("retry");
        lease(&store, "default", "w2", at(2), 10).await;
        let mut p = record(id, "w2", 2, dead);
        p.attempt.worker = "w2".into();
        if by_seq_too {
            by_seq(&mut p, &get(&store, id).await.0);
        }
        store.job_record_attempt(p).await.expect("dead");
        let (job, attempts) = get(&store, id).await;
        assert_eq!(job.state, JobState::Dead);
        assert_eq!(numbers(&attempts), [1, 2], "{id}");
        assert_eq!(attempts[1].worker, "w2");
    }
    store
        .job_replay(&JobId::from("f1"), at(3))
        .await
        .expect("replay");
    let n = store
        .dead_letter_replay(
            JobFilter {
                state: Some(JobState::Dead),
                ..JobFilter::default()
            },
            at(3),
        )
        .await
        .expect("replay by filter");
    assert_eq!(n, 1);
    lease(&store, "default", "w3", at(3), 10).await;
    for id in ["f1", "f2"] {
        assert_eq!(numbers(&get(&store, id).await.1), [1, 2], "{id} replayed");
        let mut p = record(id, "w3", 3, Transition::Complete);
        p.attempt.worker = "w3".into();
        by_seq(&mut p, &get(&store, id).await.0);
        store.job_record_attempt(p).await.expect("complete");
        let (job, attempts) = get(&store, id).await;
        assert_eq!(job.state, JobState::Completed);
        assert_eq!(numbers(&attempts), [1, 2, 3], "{id}");
        assert_eq!(
            attempts
                .iter()
                .map(|a| a.worker.as_str())
                .collect::<Vec<_>>(),
            ["w1", "w2", "w3"]
        );
    }
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
    by_seq(&mut p, &job);
    let err = store.job_record_attempt(p).await.expect_err("wrong owner");
    assert!(matches!(err, StoreError::LeaseLost(_)), "{err:?}");
    let (job, attempts) = get(&store, "l").await;
    assert_eq!(job.state, JobState::Running);
    assert!(attempts.is_empty(), "nothing recorded without the lease");
    // The holder, by seq, with a number that is not the job's next: the log numbers it.
    let mut p = record("l", "w1", 3, Transition::Complete);
    by_seq(&mut p, &job);
    let state = store.job_record_attempt(p).await.expect("record");
    assert_eq!(state, Recorded::left(JobState::Completed));
    let (job, attempts) = get(&store, "l").await;
    assert_eq!((job.state, job.runs), (JobState::Completed, 1));
    assert_eq!(attempts.iter().map(|a| a.number).collect::<Vec<_>>(), [1]);
    // A seq that is not the id's job finds nothing of it.
    let mut p = record("l", "w1", 2, Transition::Complete);
    by_seq(&mut p, &job);
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
    // The first lease's end (at 30) has passed, the extended one (at 100) has not.
    let rescue = |now| {
        store.job_rescue_expired(RescueParams {
            now,
            max_stalls: 3,
            presence_grace: std::time::Duration::ZERO,
        })
    };
    assert_eq!(rescue(at(31)).await.expect("rescue").requeued, 0);
    assert_eq!(get(&store, "h2").await.0.state, JobState::Running);

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
    // Past both: h2's extended lease and h1's second one (until 35) end.
    assert_eq!(rescue(at(101)).await.expect("rescue").requeued, 2);
    let (job, _) = get(&store, "h2").await;
    assert_eq!((job.state, job.stalls), (JobState::Ready, 1));
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
            presence_grace: std::time::Duration::ZERO,
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
            presence_grace: std::time::Duration::ZERO,
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
