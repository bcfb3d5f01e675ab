//! The SQL behind each store method. Every function runs inside the caller's connection and
//! either commits one transaction or changes nothing.
//!
//! Here: what every area shares (the statements' spelling: the `waiting!` condition the partial
//! indexes need, the column list; savepoints; reading rows; classifying errors). The areas, one
//! file each, as the test kit's: jobs, lease, record, maintenance, actions, reads, endpoints
//! (and controls), schedules. The rules they apply are `redial_store::rules`'.
//!
//! Partial indexes spell their state conditions as chains of `=` (`waiting!`), never as `IN` lists
//! of three or more: SQLite evaluates those through a temporary b-tree built for the old and the
//! new row of every update, which was the largest single cost of leasing and recording (a schema
//! test checks that state changes build no temporary table). State filters are written as literals
//! so that SQLite can use the partial index of that state.

use redial_policy::{DeadCategory, Timestamp};
use redial_store::{Job, JobColumns, JobId, RawJob, StoreError, StoreResult};
use rusqlite::types::Value;
use rusqlite::{params_from_iter, Connection, Row};

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
    /// Where the count log and the noted completions stood: a rollback drops what came since.
    mark: (usize, usize),
}

impl<'c> Sp<'c> {
    pub fn begin(conn: &'c Connection) -> StoreResult<Sp<'c>> {
        run_cached(conn, "SAVEPOINT op")?;
        Ok(Sp {
            conn,
            done: false,
            mark: (crate::counts::mark(), events::completions_mark()),
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
            crate::counts::rollback_to(self.mark.0);
            events::completions_rollback_to(self.mark.1);
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

/// Runs a statement that finishes jobs and ends in `RETURNING queue, endpoint, <the id of a
/// job with a callback, else NULL>`: moves them in the counts as [`run_moving`] does, then
/// inserts the callback deliveries they owe, in the same transaction.
fn run_finishing<P: rusqlite::Params>(
    c: &Connection,
    sql: &str,
    params: P,
    from: Option<Place>,
    to: Option<Place>,
    now: Timestamp,
) -> StoreResult<u64> {
    let mut owing = Vec::new();
    let n = {
        let mut stmt = c.prepare_cached(sql).map_err(backend)?;
        let mut rows = stmt.query(params).map_err(backend)?;
        let mut by: std::collections::HashMap<(String, String), i64> = Default::default();
        while let Some(r) = rows.next().map_err(backend)? {
            let key = (r.get(0).map_err(backend)?, r.get(1).map_err(backend)?);
            *by.entry(key).or_default() += 1;
            if let Some(id) = r.get::<_, Option<String>>(2).map_err(backend)? {
                owing.push(JobId(id));
            }
        }
        let mut n = 0;
        for ((queue, endpoint), k) in by {
            counts::moved(&queue, &endpoint, from, to, k);
            n += k as u64;
        }
        n
    };
    for id in owing {
        let job = must_get(c, &id)?;
        jobs::insert_delivery(c, &job, now)?;
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

mod actions;
mod endpoints;
mod events;
mod jobs;
mod lease;
mod maintenance;
mod reads;
mod record;
mod schedules;

pub use actions::{bulk_dismiss, bulk_replay, changes, dismiss, replay, replay_changed};
// Named: `redial_store` has a `cancel` of its own (a rule), which the glob would make ambiguous.
pub use actions::cancel;
pub use endpoints::{
    control_get, control_save, controls_load, endpoint_backlog, endpoint_backlog_of,
    endpoint_deadlines, endpoint_forget, endpoint_load, endpoint_save, endpoint_saved,
    group_deadlines, holds_clear, holds_load, holds_share, retries_now,
};
pub(crate) use events::{completions_clear, flush_completions};
pub use events::{event_append, event_cleanup, event_list};
pub use jobs::{get_with_attempts, insert, insert_batch, list};
pub use lease::{candidates, lease_admitted, lease_ids, next_run_at};
pub use maintenance::{cleanup, expire_deadlines, index_for_search, promote, rescue};
pub use reads::{
    dead_letter_chunk_end, dead_letter_groups, dead_letter_reasons, dead_letters_since,
    group_counts, ordering_keys, stats,
};
pub use record::{heartbeat, record_attempt, release};
pub use schedules::{
    schedule_advance, schedule_delete, schedule_get, schedule_list, schedule_page, schedule_save,
    schedule_set_paused, schedules_due,
};

#[cfg(test)]
mod tests {
    use super::lease::{FIRST_AFTER, LEVEL_BELOW, LEVEL_DUE, LEVEL_TOP, PRIORITY_BELOW};
    use super::maintenance::{
        CLEANUP_BY_AGE, CLEANUP_BY_COUNT, PROMOTE, RESCUE_DEAD, RESCUE_READY,
    };
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
