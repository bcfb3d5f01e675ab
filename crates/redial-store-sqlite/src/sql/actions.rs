//! What people do to jobs: replay, dismiss, cancel, one by one and by filter.

use super::jobs::push_filter;
use super::{backend, jobs, ms, must_get, place, query_rows, Sp};
use crate::counts;
use redial_policy::{DeadCategory, Timestamp};
use redial_store::{
    may_dismiss, may_replay, parse_dead_category, read_changes, replay_changes, Cancel, Job,
    JobChange, JobFilter, JobId, JobState, OrderingKey, ReplayChangedParams, StoreResult,
    CANCELLED,
};
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

pub(super) const REPLAY_SET: &str =
    "state = 'ready', category = NULL, attempts = 0, unknown_attempts = 0, \
    deferrals = 0, stalls = 0, last_delay_ms = NULL, replays = replays + 1, run_at = ?1, \
    finished_at = NULL, updated_at = ?1, cancel_requested = 0, okey = okey, ord_stay = ord_stay, \
    last_reason = 'replayed from the dead letters', final_attempt = NULL, \
    logged = NULL";

pub fn replay(c: &mut Connection, id: &JobId, now: Timestamp) -> StoreResult<Job> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, id)?;
    may_replay(&job)?;
    tx.execute(
        &format!("UPDATE jobs SET {REPLAY_SET} WHERE seq = ?2"),
        params![ms(now), job.seq],
    )
    .map_err(backend)?;
    counts::moved(
        &job.queue,
        &job.endpoint,
        Some(place(&job)),
        Some((JobState::Ready, None)),
        1,
    );
    let job = must_get(&tx, id)?;
    tx.commit()?;
    Ok(job)
}

pub fn replay_changed(c: &mut Connection, p: &ReplayChangedParams) -> StoreResult<Job> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, &p.id)?;
    let stored: Option<String> = tx
        .query_row("SELECT changes FROM jobs WHERE seq = ?1", [job.seq], |r| {
            r.get(0)
        })
        .map_err(backend)?;
    let cols = replay_changes(&job, p, stored.as_deref())?;
    // A job moved to another queue joins its key's line there.
    let line = job
        .ordering
        .as_ref()
        .map(|o| OrderingKey::line(&p.queue, &o.key));
    tx.execute(
        &format!(
            "UPDATE jobs SET {REPLAY_SET}, queue = ?3, endpoint = ?4, request = ?5, \
             idempotency_key = ?6, policy = ?7, changes = ?8, oline = ?9 WHERE seq = ?2"
        ),
        params![
            ms(p.now),
            job.seq,
            p.queue,
            p.endpoint,
            cols.request,
            p.idempotency_key,
            cols.policy,
            cols.changes,
            line,
        ],
    )
    .map_err(backend)?;
    if job.idempotency_key != p.idempotency_key {
        // A renewed key: the search finds the job by the new one, not the old.
        if let Some(old) = &job.idempotency_key {
            tx.execute(
                "DELETE FROM job_terms WHERE bucket = ?1 AND term = ?2 AND seq = ?3",
                params![
                    redial_store::term_bucket(job.seq),
                    redial_store::key_term(old),
                    job.seq
                ],
            )
            .map_err(backend)?;
        }
        let new: Vec<String> = p
            .idempotency_key
            .as_deref()
            .map(redial_store::key_term)
            .into_iter()
            .collect();
        super::jobs::insert_terms(&tx, job.seq, &new)?;
    }
    counts::moved(&job.queue, &job.endpoint, Some(place(&job)), None, 1);
    counts::moved(
        &p.queue,
        &p.endpoint,
        None,
        Some((JobState::Ready, None)),
        1,
    );
    let job = must_get(&tx, &p.id)?;
    tx.commit()?;
    Ok(job)
}

pub fn changes(c: &mut Connection, id: &JobId) -> StoreResult<Vec<JobChange>> {
    let stored: Option<Option<String>> = c
        .query_row("SELECT changes FROM jobs WHERE id = ?1", [&id.0], |r| {
            r.get(0)
        })
        .optional()
        .map_err(backend)?;
    read_changes(stored.flatten().as_deref())
}

pub fn dismiss(c: &mut Connection, id: &JobId) -> StoreResult<()> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, id)?;
    may_dismiss(&job)?;
    tx.execute("DELETE FROM jobs WHERE seq = ?1", [job.seq])
        .map_err(backend)?;
    counts::moved(&job.queue, &job.endpoint, Some(place(&job)), None, 1);
    tx.commit()
}

pub fn cancel(c: &mut Connection, id: &JobId, now: Timestamp) -> StoreResult<Job> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, id)?;
    let how = redial_store::cancel(&job)?;
    let now_cancelled = matches!(how, Cancel::Now);
    match how {
        Cancel::Now => {
            tx.execute(
                "UPDATE jobs SET state = 'cancelled', finished_at = ?1, updated_at = ?1, \
                 last_reason = ?3, okey = okey, ord_stay = ord_stay WHERE seq = ?2",
                params![ms(now), job.seq, CANCELLED],
            )
            .map_err(backend)?;
            counts::moved(
                &job.queue,
                &job.endpoint,
                Some(place(&job)),
                Some((JobState::Cancelled, None)),
                1,
            );
        }
        Cancel::WhenTheAttemptEnds => {
            tx.execute(
                "UPDATE jobs SET cancel_requested = 1, updated_at = ?1 WHERE seq = ?2",
                params![ms(now), job.seq],
            )
            .map_err(backend)?;
        }
    }
    let job = must_get(&tx, id)?;
    if now_cancelled {
        jobs::insert_delivery(&tx, &job, now)?;
    }
    tx.commit()?;
    Ok(job)
}

pub fn bulk_replay(c: &mut Connection, f: &JobFilter, now: Timestamp) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let groups = dead_counted(&tx, f)?;
    let mut sql = format!("UPDATE jobs SET {REPLAY_SET} WHERE state = 'dead'");
    let mut params = vec![Value::Integer(ms(now))];
    push_filter(&mut sql, &mut params, f);
    let n = tx
        .execute(&sql, params_from_iter(params.iter()))
        .map_err(backend)? as u64;
    for (queue, endpoint, category, k) in groups {
        let from = Some((JobState::Dead, category));
        counts::moved(&queue, &endpoint, from, Some((JobState::Ready, None)), k);
    }
    tx.commit()?;
    Ok(n)
}

pub fn bulk_dismiss(c: &mut Connection, f: &JobFilter) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let groups = dead_counted(&tx, f)?;
    let mut sql = "DELETE FROM jobs WHERE state = 'dead'".to_owned();
    let mut params = Vec::new();
    push_filter(&mut sql, &mut params, f);
    let n = tx
        .execute(&sql, params_from_iter(params.iter()))
        .map_err(backend)? as u64;
    for (queue, endpoint, category, k) in groups {
        counts::moved(&queue, &endpoint, Some((JobState::Dead, category)), None, k);
    }
    tx.commit()?;
    Ok(n)
}

/// Queue, endpoint, dead category, and how many.
pub(super) type DeadKey = (String, String, Option<DeadCategory>, i64);

/// The dead letters a bulk action's filter matches, by queue, endpoint and category: what it
/// moves in the counts (read in its transaction, just before it acts).
pub(super) fn dead_counted(c: &Connection, f: &JobFilter) -> StoreResult<Vec<DeadKey>> {
    let mut sql =
        "SELECT queue, endpoint, category, COUNT(*) FROM jobs INDEXED BY jobs_dead WHERE state = 'dead'"
            .to_owned();
    let mut params = Vec::new();
    push_filter(&mut sql, &mut params, f);
    sql.push_str(" GROUP BY queue, endpoint, category");
    query_rows(c, &sql, params_from_iter(params.iter()), |r| {
        let category: Option<String> = r.get(2)?;
        Ok((
            r.get(0)?,
            r.get(1)?,
            category
                .as_deref()
                .and_then(|c| parse_dead_category(c).ok()),
            r.get(3)?,
        ))
    })
}
