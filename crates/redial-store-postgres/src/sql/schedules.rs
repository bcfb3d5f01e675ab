//! Recurring schedules: save, get, list, delete, pause, and the due check's reads and advances.

use super::{get, ms, ts};
use crate::{backend, Conn};
use redial_policy::Timestamp;
use redial_store::{ScheduleAdvance, ScheduleRecord, StoreResult};
use tokio_postgres::Row;

pub(super) const SCHEDULE_COLUMNS: &str =
    "id, definition, paused, next_at, last_occurrence, last_fired_at, created_at, updated_at";

pub(super) fn schedule(r: &Row) -> StoreResult<ScheduleRecord> {
    Ok(ScheduleRecord {
        id: get(r, 0)?,
        definition: get(r, 1)?,
        paused: get(r, 2)?,
        next_at: ts(get(r, 3)?),
        last_occurrence: ts(get(r, 4)?),
        last_fired_at: ts(get(r, 5)?),
        created_at: Timestamp::from_unix_millis(get(r, 6)?),
        updated_at: Timestamp::from_unix_millis(get(r, 7)?),
    })
}

pub async fn schedule_save(c: &mut Conn, s: &ScheduleRecord) -> StoreResult<()> {
    c.client
        .execute(
            "INSERT INTO schedules (id, definition, paused, next_at, last_occurrence, \
               last_fired_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (id) DO UPDATE SET definition = excluded.definition, \
               next_at = excluded.next_at, updated_at = excluded.updated_at",
            &[
                &s.id,
                &s.definition,
                &s.paused,
                &s.next_at.map(ms),
                &s.last_occurrence.map(ms),
                &s.last_fired_at.map(ms),
                &ms(s.created_at),
                &ms(s.updated_at),
            ],
        )
        .await
        .map(|_| ())
        .map_err(backend)
}

pub async fn schedule_get(c: &mut Conn, id: &str) -> StoreResult<Option<ScheduleRecord>> {
    let sql = format!("SELECT {SCHEDULE_COLUMNS} FROM schedules WHERE id = $1");
    c.client
        .query_opt(sql.as_str(), &[&id])
        .await
        .map_err(backend)?
        .as_ref()
        .map(schedule)
        .transpose()
}

pub async fn schedule_list(c: &mut Conn) -> StoreResult<Vec<ScheduleRecord>> {
    let sql = format!("SELECT {SCHEDULE_COLUMNS} FROM schedules ORDER BY id COLLATE \"C\"");
    c.client
        .query(sql.as_str(), &[])
        .await
        .map_err(backend)?
        .iter()
        .map(schedule)
        .collect()
}

pub async fn schedule_page(
    c: &mut Conn,
    after: Option<&str>,
    limit: u32,
) -> StoreResult<Vec<ScheduleRecord>> {
    let sql = format!(
        "SELECT {SCHEDULE_COLUMNS} FROM schedules \
         WHERE $1::text IS NULL OR id COLLATE \"C\" > $1::text COLLATE \"C\" \
         ORDER BY id COLLATE \"C\" LIMIT $2"
    );
    c.client
        .query(sql.as_str(), &[&after, &i64::from(limit)])
        .await
        .map_err(backend)?
        .iter()
        .map(schedule)
        .collect()
}

pub async fn schedule_delete(c: &mut Conn, id: &str) -> StoreResult<bool> {
    c.client
        .execute("DELETE FROM schedules WHERE id = $1", &[&id])
        .await
        .map(|n| n > 0)
        .map_err(backend)
}

pub async fn schedule_set_paused(
    c: &mut Conn,
    id: &str,
    paused: bool,
    next_at: Option<Timestamp>,
    now: Timestamp,
) -> StoreResult<bool> {
    c.client
        .execute(
            "UPDATE schedules SET paused = $2, \
               next_at = CASE WHEN $2 THEN next_at ELSE $3 END, updated_at = $4 WHERE id = $1",
            &[&id, &paused, &next_at.map(ms), &ms(now)],
        )
        .await
        .map(|n| n > 0)
        .map_err(backend)
}

pub(super) const SCHEDULES_DUE: &str = "SELECT id, definition, paused, next_at, last_occurrence, \
     last_fired_at, created_at, updated_at FROM schedules \
     WHERE NOT paused AND next_at IS NOT NULL AND next_at <= $1 ORDER BY next_at, id LIMIT $2";

pub async fn schedules_due(
    c: &mut Conn,
    now: Timestamp,
    limit: usize,
) -> StoreResult<Vec<ScheduleRecord>> {
    let stmt = c.prepared(SCHEDULES_DUE).await?;
    c.client
        .query(
            &stmt,
            &[&ms(now), &i64::try_from(limit).unwrap_or(i64::MAX)],
        )
        .await
        .map_err(backend)?
        .iter()
        .map(schedule)
        .collect()
}

pub(super) const SCHEDULE_ADVANCE: &str = "UPDATE schedules SET next_at = $3, \
       last_occurrence = COALESCE($4, last_occurrence), \
       last_fired_at = CASE WHEN $4::BIGINT IS NULL THEN last_fired_at ELSE $5 END \
     WHERE id = $1 AND next_at = $2 AND updated_at = $6";

pub async fn schedule_advance(c: &mut Conn, a: &ScheduleAdvance) -> StoreResult<bool> {
    let stmt = c.prepared(SCHEDULE_ADVANCE).await?;
    c.client
        .execute(
            &stmt,
            &[
                &a.id,
                &ms(a.due),
                &a.next_at.map(ms),
                &a.last_occurrence.map(ms),
                &ms(a.now),
                &ms(a.read_at),
            ],
        )
        .await
        .map(|n| n > 0)
        .map_err(backend)
}
