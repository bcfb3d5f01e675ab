//! Leasing past a held endpoint's deep backlog (the testkit's `lease_scan_suite!`): a real
//! PostgreSQL server (`DATABASE_URL`, a schema per test), with small read bounds so the backlog
//! can be small.

use std::sync::Arc;

async fn small_bounds() -> Arc<dyn redial_store::Store> {
    let store = redial_store_postgres::testing::fresh_test_store(2).await;
    store.set_lease_scan(4, 16);
    Arc::new(store)
}

redial_store::lease_scan_suite!(small_bounds());
