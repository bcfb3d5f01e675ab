//! `redial backup FILE`: a consistent copy of the embedded SQLite database while jobs run, from
//! the running server (`POST /v1/backup`) or straight from the data folder (`--data-dir`).
//! Either way the copy is written under a temporary name beside FILE, fsynced, checked
//! (`quick_check`) and only then renamed to FILE: a file under that name is a whole, checked
//! database. Restoring is starting `redial serve` on it (see docs/api.md, "Backups").

use crate::client::Conn;
use anyhow::{Context, Result};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to write the copy: a new file (see --force), readable by its owner only, since it
    /// holds every job's request, credentials included.
    file: PathBuf,
    /// Copy the database in this folder directly instead of asking the server: for a stopped
    /// server, or on the server's machine (consistent even while `redial serve` runs on it).
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Replace FILE if it exists (once the new copy is whole and checked).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    conn: Conn,
}

pub async fn run(args: Args) -> Result<()> {
    let started = Instant::now();
    let mut meter = Meter::new();
    let report = match &args.data_dir {
        Some(dir) => {
            let source = crate::migrate::database_file(Some(dir.clone()));
            let (dest, force) = (args.file.clone(), args.force);
            tokio::task::spawn_blocking(move || {
                let made =
                    redial_store_sqlite::backup_file(&source, &dest, force, &mut |done, total| {
                        meter.show("copying", done, Some(total))
                    });
                meter.done();
                made.map_err(plain_error)
            })
            .await
            .context("the backup's thread failed")??
        }
        None => {
            let report = from_server(&args, &mut meter).await;
            meter.done();
            report?
        }
    };
    println!(
        "backed up {} jobs to {} ({}, checked) in {:.1}s",
        report.jobs,
        crate::human::printable(&args.file.display().to_string()),
        size(report.bytes),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A store error's message, without the store's prefix.
fn plain(e: redial_store::StoreError) -> String {
    match e {
        redial_store::StoreError::Backend(why) | redial_store::StoreError::Unavailable(why) => why,
        other => other.to_string(),
    }
}

/// Asks the server for a copy and writes it to FILE as [`redial_store_sqlite::backup_file`]
/// writes one (its [`redial_store_sqlite::Destination`]: temporary name, fsync, check, rename).
async fn from_server(args: &Args, meter: &mut Meter) -> Result<redial_store_sqlite::BackupReport> {
    let started = Instant::now();
    let destination =
        redial_store_sqlite::Destination::new(&args.file, args.force).map_err(plain_error)?;
    meter.note("the server is making the copy");
    let server = args.conn.connect()?;
    let resp = server.ask(server.client.backup()).await?;
    let total = resp.content_length();
    let bytes = receive(resp, destination.partial(), meter, total).await?;
    let jobs = destination.finish().map_err(plain_error)?;
    Ok(redial_store_sqlite::BackupReport {
        bytes,
        jobs,
        took: started.elapsed(),
    })
}

fn plain_error(e: redial_store::StoreError) -> anyhow::Error {
    anyhow::anyhow!("{}", plain(e))
}

/// Writes the answer's body to `partial` (created for its owner only) and fsyncs it.
async fn receive(
    mut resp: reqwest::Response,
    partial: &Path,
    meter: &mut Meter,
    total: Option<u64>,
) -> Result<u64> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(partial)
        .with_context(|| format!("cannot write {}", partial.display()))?;
    let mut bytes = 0u64;
    while let Some(chunk) = resp
        .chunk()
        .await
        .context("the server stopped sending the copy before its end")?
    {
        file.write_all(&chunk)
            .with_context(|| format!("cannot write {}", partial.display()))?;
        bytes += chunk.len() as u64;
        meter.show("receiving", bytes, total);
    }
    if let Some(total) = total.filter(|t| *t != bytes) {
        anyhow::bail!("the server sent {bytes} of the copy's {total} bytes: nothing was kept");
    }
    file.sync_all()
        .with_context(|| format!("cannot write {}", partial.display()))?;
    Ok(bytes)
}

/// Progress on standard error, when it is a terminal: one line, rewritten at most 5 times a
/// second.
struct Meter {
    on: bool,
    last: Option<Instant>,
    shown: bool,
}

impl Meter {
    fn new() -> Meter {
        Meter {
            on: std::io::stderr().is_terminal(),
            last: None,
            shown: false,
        }
    }

    fn note(&mut self, what: &str) {
        if self.on {
            eprint!("\r\x1b[K{what}...");
            self.shown = true;
        }
    }

    fn show(&mut self, what: &str, done: u64, total: Option<u64>) {
        if !self.on || self.last.is_some_and(|t| t.elapsed().as_millis() < 200) {
            return;
        }
        self.last = Some(Instant::now());
        self.shown = true;
        match total.filter(|t| *t > 0) {
            Some(t) => eprint!(
                "\r\x1b[K{what}: {} of {} ({}%)",
                size(done),
                size(t),
                (done.min(t) * 100) / t
            ),
            None => eprint!("\r\x1b[K{what}: {}", size(done)),
        }
    }

    fn done(&mut self) {
        if self.shown {
            eprint!("\r\x1b[K");
            self.shown = false;
        }
    }
}

/// Bytes for people: "812 KiB", "1.4 GiB".
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if v < 10.0 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.0} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(super::size(12), "12 B");
        assert_eq!(super::size(1536), "1.5 KiB");
        assert_eq!(super::size(300 << 20), "300 MiB");
        assert_eq!(super::size(3 << 30), "3.0 GiB");
    }
}
