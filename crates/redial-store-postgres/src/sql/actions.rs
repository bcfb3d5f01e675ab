//! What people do to jobs: replay, dismiss, cancel, one by one and by filter.

use super::jobs::{insert_owed, push_filter, refs, INSERT_MANY};
use super::{cols, job_from_row, ms, must_get, notify, Param};
use crate::{backend, Conn};
use redial_policy::Timestamp;
use redial_store::{
    may_dismiss, may_replay, read_changes, replay_changes, Cancel, Job, JobChange, JobFilter,
    JobId, OrderingKey, ReplayChangedParams, StoreError, StoreResult, CANCELLED,
};
use tokio_postgres::types::ToSql;

pub(super) const REPLAY_SET: &str =
    "state = 'ready', category = NULL, attempts = 0, unknown_attempts = 0, \
    deferrals = 0, stalls = 0, last_delay_ms = NULL, replays = replays + 1, run_at = $1, \
    finished_at = NULL, updated_at = $1, cancel_requested = FALSE, \
    last_reason = 'replayed from the dead letters', final_attempt = NULL, \
    logged = NULL";

/// Ends `tx` as `done` says: commits it when the work succeeded, and when it failed rolls it back
/// *and waits for that*. A transaction dropped with an error goes back to the pool with its
/// ROLLBACK only queued, so the row it locked (`FOR UPDATE`) stays locked for a moment: a lease
/// on another connection then passes over the job (`SKIP LOCKED`) and says nothing is runnable.
pub(super) async fn settle<T>(
    tx: tokio_postgres::Transaction<'_>,
    done: StoreResult<T>,
) -> StoreResult<T> {
    match done {
        Ok(v) => {
            tx.commit().await.map_err(backend)?;
            Ok(v)
        }
        Err(e) => {
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

pub(super) async fn locked(tx: &tokio_postgres::Transaction<'_>, id: &JobId) -> StoreResult<Job> {
    let row = tx
        .query_opt(
            concat!("SELECT ", cols!(), " FROM jobs WHERE id = $1 FOR UPDATE"),
            &[&id.0],
        )
        .await
        .map_err(backend)?
        .ok_or_else(|| StoreError::NotFound(id.clone()))?;
    job_from_row(&row)
}

pub async fn replay(c: &mut Conn, channel: &str, id: &JobId, now: Timestamp) -> StoreResult<Job> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let done = async {
        let job = locked(&tx, id).await?;
        may_replay(&job)?;
        tx.execute(
            &format!("UPDATE jobs SET {REPLAY_SET} WHERE seq = $2"),
            &[&ms(now), &job.seq],
        )
        .await
        .map_err(backend)?;
        notify(&tx, channel, &job.queue).await?;
        must_get(&tx, id).await
    }
    .await;
    settle(tx, done).await
}

pub async fn replay_changed(
    c: &mut Conn,
    channel: &str,
    p: &ReplayChangedParams,
) -> StoreResult<Job> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let done = async {
        let job = locked(&tx, &p.id).await?;
        let stored: Option<String> = tx
            .query_one("SELECT changes FROM jobs WHERE seq = $1", &[&job.seq])
            .await
            .map_err(backend)?
            .get(0);
        let cols = replay_changes(&job, p, stored.as_deref())?;
        // A job moved to another queue joins its key's line there.
        let line = job
            .ordering
            .as_ref()
            .map(|o| OrderingKey::line(&p.queue, &o.key));
        tx.execute(
            &format!(
                "UPDATE jobs SET {REPLAY_SET}, queue = $3, endpoint = $4, request = $5, \
                 idempotency_key = $6, policy = $7, changes = $8, oline = $9 WHERE seq = $2"
            ),
            &[
                &ms(p.now),
                &job.seq,
                &p.queue,
                &p.endpoint,
                &cols.request,
                &p.idempotency_key,
                &cols.policy,
                &cols.changes,
                &line,
            ],
        )
        .await
        .map_err(backend)?;
        if job.idempotency_key != p.idempotency_key {
            // A renewed key: the search finds the job by the new one, not the old.
            let old = job.idempotency_key.as_deref().map(redial_store::key_term);
            let new = p.idempotency_key.as_deref().map(redial_store::key_term);
            tx.execute(
                "DELETE FROM job_terms WHERE bucket = $2::bigint >> 10 AND term = $1 AND seq = $2",
                &[&old, &job.seq],
            )
            .await
            .map_err(backend)?;
            tx.execute(
                "INSERT INTO job_terms (bucket, term, seq) \
                 SELECT $2::bigint >> 10, $1::text, $2 WHERE $1::text IS NOT NULL ON CONFLICT DO NOTHING",
                &[&new, &job.seq],
            )
            .await
            .map_err(backend)?;
        }
        notify(&tx, channel, &p.queue).await?;
        must_get(&tx, &p.id).await
    }
    .await;
    settle(tx, done).await
}

pub async fn changes(c: &mut Conn, id: &JobId) -> StoreResult<Vec<JobChange>> {
    let row = c
        .client
        .query_opt("SELECT changes FROM jobs WHERE id = $1", &[&id.0])
        .await
        .map_err(backend)?;
    let stored: Option<String> = row.and_then(|r| r.get(0));
    read_changes(stored.as_deref())
}

pub async fn dismiss(c: &mut Conn, id: &JobId) -> StoreResult<()> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let done = async {
        let job = locked(&tx, id).await?;
        may_dismiss(&job)?;
        delete_counted(&tx, "DELETE FROM jobs WHERE seq = $1", &[&job.seq]).await?;
        Ok(())
    }
    .await;
    settle(tx, done).await
}

/// Runs `delete` (a `DELETE FROM jobs ...` without `RETURNING`) and deletes the deleted jobs'
/// attempts in the same statement (no foreign key does it: keeping one cost every recorded
/// attempt a row lock on its job). Returns how many jobs it deleted.
pub(super) async fn delete_counted(
    c: &impl tokio_postgres::GenericClient,
    delete: &str,
    params: &[Param<'_>],
) -> StoreResult<u64> {
    let sql = format!(
        "WITH d AS ({delete} RETURNING seq), \
         a AS (DELETE FROM attempts WHERE job_seq IN (SELECT seq FROM d)) \
         SELECT count(*) FROM d"
    );
    let n: i64 = c
        .query_one(sql.as_str(), params)
        .await
        .map_err(backend)?
        .get(0);
    Ok(n.max(0) as u64)
}

pub async fn cancel(c: &mut Conn, channel: &str, id: &JobId, now: Timestamp) -> StoreResult<Job> {
    let insert = c.prepared(INSERT_MANY).await?;
    let tx = c.client.transaction().await.map_err(backend)?;
    let done = async {
        let job = locked(&tx, id).await?;
        let how = redial_store::cancel(&job)?;
        let now_cancelled = matches!(how, Cancel::Now);
        match how {
            Cancel::Now => {
                tx.execute(
                    "UPDATE jobs SET state = 'cancelled', finished_at = $1, updated_at = $1, \
                     last_reason = $3 WHERE seq = $2",
                    &[&ms(now), &job.seq, &CANCELLED],
                )
                .await
                .map_err(backend)?;
            }
            Cancel::WhenTheAttemptEnds => {
                tx.execute(
                    "UPDATE jobs SET cancel_requested = TRUE, updated_at = $1 WHERE seq = $2",
                    &[&ms(now), &job.seq],
                )
                .await
                .map_err(backend)?;
            }
        }
        if now_cancelled {
            insert_owed(&tx, &insert, channel, std::slice::from_ref(id), now).await?;
        }
        must_get(&tx, id).await
    }
    .await;
    settle(tx, done).await
}

pub async fn bulk_replay(
    c: &mut Conn,
    channel: &str,
    f: &JobFilter,
    now: Timestamp,
) -> StoreResult<u64> {
    let mut sql = format!("UPDATE jobs SET {REPLAY_SET} WHERE state = 'dead'");
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(ms(now))];
    push_filter(&mut sql, &mut params, f);
    let tx = c.client.transaction().await.map_err(backend)?;
    let n = tx.execute(&sql, &refs(&params)).await.map_err(backend)?;
    if n > 0 {
        notify(&tx, channel, "").await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(n)
}

pub async fn bulk_dismiss(c: &mut Conn, f: &JobFilter) -> StoreResult<u64> {
    let mut sql = "DELETE FROM jobs WHERE state = 'dead'".to_owned();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    push_filter(&mut sql, &mut params, f);
    delete_counted(&c.client, &sql, &refs(&params)).await
}
