//! Bulk actions on dead letters as operations: a chunk of at most `CHUNK` jobs at a time, with
//! progress that adds up, and a cancel that takes effect between chunks.

use super::*;
use redial_engine::{BulkKind, CancelError, OperationState, CHUNK};
use redial_store::JobFilter;

/// The dead letters the store holds.
async fn dead(h: &TestEngine) -> u64 {
    h.store
        .dead_letter_groups(JobFilter::default())
        .await
        .expect("groups")
        .iter()
        .map(|g| g.count)
        .sum()
}

/// An engine with `n` dead letters (jobs to a private address the executor refuses, run by it),
/// then stopped: what a bulk replay puts back stays ready.
async fn with_dead_letters(n: usize) -> TestEngine {
    let mut h = harness().allow_private_networks(false).start().await;
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            h.new_job(
                &format!("d{i}"),
                "default",
                "POST",
                "http://127.0.0.1:9/x",
                None,
            )
        })
        .collect();
    for batch in jobs.chunks(1000) {
        h.store
            .job_insert_batch(batch.to_vec())
            .await
            .expect("insert");
    }
    h.engine.wake("default");
    // Waits for the store to say so; the bound only stops a broken test from hanging.
    let give_up = tokio::time::Instant::now() + Duration::from_secs(300);
    while dead(&h).await < n as u64 && tokio::time::Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(dead(&h).await, n as u64, "every job refused and dead");
    if let Some(r) = h.running.take() {
        r.shutdown(Duration::from_secs(5)).await;
    }
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_replay_runs_a_chunk_at_a_time() {
    let n = 2 * CHUNK as usize + 100;
    let h = with_dead_letters(n).await;
    let op = h
        .engine
        .bulk_start(BulkKind::Replay, JobFilter::default())
        .await
        .expect("start");
    assert_eq!(
        (op.state, op.total, op.done),
        (OperationState::Running, n as u64, 0)
    );
    let end = h.engine.operation_wait(&op.id).await.expect("known");
    assert_eq!(
        (end.state, end.done, end.chunks, end.total),
        (OperationState::Done, n as u64, 3, n as u64)
    );
    assert!(end.finished_at.is_some());
    assert_eq!(dead(&h).await, 0);
    assert_eq!(h.engine.operations()[0], end);
    assert_eq!(
        h.engine.operation_cancel(&op.id),
        Err(CancelError::Finished(OperationState::Done))
    );
    assert_eq!(
        h.engine.operation_cancel("op-none"),
        Err(CancelError::NotFound)
    );
    assert!(h.engine.operation("op-none").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_bulk_dismiss_stops_between_chunks() {
    let n = 2 * CHUNK as usize + 100;
    let h = with_dead_letters(n).await;
    // Held as it looks for its second chunk: the first has committed.
    let (reached, go) = h.store.hold_chunk_end(2);
    let op = h
        .engine
        .bulk_start(BulkKind::Dismiss, JobFilter::default())
        .await
        .expect("start");
    reached.await.expect("the second chunk is looked for");
    let running = h.engine.operation(&op.id).expect("known");
    assert_eq!(
        (running.state, running.done, running.chunks),
        (OperationState::Running, CHUNK as u64, 1)
    );
    let asked = h.engine.operation_cancel(&op.id).expect("cancel");
    assert_eq!(
        asked.state,
        OperationState::Running,
        "it stops at its next chunk"
    );
    // The chunk it was looking for when asked still commits; none after it.
    go.send(()).expect("release");
    let end = h.engine.operation_wait(&op.id).await.expect("known");
    assert_eq!(
        (end.state, end.done, end.chunks),
        (OperationState::Cancelled, 2 * CHUNK as u64, 2)
    );
    assert_eq!(dead(&h).await, 100, "the rest is left as it was");
}
