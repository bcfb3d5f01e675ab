//! A ten-job group behind a million-job group in one queue (the testkit's case): a real SQLite
//! file holding the million.

use redial_store_sqlite::SqliteStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_job_group_goes_in_the_first_lease_behind_a_million() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("redial.db")).expect("open");
    redial_store::testkit::a_ten_job_group_goes_in_the_first_lease_behind_a_big_one(
        Arc::new(store),
        1_000_000,
    )
    .await;
}
