//! The event log: endpoint events appended, the log read from a cursor, old events deleted. Job
//! events are written by the triggers of schema migration 18, but the completions recorded on
//! the fast path: those are noted here as they are written ([`note_completed`]) and go in as one
//! row per transaction ([`flush_completions`], before the storage thread's commit; migration
//! 25). One writer: sequence numbers are taken in commit order, so the cursor's `tx` is always
//! 0. A row of completions takes the number of its last and leaves the ones before it free, so
//! every event keeps a number of its own and a cursor can stop inside a row.

use super::{backend, ms, query_rows, ts, Sp};
use redial_policy::Timestamp;
use redial_store::{
    completed_events, Completion, Event, EventCursor, EventFrom, EventListParams, EventPage,
    NewEvent, StoreError, StoreResult,
};
use rusqlite::{params, Connection};
use std::cell::RefCell;

thread_local! {
    /// The completions the open transaction wrote on the fast path, in order.
    static COMPLETED: RefCell<Vec<Completion>> = const { RefCell::new(Vec::new()) };
}

/// Notes a job completed by the statement just run (which marked it `logged`), for the
/// transaction's row of completions.
pub(super) fn note_completed(at: Timestamp, queue: &str, id: &str, endpoint: &str, reason: &str) {
    COMPLETED.with(|c| {
        c.borrow_mut().push((
            ms(at),
            queue.to_owned(),
            id.to_owned(),
            endpoint.to_owned(),
            reason.to_owned(),
        ))
    });
}

/// Where the noted completions stand (a savepoint's start).
pub(crate) fn completions_mark() -> usize {
    COMPLETED.with(|c| c.borrow().len())
}

/// Drops what was noted since `mark` (its savepoint was rolled back).
pub(crate) fn completions_rollback_to(mark: usize) {
    COMPLETED.with(|c| c.borrow_mut().truncate(mark));
}

/// Drops every noted completion (the transaction was rolled back).
pub(crate) fn completions_clear() {
    COMPLETED.with(|c| c.borrow_mut().clear());
}

/// Writes the completions the open transaction noted, as one row (one completion alone as an
/// ordinary row). Called by the storage thread right before its commit.
pub(crate) fn flush_completions(c: &Connection) -> StoreResult<()> {
    let done = COMPLETED.with(|c| std::mem::take(&mut *c.borrow_mut()));
    if c.is_autocommit() {
        // SQLite rolled the transaction back by itself: what was noted went with it, and a
        // row written now would commit alone.
        return Ok(());
    }
    match done.as_slice() {
        [] => Ok(()),
        [(at, queue, id, endpoint, reason)] => c
            .prepare_cached(
                "INSERT INTO events (at, kind, queue, job_id, endpoint, reason) \
                 VALUES (?1, 'job.completed', ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| s.execute(params![at, queue, id, endpoint, reason]))
            .map(|_| ())
            .map_err(backend),
        many => {
            let at = many.iter().map(|d| d.0).max().unwrap_or_default();
            let batch = serde_json::to_string(many).map_err(|e| {
                StoreError::Backend(format!("cannot encode the completions' events: {e}"))
            })?;
            c.prepare_cached(
                "INSERT INTO events (seq, at, kind, batch) \
                 VALUES ((SELECT COALESCE(MAX(seq), 0) FROM events) + ?1, ?2, 'job.completed', ?3)",
            )
            .and_then(|mut s| s.execute(params![many.len() as i64, at, batch]))
            .map(|_| ())
            .map_err(backend)
        }
    }
}

pub fn event_append(c: &mut Connection, events: &[NewEvent]) -> StoreResult<()> {
    let tx = Sp::begin(c)?;
    {
        let mut stmt = tx
            .prepare_cached(
                "INSERT INTO events (at, kind, endpoint, reason, until) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(backend)?;
        for e in events {
            stmt.execute(params![
                ms(e.at),
                e.kind.as_str(),
                e.endpoint,
                e.reason,
                e.until.map(ms)
            ])
            .map_err(backend)?;
        }
    }
    tx.commit()
}

pub fn event_list(c: &mut Connection, p: &EventListParams) -> StoreResult<EventPage> {
    let after = match p.from {
        EventFrom::Start => EventCursor::default(),
        EventFrom::After(cursor) => cursor,
        EventFrom::End => {
            let last: Option<i64> = c
                .query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
                .map_err(backend)?;
            let next = EventCursor {
                tx: 0,
                seq: last.unwrap_or(0),
            };
            return Ok(p.page(next, Vec::new()));
        }
    };
    // A cursor from PostgreSQL (tx > 0) read here starts after every event of this log.
    let seq = if after.tx > 0 { i64::MAX } else { after.seq };
    let rows = query_rows(
        c,
        "SELECT seq, at, kind, queue, job_id, endpoint, category, reason, until, batch \
         FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        params![seq, p.scan()],
        |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
                r.get::<_, Option<String>>(6)?,
                r.get::<_, Option<String>>(7)?,
                r.get::<_, Option<i64>>(8)?,
                r.get::<_, Option<String>>(9)?,
            ))
        },
    )?;
    let mut events = Vec::with_capacity(rows.len());
    for (seq, at, kind, queue, job_id, endpoint, category, reason, until, batch) in rows {
        if let Some(batch) = batch {
            // A row of completions: the last has the row's number, the others the ones before.
            events.extend(completed_events(&batch, 0, |n| seq - n as i64 + 1, after)?);
            continue;
        }
        events.push(Event {
            cursor: EventCursor { tx: 0, seq },
            at: Timestamp::from_unix_millis(at),
            kind: kind.parse().map_err(StoreError::Backend)?,
            queue,
            job_id,
            endpoint,
            category,
            reason,
            until: ts(until),
        });
    }
    Ok(p.page(after, events))
}

/// Reads at most `limit` of the oldest rows and deletes those older than `before` among them:
/// bounded however large the log (an event written with an earlier time than the one before it
/// waits for its turn). The newest event is kept whatever its age: the next one's number follows
/// it, so a number is never taken again (the table is not AUTOINCREMENT).
pub fn event_cleanup(c: &mut Connection, before: Timestamp, limit: u32) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let n = tx
        .prepare_cached(
            "DELETE FROM events WHERE seq IN \
             (SELECT seq FROM (SELECT seq, at FROM events ORDER BY seq LIMIT ?2) \
              WHERE at < ?1 AND seq < (SELECT MAX(seq) FROM events))",
        )
        .and_then(|mut s| s.execute(params![ms(before), limit]))
        .map_err(backend)?;
    tx.commit()?;
    Ok(n as u64)
}
