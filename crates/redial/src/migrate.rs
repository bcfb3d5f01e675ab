//! `redial migrate`: where the database's schema stands, the migrations this Redial would apply,
//! and applying them; and the check `serve --migrate` makes at start. A cluster is upgraded by
//! running `redial migrate` once, then rolling the nodes (which check, and refuse to start on a
//! schema that is behind or ahead of them).

use crate::serve::redact_url;
use crate::UsageError;
use anyhow::{bail, Result};
use redial_store::{SchemaStatus, StoreError};
use redial_store_postgres::PgStore;
use redial_store_sqlite::SqliteStore;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The PostgreSQL database, as `serve` takes it (TLS settings included). Prefer the
    /// environment variable when the URL holds a password.
    #[arg(
        long,
        env = "REDIAL_DATABASE_URL",
        value_name = "URL",
        hide_env_values = true,
        conflicts_with = "data_dir"
    )]
    database_url: Option<String>,
    /// The folder of the embedded SQLite database [default: as `serve`'s: $XDG_DATA_HOME/redial
    /// or ~/.local/share/redial]. Refused while a `redial serve` has it open.
    #[arg(long, env = "REDIAL_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Print the schema's version and what each pending migration would do; change nothing.
    #[arg(long)]
    dry_run: bool,
}

/// When `serve` applies migrations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Apply pending migrations at start (safe with several nodes starting at once).
    Auto,
    /// Refuse to start while migrations are pending, naming the command that applies them.
    Check,
}

pub async fn run(args: Args) -> Result<()> {
    let (name, before) = match (&args.database_url, &args.data_dir) {
        (Some(url), _) => {
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return Err(UsageError(format!(
                    "--database-url must start with postgres:// or postgresql://, not {:?}",
                    redact_url(url)
                ))
                .into());
            }
            let status = PgStore::schema_status(url).await.map_err(refusal)?;
            (redact_url(url), status)
        }
        (None, dir) => {
            let db = database_file(dir.clone());
            let status = SqliteStore::schema_status(&db).map_err(refusal)?;
            (db.display().to_string(), status)
        }
    };
    println!(
        "database {name}: schema version {} (this Redial knows {})",
        before.version, before.latest
    );
    if before.is_newer() {
        bail!(
            "the database has schema version {}, newer than this Redial knows ({}): upgrade Redial",
            before.version,
            before.latest
        );
    }
    if before.pending.is_empty() {
        println!("up to date: nothing to apply");
        return Ok(());
    }
    println!("pending:");
    for m in &before.pending {
        println!("  migration {}:", m.version);
        for s in &m.statements {
            println!("    {s}");
        }
    }
    if args.dry_run {
        println!("dry run: nothing changed; run without --dry-run to apply them");
        return Ok(());
    }
    match (&args.database_url, &args.data_dir) {
        (Some(url), _) => {
            PgStore::migrate(url).await.map_err(refusal)?;
        }
        (None, dir) => {
            let db = database_file(dir.clone());
            if let Some(folder) = db.parent() {
                crate::serve::create_data_dir(folder)?;
            }
            SqliteStore::migrate(&db).map_err(refusal)?;
        }
    }
    println!(
        "applied migrations {} to {}: schema version {}",
        before.version + 1,
        before.latest,
        before.latest
    );
    Ok(())
}

/// The embedded database's file in `dir` (or the default folder).
pub fn database_file(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(crate::config::default_data_dir)
        .join("redial.db")
}

fn refusal(e: StoreError) -> anyhow::Error {
    match e {
        StoreError::Unavailable(why) | StoreError::Backend(why) => anyhow::anyhow!("{why}"),
        other => other.into(),
    }
}

/// What `serve` does at start: with `check` (or, by default, a PostgreSQL database that already
/// holds Redial's schema), refuses a schema with migrations pending, saying how to apply them;
/// always refuses one newer than this Redial. `command` is the `redial migrate` to run.
pub fn check(mode: Mode, status: &SchemaStatus, command: &str) -> Result<()> {
    if status.is_newer() {
        bail!(
            "refusing to start: the database has schema version {}, newer than this Redial knows ({}): upgrade this node",
            status.version,
            status.latest
        );
    }
    if mode == Mode::Check && !status.pending.is_empty() {
        let versions: Vec<String> = status
            .pending
            .iter()
            .map(|m| m.version.to_string())
            .collect();
        bail!(
            "refusing to start: the database has schema version {} and this Redial needs {} (migrations {} pending). Apply them once with `{command}` (`--dry-run` shows what they change), then start the nodes; or start with --migrate auto",
            status.version,
            status.latest,
            versions.join(", ")
        );
    }
    Ok(())
}

/// The mode `serve` uses when none is given: `auto` for SQLite and for a PostgreSQL database
/// without Redial's schema (a first start), `check` for one with it, so that a node of a newer
/// version never migrates a schema the running nodes use.
pub fn default_mode(postgres: bool, status: &SchemaStatus) -> Mode {
    if postgres && status.version > 0 {
        Mode::Check
    } else {
        Mode::Auto
    }
}
