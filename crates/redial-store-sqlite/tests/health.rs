//! What the store says about a database file it cannot trust or cannot write (issue 13): a
//! damaged file is refused at open (where the jobs are counted) or fails the integrity check
//! begun at open and holds readiness; a file that is not
//! a database is refused at open, with what to do. A real SQLite file.

use redial_store::testkit::new_job;
use redial_store::*;
use redial_store_sqlite::SqliteStore;
use std::io::{Seek, SeekFrom, Write};
use std::time::Duration;

/// Long enough for any integrity check a test makes; only a broken check waits it out.
const CHECK: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_file_fails_the_integrity_check_and_readiness() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redial.db");
    let store = SqliteStore::open(&path).expect("open");
    assert_eq!(store.integrity(CHECK).await, Some(Ok(())));
    store.ping().await.expect("a new database is ready");
    for batch in 0..40 {
        let jobs = (0..50)
            .map(|k| new_job(&format!("j{batch}-{k}"), "q"))
            .collect();
        store.job_insert_batch(jobs).await.expect("insert");
    }
    drop(store);
    // Everything into the database file itself, so that the damage below is what is read.
    let conn = rusqlite::Connection::open(&path).expect("reopen");
    conn.busy_timeout(CHECK).expect("busy timeout");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    let page: u64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("page size");
    drop(conn);

    // Ten pages of garbage in the second half of the file, where the jobs are.
    let len = std::fs::metadata(&path).expect("metadata").len();
    let pages = len / page;
    assert!(pages > 40, "a file of {pages} pages");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("open for damage");
    f.seek(SeekFrom::Start((pages / 2) * page)).expect("seek");
    f.write_all(&vec![0xA5; (10 * page) as usize])
        .expect("garbage written");
    f.sync_all().expect("synced");
    drop(f);

    // Opening counts every job (the kept counts start from the table), so damage among the
    // jobs is found then: refused, saying what to do. Damage elsewhere waits for the check.
    let store = match SqliteStore::open(&path) {
        Err(e) => {
            let text = e.to_string();
            assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains("restore"), "{text}");
            return;
        }
        Ok(store) => store,
    };
    let why = match store.integrity(CHECK).await {
        Some(Err(why)) => why,
        other => panic!("the check found nothing: {other:?}"),
    };
    assert!(why.contains(&path.display().to_string()), "{why}");
    assert!(why.contains("restore"), "{why}");
    match store.ping().await {
        Err(StoreError::Unavailable(reason)) => assert_eq!(reason, why),
        other => panic!("a damaged database is not ready: {other:?}"),
    }
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_refused_at_open() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redial.db");
    std::fs::write(&path, vec![0x5A; 64 * 1024]).expect("garbage file");
    let e = SqliteStore::open(&path).expect_err("refused");
    let text = e.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("not a SQLite database"), "{text}");
}
