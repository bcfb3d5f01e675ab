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
//! Cheap on the hot path: each (queue, endpoint) pair is numbered once, a job's place (its state,
//! and its category when dead) is a slot in that pair's row, and a move logs two small entries;
//! a commit adds them into the rows, no hashing. Measured and dropped: SQLite triggers that
//! count in a table (the writer's CPU per no-op job rose by half, 22.8 to 34.2 us), and temporary
//! triggers that call a Rust function to log (by a quarter): a trigger's invocation alone costs
//! about 2 us. A first version of this log, keyed by names in a hash map, cost the writer 8% more
//! instructions per job (callgrind); numbered pairs and slots brought that down (see
//! BENCHMARKS.md).
//!
//! The counts are this process's: a second process writing the same file is not seen.

use redial_policy::DeadCategory;
use redial_store::{parse_dead_category, JobState};
use rusqlite::Connection;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

/// Where a job is, as counted: its state and, dead, its category.
pub type Place = (JobState, Option<DeadCategory>);

/// Slots of a pair's row: one per state, and for dead jobs one per category (the state's own
/// slot holds dead jobs without one, which the store never writes).
const SLOTS: usize = JobState::ALL.len() + DeadCategory::ALL.len();

fn slot((state, category): Place) -> usize {
    let s = JobState::ALL
        .iter()
        .position(|x| *x == state)
        .unwrap_or_default();
    match category {
        Some(c) if state == JobState::Dead => {
            JobState::ALL.len()
                + DeadCategory::ALL
                    .iter()
                    .position(|x| *x == c)
                    .unwrap_or_default()
        }
        _ => s,
    }
}

fn place_of(slot: usize) -> Place {
    match slot.checked_sub(JobState::ALL.len()) {
        Some(c) => (JobState::Dead, Some(DeadCategory::ALL[c])),
        None => (JobState::ALL[slot], None),
    }
}

/// FNV-1a: the names hashed here are short and ours, so no protection against chosen keys is
/// needed, and SipHash cost more than the rest of a move.
#[derive(Default)]
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type FnvMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// The counts: a row of slots per numbered (queue, endpoint) pair.
#[derive(Default)]
pub struct Table {
    pairs: Vec<(Arc<str>, Arc<str>)>,
    numbers: FnvMap<Box<str>, FnvMap<Box<str>, u32>>,
    rows: Vec<[i64; SLOTS]>,
}

/// One count, as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Count {
    pub queue: Arc<str>,
    pub endpoint: Arc<str>,
    pub state: JobState,
    pub category: Option<DeadCategory>,
    pub n: u64,
}

impl Table {
    fn number(&mut self, queue: &str, endpoint: &str) -> u32 {
        if let Some(n) = self.numbers.get(queue).and_then(|e| e.get(endpoint)) {
            return *n;
        }
        let n = u32::try_from(self.pairs.len()).unwrap_or(u32::MAX);
        self.pairs.push((Arc::from(queue), Arc::from(endpoint)));
        self.rows.push([0; SLOTS]);
        self.numbers
            .entry(queue.into())
            .or_default()
            .insert(endpoint.into(), n);
        n
    }

    /// The counts of one endpoint, in every queue: as [`Table::counts`], a few rows read.
    pub fn counts_of_endpoint<'a>(&'a self, endpoint: &'a str) -> impl Iterator<Item = Count> + 'a {
        self.numbers
            .values()
            .filter_map(move |by_endpoint| by_endpoint.get(endpoint))
            .flat_map(move |n| row_counts(&self.pairs[*n as usize], &self.rows[*n as usize]))
    }

    /// Every count above zero.
    pub fn counts(&self) -> impl Iterator<Item = Count> + '_ {
        self.pairs
            .iter()
            .zip(&self.rows)
            .flat_map(|(pair, row)| row_counts(pair, row))
    }
}

/// A pair's counts above zero.
fn row_counts<'a>(
    (queue, endpoint): &'a (Arc<str>, Arc<str>),
    row: &'a [i64; SLOTS],
) -> impl Iterator<Item = Count> + 'a {
    row.iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(s, n)| {
            let (state, category) = place_of(s);
            Count {
                queue: queue.clone(),
                endpoint: endpoint.clone(),
                state,
                category,
                n: *n as u64,
            }
        })
}

/// The counts, shared by the storage thread (which numbers pairs as it logs and adds the log
/// in after each commit) and the readers.
pub type Shared = Arc<Mutex<Table>>;

/// A logged move: a pair's slot, and by how much.
type Delta = (u32, usize, i64);

#[derive(Default)]
struct Log {
    deltas: Vec<Delta>,
    /// A request failed after logging: the log may not match what the transaction holds.
    unsure: bool,
    /// The counts this thread logs for (the storage thread's store).
    table: Option<Shared>,
}

thread_local! {
    static LOG: RefCell<Log> = RefCell::new(Log::default());
}

pub fn lock(counts: &Shared) -> std::sync::MutexGuard<'_, Table> {
    counts.lock().unwrap_or_else(|p| p.into_inner())
}

/// Logs a job's move from `from` to `to` (`None`: it did not exist, or no longer does), `n`
/// jobs at once. Called by every statement that inserts, deletes, or changes a job's state or
/// category, once it succeeded, on the storage thread.
pub fn moved(queue: &str, endpoint: &str, from: Option<Place>, to: Option<Place>, n: i64) {
    if from == to || n == 0 {
        return;
    }
    LOG.with(|l| {
        let mut log = l.borrow_mut();
        let Some(table) = log.table.clone() else {
            return;
        };
        let pair = lock(&table).number(queue, endpoint);
        if let Some(from) = from {
            log.deltas.push((pair, slot(from), -n));
        }
        if let Some(to) = to {
            log.deltas.push((pair, slot(to), n));
        }
    });
}

/// Reads the counts the table holds now (at open: a scan of every job). The storage thread
/// calls [`attach`] with the result before its first request.
pub fn install(conn: &Connection) -> rusqlite::Result<Shared> {
    let table = Arc::new(Mutex::new(Table::default()));
    scan_into(conn, &table)?;
    Ok(table)
}

/// Makes this thread (the storage thread) log for `counts`.
pub fn attach(counts: &Shared) {
    LOG.with(|l| l.borrow_mut().table = Some(counts.clone()));
}

/// Every job counted from the table, into fresh rows of `counts` (pair numbers kept).
fn scan_into(conn: &Connection, counts: &Shared) -> rusqlite::Result<()> {
    let mut fresh = Vec::new();
    {
        let mut stmt = conn.prepare(
            "SELECT queue, endpoint, state, category, COUNT(*) FROM jobs \
             GROUP BY queue, endpoint, state, category",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let bad = |e: String| {
                rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, e.into())
            };
            let state: JobState = r.get::<_, String>(2)?.parse().map_err(bad)?;
            let category = match r.get::<_, Option<String>>(3)? {
                Some(c) => Some(parse_dead_category(&c).map_err(bad)?),
                None => None,
            };
            let (queue, endpoint): (String, String) = (r.get(0)?, r.get(1)?);
            fresh.push((
                queue,
                endpoint,
                slot((state, category)),
                r.get::<_, i64>(4)?,
            ));
        }
    }
    let mut table = lock(counts);
    for row in &mut table.rows {
        *row = [0; SLOTS];
    }
    for (queue, endpoint, s, n) in fresh {
        let pair = table.number(&queue, &endpoint) as usize;
        table.rows[pair][s] += n;
    }
    Ok(())
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

/// After a commit: adds the log into the counts, or reads them again from the table when the
/// log is unsure.
pub fn committed(conn: &Connection, counts: &Shared) {
    let (deltas, unsure) = LOG.with(|l| {
        let mut log = l.borrow_mut();
        let deltas = std::mem::take(&mut log.deltas);
        (deltas, std::mem::take(&mut log.unsure))
    });
    if unsure {
        if let Err(e) = scan_into(conn, counts) {
            tracing::error!(error = %e, "counting the jobs again failed; counts may be off until the next success");
        }
        return;
    }
    if deltas.is_empty() {
        return;
    }
    let mut table = lock(counts);
    for (pair, s, d) in &deltas {
        if let Some(row) = table.rows.get_mut(*pair as usize) {
            row[*s] += d;
        }
    }
    drop(table);
    // Keep the log's allocation for the next batch.
    LOG.with(|l| {
        let mut log = l.borrow_mut();
        if log.deltas.is_empty() {
            let mut deltas = deltas;
            deltas.clear();
            log.deltas = deltas;
        }
    });
}

/// After a failed commit (the transaction rolled back): nothing logged happened.
pub fn rolled_back() {
    LOG.with(|l| {
        let mut log = l.borrow_mut();
        log.deltas.clear();
        log.unsure = false;
    });
}

/// Compares the counts, with what the open transaction logged so far, to the table's (read in
/// that transaction): `Err` names the first difference.
pub fn check(conn: &Connection, counts: &Shared) -> Result<(), String> {
    let key = |c: &Count| {
        (
            c.queue.to_string(),
            c.endpoint.to_string(),
            c.state,
            c.category,
        )
    };
    let mut expected: HashMap<_, i64> = HashMap::new();
    {
        let table = lock(counts);
        let pending = LOG.with(|l| l.borrow().deltas.clone());
        let mut rows = table.rows.clone();
        for (pair, s, d) in pending {
            rows[pair as usize][s] += d;
        }
        for (i, row) in rows.iter().enumerate() {
            for (s, n) in row.iter().enumerate().filter(|(_, n)| **n != 0) {
                let (queue, endpoint) = &table.pairs[i];
                let (state, category) = place_of(s);
                expected.insert(
                    (queue.to_string(), endpoint.to_string(), state, category),
                    *n,
                );
            }
        }
    }
    let fresh = Arc::new(Mutex::new(Table::default()));
    scan_into(conn, &fresh).map_err(|e| e.to_string())?;
    let actual: HashMap<_, i64> = lock(&fresh)
        .counts()
        .map(|c| (key(&c), c.n as i64))
        .collect();
    for (k, n) in &actual {
        if expected.get(k) != Some(n) {
            return Err(format!(
                "{k:?}: kept {:?}, in the table {n}",
                expected.get(k)
            ));
        }
    }
    for (k, n) in &expected {
        if !actual.contains_key(k) {
            return Err(format!("{k:?}: kept {n}, in the table none"));
        }
    }
    Ok(())
}
