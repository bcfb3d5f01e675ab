//! Reads for people: stats, dead letters over time and by group, a queue's groups.

use super::jobs::push_conditions;
use super::{backend, ms, query_rows, raw_from_row, ts, COLS};
use crate::counts;
use redial_policy::{DeadCategory, Timestamp};
use redial_store::{
    parse_dead_category, DeadCount, DeadGroup, DeadReason, EndpointCount, GroupCounts, JobFilter,
    JobState, KeyLine, OrderingKey, OrderingKeysParams, QueueCount, QueueSince, Stats, StoreResult,
};
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension};

/// Counts from the kept counts; when each queue's longest-deferred job was deferred by index,
/// one seek per queue that has deferred jobs.
pub fn stats(c: &mut Connection, counts: &counts::Shared) -> StoreResult<Stats> {
    let mut by_queue: std::collections::BTreeMap<(String, &str, Option<&str>), QueueCount> =
        Default::default();
    let mut by_endpoint: std::collections::BTreeMap<(String, &str), EndpointCount> =
        Default::default();
    for key in counts::lock(counts).counts() {
        let n = key.n;
        by_queue
            .entry((
                key.queue.to_string(),
                key.state.as_str(),
                key.category.map(|c| c.as_str()),
            ))
            .or_insert_with(|| QueueCount {
                queue: key.queue.to_string(),
                state: key.state,
                category: key.category,
                count: 0,
            })
            .count += n;
        by_endpoint
            .entry((key.endpoint.to_string(), key.state.as_str()))
            .or_insert_with(|| EndpointCount {
                endpoint: key.endpoint.to_string(),
                state: key.state,
                count: 0,
            })
            .count += n;
    }
    let by_queue: Vec<QueueCount> = by_queue.into_values().collect();
    let mut oldest_deferred = Vec::new();
    let mut deferred: Vec<&str> = by_queue
        .iter()
        .filter(|q| q.state == JobState::Deferred)
        .map(|q| q.queue.as_str())
        .collect();
    deferred.dedup();
    let mut stmt = c
        .prepare_cached(
            "SELECT MIN(updated_at) FROM jobs INDEXED BY jobs_deferred \
             WHERE state = 'deferred' AND queue = ?1",
        )
        .map_err(backend)?;
    for queue in deferred {
        let since: Option<i64> = stmt.query_row([queue], |r| r.get(0)).map_err(backend)?;
        if let Some(since) = since {
            oldest_deferred.push(QueueSince {
                queue: queue.to_owned(),
                since: Timestamp::from_unix_millis(since),
            });
        }
    }
    Ok(Stats {
        by_queue,
        by_endpoint: by_endpoint.into_values().collect(),
        oldest_deferred,
    })
}

pub fn dead_letters_since(c: &mut Connection, since: Timestamp) -> StoreResult<Vec<DeadCount>> {
    // Spelled so that SQLite can read `jobs_finished` from `since` on.
    let rows = query_rows(
        c,
        "SELECT queue, category, COUNT(*) FROM jobs INDEXED BY jobs_finished \
         WHERE (state = 'completed' OR state = 'dead' OR state = 'cancelled') AND state = 'dead' \
         AND finished_at >= ?1 GROUP BY queue, category ORDER BY queue, category",
        [ms(since)],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, i64>(2)?,
            ))
        },
    )?;
    Ok(rows
        .into_iter()
        .filter_map(|(queue, category, count)| {
            Some(DeadCount {
                queue,
                category: parse_dead_category(category.as_deref()?).ok()?,
                count: count.max(0) as u64,
            })
        })
        .collect())
}

/// Without a time range, the groups and their sizes come from the kept counts, and each
/// group's first and last death and latest reason from two seeks in `jobs_dead_groups`: the
/// cost follows the number of groups, not of dead letters. With one, the matching dead letters
/// are read by `jobs_dead`.
pub fn dead_letter_groups(
    c: &mut Connection,
    f: &JobFilter,
    counts: &counts::Shared,
) -> StoreResult<Vec<DeadGroup>> {
    // The kept counts know queues, endpoints and categories only (no time, no reason, no key,
    // no tag, no place in the table).
    let counted = JobFilter {
        queue: f.queue.clone(),
        endpoint: f.endpoint.clone(),
        category: f.category,
        state: f.state,
        ..JobFilter::default()
    };
    if *f != counted {
        return dead_letter_groups_read(c, f);
    }
    let mut groups: Vec<(String, DeadCategory, String, u64)> = counts::lock(counts)
        .counts()
        .filter(|k| {
            k.state == JobState::Dead
                && f.queue.as_deref().is_none_or(|q| q == &*k.queue)
                && f.endpoint.as_deref().is_none_or(|e| e == &*k.endpoint)
                && f.category.is_none_or(|c| Some(c) == k.category)
        })
        .filter_map(|k| {
            Some((
                k.queue.to_string(),
                k.category?,
                k.endpoint.to_string(),
                k.n,
            ))
        })
        .collect();
    groups.sort_by(|a, b| b.3.cmp(&a.3).then_with(|| (&a.0, &a.2).cmp(&(&b.0, &b.2))));
    const END: &str = "SELECT finished_at, last_reason FROM jobs INDEXED BY jobs_dead_groups \
         WHERE state = 'dead' AND queue = ?1 AND category = ?2 AND endpoint = ?3 \
         ORDER BY finished_at";
    let mut first = c
        .prepare_cached(&format!("{END} LIMIT 1"))
        .map_err(backend)?;
    let mut last = c
        .prepare_cached(&format!("{END} DESC LIMIT 1"))
        .map_err(backend)?;
    let mut out = Vec::with_capacity(groups.len());
    for (queue, category, endpoint, count) in groups {
        let end = |stmt: &mut rusqlite::CachedStatement<'_>| {
            stmt.query_row(params![queue, category.as_str(), endpoint], |r| {
                Ok((r.get::<_, Option<i64>>(0)?, r.get::<_, Option<String>>(1)?))
            })
            .optional()
            .map_err(backend)
        };
        let (Some((started, _)), Some((ended, reason))) = (end(&mut first)?, end(&mut last)?)
        else {
            // Gone since the counts were read.
            continue;
        };
        out.push(DeadGroup {
            queue,
            category,
            endpoint,
            count,
            first: ts(started).unwrap_or(Timestamp::EPOCH),
            last: ts(ended).unwrap_or(Timestamp::EPOCH),
            reason,
        });
    }
    Ok(out)
}

pub(super) fn dead_letter_groups_read(
    c: &mut Connection,
    f: &JobFilter,
) -> StoreResult<Vec<DeadGroup>> {
    let mut sql =
        "SELECT queue, category, endpoint, COUNT(*), MIN(finished_at), MAX(finished_at), \
                   MAX(last_reason) FROM jobs INDEXED BY jobs_dead WHERE state = 'dead'"
            .to_owned();
    let mut params = Vec::new();
    push_conditions(&mut sql, &mut params, f.conditions());
    sql.push_str(" GROUP BY queue, category, endpoint ORDER BY 4 DESC, 1, 3");
    let rows = query_rows(c, &sql, params_from_iter(params.iter()), |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, Option<String>>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, Option<i64>>(4)?,
            r.get::<_, Option<i64>>(5)?,
            r.get::<_, Option<String>>(6)?,
        ))
    })?;
    Ok(rows
        .into_iter()
        .filter_map(|(queue, category, endpoint, count, first, last, reason)| {
            Some(DeadGroup {
                queue,
                category: parse_dead_category(category.as_deref()?).ok()?,
                endpoint,
                count: count.max(0) as u64,
                first: ts(first).unwrap_or(Timestamp::EPOCH),
                last: ts(last).unwrap_or(Timestamp::EPOCH),
                reason,
            })
        })
        .collect())
}

/// [`Store::dead_letter_chunk_end`]: read by `jobs_dead`, in its order.
pub fn dead_letter_chunk_end(
    c: &mut Connection,
    f: &JobFilter,
    limit: u32,
) -> StoreResult<Option<i64>> {
    let mut sql =
        "SELECT MAX(seq) FROM (SELECT seq FROM jobs INDEXED BY jobs_dead WHERE state = 'dead'"
            .to_owned();
    let mut params = Vec::new();
    push_conditions(&mut sql, &mut params, f.conditions());
    params.push(Value::Integer(i64::from(limit.max(1))));
    sql.push_str(&format!(" ORDER BY seq LIMIT ?{})", params.len()));
    c.query_row(&sql, params_from_iter(params.iter()), |r| r.get(0))
        .map_err(backend)
}

/// [`Store::dead_letter_reasons`]: the matching dead letters read by `jobs_dead`.
pub fn dead_letter_reasons(c: &mut Connection, f: &JobFilter) -> StoreResult<Vec<DeadReason>> {
    let mut sql = "SELECT last_reason, COUNT(*), MIN(finished_at), MAX(finished_at) \
         FROM jobs INDEXED BY jobs_dead WHERE state = 'dead' AND last_reason IS NOT NULL"
        .to_owned();
    let mut params = Vec::new();
    push_conditions(&mut sql, &mut params, f.conditions());
    sql.push_str(" GROUP BY last_reason");
    query_rows(c, &sql, params_from_iter(params.iter()), |r| {
        Ok(DeadReason {
            reason: r.get(0)?,
            count: r.get::<_, i64>(1)?.max(0) as u64,
            first: ts(r.get(2)?).unwrap_or(Timestamp::EPOCH),
            last: ts(r.get(3)?).unwrap_or(Timestamp::EPOCH),
        })
    })
}

/// [`Store::group_counts`]: the waiting ones off `jobs_grouped` (index only), the running ones
/// off `jobs_leased`.
pub fn group_counts(c: &mut Connection, queue: &str, limit: u32) -> StoreResult<GroupCounts> {
    const WAITING: &str = concat!(
        "SELECT grp, COUNT(*) FROM jobs INDEXED BY jobs_grouped WHERE queue = ?1 AND ",
        grouped!(),
        " GROUP BY grp"
    );
    const RUNNING: &str = "SELECT grp, COUNT(*) FROM jobs INDEXED BY jobs_leased \
         WHERE state = 'running' AND queue = ?1 AND grp IS NOT NULL GROUP BY grp";
    let read = |sql: &str| {
        query_rows(c, sql, [queue], |r| {
            Ok((
                r.get::<_, String>(0)?,
                u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
            ))
        })
    };
    // Jobs waiting behind their key's head are left out of `jobs_grouped`: counted apart.
    const BEHIND: &str = concat!(
        "SELECT grp, COUNT(*) FROM jobs WHERE queue = ?1 AND ",
        in_line!(),
        " AND ord_wait = 1 AND grp IS NOT NULL GROUP BY grp"
    );
    let mut waiting = read(WAITING)?;
    waiting.extend(read(BEHIND)?);
    Ok(GroupCounts::from_parts(waiting, read(RUNNING)?, limit))
}

/// [`Store::ordering_keys`]: the heads off `jobs_in_line` (its jobs that do not wait: the jobs
/// behind a head are passed over in the index), in the order of their lines' numbers
/// ([`OrderingKey::line`]), each line counted off it too.
pub fn ordering_keys(c: &mut Connection, p: &OrderingKeysParams) -> StoreResult<Vec<KeyLine>> {
    static FIRST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT {COLS} FROM jobs INDEXED BY jobs_in_line WHERE ord_wait = 0 AND {} \
             AND queue = ?1 AND (?3 = 0 OR state = 'dead') ORDER BY oline, seq LIMIT ?4",
            lined!()
        )
    });
    static AFTER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "SELECT {COLS} FROM jobs INDEXED BY jobs_in_line WHERE oline > ?2 AND ord_wait = 0 \
             AND {} AND queue = ?1 AND (?3 = 0 OR state = 'dead') ORDER BY oline, seq LIMIT ?4",
            lined!()
        )
    });
    const LINE: &str = concat!(
        "SELECT COUNT(*) FROM jobs INDEXED BY jobs_in_line WHERE oline = ?3 AND queue = ?1 \
         AND okey = ?2 AND ",
        lined!()
    );
    let after = p.after.as_deref().map(|k| OrderingKey::line(&p.queue, k));
    let heads = {
        let mut s = c
            .prepare_cached(if after.is_some() { &AFTER } else { &FIRST })
            .map_err(backend)?;
        s.raw_bind_parameter(1, &p.queue).map_err(backend)?;
        if let Some(after) = after {
            s.raw_bind_parameter(2, after).map_err(backend)?;
        }
        s.raw_bind_parameter(3, p.blocked).map_err(backend)?;
        s.raw_bind_parameter(4, i64::from(p.limit))
            .map_err(backend)?;
        let mut rows = s.raw_query();
        let mut heads = Vec::new();
        while let Some(r) = rows.next().map_err(backend)? {
            heads.push(raw_from_row(r).map_err(backend)?.decode()?);
        }
        heads
    };
    let mut lines: Vec<KeyLine> = Vec::with_capacity(heads.len());
    let mut count = c.prepare_cached(LINE).map_err(backend)?;
    for head in heads {
        let Some(key) = head.ordering.as_ref().map(|o| o.key.clone()) else {
            continue;
        };
        // Two heads of one key only for a moment inside a write: the first one stands.
        if lines.last().is_some_and(|l| l.key == key) {
            continue;
        }
        let n: i64 = count
            .query_row(
                params![p.queue, key, OrderingKey::line(&p.queue, &key)],
                |r| r.get(0),
            )
            .map_err(backend)?;
        lines.push(KeyLine {
            key,
            head,
            behind: u64::try_from(n - 1).unwrap_or(0),
        });
    }
    Ok(lines)
}
