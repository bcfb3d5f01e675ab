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
        // What the search indexes cost after the inserts (SQLite writes its terms here; both
        // stores index dead letters' words here, and there are none).
        let start = Instant::now();
        while store.index_for_search(1000).await? >= 1000 {}
        report(
            &format!("search index catch-up after enqueue, {tags} tags, per job"),
            start.elapsed().as_secs_f64() * 1e6 / (jobs + singles) as f64,
            "us",
        );
        if tags == 0 {
            let (rate, _) = noop_run(store, jobs + singles, concurrency).await?;
            report("no-op jobs, derived keys", rate, "jobs/s");
        }
    }
    Ok(())
}

/// `--only search`: the answer time of a search at `--big-backlog` jobs (1,000,000 by
/// default): jobs as the server makes them, in batches of 1,000 and 1% one at a time, a tenth
/// with a tag shared by about 100 jobs, every tenth dead with one of 1,000 reasons (made dead
/// by one statement, through the store's own triggers, then indexed by the store). Reports the
/// median of 25 searches of each kind.
pub async fn lookups(jobs: usize, report: &mut Report<'_>) -> Result<()> {
    use redial_store::{JobFilter, JobListParams, JobState};
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    let now = SystemClock.now();
    let tagged = |k: usize, mut j: NewJob| {
        j.tags = if k.is_multiple_of(10) {
            vec![format!("order:{}", k / 1000)]
        } else {
            vec![]
        };
        j
    };
    let start = Instant::now();
    let mut i = 0;
    while i < jobs {
        if i.is_multiple_of(100_000) {
            // 1% of the jobs one at a time: a row of terms each.
            for k in i..i + 1000.min(jobs - i) {
                store
                    .job_insert(tagged(k, server_job(k, "j", 0, now)))
                    .await?;
            }
            i += 1000.min(jobs - i);
            continue;
        }
        let batch: Vec<_> = (i..(i + 1000).min(jobs))
            .map(|k| tagged(k, server_job(k, "j", 0, now)))
            .collect();
        i += batch.len();
        store.job_insert_batch(batch).await?;
    }
    eprintln!(
        "  {jobs} jobs inserted in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let dead_sql = "UPDATE jobs SET state = 'dead', category = 'permanent', finished_at = 1, \
         updated_at = 1, last_reason = 'timeout after ' || (30000 + seq % 1000) || \
         ' ms; transient, attempt 5 of 5' WHERE seq % 10 = 3";
    match crate::workloads::DATABASE_URL.get() {
        Some(_) => {
            let config = crate::workloads::LAST_SCHEMA
                .lock()
                .map_err(|_| anyhow::anyhow!("schema lock"))?
                .clone()
                .ok_or_else(|| anyhow::anyhow!("no schema made"))?;
            let (client, connection) = config.connect().await.map_err(|e| anyhow::anyhow!(e))?;
            let driver = tokio::spawn(connection);
            client.batch_execute(dead_sql).await?;
            drop(client);
            let _ = driver.await;
        }
        None => {
            let c = rusqlite::Connection::open(dir.path().join("redial.db"))?;
            c.busy_timeout(std::time::Duration::from_secs(30))?;
            c.execute_batch(dead_sql)?;
        }
    }
    let start = Instant::now();
    while store.index_for_search(1000).await? >= 1000 {}
    eprintln!(
        "  {} dead letters' reasons indexed in {:.1} s",
        jobs / 10,
        start.elapsed().as_secs_f64()
    );
    if let Some(config) = crate::workloads::LAST_SCHEMA
        .lock()
        .ok()
        .and_then(|s| s.clone())
        .filter(|_| crate::workloads::DATABASE_URL.get().is_some())
    {
        // The statistics autovacuum would have gathered by now (which words are common).
        let (client, connection) = config.connect().await.map_err(|e| anyhow::anyhow!(e))?;
        let driver = tokio::spawn(connection);
        client
            .batch_execute("ANALYZE jobs, job_terms, job_term_blocks, dead_words")
            .await?;
        drop(client);
        let _ = driver.await;
    }
    let time = |filter: JobFilter| {
        let store = store.clone();
        async move {
            let start = Instant::now();
            let page = store
                .job_list(JobListParams {
                    filter,
                    after: None,
                    limit: 50,
                })
                .await?;
            anyhow::Ok((start.elapsed().as_secs_f64() * 1000.0, page.jobs.len()))
        }
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut key, mut tag, mut words) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..25usize {
        let k = (n * 39_983 + 7) % jobs;
        let id = server_job(k, "j", 0, now).id.0;
        let (ms, found) = time(JobFilter {
            idempotency_key: Some(redial_engine::derived_idempotency_key("default", &id)),
            ..JobFilter::default()
        })
        .await?;
        anyhow::ensure!(found == 1, "the key of job {k} found {found} jobs");
        key.push(ms);
        let (ms, found) = time(JobFilter {
            tag: Some(format!("order:{}", k / 1000)),
            ..JobFilter::default()
        })
        .await?;
        anyhow::ensure!(found == 50, "a tag found {found} jobs");
        tag.push(ms);
        let (ms, found) = time(JobFilter {
            state: Some(JobState::Dead),
            reason_words: redial_store::reason_words(&format!(
                "timeout {}",
                30_003 + (k % 100) * 10
            )),
            ..JobFilter::default()
        })
        .await?;
        anyhow::ensure!(found > 0, "reason words found nothing");
        words.push(ms);
    }
    report(
        &format!("search at {jobs} jobs: idempotency key (median)"),
        median(key),
        "ms",
    );
    report(
        &format!("search at {jobs} jobs: tag (median)"),
        median(tag),
        "ms",
    );
    report(
        &format!("search at {jobs} jobs: reason words (median)"),
        median(words),
        "ms",
    );
    Ok(())
}
