//! The database file itself: the integrity check, a new file private to its owner, the lock that
//! keeps a second process off it, and what a file that cannot be opened is refused with.

use super::sql;
use redial_store::{StoreError, StoreResult};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The background integrity check's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Integrity {
    Checking,
    Passed,
    Failed(String),
}

/// Reads every page of the database (`PRAGMA quick_check`: b-trees, records, free lists; not
/// index contents) on a connection of its own, beside the writer.
pub(crate) fn check_integrity(path: &Path) -> Integrity {
    let started = std::time::Instant::now();
    let checked = Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|c| {
        let mut stmt = c.prepare("PRAGMA quick_check(10)")?;
        let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
        rows.collect::<rusqlite::Result<Vec<String>>>()
    });
    let file = path.display();
    let outcome = match checked {
        Ok(rows) if rows.len() == 1 && rows[0] == "ok" => Integrity::Passed,
        Ok(rows) => Integrity::Failed(format!(
            "the database file {file} is damaged ({}): stop redial, then restore the file from a backup, or save what it still holds with `sqlite3 {file} .recover | sqlite3 recovered.db` and start on that",
            rows.join("; ")
        )),
        Err(e) => Integrity::Failed(format!(
            "the database file {file} could not be checked ({e}): stop redial, then restore the file from a backup, or save what it still holds with `sqlite3 {file} .recover | sqlite3 recovered.db`"
        )),
    };
    match &outcome {
        Integrity::Passed => tracing::info!(
            file = %file,
            took_ms = started.elapsed().as_millis() as u64,
            "database integrity check passed"
        ),
        Integrity::Failed(why) => tracing::error!(error = %why, "database integrity check failed"),
        Integrity::Checking => {}
    }
    outcome
}

/// Creates a new database file readable by its owner only: it holds every job's request,
/// credentials included. SQLite gives the `-wal` and `-shm` files the same mode. An existing file
/// keeps its own; a failure here is left for SQLite's open to report.
pub(crate) fn create_private(path: &Path) {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let _ = options.open(path);
}

/// What the readiness probe writes: the wall clock, for whoever reads the row.
pub(crate) fn wall_clock_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Takes the file `<database>.lock` beside the database for this process, with our pid in it:
/// a second process writing the same database would not see the first's jobs in its kept counts,
/// nor lease with it, so it is refused (naming the process that holds it). The lock ends with
/// the process, however it ends.
///
/// Within one process the lock is shared: a program (or a test) that opens the file again while
/// an earlier store on it is still being dropped gets the same lock.
pub(crate) fn hold_lock(path: &Path) -> StoreResult<Arc<std::fs::File>> {
    static HELD: std::sync::Mutex<Vec<(PathBuf, std::sync::Weak<std::fs::File>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut name = path.as_os_str().to_owned();
    name.push(".lock");
    let lock_path = PathBuf::from(name);
    let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
    held.retain(|(_, w)| w.strong_count() > 0);
    if let Some(file) = held
        .iter()
        .find(|(p, _)| *p == key)
        .and_then(|(_, w)| w.upgrade())
    {
        return Ok(file);
    }
    let file = Arc::new(lock_file(path, &lock_path)?);
    held.push((key, Arc::downgrade(&file)));
    Ok(file)
}

pub(crate) fn lock_file(path: &Path, lock_path: &Path) -> StoreResult<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(lock_path).map_err(|e| {
        StoreError::Unavailable(format!(
            "{} cannot be written: its lock file {} cannot be opened ({e}); the user running redial must be able to write the database, its folder and the files beside it",
            path.display(),
            lock_path.display()
        ))
    })?;
    match file.try_lock() {
        Ok(()) => {
            use std::io::{Seek, Write};
            let mut f = &file;
            let _ = f.set_len(0);
            let _ = f.seek(std::io::SeekFrom::Start(0));
            let _ = writeln!(f, "{}", std::process::id());
            Ok(file)
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let holder = std::fs::read_to_string(lock_path)
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .map_or_else(String::new, |pid| format!(" (process {pid})"));
            Err(StoreError::Unavailable(format!(
                "{} is in use by another redial{holder}: two processes on one SQLite file would each count and lease on their own. Stop the other one, give this one its own --data-dir, or use PostgreSQL (REDIAL_DATABASE_URL) to run several nodes",
                path.display()
            )))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(StoreError::Unavailable(format!(
            "cannot lock {}: {e}",
            lock_path.display()
        ))),
    }
}

/// Why a database could not be opened, and what to do about it.
pub(crate) fn refusal(path: &Path, e: &rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::*;
    let file = path.display();
    let advice = match e.sqlite_error_code() {
        Some(NotADatabase) => format!(
            "{file} is not a SQLite database, or its first page is damaged: if it is Redial's, restore it from a backup; otherwise choose another --data-dir"
        ),
        Some(DatabaseCorrupt) => format!(
            "the database file {file} is damaged: stop redial, then restore the file from a backup, or save what it still holds with `sqlite3 {file} .recover | sqlite3 recovered.db` and start on that"
        ),
        Some(ReadOnly | CannotOpen | PermissionDenied) => format!(
            "{file} cannot be written: the user running redial must be able to write the file and its folder (SQLite keeps -wal and -shm files beside it), on a disk that is not read-only"
        ),
        Some(DiskFull) => format!("{file} cannot grow: the disk is full; free some space"),
        Some(DatabaseBusy | DatabaseLocked) => format!(
            "{file} is locked by another process (another redial serve on the same data folder?)"
        ),
        _ => format!("cannot open the database {file}"),
    };
    sql::classify(e.sqlite_error_code(), format!("{advice} ({e})"))
}
