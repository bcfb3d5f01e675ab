//! Bulk actions on dead letters as operations: replayed or dismissed a chunk at a time (each
//! chunk one transaction of at most [`CHUNK`] jobs, in `seq` order), so that no bulk action holds
//! the store long enough to stall dispatch; with progress anyone may read, and a cancel that
//! takes effect between chunks.
//!
//! Owns the chunked loop and this node's list of operations. Does not own what a chunk does:
//! the store's `dead_letter_replay` and `dead_letter_dismiss` with a `seq` range.
//!
//! Operations live in the process that runs them. A stopped process's operation is gone, and each
//! of its jobs was acted on or left as it was (a chunk is one transaction); the same filter again
//! acts on the rest, since what was replayed or dismissed no longer matches.

use super::Engine;
use redial_policy::Timestamp;
use redial_store::{JobFilter, StoreError};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The most jobs one chunk acts on: one transaction each.
pub const CHUNK: u32 = 1000;
/// Finished operations kept for reading, newest first.
const KEPT: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkKind {
    Replay,
    Dismiss,
}

impl BulkKind {
    /// The kind as the API writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            BulkKind::Replay => "replay",
            BulkKind::Dismiss => "dismiss",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OperationState {
    Running,
    Done,
    Cancelled,
    Failed,
}

impl OperationState {
    /// The state as the API writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            OperationState::Running => "running",
            OperationState::Done => "done",
            OperationState::Cancelled => "cancelled",
            OperationState::Failed => "failed",
        }
    }
}

/// An operation as it stands.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OperationView {
    pub id: String,
    pub kind: BulkKind,
    pub state: OperationState,
    /// The dead letters the filter matched when it started.
    pub total: u64,
    /// Those acted on so far (more than `total` when more died meanwhile).
    pub done: u64,
    /// Chunks committed so far.
    pub chunks: u64,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    /// Why it failed (for logs: the store's message).
    pub error: Option<String>,
}

#[derive(Debug)]
struct Operation {
    view: Mutex<OperationView>,
    cancel: AtomicBool,
    /// Sent `true` once it has finished, whichever way.
    finished: tokio::sync::watch::Sender<bool>,
}

/// This node's operations, newest first: those running, and the last [`KEPT`] finished.
#[derive(Debug, Default)]
pub(super) struct Operations {
    list: Mutex<VecDeque<Arc<Operation>>>,
    next: AtomicU64,
}

/// Why an operation could not be cancelled.
#[derive(Debug, PartialEq, Eq)]
pub enum CancelError {
    NotFound,
    /// It had finished already: its state.
    Finished(OperationState),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Operations {
    fn find(&self, id: &str) -> Option<Arc<Operation>> {
        lock(&self.list)
            .iter()
            .find(|o| lock(&o.view).id == id)
            .cloned()
    }

    fn add(&self, op: Arc<Operation>) {
        let mut list = lock(&self.list);
        list.push_front(op);
        // Drop the oldest finished ones past the limit; running ones stay.
        while list.len() > KEPT {
            let Some(i) = list
                .iter()
                .rposition(|o| lock(&o.view).state != OperationState::Running)
            else {
                break;
            };
            list.remove(i);
        }
    }
}

impl Engine {
    /// Starts replaying or dismissing the dead letters `filter` matches, a chunk at a time, and
    /// returns the operation at its start. Counting them is its one read before it answers.
    pub async fn bulk_start(
        &self,
        kind: BulkKind,
        filter: JobFilter,
    ) -> Result<OperationView, StoreError> {
        let store = self.store();
        let total: u64 = store
            .dead_letter_groups(filter.clone())
            .await?
            .iter()
            .map(|g| g.count)
            .sum();
        let ops = &self.inner.operations;
        let n = ops.next.fetch_add(1, Ordering::Relaxed) + 1;
        let id = format!("op-{}-{n}", self.inner.clock.now().as_unix_millis().max(0));
        let view = OperationView {
            id,
            kind,
            state: OperationState::Running,
            total,
            done: 0,
            chunks: 0,
            started_at: self.inner.clock.now(),
            finished_at: None,
            error: None,
        };
        let op = Arc::new(Operation {
            view: Mutex::new(view.clone()),
            cancel: AtomicBool::new(false),
            finished: tokio::sync::watch::channel(false).0,
        });
        ops.add(op.clone());
        let engine = self.clone();
        tokio::spawn(async move { engine.bulk_run(kind, filter, op).await });
        Ok(view)
    }

    async fn bulk_run(&self, kind: BulkKind, filter: JobFilter, op: Arc<Operation>) {
        let mut after = None;
        let end_state = loop {
            if op.cancel.load(Ordering::Acquire) {
                break Ok(OperationState::Cancelled);
            }
            let next = JobFilter {
                after_seq: after,
                ..filter.clone()
            };
            let end = match self.store().dead_letter_chunk_end(next, CHUNK).await {
                Ok(Some(end)) => end,
                Ok(None) => break Ok(OperationState::Done),
                Err(e) => break Err(e),
            };
            let chunk = JobFilter {
                after_seq: after,
                upto_seq: Some(end),
                ..filter.clone()
            };
            let acted = match kind {
                BulkKind::Replay => self.replay_dead_letters(chunk).await,
                BulkKind::Dismiss => {
                    let n = self.store().dead_letter_dismiss(chunk).await;
                    // A dismissed dead head frees its ordering key: the next job may go.
                    if n.as_ref().is_ok_and(|n| *n > 0) {
                        self.wake_all();
                    }
                    n
                }
            };
            match acted {
                Ok(n) => {
                    let mut v = lock(&op.view);
                    v.done += n;
                    v.chunks += 1;
                }
                Err(e) => break Err(e),
            }
            after = Some(end);
            // Between chunks, everything else the runtime has to do goes first.
            tokio::task::yield_now().await;
        };
        {
            let mut v = lock(&op.view);
            v.finished_at = Some(self.inner.clock.now());
            match end_state {
                Ok(state) => v.state = state,
                Err(e) => {
                    tracing::error!(operation = %v.id, error = %e, "bulk operation failed");
                    v.state = OperationState::Failed;
                    v.error = Some(e.to_string());
                }
            }
        }
        op.finished.send_replace(true);
    }

    /// An operation of this node, as it stands.
    pub fn operation(&self, id: &str) -> Option<OperationView> {
        self.inner
            .operations
            .find(id)
            .map(|o| lock(&o.view).clone())
    }

    /// This node's operations, newest first.
    pub fn operations(&self) -> Vec<OperationView> {
        lock(&self.inner.operations.list)
            .iter()
            .map(|o| lock(&o.view).clone())
            .collect()
    }

    /// Waits for an operation to finish; none when this node has no such operation.
    pub async fn operation_wait(&self, id: &str) -> Option<OperationView> {
        let op = self.inner.operations.find(id)?;
        let mut finished = op.finished.subscribe();
        // The sender lives as long as the operation: an error cannot come while `op` is held.
        let _ = finished.wait_for(|done| *done).await;
        let view = lock(&op.view).clone();
        Some(view)
    }

    /// Asks a running operation to stop before its next chunk (the one under way commits).
    pub fn operation_cancel(&self, id: &str) -> Result<OperationView, CancelError> {
        let op = self
            .inner
            .operations
            .find(id)
            .ok_or(CancelError::NotFound)?;
        let view = lock(&op.view).clone();
        if view.state != OperationState::Running {
            return Err(CancelError::Finished(view.state));
        }
        op.cancel.store(true, Ordering::Release);
        Ok(view)
    }
}
