//! `redial simulate --from-store`: a workload read from a store's history instead of a model.
//! The jobs created in the window (`--since`) arrive as they did, each endpoint answers as its
//! attempt log says it answered at each moment, and a job that met an answer of its own (a 4xx
//! other than 408 and 429) meets it again on every attempt (see
//! [`redial_simulate::History`]).
//!
//! The store is a SQLite database (a file, such as one `redial backup` wrote, or a data folder
//! no `redial serve` holds) or a PostgreSQL URL. It is only read.

use crate::UsageError;
use anyhow::{Context, Result};
use redial_policy::{Method, Timestamp, TransportError};
use redial_simulate::{Answer, Arrival, EndpointModel, History, PastAnswer, PastJob, Workload};
use redial_store::{Attempt, AttemptCategory, Job, JobFilter, JobPages, Store};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The store to read: `given`, or when empty the one `redial serve` would use
/// (REDIAL_DATABASE_URL, else REDIAL_DATA_DIR, else the default data folder).
pub fn source(given: &str) -> String {
    if !given.is_empty() {
        return given.to_owned();
    }
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    env("REDIAL_DATABASE_URL")
        .or_else(|| env("REDIAL_DATA_DIR"))
        .unwrap_or_else(|| crate::config::default_data_dir().display().to_string())
}

/// Jobs read per page.
const PAGE: u32 = 1000;

/// Reads the jobs created in the last `since` (before `now`) and their attempts from `source`,
/// as a workload.
pub fn read(source: &str, since: Duration, now: Timestamp) -> Result<Workload> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let store = open(source).await?;
        let from = Timestamp::from_unix_millis(
            now.as_unix_millis()
                .saturating_sub(i64::try_from(since.as_millis()).unwrap_or(i64::MAX)),
        );
        let mut past = Vec::new();
        let filter = JobFilter {
            since: Some(from),
            until: Some(now),
            ..JobFilter::default()
        };
        let mut pages = JobPages::new(&*store, filter, PAGE);
        while let Some(jobs) = pages.next().await.context("reading the jobs")? {
            for job in jobs {
                if let Some((job, attempts)) =
                    store.job_get(&job.id).await.context("reading a job")?
                {
                    past.push((job, attempts));
                }
            }
        }
        if past.is_empty() {
            return Err(UsageError(format!(
                "{}: no job was created in the last {}: nothing to replay (try a longer --since)",
                crate::serve::redact_url(source),
                redial_policy::Human(since)
            ))
            .into());
        }
        Ok(workload(past))
    })
}

async fn open(source: &str) -> Result<Arc<dyn Store>> {
    if source.starts_with("postgres://") || source.starts_with("postgresql://") {
        let store = redial_store_postgres::PgStore::connect(source)
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", crate::serve::redact_url(source)))?;
        return Ok(Arc::new(store));
    }
    let path = Path::new(source);
    let file = if path.is_dir() {
        path.join("redial.db")
    } else {
        path.to_path_buf()
    };
    if !file.is_file() {
        return Err(UsageError(format!(
            "--from-store {source}: no database there: give a SQLite file (such as one `redial backup` wrote), a data folder holding redial.db, or a postgres:// URL"
        ))
        .into());
    }
    let store = redial_store_sqlite::SqliteStore::open(&file).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e} (a running `redial serve` holds its database: copy it with `redial backup FILE` and simulate from the copy)",
            file.display()
        )
    })?;
    Ok(Arc::new(store))
}

/// The jobs and attempts, endpoint by endpoint (each in the queue most of its jobs were in).
fn workload(past: Vec<(Job, Vec<Attempt>)>) -> Workload {
    let start = past
        .iter()
        .map(|(j, _)| j.created_at)
        .min()
        .unwrap_or(Timestamp::EPOCH);
    let offset = |t: Timestamp| t.saturating_since(start);
    let mut by_endpoint: BTreeMap<String, Vec<(Job, Vec<Attempt>)>> = BTreeMap::new();
    for (job, attempts) in past {
        by_endpoint
            .entry(job.endpoint.clone())
            .or_default()
            .push((job, attempts));
    }
    let mut endpoints = Vec::new();
    for (name, jobs) in by_endpoint {
        let mut queues: BTreeMap<&str, usize> = BTreeMap::new();
        for (j, _) in &jobs {
            *queues.entry(j.queue.as_str()).or_default() += 1;
        }
        let queue = queues
            .iter()
            .max_by_key(|(q, n)| (**n, std::cmp::Reverse(**q)))
            .map_or("default", |(q, _)| q)
            .to_owned();
        let mut history = History::default();
        let mut tooks = Vec::new();
        for (job, attempts) in &jobs {
            let mut fails_with = None;
            for a in attempts
                .iter()
                .filter(|a| a.category != AttemptCategory::Held)
            {
                let took = Duration::from_millis(a.duration_ms);
                tooks.push(took);
                let answer = answer(a);
                match answer {
                    Some(Answer::Status(code)) if of_the_job(code) => {
                        fails_with.get_or_insert(Answer::Status(code));
                    }
                    _ => history.answers.push(PastAnswer {
                        at: offset(a.started_at),
                        answer,
                        took,
                    }),
                }
            }
            history.jobs.push(PastJob {
                at: offset(job.created_at),
                deadline: job.deadline.map(|d| d.saturating_since(job.created_at)),
                method: Method::from_name(&job.request.method.to_ascii_uppercase()),
                idempotency_key: job.idempotency_key.is_some(),
                fails_with,
            });
        }
        history.jobs.sort_by_key(|j| j.at);
        history.answers.sort_by_key(|a| a.at);
        tooks.sort_unstable();
        let typical = tooks
            .get(tooks.len() / 2)
            .copied()
            .unwrap_or(Duration::from_millis(100));
        endpoints.push(EndpointModel {
            name,
            queue,
            jobs: history.jobs.len() as u64,
            arrival: Arrival::AtOnce,
            method: Method::Post,
            idempotency_key: true,
            deadline: None,
            latency: (typical, typical),
            timeout: Duration::from_secs(30),
            limit: None,
            outages: Vec::new(),
            failures: Vec::new(),
            history: Some(history),
        });
    }
    Workload {
        seed: None,
        endpoints,
    }
}

/// A status that says something of the job rather than of the endpoint: a 4xx other than 408
/// (timeout) and 429 (too many).
fn of_the_job(code: u16) -> bool {
    (400..500).contains(&code) && code != 408 && code != 429
}

/// What an attempt met: `None` for a success.
fn answer(a: &Attempt) -> Option<Answer> {
    let wait = a.server_wait_ms.map(Duration::from_millis);
    match (a.status, a.error.as_deref()) {
        (Some(_), _) if a.category == AttemptCategory::Success => None,
        (Some(429), _) => Some(Answer::TooMany(wait)),
        (Some(503), _) if wait.is_some() => wait.map(Answer::Unavailable),
        (Some(s), _) => Some(Answer::Status(s)),
        (None, Some(kind)) => Some(Answer::Transport(
            TransportError::ALL
                .iter()
                .copied()
                .find(|e| e.as_str() == kind)
                .unwrap_or(TransportError::ConnectionReset),
        )),
        (None, None) => None,
    }
}
