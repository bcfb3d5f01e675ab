//! `--only waiters`: what requests waiting for jobs (`GET /v1/jobs/{id}?wait=`) cost dispatch.
//! The HTTP dispatch workload runs `--rounds` times without waiters and with 1,000 (each waiting
//! for a job that does not finish during the run, asking again as each wait ends), alternating;
//! the report gives each side's median and the median of the rounds' ratios.

use crate::workloads::{http_rate, local_receiver, Report};
use anyhow::Result;

/// Waiters in the second run of each round: the server's default bound.
const WAITERS: usize = 1000;

pub async fn waiters(
    jobs: usize,
    concurrency: usize,
    rounds: usize,
    report: &mut Report<'_>,
) -> Result<()> {
    let base = local_receiver().await?;
    let (mut without, mut with, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds.max(1) {
        let a = http_rate(jobs, concurrency, Some(base.clone()), 0, false).await?;
        let b = http_rate(jobs, concurrency, Some(base.clone()), WAITERS, false).await?;
        eprintln!(
            "round {}: {a:.0} jobs/s without waiters, {b:.0} with {WAITERS}",
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
        "HTTP dispatch, no waiters (median)",
        median(&mut without),
        "jobs/s",
    );
    report(
        &format!("HTTP dispatch, {WAITERS} waiters (median)"),
        median(&mut with),
        "jobs/s",
    );
    report(
        &format!("HTTP dispatch with {WAITERS} waiters / without (median of rounds)"),
        median(&mut ratios),
        "x",
    );
    Ok(())
}
