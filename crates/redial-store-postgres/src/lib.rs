//! Redial's store for several nodes sharing one PostgreSQL database.
//!
//! Same behaviour as the SQLite store (the shared suite in `redial_store::testkit` runs against
//! both). What differs is how nodes stay out of each other's way:
//! - Leasing: rows are claimed with `FOR UPDATE SKIP LOCKED` in `seq` order, and every claim
//!   re-checks the job's state under the row lock, so a job is never leased to two owners at once.
//! - Wake-ups: writes that make work runnable `NOTIFY` a channel of the schema; every node
//!   `LISTEN`s on its own connection and wakes the queue's loop (see [`Store::subscribe`]).
//! - Maintenance: one node at a time holds a session advisory lock on a dedicated connection
//!   ([`Store::try_lead`]); when that node dies its session ends, the lock frees and another
//!   node takes the role at its next tick.
//! - Durability: every method is one transaction (often one statement), committed before it
//!   returns, under the server's own durability settings (`synchronous_commit` on by default).
//! - Recording: attempts go to one recorder task with its own connection; what arrives while a
//!   batch runs is recorded by the next one, in one statement (one commit for all), and whatever
//!   that statement leaves (a lease lost, a cancel waiting) takes the one-attempt path.
//!
//! Over 600 lines: the `Store` trait's methods, each a few lines handing its SQL to a connection.

mod conn;
mod lease;
mod listen;
mod recorder;
mod schema;
mod sql;
mod tls;

use conn::{backend, connect, describe, Conn};
use listen::listen;
use recorder::{recorder, RecordRequest};
pub use tls::{DbConfig, SslMode};

use async_trait::async_trait;
use redial_policy::Timestamp;
use redial_store::{
    Admit, AdmittedLease, Attempt, BackupFile, Candidate, CandidateParams, CleanupParams, Control,
    ControlKind, DeadCount, DeadGroup, DeadReason, EndpointBacklog, EndpointRecord,
    EventListParams, EventPage, ExpireParams, GroupCounts, HeartbeatParams, InsertOutcome, Job,
    JobChange, JobFilter, JobId, JobListParams, JobPage, KeyLine, LeaseAdmittedParams,
    LeaseIdsParams, NewEvent, NewJob, OrderingKeysParams, RecordAttemptParams, Recorded,
    ReleaseParams, ReplayChangedParams, RescueParams, RescueReport, RetriesNowParams,
    ScheduleAdvance, ScheduleRecord, SchemaStatus, SharedHold, Stats, Store, StoreError,
    StoreResult, Wake,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{broadcast, Mutex, MutexGuard};
use tokio_postgres::Client;

/// The advisory lock of the maintenance role: this class ("rdl1") and the schema's hash, so
/// that deployments in different schemas of one database each elect their own leader.
const LEADER_LOCK_CLASS: i32 = 0x7264_6c31;

/// The advisory locks that say a node is alive: this class ("rdl2") and the hash of the schema
/// and the node's worker id. Each node holds its own on a dedicated connection; when the node
/// dies, its session ends and the lock frees.
pub(crate) const PRESENCE_LOCK_CLASS: i32 = 0x7264_6c32;

/// Connections kept open by default.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// By default, the longest a store call waits for the database (a free connection, then its answer) before
/// it says the database is unavailable: a server that hangs (its processes stopped, as in a
/// network partition where the kernel still answers) would otherwise hold every API request
/// and loop that asks it. The connection it waited on is dropped (it is mid-statement); the next
/// call opens a new one, so the node recovers by itself when the server answers again.
pub const OP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// By default, the readiness check's bound: `/readyz` turns 503 within this when the database hangs
/// (`DbConfig::set_timeouts` sets both).
pub const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// What a call that waited past its bound says.
pub(crate) fn too_slow(limit: std::time::Duration) -> StoreError {
    StoreError::Unavailable(format!(
        "the database did not answer within {} s: it is hung, overloaded or unreachable",
        limit.as_secs_f64()
    ))
}

/// The PostgreSQL store. Cheap to clone; clones share the connections.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    config: DbConfig,
    pool: Vec<Mutex<Option<Conn>>>,
    next: AtomicUsize,
    /// The connection that holds (or tries for) the maintenance role, and whether it holds it.
    leader: Mutex<Option<(Client, bool)>>,
    /// The connection that holds this node's presence lock, and the worker id it holds it for.
    presence: Mutex<Option<(Client, String)>>,

    /// The NOTIFY channel of this schema.
    channel: String,
    wakes: broadcast::Sender<Wake>,
    listener: tokio::task::JoinHandle<()>,
    /// How far a lease reads past held endpoints, and where each queue's deep read stopped.
    scan: std::sync::Mutex<lease::LeaseScan>,
    /// Jobs a lease chose that another node took (or was taking) first.
    lease_misses: std::sync::atomic::AtomicU64,
    /// Attempts to record, batched by the recorder task on its own connection.
    records: tokio::sync::mpsc::UnboundedSender<RecordRequest>,
    /// Batch statements that failed (their attempts then went one by one).
    batch_failures: Arc<std::sync::atomic::AtomicU64>,
    recorder: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.listener.abort();
        self.recorder.abort();
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("config", &self.inner.config)
            .field("channel", &self.inner.channel)
            .finish()
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://user:password@host:port/dbname`, or key=value pairs; TLS
    /// as [`DbConfig`] reads it) and brings the schema up to date.
    pub async fn connect(url: &str) -> StoreResult<PgStore> {
        let config = DbConfig::parse(url).map_err(StoreError::Backend)?;
        PgStore::connect_with(config, DEFAULT_POOL_SIZE).await
    }

    /// Where the schema at `url` stands, without changing anything.
    pub async fn schema_status(url: &str) -> StoreResult<SchemaStatus> {
        let config = DbConfig::parse(url).map_err(StoreError::Backend)?;
        PgStore::schema_status_with(&config).await
    }

    /// Where the schema of the database `config` names stands, without changing anything.
    pub async fn schema_status_with(config: &DbConfig) -> StoreResult<SchemaStatus> {
        let client = connect(config).await?;
        schema::status(&client).await.map_err(StoreError::Backend)
    }

    /// Applies the pending migrations at `url` (under the migration lock, so nodes starting
    /// meanwhile wait) and disconnects; returns where the schema stood before.
    pub async fn migrate(url: &str) -> StoreResult<SchemaStatus> {
        let config = DbConfig::parse(url).map_err(StoreError::Backend)?;
        let mut client = connect(&config).await?;
        let before = schema::status(&client).await.map_err(StoreError::Backend)?;
        schema::migrate(&mut client)
            .await
            .map_err(|e| StoreError::Backend(format!("cannot migrate the database: {e}")))?;
        Ok(before)
    }

    /// Connects with a prepared configuration and `pool_size` connections (at least one).
    pub async fn connect_with(
        config: impl Into<DbConfig>,
        pool_size: usize,
    ) -> StoreResult<PgStore> {
        let config: DbConfig = config.into();
        let mut first = connect(&config).await?;
        schema::migrate(&mut first)
            .await
            .map_err(|e| StoreError::Backend(format!("cannot prepare the database: {e}")))?;
        let schema: String = first
            .query_one("SELECT current_schema()", &[])
            .await
            .map_err(backend)?
            .get(0);
        let channel = format!("redial_{schema}");
        let mut pool = vec![Mutex::new(Some(Conn {
            client: first,
            stmts: HashMap::new(),
            open_transaction: false,
        }))];
        pool.extend((1..pool_size.max(1)).map(|_| Mutex::new(None)));
        let (wakes, _) = broadcast::channel(1024);
        let listener = tokio::spawn(listen(config.clone(), channel.clone(), wakes.clone()));
        let (records, queued) = tokio::sync::mpsc::unbounded_channel();
        let batch_failures = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let recorder = tokio::spawn(recorder(
            config.clone(),
            channel.clone(),
            queued,
            batch_failures.clone(),
        ));
        Ok(PgStore {
            inner: Arc::new(Inner {
                config,
                pool,
                next: AtomicUsize::new(0),
                leader: Mutex::new(None),
                presence: Mutex::new(None),
                scan: std::sync::Mutex::default(),
                lease_misses: std::sync::atomic::AtomicU64::new(0),
                channel,
                wakes,
                listener,
                records,
                batch_failures,
                recorder,
            }),
        })
    }

    /// A connection of the pool: a free one if any, else the next in turn once it frees.
    /// A connection that broke is replaced.
    async fn conn(&self) -> StoreResult<MutexGuard<'_, Option<Conn>>> {
        let pool = &self.inner.pool;
        let start = self.inner.next.fetch_add(1, Ordering::Relaxed) % pool.len();
        let mut guard = None;
        for i in 0..pool.len() {
            if let Ok(g) = pool[(start + i) % pool.len()].try_lock() {
                guard = Some(g);
                break;
            }
        }
        let mut guard = match guard {
            Some(g) => g,
            None => pool[start].lock().await,
        };
        let c = Conn::ready(&mut guard, &self.inner.config).await?;
        if c.open_transaction {
            if c.client.batch_execute("ROLLBACK").await.is_ok() {
                c.open_transaction = false;
            } else {
                // Start afresh.
                *guard = None;
                Conn::ready(&mut guard, &self.inner.config).await?;
            }
        }
        Ok(guard)
    }

    /// How many of the recorder's batch statements failed (their attempts were then recorded
    /// one by one, each in a transaction of its own: correct, and many times slower). A store
    /// that loses its connection now and then fails a few; one whose statement is wrong fails
    /// them all.
    pub fn batch_record_failures(&self) -> u64 {
        self.inner.batch_failures.load(Ordering::Relaxed)
    }

    /// Jobs a lease chose and another node took (or was taking) first, since the store opened:
    /// the contention between nodes.
    pub fn lease_misses(&self) -> u64 {
        self.inner
            .lease_misses
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sets how many skipped rows a lease reads from the head of a queue and further on (1024
    /// and 8192 by default), and forgets where the deep reads stopped. For tests.
    pub fn set_lease_scan(&self, top: usize, deep: usize) {
        self.inner
            .scan
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .set(top, deep);
    }

    /// The NOTIFY channel this store's writes use.
    pub fn channel(&self) -> &str {
        &self.inner.channel
    }
}

/// Runs `$body` on a pooled connection `$c`, within `$limit` (the configured call timeout when not given)
/// for the connection and again for the body; a body that takes longer leaves its connection
/// dropped and says the database is unavailable.
macro_rules! with_conn {
    ($self:ident, $c:ident => $body:expr) => {
        with_conn!($self, $self.inner.config.call_timeout(), $c => $body)
    };
    ($self:ident, $limit:expr, $c:ident => $body:expr) => {{
        let limit: std::time::Duration = $limit;
        let mut guard = tokio::time::timeout(limit, $self.conn())
            .await
            .map_err(|_| too_slow(limit))??;
        let answered = {
            let $c = guard.as_mut().expect("a connected pool entry");
            tokio::time::timeout(limit, async { $body }).await
        };
        match answered {
            Ok(out) => {
                if out.is_err() && guard.as_ref().is_some_and(|c| c.client.is_closed()) {
                    *guard = None;
                }
                out
            }
            Err(_) => {
                // Mid-statement: dropped, and a new connection opened next time.
                *guard = None;
                Err(too_slow(limit))
            }
        }
    }};
}

#[async_trait]
impl Store for PgStore {
    async fn job_insert(&self, job: NewJob) -> StoreResult<InsertOutcome> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::insert_one(c, &channel, job).await)
    }

    async fn job_insert_batch(&self, jobs: Vec<NewJob>) -> StoreResult<Vec<InsertOutcome>> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::insert_batch(c, &channel, jobs).await)
    }

    async fn job_get(&self, id: &JobId) -> StoreResult<Option<(Job, Vec<Attempt>)>> {
        with_conn!(self, c => sql::get_with_attempts(c, id).await)
    }

    async fn job_list(&self, params: JobListParams) -> StoreResult<JobPage> {
        with_conn!(self, c => sql::list(c, &params).await)
    }

    async fn job_candidates(&self, params: CandidateParams) -> StoreResult<Vec<Candidate>> {
        with_conn!(self, c => sql::candidates(c, &params).await)
    }

    async fn job_lease_ids(&self, params: LeaseIdsParams) -> StoreResult<Vec<Job>> {
        with_conn!(self, c => sql::lease_ids(c, &params).await)
    }

    async fn job_lease_admitted(
        &self,
        params: LeaseAdmittedParams,
        mut admit: Box<dyn Admit>,
    ) -> StoreResult<AdmittedLease> {
        let (lease, missed) = with_conn!(self, c => {
            lease::lease_admitted(c, &self.inner.scan, &params, admit.as_mut()).await
        })?;
        if missed > 0 {
            self.inner
                .lease_misses
                .fetch_add(missed, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(lease)
    }

    async fn job_heartbeat(&self, params: HeartbeatParams) -> StoreResult<u64> {
        with_conn!(self, c => sql::heartbeat(c, &params).await)
    }

    async fn job_record_attempt(&self, params: RecordAttemptParams) -> StoreResult<Recorded> {
        let data = params
            .attempt
            .to_stored()
            .map_err(|e| StoreError::Backend(format!("cannot encode the attempt: {e}")))?;
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.inner
            .records
            .send(RecordRequest {
                params,
                data,
                answer,
            })
            .map_err(|_| StoreError::Backend("the recorder has stopped".into()))?;
        answered
            .await
            .map_err(|_| StoreError::Backend("the recorder dropped an attempt".into()))?
    }

    async fn job_release(&self, params: ReleaseParams) -> StoreResult<u64> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::release(c, &channel, &params).await)
    }

    async fn job_rescue_expired(&self, params: RescueParams) -> StoreResult<RescueReport> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::rescue(c, &channel, &params).await)
    }

    async fn node_announce(&self, worker: &str) -> StoreResult<()> {
        let limit = self.inner.config.call_timeout();
        match tokio::time::timeout(limit, self.node_announce_unbounded(worker)).await {
            Ok(r) => r,
            Err(_) => {
                *self.inner.presence.lock().await = None;
                Err(too_slow(limit))
            }
        }
    }

    async fn nodes_live(&self) -> StoreResult<Vec<String>> {
        with_conn!(self, c => sql::nodes_live(c).await)
    }

    async fn job_promote_due(&self, now: Timestamp) -> StoreResult<u64> {
        with_conn!(self, c => sql::promote(c, now).await)
    }

    async fn job_next_run_at(
        &self,
        queue: &str,
        after: Timestamp,
    ) -> StoreResult<Option<Timestamp>> {
        with_conn!(self, c => sql::next_run_at(c, queue, after).await)
    }

    async fn job_expire_deadlines(&self, params: ExpireParams) -> StoreResult<u64> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::expire_deadlines(c, &channel, &params).await)
    }

    async fn endpoint_backlog_of(
        &self,
        name: &str,
        now: Timestamp,
    ) -> StoreResult<EndpointBacklog> {
        with_conn!(self, c => sql::endpoint_backlog_of(c, name, now).await)
    }

    async fn endpoint_deadlines(
        &self,
        name: &str,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<redial_policy::endpoint::WaitingDeadline>> {
        with_conn!(self, c => sql::endpoint_deadlines(c, name, now, limit).await)
    }

    async fn group_deadlines(
        &self,
        queue: &str,
        group: &str,
        now: Timestamp,
        limit: u32,
    ) -> StoreResult<Vec<redial_policy::endpoint::WaitingDeadline>> {
        with_conn!(self, c => sql::group_deadlines(c, queue, group, now, limit).await)
    }

    async fn endpoint_saved(&self, name: &str) -> StoreResult<bool> {
        with_conn!(self, c => sql::endpoint_saved(c, name).await)
    }

    async fn endpoint_forget(&self, names: Vec<String>) -> StoreResult<()> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::endpoint_forget(c, &channel, &names).await)
    }

    async fn control_get(&self, kind: ControlKind, name: &str) -> StoreResult<Option<Control>> {
        with_conn!(self, c => sql::control_get(c, kind, name).await)
    }

    async fn endpoint_retries_now(&self, params: RetriesNowParams) -> StoreResult<u64> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::retries_now(c, &channel, &params).await)
    }

    async fn endpoint_backlog(&self, now: Timestamp) -> StoreResult<Vec<EndpointBacklog>> {
        with_conn!(self, c => sql::endpoint_backlog(c, now).await)
    }

    async fn endpoint_load(&self) -> StoreResult<Vec<EndpointRecord>> {
        with_conn!(self, c => sql::endpoint_load(c).await)
    }

    async fn endpoint_save(&self, records: Vec<EndpointRecord>) -> StoreResult<()> {
        with_conn!(self, c => sql::endpoint_save(c, &records).await)
    }

    async fn job_replay(&self, id: &JobId, now: Timestamp) -> StoreResult<Job> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::replay(c, &channel, id, now).await)
    }

    async fn job_replay_changed(&self, params: ReplayChangedParams) -> StoreResult<Job> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::replay_changed(c, &channel, &params).await)
    }

    async fn job_changes(&self, id: &JobId) -> StoreResult<Vec<JobChange>> {
        with_conn!(self, c => sql::changes(c, id).await)
    }

    async fn job_dismiss(&self, id: &JobId) -> StoreResult<()> {
        with_conn!(self, c => sql::dismiss(c, id).await)
    }

    async fn job_cancel(&self, id: &JobId, now: Timestamp) -> StoreResult<Job> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::cancel(c, &channel, id, now).await)
    }

    async fn dead_letter_replay(&self, filter: JobFilter, now: Timestamp) -> StoreResult<u64> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::bulk_replay(c, &channel, &filter, now).await)
    }

    async fn dead_letter_dismiss(&self, filter: JobFilter) -> StoreResult<u64> {
        with_conn!(self, c => sql::bulk_dismiss(c, &filter).await)
    }

    async fn stats(&self) -> StoreResult<Stats> {
        with_conn!(self, c => sql::stats(c).await)
    }

    async fn dead_letters_since(&self, since: Timestamp) -> StoreResult<Vec<DeadCount>> {
        with_conn!(self, c => sql::dead_letters_since(c, since).await)
    }

    async fn dead_letter_groups(&self, filter: JobFilter) -> StoreResult<Vec<DeadGroup>> {
        with_conn!(self, c => sql::dead_letter_groups(c, &filter).await)
    }

    async fn dead_letter_chunk_end(
        &self,
        filter: JobFilter,
        limit: u32,
    ) -> StoreResult<Option<i64>> {
        with_conn!(self, c => sql::dead_letter_chunk_end(c, &filter, limit).await)
    }

    async fn dead_letter_reasons(&self, filter: JobFilter) -> StoreResult<Vec<DeadReason>> {
        with_conn!(self, c => sql::dead_letter_reasons(c, &filter).await)
    }

    async fn index_for_search(&self, limit: u32) -> StoreResult<u32> {
        with_conn!(self, c => sql::index_for_search(c, limit).await)
    }

    async fn group_counts(&self, queue: &str, limit: u32) -> StoreResult<GroupCounts> {
        with_conn!(self, c => sql::group_counts(c, queue, limit).await)
    }

    async fn ordering_keys(&self, params: OrderingKeysParams) -> StoreResult<Vec<KeyLine>> {
        with_conn!(self, c => sql::ordering_keys(c, &params).await)
    }

    async fn event_append(&self, events: Vec<NewEvent>) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        with_conn!(self, c => sql::event_append(c, &events).await)
    }

    async fn event_list(&self, params: EventListParams) -> StoreResult<EventPage> {
        with_conn!(self, c => sql::event_list(c, &params).await)
    }

    async fn event_cleanup(&self, before: Timestamp, limit: u32) -> StoreResult<u64> {
        with_conn!(self, c => sql::event_cleanup(c, before, limit).await)
    }

    async fn job_cleanup(&self, params: CleanupParams) -> StoreResult<u64> {
        with_conn!(self, c => sql::cleanup(c, &params).await)
    }

    async fn backup(&self) -> StoreResult<BackupFile> {
        Err(StoreError::Unsupported(
            "this server keeps its jobs in PostgreSQL: back that database up with pg_dump or the provider's backups (docs/several-nodes.md, \"Backups\", says which tables matter); redial backup copies the embedded SQLite store".into(),
        ))
    }

    async fn ping(&self) -> StoreResult<()> {
        // Ready means able to write: a standby or a server set read-only is not.
        let writable = with_conn!(self, self.inner.config.ready_timeout(), c => c
            .client
            .query_one(
                "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'",
                &[],
            )
            .await
            .map(|row| row.get::<_, bool>(0))
            .map_err(backend))?;
        if writable {
            Ok(())
        } else {
            Err(StoreError::Unavailable(
                "the PostgreSQL server is read-only (a standby, or default_transaction_read_only): point REDIAL_DATABASE_URL at the primary".into(),
            ))
        }
    }

    async fn endpoint_holds_share(&self, holds: Vec<SharedHold>) -> StoreResult<()> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::holds_share(c, &channel, &holds).await)
    }

    async fn endpoint_holds_load(&self, now: Timestamp) -> StoreResult<Vec<SharedHold>> {
        with_conn!(self, c => sql::holds_load(c, now).await)
    }

    async fn endpoint_holds_clear(
        &self,
        name: &str,
        pause: bool,
        breaker: bool,
    ) -> StoreResult<()> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::holds_clear(c, &channel, name, pause, breaker).await)
    }

    async fn controls_load(&self) -> StoreResult<Vec<Control>> {
        with_conn!(self, c => sql::controls_load(c).await)
    }

    async fn control_save(&self, control: Control) -> StoreResult<()> {
        let channel = self.inner.channel.clone();
        with_conn!(self, c => sql::control_save(c, &channel, &control).await)
    }

    async fn schedule_save(&self, schedule: ScheduleRecord) -> StoreResult<()> {
        with_conn!(self, c => sql::schedule_save(c, &schedule).await)
    }

    async fn schedule_get(&self, id: &str) -> StoreResult<Option<ScheduleRecord>> {
        with_conn!(self, c => sql::schedule_get(c, id).await)
    }

    async fn schedule_list(&self) -> StoreResult<Vec<ScheduleRecord>> {
        with_conn!(self, c => sql::schedule_list(c).await)
    }

    async fn schedule_page(
        &self,
        after: Option<String>,
        limit: u32,
    ) -> StoreResult<Vec<ScheduleRecord>> {
        with_conn!(self, c => sql::schedule_page(c, after.as_deref(), limit).await)
    }

    async fn schedule_delete(&self, id: &str) -> StoreResult<bool> {
        with_conn!(self, c => sql::schedule_delete(c, id).await)
    }

    async fn schedule_set_paused(
        &self,
        id: &str,
        paused: bool,
        next_at: Option<Timestamp>,
        now: Timestamp,
    ) -> StoreResult<bool> {
        with_conn!(self, c => sql::schedule_set_paused(c, id, paused, next_at, now).await)
    }

    async fn schedules_due(
        &self,
        now: Timestamp,
        limit: usize,
    ) -> StoreResult<Vec<ScheduleRecord>> {
        with_conn!(self, c => sql::schedules_due(c, now, limit).await)
    }

    async fn schedule_advance(&self, advance: ScheduleAdvance) -> StoreResult<bool> {
        with_conn!(self, c => sql::schedule_advance(c, &advance).await)
    }

    async fn try_lead(&self) -> StoreResult<bool> {
        let limit = self.inner.config.call_timeout();
        match tokio::time::timeout(limit, self.try_lead_unbounded()).await {
            Ok(r) => r,
            Err(_) => {
                // Mid-statement: the session is dropped (and the role with it, if held).
                *self.inner.leader.lock().await = None;
                Err(too_slow(limit))
            }
        }
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn subscribe(&self) -> Option<broadcast::Receiver<Wake>> {
        Some(self.inner.wakes.subscribe())
    }
}

impl PgStore {
    async fn node_announce_unbounded(&self, worker: &str) -> StoreResult<()> {
        let mut presence = self.inner.presence.lock().await;

        if let Some((client, _)) = presence
            .as_ref()
            .filter(|(c, w)| !c.is_closed() && w == worker)
        {
            // Still holding it: a sign of life, which a rescue that found the lock free while
            // this connection was being replaced reads as "not dead". Forgotten (a rescue took
            // it for dead: no row), or the connection broke: announced anew below.
            if let Ok(1) = client
                .execute(
                    "UPDATE nodes SET seen_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint, \
                     free_since = NULL WHERE worker = $1",
                    &[&worker],
                )
                .await
            {
                return Ok(());
            }
        }
        // A new session (the first, or the last one ended and its lock with it).
        *presence = None;
        let client = connect(&self.inner.config).await?;
        let held: bool = client
            .query_one(
                "SELECT pg_try_advisory_lock($1, hashtext(current_schema() || ':' || $2))",
                &[&PRESENCE_LOCK_CLASS, &worker],
            )
            .await
            .map_err(backend)?
            .get(0);
        if !held {
            // Another live node runs with this worker id (or a rescue holds it for a moment):
            // try again at the next tick.
            tracing::warn!(worker, "another session holds this node's presence lock; is the worker id shared by two nodes?");
            return Ok(());
        }
        // Recorded, so that the rescue knows this node holds a presence lock while alive: a
        // node that never took one (an older version, during a rolling upgrade) keeps its
        // leases until they expire.
        client
            .execute(
                "INSERT INTO nodes (worker, announced_at, seen_at) \
                 VALUES ($1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, \
                     (extract(epoch FROM clock_timestamp()) * 1000)::bigint) \
                 ON CONFLICT (worker) DO UPDATE SET announced_at = EXCLUDED.announced_at, \
                     seen_at = EXCLUDED.seen_at, free_since = NULL",
                &[&worker],
            )
            .await
            .map_err(backend)?;
        // The others divide the endpoints' limits again, at once.
        client
            .execute(
                "SELECT pg_notify($1, $2)",
                &[&self.inner.channel, &sql::ENDPOINTS_CHANGED],
            )
            .await
            .map_err(backend)?;
        *presence = Some((client, worker.to_owned()));
        Ok(())
    }

    async fn try_lead_unbounded(&self) -> StoreResult<bool> {
        let mut leader = self.inner.leader.lock().await;
        if leader.as_ref().is_some_and(|(c, _)| c.is_closed()) {
            // The session ended, and the lock with it.
            *leader = None;
        }
        if leader.is_none() {
            *leader = Some((connect(&self.inner.config).await?, false));
        }
        let (client, held) = leader.as_mut().expect("connected above");
        if !*held {
            match client
                .query_one(
                    "SELECT pg_try_advisory_lock($1, hashtext(current_schema()))",
                    &[&LEADER_LOCK_CLASS],
                )
                .await
            {
                Ok(row) => *held = row.get(0),
                Err(e) => {
                    *leader = None;
                    return Err(backend(e));
                }
            }
        }
        Ok(*held)
    }
}

/// Helpers for tests that need a database of their own.
pub mod testing {
    pub use crate::DbConfig as Config;

    /// Creates an empty schema with a fresh name on the server at `url`; returns its name.
    pub async fn create_schema(url: &str) -> Result<String, String> {
        let config = Config::parse(url)?;
        let (client, connection) = config.connect().await?;
        let driver = tokio::spawn(connection);
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let schema = format!(
            "t_{}_{}_{}",
            std::process::id(),
            nanos % 1_000_000_000,
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        client
            .batch_execute(&format!("CREATE SCHEMA {schema}"))
            .await
            .map_err(|e| crate::describe(&e))?;
        drop(client);
        let _ = driver.await;
        Ok(schema)
    }

    /// A configuration for `url` whose connections work in a fresh, empty schema.
    pub async fn fresh_schema(url: &str) -> Result<Config, String> {
        let schema = create_schema(url).await?;
        let mut config = Config::parse(url)?;
        config.pg_mut().options(format!("-c search_path={schema}"));
        Ok(config)
    }

    /// The test server's URL, `DATABASE_URL`; panics saying how to get one when it is unset.
    pub fn database_url() -> String {
        std::env::var("DATABASE_URL").expect(
            "DATABASE_URL is not set: run ./scripts/test (it starts a throwaway PostgreSQL) or point DATABASE_URL at a server",
        )
    }

    /// A configuration whose connections work in a fresh, empty schema of the test server
    /// ([`database_url`]); panics if there is none.
    pub async fn fresh_test_schema() -> Config {
        fresh_schema(&database_url())
            .await
            .expect("a schema for this test")
    }

    /// A store of `pool` connections in a fresh schema of the test server; panics if there is
    /// none.
    pub async fn fresh_test_store(pool: usize) -> crate::PgStore {
        crate::PgStore::connect_with(fresh_test_schema().await, pool)
            .await
            .expect("connect store")
    }

    /// Brings the schema `config`'s connections work in up to `version` (never down), as an
    /// older Redial would have left it.
    pub async fn migrate_to(config: &Config, version: usize) -> Result<(), String> {
        let mut client = crate::connect(config).await.map_err(|e| e.to_string())?;
        crate::schema::migrate_to(&mut client, version).await
    }

    /// `url` with its connections working in `schema` (for processes given a URL).
    pub fn url_in_schema(url: &str, schema: &str) -> String {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options=-c%20search_path%3D{schema}")
    }
}
