//! Connections: a pooled connection with its prepared statements, opening one (TLS as
//! configured), and what a PostgreSQL error means for the store (unavailable, or a fault).
//!
//! No call waits on the database forever. Every store call waits at most `postgres.call_timeout`
//! (default `OP_TIMEOUT`, 10 s) for a connection and again for its answer (readiness
//! `postgres.ready_timeout`, default `PING_TIMEOUT`, 3 s; `DbConfig::set_timeouts`); one that
//! waited past it drops its connection (mid-statement) and answers `Unavailable` (503
//! `storage_unavailable`), so a hung server holds no API request and no loop; the next call opens a
//! new connection. Such an answer is ambiguous (the statement may still run when the server
//! resumes): writes stay idempotent by job id. A recording that fails this way is asked again for
//! as long as a lease lasts (the engine's `engine/recording.rs`), so a blink does not make a job
//! run twice.

use super::tls::DbConfig;
use redial_store::{StoreError, StoreResult};
use std::collections::HashMap;
use tokio_postgres::{Client, Statement};

/// One pooled connection and the statements prepared on it.
pub(crate) struct Conn {
    pub client: Client,
    pub stmts: HashMap<&'static str, Statement>,
    /// A transaction was begun on it and not ended (its future was dropped midway): rolled back
    /// before the connection is used again.
    pub open_transaction: bool,
}

impl Conn {
    /// The connection in `slot`, opened first if there is none or it broke.
    pub(crate) async fn ready<'a>(
        slot: &'a mut Option<Conn>,
        config: &DbConfig,
    ) -> StoreResult<&'a mut Conn> {
        if slot.as_ref().is_none_or(|c| c.client.is_closed()) {
            *slot = Some(Conn {
                client: connect(config).await?,
                stmts: HashMap::new(),
                open_transaction: false,
            });
        }
        Ok(slot.as_mut().expect("connected above"))
    }

    /// A statement prepared once per connection.
    pub async fn prepared(&mut self, sql: &'static str) -> StoreResult<Statement> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(sql).await.map_err(backend)?;
        self.stmts.insert(sql, s.clone());
        Ok(s)
    }
}

/// The server's message for a failure (tokio-postgres's own display says only "db error").
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => match std::error::Error::source(e) {
            // "error connecting to server: Connection refused (os error 111)"
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

pub(crate) fn backend(e: tokio_postgres::Error) -> StoreError {
    if unavailable(&e) {
        StoreError::Unavailable(describe(&e))
    } else {
        StoreError::Backend(describe(&e))
    }
}

/// Whether the failure says the database cannot serve now (a lost connection, a server shutting
/// down or starting, a full disk, too many connections, a read-only server) rather than that the
/// request was wrong.
pub(crate) fn unavailable(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        Some(code) => {
            let c = code.code();
            // 08: connection exception; 53: insufficient resources (disk full, out of memory,
            // too many connections); 57P01-57P03: shutting down, starting; 25006: read-only.
            c.starts_with("08")
                || c.starts_with("53")
                || matches!(c, "57P01" | "57P02" | "57P03" | "25006")
        }
        None => {
            e.is_closed() || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
        }
    }
}

pub(crate) async fn connect(config: &DbConfig) -> StoreResult<Client> {
    let (client, connection) = config
        .connect()
        .await
        .map_err(|e| StoreError::Unavailable(format!("cannot connect to PostgreSQL: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %describe(&e), "a PostgreSQL connection ended");
        }
    });
    Ok(client)
}
