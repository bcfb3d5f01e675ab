//! A ten-job group behind a million-job group in one queue (the testkit's case): a real
//! PostgreSQL server (`DATABASE_URL`, a schema of its own) holding the million.

use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_job_group_goes_in_the_first_lease_behind_a_million() {
    let store = redial_store_postgres::testing::fresh_test_store(2).await;
    redial_store::testkit::a_ten_job_group_goes_in_the_first_lease_behind_a_big_one(
        Arc::new(store),
        1_000_000,
    )
    .await;
}
