//! Leasing past a held endpoint's deep backlog (the testkit's `lease_scan_suite!`): a real
//! PostgreSQL server (`DATABASE_URL`, a schema per test), with small read bounds so the backlog
//! can be small.

use redial_store_postgres::PgStore;
use std::sync::Arc;

async fn small_bounds() -> Arc<dyn redial_store::Store> {
    let url = std::env::var("DATABASE_URL").expect(
        "DATABASE_URL is not set: run ./scripts/test (it starts a throwaway PostgreSQL) or point DATABASE_URL at a server",
    );
    let config = redial_store_postgres::testing::fresh_schema(&url)
        .await
        .expect("a schema for this test");
    let store = PgStore::connect_with(config, 2)
        .await
        .expect("connect store");
    store.set_lease_scan(4, 16);
    Arc::new(store)
}

redial_store::lease_scan_suite!(small_bounds());
