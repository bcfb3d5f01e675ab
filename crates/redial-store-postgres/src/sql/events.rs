//! The event log: endpoint events appended, the log read from a cursor, old events deleted. Job
//! events are written by the trigger of schema migration 11.
//!
//! Sequence numbers are taken when a row is inserted, not when its transaction commits, so a
//! reader that went by them alone could hand out a cursor past an event whose transaction was
//! still running, and miss it. An event keeps its transaction's id (`tx`), and a read returns
//! only events whose transaction is older than every transaction still running
//! (`pg_snapshot_xmin`): those are all committed or gone, and every event written from now on has
//! a greater `tx`. The log is read in (tx, seq) order. What it costs: an event waits, before it
//! is read, for the transactions that were running when it was written to end (Redial's are
//! short; another client's long transaction on the same server delays the log as long as it
//! runs).

use super::{get, ms, ts};
use crate::{backend, Conn};
use redial_policy::Timestamp;
use redial_store::{
    completed_events, Event, EventCursor, EventFrom, EventListParams, EventPage, NewEvent,
    StoreError, StoreResult,
};

/// How many sequence numbers each event row takes (schema migration 18): a row of
/// completions numbers its events from its own, one apart, so every event has a cursor.
pub const EVENT_BLOCK: i64 = 1024;
const _: () = assert!((crate::recorder::MAX_RECORD_BATCH as i64) < EVENT_BLOCK);

pub async fn event_append(c: &mut Conn, events: &[NewEvent]) -> StoreResult<()> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let stmt = tx
        .prepare(
            "INSERT INTO events (at, kind, endpoint, reason, until) VALUES ($1, $2, $3, $4, $5)",
        )
        .await
        .map_err(backend)?;
    for e in events {
        tx.execute(
            &stmt,
            &[
                &ms(e.at),
                &e.kind.as_str(),
                &e.endpoint,
                &e.reason,
                &e.until.map(ms),
            ],
        )
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)
}

pub async fn event_list(c: &mut Conn, p: &EventListParams) -> StoreResult<EventPage> {
    let after = match p.from {
        EventFrom::Start => EventCursor::default(),
        EventFrom::After(cursor) => cursor,
        EventFrom::End => {
            // Every event of a transaction older than the oldest running one is in the past;
            // the others may still come.
            let row = c
                .client
                .query_one(
                    "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
                    &[],
                )
                .await
                .map_err(backend)?;
            let next = EventCursor {
                tx: get::<i64>(&row, 0)?,
                seq: 0,
            };
            return Ok(p.page(next, Vec::new()));
        }
    };
    // The row of completions the cursor may stop inside comes first, then the rows after it.
    let rows = c
        .client
        .query(
            "SELECT * FROM (SELECT tx::text::bigint, seq, at, kind, queue, job_id, endpoint, \
               category, reason, until, batch FROM events \
               WHERE tx = $1::text::xid8 AND seq > $2::bigint - $4::bigint AND seq <= $2 \
               AND batch IS NOT NULL \
               ORDER BY seq DESC LIMIT 1) inside \
             UNION ALL SELECT * FROM (SELECT tx::text::bigint, seq, at, kind, queue, job_id, \
               endpoint, category, reason, until, batch FROM events \
               WHERE (tx, seq) > ($1::text::xid8, $2) \
               AND tx < pg_snapshot_xmin(pg_current_snapshot()) \
               ORDER BY tx, seq LIMIT $3) later",
            &[
                &after.tx.to_string(),
                &after.seq,
                &i64::from(p.scan()),
                &EVENT_BLOCK,
            ],
        )
        .await
        .map_err(backend)?;
    let mut events = Vec::with_capacity(rows.len());
    for r in &rows {
        let kind: String = get(r, 3)?;
        if let Some(batch) = get::<Option<String>>(r, 10)? {
            // A row of completions, numbered from the row's own.
            let (tx, seq): (i64, i64) = (get(r, 0)?, get(r, 1)?);
            events.extend(completed_events(&batch, tx, |_| seq, after)?);
            continue;
        }
        events.push(Event {
            cursor: EventCursor {
                tx: get(r, 0)?,
                seq: get(r, 1)?,
            },
            at: Timestamp::from_unix_millis(get(r, 2)?),
            kind: kind.parse().map_err(StoreError::Backend)?,
            queue: get(r, 4)?,
            job_id: get(r, 5)?,
            endpoint: get(r, 6)?,
            category: get(r, 7)?,
            reason: get(r, 8)?,
            until: ts(get(r, 9)?),
        });
    }
    Ok(p.page(after, events))
}

/// Reads at most `limit` of the oldest rows and deletes those older than `before` among them:
/// bounded however large the log. The newest event is kept whatever its age, as on SQLite.
pub async fn event_cleanup(c: &mut Conn, before: Timestamp, limit: u32) -> StoreResult<u64> {
    c.client
        .execute(
            "DELETE FROM events WHERE (tx, seq) IN (SELECT tx, seq FROM \
             (SELECT tx, seq, at FROM events ORDER BY tx, seq LIMIT $2) oldest WHERE at < $1 \
             AND (tx, seq) < (SELECT tx, seq FROM events ORDER BY tx DESC, seq DESC LIMIT 1))",
            &[&ms(before), &i64::from(limit)],
        )
        .await
        .map_err(backend)
}
