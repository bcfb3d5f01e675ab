//! Redial's HTTP API: enqueue jobs, inspect them with their attempt log, replay, dismiss and cancel,
//! bulk dead-letter actions, stats, health and the OpenAPI document.
//!
//! Owns request validation, the JSON shapes, authentication and error responses. Does not own
//! storage or scheduling: it calls the store through the engine's handle and wakes the engine
//! after enqueues and replays. [`router`] builds the whole API so tests can call it without a socket.

mod auth;
mod error;
mod input;
mod listen;
mod replay;
mod routes;
mod ui;
mod view;

pub use error::{ApiError, ErrorCode};
pub use input::Intake;
pub use listen::{serve, RESERVE};

use axum::Router;
use redial_engine::Engine;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The API's limits and credentials.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// When set, every `/v1` route needs `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// A second token that may read every `/v1` route and change nothing (403 `read_only`): for
    /// dashboards and people who look but do not act.
    pub read_only_token: Option<String>,
    /// The dashboard only looks (`ui.read_only`): requests a browser sends (with `Origin` or
    /// `Sec-Fetch-Mode`) may read and change nothing; programs (the CLI, clients) keep their rights.
    pub ui_read_only: bool,
    /// Jobs in one batch enqueue.
    pub max_batch: usize,
    /// Bytes in one API request body.
    pub max_request_bytes: usize,
    /// Bytes in one job's HTTP request body.
    pub max_job_body_bytes: usize,
    /// Only requests whose `Host` is a loopback name (or one of `allowed_hosts`) are served: set
    /// when listening on loopback, so that a web page whose name was rebound to 127.0.0.1 cannot
    /// reach the API.
    pub check_host: bool,
    /// Host names served besides the loopback ones, when `check_host`.
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://app.example.com`) whose pages may call the API (CORS); none by default,
    /// and cross-site requests from any other origin are refused.
    pub allowed_origins: Vec<String>,
    /// Connections open at once; at the cap, the longest-idle one is closed to make room.
    pub max_connections: usize,
    /// From the first byte of a request's head to its end.
    pub header_timeout: Duration,
    /// A connection with no request in progress (keep-alive, or never used) is closed after this.
    /// A connection sending an answer (an event stream, a backup, a wait) is not idle.
    pub idle_timeout: Duration,
    /// A connection whose answer could not be written for this long (its reader stopped
    /// reading) is closed.
    pub write_timeout: Duration,
    /// From a request's head to the end of its body.
    pub body_timeout: Duration,
    /// Requests waiting for a job to finish (`GET /v1/jobs/{id}?wait=`) at once; more are
    /// answered 503 `too_many_waiters`.
    pub max_waiters: usize,
    /// The endpoints' credentials, which the intake checks jobs against (a job that carries an
    /// `Authorization` header for an endpoint with credentials is refused, unless it allows it).
    pub credentials: redial_engine::credentials::Credentials,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            token: None,
            read_only_token: None,
            ui_read_only: false,
            max_batch: 1000,
            max_request_bytes: 16 << 20,
            max_job_body_bytes: 1 << 20,
            check_host: false,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(30),
            max_waiters: 1000,
            credentials: Default::default(),
        }
    }
}

/// What every handler sees.
#[derive(Clone, Debug)]
pub struct AppState {
    pub engine: Engine,
    pub config: Arc<ServerConfig>,
    /// Triggered when the server stops taking requests ([`serve`]): event streams end then, so
    /// that the drain does not wait for them.
    pub draining: redial_engine::Shutdown,
    /// What is shared out among clients: backups, event streams, bodies being read.
    pub gates: Gates,
}

/// Reads what a refused request's body sends within a moment (at most 64 KiB in 250 ms) and
/// drops it, so that the refusal can be read: a socket closed with unread bytes is reset, and
/// the client sees the reset instead of the answer.
pub(crate) async fn drain_briefly(body: axum::body::Body) {
    use http_body_util::BodyExt;
    let reading = http_body_util::Limited::new(body, 64 * 1024).collect();
    let _ = tokio::time::timeout(Duration::from_millis(250), reading).await;
}

/// Counters of what long requests hold on a node, so that no client can take it all (issue
/// 55): one backup at a time (each copy takes the database's size on disk until its download
/// ends); at most `max_waiters` event streams; at most a quarter of `max_connections` requests
/// whose bodies are still arriving. Each is taken with a guard that gives it back when dropped.
#[derive(Clone, Debug, Default)]
pub struct Gates(Arc<GateCounts>);

#[derive(Debug, Default)]
struct GateCounts {
    backups: AtomicUsize,
    streams: AtomicUsize,
    bodies: AtomicUsize,
}

/// A taken place of a [`Gates`] counter; given back when dropped.
#[derive(Debug)]
pub struct Gate {
    gates: Gates,
    which: fn(&GateCounts) -> &AtomicUsize,
}

impl Drop for Gate {
    fn drop(&mut self) {
        (self.which)(&self.gates.0).fetch_sub(1, Ordering::AcqRel);
    }
}

impl Gates {
    fn take(&self, which: fn(&GateCounts) -> &AtomicUsize, max: usize) -> Option<Gate> {
        let counter = which(&self.0);
        let mut n = counter.load(Ordering::Acquire);
        loop {
            if n >= max.max(1) {
                return None;
            }
            match counter.compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    return Some(Gate {
                        gates: self.clone(),
                        which,
                    })
                }
                Err(now) => n = now,
            }
        }
    }

    /// The node's one backup, if no other is being made or sent.
    pub fn backup(&self) -> Option<Gate> {
        self.take(|c| &c.backups, 1)
    }

    /// An event stream's place, if fewer than `max` are open.
    pub fn stream(&self, max: usize) -> Option<Gate> {
        self.take(|c| &c.streams, max)
    }

    /// A place to read a request's body in, if fewer than `max` are arriving.
    pub fn body(&self, max: usize) -> Option<Gate> {
        self.take(|c| &c.bodies, max)
    }
}

/// The whole API.
pub fn router(state: AppState) -> Router {
    routes::router(state)
}

/// The OpenAPI document served at `/v1/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Makes the configuration file's `[[schedules]]` the schedules marked as coming from it, each
/// checked as the API checks one (see `Engine::schedules_from_config`). Each table is a schedule
/// as `POST /v1/schedules` takes it.
pub async fn schedules_from_config(
    state: &AppState,
    tables: Vec<serde_json::Value>,
) -> Result<(), String> {
    let now = state.engine.clock().now();
    let defined =
        redial_intake::config_schedules(&state.intake(), tables, now).map_err(|e| e.join("; "))?;
    state
        .engine
        .schedules_from_config(defined)
        .await
        .map_err(|e| e.to_string())
}
