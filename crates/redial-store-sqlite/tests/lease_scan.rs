//! Leasing past a held endpoint's deep backlog (the testkit's `lease_scan_suite!`): a real
//! SQLite file, with small read bounds so the backlog can be small.

use redial_store_sqlite::SqliteStore;
use std::sync::Arc;

async fn small_bounds() -> Arc<dyn redial_store::Store> {
    // The store keeps its file open; the folder is left to the system's temporary cleanup.
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let store = SqliteStore::open(&dir.join("redial.db")).expect("open");
    store.set_lease_scan(4, 16);
    Arc::new(store)
}

redial_store::lease_scan_suite!(small_bounds());
