//! Redial's embedded default store: one SQLite file in WAL mode.
//!
//! Owns the schema, its migrations and the SQL behind every [`Store`] method. Durability: no
//! answer is sent before the transaction that holds it is committed with `synchronous = FULL`,
//! so an acknowledged enqueue or attempt survives a process crash and a power loss (given a disk
//! that honours fsync).
//! Concurrency: one connection, owned by one storage thread that takes requests from a queue.
//! Requests that arrive while a transaction runs join it (group commit, bounded in count and
//! time), and every answer waits for the shared commit. A request that writes more than one
//! statement either takes a savepoint or orders its statements so that only the first can fail,
//! so one failing request changes nothing of the others. SQLite serialises writers anyway; one
//! connection keeps leasing trivially exclusive.
//! Checkpoints (copying the WAL back into the database file) run on a second thread with its own
//! connection, beside the writer, so a batch does not wait behind one.
//!
//! Over 600 lines: the `Store` trait's methods, each a few lines handing its SQL to the storage
//! thread.

mod backup;
#[macro_use]
mod conditions;
mod counts;
mod files;
mod schema;
mod sql;
mod threads;

use async_trait::async_trait;
use redial_policy::Timestamp;
use redial_store::{
    Admit, AdmittedLease, Attempt, BackupFile, Candidate, CandidateParams, CleanupParams, Control,
    ControlKind, DeadCount, DeadGroup, DeadReason, EndpointBacklog, EndpointRecord,
    EventListParams, EventPage, ExpireParams, GroupCounts, HeartbeatParams, InsertOutcome, Job,
    JobChange, JobFilter, JobId, JobListParams, JobPage, KeyLine, LeaseAdmittedParams,
    LeaseIdsParams, NewEvent, NewJob, OrderingKeysParams, RawJob, RecordAttemptParams, Recorded,
    ReleaseParams, ReplayChangedParams, RescueParams, RescueReport, RetriesNowParams,
    ScheduleAdvance, ScheduleRecord, SchemaStatus, SharedHold, Stats, Store, StoreError,
    StoreResult,
};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use backup::{backup_file, check as check_backup, BackupReport, Destination};
use files::{check_integrity, create_private, hold_lock, refusal, wall_clock_millis, Integrity};
use threads::{checkpoint_thread, storage_thread, CheckpointDue, Op};

/// The SQLite store. Cheap to clone; clones share the storage thread.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

/// How long readiness stays "unavailable" after a request failed because the database could
/// not serve (a full disk, say): a small probe can pass while real writes still fail.
const UNAVAILABLE_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// Reads handed to blocking threads at once (see `Inner::read_turns`): the one reader
/// connection serves one at a time; a second waits on its lock, ready to go.
const READS_AT_ONCE: usize = 2;

struct Inner {
    /// Requests to the storage thread, which owns the connection. The thread ends when every
    /// sender is dropped.
    ops: std::sync::mpsc::Sender<Op>,
    path: PathBuf,
    /// Where leasing reads past held endpoints' jobs (used on the storage thread only).
    lease_scan: Arc<std::sync::Mutex<redial_store::pick::PickMemory>>,
    /// The integrity check's result, once it has one.
    integrity: tokio::sync::watch::Receiver<Integrity>,
    /// The last failure that said the database cannot serve, and when (for readiness).
    last_unavailable: std::sync::Mutex<Option<(std::time::Instant, String)>>,
    /// A read-only connection for long reads, off the storage thread (see `SqliteStore::read`).
    reader: Arc<std::sync::Mutex<Connection>>,
    /// Reads waiting their turn here take no thread: one connection serves them one at a time,
    /// so a burst of reads (a thousand event streams opening) waits here, not in as many
    /// blocking threads parked on the connection's lock, each with its stack and heap (a
    /// thousand idle event streams: 62-93 KiB a stream with them, 32 KiB without:
    /// `bench/streams/memory.py`).
    read_turns: tokio::sync::Semaphore,
    /// Jobs by queue, endpoint, state and category, kept as they change (see `counts`).
    counts: counts::Shared,
    /// Held while the store is open: one process at a time writes the file.
    _lock: Arc<std::fs::File>,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, brings its schema up to date and
    /// checks that it can be written; refuses, saying what to do, a file that is not a database,
    /// is damaged or cannot be written. Starts checking the whole file's integrity in the
    /// background ([`SqliteStore::integrity`]); until that passes, [`Store::ping`] says not ready.
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        if std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
            tracing::warn!(
                file = %path.display(),
                "the database file exists but is empty (0 bytes): starting a new, empty database in it. If it held jobs, stop now and restore it from a backup"
            );
        }
        create_private(path);
        let lock = hold_lock(path)?;
        if let Some(folder) = path.parent() {
            backup::sweep(folder);
        }
        // One thread owns the connection, so SQLite's own locking is not needed.
        let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .and_then(|c| schema::prepare(&c).map(|()| c))
            .and_then(|c| {
                // A database that cannot be written is refused now, not at the first enqueue.
                c.execute(schema::PROBE, [wall_clock_millis()]).map(|_| c)
            })
            .map_err(|e| refusal(path, &e))?;
        let counts = counts::install(&conn).map_err(|e| refusal(path, &e))?;
        let checkpointer = Connection::open_with_flags(path, flags).map_err(|e| {
            StoreError::Backend(format!(
                "cannot open database {} for checkpoints: {e}",
                path.display()
            ))
        })?;
        let pending = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (due_tx, due_rx) = std::sync::mpsc::sync_channel(1);
        let due = CheckpointDue {
            pending: pending.clone(),
            tx: due_tx,
        };
        std::thread::Builder::new()
            .name("redial-sqlite-checkpoint".into())
            .spawn(move || checkpoint_thread(checkpointer, due_rx, pending))
            .map_err(|e| StoreError::Backend(format!("cannot start the checkpoint thread: {e}")))?;
        let reader = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .and_then(|c| {
            c.pragma_update(None, "cache_size", -8_192)?;
            c.busy_timeout(std::time::Duration::from_secs(5))?;
            Ok(c)
        })
        .map_err(|e| refusal(path, &e))?;
        let (tx, rx) = std::sync::mpsc::channel::<Op>();
        std::thread::Builder::new()
            .name("redial-sqlite".into())
            .spawn({
                let counts = counts.clone();
                move || storage_thread(conn, rx, due, counts)
            })
            .map_err(|e| StoreError::Backend(format!("cannot start the storage thread: {e}")))?;
        let (integrity_tx, integrity) = tokio::sync::watch::channel(Integrity::Checking);
        let checked = path.to_owned();
        std::thread::Builder::new()
            .name("redial-sqlite-check".into())
            .spawn(move || {
                let _ = integrity_tx.send(check_integrity(&checked));
            })
            .map_err(|e| StoreError::Backend(format!("cannot start the integrity check: {e}")))?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                ops: tx,
                path: path.to_owned(),
                lease_scan: Arc::default(),
                integrity,
                last_unavailable: std::sync::Mutex::new(None),
                reader: Arc::new(std::sync::Mutex::new(reader)),
                read_turns: tokio::sync::Semaphore::new(READS_AT_ONCE),
                counts,
                _lock: lock,
            }),
        })
    }

    /// Where the schema of the database at `path` stands, without changing anything (no file
    /// yet: a new database, version 0).
    pub fn schema_status(path: &Path) -> StoreResult<SchemaStatus> {
        if !path.exists() {
            return Ok(schema::status_at(0));
        }
        let conn = Connection::open_with_flags(
            path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| refusal(path, &e))?;
        schema::status(&conn).map_err(|e| refusal(path, &e))
    }

    /// Applies the pending migrations to the database at `path` (created if missing), then
    /// closes it; returns where it stood before. Refused while another process has the file
    /// open (a running `redial serve`), and for a schema newer than this Redial knows.
    pub fn migrate(path: &Path) -> StoreResult<SchemaStatus> {
        create_private(path);
        let _lock = hold_lock(path)?;
        let conn = Connection::open(path).map_err(|e| refusal(path, &e))?;
        let before = schema::status(&conn).map_err(|e| refusal(path, &e))?;
        schema::prepare(&conn).map_err(|e| refusal(path, &e))?;
        Ok(before)
    }

    /// The integrity check's result once it has one (`None` while it runs), waiting up to
    /// `within` for it.
    pub async fn integrity(&self, within: std::time::Duration) -> Option<Result<(), String>> {
        let mut rx = self.inner.integrity.clone();
        let _ = tokio::time::timeout(within, rx.wait_for(|i| *i != Integrity::Checking)).await;
        let current = rx.borrow().clone();
        match current {
            Integrity::Checking => None,
            Integrity::Passed => Some(Ok(())),
            Integrity::Failed(why) => Some(Err(why)),
        }
    }

    /// Runs a read that may take long (counts, listings, triage) on the reader connection, beside
    /// the storage thread: WAL lets it read the last commit while the writer goes on, so a
    /// dashboard's refresh never holds up leases and records. Reads wait for each other.
    async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> StoreResult<T> + Send + 'static,
    {
        let _turn = self
            .inner
            .read_turns
            .acquire()
            .await
            .map_err(|e| StoreError::Backend(format!("a read failed to run: {e}")))?;
        let reader = self.inner.reader.clone();
        let answer = tokio::task::spawn_blocking(move || {
            let mut c = reader.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut c)
        })
        .await
        .map_err(|e| StoreError::Backend(format!("a read failed to run: {e}")))?;
        if let Err(e) = &answer {
            self.note(e);
        }
        answer
    }

    /// Remembers a failure that says the database cannot serve now, for readiness.
    fn note(&self, e: &StoreError) {
        if let StoreError::Unavailable(why) = e {
            *self
                .inner
                .last_unavailable
                .lock()
                .unwrap_or_else(|p| p.into_inner()) =
                Some((std::time::Instant::now(), why.clone()));
        }
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// How many rows of held endpoints' jobs one lease reads from the head of a queue, and how
    /// many further on (defaults 1024 and 8192); forgets where the deep reads stopped. For tests
    /// that need a deep backlog cheaply.
    pub fn set_lease_scan(&self, top: usize, deep: usize) {
        self.inner
            .lease_scan
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set_bounds(top, deep);
    }

    /// Rows written since the store opened (inserted, updated and deleted, by statements and
    /// the triggers they fire): for accounts of what work costs (`redial-bench --only account`).
    pub async fn rows_written(&self) -> StoreResult<u64> {
        self.run(|c| Ok(c.total_changes())).await
    }

    /// Runs `f` on the storage thread, inside the next batch's transaction (`f` takes its own
    /// savepoint for what it writes), and answers after that transaction committed.
    async fn run<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> StoreResult<T> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let op: Op = Box::new(move |conn| {
            let mark = counts::mark();
            let result = conn.and_then(f);
            if result.is_err() {
                counts::failed_since(mark);
            }
            Box::new(move |commit_failure: Option<StoreError>| {
                let _ = tx.send(match commit_failure {
                    Some(e) => Err(e),
                    None => result,
                });
            })
        });
        self.submit(op, rx).await
    }

    /// Hands `op` to the storage thread and waits for the answer it sends on `rx`.
    async fn submit<T>(
        &self,
        op: Op,
        rx: tokio::sync::oneshot::Receiver<StoreResult<T>>,
    ) -> StoreResult<T> {
        self.inner
            .ops
            .send(op)
            .map_err(|_| StoreError::Backend("the storage thread has stopped".into()))?;
        let answer = rx
            .await
            .map_err(|_| StoreError::Backend("the storage thread dropped a request".into()))?;
        if let Err(e) = &answer {
            self.note(e);
        }
        answer
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn job_insert(&self, job: NewJob) -> StoreResult<InsertOutcome> {
        self.run(move |c| {
            let tx = sql::Sp::begin(c)?;
            let out = sql::insert(&tx, job)?;
            if !matches!(out, InsertOutcome::Conflict(_)) {
                tx.commit()?;
            }
            Ok(out)
        })
        .await
    }

    async fn job_insert_batch(&self, jobs: Vec<NewJob>) -> StoreResult<Vec<InsertOutcome>> {
        self.run(move |c| {
            let tx = sql::Sp::begin(c)?;
            let outs = sql::insert_batch(&tx, jobs)?;
            if !outs.iter().any(|o| matches!(o, InsertOutcome::Conflict(_))) {
                tx.commit()?;
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
        self.read(move |c| sql::list(c, &params)).await
    }

    async fn job_candidates(&self, params: CandidateParams) -> StoreResult<Vec<Candidate>> {
        self.run(move |c| sql::candidates(c, &params)).await
    }

    async fn job_lease_ids(&self, params: LeaseIdsParams) -> StoreResult<Vec<Job>> {
        let raws = self.run(move |c| sql::lease_ids(c, &params)).await?;
        raws.into_iter().map(RawJob::decode).collect()
    }

    async fn job_lease_admitted(
        &self,
        params: LeaseAdmittedParams,
        mut admit: Box<dyn Admit>,
    ) -> StoreResult<AdmittedLease> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let scan = self.inner.lease_scan.clone();
        let op: Op = Box::new(move |conn| {
            let mark = counts::mark();
            let result = conn.and_then(|c| {
                let mut scan = scan.lock().unwrap_or_else(|p| p.into_inner());
                sql::lease_admitted(c, &params, admit.as_mut(), &mut scan)
            });
            if result.is_err() {
                counts::failed_since(mark);
            }
            Box::new(move |commit_failure: Option<StoreError>| {
                let answer = match (commit_failure, result) {
                    (None, result) => result,
                    // Nothing was leased after all: admission takes its word back.
                    (Some(e), Ok(rows)) => {
                        for candidate in &rows.admitted {
                            admit.not_leased(candidate);
                        }
                        Err(e)
                    }
                    (Some(e), Err(_)) => Err(e),
                };
                let _ = tx.send(answer);
            })
        });
        let rows = self.submit(op, rx).await?;
        let (taken, failed, more) = (rows.taken, rows.failed, rows.more);
        Ok(AdmittedLease {
            more,
            taken: taken
                .into_iter()
                .map(RawJob::decode)
                .collect::<StoreResult<_>>()?,
            failed: failed
                .into_iter()
                .map(RawJob::decode)
                .collect::<StoreResult<_>>()?,
        })
    }

    async fn job_heartbeat(&self, params: HeartbeatParams) -> StoreResult<u64> {
        self.run(move |c| sql::heartbeat(c, &params)).await
    }

    async fn job_record_attempt(&self, params: RecordAttemptParams) -> StoreResult<Recorded> {
        // Serialise here, on the caller's thread, to keep the storage thread's work short.
        let data = params
            .attempt
            .to_stored()
            .map_err(|e| StoreError::Backend(format!("cannot encode the attempt: {e}")))?;
        self.run(move |c| sql::record_attempt(c, params, data))
            .await
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

    async fn endpoint_backlog_of(
        &self,
        name: &str,
        _now: Timestamp,
    ) -> StoreResult<EndpointBacklog> {
        Ok(sql::endpoint_backlog_of(&self.inner.counts, name))
    }

    async fn endpoint_deadlines(
        &self,
        name: &str,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<redial_policy::endpoint::WaitingDeadline>> {
        let name = name.to_owned();
        self.read(move |c| sql::endpoint_deadlines(c, &name, now, limit))
            .await
    }

    async fn group_deadlines(
        &self,
        queue: &str,
        group: &str,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<redial_policy::endpoint::WaitingDeadline>> {
        let (queue, group) = (queue.to_owned(), group.to_owned());
        self.read(move |c| sql::group_deadlines(c, &queue, &group, now, limit))
            .await
    }

    async fn endpoint_saved(&self, name: &str) -> StoreResult<bool> {
        let name = name.to_owned();
        self.read(move |c| sql::endpoint_saved(c, &name)).await
    }

    async fn endpoint_forget(&self, names: Vec<String>) -> StoreResult<()> {
        self.run(move |c| sql::endpoint_forget(c, &names)).await
    }

    async fn endpoint_retries_now(&self, params: RetriesNowParams) -> StoreResult<u64> {
        self.run(move |c| sql::retries_now(c, &params)).await
    }

    async fn endpoint_backlog(&self, _now: Timestamp) -> StoreResult<Vec<EndpointBacklog>> {
        Ok(sql::endpoint_backlog(&self.inner.counts))
    }

    async fn endpoint_load(&self) -> StoreResult<Vec<EndpointRecord>> {
        self.run(sql::endpoint_load).await
    }

    async fn endpoint_save(&self, records: Vec<EndpointRecord>) -> StoreResult<()> {
        self.run(move |c| sql::endpoint_save(c, &records)).await
    }

    async fn event_append(&self, events: Vec<NewEvent>) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        self.run(move |c| sql::event_append(c, &events)).await
    }

    async fn event_list(&self, params: EventListParams) -> StoreResult<EventPage> {
        self.read(move |c| sql::event_list(c, &params)).await
    }

    async fn event_cleanup(&self, before: Timestamp, limit: u32) -> StoreResult<u64> {
        self.run(move |c| sql::event_cleanup(c, before, limit))
            .await
    }

    async fn job_replay(&self, id: &JobId, now: Timestamp) -> StoreResult<Job> {
        let id = id.clone();
        self.run(move |c| sql::replay(c, &id, now)).await
    }

    async fn job_replay_changed(&self, params: ReplayChangedParams) -> StoreResult<Job> {
        self.run(move |c| sql::replay_changed(c, &params)).await
    }

    async fn job_changes(&self, id: &JobId) -> StoreResult<Vec<JobChange>> {
        let id = id.clone();
        self.read(move |c| sql::changes(c, &id)).await
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
        let counts = self.inner.counts.clone();
        self.read(move |c| sql::stats(c, &counts)).await
    }

    async fn dead_letters_since(&self, since: Timestamp) -> StoreResult<Vec<DeadCount>> {
        self.read(move |c| sql::dead_letters_since(c, since)).await
    }

    async fn dead_letter_groups(&self, filter: JobFilter) -> StoreResult<Vec<DeadGroup>> {
        let counts = self.inner.counts.clone();
        self.read(move |c| sql::dead_letter_groups(c, &filter, &counts))
            .await
    }

    async fn dead_letter_chunk_end(
        &self,
        filter: JobFilter,
        limit: u32,
    ) -> StoreResult<Option<i64>> {
        self.read(move |c| sql::dead_letter_chunk_end(c, &filter, limit))
            .await
    }

    async fn dead_letter_reasons(&self, filter: JobFilter) -> StoreResult<Vec<DeadReason>> {
        self.read(move |c| sql::dead_letter_reasons(c, &filter))
            .await
    }

    async fn index_for_search(&self, limit: u32) -> StoreResult<u32> {
        self.run(move |c| sql::index_for_search(c, limit)).await
    }

    async fn group_counts(&self, queue: &str, limit: u32) -> StoreResult<GroupCounts> {
        let queue = queue.to_owned();
        self.read(move |c| sql::group_counts(c, &queue, limit))
            .await
    }

    async fn ordering_keys(&self, params: OrderingKeysParams) -> StoreResult<Vec<KeyLine>> {
        self.read(move |c| sql::ordering_keys(c, &params)).await
    }

    async fn job_cleanup(&self, params: CleanupParams) -> StoreResult<u64> {
        self.run(move |c| sql::cleanup(c, &params)).await
    }

    async fn endpoint_holds_share(&self, holds: Vec<SharedHold>) -> StoreResult<()> {
        self.run(move |c| sql::holds_share(c, &holds)).await
    }

    async fn endpoint_holds_load(&self, now: Timestamp) -> StoreResult<Vec<SharedHold>> {
        self.run(move |c| sql::holds_load(c, now)).await
    }

    async fn endpoint_holds_clear(
        &self,
        name: &str,
        pause: bool,
        breaker: bool,
    ) -> StoreResult<()> {
        let name = name.to_owned();
        self.run(move |c| sql::holds_clear(c, &name, pause, breaker))
            .await
    }

    async fn control_get(&self, kind: ControlKind, name: &str) -> StoreResult<Option<Control>> {
        let name = name.to_owned();
        self.read(move |c| sql::control_get(c, kind, &name)).await
    }

    async fn controls_load(&self) -> StoreResult<Vec<Control>> {
        self.run(sql::controls_load).await
    }

    async fn control_save(&self, control: Control) -> StoreResult<()> {
        self.run(move |c| sql::control_save(c, &control)).await
    }

    async fn schedule_save(&self, schedule: ScheduleRecord) -> StoreResult<()> {
        self.run(move |c| sql::schedule_save(c, &schedule)).await
    }

    async fn schedule_get(&self, id: &str) -> StoreResult<Option<ScheduleRecord>> {
        let id = id.to_owned();
        self.read(move |c| sql::schedule_get(c, &id)).await
    }

    async fn schedule_list(&self) -> StoreResult<Vec<ScheduleRecord>> {
        self.read(sql::schedule_list).await
    }

    async fn schedule_page(
        &self,
        after: Option<String>,
        limit: u32,
    ) -> StoreResult<Vec<ScheduleRecord>> {
        self.read(move |c| sql::schedule_page(c, after.as_deref(), limit))
            .await
    }

    async fn schedule_delete(&self, id: &str) -> StoreResult<bool> {
        let id = id.to_owned();
        self.run(move |c| sql::schedule_delete(c, &id)).await
    }

    async fn schedule_set_paused(
        &self,
        id: &str,
        paused: bool,
        next_at: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        let id = id.to_owned();
        self.run(move |c| sql::schedule_set_paused(c, &id, paused, next_at, now))
            .await
    }

    async fn schedules_due(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRecord>> {
        self.run(move |c| sql::schedules_due(c, now, limit)).await
    }

    async fn schedule_advance(&self, advance: ScheduleAdvance) -> StoreResult<bool> {
        self.run(move |c| sql::schedule_advance(c, &advance)).await
    }

    async fn counts_check(&self) -> StoreResult<()> {
        let counts = self.inner.counts.clone();
        self.run(move |c| counts::check(c, &counts).map_err(StoreError::Backend))
            .await
    }

    async fn backup(&self) -> StoreResult<BackupFile> {
        let source = self.inner.path.clone();
        let started = std::time::Instant::now();
        // Written and checked under its in-progress name; the caller removes it (or the sweep
        // at the next open, if this process dies first).
        tokio::task::spawn_blocking(move || {
            // Dropped on an error: the half-written copy is removed.
            let mut copy = BackupFile {
                path: backup::scratch_name(&source),
                bytes: 0,
                jobs: 0,
                took: std::time::Duration::ZERO,
            };
            // Claimed while it is written and checked: a crash leaves it to the next sweep.
            let claim = backup::claim(&copy.path)?;
            copy.bytes = backup::write(&source, &copy.path, &mut |_, _| {})?;
            copy.jobs = backup::check(&copy.path)?;
            copy.took = started.elapsed();
            drop(claim);
            Ok(copy)
        })
        .await
        .map_err(|e| StoreError::Backend(format!("the backup failed to run: {e}")))?
    }

    async fn ping(&self) -> StoreResult<()> {
        let integrity = self.inner.integrity.borrow().clone();
        match integrity {
            Integrity::Checking => {
                return Err(StoreError::Unavailable(
                    "checking the database file's integrity (it began at start)".into(),
                ))
            }
            Integrity::Failed(why) => return Err(StoreError::Unavailable(why)),
            Integrity::Passed => {}
        }
        let recent = self
            .inner
            .last_unavailable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .filter(|(at, _)| at.elapsed() < UNAVAILABLE_FOR);
        if let Some((at, why)) = recent {
            return Err(StoreError::Unavailable(format!(
                "a request failed {} s ago: {why}",
                at.elapsed().as_secs()
            )));
        }
        // A small write, committed like every other: ready means able to write.
        self.run(|c| {
            c.execute(schema::PROBE, [wall_clock_millis()])
                .map(|_| ())
                .map_err(sql::backend)
        })
        .await
    }
}
