//! Jobs counted as they change, kept in memory, so that counts (`stats`, the dashboard's overview
//! and endpoints, the gauges) read a few hundred numbers instead of every job.
//!
//! Every statement that inserts or deletes a job, or changes its state or category, logs the
//! move ([`moved`]) on the storage thread once it succeeded, from what it knows or reads back.
//! The log follows the transaction: a savepoint rolled back drops what it logged ([`mark`],
//! [`rollback_to`]), a commit folds the log into the counts, a failed commit drops it. A request
//! that fails after logging leaves the log unsure: the counts are then read again from the table
//! after the commit.
//!
//! Measured, and dropped: SQLite triggers that count in a table (the writer's CPU per no-op job
//! rose by half, 22.8 to 34.2 us), and temporary triggers that call a Rust function to log (by a
//! quarter, 19.4-25.0 to 25.6-32.5 us): a trigger's invocation alone costs about 2 us.
//!
//! The counts are this process's: a second process writing the same file is not seen (and is
//! refused at start).

use redial_policy::DeadCategory;
use redial_store::{parse_dead_category, JobState};
use rusqlite::Connection;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// What a count is kept by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    pub queue: Arc<str>,
    pub endpoint: Arc<str>,
    pub state: JobState,
    pub category: Option<DeadCategory>,
}

/// The counts, shared by the storage thread (which updates them after each commit) and the
/// readers.
pub type Shared = Arc<Mutex<HashMap<Key, i64>>>;

#[derive(Default)]
struct Log {
    deltas: Vec<(Key, i64)>,
    /// Names seen, so that logging a change allocates nothing.
    names: HashSet<Arc<str>>,
    /// A request failed after logging: the log may not match what the transaction holds.
    unsure: bool,
}

thread_local! {
    static LOG: RefCell<Log> = RefCell::new(Log::default());
}

impl Log {
    fn name(&mut self, s: &str) -> Arc<str> {
        if let Some(n) = self.names.get(s) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(s);
        self.names.insert(n.clone());
        n
    }
}

/// Logs a job's move from `from` to `to` (`None`: it did not exist, or no longer does), `n`
/// jobs at once. Called by every statement that inserts, deletes, or changes a job's state or
/// category, once it succeeded.
pub fn moved(queue: &str, endpoint: &str, from: Option<Place>, to: Option<Place>, n: i64) {
    if from == to || n == 0 {
        return;
    }
    LOG.with(|l| {
        let mut log = l.borrow_mut();
        let (queue, endpoint) = (log.name(queue), log.name(endpoint));
        for (place, sign) in [(from, -1), (to, 1)] {
            if let Some((state, category)) = place {
                let key = Key {
                    queue: queue.clone(),
                    endpoint: endpoint.clone(),
                    state,
                    category,
                };
                log.deltas.push((key, sign * n));
            }
        }
    });
}

/// Where a job is, as counted: its state and, dead, its category.
pub type Place = (JobState, Option<DeadCategory>);

/// Reads the counts the table holds now (once, at open: a scan of every job).
pub fn install(conn: &Connection) -> rusqlite::Result<Shared> {
    Ok(Arc::new(Mutex::new(scan(conn)?)))
}

/// Every job counted from the table.
pub fn scan(conn: &Connection) -> rusqlite::Result<HashMap<Key, i64>> {
    let mut stmt = conn.prepare(
        "SELECT queue, endpoint, state, category, COUNT(*) FROM jobs \
         GROUP BY queue, endpoint, state, category",
    )?;
    let mut rows = stmt.query([])?;
    let mut out = HashMap::new();
    LOG.with(|l| -> rusqlite::Result<()> {
        let mut log = l.borrow_mut();
        while let Some(r) = rows.next()? {
            let bad = |e: String| {
                rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, e.into())
            };
            let state: JobState = r.get::<_, String>(2)?.parse().map_err(bad)?;
            let category = match r.get::<_, Option<String>>(3)? {
                Some(c) => Some(parse_dead_category(&c).map_err(bad)?),
                None => None,
            };
            let key = Key {
                queue: log.name(&r.get::<_, String>(0)?),
                endpoint: log.name(&r.get::<_, String>(1)?),
                state,
                category,
            };
            out.insert(key, r.get::<_, i64>(4)?);
        }
        Ok(())
    })?;
    Ok(out)
}

/// Where the log stands, for a savepoint to roll back to.
pub fn mark() -> usize {
    LOG.with(|l| l.borrow().deltas.len())
}

/// Drops what was logged since `mark` (its savepoint was rolled back).
pub fn rollback_to(mark: usize) {
    LOG.with(|l| l.borrow_mut().deltas.truncate(mark));
}

/// Says that a request failed after logging since `mark`: what it logged may not all have
/// happened.
pub fn failed_since(mark: usize) {
    LOG.with(|l| {
        let mut log = l.borrow_mut();
        if log.deltas.len() > mark {
            log.unsure = true;
        }
    });
}

/// After a commit: folds the log into the counts, or reads them again from the table when the
/// log is unsure.
pub fn committed(conn: &Connection, counts: &Shared) {
    let (deltas, unsure) = LOG.with(|l| {
        let mut log = l.borrow_mut();
        (
            std::mem::take(&mut log.deltas),
            std::mem::take(&mut log.unsure),
        )
    });
    if unsure {
        match scan(conn) {
            Ok(fresh) => *lock(counts) = fresh,
            Err(e) => {
                tracing::error!(error = %e, "counting the jobs again failed; counts may be off until the next success")
            }
        }
        return;
    }
    if deltas.is_empty() {
        return;
    }
    let mut c = lock(counts);
    for (key, d) in deltas {
        let n = c.entry(key).or_insert(0);
        *n += d;
    }
}

/// After a failed commit (the transaction rolled back): nothing logged happened.
pub fn rolled_back() {
    LOG.with(|l| {
        let mut log = l.borrow_mut();
        log.deltas.clear();
        log.unsure = false;
    });
}

pub fn lock(counts: &Shared) -> std::sync::MutexGuard<'_, HashMap<Key, i64>> {
    counts.lock().unwrap_or_else(|p| p.into_inner())
}

/// Compares the counts, with what the open transaction logged so far, to the table's (read in
/// that transaction): `Err` names the first difference.
pub fn check(conn: &Connection, counts: &Shared) -> Result<(), String> {
    let mut expected = lock(counts).clone();
    LOG.with(|l| {
        for (key, d) in &l.borrow().deltas {
            *expected.entry(key.clone()).or_insert(0) += d;
        }
    });
    expected.retain(|_, n| *n != 0);
    let actual = scan(conn).map_err(|e| e.to_string())?;
    if expected == actual {
        return Ok(());
    }
    for (key, n) in &actual {
        if expected.get(key) != Some(n) {
            return Err(format!(
                "{key:?}: kept {:?}, in the table {n}",
                expected.get(key)
            ));
        }
    }
    for (key, n) in &expected {
        if !actual.contains_key(key) {
            return Err(format!("{key:?}: kept {n}, in the table none"));
        }
    }
    Ok(())
}
