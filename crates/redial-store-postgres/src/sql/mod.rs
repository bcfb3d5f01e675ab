//! The SQL behind each store method. Each function is one transaction, most of them one
//! statement; the hot ones (insert, lease, record, heartbeat) use statements prepared once per
//! connection.
//!
//! Here: what every area shares (the column list, reading rows, NOTIFY). The areas, one file
//! each, as the test kit's: jobs, lease, record, maintenance, actions, reads, endpoints (and
//! controls), schedules. The rules they apply are `redial_store::rules`'.

use crate::backend;
use redial_policy::DeadCategory;
use redial_store::{Job, JobColumns, JobId, JobState, RawJob, StoreError, StoreResult};
use tokio_postgres::types::ToSql;
use tokio_postgres::Row;

/// The columns of a job, in the order `RawJob::read` reads them.
use redial_store::job_columns as cols;

/// The NOTIFY payload that says shared endpoint holds changed (other payloads are queue names;
/// this one starts with a control character, which a queue name written in a config would not).
pub const ENDPOINTS_CHANGED: &str = "\u{1}endpoints";

/// A job waiting for a lease: ready, scheduled or deferred, and not leased. A leased job keeps
/// `state = 'ready'` in its row (so that its lease changes no indexed column and is a HOT
/// update: schema migration 19) and is known by its `lease_owner`; [`RUNNING`] is its test.
const WAITING: &str = "state IN ('ready', 'scheduled', 'deferred') AND lease_owner IS NULL";

/// A leased job (the API's `running`): `state = 'ready'` with an owner. See [`WAITING`].
const RUNNING: &str = "state = 'ready' AND lease_owner IS NOT NULL";

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
    let mut job = RawJob::read(&Columns(r))?.decode()?;
    // A leased job's row says `ready` with an owner ([`RUNNING`]); everyone else says running.
    if job.state == JobState::Ready && job.lease_owner.is_some() {
        job.state = JobState::Running;
    }
    Ok(job)
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
    c.execute(NOTIFY, &[&channel, &payload])
        .await
        .map(|_| ())
        .map_err(backend)
}

/// Tells the nodes listening on `channel` (`$1`) that queue `$2` has work.
const NOTIFY: &str = "SELECT pg_notify($1, $2)";

/// [`notify`] with [`NOTIFY`] prepared (`Conn::prepared`): one round trip where a statement
/// given as text takes two (it is parsed first), on every enqueue.
async fn notify_prepared(
    c: &impl tokio_postgres::GenericClient,
    statement: &tokio_postgres::Statement,
    channel: &str,
    payload: &str,
) -> StoreResult<()> {
    c.execute(statement, &[&channel, &payload])
        .await
        .map(|_| ())
        .map_err(backend)
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
pub use events::{event_append, event_cleanup, event_list};
pub use jobs::{get_with_attempts, insert_batch, insert_one, list};
pub use lease::{
    candidates, group_heads, groups_after, lease_ids, lease_locked_and_commit, next_run_at,
    runnable, Head,
};
pub use maintenance::{cleanup, expire_deadlines, index_for_search, nodes_live, promote, rescue};
pub use reads::{
    dead_letter_chunk_end, dead_letter_groups, dead_letter_reasons, dead_letters_since,
    group_counts, ordering_keys, stats,
};
pub use record::{heartbeat, record_attempt, record_many, release};
pub use schedules::{
    schedule_advance, schedule_delete, schedule_get, schedule_list, schedule_page, schedule_save,
    schedule_set_paused, schedules_due,
};
