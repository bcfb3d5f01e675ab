//! What maintenance runs every few seconds: rescuing expired leases, promoting due jobs,
//! expiring deadlines, and retention's deletions. Each reads by index, never the whole table.

use super::{backend, json_err, ms, query_rows, run_finishing, run_moving, Sp};
use crate::counts;
use redial_policy::{DeadCategory, Timestamp};
use redial_store::{
    parse_dead_category, CleanupParams, ExpireParams, JobState, RescueParams, RescueReport,
    StoreError, StoreResult,
};
use rusqlite::{params, Connection};

// Maintenance statements, named so that a test can check they read by index: each runs every
// few seconds, and a scan of the jobs table would hold the one writer for as long as the table
// is large.
pub(super) const RESCUE_DEAD: &str =
    "UPDATE jobs SET state = 'dead', category = 'unknown_exhausted', stalls = stalls + 1, \
     lease_owner = NULL, lease_until = NULL, finished_at = ?1, updated_at = ?1, okey = okey, ord_stay = ord_stay, \
     last_reason = 'lease expired while running (the worker died or hung); stall ' \
         || (stalls + 1) || ' over the limit of ' || ?2 \
     WHERE state = 'running' AND lease_until < ?1 AND stalls + 1 > ?2 RETURNING queue, endpoint, \
     CASE WHEN callback IS NULL THEN NULL ELSE id END";
pub(super) const RESCUE_READY: &str =
    "UPDATE jobs SET state = 'ready', stalls = stalls + 1, lease_owner = NULL, lease_until = NULL, okey = okey, ord_stay = ord_stay, \
     run_at = MIN(run_at, ?1), updated_at = ?1, \
     last_reason = 'lease expired while running (the worker died or hung); stall ' \
         || (stalls + 1) || ' of ' || ?2 \
     WHERE state = 'running' AND lease_until < ?1 RETURNING queue, endpoint";
/// ?2: the state promoted (scheduled or deferred), one at a time so each job's is known.
pub(super) const PROMOTE: &str = "UPDATE jobs SET state = 'ready', updated_at = ?1 \
     WHERE state IN ('scheduled', 'deferred') AND run_at <= ?1 AND state = ?2 \
     RETURNING queue, endpoint";
pub(super) const CLEANUP_BY_AGE: &str =
    "DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs INDEXED BY jobs_finished \
     WHERE (state = 'completed' OR state = 'dead' OR state = 'cancelled') \
     AND finished_at < MAX(?1, ?2) \
     AND CASE WHEN state = 'dead' THEN finished_at < ?2 ELSE finished_at < ?1 END \
     LIMIT ?3) RETURNING queue, endpoint, state, category";
pub(super) const CLEANUP_BY_COUNT: &str =
    "DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs INDEXED BY jobs_finished \
     WHERE (state = 'completed' OR state = 'dead' OR state = 'cancelled') \
     AND state <> 'dead' ORDER BY finished_at DESC, seq DESC LIMIT ?2 OFFSET ?1) \
     RETURNING queue, endpoint, state, category";

pub fn rescue(c: &mut Connection, p: &RescueParams) -> StoreResult<RescueReport> {
    let tx = Sp::begin(c)?;
    let now = ms(p.now);
    let running = Some((JobState::Running, None));
    let dead = run_finishing(
        &tx,
        RESCUE_DEAD,
        params![now, p.max_stalls],
        running,
        Some((JobState::Dead, Some(DeadCategory::UnknownExhausted))),
        p.now,
    )?;
    let ready = run_moving(
        &tx,
        RESCUE_READY,
        params![now, p.max_stalls],
        running,
        Some((JobState::Ready, None)),
    )?;
    tx.commit()?;
    Ok(RescueReport {
        requeued: ready,
        dead,
    })
}

pub fn promote(c: &mut Connection, now: Timestamp) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let mut n = 0;
    for from in [JobState::Scheduled, JobState::Deferred] {
        n += run_moving(
            &tx,
            PROMOTE,
            params![ms(now), from.as_str()],
            Some((from, None)),
            Some((JobState::Ready, None)),
        )?;
    }
    tx.commit()?;
    Ok(n)
}

pub fn expire_deadlines(c: &mut Connection, p: &ExpireParams) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let now = ms(p.now);
    let mut n = 0;
    let dead = Some((JobState::Dead, Some(DeadCategory::DeadlineExceeded)));
    // One waiting state at a time, so that each job's is known for the counts.
    for from in [JobState::Ready, JobState::Scheduled, JobState::Deferred] {
        // Endpoints with a known hold first, so their jobs' reasons name it.
        for (endpoint, why) in &p.reasons {
            n += run_finishing(
                &tx,
                concat!(
                    "UPDATE jobs SET state = 'dead', category = 'deadline_exceeded', \
                     finished_at = ?1, updated_at = ?1, okey = okey, ord_stay = ord_stay, \
                     last_reason = 'deadline passed while held by its endpoint: ' || ?3 \
                     WHERE deadline IS NOT NULL AND deadline <= ?1 AND endpoint = ?2 AND ",
                    waiting!(),
                    " AND state = ?4 RETURNING queue, endpoint, \
                     CASE WHEN callback IS NULL THEN NULL ELSE id END"
                ),
                params![now, endpoint, why, from.as_str()],
                Some((from, None)),
                dead,
                p.now,
            )?;
        }
        n += run_finishing(
            &tx,
            concat!(
                "UPDATE jobs SET state = 'dead', category = 'deadline_exceeded', finished_at = ?1, \
                 updated_at = ?1, okey = okey, ord_stay = ord_stay, last_reason = 'deadline passed before the job could run' \
                 WHERE deadline IS NOT NULL AND deadline <= ?1 AND ",
                waiting!(),
                " AND state = ?2 RETURNING queue, endpoint, \
                 CASE WHEN callback IS NULL THEN NULL ELSE id END"
            ),
            params![now, from.as_str()],
            Some((from, None)),
            dead,
            p.now,
        )?;
    }
    tx.commit()?;
    Ok(n)
}

/// Both deletions walk `jobs_finished` (finished jobs by age), never the whole table: with a
/// large backlog a table scan would hold the one writer for a tenth of a second per million jobs.
pub fn cleanup(c: &mut Connection, p: &CleanupParams) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let by_age = delete_counted(
        &tx,
        CLEANUP_BY_AGE,
        params![ms(p.completed_before), ms(p.dead_before), p.limit],
    )?;
    let Some(keep) = p.completed_keep else {
        tx.commit()?;
        return Ok(by_age);
    };
    let room = u64::from(p.limit).saturating_sub(by_age);
    let by_count = delete_counted(
        &tx,
        CLEANUP_BY_COUNT,
        params![
            keep.min(i64::MAX as u64) as i64,
            room.min(i64::MAX as u64) as i64
        ],
    )?;
    tx.commit()?;
    Ok(by_age + by_count)
}

/// Runs a delete that ends in `RETURNING queue, endpoint, state, category`, taking each job it
/// returns out of the counts; returns how many.
pub(super) fn delete_counted<P: rusqlite::Params>(
    c: &Connection,
    sql: &str,
    params: P,
) -> StoreResult<u64> {
    let mut stmt = c.prepare_cached(sql).map_err(backend)?;
    let mut rows = stmt.query(params).map_err(backend)?;
    let mut by: std::collections::HashMap<(String, String, String, Option<String>), i64> =
        Default::default();
    while let Some(r) = rows.next().map_err(backend)? {
        let key = (
            r.get(0).map_err(backend)?,
            r.get(1).map_err(backend)?,
            r.get(2).map_err(backend)?,
            r.get(3).map_err(backend)?,
        );
        *by.entry(key).or_default() += 1;
    }
    let mut n = 0;
    for ((queue, endpoint, state, category), k) in by {
        let state: JobState = state.parse().map_err(StoreError::Backend)?;
        let category = category
            .as_deref()
            .map(parse_dead_category)
            .transpose()
            .map_err(StoreError::Backend)?;
        counts::moved(&queue, &endpoint, Some((state, category)), None, k);
        n += k as u64;
    }
    Ok(n)
}

/// [`Store::index_for_search`]: the terms of up to `limit` jobs inserted since
/// ([`index_terms`]) and the words of up to `limit` jobs noted in `dead_pending`
/// ([`index_words`]), in one transaction; the most it took of either.
pub fn index_for_search(c: &mut Connection, limit: u32) -> StoreResult<u32> {
    let tx = Sp::begin(c)?;
    let terms = index_terms(&tx, limit)?;
    let words = index_words(&tx, limit)?;
    tx.commit()?;
    Ok(terms.max(words))
}

/// Batches of at least this many jobs get their terms in one block (`job_term_blocks`) instead
/// of a row each (`job_terms`).
const BLOCK_MIN: usize = 64;

/// The terms (`redial_store::job_terms`) of up to `limit` jobs inserted since the last time
/// (`search_state.terms_upto`: the one writer gives seqs in commit order, so every job past it
/// is new to the index), in the caller's transaction: one block for 64 jobs or more (the terms
/// and their jobs' seqs as two JSON arrays, and a bloom filter of the terms,
/// `redial_store::term_bloom_bytes`), a row each otherwise. An insert writes nothing for search:
/// measured with `redial-bench --only search-cost`, a row per term written by the insert cost
/// SQLite's batched enqueue an eighth of its rate (a fifth with two tags), and a single insert
/// a tenth (one more page in each commit).
fn index_terms(tx: &Connection, limit: u32) -> StoreResult<u32> {
    let upto: i64 = tx
        .query_row("SELECT terms_upto FROM search_state", [], |r| r.get(0))
        .map_err(backend)?;
    let jobs = query_rows(
        tx,
        "SELECT seq, idempotency_key, tags FROM jobs WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        [upto, i64::from(limit)],
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, String>(2)?,
            ))
        },
    )?;
    let Some(&(last, _, _)) = jobs.last() else {
        return Ok(0);
    };
    let (mut terms, mut seqs) = (Vec::new(), Vec::new());
    for (seq, key, tags) in &jobs {
        let tags: Vec<String> = serde_json::from_str(tags).map_err(json_err)?;
        let these = redial_store::job_terms(key.as_deref(), &tags);
        if jobs.len() < BLOCK_MIN {
            super::jobs::insert_terms(tx, *seq, &these)?;
        } else {
            seqs.extend(std::iter::repeat_n(*seq, these.len()));
            terms.extend(these);
        }
    }
    if let (Some(first), Some(end)) = (seqs.first(), seqs.last()) {
        let terms_json = serde_json::to_string(&terms).map_err(json_err)?;
        let seqs_json = serde_json::to_string(&seqs).map_err(json_err)?;
        tx.prepare_cached(
            "INSERT INTO job_term_blocks (first_seq, last_seq, bloom, terms, seqs) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![
                first,
                end,
                redial_store::term_bloom_bytes(&terms),
                terms_json,
                seqs_json,
            ])
        })
        .map_err(backend)?;
    }
    tx.execute("UPDATE search_state SET terms_upto = ?1", [last])
        .map_err(backend)?;
    Ok(jobs.len() as u32)
}

/// The words of up to `limit` jobs noted in `dead_pending`, in the caller's transaction. A job
/// no longer dead (replayed since) loses its words; one dead again has its old words replaced.
fn index_words(tx: &Connection, limit: u32) -> StoreResult<u32> {
    let notes = query_rows(
        tx,
        "SELECT p.rowid, p.seq, CASE WHEN j.state = 'dead' THEN j.last_reason END \
         FROM dead_pending p LEFT JOIN jobs j ON j.seq = p.seq ORDER BY p.rowid LIMIT ?1",
        [i64::from(limit)],
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, Option<String>>(2)?,
            ))
        },
    )?;
    // A job noted twice (dead, replayed, dead again) is indexed once, as it stands.
    let mut pending: Vec<(i64, Option<String>)> = Vec::with_capacity(notes.len());
    for (_, seq, reason) in &notes {
        if !pending.iter().any(|(s, _)| s == seq) {
            pending.push((*seq, reason.clone()));
        }
    }
    {
        let mut forget = tx
            .prepare_cached("DELETE FROM dead_words WHERE seq = ?1")
            .map_err(backend)?;
        let mut add = tx
            .prepare_cached("INSERT OR IGNORE INTO dead_words (word, seq) VALUES (?1, ?2)")
            .map_err(backend)?;
        let mut done = tx
            .prepare_cached("DELETE FROM dead_pending WHERE rowid = ?1")
            .map_err(backend)?;
        for (seq, reason) in &pending {
            forget.execute([seq]).map_err(backend)?;
            for w in redial_store::reason_words(reason.as_deref().unwrap_or("")) {
                add.execute(params![w, seq]).map_err(backend)?;
            }
        }
        for (rowid, _, _) in &notes {
            done.execute([rowid]).map_err(backend)?;
        }
    }
    Ok(notes.len() as u32)
}
