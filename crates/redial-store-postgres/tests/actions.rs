//! People's actions on a job (replay, dismiss, cancel) on PostgreSQL, where the shared suite
//! cannot see it: what a refused one leaves behind on the server.

use redial_store::testkit::{at, new_job};
use redial_store::{JobId, Store, StoreError};
use redial_store_postgres::PgStore;

/// A refused action ends its transaction before it answers: the row it locked to check the job
/// is free at once. A transaction dropped with an error used to go back to the pool with its
/// ROLLBACK only queued, the row still locked for a moment, and a lease on another connection
/// passed over the job (`SKIP LOCKED`): the suite's `replay_with_changes` failed now and then
/// for it, on a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_action_leaves_no_row_locked() {
    let config = redial_store_postgres::testing::fresh_test_schema().await;
    let store = PgStore::connect_with(config.clone(), 4)
        .await
        .expect("store");
    store
        .job_insert(new_job("r1", "default"))
        .await
        .expect("insert");
    let (client, connection) = config.connect().await.expect("connect");
    let driver = tokio::spawn(connection);
    let id = JobId::from("r1");
    for i in 0..200 {
        // Ready, not dead: each is refused after the row was locked.
        let refused = match i % 2 {
            0 => store.job_replay(&id, at(10)).await.map(|_| ()),
            _ => store.job_dismiss(&id).await,
        };
        assert!(
            matches!(refused, Err(StoreError::InvalidState { .. })),
            "{refused:?}"
        );
        client.batch_execute("BEGIN").await.expect("begin");
        let free = client
            .query("SELECT 1 FROM jobs WHERE id = 'r1' FOR UPDATE NOWAIT", &[])
            .await;
        client.batch_execute("ROLLBACK").await.expect("rollback");
        assert!(
            free.is_ok(),
            "try {i}: the refused action's row was still locked: {free:?}"
        );
    }
    drop(client);
    let _ = driver.await;
}
