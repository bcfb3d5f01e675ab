//! The engine the test files start: a real SQLite file in a temporary directory, behind
//! [`Watched`] so that [`TestEngine::settle`] can tell when the engine is done, a manual clock,
//! and the HTTP executor (private addresses allowed: receivers listen on loopback).
//!
//! Each file says what its tests change with [`EngineBuilder`]'s methods, usually in one
//! function of its own, and adds its own helpers (how its jobs are enqueued, what it counts) to
//! [`TestEngine`].

#![allow(dead_code)] // each test file uses its own part of the builder

use super::Watched;
use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{
    Clock, EndpointSettings, Engine, EngineConfig, Handler, ManualClock, QueueConfig, RunningEngine,
};
use redial_policy::endpoint::EndpointConfig;
use redial_policy::Timestamp;
use redial_store::Store;
use redial_store_sqlite::SqliteStore;
use redial_test_receiver::Receiver;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Where the manual clock starts: 2026-11-30T00:00:00Z.
pub const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

/// An engine on a SQLite file, and what a test reaches it by.
pub struct TestEngine {
    pub engine: Engine,
    pub clock: Arc<ManualClock>,
    /// Every call passes through to the SQLite file; see [`Watched`].
    pub store: Arc<Watched>,
    /// `None` until [`TestEngine::start`], and once a test has taken it to shut the engine down.
    pub running: Option<RunningEngine>,
    /// Holds the SQLite file; [`TestEngine::stop`] hands it back for a restart on the same file.
    pub dir: tempfile::TempDir,
}

/// What a test file changes of the engine [`TestEngine::builder`] starts.
pub struct EngineBuilder {
    clock: Arc<ManualClock>,
    dir: Option<tempfile::TempDir>,
    config: EngineConfig,
    allow_private_networks: bool,
    executor: Option<Arc<dyn Handler>>,
    handlers: Vec<(String, Arc<dyn Handler>)>,
}

impl TestEngine {
    /// A clock at [`T0`], a new directory, the one queue `EngineConfig::default` has, polls and
    /// maintenance every 50 ms, a heartbeat every 100 ms.
    pub fn builder() -> EngineBuilder {
        EngineBuilder {
            clock: Arc::new(ManualClock::new(T0)),
            dir: None,
            config: EngineConfig {
                worker_id: "test-worker".into(),
                poll_interval: Duration::from_millis(50),
                maintenance_interval: Duration::from_millis(50),
                heartbeat: Duration::from_millis(100),
                ..EngineConfig::default()
            },
            allow_private_networks: true,
            executor: None,
            handlers: Vec::new(),
        }
    }

    /// Starts the engine [`EngineBuilder::build`] made.
    pub async fn start(&mut self) {
        assert!(self.running.is_none(), "the engine is started once");
        self.running = Some(self.engine.start().await.expect("engine starts"));
    }

    /// Waits until the engine has done all it can at the clock's instant ([`super::settle`]).
    pub async fn settle(&self) {
        super::settle(&self.engine, &self.store, self.clock.now()).await;
    }

    /// Shuts the engine down (if a test has not) and hands back the directory of its file.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(r) = self.running.take() {
            r.shutdown(Duration::from_secs(5)).await;
        }
        self.dir
    }
}

impl EngineBuilder {
    /// The clock the engine runs on (a test shares it with its receivers).
    pub fn clock(mut self, clock: Arc<ManualClock>) -> Self {
        self.clock = clock;
        self
    }

    /// Opens the SQLite file another engine left in `dir`: a restart.
    pub fn in_dir(mut self, dir: tempfile::TempDir) -> Self {
        self.dir = Some(dir);
        self
    }

    /// Adds the queue `name`, or replaces it.
    pub fn queue(mut self, name: &str, queue: QueueConfig) -> Self {
        self.config.queues.insert(name.to_owned(), queue);
        self
    }

    /// Limits for endpoints not named in [`EngineBuilder::endpoints`].
    pub fn endpoint_defaults(mut self, limits: EndpointConfig) -> Self {
        self.config.endpoint_defaults = limits;
        self
    }

    /// Webhook targets told of endpoint and alert events.
    pub fn notifications(
        mut self,
        targets: Vec<redial_engine::notifications::NotificationTarget>,
    ) -> Self {
        self.config.notifications = targets;
        self
    }

    pub fn endpoints(mut self, endpoints: BTreeMap<String, EndpointSettings>) -> Self {
        self.config.endpoints = endpoints;
        self
    }

    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.config.poll_interval = every;
        self
    }

    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.config.heartbeat = every;
        self
    }

    /// Whether the HTTP executor may send to private addresses (it may unless told otherwise).
    pub fn allow_private_networks(mut self, allow: bool) -> Self {
        self.allow_private_networks = allow;
        self
    }

    /// Runs every queue's jobs with `executor` instead of the HTTP executor.
    pub fn executor(mut self, executor: Arc<dyn Handler>) -> Self {
        self.executor = Some(executor);
        self
    }

    /// Runs `queue`'s jobs with `handler`.
    pub fn handler(mut self, queue: &str, handler: Arc<dyn Handler>) -> Self {
        self.handlers.push((queue.to_owned(), handler));
        self
    }

    /// The engine, not started: a test can set up its store first ([`TestEngine::start`]).
    pub fn build(self) -> TestEngine {
        let dir = self
            .dir
            .unwrap_or_else(|| tempfile::tempdir().expect("temp dir"));
        let store = Watched::new(Arc::new(
            SqliteStore::open(&dir.path().join("redial.db")).expect("open"),
        ));
        let executor = self.executor.unwrap_or_else(|| {
            Arc::new(
                HttpExecutor::new(HttpConfig {
                    allow_private_networks: self.allow_private_networks,
                    ..HttpConfig::default()
                })
                .expect("http client"),
            )
        });
        let mut engine = Engine::new(
            store.clone() as Arc<dyn Store>,
            self.config,
            self.clock.clone(),
            executor,
        );
        for (queue, handler) in self.handlers {
            engine = engine.with_handler(&queue, handler);
        }
        TestEngine {
            engine,
            clock: self.clock,
            store,
            running: None,
            dir,
        }
    }

    /// The engine, started.
    pub async fn start(self) -> TestEngine {
        let mut started = self.build();
        started.start().await;
        started
    }
}

/// A receiver whose time is `clock`'s, counted from [`T0`].
pub async fn receiver_on(clock: &Arc<ManualClock>) -> Receiver {
    let clock = clock.clone();
    Receiver::start_with_clock(move || clock.now().saturating_since(T0)).await
}
