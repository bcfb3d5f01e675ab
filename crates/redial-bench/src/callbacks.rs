//! `--only callbacks`: what completion callbacks cost. The HTTP dispatch workload runs
//! `--rounds` times without callbacks and with one on every job (a job counts once its callback
//! is delivered too, so twice the requests), alternating; the report gives each side's median
//! and the median of the rounds' ratios. The store is SQLite, or PostgreSQL with
//! `--database-url`.

use crate::workloads::{http_rate, local_receiver, Report};
use anyhow::Result;

pub async fn callbacks(
    jobs: usize,
    concurrency: usize,
    rounds: usize,
    report: &mut Report<'_>,
) -> Result<()> {
    let base = local_receiver().await?;
    let (mut without, mut with, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds.max(1) {
        let a = http_rate(jobs, concurrency, Some(base.clone()), 0, false).await?;
        let b = http_rate(jobs, concurrency, Some(base.clone()), 0, true).await?;
        eprintln!(
            "round {}: {a:.0} jobs/s without callbacks, {b:.0} with a callback on every job",
            round + 1
        );
        without.push(a);
        with.push(b);
        ratios.push(b / a);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    report(
        "HTTP dispatch, no callbacks (median)",
        median(&mut without),
        "jobs/s",
    );
    report(
        "HTTP dispatch, a callback on every job, delivered (median)",
        median(&mut with),
        "jobs/s",
    );
    report(
        "HTTP dispatch with callbacks / without (median of rounds)",
        median(&mut ratios),
        "x",
    );
    Ok(())
}
