//! `--only backup`: an online backup of a SQLite file of `--big-backlog` jobs (a million by
//! default), first with nothing running, then while the engine drains those jobs with a no-op
//! handler: how long the copy takes, how large it is, and the drain's rate before, during and
//! after it (the dip). The backup is the store's own (`Store::backup`, what `POST /v1/backup`
//! and `redial backup` use).

use crate::workloads::{engine, insert_backlog, Noop, Report};
use anyhow::Result;
use redial_store::Store;
use redial_store_sqlite::SqliteStore;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the drain runs before the backup starts, and is watched after it ends.
const AROUND: Duration = Duration::from_secs(4);

pub async fn backup(jobs: usize, concurrency: usize, report: &mut Report<'_>) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("redial.db");
    let sqlite = SqliteStore::open(&path)?;
    let store: Arc<dyn Store> = Arc::new(sqlite.clone());
    insert_backlog(&store, jobs, "default", "http://127.0.0.1:9/", "b").await?;

    // Idle: nothing else touches the database.
    let idle = store.backup().await?;
    report(
        &format!("backup of {jobs} jobs, idle: time"),
        idle.took.as_secs_f64(),
        "s",
    );
    report(
        &format!("backup of {jobs} jobs: size"),
        idle.bytes as f64 / (1 << 20) as f64,
        "MiB",
    );
    drop(idle);

    // Under load: the engine drains the same jobs.
    let noop = Arc::new(Noop::default());
    let e = engine(store.clone(), &[("default", concurrency)], noop.clone());
    let running = e.start().await?;
    let done = || noop.calls.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(1)).await; // past the first leases
    let (t0, n0) = (Instant::now(), done());
    tokio::time::sleep(AROUND).await;
    let (t1, n1) = (Instant::now(), done());
    let copy = store.backup().await?;
    let (t2, n2) = (Instant::now(), done());
    tokio::time::sleep(AROUND).await;
    let (t3, n3) = (Instant::now(), done());
    let rate = |a: u64, b: u64, from: Instant, to: Instant| {
        (b - a) as f64 / to.duration_since(from).as_secs_f64()
    };
    let before = rate(n0, n1, t0, t1);
    let during = rate(n1, n2, t1, t2);
    let after = rate(n2, n3, t2, t3);
    report(
        &format!("backup of {jobs} jobs, while draining: time"),
        copy.took.as_secs_f64(),
        "s",
    );
    report("backup: no-op drain before it", before, "jobs/s");
    report("backup: no-op drain during it", during, "jobs/s");
    report("backup: no-op drain after it", after, "jobs/s");
    report(
        "backup: drain during / before",
        during / before.max(1.0),
        "ratio",
    );
    if (n3 as usize) >= jobs {
        eprintln!("backup: the drain ran out of jobs before the end: use a larger --big-backlog");
    }
    drop(copy);
    running.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
