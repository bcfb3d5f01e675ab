//! An attempt's end: heartbeats, recording an attempt (the batch path and the one-attempt
//! path), and giving leases back.
//!
//! Attempts are stored as one JSON document per row: they are written once, read whole, and their
//! shape grows with observability work without migrations. Their rowid is the job's `seq` shifted
//! left 20 bits plus the attempt's number (migration 9), so recording one writes one b-tree: no
//! index on the job, no foreign-key lookup; a trigger deletes a job's attempts with it, and
//! `job_seq`/`number` remain as computed columns for people reading the file. (As a WITHOUT ROWID
//! table their ~500-byte rows had doubled the cost of recording an attempt.) Recording reads
//! nothing first: the attempt goes in under the number the engine expects, then one UPDATE applies
//! the decision only if the job is still as leased (owner, runs, no cancel waiting); otherwise the
//! attempt comes out again and a careful path under a savepoint decides.

use super::{backend, category_str, events, jobs, ms, must_get, place, run_moving, Sp};
use crate::counts;
use crate::schema::ATTEMPT_KEY_BITS;
use redial_store::{
    HeartbeatParams, InsertOutcome, JobId, JobState, RecordAttemptParams, Recorded, ReleaseParams,
    StoreError, StoreResult,
};
use rusqlite::{params, Connection};

/// Runs `sql` once per id in one transaction, binding `?1` to `value`, `?2` to the id and `?3` to
/// the lease owner; returns how many rows changed.
pub(super) fn update_owned(
    c: &mut Connection,
    sql: &str,
    value: i64,
    ids: &[JobId],
    owner: &str,
) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let mut n = 0;
    {
        let mut stmt = tx.prepare_cached(sql).map_err(backend)?;
        for id in ids {
            n += stmt.execute(params![value, id.0, owner]).map_err(backend)? as u64;
        }
    }
    tx.commit()?;
    Ok(n)
}

pub fn heartbeat(c: &mut Connection, p: &HeartbeatParams) -> StoreResult<u64> {
    update_owned(
        c,
        "UPDATE jobs SET lease_until = ?1 WHERE id = ?2 AND state = 'running' AND lease_owner = ?3",
        ms(p.lease_until),
        &p.ids,
        &p.owner,
    )
}

/// `data` is the attempt already serialised (off the storage thread) for the number the caller
/// expects; if the job's count says otherwise, it is serialised again here. Returns the state the
/// job was left in.
pub fn record_attempt(
    c: &mut Connection,
    p: RecordAttemptParams,
    data: String,
) -> StoreResult<Recorded> {
    // The common case takes no savepoint (each costs a copy of every page it touches) and reads
    // nothing: the attempt goes in under the number the caller expects, then one update applies
    // the decision only if the job is as the caller leased it (ours, that many runs before, no
    // cancel waiting). Each statement is atomic; if the update finds the job otherwise, the
    // attempt comes out again and the careful path decides. An I/O error fails the whole batch
    // at commit.
    let (Some(seq), Some(runs_before)) = (p.seq, p.attempt.number.checked_sub(1)) else {
        return record_attempt_slow(c, p, data).map(Recorded::left);
    };
    // A callback delivery goes in first, so that it is the one statement that may fail (then
    // nothing was written); if the job then turns out not to be as leased, it comes out again
    // with the attempt, and the careful path makes the delivery of what did happen. (A
    // savepoint around the three statements cost more than the rest of the delivery's insert.)
    if let Some(delivery) = p.callback.clone() {
        let (id, queue, endpoint) = (
            delivery.id.clone(),
            delivery.queue.clone(),
            delivery.endpoint.clone(),
        );
        let lease = p
            .callback_leased_until
            .map(|until| (p.owner.as_str(), until));
        let inserted = match jobs::insert_as(c, delivery, lease)? {
            InsertOutcome::Inserted(d) => Some(d),
            InsertOutcome::Duplicate(_) | InsertOutcome::Conflict(_) => None,
        };
        if let Some(state) = record_leased(c, &p, seq, runs_before, &data)? {
            return Ok(Recorded {
                state,
                delivery: inserted.filter(|_| lease.is_some()),
            });
        }
        if let Some(d) = inserted {
            c.prepare_cached("DELETE FROM jobs WHERE id = ?1")
                .and_then(|mut s| s.execute([&id.0]))
                .map_err(backend)?;
            counts::moved(&queue, &endpoint, Some((d.state, None)), None, 1);
        }
        return record_attempt_slow(c, p, data).map(Recorded::left);
    }
    match record_leased(c, &p, seq, runs_before, &data)? {
        Some(state) => Ok(Recorded::left(state)),
        None => record_attempt_slow(c, p, data).map(Recorded::left),
    }
}

/// The common case's two statements: the attempt in, then the decision applied if the job is
/// as the caller leased it. `None` (the attempt taken out again) when it is not.
///
/// Over 100 lines on purpose: the common case's two statements and the checks between them, in the
/// order they run.
fn record_leased(
    c: &Connection,
    p: &RecordAttemptParams,
    seq: i64,
    runs_before: u32,
    data: &str,
) -> StoreResult<Option<JobState>> {
    let (state, category, run_at, finished_at) = p.as_leased();
    let number = p.attempt.number;
    let key = attempt_key(seq, number)?;
    // The attempt that ends the job goes in the job's row (schema migration 24); one that does
    // not goes in `attempts` first.
    let final_attempt = finished_at.map(|_| data);
    // A completion's event goes in with the transaction's others, in one row (schema migration
    // 25): the job is marked so that the finish's trigger passes over it.
    let logged = (state == JobState::Completed).then_some(1);
    if final_attempt.is_none() {
        let inserted = c
            .prepare_cached("INSERT OR IGNORE INTO attempts (id, data) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![key, data]))
            .map_err(backend)?;
        if inserted == 0 {
            // That number is taken: the job is not where the caller thinks.
            return Ok(None);
        }
    }
    let last_delay_ms = p.last_delay_ms.map(|v| v.min(i64::MAX as u64) as i64);
    // `OR FAIL`: a statement that may abort halfway inside a transaction with other changes
    // copies every page it touches to a statement journal first, to undo just itself. This one
    // changes one row and, by its trigger, appends one event, neither of which can break a
    // constraint (the values are bound and checked, the event's key is the next rowid), so
    // there is nothing to undo; an I/O error fails the whole batch at commit anyway. The
    // journal's copies cost the writer 13% of a no-op job (BENCHMARKS.md).
    // A job with an ordering key names `okey`, so that the trigger taking it out of its line
    // runs, and `ord_stay` unless it completed, so that the one setting its line's head afresh
    // runs when it may stay in the line (schema migrations 22 and 23); one without names
    // neither and takes only jobs without a key, so that no trigger of the lines is even entered
    // (each costs the writer a sub-program per row). A keyed job recorded as keyless matches
    // nothing and goes the careful way.
    const SET: &str = "UPDATE OR FAIL jobs SET state = ?1, category = ?2, \
         run_at = COALESCE(?3, run_at), finished_at = ?4, attempts = ?5, unknown_attempts = ?6, \
         deferrals = ?7, last_delay_ms = ?8, last_reason = ?9, runs = ?10, lease_owner = NULL, \
         lease_until = NULL, updated_at = ?11, final_attempt = ?16, logged = ?17";
    const WHERE: &str =
        " WHERE seq = ?12 AND id = ?13 AND state = 'running' AND lease_owner = ?14 \
         AND cancel_requested = 0 AND runs = ?15";
    static KEYED: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{SET}, okey = okey, ord_stay = ord_stay{WHERE}"));
    static KEYED_COMPLETED: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{SET}, okey = okey{WHERE}"));
    static KEYLESS: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("{SET}{WHERE} AND oline IS NULL"));
    let sql = match (p.ordered, state) {
        (false, _) => &KEYLESS,
        (true, JobState::Completed) => &KEYED_COMPLETED,
        (true, _) => &KEYED,
    };
    let updated = c
        .prepare_cached(sql)
        .and_then(|mut s| {
            s.execute(params![
                state.as_str(),
                category_str(category),
                run_at.map(ms),
                finished_at.map(ms),
                p.attempts,
                p.unknown_attempts,
                p.deferrals,
                last_delay_ms,
                p.attempt.reason,
                number,
                ms(p.now),
                seq,
                p.id.0,
                p.owner,
                runs_before,
                final_attempt,
                logged,
            ])
        })
        .map_err(backend)?;
    if updated == 1 {
        if logged.is_some() {
            events::note_completed(p.now, &p.queue, &p.id.0, &p.endpoint, &p.attempt.reason);
        }
        counts::moved(
            &p.queue,
            &p.endpoint,
            Some((JobState::Running, None)),
            Some((state, category)),
            1,
        );
        return Ok(Some(state));
    }
    if final_attempt.is_none() {
        c.prepare_cached("DELETE FROM attempts WHERE id = ?1")
            .and_then(|mut s| s.execute([key]))
            .map_err(backend)?;
    }
    Ok(None)
}

/// An attempt's rowid: its job's seq in the high bits, its number in the low ones.
pub(super) fn attempt_key(seq: i64, number: u32) -> StoreResult<i64> {
    if number >= 1 << ATTEMPT_KEY_BITS || !(0..1 << (63 - ATTEMPT_KEY_BITS)).contains(&seq) {
        return Err(StoreError::Backend(format!(
            "attempt {number} of job seq {seq} is beyond what the attempts table can number"
        )));
    }
    Ok((seq << ATTEMPT_KEY_BITS) | i64::from(number))
}

pub(super) fn insert_attempt(c: &Connection, seq: i64, number: u32, data: &str) -> StoreResult<()> {
    let key = attempt_key(seq, number)?;
    c.prepare_cached("INSERT INTO attempts (id, data) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![key, data]))
        .map(|_| ())
        .map_err(backend)
}

/// The rare cases: the lease is not ours (or the job is gone), or a cancel waits.
pub(super) fn record_attempt_slow(
    c: &mut Connection,
    p: RecordAttemptParams,
    data: String,
) -> StoreResult<JobState> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, &p.id)?;
    let r = p.recording(&job, data)?;
    tx.prepare_cached(
        "UPDATE jobs SET state = ?1, category = ?2, run_at = ?3, finished_at = ?4, attempts = ?5, \
         unknown_attempts = ?6, deferrals = ?7, last_delay_ms = ?8, last_reason = ?9, runs = runs + 1, \
         lease_owner = NULL, lease_until = NULL, updated_at = ?10, okey = okey, ord_stay = ord_stay, \
         final_attempt = ?12 WHERE seq = ?11",
    )
    .and_then(|mut s| {
        s.execute(params![
            r.plan.state.as_str(),
            category_str(r.plan.category),
            ms(r.plan.run_at),
            r.plan.finished_at.map(ms),
            p.attempts,
            p.unknown_attempts,
            p.deferrals,
            r.last_delay_ms,
            r.plan.reason,
            ms(p.now),
            job.seq,
            r.plan.finished_at.map(|_| r.data.as_str()),
        ])
    })
    .map_err(backend)?;
    counts::moved(
        &job.queue,
        &job.endpoint,
        Some(place(&job)),
        Some((r.plan.state, r.plan.category)),
        1,
    );
    if r.plan.finished_at.is_none() {
        insert_attempt(&tx, job.seq, r.plan.number, &r.data)?;
    }
    if let Some(delivery) = r.delivery {
        jobs::insert(&tx, delivery)?;
    }
    tx.commit()?;
    Ok(r.plan.state)
}

pub fn release(c: &mut Connection, p: &ReleaseParams) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let mut n = 0;
    for id in &p.ids {
        n += run_moving(
            &tx,
            "UPDATE jobs SET state = 'ready', lease_owner = NULL, lease_until = NULL, okey = okey, ord_stay = ord_stay, updated_at = ?1 \
             WHERE id = ?2 AND state = 'running' AND lease_owner = ?3 RETURNING queue, endpoint",
            params![ms(p.now), id.0, p.owner],
            Some((JobState::Running, None)),
            Some((JobState::Ready, None)),
        )?;
    }
    tx.commit()?;
    Ok(n)
}
