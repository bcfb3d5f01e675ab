//! `--only events`: what the event log costs the no-op path. The same no-op workload runs on a
//! store whose job-event triggers were dropped (no event log) and on one as shipped, in
//! `--rounds` alternated rounds; the report gives each side's median and the median of the
//! rounds' ratios. Dropping the triggers is for this measurement only: it is what the store
//! would cost had it no event log. To try another trigger, `BENCH_EVENTS_SQL` (SQLite) or
//! `BENCH_EVENTS_PG_SQL` (PostgreSQL) is run on the "without" side after the drop;
//! `BENCH_EVENTS_COUNT=1` prints, on SQLite, how many events each run wrote and which triggers
//! its database has (to check that an experiment ran as meant).

use crate::workloads::{insert_backlog, noop_run, side_by_side, store_in, Report, DATABASE_URL};
use anyhow::{anyhow, Result};
use redial_store::Store;
use std::sync::Arc;

pub async fn events(
    jobs: usize,
    concurrency: usize,
    rounds: usize,
    report: &mut Report<'_>,
) -> Result<()> {
    side_by_side(
        rounds,
        ["without the event log", "with it"],
        [
            "no-op, job-event triggers dropped (median)",
            "no-op, with the event log (median)",
            "no-op with the event log / without (median of rounds)",
        ],
        |with| async move {
            let dir = tempfile::tempdir()?;
            let store = store_in(&dir).await?;
            if !with {
                drop_triggers(&dir, &store).await?;
            }
            insert_backlog(&store, jobs, "default", "http://127.0.0.1:9/", "n").await?;
            let (rate, writer_us) = noop_run(store, jobs, concurrency).await?;
            if std::env::var("BENCH_EVENTS_COUNT").is_ok() && DATABASE_URL.get().is_none() {
                let c = rusqlite::Connection::open(dir.path().join("redial.db"))?;
                let n: i64 = c.query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))?;
                let t: String = c.query_row(
                    "SELECT group_concat(name) FROM sqlite_master WHERE type = 'trigger'",
                    [],
                    |r| r.get(0),
                )?;
                eprintln!("  events written: {n} (triggers: {t}; event log: {with})");
            }
            if let Some(us) = writer_us {
                // Steadier than the rate on a shared machine.
                eprintln!("  SQLite storage thread: {us:.1} us per job (event log: {with})");
            }
            Ok(rate)
        },
        report,
    )
    .await
}

/// Drops the job-event triggers of the store just made by `store_in(dir)`.
async fn drop_triggers(dir: &tempfile::TempDir, _store: &Arc<dyn Store>) -> Result<()> {
    match DATABASE_URL.get() {
        Some(_) => {
            let config = crate::workloads::LAST_SCHEMA
                .lock()
                .map_err(|_| anyhow!("schema lock"))?
                .clone()
                .ok_or_else(|| anyhow!("no schema made"))?;
            let (client, connection) = config.connect().await.map_err(|e| anyhow!(e))?;
            let driver = tokio::spawn(connection);
            client
                .batch_execute("DROP TRIGGER jobs_events ON jobs")
                .await?;
            if let Ok(sql) = std::env::var("BENCH_EVENTS_PG_SQL") {
                client.batch_execute(&sql).await?;
            }
            drop(client);
            let _ = driver.await;
        }
        None => {
            let c = rusqlite::Connection::open(dir.path().join("redial.db"))?;
            c.execute_batch("DROP TRIGGER jobs_finish_events; DROP TRIGGER jobs_replay_events;")?;
            if let Ok(sql) = std::env::var("BENCH_EVENTS_SQL") {
                c.execute_batch(&sql)?;
            }
        }
    }
    Ok(())
}
