//! The `groups` workload: what fairness between groups (tenants) costs.
//!
//! - No-op throughput on the full path, the same jobs without groups, in one group, and spread
//!   over 10,000 groups, run in alternation (`rounds` times) so that the machine's drift falls
//!   on each alike; reported as each round's rate and the median ratio to no groups.
//! - The cost of one lease of 32 from a queue where one group holds `big` ready jobs and another
//!   holds ten, beside a lease of 32 from a queue of `big` ungrouped jobs.

use crate::workloads::{engine, store_in, wait_completed, wait_recorded, Noop, Report};
use anyhow::Result;
use redial_engine::{Clock, SystemClock};
use redial_store::{LeaseParams, NewJob, Store};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A no-op job `n`, in group `group` (None: ungrouped).
fn job(n: usize, group: Option<String>, now: redial_policy::Timestamp) -> NewJob {
    NewJob {
        ordering: None,
        group,
        ..crate::workloads::job(format!("g{n}"), "default", "http://127.0.0.1:9/", now)
    }
}

/// Inserts `n` jobs, job `k` in the group `grouping(k)`.
async fn insert(
    store: &Arc<dyn Store>,
    n: usize,
    grouping: impl Fn(usize) -> Option<String>,
) -> Result<()> {
    let now = SystemClock.now();
    let mut i = 0;
    while i < n {
        let batch: Vec<_> = (i..(i + 5000).min(n))
            .map(|k| job(k, grouping(k), now))
            .collect();
        i += batch.len();
        store.job_insert_batch(batch).await?;
    }
    Ok(())
}

/// One no-op run of `jobs` jobs spread over `groups` groups (0: ungrouped); jobs per second.
async fn noop_run(jobs: usize, concurrency: usize, groups: usize) -> Result<f64> {
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    insert(&store, jobs, |k| {
        (groups > 0).then(|| format!("tenant-{}", k % groups))
    })
    .await?;
    let noop = Arc::new(Noop::default());
    let e = engine(store.clone(), &[("default", concurrency)], noop.clone());
    let start = Instant::now();
    let running = e.start().await?;
    wait_recorded(&running, &noop.calls, jobs as u64).await;
    let rate = jobs as f64 / start.elapsed().as_secs_f64();
    assert_eq!(noop.calls.load(Ordering::Relaxed), jobs as u64);
    wait_completed(&store, "default", jobs as u64).await?;
    running.shutdown(Duration::from_secs(5)).await;
    Ok(rate)
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The median of `n` timings of one lease of up to 32 jobs of queue "default", in microseconds
/// (each lease given back afterwards, so every lease reads the same queue).
pub(crate) async fn lease_cost(store: &Arc<dyn Store>, n: usize) -> Result<(f64, usize)> {
    let mut times = Vec::with_capacity(n);
    let mut leased = 0;
    for _ in 0..n {
        let now = SystemClock.now();
        let start = Instant::now();
        let jobs = store
            .job_lease_available(LeaseParams {
                queue: "default".into(),
                now,
                owner: "bench".into(),
                lease_until: now.saturating_add(Duration::from_secs(60)),
                limit: 32,
            })
            .await?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
        leased = jobs.len();
        store
            .job_release(redial_store::ReleaseParams {
                owner: "bench".into(),
                ids: jobs.into_iter().map(|j| j.id).collect(),
                now,
            })
            .await?;
    }
    Ok((median(times), leased))
}

pub async fn groups(
    jobs: usize,
    concurrency: usize,
    big: usize,
    rounds: usize,
    report: &mut Report<'_>,
) -> Result<()> {
    let setups = [
        (0, "no groups"),
        (1, "one group"),
        (10_000, "10,000 groups"),
    ];
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
    for round in 0..rounds.max(1) {
        for (i, (groups, name)) in setups.iter().enumerate() {
            let rate = noop_run(jobs, concurrency, *groups).await?;
            eprintln!("round {}: {name}: {rate:.0} jobs/s", round + 1);
            rates[i].push(rate);
        }
    }
    let base = rates[0].clone();
    for (i, (_, name)) in setups.iter().enumerate() {
        report(
            &format!("groups: no-op, {name} (median of {rounds})"),
            median(rates[i].clone()),
            "jobs/s",
        );
        if i > 0 {
            let ratios: Vec<f64> = rates[i]
                .iter()
                .zip(&base)
                .map(|(r, b)| 100.0 * r / b)
                .collect();
            report(
                &format!("groups: no-op, {name} / no groups (median of rounds)"),
                median(ratios),
                "%",
            );
        }
    }

    // One lease beside a big backlog: ungrouped, then one group of `big` plus one of ten.
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    insert(&store, big, |_| None).await?;
    let (plain, _) = lease_cost(&store, 200).await?;
    report(
        &format!("groups: one lease of 32, {big} ungrouped jobs (median)"),
        plain,
        "us",
    );
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    insert(&store, big + 10, |k| {
        Some(if k < big { "big" } else { "small" }.to_owned())
    })
    .await?;
    let (grouped, leased) = lease_cost(&store, 200).await?;
    anyhow::ensure!(leased == 32, "a lease took {leased} of 32");
    report(
        &format!("groups: one lease of 32, {big} jobs in one group and 10 in another (median)"),
        grouped,
        "us",
    );
    Ok(())
}
