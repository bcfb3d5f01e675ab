//! Inserting: one job, a future one, duplicates and conflicts, atomic batches.

use super::{at, get, ids, lease, new_job};
use crate::{InsertOutcome, JobId, JobState, Store};
use std::sync::Arc;

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
