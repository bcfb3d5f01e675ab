//! What `redial serve` runs with, resolved once: flags and `REDIAL_*` variables over the
//! configuration file over the defaults, every value checked, in the types the store, the engine
//! and the API take. `serve.rs` only wires these together.

use crate::config::{default_data_dir, describe_problems, FileConfig, Parsed, Problem, Resolved};
use crate::serve::Args;
use crate::UsageError;
use anyhow::Result;
use redial_engine::http::HttpConfig;
use redial_engine::{EngineConfig, Retention};
use redial_server::ServerConfig;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the jobs live.
#[derive(Debug)]
pub enum StoreChoice {
    /// The embedded default: `redial.db` in this folder.
    Sqlite { data_dir: PathBuf },
    /// A PostgreSQL database several nodes may share: its URL (for messages, no password shown
    /// through `redact_url`) and its settings as read from it, with the file's timeouts.
    Postgres {
        url: String,
        config: Box<redial_store_postgres::DbConfig>,
    },
}

#[derive(Debug)]
pub struct Settings {
    pub listen: SocketAddr,
    pub store: StoreChoice,
    pub http: HttpConfig,
    /// Without a tracer: it is started (from the `OTEL_*` variables) when serving begins.
    pub engine: EngineConfig,
    /// `max_connections` as configured: it is fitted to the open-file limit when serving begins.
    pub server: ServerConfig,
    pub shutdown_grace: Duration,
    /// The configuration file's `[[schedules]]`, as JSON, checked when serving starts.
    pub schedules: Vec<serde_json::Value>,
}

impl Settings {
    pub fn resolve(args: &Args) -> Result<Settings> {
        let parsed = match &args.config {
            Some(p) => FileConfig::read(p)?,
            None => {
                let config = FileConfig::default();
                let resolved = Some(config.resolve().map_err(UsageError)?);
                Parsed {
                    config,
                    resolved,
                    problems: Vec::new(),
                }
            }
        };
        let file = parsed.config;
        // Every problem is told, not only the first: the file's, then the flags' and variables'
        // (read over what could be read of the file).
        let file_problems = parsed.problems;
        let mut problems: Vec<String> = Vec::new();
        let (listen, token, read_only_token) = listen_and_tokens(args, &file, &mut problems);
        let store = store_choice(args, &file, &mut problems);
        let (resolved, store) = match (parsed.resolved, store) {
            (Some(r), Some(store)) if file_problems.is_empty() && problems.is_empty() => (r, store),
            _ => {
                let file_name = args
                    .config
                    .as_ref()
                    .map_or_else(String::new, |p| p.display().to_string());
                return Err(UsageError(describe_all(&file_name, &file_problems, &problems)).into());
            }
        };
        let http = http_config(args, &file, &resolved);
        let shutdown_grace = file.engine.shutdown_grace;
        let schedules = file
            .schedules
            .iter()
            .map(|t| serde_json::to_value(t).map_err(|e| UsageError(format!("schedules: {e}"))))
            .collect::<Result<_, _>>()?;
        let engine = engine_config(&file, resolved);
        let mut server = server_config(file, token, read_only_token, listen);
        server.credentials = http.credentials.clone();
        Ok(Settings {
            listen,
            store,
            http,
            engine,
            server,
            shutdown_grace,
            schedules,
        })
    }
}

/// Where to listen and the API's tokens, from the flags, variables and file; what is wrong goes
/// to `problems`.
fn listen_and_tokens(
    args: &Args,
    file: &FileConfig,
    problems: &mut Vec<String>,
) -> (SocketAddr, Option<String>, Option<String>) {
    let listen = args
        .listen
        .clone()
        .or(file.server.listen.clone())
        .unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let listen: SocketAddr = listen.parse().unwrap_or_else(|_| {
        problems.push(format!(
            "--listen {listen:?} is not ADDR:PORT, such as 127.0.0.1:8080"
        ));
        SocketAddr::from(([127, 0, 0, 1], 8080))
    });
    let token = checked_token(
        args.token.clone().or(file.server.token.clone()),
        "the token (REDIAL_TOKEN, --token or server.token)",
    )
    .unwrap_or_else(|e| {
        problems.push(e);
        None
    });
    let read_only_token = checked_token(
        args.read_only_token
            .clone()
            .or(file.server.read_only_token.clone()),
        "the read-only token (REDIAL_READ_ONLY_TOKEN, --read-only-token or server.read_only_token)",
    )
    .unwrap_or_else(|e| {
        problems.push(e);
        None
    });
    if read_only_token.is_some() && read_only_token == token {
        problems.push(
            "the read-only token is the same as the token: give it a value of its own".into(),
        );
    }
    let allow_unauthenticated = args.allow_unauthenticated || file.server.allow_unauthenticated;
    if !listen.ip().is_loopback() && token.is_none() && !allow_unauthenticated {
        problems.push(format!(
            "refusing to serve on {listen} without a token: set REDIAL_TOKEN (or server.token), \
             listen on 127.0.0.1, or pass --allow-unauthenticated if something in front authenticates"
        ));
    }
    (listen, token, read_only_token)
}

/// The store: PostgreSQL when a database URL is given (its form and TLS settings read, nothing
/// connected), else SQLite in the data folder; none when the URL is wrong (told in `problems`).
fn store_choice(args: &Args, file: &FileConfig, problems: &mut Vec<String>) -> Option<StoreChoice> {
    let database_url = args
        .database_url
        .clone()
        .or(file.database_url.clone())
        .filter(|u| !u.is_empty());
    match database_url {
        Some(url) if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) => {
            problems.push(format!(
                "--database-url must start with postgres:// or postgresql://, not {:?}",
                crate::serve::redact_url(&url)
            ));
            None
        }
        // Its form and TLS settings read once, as the store takes them (nothing is connected).
        Some(url) => redial_store_postgres::DbConfig::parse(&url)
            .map(|mut config| {
                // Zero is the one value refused, and the file's check says so already.
                let _ =
                    config.set_timeouts(file.postgres.call_timeout, file.postgres.ready_timeout);
                StoreChoice::Postgres {
                    url: url.clone(),
                    config: Box::new(config),
                }
            })
            .map_err(|e| problems.push(format!("--database-url: {e}")))
            .ok(),
        None => Some(StoreChoice::Sqlite {
            data_dir: args
                .data_dir
                .clone()
                .or(file.data_dir.clone())
                .unwrap_or_else(default_data_dir),
        }),
    }
}

/// The HTTP executor's settings.
fn http_config(args: &Args, file: &FileConfig, resolved: &Resolved) -> HttpConfig {
    HttpConfig {
        allow_private_networks: args.allow_private_networks || file.network.allow_private_networks,
        default_timeout: file.http.default_timeout,
        connect_timeout: file.http.connect_timeout,
        max_body_bytes: file.http.max_body_bytes,
        idempotency_header: file.http.idempotency_header.clone(),
        idempotency_methods: file
            .http
            .idempotency_methods
            .iter()
            .map(|m| m.to_ascii_uppercase())
            .collect(),
        signing: resolved.signing.clone(),
        credentials: resolved.credentials.clone(),
        ..HttpConfig::default()
    }
}

/// The engine's settings: the resolved queues, endpoints, alerts and notifications, and the
/// file's engine, retention and metrics sections.
fn engine_config(file: &FileConfig, resolved: Resolved) -> EngineConfig {
    EngineConfig {
        queues: resolved.queues,
        endpoint_defaults: resolved.endpoint_defaults,
        endpoints: resolved.endpoints,
        lease: file.engine.lease,
        heartbeat: file.engine.heartbeat,
        max_stalls: file.engine.max_stalls,
        poll_interval: file.engine.poll_interval,
        retention: Retention {
            completed: file.retention.completed,
            completed_max: file.retention.completed_max,
            dead: file.retention.dead,
            events: file.retention.events,
            endpoints: file.retention.endpoints,
        },
        default_timeout: file.http.default_timeout,
        metrics_max_endpoints: file.metrics.max_endpoints,
        alerts: resolved.alerts,
        notifications: resolved.notifications,
        ..EngineConfig::default()
    }
}

/// The API server's settings.
fn server_config(
    file: FileConfig,
    token: Option<String>,
    read_only_token: Option<String>,
    listen: SocketAddr,
) -> ServerConfig {
    let s = file.server;

    ServerConfig {
        token,
        read_only_token,
        ui_read_only: file.ui.read_only,
        max_batch: s.max_batch,
        max_request_bytes: s.max_request_bytes,
        max_job_body_bytes: s.max_job_body_bytes,
        // On loopback, only requests to a loopback name: a web page whose name was rebound
        // to 127.0.0.1 must not reach a tokenless API.
        check_host: listen.ip().is_loopback(),
        allowed_hosts: s.allowed_hosts,
        allowed_origins: s.allowed_origins,
        max_connections: s.max_connections,
        header_timeout: s.header_timeout,
        idle_timeout: s.idle_timeout,
        write_timeout: s.write_timeout,
        body_timeout: s.body_timeout,
        max_waiters: s.max_waiters,
        credentials: Default::default(),
    }
}

/// The API's token: unset or empty is none; spaces around it are not part of it (a copy-paste,
/// `REDIAL_TOKEN="abc "`: no client could send them); the rest must be a bearer token's
/// characters.
fn checked_token(given: Option<String>, what: &str) -> Result<Option<String>, String> {
    let Some(t) = given.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let t = t.trim();
    if t.is_empty() {
        return Err(format!("{what} is only spaces: set a token or unset it"));
    }
    if !t.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!(
            "{what} must be printable ASCII without spaces, as a bearer token is"
        ));
    }
    Ok(Some(t.to_owned()))
}

/// The file's problems and the flags' as one message: the file's as [`describe_problems`] says
/// them; with the flags' too, a line for each.
fn describe_all(file: &str, in_file: &[Problem], flags: &[String]) -> String {
    match (in_file, flags) {
        (_, []) => describe_problems(file, in_file),
        ([], [one]) => one.clone(),
        _ => {
            let mut out = format!(
                "invalid configuration: {} problems",
                in_file.len() + flags.len()
            );
            for p in in_file {
                let line = p.line.map_or_else(String::new, |l| format!(", line {l}"));
                out.push_str(&format!("\n  {file}{line}: {}", p.message));
            }
            for f in flags {
                out.push_str(&format!("\n  {f}"));
            }
            out
        }
    }
}
