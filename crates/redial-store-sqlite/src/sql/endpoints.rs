//! Endpoints and controls: backlog from the kept counts, saved endpoint state, shared holds,
//! hand pauses of queues and endpoints.

use super::{backend, ms, query_rows, ts, Sp};
use crate::counts;
use redial_policy::endpoint::WaitingDeadline;
use redial_policy::Timestamp;
use redial_store::{
    control, Control, ControlKind, EndpointBacklog, EndpointRecord, JobState, RetriesNowParams,
    SharedHold, StoreResult,
};
use rusqlite::{params, Connection};

/// From the kept counts: ready jobs are due (and held, when their endpoint holds them); scheduled
/// and deferred ones wait for later (one whose time came is promoted to ready within a
/// maintenance tick, or leased).
pub fn endpoint_backlog(counts: &counts::Shared) -> Vec<EndpointBacklog> {
    backlog_from(counts::lock(counts).counts())
}

/// One endpoint's backlog, from its own counts.
pub fn endpoint_backlog_of(counts: &counts::Shared, name: &str) -> EndpointBacklog {
    backlog_from(counts::lock(counts).counts_of_endpoint(name))
        .pop()
        .unwrap_or_else(|| EndpointBacklog {
            endpoint: name.to_owned(),
            due: 0,
            later: 0,
        })
}

fn backlog_from(counts: impl Iterator<Item = counts::Count>) -> Vec<EndpointBacklog> {
    let mut by: std::collections::BTreeMap<String, EndpointBacklog> = Default::default();
    for key in counts {
        let (due, later) = match key.state {
            JobState::Ready => (key.n, 0),
            JobState::Scheduled | JobState::Deferred => (0, key.n),
            _ => continue,
        };
        let b = by
            .entry(key.endpoint.to_string())
            .or_insert_with(|| EndpointBacklog {
                endpoint: key.endpoint.to_string(),
                due: 0,
                later: 0,
            });
        b.due += due;
        b.later += later;
    }
    by.into_values().collect()
}

/// Scheduled retries of the endpoint, failed since `since`, are due now (still scheduled: the
/// next lease takes them, or maintenance promotes them).
pub fn retries_now(c: &mut Connection, p: &RetriesNowParams) -> StoreResult<u64> {
    let n = c
        .prepare_cached(
            "UPDATE jobs INDEXED BY jobs_retrying SET run_at = ?3 \
             WHERE endpoint = ?1 AND state = 'scheduled' AND attempts > 0 AND run_at > ?3 \
             AND updated_at >= ?2",
        )
        .map_err(backend)?
        .execute(params![p.endpoint, ms(p.since), ms(p.now)])
        .map_err(backend)?;
    Ok(n as u64)
}

pub fn endpoint_load(c: &mut Connection) -> StoreResult<Vec<EndpointRecord>> {
    let rows = query_rows(
        c,
        "SELECT name, state, updated_at FROM endpoints ORDER BY name",
        [],
        |r| {
            Ok(EndpointRecord {
                name: r.get(0)?,
                state: r.get(1)?,
                updated_at: Timestamp::from_unix_millis(r.get(2)?),
            })
        },
    )?;
    Ok(rows)
}

pub fn endpoint_save(c: &mut Connection, records: &[EndpointRecord]) -> StoreResult<()> {
    let tx = Sp::begin(c)?;
    {
        let mut stmt = tx
            .prepare_cached(
                "INSERT INTO endpoints (name, state, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (name) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
            )
            .map_err(backend)?;
        for r in records {
            stmt.execute(params![r.name, r.state, ms(r.updated_at)])
                .map_err(backend)?;
        }
    }
    tx.commit()
}

pub fn holds_share(c: &mut Connection, holds: &[SharedHold]) -> StoreResult<()> {
    let tx = Sp::begin(c)?;
    {
        // Each half only lengthens: the later instant wins, with its reason.
        let mut stmt = tx
            .prepare_cached(
                "INSERT INTO endpoint_holds (name, paused_until, pause_reason, breaker_until, breaker_reason, paced_until) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (name) DO UPDATE SET \
                 pause_reason = CASE WHEN excluded.paused_until > COALESCE(paused_until, -1) \
                     THEN excluded.pause_reason ELSE pause_reason END, \
                 paused_until = MAX(COALESCE(paused_until, -1), COALESCE(excluded.paused_until, -1)), \
                 breaker_reason = CASE WHEN excluded.breaker_until > COALESCE(breaker_until, -1) \
                     THEN excluded.breaker_reason ELSE breaker_reason END, \
                 breaker_until = MAX(COALESCE(breaker_until, -1), COALESCE(excluded.breaker_until, -1)), \
                 paced_until = MAX(COALESCE(paced_until, -1), COALESCE(excluded.paced_until, -1))",
            )
            .map_err(backend)?;
        for h in holds {
            stmt.execute(params![
                h.endpoint,
                h.paused_until.map(ms),
                h.pause_reason,
                h.breaker_until.map(ms),
                h.breaker_reason,
                h.paced_until.map(ms)
            ])
            .map_err(backend)?;
        }
    }
    tx.commit()
}

pub fn holds_load(c: &mut Connection, now: Timestamp) -> StoreResult<Vec<SharedHold>> {
    let now = ms(now);
    query_rows(
        c,
        "SELECT name, paused_until, pause_reason, breaker_until, breaker_reason, paced_until \
         FROM endpoint_holds \
         WHERE paused_until > ?1 OR breaker_until > ?1 OR paced_until > ?1 ORDER BY name",
        [now],
        |r| {
            let pause: Option<i64> = r.get::<_, Option<i64>>(1)?.filter(|t| *t > now);
            let breaker: Option<i64> = r.get::<_, Option<i64>>(3)?.filter(|t| *t > now);
            let paced: Option<i64> = r.get::<_, Option<i64>>(5)?.filter(|t| *t > now);
            Ok(SharedHold {
                endpoint: r.get(0)?,
                paused_until: ts(pause),
                pause_reason: if pause.is_some() { r.get(2)? } else { None },
                breaker_until: ts(breaker),
                breaker_reason: if breaker.is_some() { r.get(4)? } else { None },
                paced_until: ts(paced),
            })
        },
    )
}

pub fn holds_clear(c: &mut Connection, name: &str, pause: bool, breaker: bool) -> StoreResult<()> {
    c.execute(
        "UPDATE endpoint_holds SET \
         paused_until = CASE WHEN ?2 THEN NULL ELSE paused_until END, \
         pause_reason = CASE WHEN ?2 THEN NULL ELSE pause_reason END, \
         breaker_until = CASE WHEN ?3 THEN NULL ELSE breaker_until END, \
         breaker_reason = CASE WHEN ?3 THEN NULL ELSE breaker_reason END \
         WHERE name = ?1",
        params![name, pause, breaker],
    )
    .map(|_| ())
    .map_err(backend)
}

/// The two statements of a deadlines read for the waiting jobs of `$scope` (its parameters
/// from `?3`): whether one of them has a deadline, a look through `$any` (`INDEXED BY` the index
/// that finds it soonest), so that a scope whose jobs have none is not read through; then those
/// with one, in start order (through `$read`), with how many go before each (`?1` now, `?2` the
/// limit).
macro_rules! deadlines_of {
    ($any:literal, $read:literal, $scope:literal) => {
        (
            concat!(
                "SELECT EXISTS (SELECT 1 FROM jobs ",
                $any,
                " WHERE deadline IS NOT NULL AND ",
                waiting!(),
                " AND ",
                $scope,
                ")"
            ),
            concat!(
                "SELECT ahead, run_at, deadline FROM (SELECT run_at, deadline, \
                 row_number() OVER (ORDER BY max(run_at, ?1), priority DESC, run_at, seq) - 1 \
                 AS ahead FROM jobs ",
                $read,
                " WHERE ",
                $scope,
                " AND ",
                waiting!(),
                ") WHERE deadline IS NOT NULL ORDER BY ahead LIMIT ?2"
            ),
        )
    };
}

/// An endpoint's waiting jobs with a deadline and how many go before each
/// ([`redial_store::Store::endpoint_deadlines`]).
pub fn endpoint_deadlines(
    c: &mut Connection,
    name: &str,
    now: Timestamp,
    limit: u32,
) -> StoreResult<Vec<WaitingDeadline>> {
    // An endpoint's jobs are found by the index of jobs with a deadline: few, as a rule.
    let sql = deadlines_of!("INDEXED BY jobs_waiting_deadline", "", "endpoint = ?3");
    deadlines(c, sql, &[&name], now, limit)
}

/// A group's waiting jobs with a deadline and how many go before each
/// ([`redial_store::Store::group_deadlines`]): those in the group's index (`jobs_grouped`), so
/// the jobs waiting behind their ordering key's head are left out; a listing of the queue's
/// groups reads each group once, not the queue once per group.
pub fn group_deadlines(
    c: &mut Connection,
    queue: &str,
    group: &str,
    now: Timestamp,
    limit: u32,
) -> StoreResult<Vec<WaitingDeadline>> {
    let sql = deadlines_of!(
        "INDEXED BY jobs_grouped",
        "INDEXED BY jobs_grouped",
        "queue = ?3 AND grp = ?4 AND grp IS NOT NULL AND ord_wait = 0"
    );
    deadlines(c, sql, &[&queue, &group], now, limit)
}

fn deadlines(
    c: &mut Connection,
    (any, read): (&str, &str),
    scope: &[&dyn rusqlite::ToSql],
    now: Timestamp,
    limit: u32,
) -> StoreResult<Vec<WaitingDeadline>> {
    let (now, limit) = (ms(now), i64::from(limit));
    let mut all: Vec<&dyn rusqlite::ToSql> = vec![&now, &limit];
    all.extend_from_slice(scope);
    // The look in the index takes the scope's parameters at ?3 on: the first two are bound too,
    // unused, so that the numbers match.
    let any: bool = c
        .prepare_cached(any)
        .map_err(backend)?
        .query_row(rusqlite::params_from_iter(all.iter().copied()), |r| {
            r.get(0)
        })
        .map_err(backend)?;
    if !any {
        return Ok(Vec::new());
    }
    let mut stmt = c.prepare_cached(read).map_err(backend)?;
    let rows = stmt
        .query_map(rusqlite::params_from_iter(all.iter().copied()), |r| {
            Ok(WaitingDeadline {
                ahead: r.get::<_, i64>(0)?.max(0) as u64,
                run_at: Timestamp::from_unix_millis(r.get(1)?),
                deadline: Timestamp::from_unix_millis(r.get(2)?),
            })
        })
        .map_err(backend)?;
    rows.collect::<Result<_, _>>().map_err(backend)
}

pub fn endpoint_saved(c: &mut Connection, name: &str) -> StoreResult<bool> {
    c.prepare_cached("SELECT EXISTS (SELECT 1 FROM endpoints WHERE name = ?1)")
        .map_err(backend)?
        .query_row([name], |r| r.get(0))
        .map_err(backend)
}

pub fn endpoint_forget(c: &mut Connection, names: &[String]) -> StoreResult<()> {
    let tx = Sp::begin(c)?;
    for name in names {
        for sql in [
            "DELETE FROM endpoints WHERE name = ?1",
            "DELETE FROM endpoint_holds WHERE name = ?1",
            "DELETE FROM controls WHERE kind = 'endpoint' AND name = ?1",
        ] {
            tx.execute(sql, [name]).map_err(backend)?;
        }
    }
    tx.commit()
}

/// A control from its row (kind, name, paused_since, paused_until, pause_reason, resumed_at,
/// breaker_reset_at).
fn control_row(r: &rusqlite::Row) -> rusqlite::Result<StoreResult<Control>> {
    Ok(control(
        &r.get::<_, String>(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

pub fn control_get(
    c: &mut Connection,
    kind: ControlKind,
    name: &str,
) -> StoreResult<Option<Control>> {
    query_rows(
        c,
        "SELECT kind, name, paused_since, paused_until, pause_reason, resumed_at, breaker_reset_at \
         FROM controls WHERE kind = ?1 AND name = ?2",
        params![kind.as_str(), name],
        control_row,
    )?
    .into_iter()
    .next()
    .transpose()
}

pub fn controls_load(c: &mut Connection) -> StoreResult<Vec<Control>> {
    query_rows(
        c,
        "SELECT kind, name, paused_since, paused_until, pause_reason, resumed_at, breaker_reset_at \
         FROM controls ORDER BY kind, name",
        [],
        control_row,
    )?
    .into_iter()
    .collect()
}

pub fn control_save(c: &mut Connection, control: &Control) -> StoreResult<()> {
    let pause = control.pause.as_ref();
    c.execute(
        "INSERT INTO controls (kind, name, paused_since, paused_until, pause_reason, resumed_at, breaker_reset_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (kind, name) DO UPDATE SET \
         paused_since = excluded.paused_since, paused_until = excluded.paused_until, \
         pause_reason = excluded.pause_reason, resumed_at = excluded.resumed_at, \
         breaker_reset_at = excluded.breaker_reset_at",
        params![
            control.kind.as_str(),
            control.name,
            pause.map(|p| ms(p.since)),
            pause.and_then(|p| p.until).map(ms),
            pause.map(|p| p.reason.as_str()),
            control.resumed_at.map(ms),
            control.breaker_reset_at.map(ms)
        ],
    )
    .map(|_| ())
    .map_err(backend)
}
