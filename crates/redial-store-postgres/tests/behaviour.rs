//! The shared store behaviour suite, against a real PostgreSQL server: `DATABASE_URL`, which
//! `./scripts/test` sets to a throwaway server it starts when none is given. Each test works in a
//! schema of its own.

use redial_store_postgres::PgStore;
use std::sync::Arc;

async fn fresh() -> Arc<dyn redial_store::Store> {
    let url = std::env::var("DATABASE_URL").expect(
        "DATABASE_URL is not set: run ./scripts/test (it starts a throwaway PostgreSQL) or point DATABASE_URL at a server",
    );
    let config = redial_store_postgres::testing::fresh_schema(&url)
        .await
        .expect("a schema for this test");
    Arc::new(
        PgStore::connect_with(config, 4)
            .await
            .expect("connect store"),
    )
}

redial_store::store_suite!(fresh());

/// No foreign key deletes a job's attempts: every statement that deletes jobs does. After the
/// suite's deleting cases, no attempt is left without its job.
#[tokio::test]
async fn deleting_jobs_deletes_their_attempts() {
    let url = std::env::var("DATABASE_URL").expect("DATABASE_URL");
    let config = redial_store_postgres::testing::fresh_schema(&url)
        .await
        .expect("a schema for this test");
    let store: Arc<dyn redial_store::Store> = Arc::new(
        PgStore::connect_with(config.clone(), 4)
            .await
            .expect("connect store"),
    );
    redial_store::testkit::dismiss_dead_job(store.clone()).await;
    redial_store::testkit::bulk_dead_letter_actions(store.clone()).await;
    redial_store::testkit::cleanup_respects_retention(store.clone()).await;
    let (client, conn) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect to check");
    tokio::spawn(conn);
    let count = |sql: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(sql, &[])
                .await
                .expect("count")
                .get::<_, i64>(0)
        }
    };
    assert!(
        count("SELECT count(*) FROM attempts").await > 0,
        "some kept"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM attempts a WHERE NOT EXISTS \
             (SELECT 1 FROM jobs j WHERE j.seq = a.job_seq)"
        )
        .await,
        0,
        "attempts left without their job"
    );
}
