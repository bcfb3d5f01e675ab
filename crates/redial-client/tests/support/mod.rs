//! What the client's tests share: a real server on loopback (the API's router over a SQLite
//! file), its engine started or not.

#![allow(dead_code)] // each test binary uses its own part

use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{Clock, Engine, EngineConfig, RunningEngine};
use redial_server::{AppState, ServerConfig};
use redial_store_sqlite::SqliteStore;
use std::sync::Arc;
use std::time::Duration;

pub struct Server {
    pub base: String,
    running: Option<RunningEngine>,
    _stop: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Serves `config` on 127.0.0.1:0 with an engine on `clock`, started when `engine` is given
    /// (these are its settings), not started otherwise (cases about the API alone).
    pub async fn start(
        config: ServerConfig,
        clock: Arc<dyn Clock>,
        engine: Option<EngineConfig>,
    ) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Arc::new(SqliteStore::open(&dir.path().join("redial.db")).expect("open"));
        let http = HttpExecutor::new(HttpConfig {
            allow_private_networks: true,
            ..HttpConfig::default()
        })
        .expect("an HTTP client");
        let started = engine.is_some();
        let engine = Engine::new(store, engine.unwrap_or_default(), clock, Arc::new(http));
        let running = if started {
            Some(engine.start().await.expect("the engine starts"))
        } else {
            None
        };
        let state = AppState {
            draining: redial_engine::Shutdown::new(),
            gates: Default::default(),
            engine,
            config: Arc::new(config),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(redial_server::serve(listener, state, async {
            let _ = stopped.await;
        }));
        Server {
            base,
            running,
            _stop: stop,
            _dir: dir,
        }
    }

    /// Stops the engine, if it was started, letting attempts in flight finish.
    pub async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown(Duration::from_secs(5)).await;
        }
    }
}
