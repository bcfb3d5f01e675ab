//! A ten-job group behind a million-job group in one queue (the testkit's case): a real
//! PostgreSQL server (`DATABASE_URL`, a schema of its own) holding the million.

use redial_store_postgres::PgStore;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ten_job_group_goes_in_the_first_lease_behind_a_million() {
    let url = std::env::var("DATABASE_URL").expect(
        "DATABASE_URL is not set: run ./scripts/test (it starts a throwaway PostgreSQL) or point DATABASE_URL at a server",
    );
    let config = redial_store_postgres::testing::fresh_schema(&url)
        .await
        .expect("a schema for this test");
    let store = PgStore::connect_with(config, 2)
        .await
        .expect("connect store");
    redial_store::testkit::a_ten_job_group_goes_in_the_first_lease_behind_a_big_one(
        Arc::new(store),
        1_000_000,
    )
    .await;
}
