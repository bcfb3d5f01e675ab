//! Redial's embedded default store: one SQLite file in WAL mode.
//!
//! Owns the schema, its migrations and the SQL behind every [`Store`] method. Durability: every
//! method is one transaction, committed with `synchronous = FULL` before it returns, so an
//! acknowledged enqueue survives a process crash and a power loss (given a disk that honours fsync).
//! Concurrency: one connection behind a mutex, used from tokio's blocking pool; SQLite serialises
//! writers anyway, and one connection keeps leasing trivially exclusive.

mod schema;
mod sql;

use async_trait::async_trait;
use redial_policy::Timestamp;
use redial_store::*;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The SQLite store. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The one connection. Held only inside `spawn_blocking`, never across an await.
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and brings its schema up to date.
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        let conn = Connection::open(path).map_err(|e| {
            StoreError::Backend(format!("cannot open database {}: {e}", path.display()))
        })?;
        schema::prepare(&conn).map_err(|e| {
            StoreError::Backend(format!("cannot prepare database {}: {e}", path.display()))
        })?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                conn: Mutex::new(conn),
                path: path.to_owned(),
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on the connection in tokio's blocking pool.
    async fn run<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> StoreResult<T> + Send + 'static,
    {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            // A panic while holding the lock leaves SQLite consistent (the transaction rolls back
            // on drop), so a poisoned mutex is safe to reuse.
            let mut conn = inner.conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| StoreError::Backend(format!("storage task failed: {e}")))?
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn job_insert(&self, job: NewJob) -> StoreResult<InsertOutcome> {
        self.run(move |c| {
            let tx = c.transaction().map_err(sql::backend)?;
            let out = sql::insert(&tx, &job)?;
            if !matches!(out, InsertOutcome::Conflict(_)) {
                tx.commit().map_err(sql::backend)?;
            }
            Ok(out)
        })
        .await
    }

    async fn job_insert_batch(&self, jobs: Vec<NewJob>) -> StoreResult<Vec<InsertOutcome>> {
        self.run(move |c| {
            let tx = c.transaction().map_err(sql::backend)?;
            let mut outs = Vec::with_capacity(jobs.len());
            for job in &jobs {
                outs.push(sql::insert(&tx, job)?);
            }
            if !outs.iter().any(|o| matches!(o, InsertOutcome::Conflict(_))) {
                tx.commit().map_err(sql::backend)?;
            }
            Ok(outs)
        })
        .await
    }

    async fn job_get(&self, id: &JobId) -> StoreResult<Option<(Job, Vec<Attempt>)>> {
        let id = id.clone();
        self.run(move |c| sql::get_with_attempts(c, &id)).await
    }

    async fn job_list(&self, params: JobListParams) -> StoreResult<JobPage> {
        self.run(move |c| sql::list(c, &params)).await
    }

    async fn job_lease_available(&self, params: LeaseParams) -> StoreResult<Vec<Job>> {
        self.run(move |c| sql::lease(c, &params)).await
    }

    async fn job_candidates(&self, params: CandidateParams) -> StoreResult<Vec<Candidate>> {
        self.run(move |c| sql::candidates(c, &params)).await
    }

    async fn job_lease_ids(&self, params: LeaseIdsParams) -> StoreResult<Vec<Job>> {
        self.run(move |c| sql::lease_ids(c, &params)).await
    }

    async fn job_heartbeat(&self, params: HeartbeatParams) -> StoreResult<u64> {
        self.run(move |c| sql::heartbeat(c, &params)).await
    }

    async fn job_record_attempt(&self, params: RecordAttemptParams) -> StoreResult<Job> {
        self.run(move |c| sql::record_attempt(c, params)).await
    }

    async fn job_release(&self, params: ReleaseParams) -> StoreResult<u64> {
        self.run(move |c| sql::release(c, &params)).await
    }

    async fn job_rescue_expired(&self, params: RescueParams) -> StoreResult<RescueReport> {
        self.run(move |c| sql::rescue(c, &params)).await
    }

    async fn job_promote_due(&self, now: Timestamp) -> StoreResult<u64> {
        self.run(move |c| sql::promote(c, now)).await
    }

    async fn job_next_run_at(
        &self,
        queue: &str,
        after: Timestamp,
    ) -> StoreResult<Option<Timestamp>> {
        let queue = queue.to_owned();
        self.run(move |c| sql::next_run_at(c, &queue, after)).await
    }

    async fn job_expire_deadlines(&self, params: ExpireParams) -> StoreResult<u64> {
        self.run(move |c| sql::expire_deadlines(c, &params)).await
    }

    async fn endpoint_backlog(&self, now: Timestamp) -> StoreResult<Vec<EndpointBacklog>> {
        self.run(move |c| sql::endpoint_backlog(c, now)).await
    }

    async fn endpoint_load(&self) -> StoreResult<Vec<EndpointRecord>> {
        self.run(sql::endpoint_load).await
    }

    async fn endpoint_save(&self, records: Vec<EndpointRecord>) -> StoreResult<()> {
        self.run(move |c| sql::endpoint_save(c, &records)).await
    }

    async fn job_replay(&self, id: &JobId, now: Timestamp) -> StoreResult<Job> {
        let id = id.clone();
        self.run(move |c| sql::replay(c, &id, now)).await
    }

    async fn job_dismiss(&self, id: &JobId) -> StoreResult<()> {
        let id = id.clone();
        self.run(move |c| sql::dismiss(c, &id)).await
    }

    async fn job_cancel(&self, id: &JobId, now: Timestamp) -> StoreResult<Job> {
        let id = id.clone();
        self.run(move |c| sql::cancel(c, &id, now)).await
    }

    async fn dead_letter_replay(&self, filter: JobFilter, now: Timestamp) -> StoreResult<u64> {
        self.run(move |c| sql::bulk_replay(c, &filter, now)).await
    }

    async fn dead_letter_dismiss(&self, filter: JobFilter) -> StoreResult<u64> {
        self.run(move |c| sql::bulk_dismiss(c, &filter)).await
    }

    async fn stats(&self) -> StoreResult<Stats> {
        self.run(sql::stats).await
    }

    async fn job_cleanup(&self, params: CleanupParams) -> StoreResult<u64> {
        self.run(move |c| sql::cleanup(c, &params)).await
    }

    async fn ping(&self) -> StoreResult<()> {
        self.run(|c| {
            c.query_row("SELECT 1", [], |_| Ok(()))
                .map_err(sql::backend)
        })
        .await
    }
}
