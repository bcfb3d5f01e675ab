//! The SQL behind each store method. Every function runs inside the caller's connection and
//! either commits one transaction or changes nothing.
//!
//! One file, over 800 lines, on purpose: one function per store method, in the trait's order,
//! and the methods share the statements' spelling (the `waiting!` condition the partial indexes
//! need, the column list, savepoints); the rules they apply are `redial_store::rules`'.

use crate::schema::ATTEMPT_KEY_BITS;
use redial_policy::{DeadCategory, Timestamp};
use redial_store::*;
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row, Statement};

/// The waiting states (ready, scheduled, deferred) as the partial indexes spell them: a chain of
/// `=`, not an `IN` list (which SQLite evaluates through a temporary b-tree, schema migration 7).
/// A query must spell it exactly so to use those indexes.
macro_rules! waiting {
    () => {
        "(state = 'ready' OR state = 'scheduled' OR state = 'deferred')"
    };
}

/// Waiting and ungrouped: the condition of `jobs_runnable` (schema migration 15).
macro_rules! ungrouped {
    () => {
        "grp IS NULL AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred')"
    };
}

/// Waiting and grouped: the condition of `jobs_grouped` and `jobs_grouped_due`.
macro_rules! grouped {
    () => {
        "grp IS NOT NULL AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred')"
    };
}

/// The columns of a job, in the order `RawJob::read` reads them.
const COLS: &str = redial_store::job_columns!();

pub fn backend(e: rusqlite::Error) -> StoreError {
    classify(e.sqlite_error_code(), e.to_string())
}

/// What a failure of SQLite's means for the caller: the database cannot serve now (a full disk,
/// a read-only, locked or damaged file, an I/O error), or something else went wrong.
pub fn classify(code: Option<rusqlite::ErrorCode>, message: String) -> StoreError {
    use rusqlite::ErrorCode::*;
    match code {
        Some(
            DiskFull | ReadOnly | SystemIoFailure | CannotOpen | PermissionDenied | DatabaseBusy
            | DatabaseLocked | OutOfMemory | DatabaseCorrupt | NotADatabase,
        ) => StoreError::Unavailable(message),
        _ => StoreError::Backend(message),
    }
}

/// A savepoint whose statements are prepared once and cached: rusqlite's own `savepoint()`
/// parses `SAVEPOINT`/`RELEASE` afresh each time, which cost more than the work of a small
/// request. Rolls back when dropped without `commit`.
pub struct Sp<'c> {
    conn: &'c Connection,
    done: bool,
    /// Where the count log stood: a rollback drops what was logged since.
    mark: usize,
}

impl<'c> Sp<'c> {
    pub fn begin(conn: &'c Connection) -> StoreResult<Sp<'c>> {
        run_cached(conn, "SAVEPOINT op")?;
        Ok(Sp {
            conn,
            done: false,
            mark: crate::counts::mark(),
        })
    }

    pub fn commit(mut self) -> StoreResult<()> {
        self.done = true;
        run_cached(self.conn, "RELEASE op")
    }
}

impl std::ops::Deref for Sp<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Sp<'_> {
    fn drop(&mut self) {
        if !self.done {
            let _ = run_cached(self.conn, "ROLLBACK TO op");
            let _ = run_cached(self.conn, "RELEASE op");
            crate::counts::rollback_to(self.mark);
        }
    }
}

fn run_cached(c: &Connection, sql: &str) -> StoreResult<()> {
    c.prepare_cached(sql)
        .and_then(|mut s| s.raw_execute())
        .map(|_| ())
        .map_err(backend)
}

use crate::counts::{self, Place};
use redial_store::{corrupt_json as json_err, instant as ts, millis as ms};

/// Runs a statement that ends in `RETURNING queue, endpoint`, moving each job it returns from
/// `from` to `to` in the counts; returns how many.
fn run_moving<P: rusqlite::Params>(
    c: &Connection,
    sql: &str,
    params: P,
    from: Option<Place>,
    to: Option<Place>,
) -> StoreResult<u64> {
    let mut stmt = c.prepare_cached(sql).map_err(backend)?;
    let mut rows = stmt.query(params).map_err(backend)?;
    let mut by: std::collections::HashMap<(String, String), i64> = Default::default();
    while let Some(r) = rows.next().map_err(backend)? {
        let key = (r.get(0).map_err(backend)?, r.get(1).map_err(backend)?);
        *by.entry(key).or_default() += 1;
    }
    let mut n = 0;
    for ((queue, endpoint), k) in by {
        counts::moved(&queue, &endpoint, from, to, k);
        n += k as u64;
    }
    Ok(n)
}

/// A job's place as stored: its state and dead category.
fn place(job: &Job) -> Place {
    (job.state, job.category)
}

fn category_str(c: Option<DeadCategory>) -> Option<&'static str> {
    c.map(DeadCategory::as_str)
}

/// A SQLite row's columns, as the shared decoder reads them.
struct Columns<'r, 's>(&'r Row<'s>);

impl JobColumns for Columns<'_, '_> {
    type Error = rusqlite::Error;
    fn text(&self, i: usize) -> rusqlite::Result<String> {
        self.0.get(i)
    }
    fn opt_text(&self, i: usize) -> rusqlite::Result<Option<String>> {
        self.0.get(i)
    }
    fn int(&self, i: usize) -> rusqlite::Result<i64> {
        self.0.get(i)
    }
    fn opt_int(&self, i: usize) -> rusqlite::Result<Option<i64>> {
        self.0.get(i)
    }
    fn int32(&self, i: usize) -> rusqlite::Result<i32> {
        self.0
            .get::<_, i64>(i)
            .map(|v| v.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32)
    }
    fn flag(&self, i: usize) -> rusqlite::Result<bool> {
        self.0.get::<_, i64>(i).map(|v| v != 0)
    }
}

fn raw_from_row(r: &Row<'_>) -> rusqlite::Result<RawJob> {
    RawJob::read(&Columns(r))
}

/// Runs a query and maps every row.
fn query_rows<T, P, F>(c: &Connection, sql: &str, params: P, map: F) -> StoreResult<Vec<T>>
where
    P: rusqlite::Params,
    F: FnMut(&Row<'_>) -> rusqlite::Result<T>,
{
    let mut stmt = c.prepare_cached(sql).map_err(backend)?;
    let rows = stmt
        .query_map(params, map)
        .map_err(backend)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(backend);
    rows
}

fn query_jobs(c: &Connection, sql: &str, params: &[Value]) -> StoreResult<Vec<Job>> {
    let raws = query_rows(c, sql, params_from_iter(params.iter()), raw_from_row)?;
    raws.into_iter().map(RawJob::decode).collect()
}

fn get(c: &Connection, id: &JobId) -> StoreResult<Option<Job>> {
    get_raw(c, id)?.map(RawJob::decode).transpose()
}

fn get_raw(c: &Connection, id: &JobId) -> StoreResult<Option<RawJob>> {
    static SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {COLS} FROM jobs WHERE id = ?1"));
    c.prepare_cached(&SQL)
        .and_then(|mut s| {
            let mut rows = s.query([&id.0])?;
            rows.next()?.map(raw_from_row).transpose()
        })
        .map_err(backend)
}

fn must_get(c: &Connection, id: &JobId) -> StoreResult<Job> {
    get(c, id)?.ok_or_else(|| StoreError::NotFound(id.clone()))
}

pub fn insert(tx: &Connection, job: NewJob) -> StoreResult<InsertOutcome> {
    let request = serde_json::to_string(&job.request).map_err(json_err)?;
    let state = job.initial_state();
    let tags = serde_json::to_string(&job.tags).map_err(json_err)?;
    let policy = job
        .policy
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(json_err)?;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO jobs (id, queue, endpoint, state, request, idempotency_key, priority, run_at, \
             deadline, tags, policy, created_at, updated_at, grp) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13) \
             ON CONFLICT (id) DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                job.id.0,
                job.queue,
                job.endpoint,
                state.as_str(),
                request,
                job.idempotency_key,
                job.priority,
                ms(job.run_at),
                job.deadline.map(ms),
                tags,
                policy,
                ms(job.created_at),
                job.group,
            ])
        })
        .map_err(backend)?;
    if inserted == 0 {
        // The id exists: the same job again is a duplicate, anything else a conflict.
        let existing = must_get(tx, &job.id)?;
        let same = existing.queue == job.queue
            && existing.request.same_as(&job.request)
            && existing.idempotency_key == job.idempotency_key;
        return Ok(if same {
            InsertOutcome::Duplicate(existing)
        } else {
            InsertOutcome::Conflict(existing)
        });
    }
    counts::moved(&job.queue, &job.endpoint, None, Some((state, None)), 1);
    // The job as stored, built from what was written rather than read back.
    Ok(InsertOutcome::Inserted(
        job.into_stored(tx.last_insert_rowid()),
    ))
}

pub fn get_with_attempts(
    c: &mut Connection,
    id: &JobId,
) -> StoreResult<Option<(Job, Vec<Attempt>)>> {
    let Some(job) = get(c, id)? else {
        return Ok(None);
    };
    let rows = query_rows(
        c,
        "SELECT data FROM attempts WHERE id >= ?1 AND id < ?2 ORDER BY id",
        [attempt_key(job.seq, 0)?, attempt_key(job.seq + 1, 0)?],
        |r| r.get::<_, String>(0),
    )?;
    let attempts = rows
        .iter()
        .map(|d| serde_json::from_str(d).map_err(json_err))
        .collect::<StoreResult<Vec<Attempt>>>()?;
    Ok(Some((job, attempts)))
}

/// Appends the filter's conditions to `sql` and their values to `params`.
fn push_filter(sql: &mut String, params: &mut Vec<Value>, f: &JobFilter) {
    if let Some(s) = f.state {
        // A literal from the fixed set of state names, not a parameter: only then can SQLite use
        // the partial index of that state (jobs_dead).
        sql.push_str(&format!(" AND state = '{}'", s.as_str()));
    }
    push_conditions(sql, params, f.conditions());
}

fn push_conditions(sql: &mut String, params: &mut Vec<Value>, conditions: Vec<Condition>) {
    for c in conditions {
        params.push(match c.value {
            SqlValue::Text(t) => Value::Text(t),
            SqlValue::Int(i) => Value::Integer(i),
        });
        sql.push_str(&format!(" AND {} ?{}", c.clause, params.len()));
    }
}

pub fn list(c: &mut Connection, p: &JobListParams) -> StoreResult<JobPage> {
    let mut sql = format!("SELECT {COLS} FROM jobs WHERE 1=1");
    let mut params = Vec::new();
    let state_only = JobFilter {
        state: p.filter.state,
        ..JobFilter::default()
    };
    push_filter(&mut sql, &mut params, &state_only);
    push_conditions(&mut sql, &mut params, p.conditions());
    params.push(Value::Integer(p.rows_to_read()));
    sql.push_str(&format!(" ORDER BY seq LIMIT ?{}", params.len()));
    Ok(JobPage::from_rows(query_jobs(c, &sql, &params)?, p.limit))
}

/// Runs `sql` once per id in one transaction, binding `?1` to `value`, `?2` to the id and `?3` to
/// the lease owner; returns how many rows changed.
fn update_owned(
    c: &mut Connection,
    sql: &str,
    value: i64,
    ids: &[JobId],
    owner: &str,
) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let mut n = 0;
    {
        let mut stmt = tx.prepare_cached(sql).map_err(backend)?;
        for id in ids {
            n += stmt.execute(params![value, id.0, owner]).map_err(backend)? as u64;
        }
    }
    tx.commit()?;
    Ok(n)
}

pub fn heartbeat(c: &mut Connection, p: &HeartbeatParams) -> StoreResult<u64> {
    update_owned(
        c,
        "UPDATE jobs SET lease_until = ?1 WHERE id = ?2 AND state = 'running' AND lease_owner = ?3",
        ms(p.lease_until),
        &p.ids,
        &p.owner,
    )
}

/// `data` is the attempt already serialised (off the storage thread) for the number the caller
/// expects; if the job's count says otherwise, it is serialised again here. Returns the state the
/// job was left in.
pub fn record_attempt(
    c: &mut Connection,
    p: RecordAttemptParams,
    data: String,
) -> StoreResult<JobState> {
    // The common case takes no savepoint (each costs a copy of every page it touches) and reads
    // nothing: the attempt goes in under the number the caller expects, then one update applies
    // the decision only if the job is as the caller leased it (ours, that many runs before, no
    // cancel waiting). Each statement is atomic; if the update finds the job otherwise, the
    // attempt comes out again and the careful path decides. An I/O error fails the whole batch
    // at commit.
    let (Some(seq), Some(runs_before)) = (p.seq, p.attempt.number.checked_sub(1)) else {
        return record_attempt_slow(c, p, data);
    };
    let (state, category, run_at, finished_at) = p.as_leased();
    let number = p.attempt.number;
    let key = attempt_key(seq, number)?;
    let inserted = c
        .prepare_cached("INSERT OR IGNORE INTO attempts (id, data) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![key, data]))
        .map_err(backend)?;
    if inserted == 0 {
        // That number is taken: the job is not where the caller thinks.
        return record_attempt_slow(c, p, data);
    }
    let last_delay_ms = p.last_delay_ms.map(|v| v.min(i64::MAX as u64) as i64);
    let updated = c
        .prepare_cached(
            "UPDATE jobs SET state = ?1, category = ?2, run_at = COALESCE(?3, run_at), \
             finished_at = ?4, attempts = ?5, unknown_attempts = ?6, deferrals = ?7, \
             last_delay_ms = ?8, last_reason = ?9, runs = ?10, lease_owner = NULL, \
             lease_until = NULL, updated_at = ?11 \
             WHERE seq = ?12 AND id = ?13 AND state = 'running' AND lease_owner = ?14 \
             AND cancel_requested = 0 AND runs = ?15",
        )
        .and_then(|mut s| {
            s.execute(params![
                state.as_str(),
                category_str(category),
                run_at.map(ms),
                finished_at.map(ms),
                p.attempts,
                p.unknown_attempts,
                p.deferrals,
                last_delay_ms,
                p.attempt.reason,
                number,
                ms(p.now),
                seq,
                p.id.0,
                p.owner,
                runs_before,
            ])
        })
        .map_err(backend)?;
    if updated == 1 {
        counts::moved(
            &p.queue,
            &p.endpoint,
            Some((JobState::Running, None)),
            Some((state, category)),
            1,
        );
        return Ok(state);
    }
    c.prepare_cached("DELETE FROM attempts WHERE id = ?1")
        .and_then(|mut s| s.execute([key]))
        .map_err(backend)?;
    record_attempt_slow(c, p, data)
}

/// An attempt's rowid: its job's seq in the high bits, its number in the low ones.
fn attempt_key(seq: i64, number: u32) -> StoreResult<i64> {
    if number >= 1 << ATTEMPT_KEY_BITS || !(0..1 << (63 - ATTEMPT_KEY_BITS)).contains(&seq) {
        return Err(StoreError::Backend(format!(
            "attempt {number} of job seq {seq} is beyond what the attempts table can number"
        )));
    }
    Ok((seq << ATTEMPT_KEY_BITS) | i64::from(number))
}

fn insert_attempt(c: &Connection, seq: i64, number: u32, data: &str) -> StoreResult<()> {
    let key = attempt_key(seq, number)?;
    c.prepare_cached("INSERT INTO attempts (id, data) VALUES (?1, ?2)")
        .and_then(|mut s| s.execute(params![key, data]))
        .map(|_| ())
        .map_err(backend)
}

/// The rare cases: the lease is not ours (or the job is gone), or a cancel waits.
fn record_attempt_slow(
    c: &mut Connection,
    p: RecordAttemptParams,
    data: String,
) -> StoreResult<JobState> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, &p.id)?;
    let r = p.recording(&job, data)?;
    tx.prepare_cached(
        "UPDATE jobs SET state = ?1, category = ?2, run_at = ?3, finished_at = ?4, attempts = ?5, \
         unknown_attempts = ?6, deferrals = ?7, last_delay_ms = ?8, last_reason = ?9, runs = runs + 1, \
         lease_owner = NULL, lease_until = NULL, updated_at = ?10 WHERE seq = ?11",
    )
    .and_then(|mut s| {
        s.execute(params![
            r.plan.state.as_str(),
            category_str(r.plan.category),
            ms(r.plan.run_at),
            r.plan.finished_at.map(ms),
            p.attempts,
            p.unknown_attempts,
            p.deferrals,
            r.last_delay_ms,
            r.plan.reason,
            ms(p.now),
            job.seq
        ])
    })
    .map_err(backend)?;
    counts::moved(
        &job.queue,
        &job.endpoint,
        Some(place(&job)),
        Some((r.plan.state, r.plan.category)),
        1,
    );
    insert_attempt(&tx, job.seq, r.plan.number, &r.data)?;
    tx.commit()?;
    Ok(r.plan.state)
}

pub fn release(c: &mut Connection, p: &ReleaseParams) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let mut n = 0;
    for id in &p.ids {
        n += run_moving(
            &tx,
            "UPDATE jobs SET state = 'ready', lease_owner = NULL, lease_until = NULL, updated_at = ?1 \
             WHERE id = ?2 AND state = 'running' AND lease_owner = ?3 RETURNING queue, endpoint",
            params![ms(p.now), id.0, p.owner],
            Some((JobState::Running, None)),
            Some((JobState::Ready, None)),
        )?;
    }
    tx.commit()?;
    Ok(n)
}

// Maintenance statements, named so that a test can check they read by index: each runs every
// few seconds, and a scan of the jobs table would hold the one writer for as long as the table
// is large.
const RESCUE_DEAD: &str =
    "UPDATE jobs SET state = 'dead', category = 'unknown_exhausted', stalls = stalls + 1, \
     lease_owner = NULL, lease_until = NULL, finished_at = ?1, updated_at = ?1, \
     last_reason = 'lease expired while running (the worker died or hung); stall ' \
         || (stalls + 1) || ' over the limit of ' || ?2 \
     WHERE state = 'running' AND lease_until < ?1 AND stalls + 1 > ?2 RETURNING queue, endpoint";
const RESCUE_READY: &str =
    "UPDATE jobs SET state = 'ready', stalls = stalls + 1, lease_owner = NULL, lease_until = NULL, \
     run_at = MIN(run_at, ?1), updated_at = ?1, \
     last_reason = 'lease expired while running (the worker died or hung); stall ' \
         || (stalls + 1) || ' of ' || ?2 \
     WHERE state = 'running' AND lease_until < ?1 RETURNING queue, endpoint";
/// ?2: the state promoted (scheduled or deferred), one at a time so each job's is known.
const PROMOTE: &str = "UPDATE jobs SET state = 'ready', updated_at = ?1 \
     WHERE state IN ('scheduled', 'deferred') AND run_at <= ?1 AND state = ?2 \
     RETURNING queue, endpoint";
const CLEANUP_BY_AGE: &str =
    "DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs INDEXED BY jobs_finished \
     WHERE (state = 'completed' OR state = 'dead' OR state = 'cancelled') \
     AND finished_at < MAX(?1, ?2) \
     AND CASE WHEN state = 'dead' THEN finished_at < ?2 ELSE finished_at < ?1 END \
     LIMIT ?3) RETURNING queue, endpoint, state, category";
const CLEANUP_BY_COUNT: &str =
    "DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs INDEXED BY jobs_finished \
     WHERE (state = 'completed' OR state = 'dead' OR state = 'cancelled') \
     AND state <> 'dead' ORDER BY finished_at DESC, seq DESC LIMIT ?2 OFFSET ?1) \
     RETURNING queue, endpoint, state, category";

pub fn rescue(c: &mut Connection, p: &RescueParams) -> StoreResult<RescueReport> {
    let tx = Sp::begin(c)?;
    let now = ms(p.now);
    let running = Some((JobState::Running, None));
    let dead = run_moving(
        &tx,
        RESCUE_DEAD,
        params![now, p.max_stalls],
        running,
        Some((JobState::Dead, Some(DeadCategory::UnknownExhausted))),
    )?;
    let ready = run_moving(
        &tx,
        RESCUE_READY,
        params![now, p.max_stalls],
        running,
        Some((JobState::Ready, None)),
    )?;
    tx.commit()?;
    Ok(RescueReport {
        requeued: ready,
        dead,
    })
}

pub fn promote(c: &mut Connection, now: Timestamp) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let mut n = 0;
    for from in [JobState::Scheduled, JobState::Deferred] {
        n += run_moving(
            &tx,
            PROMOTE,
            params![ms(now), from.as_str()],
            Some((from, None)),
            Some((JobState::Ready, None)),
        )?;
    }
    tx.commit()?;
    Ok(n)
}

/// The highest priority level below `?2` with waiting ungrouped jobs in a queue.
const PRIORITY_BELOW: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_runnable WHERE queue = ?1 AND ",
    ungrouped!(),
    " AND priority < ?2 ORDER BY priority DESC LIMIT 1"
);
/// The earliest run time after `?3` within one priority level, of ungrouped jobs.
const FIRST_AFTER: &str = concat!(
    "SELECT run_at FROM jobs INDEXED BY jobs_runnable WHERE queue = ?1 AND ",
    ungrouped!(),
    " AND priority = ?2 AND run_at > ?3 ORDER BY run_at LIMIT 1"
);
/// The earliest run time after `?2` of the queue's grouped jobs.
const GROUPED_FIRST_AFTER: &str = concat!(
    "SELECT run_at FROM jobs INDEXED BY jobs_grouped_due WHERE queue = ?1 AND ",
    grouped!(),
    " AND run_at > ?2 ORDER BY run_at LIMIT 1"
);

/// The earliest run time after `after` among the queue's waiting jobs. `jobs_runnable` orders
/// by priority before run time, so this probes each priority level that has waiting ungrouped
/// jobs (two index seeks per level; queues use a handful): no index of its own to keep up on
/// every enqueue and lease (migration 10). Grouped jobs have one (`jobs_grouped_due`).
pub fn next_run_at(
    c: &mut Connection,
    queue: &str,
    after: Timestamp,
) -> StoreResult<Option<Timestamp>> {
    let after = ms(after);
    let mut below = c.prepare_cached(PRIORITY_BELOW).map_err(backend)?;
    let mut first = c.prepare_cached(FIRST_AFTER).map_err(backend)?;
    let mut earliest: Option<i64> = c
        .prepare_cached(GROUPED_FIRST_AFTER)
        .and_then(|mut s| s.query_row(params![queue, after], |r| r.get(0)).optional())
        .map_err(backend)?;
    // Priorities are i32: every level is below i64::MAX.
    let mut level = i64::MAX;
    while let Some(priority) = below
        .query_row(params![queue, level], |r| r.get::<_, i64>(0))
        .optional()
        .map_err(backend)?
    {
        let at: Option<i64> = first
            .query_row(params![queue, priority, after], |r| r.get(0))
            .optional()
            .map_err(backend)?;
        earliest = earliest.into_iter().chain(at).min();
        level = priority;
    }
    Ok(ts(earliest))
}

/// `?n, ?n+1, ...` for `count` values starting at parameter `first`.
fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads in lease order, grouped and ungrouped jobs together (not the engine's path: it sorts
/// the waiting jobs it reads).
pub fn candidates(c: &mut Connection, p: &CandidateParams) -> StoreResult<Vec<Candidate>> {
    let mut params = vec![Value::Text(p.queue.clone()), Value::Integer(ms(p.now))];
    let mut sql = concat!(
        "SELECT seq, id, endpoint, attempts > 0, run_at, grp FROM jobs WHERE queue = ?1 AND ",
        waiting!(),
        " AND run_at <= ?2"
    )
    .to_owned();
    if !p.exclude.is_empty() {
        sql.push_str(&format!(
            " AND endpoint NOT IN ({})",
            placeholders(params.len() + 1, p.exclude.len())
        ));
        params.extend(p.exclude.iter().map(|e| Value::Text(e.clone())));
    }
    if !p.exclude_retries.is_empty() {
        sql.push_str(&format!(
            " AND NOT (attempts > 0 AND endpoint IN ({}))",
            placeholders(params.len() + 1, p.exclude_retries.len())
        ));
        params.extend(p.exclude_retries.iter().map(|e| Value::Text(e.clone())));
    }
    if !p.exclude_firsts.is_empty() {
        sql.push_str(&format!(
            " AND NOT (attempts = 0 AND endpoint IN ({}))",
            placeholders(params.len() + 1, p.exclude_firsts.len())
        ));
        params.extend(p.exclude_firsts.iter().map(|e| Value::Text(e.clone())));
    }
    params.push(Value::Integer(i64::from(p.limit)));
    sql.push_str(&format!(
        " ORDER BY priority DESC, run_at, seq LIMIT ?{}",
        params.len()
    ));
    let rows = query_rows(c, &sql, params_from_iter(params.iter()), |r| {
        Ok(Candidate {
            seq: r.get(0)?,
            id: JobId(r.get(1)?),
            endpoint: r.get(2)?,
            is_retry: r.get(3)?,
            run_at: Timestamp::from_unix_millis(r.get(4)?),
            group: r.get(5)?,
        })
    })?;
    Ok(rows)
}

/// Returns the leased rows undecoded: the caller decodes them off the storage thread.
/// Leases one job, found by seq, if it is still runnable: ?1 owner, ?2 lease until, ?3 now, ?4 seq.
const LEASE_ONE: &str = concat!(
    "UPDATE jobs SET state = 'running', lease_owner = ?1, lease_until = ?2, updated_at = ?3 \
     WHERE seq = ?4 AND ",
    waiting!(),
    " AND run_at <= ?3"
);

/// Leases the jobs of `seqs` that are still runnable, in that order.
pub fn lease_ids(c: &mut Connection, p: &LeaseIdsParams) -> StoreResult<Vec<RawJob>> {
    let (seqs, owner, now, lease_until) = (&p.seqs, &p.owner, p.now, p.lease_until);
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    let tx = Sp::begin(c)?;
    // Cached statements run per job, found by rowid: an `IN (...)` list of varying length would
    // be parsed afresh for nearly every call, and `RETURNING` builds a temporary table every run.
    let mut leased = Vec::with_capacity(seqs.len());
    {
        let mut update = tx.prepare_cached(LEASE_ONE).map_err(backend)?;
        let mut before = tx
            .prepare_cached("SELECT queue, endpoint, state FROM jobs WHERE seq = ?1")
            .map_err(backend)?;
        for seq in seqs {
            // What the lease moves, for the counts (this path is not the engine's).
            let was: Option<(String, String, String)> = before
                .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
                .map_err(backend)?;
            if update
                .execute(params![owner, ms(lease_until), ms(now), seq])
                .map_err(backend)?
                == 1
            {
                if let Some((queue, endpoint, state)) = was {
                    let from: JobState = state.parse().map_err(StoreError::Backend)?;
                    let to = Some((JobState::Running, None));
                    counts::moved(&queue, &endpoint, Some((from, None)), to, 1);
                }
                leased.push(*seq);
            }
        }
    }
    static SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {COLS} FROM jobs WHERE seq = ?1"));
    let mut jobs = Vec::with_capacity(leased.len());
    {
        let mut read = tx.prepare_cached(&SQL).map_err(backend)?;
        for seq in leased {
            let mut rows = read.query([seq]).map_err(backend)?;
            if let Some(r) = rows.next().map_err(backend)? {
                jobs.push(raw_from_row(r).map_err(backend)?);
            }
        }
    }
    tx.commit()?;
    Ok(jobs)
}

/// How far one lease request reads past held endpoints' jobs, and where the deep part of the
/// last request stopped, per queue. A held endpoint with a large backlog at the head of a queue
/// would otherwise make every lease read all of it to reach the other endpoints' jobs.
#[derive(Debug)]
pub struct LeaseScan {
    /// Skipped rows read from the head of the queue, every request.
    pub top: usize,
    /// Skipped rows read further on, from where the last request stopped.
    pub deep: usize,
    resume: std::collections::HashMap<String, ScanPos>,
    /// Per queue, the last group a lease gave a turn to: the next lease's round starts after it.
    groups: std::collections::HashMap<String, String>,
}

impl Default for LeaseScan {
    fn default() -> Self {
        LeaseScan {
            top: 1024,
            deep: 8192,
            resume: std::collections::HashMap::new(),
            groups: std::collections::HashMap::new(),
        }
    }
}

/// Candidates chosen so far in one lease request.
struct Picker<'a> {
    read: rusqlite::CachedStatement<'a>,
    max: usize,
    taking: Vec<(Candidate, RawJob)>,
    failing: Vec<(Candidate, RawJob)>,
    exclude: Vec<String>,
    exclude_retries: Vec<String>,
    exclude_firsts: Vec<String>,
    last: Option<ScanPos>,
    /// The seqs taken or failed so far: a group read again in a later pass of the round-robin
    /// passes over them.
    picked: std::collections::HashSet<i64>,
}

/// Why a scan stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanEnd {
    /// As many taken as wanted.
    Full,
    /// Its budget of skipped rows spent.
    Budget,
    /// No more rows.
    End,
    /// The group being read holds (a limit of its own).
    GroupHeld,
}

impl Picker<'_> {
    /// Steps `stmt` (columns seq, endpoint, is retry, priority, run_at), asking admission of each
    /// job not left out, until enough are taken, `budget` rows were skipped, or rows run out.
    /// Steps `stmt` (columns seq, endpoint, is retry, priority, run_at), asking admission of each
    /// job not left out, until enough are taken, `budget` rows were skipped, or rows run out;
    /// says why it stopped and how many rows it skipped.
    fn scan(
        &mut self,
        stmt: &mut Statement<'_>,
        params: impl rusqlite::Params,
        budget: usize,
        admit: &mut dyn Admit,
    ) -> StoreResult<(ScanEnd, usize)> {
        let mut skipped = 0;
        let mut rows = stmt.query(params).map_err(backend)?;
        loop {
            if self.taking.len() >= self.max {
                return Ok((ScanEnd::Full, skipped));
            }
            if skipped >= budget {
                return Ok((ScanEnd::Budget, skipped));
            }
            let Some(r) = rows.next().map_err(backend)? else {
                return Ok((ScanEnd::End, skipped));
            };
            let seq: i64 = r.get(0).map_err(backend)?;
            self.last = Some(ScanPos {
                priority: r.get(3).map_err(backend)?,
                run_at: r.get(4).map_err(backend)?,
                seq,
            });
            let endpoint = r.get_ref(1).map_err(backend)?;
            let endpoint = endpoint
                .as_str()
                .map_err(|e| StoreError::Backend(e.to_string()))?;
            let is_retry: bool = r.get(2).map_err(backend)?;
            if self.picked.contains(&seq) {
                continue;
            }
            if self.exclude.iter().any(|e| e == endpoint)
                || (is_retry && self.exclude_retries.iter().any(|e| e == endpoint))
                || (!is_retry && self.exclude_firsts.iter().any(|e| e == endpoint))
            {
                skipped += 1;
                continue;
            }
            let mut found = self.read.query([seq]).map_err(backend)?;
            let Some(row) = found.next().map_err(backend)? else {
                continue;
            };
            let raw = raw_from_row(row).map_err(backend)?;
            let candidate = Candidate {
                seq,
                id: raw.job.id.clone(),
                endpoint: raw.job.endpoint.clone(),
                is_retry,
                run_at: raw.job.run_at,
                group: raw.job.group.clone(),
            };
            match admit.admit(&candidate) {
                Verdict::Take => {
                    self.picked.insert(seq);
                    self.taking.push((candidate, raw))
                }
                Verdict::Fail => {
                    self.picked.insert(seq);
                    self.failing.push((candidate, raw))
                }
                Verdict::HoldEndpoint => {
                    skipped += 1;
                    self.exclude.push(candidate.endpoint)
                }
                Verdict::HoldRetries => {
                    skipped += 1;
                    self.exclude_retries.push(candidate.endpoint)
                }
                Verdict::HoldFirsts => {
                    skipped += 1;
                    self.exclude_firsts.push(candidate.endpoint)
                }
                Verdict::HoldGroup => return Ok((ScanEnd::GroupHeld, skipped + 1)),
            }
        }
    }
}

/// The highest priority level with waiting jobs, below `below` when given (an index seek).
const LEVEL_TOP: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_runnable WHERE queue = ?1 AND ",
    ungrouped!(),
    " ORDER BY priority DESC LIMIT 1"
);
const LEVEL_BELOW: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_runnable WHERE queue = ?1 AND ",
    ungrouped!(),
    " AND priority < ?2 ORDER BY priority DESC LIMIT 1"
);
/// The due jobs of one priority level, in lease order. With the level fixed, `run_at <= now` is
/// a range of the index: the read ends at the first job scheduled for later instead of stepping
/// over every one of them (a queue holding a million jobs scheduled for tomorrow made every
/// lease read the whole index when the levels were read together).
const LEVEL_DUE: &str = concat!(
    "SELECT seq, endpoint, attempts > 0, priority, run_at FROM jobs INDEXED BY jobs_runnable \
     WHERE queue = ?1 AND ",
    ungrouped!(),
    " AND priority = ?3 AND run_at <= ?2 ORDER BY run_at, seq"
);

/// [`LEVEL_TOP`], [`LEVEL_BELOW`] and [`LEVEL_DUE`] within one group (`?4`), off `jobs_grouped`.
const GROUP_LEVEL_TOP: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_grouped WHERE queue = ?1 AND grp = ?4 AND ",
    grouped!(),
    " ORDER BY priority DESC LIMIT 1"
);
const GROUP_LEVEL_BELOW: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_grouped WHERE queue = ?1 AND grp = ?4 AND ",
    grouped!(),
    " AND priority < ?2 ORDER BY priority DESC LIMIT 1"
);
const GROUP_LEVEL_DUE: &str = concat!(
    "SELECT seq, endpoint, attempts > 0, priority, run_at FROM jobs INDEXED BY jobs_grouped \
     WHERE queue = ?1 AND grp = ?4 AND ",
    grouped!(),
    " AND priority = ?3 AND run_at <= ?2 ORDER BY run_at, seq"
);
/// Whether one of the queue's grouped jobs is due.
const GROUPED_DUE: &str = concat!(
    "SELECT 1 FROM jobs INDEXED BY jobs_grouped_due WHERE queue = ?1 AND ",
    grouped!(),
    " AND run_at <= ?2 LIMIT 1"
);
/// The next group after `?2` with waiting jobs (a loose scan of `jobs_grouped`: one seek per
/// group, however many jobs each holds).
const GROUP_AFTER: &str = concat!(
    "SELECT grp FROM jobs INDEXED BY jobs_grouped WHERE queue = ?1 AND grp > ?2 AND ",
    grouped!(),
    " ORDER BY grp LIMIT 1"
);

impl Picker<'_> {
    /// Reads the due jobs level by level, from the highest below `below` (all levels when
    /// `None`) down, until enough are taken, `budget` rows were skipped in all, or levels run out:
    /// the queue's ungrouped jobs, or one group's.
    #[allow(clippy::too_many_arguments)]
    fn scan_levels(
        &mut self,
        c: &Connection,
        queue: &str,
        group: Option<&str>,
        now: i64,
        below: Option<i64>,
        budget: usize,
        admit: &mut dyn Admit,
    ) -> StoreResult<ScanEnd> {
        let mut below = below;
        let mut left = budget;
        loop {
            let level: Option<i64> = match (below, group) {
                (None, None) => c
                    .prepare_cached(LEVEL_TOP)
                    .and_then(|mut s| s.query_row([queue], |r| r.get(0)).optional()),
                (Some(b), None) => c
                    .prepare_cached(LEVEL_BELOW)
                    .and_then(|mut s| s.query_row(params![queue, b], |r| r.get(0)).optional()),
                (None, Some(g)) => c.prepare_cached(GROUP_LEVEL_TOP).and_then(|mut s| {
                    // ?2 and ?3 are not in this statement: numbered parameters leave gaps.
                    s.raw_bind_parameter(1, queue)?;
                    s.raw_bind_parameter(4, g)?;
                    let mut rows = s.raw_query();
                    rows.next()?.map(|r| r.get(0)).transpose()
                }),
                (Some(b), Some(g)) => c.prepare_cached(GROUP_LEVEL_BELOW).and_then(|mut s| {
                    s.raw_bind_parameter(1, queue)?;
                    s.raw_bind_parameter(2, b)?;
                    s.raw_bind_parameter(4, g)?;
                    let mut rows = s.raw_query();
                    rows.next()?.map(|r| r.get(0)).transpose()
                }),
            }
            .map_err(backend)?;
            let Some(level) = level else {
                return Ok(ScanEnd::End);
            };
            let scanned = match group {
                None => {
                    let mut due = c.prepare_cached(LEVEL_DUE).map_err(backend)?;
                    self.scan(&mut due, params![queue, now, level], left, admit)?
                }
                Some(g) => {
                    let mut due = c.prepare_cached(GROUP_LEVEL_DUE).map_err(backend)?;
                    self.scan(&mut due, params![queue, now, level, g], left, admit)?
                }
            };
            match scanned {
                (ScanEnd::End, skipped) => {
                    left = left.saturating_sub(skipped);
                    below = Some(level);
                }
                (end, _) => return Ok(end),
            }
        }
    }

    /// The queue's ungrouped jobs: from the head (`scan.top` skipped rows at most), then onwards
    /// from where the last request's deep read stopped (`scan.deep`).
    fn scan_ungrouped(
        &mut self,
        c: &Connection,
        queue: &str,
        now: i64,
        scan: &mut LeaseScan,
        admit: &mut dyn Admit,
    ) -> StoreResult<ScanEnd> {
        // Every column read while stepping is in `jobs_runnable`: rows skipped cost no table
        // lookup.
        const SAME_PRIORITY_AFTER: &str = concat!(
            "SELECT seq, endpoint, attempts > 0, priority, run_at FROM jobs INDEXED BY jobs_runnable \
             WHERE queue = ?1 AND ",
            ungrouped!(),
            " AND run_at <= ?2 AND priority = ?3 AND (run_at, seq) > (?4, ?5) ORDER BY run_at, seq"
        );
        self.last = None;
        let ended = self.scan_levels(c, queue, None, now, None, scan.top.max(1), admit)?;
        match (ended, self.last) {
            (ScanEnd::End, _) => {
                scan.resume.remove(queue);
                Ok(ScanEnd::End)
            }
            (ScanEnd::Budget, Some(last)) => {
                // Onwards from where the last request's deep read stopped, if that is further.
                let from = ScanPos::onwards(scan.resume.get(queue).copied(), last);
                let mut same = c.prepare_cached(SAME_PRIORITY_AFTER).map_err(backend)?;
                let (mut ended, _) = self.scan(
                    &mut same,
                    params![queue, now, from.priority, from.run_at, from.seq],
                    scan.deep,
                    admit,
                )?;
                if ended == ScanEnd::End {
                    ended = self.scan_levels(
                        c,
                        queue,
                        None,
                        now,
                        Some(from.priority),
                        scan.deep,
                        admit,
                    )?;
                }
                match (ended, self.last) {
                    (ScanEnd::End, _) | (_, None) => {
                        scan.resume.remove(queue);
                    }
                    (_, Some(stopped)) => {
                        scan.resume.insert(queue.to_owned(), stopped);
                    }
                }
                Ok(ended)
            }
            (end, _) => Ok(end),
        }
    }

    /// Round-robin across the queue's groups, the ungrouped jobs taking their turn as one
    /// group, from the turn after the one the last lease ended with. The first pass goes round
    /// once, each turn taking its weight in jobs (a group with nothing due takes none and does
    /// not count), until the lease is full, every turn was visited, or GROUP_VISITS groups were
    /// looked at; later passes share what is left among the turns that filled theirs, by
    /// weight, until the lease is full or every turn is spent or holds. Returns whether the
    /// first pass stopped at its bound with room left: more may be due further on.
    fn scan_fair(
        &mut self,
        c: &Connection,
        queue: &str,
        now: i64,
        scan: &mut LeaseScan,
        admit: &mut dyn Admit,
    ) -> StoreResult<bool> {
        let max = self.max;
        // Turns served in the first pass: (turn, weight, may have more).
        let mut turns: Vec<(Option<String>, usize, bool)> = Vec::new();
        let mut visited: Option<String> = None;
        let mut capped = false;
        {
            let cursor = scan.groups.get(queue).cloned();
            let start = cursor.clone().unwrap_or_default();
            let mut from = start.clone();
            let mut wrapped = cursor.is_none();
            let mut looked = 0;
            // None first when starting afresh; then groups by name, wrapping once.
            let mut pending: Option<Option<String>> = cursor.is_none().then_some(None);
            loop {
                if self.taking.len() >= max {
                    break;
                }
                let turn = match pending.take() {
                    Some(t) => t,
                    None => {
                        if looked >= GROUP_VISITS {
                            capped = true;
                            break;
                        }
                        let next: Option<String> = c
                            .prepare_cached(GROUP_AFTER)
                            .and_then(|mut st| {
                                st.query_row(params![queue, from], |r| r.get(0)).optional()
                            })
                            .map_err(backend)?;
                        match next {
                            Some(g) if wrapped && cursor.is_some() && g > start => break,
                            Some(g) => {
                                looked += 1;
                                from.clone_from(&g);
                                visited = Some(g.clone());
                                Some(g)
                            }
                            None if !wrapped => {
                                wrapped = true;
                                from = String::new();
                                None
                            }
                            None => break,
                        }
                    }
                };
                let weight = turn
                    .as_deref()
                    .map_or(1, |g| admit.weight(g).max(1) as usize);
                self.max = (self.taking.len() + weight).min(max);
                let before = self.taking.len() + self.failing.len();
                let ended = self.take_turn(c, queue, turn.as_deref(), now, scan, admit)?;
                let took = self.taking.len() + self.failing.len() - before;
                if took > 0 {
                    turns.push((turn, weight, ended == ScanEnd::Full));
                }
            }
            self.max = max;
        }
        // The next lease starts after the last turn this one served ("" stands for the
        // ungrouped jobs: no group is named so, and the next turn after it is the first group);
        // after the last group looked at when the first pass stopped at its bound with room
        // left, so that the next lease looks further on.
        let full = self.taking.len() >= max;
        let last = match (capped && !full, visited, turns.last()) {
            (true, Some(v), _) => Some(v),
            (_, _, Some((t, _, _))) => Some(t.clone().unwrap_or_default()),
            _ => None,
        };
        if let Some(last) = last {
            scan.groups.insert(queue.to_owned(), last);
        }
        // Later passes: what is left, shared by weight among the turns that filled theirs.
        loop {
            let left = max.saturating_sub(self.taking.len());
            let weights: usize = turns.iter().filter(|t| t.2).map(|t| t.1).sum();
            if left == 0 || weights == 0 {
                break;
            }
            let share = left.div_ceil(weights);
            for (turn, weight, more) in turns.iter_mut() {
                if !*more {
                    continue;
                }
                if self.taking.len() >= max {
                    break;
                }
                self.max = (self.taking.len() + share * *weight).min(max);
                let before = self.taking.len() + self.failing.len();
                let ended = self.take_turn(c, queue, turn.as_deref(), now, scan, admit)?;
                // Only a turn that filled its share may have more.
                *more = ended == ScanEnd::Full && self.taking.len() + self.failing.len() > before;
            }
            self.max = max;
        }
        self.max = max;
        Ok(capped && !full)
    }

    /// One turn: the ungrouped jobs, or one group's, up to `self.max` taken.
    fn take_turn(
        &mut self,
        c: &Connection,
        queue: &str,
        group: Option<&str>,
        now: i64,
        scan: &mut LeaseScan,
        admit: &mut dyn Admit,
    ) -> StoreResult<ScanEnd> {
        match group {
            None => self.scan_ungrouped(c, queue, now, scan, admit),
            Some(g) => self.scan_levels(c, queue, Some(g), now, None, scan.top.max(1), admit),
        }
    }
}

/// Groups looked at, at most, by one lease's round-robin for turns with a due job.
const GROUP_VISITS: usize = 4096;

/// Whether any of the queue's grouped jobs is due (one index seek).
fn grouped_due(c: &Connection, queue: &str, now: i64) -> StoreResult<bool> {
    c.prepare_cached(GROUPED_DUE)
        .and_then(|mut s| s.exists(params![queue, now]))
        .map_err(backend)
}

/// [`Store::job_lease_admitted`] in one request: steps through the runnable jobs in lease order
/// on the index alone, reads the row of each job admission is asked about (the lease needs it),
/// then leases the chosen ones. Past held endpoints' jobs it reads a bounded number of rows: from
/// the head of the queue, then onwards from where the last request stopped (so jobs behind a
/// deep held backlog are reached over a few requests, each of bounded cost). Returns the rows to
/// run and the rows to fail, undecoded, and the candidates leased (to hand back to admission
/// should the transaction fail to commit).
pub fn lease_admitted(
    c: &mut Connection,
    p: &LeaseAdmittedParams,
    admit: &mut dyn Admit,
    scan: &mut LeaseScan,
) -> StoreResult<LeasedRows> {
    static ROW: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {COLS} FROM jobs WHERE seq = ?1"));
    let (taking, failing, more) = {
        let mut picker = Picker {
            read: c.prepare_cached(&ROW).map_err(backend)?,
            max: p.max,
            taking: Vec::new(),
            failing: Vec::new(),
            exclude: Vec::new(),
            exclude_retries: Vec::new(),
            exclude_firsts: Vec::new(),
            last: None,
            picked: std::collections::HashSet::new(),
        };
        let now = ms(p.now);
        // A queue none of whose due jobs has a group reads as it always did.
        let mut more = false;
        if grouped_due(c, &p.queue, now)? {
            more = picker.scan_fair(c, &p.queue, now, scan, admit)?;
        } else {
            picker.scan_ungrouped(c, &p.queue, now, scan, admit)?;
        }
        (picker.taking, picker.failing, more)
    };
    // No savepoint: each lease is one atomic update, and should one fail, those before it stand
    // and are handed out (what is leased and not handed out would wait for its lease to expire).
    let mut out = LeasedRows {
        more,
        ..LeasedRows::default()
    };
    let mut update = c.prepare_cached(LEASE_ONE).map_err(backend)?;
    let mut failure = None;
    for (chosen, into) in [(taking, &mut out.taken), (failing, &mut out.failed)] {
        for (candidate, mut raw) in chosen {
            let leased = match &failure {
                Some(_) => Ok(0),
                None => update.execute(params![
                    p.owner,
                    ms(p.lease_until),
                    ms(p.now),
                    candidate.seq
                ]),
            };
            match leased {
                Ok(1) => {
                    // Candidates are waiting jobs: no dead category.
                    let from = Some((raw.stored_state()?, None));
                    counts::moved(
                        &raw.job.queue,
                        &raw.job.endpoint,
                        from,
                        Some((JobState::Running, None)),
                        1,
                    );
                    // The row as the update left it.
                    raw.set_state(JobState::Running);
                    raw.job.lease_owner = Some(p.owner.clone());
                    raw.job.lease_until = Some(p.lease_until);
                    raw.job.updated_at = p.now;
                    into.push(raw);
                    out.admitted.push(candidate);
                }
                Ok(_) => admit.not_leased(&candidate),
                Err(e) => {
                    failure = Some(backend(e));
                    admit.not_leased(&candidate);
                }
            }
        }
    }
    match failure {
        Some(e) if out.admitted.is_empty() => Err(e),
        _ => Ok(out),
    }
}

#[derive(Default)]
pub struct LeasedRows {
    pub taken: Vec<RawJob>,
    pub failed: Vec<RawJob>,
    pub admitted: Vec<Candidate>,
    /// [`AdmittedLease::more`].
    pub more: bool,
}

pub fn expire_deadlines(c: &mut Connection, p: &ExpireParams) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let now = ms(p.now);
    let mut n = 0;
    let dead = Some((JobState::Dead, Some(DeadCategory::DeadlineExceeded)));
    // One waiting state at a time, so that each job's is known for the counts.
    for from in [JobState::Ready, JobState::Scheduled, JobState::Deferred] {
        // Endpoints with a known hold first, so their jobs' reasons name it.
        for (endpoint, why) in &p.reasons {
            n += run_moving(
                &tx,
                concat!(
                    "UPDATE jobs SET state = 'dead', category = 'deadline_exceeded', \
                     finished_at = ?1, updated_at = ?1, \
                     last_reason = 'deadline passed while held by its endpoint: ' || ?3 \
                     WHERE deadline IS NOT NULL AND deadline <= ?1 AND endpoint = ?2 AND ",
                    waiting!(),
                    " AND state = ?4 RETURNING queue, endpoint"
                ),
                params![now, endpoint, why, from.as_str()],
                Some((from, None)),
                dead,
            )?;
        }
        n += run_moving(
            &tx,
            concat!(
                "UPDATE jobs SET state = 'dead', category = 'deadline_exceeded', finished_at = ?1, \
                 updated_at = ?1, last_reason = 'deadline passed before the job could run' \
                 WHERE deadline IS NOT NULL AND deadline <= ?1 AND ",
                waiting!(),
                " AND state = ?2 RETURNING queue, endpoint"
            ),
            params![now, from.as_str()],
            Some((from, None)),
            dead,
        )?;
    }
    tx.commit()?;
    Ok(n)
}

/// From the kept counts: ready jobs are due (and held, when their endpoint holds them); scheduled
/// and deferred ones wait for later (one whose time came is promoted to ready within a
/// maintenance tick, or leased).
pub fn endpoint_backlog(counts: &counts::Shared) -> Vec<EndpointBacklog> {
    let mut by: std::collections::BTreeMap<String, EndpointBacklog> = Default::default();
    for key in counts::lock(counts).counts() {
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

const REPLAY_SET: &str = "state = 'ready', category = NULL, attempts = 0, unknown_attempts = 0, \
    deferrals = 0, stalls = 0, last_delay_ms = NULL, replays = replays + 1, run_at = ?1, \
    finished_at = NULL, updated_at = ?1, cancel_requested = 0, \
    last_reason = 'replayed from the dead letters'";

pub fn replay(c: &mut Connection, id: &JobId, now: Timestamp) -> StoreResult<Job> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, id)?;
    may_replay(&job)?;
    tx.execute(
        &format!("UPDATE jobs SET {REPLAY_SET} WHERE seq = ?2"),
        params![ms(now), job.seq],
    )
    .map_err(backend)?;
    counts::moved(
        &job.queue,
        &job.endpoint,
        Some(place(&job)),
        Some((JobState::Ready, None)),
        1,
    );
    let job = must_get(&tx, id)?;
    tx.commit()?;
    Ok(job)
}

pub fn dismiss(c: &mut Connection, id: &JobId) -> StoreResult<()> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, id)?;
    may_dismiss(&job)?;
    tx.execute("DELETE FROM jobs WHERE seq = ?1", [job.seq])
        .map_err(backend)?;
    counts::moved(&job.queue, &job.endpoint, Some(place(&job)), None, 1);
    tx.commit()
}

pub fn cancel(c: &mut Connection, id: &JobId, now: Timestamp) -> StoreResult<Job> {
    let tx = Sp::begin(c)?;
    let job = must_get(&tx, id)?;
    match redial_store::cancel(&job)? {
        Cancel::Now => {
            tx.execute(
                "UPDATE jobs SET state = 'cancelled', finished_at = ?1, updated_at = ?1, \
                 last_reason = ?3 WHERE seq = ?2",
                params![ms(now), job.seq, CANCELLED],
            )
            .map_err(backend)?;
            counts::moved(
                &job.queue,
                &job.endpoint,
                Some(place(&job)),
                Some((JobState::Cancelled, None)),
                1,
            );
        }
        Cancel::WhenTheAttemptEnds => {
            tx.execute(
                "UPDATE jobs SET cancel_requested = 1, updated_at = ?1 WHERE seq = ?2",
                params![ms(now), job.seq],
            )
            .map_err(backend)?;
        }
    }
    let job = must_get(&tx, id)?;
    tx.commit()?;
    Ok(job)
}

pub fn bulk_replay(c: &mut Connection, f: &JobFilter, now: Timestamp) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let groups = dead_counted(&tx, f)?;
    let mut sql = format!("UPDATE jobs SET {REPLAY_SET} WHERE state = 'dead'");
    let mut params = vec![Value::Integer(ms(now))];
    push_filter(&mut sql, &mut params, f);
    let n = tx
        .execute(&sql, params_from_iter(params.iter()))
        .map_err(backend)? as u64;
    for (queue, endpoint, category, k) in groups {
        let from = Some((JobState::Dead, category));
        counts::moved(&queue, &endpoint, from, Some((JobState::Ready, None)), k);
    }
    tx.commit()?;
    Ok(n)
}

pub fn bulk_dismiss(c: &mut Connection, f: &JobFilter) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let groups = dead_counted(&tx, f)?;
    let mut sql = "DELETE FROM jobs WHERE state = 'dead'".to_owned();
    let mut params = Vec::new();
    push_filter(&mut sql, &mut params, f);
    let n = tx
        .execute(&sql, params_from_iter(params.iter()))
        .map_err(backend)? as u64;
    for (queue, endpoint, category, k) in groups {
        counts::moved(&queue, &endpoint, Some((JobState::Dead, category)), None, k);
    }
    tx.commit()?;
    Ok(n)
}

/// Queue, endpoint, dead category, and how many.
type DeadKey = (String, String, Option<DeadCategory>, i64);

/// The dead letters a bulk action's filter matches, by queue, endpoint and category: what it
/// moves in the counts (read in its transaction, just before it acts).
fn dead_counted(c: &Connection, f: &JobFilter) -> StoreResult<Vec<DeadKey>> {
    let mut sql =
        "SELECT queue, endpoint, category, COUNT(*) FROM jobs INDEXED BY jobs_dead WHERE state = 'dead'"
            .to_owned();
    let mut params = Vec::new();
    push_filter(&mut sql, &mut params, f);
    sql.push_str(" GROUP BY queue, endpoint, category");
    query_rows(c, &sql, params_from_iter(params.iter()), |r| {
        let category: Option<String> = r.get(2)?;
        Ok((
            r.get(0)?,
            r.get(1)?,
            category
                .as_deref()
                .and_then(|c| parse_dead_category(c).ok()),
            r.get(3)?,
        ))
    })
}

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
    if f.since.is_some() || f.until.is_some() {
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

fn dead_letter_groups_read(c: &mut Connection, f: &JobFilter) -> StoreResult<Vec<DeadGroup>> {
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
    Ok(GroupCounts::from_parts(
        read(WAITING)?,
        read(RUNNING)?,
        limit,
    ))
}

/// Both deletions walk `jobs_finished` (finished jobs by age), never the whole table: with a
/// large backlog a table scan would hold the one writer for a tenth of a second per million jobs.
pub fn cleanup(c: &mut Connection, p: &CleanupParams) -> StoreResult<u64> {
    let tx = Sp::begin(c)?;
    let by_age = delete_counted(
        &tx,
        CLEANUP_BY_AGE,
        params![ms(p.completed_before), ms(p.dead_before), p.limit],
    )?;
    let Some(keep) = p.completed_keep else {
        tx.commit()?;
        return Ok(by_age);
    };
    let room = u64::from(p.limit).saturating_sub(by_age);
    let by_count = delete_counted(
        &tx,
        CLEANUP_BY_COUNT,
        params![
            keep.min(i64::MAX as u64) as i64,
            room.min(i64::MAX as u64) as i64
        ],
    )?;
    tx.commit()?;
    Ok(by_age + by_count)
}

/// Runs a delete that ends in `RETURNING queue, endpoint, state, category`, taking each job it
/// returns out of the counts; returns how many.
fn delete_counted<P: rusqlite::Params>(c: &Connection, sql: &str, params: P) -> StoreResult<u64> {
    let mut stmt = c.prepare_cached(sql).map_err(backend)?;
    let mut rows = stmt.query(params).map_err(backend)?;
    let mut by: std::collections::HashMap<(String, String, String, Option<String>), i64> =
        Default::default();
    while let Some(r) = rows.next().map_err(backend)? {
        let key = (
            r.get(0).map_err(backend)?,
            r.get(1).map_err(backend)?,
            r.get(2).map_err(backend)?,
            r.get(3).map_err(backend)?,
        );
        *by.entry(key).or_default() += 1;
    }
    let mut n = 0;
    for ((queue, endpoint, state, category), k) in by {
        let state: JobState = state.parse().map_err(StoreError::Backend)?;
        let category = category
            .as_deref()
            .map(parse_dead_category)
            .transpose()
            .map_err(StoreError::Backend)?;
        counts::moved(&queue, &endpoint, Some((state, category)), None, k);
        n += k as u64;
    }
    Ok(n)
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

pub fn controls_load(c: &mut Connection) -> StoreResult<Vec<Control>> {
    query_rows(
        c,
        "SELECT kind, name, paused_since, paused_until, pause_reason, resumed_at, breaker_reset_at \
         FROM controls ORDER BY kind, name",
        [],
        |r| {
            Ok(control(
                &r.get::<_, String>(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        },
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

const SCHEDULE_COLUMNS: &str =
    "id, definition, paused, next_at, last_occurrence, last_fired_at, created_at, updated_at";

fn schedule(r: &Row<'_>) -> rusqlite::Result<ScheduleRecord> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(conn: &Connection, sql: &str) -> Vec<String> {
        let mut stmt = conn
            .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .expect("explain");
        let mut rows = stmt.raw_query();
        let mut plan = Vec::new();
        while let Some(r) = rows.next().expect("row") {
            plan.push(r.get(3).expect("detail"));
        }
        plan
    }

    /// Leasing reads one priority level at a time with `run_at <= now` as a range of the index,
    /// so jobs scheduled for later end the read instead of being stepped over (a million jobs
    /// scheduled for tomorrow made each lease take a quarter of a second).
    #[test]
    fn leasing_stops_at_the_first_job_scheduled_for_later() {
        let conn = Connection::open_in_memory().expect("open");
        crate::schema::prepare(&conn).expect("schema");
        let due = plan(&conn, LEVEL_DUE);
        assert!(
            due.iter()
                .any(|p| p.contains("jobs_runnable") && p.contains("priority=? AND run_at<?")),
            "{due:?}"
        );
        for sql in [LEVEL_TOP, LEVEL_BELOW] {
            let p = plan(&conn, sql);
            assert!(
                !p.iter()
                    .any(|d| d == "SCAN jobs" || d.contains("TEMP B-TREE")),
                "{sql}: {p:?}"
            );
        }
    }

    #[test]
    fn maintenance_reads_by_index() {
        let conn = Connection::open_in_memory().expect("open");
        crate::schema::prepare(&conn).expect("schema");
        for sql in [
            RESCUE_DEAD,
            RESCUE_READY,
            PROMOTE,
            CLEANUP_BY_AGE,
            CLEANUP_BY_COUNT,
            PRIORITY_BELOW,
            FIRST_AFTER,
        ] {
            let mut stmt = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .expect("explain");
            // Parameters left unbound: the plan does not depend on their values.
            let mut rows = stmt.raw_query();
            let mut plan: Vec<String> = Vec::new();
            while let Some(r) = rows.next().expect("row") {
                plan.push(r.get(3).expect("detail"));
            }
            assert!(
                !plan
                    .iter()
                    .any(|p| p == "SCAN jobs" || p.contains("TEMP B-TREE")),
                "{sql}: {plan:?}"
            );
        }
    }
}
