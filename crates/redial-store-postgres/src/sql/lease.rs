//! Leasing: candidates, the runnable reads with their locks (`FOR UPDATE SKIP LOCKED`), groups'
//! heads, taking the chosen jobs, and when a queue next has work. The picker's walk is in
//! `lease.rs` beside it.

use super::{cols, get, jobs_from_rows, ms, ts, WAITING};
use crate::{backend, Conn};
use redial_policy::Timestamp;
use redial_store::{Candidate, CandidateParams, Job, JobId, LeaseIdsParams, ScanPos, StoreResult};

pub(super) fn lease_order(jobs: &mut [Job]) {
    jobs.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.run_at.cmp(&b.run_at))
            .then(a.seq.cmp(&b.seq))
    });
}

pub(super) const CANDIDATES: &str =
    "SELECT seq, id, endpoint, attempts > 0, run_at, grp FROM jobs \
     WHERE queue = $1 AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL AND NOT ord_wait \
     AND run_at <= $2 \
     AND NOT (endpoint = ANY($3)) AND NOT (attempts > 0 AND endpoint = ANY($4)) \
     AND NOT (attempts = 0 AND endpoint = ANY($6)) \
     ORDER BY priority DESC, run_at, seq LIMIT $5";

pub async fn candidates(c: &mut Conn, p: &CandidateParams) -> StoreResult<Vec<Candidate>> {
    let stmt = c.prepared(CANDIDATES).await?;
    let rows = c
        .client
        .query(
            &stmt,
            &[
                &p.queue,
                &ms(p.now),
                &p.exclude,
                &p.exclude_retries,
                &i64::from(p.limit),
                &p.exclude_firsts,
            ],
        )
        .await
        .map_err(backend)?;
    rows.iter().map(|r| candidate(r, 5)).collect()
}

/// A candidate from a row whose first columns are seq, id, endpoint, is retry, run_at, and
/// whose group is in column `group`.
fn candidate(r: &tokio_postgres::Row, group: usize) -> StoreResult<Candidate> {
    Ok(Candidate {
        seq: get(r, 0)?,
        id: JobId(get(r, 1)?),
        endpoint: get(r, 2)?,
        is_retry: get(r, 3)?,
        run_at: Timestamp::from_unix_millis(get(r, 4)?),
        group: get(r, group)?,
    })
}

/// The runnable jobs of a queue in lease order: from the head, then after a place within its
/// priority level ((run_at, seq) is a range of the index there), then the levels below.
/// Ungrouped jobs only (`jobs_runnable`'s condition): grouped ones are read group by group.
pub(super) const RUNNABLE_HEAD_LOCKED: &str =
    "SELECT seq, id, endpoint, attempts > 0, run_at, priority \
     FROM jobs WHERE queue = $1 AND grp IS NULL AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL \
     AND run_at <= $2 ORDER BY priority DESC, run_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED";
/// As [`RUNNABLE_HEAD_LOCKED`], from a place within the top priority level (`$4`) on: the
/// entries before it, left by jobs leased since the last vacuum, are not stepped over again.
/// Nothing when a level above holds a due job (the caller then reads from the head).
pub(super) const RUNNABLE_FLOOR_LOCKED: &str =
    "SELECT seq, id, endpoint, attempts > 0, run_at, priority \
     FROM jobs WHERE queue = $1 AND grp IS NULL AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL \
     AND run_at <= $2 AND priority = $4 AND (run_at, seq) >= ($5, $6) \
     AND NOT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 AND grp IS NULL AND NOT ord_wait \
       AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL AND run_at <= $2 AND priority > $4) \
     ORDER BY run_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED";
pub(super) const RUNNABLE_SAME: &str =
    "SELECT seq, id, endpoint, attempts > 0, run_at, priority FROM jobs \
     WHERE queue = $1 AND grp IS NULL AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL \
     AND run_at <= $2 AND priority = $3 AND (run_at, seq) > ($4, $5) ORDER BY run_at, seq LIMIT $6";
pub(super) const RUNNABLE_LOWER: &str =
    "SELECT seq, id, endpoint, attempts > 0, run_at, priority FROM jobs \
     WHERE queue = $1 AND grp IS NULL AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL \
     AND run_at <= $2 AND priority < $3 ORDER BY priority DESC, run_at, seq LIMIT $4";
/// Whether one of the queue's grouped jobs is due: one is ready (`jobs_grouped_ready`), or one
/// scheduled or deferred has come due and is not promoted yet (`jobs_waiting`, by run time).
/// Each read is ordered as its index is, on purpose: as `EXISTS`, a generic plan may read the
/// table in order instead, past every finished job. The second spells "grouped" as
/// `COALESCE(grp, '') <> ''` (no group is named "") so that `jobs_grouped` cannot serve it: read
/// through that index and sorted, it would read every grouped job of the queue.
pub const GROUPED_DUE: &str = "SELECT \
       (SELECT grp FROM jobs WHERE queue = $1 AND grp IS NOT NULL AND NOT ord_wait AND state = 'ready' AND lease_owner IS NULL \
          ORDER BY grp LIMIT 1) IS NOT NULL \
    OR (SELECT run_at FROM jobs WHERE state IN ('scheduled', 'deferred') AND run_at <= $2 \
          AND queue = $1 AND COALESCE(grp, '') <> '' AND NOT ord_wait ORDER BY run_at LIMIT 1) IS NOT NULL";
/// The queue's groups with waiting jobs, in order, after `$2` (and up to `$5` inclusive in
/// [`GROUPS_BETWEEN`]), each with whether one of its jobs is due at `$4`: a loose scan of
/// `jobs_grouped` (one seek per group, however many jobs each holds) that stops once `$3` groups
/// with a due job were found or `$6` groups were looked at.
macro_rules! groups_scan {
    ($upto:literal) => {
        concat!(
            "WITH RECURSIVE g (grp, n, due, k) AS ( \
               SELECT f.grp, 1, d.due, d.due::int FROM \
                 (SELECT grp FROM jobs WHERE queue = $1 AND grp > $2 ",
            $upto,
            " AND grp IS NOT NULL AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL \
                  ORDER BY grp LIMIT 1) f \
                 CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 \
                   AND grp = f.grp AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL \
                   AND run_at <= $4) AS due) d \
               UNION ALL \
               SELECT x.grp, g.n + 1, d.due, g.k + d.due::int FROM g \
                 CROSS JOIN LATERAL (SELECT j.grp FROM jobs j WHERE j.queue = $1 \
                   AND j.grp > g.grp ",
            $upto,
            " AND j.grp IS NOT NULL AND NOT j.ord_wait AND j.state IN ('ready', 'scheduled', 'deferred') AND j.lease_owner IS NULL \
                   ORDER BY j.grp LIMIT 1) x \
                 CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 \
                   AND grp = x.grp AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL \
                   AND run_at <= $4) AS due) d \
               WHERE g.k < $3 AND g.n < $6) \
             SELECT grp, due FROM g ORDER BY n"
        )
    };
}
pub(super) const GROUPS_AFTER: &str = groups_scan!("AND $5::text IS NULL");
pub(super) const GROUPS_BETWEEN: &str = groups_scan!("AND grp <= $5");
/// The due jobs at the head of each group of `$2` (up to `$4` each, locked, skipping rows
/// other nodes hold), group by group in `$2`'s order, each in lease order.
pub(super) const GROUP_HEADS_LOCKED: &str =
    "SELECT h.seq, h.id, h.endpoint, h.attempts > 0, h.run_at, \
       h.priority, g.grp \
     FROM unnest($2::text[]) WITH ORDINALITY AS g (grp, n) \
     CROSS JOIN LATERAL (SELECT seq, id, endpoint, attempts, run_at, priority FROM jobs \
       WHERE queue = $1 AND grp = g.grp AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL \
       AND run_at <= $3 ORDER BY priority DESC, run_at, seq LIMIT $4 FOR UPDATE SKIP LOCKED) h \
     ORDER BY g.n, h.priority DESC, h.run_at, h.seq";

/// The groups of `queue` with waiting jobs after `after` (and up to `upto` inclusive, when
/// given), in order, each with whether one of its jobs is due at `now`: until `due_max` with a
/// due job were found or `visits` were looked at.
pub async fn groups_after(
    c: &mut Conn,
    queue: &str,
    after: &str,
    upto: Option<&str>,
    now: Timestamp,
    due_max: usize,
    visits: usize,
) -> StoreResult<Vec<(String, bool)>> {
    let due_max = i32::try_from(due_max).unwrap_or(i32::MAX);
    let visits = i32::try_from(visits).unwrap_or(i32::MAX);
    let stmt = c
        .prepared(if upto.is_some() {
            GROUPS_BETWEEN
        } else {
            GROUPS_AFTER
        })
        .await?;
    let rows = c
        .client
        .query(&stmt, &[&queue, &after, &due_max, &ms(now), &upto, &visits])
        .await
        .map_err(backend)?;
    rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect()
}

/// The due jobs at the head of each of `groups` (`each` at most per group), locked.
pub async fn group_heads(
    c: &mut Conn,
    queue: &str,
    groups: &[String],
    now: Timestamp,
    each: usize,
) -> StoreResult<Vec<Candidate>> {
    let stmt = c.prepared(GROUP_HEADS_LOCKED).await?;
    let each = i64::try_from(each).unwrap_or(i64::MAX);
    let rows = c
        .client
        .query(&stmt, &[&queue, &groups, &ms(now), &each])
        .await
        .map_err(backend)?;
    rows.iter().map(|r| candidate(r, 6)).collect()
}

/// How a read from the head of the queue goes: it locks the rows read for the transaction,
/// skipping rows other transactions hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    Locked,
    /// As `Locked`, and begins the transaction in the same round trip (BEGIN is sent just
    /// before the read, without waiting for its answer).
    BeginLocked,
}

/// Up to `n` runnable ungrouped jobs of `queue` in lease order, after `after` (from the head
/// when `None`, read as `head` says), each with its place. A read that begins the transaction
/// also sets `grouped_due` (whether one of the queue's grouped jobs is due), in the same round trip.
///
/// A read from the head given a `floor` (where a recent read from the head began) starts there
/// within the floor's priority level, so that it does not step over the index entries leased
/// jobs left before it; should that come back short of `n` (the level ran out, a level above
/// has a due job, or the queue is nearly empty) the head is read in full after all. `*floored`
/// says whether the rows came from the read at the floor.
#[allow(clippy::too_many_arguments)]
pub async fn runnable(
    c: &mut Conn,
    queue: &str,
    now: Timestamp,
    after: Option<ScanPos>,
    n: usize,
    head: Head,
    floor: Option<ScanPos>,
    grouped_due: &mut bool,
    floored: &mut bool,
) -> StoreResult<Vec<(Candidate, ScanPos)>> {
    type Param<'a> = &'a (dyn tokio_postgres::types::ToSql + Sync);
    let now = ms(now);
    let limit = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    // Priorities are INTEGER columns: every place read from them fits.
    let level = |p: ScanPos| i32::try_from(p.priority).unwrap_or(i32::MAX);
    *floored = false;
    let rows = match after {
        None => {
            let full = c.prepared(RUNNABLE_HEAD_LOCKED).await?;
            let stmt = match floor {
                Some(_) => c.prepared(RUNNABLE_FLOOR_LOCKED).await?,
                None => full.clone(),
            };
            let probe = c.prepared(GROUPED_DUE).await?;
            let want = n;
            let n = limit(n);
            let f_level = floor.map(level);
            let params: Vec<Param> = match (&floor, &f_level) {
                (Some(f), Some(l)) => vec![&queue, &now, &n, l, &f.run_at, &f.seq],
                _ => vec![&queue, &now, &n],
            };
            let read = c.client.query(&stmt, &params);
            let rows = if head == Head::BeginLocked {
                // All go out before any answer is awaited: one round trip. Biased: polled in
                // order, so BEGIN is sent first.
                let probe_params: [Param; 2] = [&queue, &now];
                let probe = c.client.query_one(&probe, &probe_params);
                let (begun, rows, grouped) =
                    tokio::join!(biased; c.client.batch_execute("BEGIN"), read, probe);
                begun.map_err(backend)?;
                let rows = rows.map_err(backend)?;
                *grouped_due = get(&grouped.map_err(backend)?, 0)?;
                rows
            } else {
                read.await.map_err(backend)?
            };
            if floor.is_some() && rows.len() < want {
                // The rows this read locked come again: this transaction's own locks do not
                // skip them.
                let params: [Param; 3] = [&queue, &now, &n];
                c.client.query(&full, &params).await.map_err(backend)?
            } else {
                *floored = floor.is_some();
                rows
            }
        }
        Some(p) => {
            let stmt = c.prepared(RUNNABLE_SAME).await?;
            let mut rows = c
                .client
                .query(
                    &stmt,
                    &[&queue, &now, &level(p), &p.run_at, &p.seq, &limit(n)],
                )
                .await
                .map_err(backend)?;
            if rows.len() < n {
                let stmt = c.prepared(RUNNABLE_LOWER).await?;
                rows.extend(
                    c.client
                        .query(&stmt, &[&queue, &now, &level(p), &limit(n - rows.len())])
                        .await
                        .map_err(backend)?,
                );
            }
            rows
        }
    };
    rows.iter()
        .map(|r| {
            let pos = ScanPos {
                priority: i64::from(get::<i32>(r, 5)?),
                run_at: get(r, 4)?,
                seq: get(r, 0)?,
            };
            Ok((
                Candidate {
                    seq: pos.seq,
                    id: JobId(get(r, 1)?),
                    endpoint: get(r, 2)?,
                    is_retry: get(r, 3)?,
                    run_at: Timestamp::from_unix_millis(pos.run_at),
                    group: None,
                },
                pos,
            ))
        })
        .collect()
}

/// A lease's update (`$1` owner, `$2` until) with its row in `leases` (the rescue's log of what
/// each node holds until when), answering the jobs' columns.
macro_rules! lease_logged {
    ($update:literal) => {
        concat!(
            "WITH u AS (",
            $update,
            cols!(),
            "), l AS (INSERT INTO leases (owner, until, seqs) SELECT $1, $2, array_agg(seq) \
             FROM u HAVING count(*) > 0) SELECT * FROM u"
        )
    };
}

/// Claims in `seq` order and skips rows another node is claiming, so two nodes never wait on
/// each other (nor deadlock) and never both take a job.
///
/// A lease writes the job's row as `ready` with an owner, so that it changes no indexed column
/// (a job already `ready` takes a HOT update: schema migration 19), and logs the lease in
/// `leases` for the rescue ([`lease_logged!`]).
pub(super) const LEASE_IDS: &str = lease_logged!(
    "UPDATE jobs SET state = 'ready', lease_owner = $1, lease_until = $2, updated_at = $3 \
     WHERE seq IN (SELECT seq FROM jobs WHERE seq = ANY($4) \
         AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL AND NOT ord_wait AND run_at <= $3 \
         ORDER BY seq FOR UPDATE SKIP LOCKED) \
     RETURNING "
);

pub async fn lease_ids(c: &mut Conn, p: &LeaseIdsParams) -> StoreResult<Vec<Job>> {
    if p.seqs.is_empty() {
        return Ok(Vec::new());
    }
    let stmt = c.prepared(LEASE_IDS).await?;
    let rows = c
        .client
        .query(&stmt, &[&p.owner, &ms(p.lease_until), &ms(p.now), &p.seqs])
        .await
        .map_err(backend)?;
    let mut jobs = jobs_from_rows(&rows)?;
    lease_order(&mut jobs);
    Ok(jobs)
}

/// [`LEASE_IDS`] for rows this transaction locked when it read them: no other transaction can
/// change them, so they are updated as found by the key, without locking them again.
pub(super) const LEASE_LOCKED: &str = lease_logged!(
    "UPDATE jobs SET state = 'ready', lease_owner = $1, lease_until = $2, updated_at = $3 \
     WHERE seq = ANY($4) AND state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL AND NOT ord_wait \
     AND run_at <= $3 RETURNING "
);

/// Leases rows this transaction read locked, then COMMITs in the same round trip (sent
/// without waiting for the update's answer). A failed update aborts the transaction, and the
/// COMMIT then rolls it back.
pub async fn lease_locked_and_commit(c: &mut Conn, p: &LeaseIdsParams) -> StoreResult<Vec<Job>> {
    let stmt = c.prepared(LEASE_LOCKED).await?;
    let lease_until = ms(p.lease_until);
    let now = ms(p.now);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
        [&p.owner, &lease_until, &now, &p.seqs];
    let update = c.client.query(&stmt, &params);
    // Biased: polled in order, so the update is sent before the COMMIT.
    let (rows, committed) = tokio::join!(biased; update, c.client.batch_execute("COMMIT"));
    let rows = rows.map_err(backend)?;
    committed.map_err(backend)?;
    let mut jobs = jobs_from_rows(&rows)?;
    lease_order(&mut jobs);
    Ok(jobs)
}

pub async fn next_run_at(
    c: &mut Conn,
    queue: &str,
    after: Timestamp,
) -> StoreResult<Option<Timestamp>> {
    let row = c
        .client
        .query_one(
            // Each part as a partial index reads it: ungrouped jobs by `jobs_runnable`, grouped
            // ones by `jobs_waiting` in run time order (spelled so that `jobs_grouped` cannot serve
            // it, see GROUPED_DUE; a grouped job due later is scheduled or deferred).
            &format!(
                "SELECT LEAST( \
                   (SELECT MIN(run_at) FROM jobs WHERE queue = $1 AND grp IS NULL AND NOT ord_wait AND {WAITING} \
                      AND run_at > $2), \
                   (SELECT run_at FROM jobs WHERE state IN ('scheduled', 'deferred') \
                      AND run_at > $2 AND queue = $1 AND COALESCE(grp, '') <> '' AND NOT ord_wait \
                      ORDER BY run_at LIMIT 1))"
            ),
            &[&queue, &ms(after)],
        )
        .await
        .map_err(backend)?;
    Ok(ts(get(&row, 0)?))
}
