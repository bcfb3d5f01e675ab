//! `--only callbacks`: what completion callbacks cost. The HTTP dispatch workload runs
//! `--rounds` times without callbacks and with one on every job (a job counts once its callback
//! is delivered too, so twice the requests), alternating; the report gives each side's median
//! and the median of the rounds' ratios. The store is SQLite, or PostgreSQL with
//! `--database-url`.

use crate::workloads::{http_rate, local_receiver, side_by_side, Report};
use anyhow::Result;

pub async fn callbacks(
    jobs: usize,
    concurrency: usize,
    rounds: usize,
    report: &mut Report<'_>,
) -> Result<()> {
    let base = local_receiver().await?;
    side_by_side(
        rounds,
        ["without callbacks", "with a callback on every job"],
        [
            "HTTP dispatch, no callbacks (median)",
            "HTTP dispatch, a callback on every job, delivered (median)",
            "HTTP dispatch with callbacks / without (median of rounds)",
        ],
        |with| {
            let base = base.clone();
            async move { http_rate(jobs, concurrency, Some(base), 0, with).await }
        },
        report,
    )
    .await
}
