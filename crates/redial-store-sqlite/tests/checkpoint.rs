//! Checkpoints run beside the writer on their own thread and connection: under a steady stream of
//! commits the WAL still starts over, so it stays bounded, and what was committed reaches the
//! database file. A real SQLite file.

use redial_store::testkit::new_job;
use redial_store::*;
use redial_store_sqlite::SqliteStore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_stays_bounded_under_steady_commits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redial.db");
    let store = SqliteStore::open(&path).expect("open");
    // 4,000 commits of 10 jobs each, back to back: ~40 MiB of WAL frames if it never started
    // over.
    for batch in 0..4_000 {
        let jobs = (0..10)
            .map(|k| new_job(&format!("j{batch}-{k}"), "q"))
            .collect();
        store.job_insert_batch(jobs).await.expect("insert");
    }
    let wal = std::fs::metadata(dir.path().join("redial.db-wal"))
        .expect("the WAL exists while the store is open")
        .len();
    assert!(
        wal < 16 << 20,
        "the WAL grew to {wal} bytes: it never started over"
    );
    drop(store);

    // Everything committed is there for a fresh connection.
    let conn = rusqlite::Connection::open(&path).expect("reopen");
    let n: i64 = conn
        .query_row("SELECT count(*) FROM jobs", [], |r| r.get(0))
        .expect("count");
    assert_eq!(n, 40_000);
}
