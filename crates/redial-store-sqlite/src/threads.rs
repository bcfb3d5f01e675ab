//! The threads that own connections: the storage thread (one connection, every write, requests
//! that arrive while a transaction runs join it: group commit) and the checkpointer beside it.
//!
//! The storage thread owns the one connection and is fed by a queue. Requests that arrive while a
//! transaction runs join it (group commit, up to 1024 requests or 2 ms); a request that writes
//! several statements takes a savepoint (prepared once) or orders its statements so that only the
//! first can fail, so one failure rolls back only its own writes; answers go out only after the
//! shared COMMIT is durable. That thread is the throughput ceiling today (BENCHMARKS.md says how
//! far and why).
//!
//! WAL checkpoints run beside it, on a second thread with its own connection (`PASSIVE`, 10 ms
//! after the first commit it hears of, never while the store is idle); the writer keeps SQLite's
//! automatic checkpoint as the backstop that lets the WAL start over (SQLite restarts it only when
//! a writer begins with every frame copied back), and a test (`tests/checkpoint.rs`) checks that
//! the WAL stays bounded. The page cache is 8 MiB: a b-tree rebalance briefly numbers a page past
//! the end of the file, and the next commit then walks the whole cache, so a larger cache costs
//! every commit.

use super::{counts, sql};
use redial_store::StoreError;
use rusqlite::Connection;
use std::sync::Arc;

/// A request to the storage thread: it runs inside the batch's transaction (or gets the error
/// that kept the transaction from starting) and returns how to deliver its answer once the batch
/// has committed (or failed to).
pub(crate) type Op = Box<dyn FnOnce(Result<&mut Connection, StoreError>) -> Deliver + Send>;
pub(crate) type Deliver = Box<dyn FnOnce(Option<StoreError>) + Send>;

/// Bounds on one transaction: requests that keep arriving while a batch runs join it, up to this
/// many or this long, so one commit (and its fsync) serves as many as possible without holding
/// the first answers back for long.
pub(crate) const MAX_BATCH: usize = 1024;
pub(crate) const MAX_BATCH_TIME: std::time::Duration = std::time::Duration::from_millis(2);

/// How long the checkpointer waits after the first commit it hears of, so one checkpoint copies
/// the pages of many commits.
pub(crate) const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// Tells the checkpointer that commits are waiting to be copied back: one message per
/// checkpoint at most, none while the store is idle.
pub(crate) struct CheckpointDue {
    pub(crate) pending: Arc<std::sync::atomic::AtomicBool>,
    pub(crate) tx: std::sync::mpsc::SyncSender<()>,
}

impl CheckpointDue {
    fn committed(&self) {
        if !self.pending.swap(true, std::sync::atomic::Ordering::AcqRel) {
            let _ = self.tx.try_send(());
        }
    }
}

/// The checkpointer: after commits, waits [`CHECKPOINT_EVERY`], then copies what the WAL holds
/// back into the database file (`PASSIVE`: it never blocks the writer, and the writer never waits
/// for it). Checkpointing on the writer's thread took ~10% of its time and held each batch that
/// came in meanwhile for a few milliseconds. The writer keeps SQLite's automatic checkpoint (at
/// 1000 WAL pages) as a backstop: with this thread keeping up it only copies the last few
/// commits' pages, and it is what lets the WAL start over from its beginning (SQLite restarts
/// the WAL when a writer begins with every frame copied back). Ends when the store is dropped.
pub(crate) fn checkpoint_thread(
    conn: Connection,
    due: std::sync::mpsc::Receiver<()>,
    pending: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut failing: Option<String> = None;
    while due.recv().is_ok() {
        std::thread::sleep(CHECKPOINT_EVERY);
        pending.store(false, std::sync::atomic::Ordering::Release);
        match conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            Ok(()) => {
                if failing.take().is_some() {
                    tracing::info!("WAL checkpoints work again");
                }
            }
            Err(e) => {
                let e = e.to_string();
                if failing.as_deref() != Some(e.as_str()) {
                    tracing::warn!(error = %e, "a WAL checkpoint failed; the writer's own checkpoints still bound the WAL");
                }
                failing = Some(e);
            }
        }
    }
}

/// The storage thread: runs requests in one transaction for as long as they keep coming (within
/// the bounds above), commits, then answers. An idle store commits each request at once.
pub(crate) fn storage_thread(
    mut conn: Connection,
    ops: std::sync::mpsc::Receiver<Op>,
    checkpoint: CheckpointDue,
    counts: counts::Shared,
) {
    counts::attach(&counts);
    while let Ok(first) = ops.recv() {
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
            // Nothing runs outside a transaction: what is queued fails now, the next request
            // tries again.
            let code = e.sqlite_error_code();
            let e = format!("cannot start a transaction: {e}");
            first(Err(sql::classify(code, e.clone())))(None);
            while let Ok(op) = ops.try_recv() {
                op(Err(sql::classify(code, e.clone())))(None);
            }
            continue;
        }
        let started = std::time::Instant::now();
        let mut deliveries = Vec::new();
        let mut next = Some(first);
        while let Some(op) = next.take() {
            // A request that panics gets no answer (its caller sees the request dropped); what
            // it wrote stays in the batch only if it wrote it with complete statements.
            let mark = counts::mark();
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| op(Ok(&mut conn)))) {
                Ok(d) => deliveries.push(d),
                Err(_) => counts::failed_since(mark),
            }
            // SQLite rolls the whole transaction back by itself on some errors (a full disk, an
            // I/O error): nothing more may run in this batch, or it would run outside any
            // transaction and be committed while its caller is told it failed. The commit below
            // then fails, and every request of the batch is answered with the failure.
            if conn.is_autocommit() {
                break;
            }
            if deliveries.len() < MAX_BATCH && started.elapsed() < MAX_BATCH_TIME {
                next = ops.try_recv().ok();
            }
        }
        // The completions' events go in last, as one row (`sql::flush_completions`); if they
        // cannot, nothing of the batch commits.
        let failure = sql::flush_completions(&conn)
            .map_err(|e| (None, format!("writing the completions' events failed: {e}")))
            .and_then(|()| {
                conn.execute_batch("COMMIT")
                    .map_err(|e| (e.sqlite_error_code(), format!("commit failed: {e}")))
            })
            .err()
            .inspect(|_| {
                let _ = conn.execute_batch("ROLLBACK");
            });
        match failure {
            None => counts::committed(&conn, &counts),
            Some(_) => {
                counts::rolled_back();
                sql::completions_clear();
            }
        }
        checkpoint.committed();
        for d in deliveries {
            d(failure
                .clone()
                .map(|(code, message)| sql::classify(code, message)));
        }
    }
}
