//! `--only search-cost`: what enqueueing and dispatching cost with jobs as the server makes them
//! (ids in no order, a derived idempotency key: a UUID), with and without tags. Run by two builds
//! (before and after a change to what an enqueue writes), alternated, it gives the change's
//! cost; `bench/search/cost.sh` does that.

use crate::workloads::{noop_run, store_in, Report};
use anyhow::Result;
use redial_engine::{Clock, SystemClock};
use redial_store::NewJob;
use std::time::Instant;

/// A job as the server makes it for `id` in queue `default`: its key derived from both.
fn server_job(k: usize, prefix: &str, tags: usize, now: redial_policy::Timestamp) -> NewJob {
    // Ids in no order, as the server's (UUIDv4) are: their index is written at random places.
    let id = format!(
        "{prefix}{:016x}",
        (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    );
    let mut job = crate::workloads::job(id, "default", "http://127.0.0.1:9/", now);
    job.idempotency_key = Some(redial_engine::derived_idempotency_key("default", &job.id.0));
    job.tags = (0..tags).map(|t| format!("t{t}:{}", k % 1000)).collect();
    job
}

pub async fn cost(jobs: usize, concurrency: usize, report: &mut Report<'_>) -> Result<()> {
    let now = SystemClock.now();
    for tags in [0, 2] {
        let dir = tempfile::tempdir()?;
        let store = store_in(&dir).await?;
        let start = Instant::now();
        let mut i = 0;
        while i < jobs {
            let batch: Vec<_> = (i..(i + 1000).min(jobs))
                .map(|k| server_job(k, "e", tags, now))
                .collect();
            i += batch.len();
            store.job_insert_batch(batch).await?;
        }
        report(
            &format!("enqueue, batches of 1000, {tags} tags"),
            jobs as f64 / start.elapsed().as_secs_f64(),
            "jobs/s",
        );
        let singles = 2000.min(jobs);
        let start = Instant::now();
        for k in 0..singles {
            store.job_insert(server_job(k, "s", tags, now)).await?;
        }
        report(
            &format!("enqueue, one at a time, {tags} tags"),
            singles as f64 / start.elapsed().as_secs_f64(),
            "jobs/s",
        );
        if tags == 0 {
            let (rate, _) = noop_run(store, jobs + singles, concurrency).await?;
            report("no-op jobs, derived keys", rate, "jobs/s");
        }
    }
    Ok(())
}
