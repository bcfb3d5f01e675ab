//! `--only account`: where a job's cost goes. A backlog of `--jobs` no-op jobs is inserted, then
//! drained by the engine (concurrency `--concurrency`); what the drain wrote and spent is read
//! before and after it and reported per job.
//!
//! - SQLite: the storage thread's CPU and the whole process's; rows written (statements and
//!   their triggers: `SqliteStore::rows_written`); bytes the writer wrote (its WAL frames,
//!   `/proc/self/task/*/io`), and as 4 KiB pages; bytes the checkpointer copied back.
//! - PostgreSQL (`--database-url`): WAL bytes, records and full-page images (`pg_stat_wal`);
//!   transactions committed; statements run, when the server loads `pg_stat_statements`; rows
//!   inserted, updated (and how many of those were HOT) and deleted, per table; bytes each table
//!   and index grew by; Redial's CPU and the server's (every `postgres` process on this
//!   machine).
//!
//! A measurement, not a test. The engine's and the server's statistics are read with the
//! store's connections closed: PostgreSQL publishes a connection's statistics when it ends.

use crate::workloads::{
    engine, insert_backlog, postgres_cpu_ns, process_cpu_ns, thread_cpu_ns, thread_wchar, Noop,
    Report, DATABASE_URL,
};
use anyhow::{Context, Result};
use redial_store::Store;
use redial_store_postgres::PgStore;
use redial_store_sqlite::SqliteStore;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub async fn account(jobs: usize, concurrency: usize, report: &mut Report<'_>) -> Result<()> {
    match DATABASE_URL.get() {
        Some(url) => postgres(url, jobs, concurrency, report).await,
        None => sqlite(jobs, concurrency, report).await,
    }
}

/// Drains the `default` queue's `jobs` no-op jobs from `store`; returns jobs per second.
async fn drain(store: Arc<dyn Store>, jobs: usize, concurrency: usize) -> Result<f64> {
    let noop = Arc::new(Noop::default());
    let e = engine(store, &[("default", concurrency)], noop.clone());
    let start = Instant::now();
    let running = e.start().await?;
    while noop.calls.load(Ordering::Relaxed) < jobs as u64 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(600),
            "{} of {jobs} jobs ran in 600 s",
            noop.calls.load(Ordering::Relaxed)
        );
    }
    let rate = jobs as f64 / start.elapsed().as_secs_f64();
    // Every result recorded, then the engine stopped: nothing of the drain is left to write.
    running.shutdown(Duration::from_secs(10)).await;
    Ok(rate)
}

async fn sqlite(jobs: usize, concurrency: usize, report: &mut Report<'_>) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open(&dir.path().join("redial.db"))?);
    let dyn_store: Arc<dyn Store> = store.clone();
    insert_backlog(&dyn_store, jobs, "default", "http://127.0.0.1:9/", "a").await?;
    let rows = store.rows_written().await?;
    let (writer_cpu, process_cpu) = (thread_cpu_ns("redial-sqlite"), process_cpu_ns());
    let (writer_io, checkpoint_io) = (
        thread_wchar("redial-sqlite"),
        thread_wchar("redial-sqlite-c"),
    );
    let rate = drain(dyn_store, jobs, concurrency).await?;
    let per = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 / jobs as f64,
        _ => f64::NAN,
    };
    let label = |what: &str| format!("account, SQLite, no-op: {what}");
    report(&label("drain rate"), rate, "jobs/s");
    report(
        &label("storage thread CPU per job"),
        per(writer_cpu, thread_cpu_ns("redial-sqlite")) / 1000.0,
        "us",
    );
    report(
        &label("process CPU per job"),
        per(process_cpu, process_cpu_ns()) / 1000.0,
        "us",
    );
    report(
        &label("rows written per job (with triggers)"),
        per(Some(rows), Some(store.rows_written().await?)),
        "rows",
    );
    let written = per(writer_io, thread_wchar("redial-sqlite"));
    report(
        &label("bytes the writer wrote per job (WAL)"),
        written,
        "bytes",
    );
    report(
        &label("WAL frames per job (4 KiB pages)"),
        written / (4096.0 + 24.0),
        "pages",
    );
    report(
        &label("bytes checkpoints copied back per job"),
        per(checkpoint_io, thread_wchar("redial-sqlite-c")),
        "bytes",
    );
    Ok(())
}

/// What the server says of the schema and itself at one moment.
#[derive(Debug, Default)]
struct Snapshot {
    wal_records: i64,
    wal_fpi: i64,
    wal_bytes: f64,
    commits: i64,
    /// `pg_stat_statements`' calls, when the server loads it.
    statements: Option<i64>,
    /// Per table: inserted, updated, of which HOT, deleted.
    tables: BTreeMap<String, [i64; 4]>,
    /// Per table and index: its size in bytes.
    sizes: BTreeMap<String, i64>,
    cpu: Option<u64>,
    redial_cpu: Option<u64>,
}

async fn snapshot(client: &tokio_postgres::Client, schema: &str) -> Result<Snapshot> {
    let mut s = Snapshot::default();
    let wal = client
        .query_one(
            "SELECT wal_records, wal_fpi, wal_bytes::float8 FROM pg_stat_wal",
            &[],
        )
        .await
        .context("reading pg_stat_wal")?;
    (s.wal_records, s.wal_fpi, s.wal_bytes) = (wal.get(0), wal.get(1), wal.get(2));
    s.commits = client
        .query_one(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()",
            &[],
        )
        .await?
        .get(0);
    s.statements = client
        .query_one("SELECT sum(calls)::int8 FROM pg_stat_statements", &[])
        .await
        .ok()
        .and_then(|r| r.get(0));
    for r in client
        .query(
            "SELECT relname::text, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del \
             FROM pg_stat_user_tables WHERE schemaname = $1",
            &[&schema],
        )
        .await?
    {
        s.tables
            .insert(r.get(0), [r.get(1), r.get(2), r.get(3), r.get(4)]);
    }
    for r in client
        .query(
            "SELECT c.relname::text, pg_relation_size(c.oid) FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'i')",
            &[&schema],
        )
        .await?
    {
        s.sizes.insert(r.get(0), r.get(1));
    }
    s.cpu = postgres_cpu_ns();
    s.redial_cpu = process_cpu_ns();
    Ok(s)
}

async fn postgres(
    url: &str,
    jobs: usize,
    concurrency: usize,
    report: &mut Report<'_>,
) -> Result<()> {
    let schema = crate::workloads::bench_schema(url).await?;
    let mut config =
        redial_store_postgres::testing::Config::parse(url).map_err(|e| anyhow::anyhow!(e))?;
    config.pg_mut().options(format!("-c search_path={schema}"));
    let (client, connection) = redial_store_postgres::testing::Config::parse(url)
        .map_err(|e| anyhow::anyhow!(e))?
        .connect()
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    tokio::spawn(connection);
    {
        let loader: Arc<dyn Store> = Arc::new(PgStore::connect_with(config.clone(), 2).await?);
        insert_backlog(&loader, jobs, "default", "http://127.0.0.1:9/", "a").await?;
    }
    // The loader's connections have closed: their statistics are published.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let has_statements = client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .await
        .is_ok()
        && client
            .query_one("SELECT pg_stat_statements_reset()", &[])
            .await
            .is_ok();
    let before = snapshot(&client, &schema).await?;
    let store: Arc<dyn Store> = Arc::new(PgStore::connect_with(config, 16).await?);
    let rate = drain(store, jobs, concurrency).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = snapshot(&client, &schema).await?;
    let n = jobs as f64;
    let label = |what: &str| format!("account, PostgreSQL, no-op: {what}");
    report(&label("drain rate"), rate, "jobs/s");
    report(
        &label("WAL bytes per job"),
        (after.wal_bytes - before.wal_bytes) / n,
        "bytes",
    );
    report(
        &label("WAL records per job"),
        (after.wal_records - before.wal_records) as f64 / n,
        "records",
    );
    report(
        &label("WAL full-page images per job"),
        (after.wal_fpi - before.wal_fpi) as f64 / n,
        "pages",
    );
    report(
        &label("transactions per 1000 jobs"),
        (after.commits - before.commits) as f64 / n * 1000.0,
        "commits",
    );
    if let (true, Some(a), Some(b)) = (has_statements, after.statements, before.statements) {
        report(
            &label("statements per 1000 jobs"),
            (a - b) as f64 / n * 1000.0,
            "statements",
        );
        // Where the server's time went, statement by statement (the drain's only).
        for r in client
            .query(
                "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 100), calls, \
                 total_exec_time, rows FROM pg_stat_statements \
                 ORDER BY total_exec_time DESC LIMIT 10",
                &[],
            )
            .await?
        {
            let (q, calls, ms, rows): (String, i64, f64, i64) =
                (r.get(0), r.get(1), r.get(2), r.get(3));
            eprintln!(
                "  {:>7.2} us/job  {:>7.1} calls/1000 jobs  {:>6.2} rows/job  {q}",
                ms * 1000.0 / n,
                calls as f64 / n * 1000.0,
                rows as f64 / n
            );
        }
    }
    // Only what moved by a hundredth of a row, or a byte, per job or more.
    for (table, a) in &after.tables {
        let b = before.tables.get(table).copied().unwrap_or_default();
        let d = (0..4).map(|i| (a[i] - b[i]) as f64 / n);
        for (what, v) in ["inserted", "updated", "updated HOT", "deleted"]
            .iter()
            .zip(d)
        {
            if v >= 0.01 {
                report(&label(&format!("{table}: rows {what} per job")), v, "rows");
            }
        }
    }
    for (rel, a) in &after.sizes {
        let grew = (a - before.sizes.get(rel).copied().unwrap_or_default()) as f64 / n;
        if grew >= 1.0 {
            report(
                &label(&format!("{rel}: bytes grown per job")),
                grew,
                "bytes",
            );
        }
    }
    let per_job = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1000.0 / n,
        _ => f64::NAN,
    };
    report(
        &label("Redial CPU per job"),
        per_job(before.redial_cpu, after.redial_cpu),
        "us",
    );
    report(
        &label("PostgreSQL server CPU per job"),
        per_job(before.cpu, after.cpu),
        "us",
    );
    Ok(())
}
