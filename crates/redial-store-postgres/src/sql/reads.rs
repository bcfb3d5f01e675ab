//! Reads for people: stats, dead letters over time and by group, a queue's groups.

use super::jobs::{push_conditions, refs};
use super::{cols, get, job_from_row, ms, ts};
use crate::{backend, Conn};
use redial_policy::Timestamp;
use redial_store::{
    parse_dead_category, DeadCount, DeadGroup, DeadReason, EndpointCount, GroupCounts, JobFilter,
    JobState, KeyLine, OrderingKey, OrderingKeysParams, QueueCount, QueueSince, Stats, StoreError,
    StoreResult,
};
use tokio_postgres::types::ToSql;

/// [`redial_store::Store::group_counts`]: the waiting and the running ones in one read (a
/// leased job's row says `ready` with an owner: schema migration 19).
pub async fn group_counts(c: &mut Conn, queue: &str, limit: u32) -> StoreResult<GroupCounts> {
    const COUNTS: &str = "SELECT grp, COUNT(*) FILTER (WHERE lease_owner IS NULL), \
         COUNT(*) FILTER (WHERE lease_owner IS NOT NULL) FROM jobs WHERE queue = $1 \
         AND grp IS NOT NULL AND state IN ('ready', 'scheduled', 'deferred') GROUP BY grp";
    let rows = c.client.query(COUNTS, &[&queue]).await.map_err(backend)?;
    let count = |r: &tokio_postgres::Row, i: usize| {
        StoreResult::Ok(u64::try_from(get::<i64>(r, i)?).unwrap_or(0))
    };
    let mut waiting = Vec::with_capacity(rows.len());
    let mut running = Vec::new();
    for r in &rows {
        let grp: String = get(r, 0)?;
        let (w, n) = (count(r, 1)?, count(r, 2)?);
        if n > 0 {
            running.push((grp.clone(), n));
        }
        if w > 0 {
            waiting.push((grp, w));
        }
    }
    Ok(GroupCounts::from_parts(waiting, running, limit))
}

/// In its ordering key's line: the condition of `jobs_in_line` (migration 15).
const IN_LINE: &str = "oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip))";

/// [`redial_store::Store::ordering_keys`]: the heads off `jobs_in_line` (its entries with `ord_wait` false), in the order of
/// their lines' numbers ([`OrderingKey::line`]), each line counted off `jobs_in_line`.
pub async fn ordering_keys(c: &mut Conn, p: &OrderingKeysParams) -> StoreResult<Vec<KeyLine>> {
    static HEADS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            concat!(
                "SELECT ",
                cols!(),
                " FROM jobs WHERE queue = $1 AND NOT ord_wait AND {} \
                 AND ($2::bigint IS NULL OR oline > $2) AND (NOT $3 OR state = 'dead') \
                 ORDER BY oline, seq LIMIT $4"
            ),
            IN_LINE
        )
    });
    static LINE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT COUNT(*) FROM jobs WHERE oline = $3 AND queue = $1 AND okey = $2 AND {IN_LINE}"
        )
    });
    let after = p.after.as_deref().map(|k| OrderingKey::line(&p.queue, k));
    let rows = c
        .client
        .query(
            HEADS.as_str(),
            &[&p.queue, &after, &p.blocked, &i64::from(p.limit)],
        )
        .await
        .map_err(backend)?;
    let mut lines: Vec<KeyLine> = Vec::with_capacity(rows.len());
    for r in &rows {
        let head = job_from_row(r)?;
        let Some(key) = head.ordering.as_ref().map(|o| o.key.clone()) else {
            continue;
        };
        // Two heads of one key only for a moment inside a write: the first one stands.
        if lines.last().is_some_and(|l| l.key == key) {
            continue;
        }
        let n: i64 = get(
            &c.client
                .query_one(
                    LINE.as_str(),
                    &[&p.queue, &key, &OrderingKey::line(&p.queue, &key)],
                )
                .await
                .map_err(backend)?,
            0,
        )?;
        lines.push(KeyLine {
            key,
            head,
            behind: u64::try_from(n - 1).unwrap_or(0),
        });
    }
    Ok(lines)
}

pub(super) fn parse_state(s: &str) -> StoreResult<JobState> {
    s.parse()
        .map_err(|e: String| StoreError::Backend(format!("corrupt state in the database: {e}")))
}

/// The counts in one pass over the jobs (it was three: by queue, by endpoint, and the oldest
/// deferred job per queue), folded here.
pub async fn stats(c: &mut Conn) -> StoreResult<Stats> {
    use std::collections::BTreeMap;
    let rows = c
        .client
        .query(
            // A leased job's row says `ready` with an owner (schema migration 19).
            "SELECT queue, endpoint, CASE WHEN state = 'ready' AND lease_owner IS NOT NULL \
               THEN 'running' ELSE state END AS st, category, COUNT(*), \
               MIN(updated_at) FILTER (WHERE state = 'deferred') \
             FROM jobs GROUP BY queue, endpoint, st, category",
            &[],
        )
        .await
        .map_err(backend)?;
    // Sorted by name (bytes, whatever the database's collation, as SQLite's counts are), then
    // state, then category with jobs without one last.
    let mut by_queue: BTreeMap<(String, String, (bool, String)), u64> = BTreeMap::new();
    let mut by_endpoint: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut oldest: BTreeMap<String, i64> = BTreeMap::new();
    for r in &rows {
        let queue: String = get(r, 0)?;
        let endpoint: String = get(r, 1)?;
        let state: String = get(r, 2)?;
        let category: Option<String> = get(r, 3)?;
        let count = get::<i64>(r, 4)?.max(0) as u64;
        let category = (category.is_none(), category.unwrap_or_default());
        *by_queue
            .entry((queue.clone(), state.clone(), category))
            .or_default() += count;
        *by_endpoint.entry((endpoint, state)).or_default() += count;
        if let Some(since) = get::<Option<i64>>(r, 5)? {
            let at = oldest.entry(queue).or_insert(since);
            *at = (*at).min(since);
        }
    }
    let by_queue = by_queue
        .into_iter()
        .map(|((queue, state, (_, category)), count)| {
            Ok(QueueCount {
                queue,
                state: parse_state(&state)?,
                category: parse_dead_category(&category).ok(),
                count,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    let by_endpoint = by_endpoint
        .into_iter()
        .map(|((endpoint, state), count)| {
            Ok(EndpointCount {
                endpoint,
                state: parse_state(&state)?,
                count,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    let oldest_deferred = oldest
        .into_iter()
        .map(|(queue, since)| QueueSince {
            queue,
            since: Timestamp::from_unix_millis(since),
        })
        .collect();
    Ok(Stats {
        by_queue,
        by_endpoint,
        oldest_deferred,
    })
}

/// [`redial_store::Store::dead_letter_chunk_end`]: by `jobs_dead`, in its order.
pub async fn dead_letter_chunk_end(
    c: &mut Conn,
    f: &JobFilter,
    limit: u32,
) -> StoreResult<Option<i64>> {
    let mut sql = "SELECT MAX(seq) FROM (SELECT seq FROM jobs WHERE state = 'dead'".to_owned();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    push_conditions(&mut sql, &mut params, f.conditions());
    params.push(Box::new(i64::from(limit.max(1))));
    sql.push_str(&format!(" ORDER BY seq LIMIT ${}) chunk", params.len()));
    let row = c
        .client
        .query_one(&sql, &refs(&params))
        .await
        .map_err(backend)?;
    get(&row, 0)
}

/// [`redial_store::Store::dead_letter_reasons`]: the matching dead letters read by `jobs_dead`.
pub async fn dead_letter_reasons(c: &mut Conn, f: &JobFilter) -> StoreResult<Vec<DeadReason>> {
    let mut sql = "SELECT last_reason, COUNT(*), MIN(finished_at), MAX(finished_at) FROM jobs \
         WHERE state = 'dead' AND last_reason IS NOT NULL"
        .to_owned();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    push_conditions(&mut sql, &mut params, f.conditions());
    sql.push_str(" GROUP BY last_reason");
    let rows = c
        .client
        .query(&sql, &refs(&params))
        .await
        .map_err(backend)?;
    rows.iter()
        .map(|r| {
            Ok(DeadReason {
                reason: get(r, 0)?,
                count: get::<i64>(r, 1)?.max(0) as u64,
                first: ts(get(r, 2)?).unwrap_or(Timestamp::EPOCH),
                last: ts(get(r, 3)?).unwrap_or(Timestamp::EPOCH),
            })
        })
        .collect()
}

pub async fn dead_letter_groups(c: &mut Conn, f: &JobFilter) -> StoreResult<Vec<DeadGroup>> {
    let mut sql =
        "SELECT queue, category, endpoint, COUNT(*), MIN(finished_at), MAX(finished_at), \
                   MAX(last_reason) FROM jobs WHERE state = 'dead'"
            .to_owned();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    push_conditions(&mut sql, &mut params, f.conditions());
    sql.push_str(" GROUP BY queue, category, endpoint ORDER BY 4 DESC, 1, 3");
    let rows = c
        .client
        .query(&sql, &refs(&params))
        .await
        .map_err(backend)?;
    let mut out = Vec::new();
    for r in &rows {
        let category: Option<String> = get(r, 1)?;
        let Some(category) = category
            .as_deref()
            .and_then(|c| parse_dead_category(c).ok())
        else {
            continue;
        };
        out.push(DeadGroup {
            queue: get(r, 0)?,
            category,
            endpoint: get(r, 2)?,
            count: get::<i64>(r, 3)?.max(0) as u64,
            first: ts(get(r, 4)?).unwrap_or(Timestamp::EPOCH),
            last: ts(get(r, 5)?).unwrap_or(Timestamp::EPOCH),
            reason: get(r, 6)?,
        });
    }
    Ok(out)
}

pub async fn dead_letters_since(c: &mut Conn, since: Timestamp) -> StoreResult<Vec<DeadCount>> {
    let rows = c
        .client
        .query(
            "SELECT queue, category, COUNT(*) FROM jobs WHERE state = 'dead' AND finished_at >= $1 \
             GROUP BY queue, category ORDER BY queue, category",
            &[&ms(since)],
        )
        .await
        .map_err(backend)?;
    let mut out = Vec::new();
    for r in &rows {
        let category: Option<String> = get(r, 1)?;
        if let Some(category) = category
            .as_deref()
            .and_then(|c| parse_dead_category(c).ok())
        {
            out.push(DeadCount {
                queue: get(r, 0)?,
                category,
                count: get::<i64>(r, 2)?.max(0) as u64,
            });
        }
    }
    Ok(out)
}
