//! `--only waiters`: what requests waiting for jobs (`GET /v1/jobs/{id}?wait=`) cost dispatch.
//! The HTTP dispatch workload runs `--rounds` times without waiters and with 1,000 (each waiting
//! for a job that does not finish during the run, asking again as each wait ends), alternating;
//! the report gives each side's median and the median of the rounds' ratios.

use crate::workloads::{http_rate, local_receiver, side_by_side, Report};
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
    side_by_side(
        rounds,
        ["without waiters", &format!("with {WAITERS}")],
        [
            "HTTP dispatch, no waiters (median)",
            &format!("HTTP dispatch, {WAITERS} waiters (median)"),
            &format!("HTTP dispatch with {WAITERS} waiters / without (median of rounds)"),
        ],
        |with| {
            let base = base.clone();
            async move {
                let waiters = if with { WAITERS } else { 0 };
                http_rate(jobs, concurrency, Some(base), waiters, false).await
            }
        },
        report,
    )
    .await
}
