//! Online backups: a consistent copy of the database while jobs go on.
//!
//! `VACUUM INTO` on a connection of its own reads the database in one read transaction, so the
//! copy is the database as of one commit, and in WAL mode the writer never waits for it (the WAL
//! only grows until the copy is done, since a checkpoint cannot pass the reader). The copy is
//! written under a temporary name beside its destination, fsynced, checked (`quick_check`), and
//! only then renamed to its name (and the folder fsynced): a copy that has its name is whole.

use redial_store::{StoreError, StoreResult};
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a finished backup holds.
#[derive(Clone, Debug)]
pub struct BackupReport {
    /// The copy's size.
    pub bytes: u64,
    /// The jobs it holds.
    pub jobs: u64,
    /// How long copying and checking took.
    pub took: Duration,
}

/// The prefix of a copy being written: such a file is not a backup yet (see [`sweep`]).
const IN_PROGRESS: &str = ".redial-backup-in-progress-";

/// Room a copy needs besides its own size on its disk, so that the database beside it can
/// still grow while the copy is made.
const HEADROOM: u64 = 64 << 20;

/// A copy being written, claimed for as long as this lives: the file is created readable by its
/// owner only and locked (an advisory lock the kernel drops when the process ends, however it
/// ends). [`sweep`] removes in-progress copies whose lock it can take: their writer is gone.
/// This does not rest on process ids, which a container reuses (its server is always PID 1).
#[derive(Debug)]
pub(crate) struct Claim(#[allow(dead_code)] std::fs::File);

/// Creates `partial` (for its owner only) and claims it.
pub(crate) fn claim(partial: &Path) -> StoreResult<Claim> {
    crate::create_private(partial);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(partial)
        .map_err(|e| {
            StoreError::Backend(format!("cannot write the copy {}: {e}", partial.display()))
        })?;
    file.try_lock().map_err(|e| {
        StoreError::Backend(format!(
            "the copy {} is being written by another process: {e}",
            partial.display()
        ))
    })?;
    Ok(Claim(file))
}

/// Refuses a copy of `source` (`total` bytes at most) when the disk of `partial` has less room
/// than it needs plus [`HEADROOM`]: better refused at once than a full disk for the database.
fn check_room(partial: &Path, total: u64) -> StoreResult<()> {
    let folder = match partial.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let Ok(fs) = rustix::fs::statvfs(folder) else {
        // Unknown room: the copy's own disk-full error stays the guard.
        return Ok(());
    };
    let free = fs.f_bavail.saturating_mul(fs.f_frsize);
    let needs = total.saturating_add(HEADROOM);
    if free < needs {
        return Err(StoreError::Unavailable(format!(
            "not enough free space for a backup beside {}: it needs up to {} MiB (the database's size and 64 MiB to spare), {} MiB are free",
            partial.display(),
            needs >> 20,
            free >> 20
        )));
    }
    Ok(())
}

/// How often `progress` is told how far the copy has got.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// Copies the database at `source` to `dest`, consistent as of one commit, while other
/// connections (a running `redial serve`, in this process or another) go on writing. `dest` must
/// not exist unless `replace`. `progress(written, total)` is called every 200 ms while the copy is
/// written: `total` is the source's size, which the copy may not reach (free pages are left out).
/// Nothing is left under `dest`'s name unless the whole copy was written, fsynced and checked.
pub fn backup_file(
    source: &Path,
    dest: &Path,
    replace: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> StoreResult<BackupReport> {
    let started = Instant::now();
    if !source.is_file() {
        return Err(StoreError::Backend(format!(
            "there is no database at {}: is the data folder right?",
            source.display()
        )));
    }
    let destination = Destination::new(dest, replace)?;
    let bytes = write(source, destination.partial(), progress)?;
    let jobs = destination.finish()?;
    Ok(BackupReport {
        bytes,
        jobs,
        took: started.elapsed(),
    })
}

/// Where a copy goes: its name, and the temporary name beside it that it is written under
/// (hidden, told apart by its prefix). [`Destination::finish`] checks what was written there and
/// gives it the name; dropped unfinished, the temporary file is removed.
#[derive(Debug)]
pub struct Destination {
    dest: PathBuf,
    partial: PathBuf,
    folder: PathBuf,
    replace: bool,
    finished: bool,
    /// The partial file's claim, held until it is named or removed.
    claim: Option<Claim>,
}

impl Destination {
    /// Refuses a `dest` that exists unless `replace`.
    pub fn new(dest: &Path, replace: bool) -> StoreResult<Destination> {
        if !replace && dest.exists() {
            return Err(StoreError::Backend(format!(
                "{} already exists: choose another name, or pass --force to replace it",
                dest.display()
            )));
        }
        let name = dest.file_name().ok_or_else(|| {
            StoreError::Backend(format!("{} is not a file's name", dest.display()))
        })?;
        let folder = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        };
        let partial = folder.join(format!(
            "{IN_PROGRESS}{}-{}",
            std::process::id(),
            name.to_string_lossy()
        ));
        let _ = std::fs::remove_file(&partial);
        let claim = claim(&partial)?;
        Ok(Destination {
            dest: dest.to_owned(),
            partial,
            folder,
            replace,
            finished: false,
            claim: Some(claim),
        })
    }

    /// The temporary name to write the copy under, readable by its owner only (its file is made
    /// so by [`write`]; a writer of its own must make it so) and fsynced before `finish`.
    pub fn partial(&self) -> &Path {
        &self.partial
    }

    /// Checks the copy under the temporary name ([`check`]), then gives it its name and makes the
    /// name durable; answers the jobs it holds.
    pub fn finish(mut self) -> StoreResult<u64> {
        let jobs = check(&self.partial)?;
        if !self.replace && self.dest.exists() {
            return Err(StoreError::Backend(format!(
                "{} appeared while the copy was made: choose another name, or pass --force to replace it",
                self.dest.display()
            )));
        }
        std::fs::rename(&self.partial, &self.dest).map_err(|e| {
            StoreError::Backend(format!("cannot name the copy {}: {e}", self.dest.display()))
        })?;
        self.finished = true;
        // The new name is durable once the folder is.
        if let Ok(dir) = std::fs::File::open(&self.folder) {
            let _ = dir.sync_all();
        }
        Ok(jobs)
    }
}

impl Drop for Destination {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_file(&self.partial);
        }
        // Let go once the file is named or gone, never before.
        self.claim = None;
    }
}

/// Writes the copy to `partial` (created readable by its owner only: it holds every job's
/// request, credentials included) and fsyncs it; answers its size.
pub(crate) fn write(
    source: &Path,
    partial: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> StoreResult<u64> {
    let cannot_write = |e: &dyn std::fmt::Display| {
        StoreError::Backend(format!(
            "cannot write the copy beside {}: {e}",
            partial.display()
        ))
    };
    crate::create_private(partial);
    if !partial.is_file() {
        return Err(cannot_write(&"the folder cannot be written"));
    }
    let target = partial
        .to_str()
        .ok_or_else(|| StoreError::Backend(format!("{} is not UTF-8", partial.display())))?
        .to_owned();
    let conn = Connection::open_with_flags(
        source,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .and_then(|c| {
        c.busy_timeout(Duration::from_secs(10))?;
        Ok(c)
    })
    .map_err(|e| crate::refusal(source, &e))?;
    let total: u64 = conn
        .query_row(
            "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
            [],
            |r| r.get::<_, i64>(0),
        )
        .map(|n| u64::try_from(n).unwrap_or(0))
        .map_err(|e| crate::refusal(source, &e))?;
    check_room(partial, total)?;
    let copied = std::thread::scope(|scope| {
        let copy = scope.spawn(move || conn.execute("VACUUM INTO ?1", [&target]));
        let mut told = Instant::now();
        while !copy.is_finished() {
            std::thread::sleep(Duration::from_millis(5));
            if told.elapsed() >= PROGRESS_EVERY {
                progress(std::fs::metadata(partial).map_or(0, |m| m.len()), total);
                told = Instant::now();
            }
        }
        copy.join()
    });
    match copied {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            return Err(match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DiskFull) => {
                    cannot_write(&"the disk is full; free some space or write elsewhere")
                }
                _ => StoreError::Backend(format!("copying {} failed: {e}", source.display())),
            })
        }
        Err(_) => return Err(StoreError::Backend("the copy's thread panicked".into())),
    }
    let file = std::fs::File::open(partial).map_err(|e| cannot_write(&e))?;
    file.sync_all().map_err(|e| cannot_write(&e))?;
    let bytes = file.metadata().map_err(|e| cannot_write(&e))?.len();
    progress(bytes, total.max(bytes));
    Ok(bytes)
}

/// Checks a copy as `redial serve` would a database it opens (`quick_check`: every page, b-tree
/// and record) and counts its jobs.
pub fn check(copy: &Path) -> StoreResult<u64> {
    let damaged = |why: String| {
        StoreError::Backend(format!(
            "the copy {} failed its check ({why}): it was not kept",
            copy.display()
        ))
    };
    let conn = Connection::open_with_flags(
        copy,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| damaged(e.to_string()))?;
    let rows: Vec<String> = conn
        .prepare("PRAGMA quick_check(10)")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<_>>()
        })
        .map_err(|e| damaged(e.to_string()))?;
    if rows != ["ok"] {
        return Err(damaged(rows.join("; ")));
    }
    conn.query_row("SELECT count(*) FROM jobs", [], |r| r.get::<_, i64>(0))
        .map(|n| u64::try_from(n).unwrap_or(0))
        .map_err(|e| damaged(e.to_string()))
}

/// The name of a copy the store makes for [`redial_store::Store::backup`]: beside the
/// database (the same disk, which has room for its growth), hidden, and told apart from a
/// person's files by its prefix.
pub(crate) fn scratch_name(database: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let folder = database.parent().unwrap_or(Path::new("."));
    folder.join(format!("{IN_PROGRESS}{}-served-{n}.db", std::process::id()))
}

/// Removes the copies that writers which are gone left half-written in `folder` (a crash during
/// a backup): only names with the in-progress prefix, and only those whose [`Claim`] can be
/// taken (a living writer, in this process or another, holds its lock).
pub(crate) fn sweep(folder: &Path) {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(|n| n.starts_with(IN_PROGRESS)) {
            continue;
        }
        let Ok(file) = std::fs::OpenOptions::new().write(true).open(entry.path()) else {
            continue;
        };
        if file.try_lock().is_ok() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}
