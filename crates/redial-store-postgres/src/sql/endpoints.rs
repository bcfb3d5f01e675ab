//! Endpoints and controls: backlog, saved endpoint state, shared holds, hand pauses.

use super::{get, ms, notify, ts, ENDPOINTS_CHANGED, WAITING};
use crate::{backend, Conn};
use redial_policy::endpoint::WaitingDeadline;
use redial_policy::Timestamp;
use redial_store::{
    control, Control, ControlKind, EndpointBacklog, EndpointRecord, RetriesNowParams, SharedHold,
    StoreResult,
};

pub async fn endpoint_backlog(c: &mut Conn, now: Timestamp) -> StoreResult<Vec<EndpointBacklog>> {
    let rows = c
        .client
        .query(
            &format!(
                "SELECT endpoint, COUNT(*) FILTER (WHERE run_at <= $1), \
                 COUNT(*) FILTER (WHERE run_at > $1) FROM jobs WHERE {WAITING} \
                 GROUP BY endpoint ORDER BY endpoint"
            ),
            &[&ms(now)],
        )
        .await
        .map_err(backend)?;
    rows.iter()
        .map(|r| {
            Ok(EndpointBacklog {
                endpoint: get(r, 0)?,
                due: get::<i64>(r, 1)?.max(0) as u64,
                later: get::<i64>(r, 2)?.max(0) as u64,
            })
        })
        .collect()
}

/// Scheduled retries of the endpoint, failed since `since`, are due now; the nodes are told.
pub async fn retries_now(c: &mut Conn, channel: &str, p: &RetriesNowParams) -> StoreResult<u64> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let n = tx
        .execute(
            "UPDATE jobs SET run_at = $3 \
             WHERE endpoint = $1 AND state = 'scheduled' AND attempts > 0 AND run_at > $3 \
             AND updated_at >= $2",
            &[&p.endpoint, &ms(p.since), &ms(p.now)],
        )
        .await
        .map_err(backend)?;
    if n > 0 {
        notify(&tx, channel, "").await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(n)
}

pub async fn endpoint_load(c: &mut Conn) -> StoreResult<Vec<EndpointRecord>> {
    let rows = c
        .client
        .query(
            "SELECT name, state, updated_at FROM endpoints ORDER BY name",
            &[],
        )
        .await
        .map_err(backend)?;
    rows.iter()
        .map(|r| {
            Ok(EndpointRecord {
                name: get(r, 0)?,
                state: get(r, 1)?,
                updated_at: Timestamp::from_unix_millis(get(r, 2)?),
            })
        })
        .collect()
}

pub async fn endpoint_save(c: &mut Conn, records: &[EndpointRecord]) -> StoreResult<()> {
    let tx = c.client.transaction().await.map_err(backend)?;
    for r in records {
        tx.execute(
            "INSERT INTO endpoints (name, state, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
            &[&r.name, &r.state, &ms(r.updated_at)],
        )
        .await
        .map_err(backend)?;
    }
    tx.commit().await.map_err(backend)
}

pub async fn holds_share(c: &mut Conn, channel: &str, holds: &[SharedHold]) -> StoreResult<()> {
    let tx = c.client.transaction().await.map_err(backend)?;
    for h in holds {
        // Each half only lengthens: the later instant wins, with its reason.
        tx.execute(
            "INSERT INTO endpoint_holds AS h \
             (name, paused_until, pause_reason, breaker_until, breaker_reason, paced_until) \
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO UPDATE SET \
             pause_reason = CASE WHEN excluded.paused_until > COALESCE(h.paused_until, -1) \
                 THEN excluded.pause_reason ELSE h.pause_reason END, \
             paused_until = GREATEST(COALESCE(h.paused_until, -1), COALESCE(excluded.paused_until, -1)), \
             breaker_reason = CASE WHEN excluded.breaker_until > COALESCE(h.breaker_until, -1) \
                 THEN excluded.breaker_reason ELSE h.breaker_reason END, \
             breaker_until = GREATEST(COALESCE(h.breaker_until, -1), COALESCE(excluded.breaker_until, -1)), \
             paced_until = GREATEST(COALESCE(h.paced_until, -1), COALESCE(excluded.paced_until, -1))",
            &[
                &h.endpoint,
                &h.paused_until.map(ms),
                &h.pause_reason,
                &h.breaker_until.map(ms),
                &h.breaker_reason,
                &h.paced_until.map(ms),
            ],
        )
        .await
        .map_err(backend)?;
    }
    if !holds.is_empty() {
        notify(&tx, channel, ENDPOINTS_CHANGED).await?;
    }
    tx.commit().await.map_err(backend)
}

pub async fn holds_load(c: &mut Conn, now: Timestamp) -> StoreResult<Vec<SharedHold>> {
    let now = ms(now);
    let rows = c
        .client
        .query(
            "SELECT name, paused_until, pause_reason, breaker_until, breaker_reason, paced_until \
             FROM endpoint_holds \
             WHERE paused_until > $1 OR breaker_until > $1 OR paced_until > $1 ORDER BY name",
            &[&now],
        )
        .await
        .map_err(backend)?;
    rows.iter()
        .map(|r| {
            let pause = get::<Option<i64>>(r, 1)?.filter(|t| *t > now);
            let breaker = get::<Option<i64>>(r, 3)?.filter(|t| *t > now);
            let paced = get::<Option<i64>>(r, 5)?.filter(|t| *t > now);
            Ok(SharedHold {
                endpoint: get(r, 0)?,
                paused_until: ts(pause),
                pause_reason: if pause.is_some() { get(r, 2)? } else { None },
                breaker_until: ts(breaker),
                breaker_reason: if breaker.is_some() { get(r, 4)? } else { None },
                paced_until: ts(paced),
            })
        })
        .collect()
}

pub async fn holds_clear(
    c: &mut Conn,
    channel: &str,
    name: &str,
    pause: bool,
    breaker: bool,
) -> StoreResult<()> {
    let tx = c.client.transaction().await.map_err(backend)?;
    tx.execute(
        "UPDATE endpoint_holds SET \
         paused_until = CASE WHEN $2 THEN NULL ELSE paused_until END, \
         pause_reason = CASE WHEN $2 THEN NULL ELSE pause_reason END, \
         breaker_until = CASE WHEN $3 THEN NULL ELSE breaker_until END, \
         breaker_reason = CASE WHEN $3 THEN NULL ELSE breaker_reason END \
         WHERE name = $1",
        &[&name, &pause, &breaker],
    )
    .await
    .map_err(backend)?;
    notify(&tx, channel, ENDPOINTS_CHANGED).await?;
    tx.commit().await.map_err(backend)
}

pub async fn endpoint_backlog_of(
    c: &mut Conn,
    name: &str,
    now: Timestamp,
) -> StoreResult<EndpointBacklog> {
    let row = c
        .client
        .query_one(
            &format!(
                "SELECT COUNT(*) FILTER (WHERE run_at <= $2), COUNT(*) FILTER (WHERE run_at > $2) \
                 FROM jobs WHERE endpoint = $1 AND {WAITING}"
            ),
            &[&name, &ms(now)],
        )
        .await
        .map_err(backend)?;
    Ok(EndpointBacklog {
        endpoint: name.to_owned(),
        due: get::<i64>(&row, 0)?.max(0) as u64,
        later: get::<i64>(&row, 1)?.max(0) as u64,
    })
}

/// An endpoint's waiting jobs with a deadline and how many go before each
/// ([`redial_store::Store::endpoint_deadlines`]).
pub async fn endpoint_deadlines(
    c: &mut Conn,
    name: &str,
    now: Timestamp,
    limit: u32,
) -> StoreResult<Vec<WaitingDeadline>> {
    deadlines(c, "endpoint = $3", &[&name], now, limit).await
}

/// A group's waiting jobs with a deadline and how many go before each
/// ([`redial_store::Store::group_deadlines`]): those in the group's index (`jobs_grouped`), so
/// the jobs waiting behind their ordering key's head are left out.
pub async fn group_deadlines(
    c: &mut Conn,
    queue: &str,
    group: &str,
    now: Timestamp,
    limit: u32,
) -> StoreResult<Vec<WaitingDeadline>> {
    let scope = "queue = $3 AND grp = $4 AND grp IS NOT NULL AND NOT ord_wait";
    deadlines(c, scope, &[&queue, &group], now, limit).await
}

/// The waiting jobs of `scope` (its parameters from `$3`) with a deadline, in start order, with
/// how many go before each; none read through when none has a deadline.
async fn deadlines(
    c: &mut Conn,
    scope: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    now: Timestamp,
    limit: u32,
) -> StoreResult<Vec<WaitingDeadline>> {
    let (now, limit) = (ms(now), i64::from(limit));
    let mut all: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![&now, &limit];
    all.extend_from_slice(params);
    let rows = c
        .client
        .query(
            &format!(
                "SELECT ahead, run_at, deadline FROM (SELECT run_at, deadline, \
                 row_number() OVER (ORDER BY GREATEST(run_at, $1), priority DESC, run_at, seq) - 1 \
                 AS ahead FROM jobs WHERE {scope} AND {WAITING} AND EXISTS (SELECT 1 FROM jobs \
                 WHERE deadline IS NOT NULL AND {WAITING} AND {scope})) w \
                 WHERE deadline IS NOT NULL ORDER BY ahead LIMIT $2"
            ),
            &all,
        )
        .await
        .map_err(backend)?;
    rows.iter()
        .map(|r| {
            Ok(WaitingDeadline {
                ahead: get::<i64>(r, 0)?.max(0) as u64,
                run_at: Timestamp::from_unix_millis(get(r, 1)?),
                deadline: Timestamp::from_unix_millis(get(r, 2)?),
            })
        })
        .collect()
}

pub async fn endpoint_saved(c: &mut Conn, name: &str) -> StoreResult<bool> {
    let row = c
        .client
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM endpoints WHERE name = $1)",
            &[&name],
        )
        .await
        .map_err(backend)?;
    get(&row, 0)
}

/// Forgets endpoints' saved state, shared holds and controls; the other nodes are told.
pub async fn endpoint_forget(c: &mut Conn, channel: &str, names: &[String]) -> StoreResult<()> {
    let tx = c.client.transaction().await.map_err(backend)?;
    for sql in [
        "DELETE FROM endpoints WHERE name = ANY($1)",
        "DELETE FROM endpoint_holds WHERE name = ANY($1)",
        "DELETE FROM controls WHERE kind = 'endpoint' AND name = ANY($1)",
    ] {
        tx.execute(sql, &[&names]).await.map_err(backend)?;
    }
    notify(&tx, channel, ENDPOINTS_CHANGED).await?;
    tx.commit().await.map_err(backend)
}

pub async fn control_get(
    c: &mut Conn,
    kind: ControlKind,
    name: &str,
) -> StoreResult<Option<Control>> {
    let row = c
        .client
        .query_opt(
            "SELECT kind, name, paused_since, paused_until, pause_reason, resumed_at, breaker_reset_at \
             FROM controls WHERE kind = $1 AND name = $2",
            &[&kind.as_str(), &name],
        )
        .await
        .map_err(backend)?;
    row.map(|r| {
        control(
            &get::<String>(&r, 0)?,
            get(&r, 1)?,
            get(&r, 2)?,
            get(&r, 3)?,
            get(&r, 4)?,
            get(&r, 5)?,
            get(&r, 6)?,
        )
    })
    .transpose()
}

pub async fn controls_load(c: &mut Conn) -> StoreResult<Vec<Control>> {
    let rows = c
        .client
        .query(
            "SELECT kind, name, paused_since, paused_until, pause_reason, resumed_at, breaker_reset_at \
             FROM controls ORDER BY kind, name",
            &[],
        )
        .await
        .map_err(backend)?;
    rows.iter()
        .map(|r| {
            control(
                &get::<String>(r, 0)?,
                get(r, 1)?,
                get(r, 2)?,
                get(r, 3)?,
                get(r, 4)?,
                get(r, 5)?,
                get(r, 6)?,
            )
        })
        .collect()
}

/// Saves a control and tells the other nodes (their share loops read the controls again).
pub async fn control_save(c: &mut Conn, channel: &str, control: &Control) -> StoreResult<()> {
    let pause = control.pause.as_ref();
    let tx = c.client.transaction().await.map_err(backend)?;
    tx.execute(
        "INSERT INTO controls (kind, name, paused_since, paused_until, pause_reason, resumed_at, breaker_reset_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (kind, name) DO UPDATE SET \
         paused_since = excluded.paused_since, paused_until = excluded.paused_until, \
         pause_reason = excluded.pause_reason, resumed_at = excluded.resumed_at, \
         breaker_reset_at = excluded.breaker_reset_at",
        &[
            &control.kind.as_str(),
            &control.name,
            &pause.map(|p| ms(p.since)),
            &pause.and_then(|p| p.until).map(ms),
            &pause.map(|p| p.reason.as_str()),
            &control.resumed_at.map(ms),
            &control.breaker_reset_at.map(ms),
        ],
    )
    .await
    .map_err(backend)?;
    notify(&tx, channel, ENDPOINTS_CHANGED).await?;
    tx.commit().await.map_err(backend)
}
