//! The SQL behind each store method. Each function is one transaction, most of them one
//! statement; the hot ones (insert, lease, record, heartbeat) use statements prepared once per
//! connection.
//!
//! One file, over 800 lines, on purpose: one function per store method, in the trait's order,
//! sharing the prepared statements and the column list; the rules they apply are
//! `redial_store::rules`'.

use crate::{backend, Conn};
use redial_policy::{DeadCategory, Timestamp};
use redial_store::*;
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

/// The columns of a job, in the order `RawJob::read` reads them.
use redial_store::job_columns as cols;

/// The NOTIFY payload that says shared endpoint holds changed (other payloads are queue names;
/// this one starts with a control character, which a queue name written in a config would not).
pub const ENDPOINTS_CHANGED: &str = "\u{1}endpoints";

const WAITING: &str = "state IN ('ready', 'scheduled', 'deferred')";

type Param<'a> = &'a (dyn ToSql + Sync);

use redial_store::{corrupt_json as json_err, instant as ts, millis as ms};

fn int(v: u32) -> i32 {
    v.min(i32::MAX as u32) as i32
}

fn get<'a, T: tokio_postgres::types::FromSql<'a>>(r: &'a Row, i: usize) -> StoreResult<T> {
    r.try_get(i)
        .map_err(|e| StoreError::Backend(format!("unexpected column {i}: {e}")))
}

/// A PostgreSQL row's columns, as the shared decoder reads them.
struct Columns<'r>(&'r Row);

impl JobColumns for Columns<'_> {
    type Error = StoreError;
    fn text(&self, i: usize) -> StoreResult<String> {
        get(self.0, i)
    }
    fn opt_text(&self, i: usize) -> StoreResult<Option<String>> {
        get(self.0, i)
    }
    fn int(&self, i: usize) -> StoreResult<i64> {
        get(self.0, i)
    }
    fn opt_int(&self, i: usize) -> StoreResult<Option<i64>> {
        get(self.0, i)
    }
    fn int32(&self, i: usize) -> StoreResult<i32> {
        get(self.0, i)
    }
    fn flag(&self, i: usize) -> StoreResult<bool> {
        get(self.0, i)
    }
}

fn job_from_row(r: &Row) -> StoreResult<Job> {
    RawJob::read(&Columns(r))?.decode()
}

fn jobs_from_rows(rows: &[Row]) -> StoreResult<Vec<Job>> {
    rows.iter().map(job_from_row).collect()
}

fn category_str(c: Option<DeadCategory>) -> Option<&'static str> {
    c.map(DeadCategory::as_str)
}

const GET: &str = concat!("SELECT ", cols!(), " FROM jobs WHERE id = $1");

async fn get_job(c: &impl tokio_postgres::GenericClient, id: &JobId) -> StoreResult<Option<Job>> {
    c.query_opt(GET, &[&id.0])
        .await
        .map_err(backend)?
        .as_ref()
        .map(job_from_row)
        .transpose()
}

async fn must_get(c: &impl tokio_postgres::GenericClient, id: &JobId) -> StoreResult<Job> {
    get_job(c, id)
        .await?
        .ok_or_else(|| StoreError::NotFound(id.clone()))
}

/// Tells the other nodes that `queue` has new work (on commit). An empty queue name means any.
async fn notify(
    c: &impl tokio_postgres::GenericClient,
    channel: &str,
    payload: &str,
) -> StoreResult<()> {
    c.execute("SELECT pg_notify($1, $2)", &[&channel, &payload])
        .await
        .map(|_| ())
        .map_err(backend)
}

pub async fn insert_one(c: &mut Conn, channel: &str, job: NewJob) -> StoreResult<InsertOutcome> {
    insert_batch(c, channel, vec![job])
        .await?
        .pop()
        .ok_or_else(|| StoreError::Backend("no outcome for the inserted job".into()))
}

/// One statement for the whole batch (arrays unnested into rows); ids that already exist are
/// then read back and compared, as duplicates or conflicts.
const INSERT_MANY: &str =
    "INSERT INTO jobs (id, queue, endpoint, state, request, idempotency_key, \
     priority, run_at, deadline, tags, policy, created_at, updated_at, grp) \
     SELECT id, queue, endpoint, state, request, key, priority, run_at, deadline, tags, policy, \
         created_at, created_at, grp \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
         $7::int[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::bigint[], \
         $13::text[]) \
         WITH ORDINALITY AS t (id, queue, endpoint, state, request, key, priority, run_at, \
             deadline, tags, policy, created_at, grp, n) \
     ORDER BY n \
     ON CONFLICT (id) DO NOTHING RETURNING id, seq";

pub async fn insert_batch(
    c: &mut Conn,
    channel: &str,
    jobs: Vec<NewJob>,
) -> StoreResult<Vec<InsertOutcome>> {
    let n = jobs.len();
    let mut cols = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for job in &jobs {
        let state = job.initial_state();
        let request = serde_json::to_string(&job.request).map_err(json_err)?;
        cols.0.push(job.id.0.as_str());
        cols.1.push(job.queue.as_str());
        cols.2.push(job.endpoint.as_str());
        cols.3.push(state.as_str());
        cols.4.push(request);
        cols.5.push(job.idempotency_key.as_deref());
        cols.6.push(job.priority);
        cols.7.push(ms(job.run_at));
        cols.8.push(job.deadline.map(ms));
        cols.9
            .push(serde_json::to_string(&job.tags).map_err(json_err)?);
        cols.10.push(
            job.policy
                .as_ref()
                .map(serde_json::to_string)
                .transpose()
                .map_err(json_err)?,
        );
        cols.11.push(ms(job.created_at));
        cols.12.push(job.group.as_deref());
    }
    let stmt = c.prepared(INSERT_MANY).await?;
    let tx = c.client.transaction().await.map_err(backend)?;
    let rows = tx
        .query(
            &stmt,
            &[
                &cols.0, &cols.1, &cols.2, &cols.3, &cols.4, &cols.5, &cols.6, &cols.7, &cols.8,
                &cols.9, &cols.10, &cols.11, &cols.12,
            ],
        )
        .await
        .map_err(backend)?;
    let mut seqs = std::collections::HashMap::with_capacity(rows.len());
    for r in &rows {
        seqs.insert(get::<String>(r, 0)?, get::<i64>(r, 1)?);
    }
    let mut outs = Vec::with_capacity(n);
    let mut queues: Vec<String> = Vec::new();
    for job in jobs {
        // An id inserted earlier in this same batch is a duplicate of that one, not new again.
        match seqs.remove(&job.id.0) {
            Some(seq) => {
                if !queues.contains(&job.queue) {
                    queues.push(job.queue.clone());
                }
                // The job as stored, built from what was written rather than read back.
                outs.push(InsertOutcome::Inserted(job.into_stored(seq)));
            }
            None => {
                let existing = must_get(&tx, &job.id).await?;
                let same = existing.queue == job.queue
                    && existing.request.same_as(&job.request)
                    && existing.idempotency_key == job.idempotency_key;
                outs.push(if same {
                    InsertOutcome::Duplicate(existing)
                } else {
                    InsertOutcome::Conflict(existing)
                });
            }
        }
    }
    if outs.iter().any(|o| matches!(o, InsertOutcome::Conflict(_))) {
        tx.rollback().await.map_err(backend)?;
        return Ok(outs);
    }
    for q in &queues {
        notify(&tx, channel, q).await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(outs)
}

pub async fn get_with_attempts(
    c: &mut Conn,
    id: &JobId,
) -> StoreResult<Option<(Job, Vec<Attempt>)>> {
    let Some(job) = get_job(&c.client, id).await? else {
        return Ok(None);
    };
    let rows = c
        .client
        .query(
            "SELECT data FROM attempts WHERE job_seq = $1 ORDER BY number",
            &[&job.seq],
        )
        .await
        .map_err(backend)?;
    let attempts = rows
        .iter()
        .map(|r| serde_json::from_str(&get::<String>(r, 0)?).map_err(json_err))
        .collect::<StoreResult<Vec<Attempt>>>()?;
    Ok(Some((job, attempts)))
}

/// Appends the filter's conditions to `sql` and their values to `params`.
fn push_filter(sql: &mut String, params: &mut Vec<Box<dyn ToSql + Sync + Send>>, f: &JobFilter) {
    if let Some(s) = f.state {
        params.push(Box::new(s.as_str().to_owned()));
        sql.push_str(&format!(" AND state = ${}", params.len()));
    }
    push_conditions(sql, params, f.conditions());
}

fn push_conditions(
    sql: &mut String,
    params: &mut Vec<Box<dyn ToSql + Sync + Send>>,
    conditions: Vec<Condition>,
) {
    for c in conditions {
        params.push(match c.value {
            SqlValue::Text(t) => Box::new(t),
            SqlValue::Int(i) => Box::new(i),
        });
        sql.push_str(&format!(" AND {} ${}", c.clause, params.len()));
    }
}

fn refs(params: &[Box<dyn ToSql + Sync + Send>]) -> Vec<Param<'_>> {
    params.iter().map(|p| p.as_ref() as Param<'_>).collect()
}

pub async fn list(c: &mut Conn, p: &JobListParams) -> StoreResult<JobPage> {
    let mut sql = concat!("SELECT ", cols!(), " FROM jobs WHERE TRUE").to_owned();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let state_only = JobFilter {
        state: p.filter.state,
        ..JobFilter::default()
    };
    push_filter(&mut sql, &mut params, &state_only);
    push_conditions(&mut sql, &mut params, p.conditions());
    params.push(Box::new(p.rows_to_read()));
    sql.push_str(&format!(" ORDER BY seq LIMIT ${}", params.len()));
    let rows = c
        .client
        .query(&sql, &refs(&params))
        .await
        .map_err(backend)?;
    Ok(JobPage::from_rows(jobs_from_rows(&rows)?, p.limit))
}

fn lease_order(jobs: &mut [Job]) {
    jobs.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.run_at.cmp(&b.run_at))
            .then(a.seq.cmp(&b.seq))
    });
}

const CANDIDATES: &str = "SELECT seq, id, endpoint, attempts > 0, run_at, grp FROM jobs \
     WHERE queue = $1 AND state IN ('ready', 'scheduled', 'deferred') AND run_at <= $2 \
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
    rows.iter()
        .map(|r| {
            Ok(Candidate {
                seq: get(r, 0)?,
                id: JobId(get(r, 1)?),
                endpoint: get(r, 2)?,
                is_retry: get(r, 3)?,
                run_at: Timestamp::from_unix_millis(get(r, 4)?),
                group: get(r, 5)?,
            })
        })
        .collect()
}

/// The runnable jobs of a queue in lease order: from the head, then after a place within its
/// priority level ((run_at, seq) is a range of the index there), then the levels below.
/// Ungrouped jobs only (`jobs_runnable`'s condition): grouped ones are read group by group.
const RUNNABLE_HEAD_LOCKED: &str = "SELECT seq, id, endpoint, attempts > 0, run_at, priority \
     FROM jobs WHERE queue = $1 AND grp IS NULL AND state IN ('ready', 'scheduled', 'deferred') \
     AND run_at <= $2 ORDER BY priority DESC, run_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED";
/// As [`RUNNABLE_HEAD_LOCKED`], from a place within the top priority level (`$4`) on: the
/// entries before it, left by jobs leased since the last vacuum, are not stepped over again.
/// Nothing when a level above holds a due job (the caller then reads from the head).
const RUNNABLE_FLOOR_LOCKED: &str = "SELECT seq, id, endpoint, attempts > 0, run_at, priority \
     FROM jobs WHERE queue = $1 AND grp IS NULL AND state IN ('ready', 'scheduled', 'deferred') \
     AND run_at <= $2 AND priority = $4 AND (run_at, seq) >= ($5, $6) \
     AND NOT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 AND grp IS NULL \
       AND state IN ('ready', 'scheduled', 'deferred') AND run_at <= $2 AND priority > $4) \
     ORDER BY run_at, seq LIMIT $3 FOR UPDATE SKIP LOCKED";
const RUNNABLE_SAME: &str = "SELECT seq, id, endpoint, attempts > 0, run_at, priority FROM jobs \
     WHERE queue = $1 AND grp IS NULL AND state IN ('ready', 'scheduled', 'deferred') \
     AND run_at <= $2 AND priority = $3 AND (run_at, seq) > ($4, $5) ORDER BY run_at, seq LIMIT $6";
const RUNNABLE_LOWER: &str = "SELECT seq, id, endpoint, attempts > 0, run_at, priority FROM jobs \
     WHERE queue = $1 AND grp IS NULL AND state IN ('ready', 'scheduled', 'deferred') \
     AND run_at <= $2 AND priority < $3 ORDER BY priority DESC, run_at, seq LIMIT $4";
/// Whether one of the queue's grouped jobs is due: one is ready (`jobs_grouped_ready`), or one
/// scheduled or deferred has come due and is not promoted yet (`jobs_waiting`, by run time).
/// Each read is ordered as its index is, on purpose: as `EXISTS`, a generic plan may read the
/// table in order instead, past every finished job. The second spells "grouped" as
/// `COALESCE(grp, '') <> ''` (no group is named "") so that `jobs_grouped` cannot serve it: read
/// through that index and sorted, it would read every grouped job of the queue.
pub const GROUPED_DUE: &str = "SELECT \
       (SELECT grp FROM jobs WHERE queue = $1 AND grp IS NOT NULL AND state = 'ready' \
          ORDER BY grp LIMIT 1) IS NOT NULL \
    OR (SELECT run_at FROM jobs WHERE state IN ('scheduled', 'deferred') AND run_at <= $2 \
          AND queue = $1 AND COALESCE(grp, '') <> '' ORDER BY run_at LIMIT 1) IS NOT NULL";
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
            " AND grp IS NOT NULL AND state IN ('ready', 'scheduled', 'deferred') \
                  ORDER BY grp LIMIT 1) f \
                 CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 \
                   AND grp = f.grp AND state IN ('ready', 'scheduled', 'deferred') \
                   AND run_at <= $4) AS due) d \
               UNION ALL \
               SELECT x.grp, g.n + 1, d.due, g.k + d.due::int FROM g \
                 CROSS JOIN LATERAL (SELECT j.grp FROM jobs j WHERE j.queue = $1 \
                   AND j.grp > g.grp ",
            $upto,
            " AND j.grp IS NOT NULL AND j.state IN ('ready', 'scheduled', 'deferred') \
                   ORDER BY j.grp LIMIT 1) x \
                 CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM jobs WHERE queue = $1 \
                   AND grp = x.grp AND state IN ('ready', 'scheduled', 'deferred') \
                   AND run_at <= $4) AS due) d \
               WHERE g.k < $3 AND g.n < $6) \
             SELECT grp, due FROM g ORDER BY n"
        )
    };
}
const GROUPS_AFTER: &str = groups_scan!("AND $5::text IS NULL");
const GROUPS_BETWEEN: &str = groups_scan!("AND grp <= $5");
/// The due jobs at the head of each group of `$2` (up to `$4` each, locked, skipping rows
/// other nodes hold), group by group in `$2`'s order, each in lease order.
const GROUP_HEADS_LOCKED: &str = "SELECT h.seq, h.id, h.endpoint, h.attempts > 0, h.run_at, \
       h.priority, g.grp \
     FROM unnest($2::text[]) WITH ORDINALITY AS g (grp, n) \
     CROSS JOIN LATERAL (SELECT seq, id, endpoint, attempts, run_at, priority FROM jobs \
       WHERE queue = $1 AND grp = g.grp AND state IN ('ready', 'scheduled', 'deferred') \
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
    rows.iter()
        .map(|r| {
            Ok(Candidate {
                seq: get(r, 0)?,
                id: JobId(get(r, 1)?),
                endpoint: get(r, 2)?,
                is_retry: get(r, 3)?,
                run_at: Timestamp::from_unix_millis(get(r, 4)?),
                group: get(r, 6)?,
            })
        })
        .collect()
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

/// Claims in `seq` order and skips rows another node is claiming, so two nodes never wait on
/// each other (nor deadlock) and never both take a job.
const LEASE_IDS: &str = concat!(
    "UPDATE jobs SET state = 'running', lease_owner = $1, lease_until = $2, updated_at = $3 \
     WHERE seq IN (SELECT seq FROM jobs WHERE seq = ANY($4) \
         AND state IN ('ready', 'scheduled', 'deferred') AND run_at <= $3 \
         ORDER BY seq FOR UPDATE SKIP LOCKED) \
     RETURNING ",
    cols!()
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
const LEASE_LOCKED: &str = concat!(
    "UPDATE jobs SET state = 'running', lease_owner = $1, lease_until = $2, updated_at = $3 \
     WHERE seq = ANY($4) AND state IN ('ready', 'scheduled', 'deferred') AND run_at <= $3 \
     RETURNING ",
    cols!()
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

const HEARTBEAT: &str = "UPDATE jobs SET lease_until = $1 \
     WHERE id = ANY($2) AND state = 'running' AND lease_owner = $3";

pub async fn heartbeat(c: &mut Conn, p: &HeartbeatParams) -> StoreResult<u64> {
    let stmt = c.prepared(HEARTBEAT).await?;
    let ids: Vec<&str> = p.ids.iter().map(|i| i.0.as_str()).collect();
    c.client
        .execute(&stmt, &[&ms(p.lease_until), &ids, &p.owner])
        .await
        .map_err(backend)
}

/// The common case in one statement: the lease is ours and no cancel waits. The attempt's
/// number is the job's new run count, written into the document as stored.
const RECORD: &str = "WITH u AS (UPDATE jobs SET state = $1, category = $2, \
         run_at = COALESCE($3, run_at), finished_at = $4, attempts = $5, unknown_attempts = $6, \
         deferrals = $7, last_delay_ms = $8, last_reason = $9, runs = runs + 1, \
         lease_owner = NULL, lease_until = NULL, updated_at = $10 \
     WHERE id = $11 AND state = 'running' AND lease_owner = $12 AND NOT cancel_requested \
     RETURNING seq, runs) \
     INSERT INTO attempts (job_seq, number, data) \
     SELECT seq, runs, jsonb_set($13::text::jsonb, '{number}', to_jsonb(runs))::text FROM u \
     RETURNING number";

pub async fn record_attempt(
    c: &mut Conn,
    p: RecordAttemptParams,
    data: String,
) -> StoreResult<JobState> {
    let (state, category, run_at, finished_at) = p.as_leased();
    let last_delay_ms = p.last_delay_ms.map(|v| v.min(i64::MAX as u64) as i64);
    let stmt = c.prepared(RECORD).await?;
    let done = c
        .client
        .query_opt(
            &stmt,
            &[
                &state.as_str(),
                &category_str(category),
                &run_at.map(ms),
                &finished_at.map(ms),
                &int(p.attempts),
                &int(p.unknown_attempts),
                &int(p.deferrals),
                &last_delay_ms,
                &p.attempt.reason,
                &ms(p.now),
                &p.id.0,
                &p.owner,
                &data,
            ],
        )
        .await
        .map_err(backend)?;
    if done.is_some() {
        return Ok(state);
    }
    record_attempt_slow(c, p, data).await
}

/// Many attempts' common case in one statement (one round trip, one commit): each job found by
/// its `seq` (and id), still leased by its recorder with the runs the caller expects before this
/// attempt, no cancel waiting, is updated and its attempt inserted as serialised (its number is
/// the caller's). Returns the ids recorded; the others go through [`record_attempt`] one by one.
/// Ids must be distinct, and each request must carry its `seq` and a number of at least 1.
const RECORD_MANY: &str = "WITH i AS ( \
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], \
         $6::bigint[], $7::bigint[], $8::int[], $9::int[], $10::int[], $11::bigint[], \
         $12::text[], $13::bigint[], $14::int[], $15::text[]) \
       AS t(seq, id, owner, state, category, run_at, finished_at, attempts, unknown_attempts, \
         deferrals, last_delay_ms, reason, now, number, data)), \
     u AS (UPDATE jobs j SET state = i.state, category = i.category, \
         run_at = COALESCE(i.run_at, j.run_at), finished_at = i.finished_at, \
         attempts = i.attempts, unknown_attempts = i.unknown_attempts, deferrals = i.deferrals, \
         last_delay_ms = i.last_delay_ms, last_reason = i.reason, runs = i.number, \
         lease_owner = NULL, lease_until = NULL, updated_at = i.now \
       FROM i \
       WHERE j.seq = i.seq AND j.id = i.id AND j.state = 'running' AND j.lease_owner = i.owner \
         AND NOT j.cancel_requested AND j.runs = i.number - 1 \
       RETURNING j.seq), \
     a AS (INSERT INTO attempts (job_seq, number, data) \
       SELECT i.seq, i.number, i.data FROM u JOIN i ON i.seq = u.seq) \
     SELECT i.id FROM u JOIN i ON i.seq = u.seq";

/// Whether [`record_many`] can take this request (it knows the job's `seq` and the attempt's
/// number).
pub fn batchable(p: &RecordAttemptParams) -> bool {
    p.seq.is_some() && p.attempt.number >= 1
}

pub async fn record_many(
    c: &mut Conn,
    batch: &[(&RecordAttemptParams, &str)],
) -> StoreResult<std::collections::HashSet<String>> {
    let n = batch.len();
    let mut seqs = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    let mut owners = Vec::with_capacity(n);
    let mut states = Vec::with_capacity(n);
    let mut categories = Vec::with_capacity(n);
    let mut run_ats = Vec::with_capacity(n);
    let mut finished = Vec::with_capacity(n);
    let mut attempts = Vec::with_capacity(n);
    let mut unknown = Vec::with_capacity(n);
    let mut deferrals = Vec::with_capacity(n);
    let mut delays = Vec::with_capacity(n);
    let mut reasons = Vec::with_capacity(n);
    let mut nows = Vec::with_capacity(n);
    let mut numbers = Vec::with_capacity(n);
    let mut data = Vec::with_capacity(n);
    for (p, d) in batch {
        let Some(seq) = p.seq.filter(|_| batchable(p)) else {
            continue;
        };
        let (state, category, run_at, finished_at) = p.as_leased();
        seqs.push(seq);
        ids.push(p.id.0.as_str());
        owners.push(p.owner.as_str());
        states.push(state.as_str());
        categories.push(category_str(category));
        run_ats.push(run_at.map(ms));
        finished.push(finished_at.map(ms));
        attempts.push(int(p.attempts));
        unknown.push(int(p.unknown_attempts));
        deferrals.push(int(p.deferrals));
        delays.push(p.last_delay_ms.map(|v| v.min(i64::MAX as u64) as i64));
        reasons.push(p.attempt.reason.as_str());
        nows.push(ms(p.now));
        numbers.push(int(p.attempt.number));
        data.push(*d);
    }
    if seqs.is_empty() {
        return Ok(std::collections::HashSet::new());
    }
    let stmt = c.prepared(RECORD_MANY).await?;
    let rows = c
        .client
        .query(
            &stmt,
            &[
                &seqs,
                &ids,
                &owners,
                &states,
                &categories,
                &run_ats,
                &finished,
                &attempts,
                &unknown,
                &deferrals,
                &delays,
                &reasons,
                &nows,
                &numbers,
                &data,
            ],
        )
        .await
        .map_err(backend)?;
    Ok(rows.iter().map(|r| r.get::<_, String>(0)).collect())
}

/// The rare cases: the lease is not ours (or the job is gone), or a cancel waits.
pub async fn record_attempt_slow(
    c: &mut Conn,
    p: RecordAttemptParams,
    data: String,
) -> StoreResult<JobState> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let row = tx
        .query_opt(
            concat!("SELECT ", cols!(), " FROM jobs WHERE id = $1 FOR UPDATE"),
            &[&p.id.0],
        )
        .await
        .map_err(backend)?
        .ok_or_else(|| StoreError::NotFound(p.id.clone()))?;
    let job = job_from_row(&row)?;
    let r = p.recording(&job, data)?;
    tx.execute(
        "UPDATE jobs SET state = $1, category = $2, run_at = $3, finished_at = $4, attempts = $5, \
         unknown_attempts = $6, deferrals = $7, last_delay_ms = $8, last_reason = $9, \
         runs = runs + 1, lease_owner = NULL, lease_until = NULL, updated_at = $10 WHERE seq = $11",
        &[
            &r.plan.state.as_str(),
            &category_str(r.plan.category),
            &ms(r.plan.run_at),
            &r.plan.finished_at.map(ms),
            &int(p.attempts),
            &int(p.unknown_attempts),
            &int(p.deferrals),
            &r.last_delay_ms,
            &r.plan.reason,
            &ms(p.now),
            &job.seq,
        ],
    )
    .await
    .map_err(backend)?;
    tx.execute(
        "INSERT INTO attempts (job_seq, number, data) VALUES ($1, $2, $3)",
        &[&job.seq, &int(r.plan.number), &r.data],
    )
    .await
    .map_err(backend)?;
    tx.commit().await.map_err(backend)?;
    Ok(r.plan.state)
}

pub async fn release(c: &mut Conn, channel: &str, p: &ReleaseParams) -> StoreResult<u64> {
    let ids: Vec<&str> = p.ids.iter().map(|i| i.0.as_str()).collect();
    let tx = c.client.transaction().await.map_err(backend)?;
    let rows = tx
        .query(
            "UPDATE jobs SET state = 'ready', lease_owner = NULL, lease_until = NULL, updated_at = $1 \
             WHERE id = ANY($2) AND state = 'running' AND lease_owner = $3 RETURNING queue",
            &[&ms(p.now), &ids, &p.owner],
        )
        .await
        .map_err(backend)?;
    let mut queues: Vec<String> = rows.iter().map(|r| get(r, 0)).collect::<StoreResult<_>>()?;
    queues.sort();
    queues.dedup();
    for q in &queues {
        notify(&tx, channel, q).await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(rows.len() as u64)
}

pub async fn rescue(c: &mut Conn, channel: &str, p: &RescueParams) -> StoreResult<RescueReport> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let now = ms(p.now);
    let max = int(p.max_stalls);
    // The nodes that announced a presence lock. A free lock is a sign to look: the node died
    // (its session ended), or its connection blinked (a database restart, a terminated backend)
    // while it goes on sending its jobs. So the first rescue that finds it free notes when; a
    // node that announces itself again (each maintenance tick, on a new connection if need be)
    // takes its lock back, or at least says it is alive; one that stays silent for the grace
    // has its leases ended now and is forgotten. The lock is taken for this transaction only,
    // so a node that restarts under the same id takes it back after.
    let grace = i64::try_from(p.presence_grace.as_millis()).unwrap_or(i64::MAX);
    let nodes = tx
        .query(
            "SELECT worker, seen_at, free_since, \
             (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM nodes",
            &[],
        )
        .await
        .map_err(backend)?;
    let mut forgotten = 0;
    for row in nodes {
        let worker: String = get(&row, 0)?;
        let seen_at: Option<i64> = get(&row, 1)?;
        let free_since: Option<i64> = get(&row, 2)?;
        let db_now: i64 = get(&row, 3)?;
        let free: bool = tx
            .query_one(
                "SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema() || ':' || $2))",
                &[&crate::PRESENCE_LOCK_CLASS, &worker],
            )
            .await
            .map_err(backend)?
            .get(0);
        let dead = match (free, free_since) {
            (false, None) => false,
            (false, Some(_)) => {
                tx.execute(
                    "UPDATE nodes SET free_since = NULL WHERE worker = $1",
                    &[&worker],
                )
                .await
                .map_err(backend)?;
                false
            }
            // Free, and alive since it was first found so (or never found so): look again later.
            (true, None) => {
                mark_free(&tx, &worker, db_now).await?;
                false
            }
            (true, Some(since)) if seen_at.is_some_and(|s| s > since) => {
                mark_free(&tx, &worker, db_now).await?;
                false
            }
            (true, Some(since)) => db_now.saturating_sub(since) >= grace,
        };
        if dead {
            tx.execute(
                "UPDATE jobs SET lease_until = $1 - 1 \
                 WHERE state = 'running' AND lease_owner = $2 AND lease_until >= $1",
                &[&now, &worker],
            )
            .await
            .map_err(backend)?;
            tx.execute("DELETE FROM nodes WHERE worker = $1", &[&worker])
                .await
                .map_err(backend)?;
            forgotten += 1;
        }
    }
    if forgotten > 0 {
        // The others divide the endpoints' limits again, at once.
        notify(&tx, channel, ENDPOINTS_CHANGED).await?;
    }
    let dead = tx
        .execute(
            "UPDATE jobs SET state = 'dead', category = 'unknown_exhausted', stalls = stalls + 1, \
             lease_owner = NULL, lease_until = NULL, finished_at = $1, updated_at = $1, \
             last_reason = 'lease expired while running (the worker died or hung); stall ' \
                 || (stalls + 1) || ' over the limit of ' || $2::int \
             WHERE state = 'running' AND lease_until < $1 AND stalls + 1 > $2::int",
            &[&now, &max],
        )
        .await
        .map_err(backend)?;
    let ready = tx
        .execute(
            "UPDATE jobs SET state = 'ready', stalls = stalls + 1, lease_owner = NULL, \
             lease_until = NULL, run_at = LEAST(run_at, $1), updated_at = $1, \
             last_reason = 'lease expired while running (the worker died or hung); stall ' \
                 || (stalls + 1) || ' of ' || $2::int \
             WHERE state = 'running' AND lease_until < $1",
            &[&now, &max],
        )
        .await
        .map_err(backend)?;
    if ready > 0 {
        notify(&tx, channel, "").await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(RescueReport {
        requeued: ready,
        dead,
    })
}

/// Notes that `worker`'s presence lock was found free at `db_now` (the database's clock).
async fn mark_free(
    tx: &tokio_postgres::Transaction<'_>,
    worker: &str,
    db_now: i64,
) -> StoreResult<()> {
    tx.execute(
        "UPDATE nodes SET free_since = $2 WHERE worker = $1",
        &[&worker, &db_now],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

pub async fn nodes_live(c: &mut Conn) -> StoreResult<Vec<String>> {
    c.client
        .query(
            "SELECT worker FROM nodes ORDER BY worker COLLATE \"C\"",
            &[],
        )
        .await
        .map_err(backend)?
        .iter()
        .map(|r| get(r, 0))
        .collect()
}

pub async fn promote(c: &mut Conn, now: Timestamp) -> StoreResult<u64> {
    c.client
        .execute(
            "UPDATE jobs SET state = 'ready', updated_at = $1 \
             WHERE state IN ('scheduled', 'deferred') AND run_at <= $1",
            &[&ms(now)],
        )
        .await
        .map_err(backend)
}

/// [`redial_store::Store::group_counts`]: the waiting ones off `jobs_grouped`, the running
/// ones off `jobs_leased` (each condition is its index's: no read of finished jobs).
pub async fn group_counts(c: &mut Conn, queue: &str, limit: u32) -> StoreResult<GroupCounts> {
    const WAITING: &str = "SELECT grp, COUNT(*) FROM jobs WHERE queue = $1 AND grp IS NOT NULL \
         AND state IN ('ready', 'scheduled', 'deferred') GROUP BY grp";
    const RUNNING: &str = "SELECT grp, COUNT(*) FROM jobs WHERE state = 'running' AND queue = $1 \
         AND grp IS NOT NULL GROUP BY grp";
    let mut parts = Vec::with_capacity(2);
    for sql in [WAITING, RUNNING] {
        let rows = c.client.query(sql, &[&queue]).await.map_err(backend)?;
        parts.push(
            rows.iter()
                .map(|r| Ok((get(r, 0)?, u64::try_from(get::<i64>(r, 1)?).unwrap_or(0))))
                .collect::<StoreResult<Vec<(String, u64)>>>()?,
        );
    }
    let running = parts.pop().unwrap_or_default();
    let waiting = parts.pop().unwrap_or_default();
    Ok(GroupCounts::from_parts(waiting, running, limit))
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
                   (SELECT MIN(run_at) FROM jobs WHERE queue = $1 AND grp IS NULL AND {WAITING} \
                      AND run_at > $2), \
                   (SELECT run_at FROM jobs WHERE state IN ('scheduled', 'deferred') \
                      AND run_at > $2 AND queue = $1 AND COALESCE(grp, '') <> '' \
                      ORDER BY run_at LIMIT 1))"
            ),
            &[&queue, &ms(after)],
        )
        .await
        .map_err(backend)?;
    Ok(ts(get(&row, 0)?))
}

pub async fn expire_deadlines(c: &mut Conn, p: &ExpireParams) -> StoreResult<u64> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let now = ms(p.now);
    let mut n = 0;
    // Endpoints with a known hold first, so their jobs' reasons name it.
    for (endpoint, why) in &p.reasons {
        n += tx
            .execute(
                &format!(
                    "UPDATE jobs SET state = 'dead', category = 'deadline_exceeded', finished_at = $1, \
                     updated_at = $1, last_reason = 'deadline passed while held by its endpoint: ' || $3 \
                     WHERE deadline IS NOT NULL AND deadline <= $1 AND endpoint = $2 AND {WAITING}"
                ),
                &[&now, endpoint, why],
            )
            .await
            .map_err(backend)?;
    }
    n += tx
        .execute(
            &format!(
                "UPDATE jobs SET state = 'dead', category = 'deadline_exceeded', finished_at = $1, \
                 updated_at = $1, last_reason = 'deadline passed before the job could run' \
                 WHERE deadline IS NOT NULL AND deadline <= $1 AND {WAITING}"
            ),
            &[&now],
        )
        .await
        .map_err(backend)?;
    tx.commit().await.map_err(backend)?;
    Ok(n)
}

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

const REPLAY_SET: &str = "state = 'ready', category = NULL, attempts = 0, unknown_attempts = 0, \
    deferrals = 0, stalls = 0, last_delay_ms = NULL, replays = replays + 1, run_at = $1, \
    finished_at = NULL, updated_at = $1, cancel_requested = FALSE, \
    last_reason = 'replayed from the dead letters'";

async fn locked(tx: &tokio_postgres::Transaction<'_>, id: &JobId) -> StoreResult<Job> {
    let row = tx
        .query_opt(
            concat!("SELECT ", cols!(), " FROM jobs WHERE id = $1 FOR UPDATE"),
            &[&id.0],
        )
        .await
        .map_err(backend)?
        .ok_or_else(|| StoreError::NotFound(id.clone()))?;
    job_from_row(&row)
}

pub async fn replay(c: &mut Conn, channel: &str, id: &JobId, now: Timestamp) -> StoreResult<Job> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let job = locked(&tx, id).await?;
    may_replay(&job)?;
    tx.execute(
        &format!("UPDATE jobs SET {REPLAY_SET} WHERE seq = $2"),
        &[&ms(now), &job.seq],
    )
    .await
    .map_err(backend)?;
    notify(&tx, channel, &job.queue).await?;
    let job = must_get(&tx, id).await?;
    tx.commit().await.map_err(backend)?;
    Ok(job)
}

pub async fn dismiss(c: &mut Conn, id: &JobId) -> StoreResult<()> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let job = locked(&tx, id).await?;
    may_dismiss(&job)?;
    delete_counted(&tx, "DELETE FROM jobs WHERE seq = $1", &[&job.seq]).await?;
    tx.commit().await.map_err(backend)
}

/// Runs `delete` (a `DELETE FROM jobs ...` without `RETURNING`) and deletes the deleted jobs'
/// attempts in the same statement (no foreign key does it: keeping one cost every recorded
/// attempt a row lock on its job). Returns how many jobs it deleted.
async fn delete_counted(
    c: &impl tokio_postgres::GenericClient,
    delete: &str,
    params: &[Param<'_>],
) -> StoreResult<u64> {
    let sql = format!(
        "WITH d AS ({delete} RETURNING seq), \
         a AS (DELETE FROM attempts WHERE job_seq IN (SELECT seq FROM d)) \
         SELECT count(*) FROM d"
    );
    let n: i64 = c
        .query_one(sql.as_str(), params)
        .await
        .map_err(backend)?
        .get(0);
    Ok(n.max(0) as u64)
}

pub async fn cancel(c: &mut Conn, id: &JobId, now: Timestamp) -> StoreResult<Job> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let job = locked(&tx, id).await?;
    match redial_store::cancel(&job)? {
        Cancel::Now => {
            tx.execute(
                "UPDATE jobs SET state = 'cancelled', finished_at = $1, updated_at = $1, \
                 last_reason = $3 WHERE seq = $2",
                &[&ms(now), &job.seq, &CANCELLED],
            )
            .await
            .map_err(backend)?;
        }
        Cancel::WhenTheAttemptEnds => {
            tx.execute(
                "UPDATE jobs SET cancel_requested = TRUE, updated_at = $1 WHERE seq = $2",
                &[&ms(now), &job.seq],
            )
            .await
            .map_err(backend)?;
        }
    }
    let job = must_get(&tx, id).await?;
    tx.commit().await.map_err(backend)?;
    Ok(job)
}

pub async fn bulk_replay(
    c: &mut Conn,
    channel: &str,
    f: &JobFilter,
    now: Timestamp,
) -> StoreResult<u64> {
    let mut sql = format!("UPDATE jobs SET {REPLAY_SET} WHERE state = 'dead'");
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(ms(now))];
    push_filter(&mut sql, &mut params, f);
    let tx = c.client.transaction().await.map_err(backend)?;
    let n = tx.execute(&sql, &refs(&params)).await.map_err(backend)?;
    if n > 0 {
        notify(&tx, channel, "").await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(n)
}

pub async fn bulk_dismiss(c: &mut Conn, f: &JobFilter) -> StoreResult<u64> {
    let mut sql = "DELETE FROM jobs WHERE state = 'dead'".to_owned();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    push_filter(&mut sql, &mut params, f);
    delete_counted(&c.client, &sql, &refs(&params)).await
}

fn parse_state(s: &str) -> StoreResult<JobState> {
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
            "SELECT queue, endpoint, state, category, COUNT(*), \
               MIN(updated_at) FILTER (WHERE state = 'deferred') \
             FROM jobs GROUP BY queue, endpoint, state, category",
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

pub async fn cleanup(c: &mut Conn, p: &CleanupParams) -> StoreResult<u64> {
    let limit = i64::from(p.limit);
    let by_age = delete_counted(
        &c.client,
        "DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs WHERE \
           (state IN ('completed', 'cancelled') AND finished_at < $1) \
           OR (state = 'dead' AND finished_at < $2) LIMIT $3)",
        &[&ms(p.completed_before), &ms(p.dead_before), &limit],
    )
    .await?;
    let Some(keep) = p.completed_keep else {
        return Ok(by_age);
    };
    let room = u64::from(p.limit).saturating_sub(by_age);
    let by_count = delete_counted(
        &c.client,
        "DELETE FROM jobs WHERE seq IN (SELECT seq FROM (SELECT seq FROM jobs \
           WHERE state IN ('completed', 'cancelled') ORDER BY finished_at DESC, seq DESC \
           OFFSET $1) AS old LIMIT $2)",
        &[
            &(keep.min(i64::MAX as u64) as i64),
            &(room.min(i64::MAX as u64) as i64),
        ],
    )
    .await?;
    Ok(by_age + by_count)
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

const SCHEDULE_COLUMNS: &str =
    "id, definition, paused, next_at, last_occurrence, last_fired_at, created_at, updated_at";

fn schedule(r: &Row) -> StoreResult<ScheduleRecord> {
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

const SCHEDULES_DUE: &str = "SELECT id, definition, paused, next_at, last_occurrence, \
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

const SCHEDULE_ADVANCE: &str = "UPDATE schedules SET next_at = $3, \
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
