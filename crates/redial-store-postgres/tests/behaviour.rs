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
