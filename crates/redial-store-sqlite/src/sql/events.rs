//! The event log: endpoint events appended, the log read from a cursor, old events deleted. Job
//! events are written by the triggers of schema migration 18. One writer: sequence numbers are
//! taken in commit order, so the cursor's `tx` is always 0.

use super::*;

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
        "SELECT seq, at, kind, queue, job_id, endpoint, category, reason, until FROM events \
         WHERE seq > ?1 ORDER BY seq LIMIT ?2",
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
            ))
        },
    )?;
    let mut events = Vec::with_capacity(rows.len());
    for (seq, at, kind, queue, job_id, endpoint, category, reason, until) in rows {
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
