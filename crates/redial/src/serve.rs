//! `redial serve`: the store, the engine and the API in one process, stopped gracefully by
//! SIGINT or SIGTERM.

use crate::settings::{Settings, StoreChoice};
use crate::UsageError;
use anyhow::{Context, Result};
use redial_engine::http::HttpExecutor;
use redial_engine::{Engine, EngineConfig, SystemClock};
use redial_server::{AppState, ServerConfig};
use redial_store::Store;
use redial_store_postgres::PgStore;
use redial_store_sqlite::SqliteStore;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on. Binding to anything but loopback needs a token (or
    /// --allow-unauthenticated).
    #[arg(long, env = "REDIAL_LISTEN", value_name = "ADDR:PORT")]
    pub(crate) listen: Option<String>,
    /// Folder for the embedded SQLite database [default: $XDG_DATA_HOME/redial or
    /// ~/.local/share/redial]. Not used with --database-url.
    #[arg(long, env = "REDIAL_DATA_DIR", value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Use PostgreSQL instead of the embedded SQLite file, so that several nodes can share one
    /// database: postgres://user:password@host:port/dbname. TLS as libpq reads it: ?sslmode=
    /// disable|prefer (default)|require|verify-ca|verify-full, sslrootcert=FILE|system, sslcert,
    /// sslkey (or PGSSLMODE, PGSSLROOTCERT, PGSSLCERT, PGSSLKEY). Prefer the environment variable
    /// when the URL holds a password: flags show in `ps`.
    #[arg(
        long,
        env = "REDIAL_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true
    )]
    pub(crate) database_url: Option<String>,
    /// Configuration file (TOML).
    #[arg(long, env = "REDIAL_CONFIG", value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Let jobs call loopback, private, link-local and other non-public addresses.
    #[arg(long, env = "REDIAL_ALLOW_PRIVATE_NETWORKS")]
    pub(crate) allow_private_networks: bool,
    /// Bearer token the API requires. Prefer the environment variable: flags show in `ps`.
    #[arg(long, env = "REDIAL_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// A second token that may read everything and change nothing (403 read_only): for the
    /// dashboard of people who look but do not act. Prefer the environment variable.
    #[arg(long, env = "REDIAL_READ_ONLY_TOKEN", hide_env_values = true)]
    pub(crate) read_only_token: Option<String>,
    /// Serve without a token on a non-loopback address (only behind something that authenticates).
    #[arg(long, env = "REDIAL_ALLOW_UNAUTHENTICATED")]
    pub(crate) allow_unauthenticated: bool,
    /// Log lines as JSON objects (one per line, for log stores) or for people.
    #[arg(long, env = "REDIAL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
    /// Schema migrations at start: `auto` applies pending ones; `check` refuses to start while
    /// any are pending, naming the `redial migrate` that applies them (upgrade a cluster with it
    /// once, then roll the nodes) [default: auto for SQLite and for a PostgreSQL database without
    /// Redial's schema yet, check for one with it]. A schema newer than this Redial is always
    /// refused.
    #[arg(long, env = "REDIAL_MIGRATE", value_enum, value_name = "MODE")]
    pub(crate) migrate: Option<crate::migrate::Mode>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Json,
    Pretty,
}

pub async fn run(args: Args) -> Result<()> {
    let settings = Settings::resolve(&args)?;
    let addr = settings.listen;
    let (store, db) = open_store(&settings.store, args.migrate).await?;
    let http = HttpExecutor::new(settings.http).context("building the HTTP client")?;
    // Traces: off unless the standard OTEL_* variables name an OTLP endpoint.
    let tracer = redial_engine::otel::OtlpConfig::from_env(|k| std::env::var(k).ok())
        .map_err(UsageError)?
        .map(|c| {
            tracing::info!(endpoint = %redact_url(&c.endpoint), service = %c.service_name, "exporting traces over OTLP (http/json)");
            Arc::new(redial_engine::otel::Tracer::start(c))
        });
    let engine_config = EngineConfig {
        tracer,
        ..settings.engine
    };
    let engine = Engine::new(store, engine_config, Arc::new(SystemClock), Arc::new(http));
    let state = AppState {
        draining: redial_engine::Shutdown::new(),
        gates: Default::default(),
        engine: engine.clone(),
        config: Arc::new(ServerConfig {
            max_connections: fit_open_files(settings.server.max_connections),
            ..settings.server
        }),
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    let bound = listener.local_addr().context("reading the bound address")?;
    // Listening for SIGINT and SIGTERM from before the address is announced: a stop sent as soon
    // as the address shows must be a graceful one.
    let signals = Signals::install().context("listening for signals")?;
    redial_server::schedules_from_config(&state, settings.schedules)
        .await
        .map_err(|e| UsageError(format!("in the configuration file: {e}")))?;
    let running = engine.start().await.context("loading endpoint state")?;
    announce(
        args.log_format,
        &format!("redial listening on http://{bound} (database {db})"),
        || tracing::info!(address = %format!("http://{bound}"), database = %db, "redial listening"),
    );

    let shutdown = redial_engine::Shutdown::new();
    let signal = shutdown.clone();
    tokio::spawn(async move {
        signals.wait().await;
        signal.trigger();
    });
    let stop = shutdown.clone();
    redial_server::serve(listener, state, async move { stop.wait().await })
        .await
        .context("serving the API")?;
    announce(
        args.log_format,
        "redial stopping: finishing in-flight attempts",
        || tracing::info!("redial stopping: finishing in-flight attempts"),
    );
    let report = running.shutdown(settings.shutdown_grace).await;
    announce(
        args.log_format,
        &format!(
            "redial stopped ({} in-flight attempts finished, {} given back)",
            report.finished, report.released
        ),
        || {
            tracing::info!(
                finished = report.finished,
                released = report.released,
                "redial stopped"
            )
        },
    );
    Ok(())
}

/// Says one thing once: for people a plain line on standard error (whatever `REDIAL_LOG` filters
/// out), in JSON mode only the log event, so the stream stays one JSON object per line.
fn announce(format: LogFormat, plain: &str, event: impl FnOnce()) {
    match format {
        LogFormat::Pretty => eprintln!("{plain}"),
        LogFormat::Json => event(),
    }
}

/// SIGINT and SIGTERM (Ctrl-C elsewhere), registered when made.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    async fn wait(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Creates the SQLite data folder if missing; only its owner may enter a new one (the database
/// holds every job's request, credentials included).
pub(crate) fn create_data_dir(data_dir: &std::path::Path) -> Result<()> {
    let mut folder = std::fs::DirBuilder::new();
    folder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut folder, 0o700);
    folder
        .create(data_dir)
        .with_context(|| format!("creating the data folder {}", data_dir.display()))
}

/// Opens the chosen store (creating a new SQLite data folder private to its owner, and refusing
/// a damaged database file); returns it with how to name it in messages (no password).
async fn open_store(
    choice: &StoreChoice,
    migrate: Option<crate::migrate::Mode>,
) -> Result<(Arc<dyn Store>, String)> {
    match choice {
        StoreChoice::Postgres { url, config } => {
            let status = PgStore::schema_status_with(config)
                .await
                .with_context(|| format!("connecting to {}", redact_url(url)))?;
            let mode = migrate.unwrap_or_else(|| crate::migrate::default_mode(true, &status));
            crate::migrate::check(
                mode,
                &status,
                "redial migrate --database-url URL (or REDIAL_DATABASE_URL)",
            )?;
            let store =
                PgStore::connect_with(*config.clone(), redial_store_postgres::DEFAULT_POOL_SIZE)
                    .await
                    .with_context(|| format!("connecting to {}", redact_url(url)))?;
            Ok((Arc::new(store), redact_url(url)))
        }
        StoreChoice::Sqlite { data_dir } => {
            create_data_dir(data_dir)?;
            let db = data_dir.join("redial.db");
            let status = SqliteStore::schema_status(&db).map_err(|e| match e {
                redial_store::StoreError::Unavailable(why) => {
                    anyhow::anyhow!("refusing to start: {why}")
                }
                other => other.into(),
            })?;
            crate::migrate::check(
                migrate.unwrap_or(crate::migrate::Mode::Auto),
                &status,
                &format!("redial migrate --data-dir {}", data_dir.display()),
            )?;
            let size = std::fs::metadata(&db).map_or(0, |m| m.len());
            // Opening a large database takes a while (its jobs are counted once): say so.
            let opening = std::time::Instant::now();
            let slow = size > 64 << 20;
            if slow {
                tracing::info!(
                    file = %db.display(),
                    megabytes = size >> 20,
                    "opening the database: migrating if needed and counting its jobs"
                );
            }
            let store = SqliteStore::open(&db).map_err(|e| match e {
                // The file is damaged, locked or cannot be written: say so as a refusal.
                redial_store::StoreError::Unavailable(why) => {
                    anyhow::anyhow!("refusing to start: {why}")
                }
                other => other.into(),
            })?;
            if slow {
                tracing::info!(
                    seconds = opening.elapsed().as_secs_f64(),
                    "opened the database; checking its integrity (up to {}s before serving)",
                    INTEGRITY_WAIT.as_secs()
                );
            }
            // The whole file is checked in the background; a small database's answer comes at
            // once, and a damaged one is refused before anything is served.
            match store.integrity(INTEGRITY_WAIT).await {
                Some(Ok(())) => {}
                Some(Err(why)) => anyhow::bail!("refusing to start: {why}"),
                None => tracing::warn!(
                    file = %db.display(),
                    "the database file's integrity check goes on in the background: /readyz answers 503 until it passes"
                ),
            }
            Ok((Arc::new(store), db.display().to_string()))
        }
    }
}

/// How long the start waits for the database file's integrity check before serving with
/// readiness held until it ends (a few gigabytes are checked within it on an SSD).
const INTEGRITY_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// File descriptors kept for the database, outbound requests and logs, besides API connections
/// (a quarter of the limit when that is less).
const RESERVED_FILES: u64 = 256;

/// The connection cap, lowered if the process's open-file limit could not hold it (once the soft
/// limit is raised to the hard one, as servers do): running out of file descriptors would stop
/// accepting connections (and outbound requests) altogether.
fn fit_open_files(max_connections: usize) -> usize {
    let Some(limit) = raise_open_file_limit() else {
        return max_connections;
    };
    let reserved = RESERVED_FILES.min(limit / 4);
    // The accept loop may hold `RESERVE` connections beyond the cap, for short calls.
    let room = usize::try_from(limit.saturating_sub(reserved).max(16 + 32))
        .unwrap_or(usize::MAX)
        .saturating_sub(redial_server::RESERVE);
    if max_connections > room {
        tracing::warn!(
            configured = max_connections,
            lowered_to = room,
            open_file_limit = limit,
            "server.max_connections lowered to fit the open-file limit (raise it: ulimit -n, or LimitNOFILE= under systemd)"
        );
        return room;
    }
    max_connections
}

/// Raises the soft open-file limit to the hard one; returns the limit now in force.
#[cfg(unix)]
fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut l = getrlimit(Resource::Nofile);
    if let (Some(cur), max) = (l.current, l.maximum) {
        if max.is_none_or(|m| m > cur) {
            // Some systems refuse "unlimited" for this resource: stay at a large finite value.
            l.current = Some(max.unwrap_or(1 << 20).min(1 << 20));
            if setrlimit(Resource::Nofile, l).is_err() {
                l.current = Some(cur);
            }
        }
    }
    l.current
}

#[cfg(not(unix))]
fn raise_open_file_limit() -> Option<u64> {
    None
}

/// The URL without its password, for messages and logs.
pub(crate) fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("redacted"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "(an unparsable URL)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn database_passwords_never_show() {
        assert_eq!(
            super::redact_url("postgres://app:s3cret@db:5432/redial"),
            "postgres://app:redacted@db:5432/redial"
        );
        assert_eq!(
            super::redact_url("postgres://db/redial"),
            "postgres://db/redial"
        );
        assert!(!super::redact_url("postgres://a:s3cret@[bad").contains("s3cret"));
    }
}
