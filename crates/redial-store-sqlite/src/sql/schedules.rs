//! Recurring schedules: save, get, list, delete, pause, and the due check's reads and advances.

use super::{backend, ms, query_rows, ts};
use redial_policy::Timestamp;
use redial_store::{ScheduleAdvance, ScheduleRecord, StoreResult};
use rusqlite::{params, Connection, OptionalExtension, Row};

pub(super) const SCHEDULE_COLUMNS: &str =
    "id, definition, paused, next_at, last_occurrence, last_fired_at, created_at, updated_at";

pub(super) fn schedule(r: &Row<'_>) -> rusqlite::Result<ScheduleRecord> {
    Ok(ScheduleRecord {
        id: r.get(0)?,
        definition: r.get(1)?,
        paused: r.get(2)?,
        next_at: ts(r.get(3)?),
        last_occurrence: ts(r.get(4)?),
        last_fired_at: ts(r.get(5)?),
        created_at: Timestamp::from_unix_millis(r.get(6)?),
        updated_at: Timestamp::from_unix_millis(r.get(7)?),
    })
}

pub fn schedule_save(c: &mut Connection, s: &ScheduleRecord) -> StoreResult<()> {
    c.execute(
        "INSERT INTO schedules (id, definition, paused, next_at, last_occurrence, last_fired_at, \
           created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
         ON CONFLICT (id) DO UPDATE SET definition = excluded.definition, \
           next_at = excluded.next_at, updated_at = excluded.updated_at",
        params![
            s.id,
            s.definition,
            s.paused,
            s.next_at.map(ms),
            s.last_occurrence.map(ms),
            s.last_fired_at.map(ms),
            ms(s.created_at),
            ms(s.updated_at)
        ],
    )
    .map(|_| ())
    .map_err(backend)
}

pub fn schedule_get(c: &mut Connection, id: &str) -> StoreResult<Option<ScheduleRecord>> {
    c.query_row(
        &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = ?1"),
        [id],
        schedule,
    )
    .optional()
    .map_err(backend)
}

pub fn schedule_list(c: &mut Connection) -> StoreResult<Vec<ScheduleRecord>> {
    query_rows(
        c,
        &format!("SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY id"),
        [],
        schedule,
    )
}

pub fn schedule_page(
    c: &mut Connection,
    after: Option<&str>,
    limit: u32,
) -> StoreResult<Vec<ScheduleRecord>> {
    query_rows(
        c,
        &format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE ?1 IS NULL OR id > ?1 ORDER BY id LIMIT ?2"
        ),
        params![after, limit],
        schedule,
    )
}

pub fn schedule_delete(c: &mut Connection, id: &str) -> StoreResult<bool> {
    c.execute("DELETE FROM schedules WHERE id = ?1", [id])
        .map(|n| n > 0)
        .map_err(backend)
}

pub fn schedule_set_paused(
    c: &mut Connection,
    id: &str,
    paused: bool,
    next_at: Option<Timestamp>,
    now: Timestamp,
) -> StoreResult<bool> {
    c.execute(
        "UPDATE schedules SET paused = ?2, \
           next_at = CASE WHEN ?2 THEN next_at ELSE ?3 END, updated_at = ?4 WHERE id = ?1",
        params![id, paused, next_at.map(ms), ms(now)],
    )
    .map(|n| n > 0)
    .map_err(backend)
}

pub fn schedules_due(
    c: &mut Connection,
    now: Timestamp,
    limit: usize,
) -> StoreResult<Vec<ScheduleRecord>> {
    query_rows(
        c,
        &format!(
            "SELECT {SCHEDULE_COLUMNS} FROM schedules \
             WHERE paused = 0 AND next_at IS NOT NULL AND next_at <= ?1 ORDER BY next_at, id LIMIT ?2"
        ),
        params![ms(now), i64::try_from(limit).unwrap_or(i64::MAX)],
        schedule,
    )
}

pub fn schedule_advance(c: &mut Connection, a: &ScheduleAdvance) -> StoreResult<bool> {
    c.execute(
        "UPDATE schedules SET next_at = ?3, \
           last_occurrence = COALESCE(?4, last_occurrence), \
           last_fired_at = CASE WHEN ?4 IS NULL THEN last_fired_at ELSE ?5 END \
         WHERE id = ?1 AND next_at = ?2 AND updated_at = ?6",
        params![
            a.id,
            ms(a.due),
            a.next_at.map(ms),
            a.last_occurrence.map(ms),
            ms(a.now),
            ms(a.read_at)
        ],
    )
    .map(|n| n > 0)
    .map_err(backend)
}
