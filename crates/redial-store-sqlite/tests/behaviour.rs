//! The shared store behaviour suite, against a real SQLite file in a temporary folder.

use redial_store_sqlite::SqliteStore;
use std::sync::Arc;

async fn fresh() -> Arc<dyn redial_store::Store> {
    // The folder must outlive the store; leaking it keeps the test simple, and the OS temp
    // cleaner takes it later.
    let dir = tempfile::tempdir().expect("temp dir").keep();
    Arc::new(SqliteStore::open(&dir.join("redial.db")).expect("open store"))
}

redial_store::store_suite!(fresh());
