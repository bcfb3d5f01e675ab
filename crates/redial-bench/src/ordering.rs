//! The `ordering` workload: what ordering keys cost.
//!
//! - Enqueue and no-op throughput on the full path, the same jobs without keys and spread over
//!   10,000 keys (ten jobs each at the default 100,000 jobs), run in alternation (`rounds`
//!   times) so that the machine's drift falls on each alike; reported as each setup's median and
//!   the median of the rounds' ratios to no keys; also the store's CPU per job (SQLite's
//!   storage thread, or PostgreSQL's server processes here) and on SQLite the bytes its thread
//!   wrote, steadier than the rate on a shared machine.
//! - A hot key: 10,000 jobs over 1,000 keys drained alone, and beside one key holding 100,000
//!   jobs enqueued before them, alternated; the rate of the 10,000 and its ratio (none with
//!   `--hot-key 0`).
//! - The cost of one lease of 32 beside the hot key, and from as many jobs without a key.

use crate::groups::{lease_cost, median};
use crate::workloads::{
    engine, postgres_cpu_ns, store_in, thread_cpu_ns, thread_wchar, wait_recorded, Report,
};
use anyhow::Result;
use async_trait::async_trait;
use redial_engine::{AttemptOutput, Clock, Handler, SystemClock};
use redial_policy::{HandlerOutcome, Outcome};
use redial_store::{NewJob, OnDead, OrderingKey, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A no-op job `n` (id prefix `prefix`), with ordering key `key` when given.
fn job(prefix: &str, n: usize, key: Option<String>, now: redial_policy::Timestamp) -> NewJob {
    NewJob {
        ordering: key.map(|key| OrderingKey {
            key,
            on_dead: OnDead::Block,
        }),
        ..crate::workloads::job(
            format!("{prefix}{n}"),
            "default",
            "http://127.0.0.1:9/",
            now,
        )
    }
}

/// Inserts `n` jobs, job `k` with the key `keying(k)`; returns the seconds it took.
async fn insert(
    store: &Arc<dyn Store>,
    prefix: &str,
    n: usize,
    keying: impl Fn(usize) -> Option<String>,
) -> Result<f64> {
    let now = SystemClock.now();
    let start = Instant::now();
    let mut i = 0;
    while i < n {
        let batch: Vec<_> = (i..(i + 5000).min(n))
            .map(|k| job(prefix, k, keying(k), now))
            .collect();
        i += batch.len();
        store.job_insert_batch(batch).await?;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// Succeeds at once; counts the jobs whose id starts with `watch` and notes when the last of
/// `want` of them ran.
#[derive(Debug)]
struct Watching {
    watch: &'static str,
    want: u64,
    seen: AtomicU64,
    calls: AtomicU64,
    done_at: Mutex<Option<Instant>>,
}

impl Watching {
    fn new(watch: &'static str, want: usize) -> Arc<Watching> {
        Arc::new(Watching {
            watch,
            want: want as u64,
            seen: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            done_at: Mutex::new(None),
        })
    }
}

#[async_trait]
impl Handler for Watching {
    async fn run(&self, job: &redial_store::Job) -> AttemptOutput {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if job.id.0.starts_with(self.watch)
            && self.seen.fetch_add(1, Ordering::Relaxed) + 1 == self.want
        {
            if let Ok(mut at) = self.done_at.lock() {
                *at = Some(Instant::now());
            }
        }
        AttemptOutput::from_outcome(Outcome::Handler(HandlerOutcome::Success))
    }
}

/// One no-op run's figures.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// Enqueue, jobs/s.
    enqueue: f64,
    /// No-op, jobs/s.
    noop: f64,
    /// The store's CPU per job of the no-op (us), steadier than the rate on a shared machine:
    /// SQLite's storage thread, or PostgreSQL's server processes on this machine.
    cpu_us: Option<f64>,
    /// SQLite: what the storage thread wrote per job of the no-op (KiB; the WAL, mostly).
    written_kib: Option<f64>,
}

/// One no-op run of `jobs` jobs over `keys` keys (0: none).
async fn noop_run(jobs: usize, concurrency: usize, keys: usize) -> Result<Run> {
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    let took = insert(&store, "j", jobs, |k| {
        (keys > 0).then(|| format!("key-{}", k % keys))
    })
    .await?;
    let handler = Watching::new("j", jobs);
    let e = engine(store.clone(), &[("default", concurrency)], handler.clone());
    // No storage thread: the store is PostgreSQL, and its server's CPU is read instead.
    let store_cpu = || thread_cpu_ns("redial-sqlite").or_else(postgres_cpu_ns);
    let (cpu, wrote) = (store_cpu(), thread_wchar("redial-sqlite"));
    let start = Instant::now();
    let running = e.start().await?;
    wait_recorded(&running, &handler.calls, jobs as u64).await;
    let rate = jobs as f64 / start.elapsed().as_secs_f64();
    let per_job = |a: Option<u64>, b: Option<u64>, unit: f64| {
        Some(b?.saturating_sub(a?) as f64 / unit / jobs as f64)
    };
    let cpu_us = per_job(cpu, store_cpu(), 1000.0);
    let written_kib = per_job(wrote, thread_wchar("redial-sqlite"), 1024.0);
    running.shutdown(Duration::from_secs(5)).await;
    Ok(Run {
        enqueue: jobs as f64 / took,
        noop: rate,
        cpu_us,
        written_kib,
    })
}

/// The 10,000 jobs over 1,000 keys, beside a key of `hot` jobs enqueued first (none when 0):
/// their rate, from the start until the last of them ran.
async fn hot_run(concurrency: usize, hot: usize) -> Result<f64> {
    const OTHERS: usize = 10_000;
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    if hot > 0 {
        insert(&store, "h", hot, |_| Some("hot".to_owned())).await?;
    }
    insert(&store, "o", OTHERS, |k| Some(format!("key-{}", k % 1000))).await?;
    let handler = Watching::new("o", OTHERS);
    let e = engine(store.clone(), &[("default", concurrency)], handler.clone());
    let start = Instant::now();
    let running = e.start().await?;
    let done = loop {
        if let Some(at) = handler.done_at.lock().ok().and_then(|a| *a) {
            break at;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let rate = OTHERS as f64 / done.duration_since(start).as_secs_f64();
    running.shutdown(Duration::from_secs(5)).await;
    Ok(rate)
}

pub async fn ordering(
    jobs: usize,
    concurrency: usize,
    hot: usize,
    rounds: usize,
    report: &mut Report<'_>,
) -> Result<()> {
    let keys = (jobs / 10).max(1);
    let setups = [(0, "no keys".to_owned()), (keys, format!("{keys} keys"))];
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); setups.len()];
    for round in 0..rounds.max(1) {
        for (i, (k, name)) in setups.iter().enumerate() {
            let run = noop_run(jobs, concurrency, *k).await?;
            eprintln!(
                "round {}: {name}: enqueue {:.0} jobs/s, no-op {:.0} jobs/s, store CPU {:.1} us \
                 and {:.1} KiB written a job",
                round + 1,
                run.enqueue,
                run.noop,
                run.cpu_us.unwrap_or(f64::NAN),
                run.written_kib.unwrap_or(f64::NAN),
            );
            runs[i].push(run);
        }
    }
    type Pick = fn(&Run) -> Option<f64>;
    let figures: [(&str, &str, Pick); 4] = [
        ("enqueue", "jobs/s", |r| Some(r.enqueue)),
        ("no-op", "jobs/s", |r| Some(r.noop)),
        ("no-op, store CPU per job", "us", |r| r.cpu_us),
        ("no-op, written per job", "KiB", |r| r.written_kib),
    ];
    for (i, (_, name)) in setups.iter().enumerate() {
        for (what, unit, pick) in figures {
            let values: Vec<f64> = runs[i].iter().filter_map(pick).collect();
            if values.is_empty() {
                continue;
            }
            report(
                &format!("ordering: {what}, {name} (median of {rounds})"),
                median(values),
                unit,
            );
            if i > 0 {
                let ratios = runs[i]
                    .iter()
                    .zip(&runs[0])
                    .filter_map(|(r, b)| Some(100.0 * pick(r)? / pick(b)?))
                    .collect();
                report(
                    &format!("ordering: {what}, {name} / no keys (median of rounds)"),
                    median(ratios),
                    "%",
                );
            }
        }
    }
    if hot == 0 {
        return Ok(());
    }

    // A hot key beside the others.
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    for round in 0..rounds.max(1) {
        let a = hot_run(concurrency, 0).await?;
        let b = hot_run(concurrency, hot).await?;
        eprintln!(
            "round {}: 10,000 jobs over 1,000 keys: alone {a:.0} jobs/s, beside a key of {hot}: {b:.0} jobs/s",
            round + 1
        );
        alone.push(a);
        beside.push(b);
    }
    report(
        "ordering: 10,000 jobs over 1,000 keys, alone (median)",
        median(alone.clone()),
        "jobs/s",
    );
    report(
        &format!("ordering: the same beside a key of {hot} (median)"),
        median(beside.clone()),
        "jobs/s",
    );
    report(
        &format!("ordering: beside a key of {hot} / alone (median of rounds)"),
        median(
            beside
                .iter()
                .zip(&alone)
                .map(|(b, a)| 100.0 * b / a)
                .collect(),
        ),
        "%",
    );

    // One lease beside the hot key, and from as many jobs without a key.
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    insert(&store, "u", hot, |_| None).await?;
    let (plain, _) = lease_cost(&store, 200).await?;
    report(
        &format!("ordering: one lease of 32, {hot} jobs without a key (median)"),
        plain,
        "us",
    );
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    insert(&store, "h", hot, |_| Some("hot".to_owned())).await?;
    insert(&store, "o", 31, |k| Some(format!("key-{k}"))).await?;
    let (keyed, leased) = lease_cost(&store, 200).await?;
    anyhow::ensure!(leased == 32, "a lease took {leased} of 32");
    report(
        &format!("ordering: one lease of 32, a key of {hot} and 31 others (median)"),
        keyed,
        "us",
    );
    Ok(())
}
