//! Waiting for a job to finish (`GET /v1/jobs/{id}?wait=30s`): the answer comes when the job is
//! completed, dead or cancelled, or when the wait ends, whichever is first.
//!
//! Woken by the change, not by reading the job in a loop: each finish this node makes (an
//! attempt's result recorded, a cancel through the engine) is told on a broadcast channel that
//! every waiter listens to, subscribed before its first read so that no finish falls between
//! the read and the wait. A finish this node does not see (another node's attempt, a deadline
//! ended by the maintenance leader) is found by one read every `EngineConfig::wait_recheck` (2 s)
//! at most; a waiter whose channel lagged reads at once.
//!
//! Invariants: at most `max` waiters at once on this node, the rest refused at once
//! ([`WaitError::Busy`]) rather than queued; a waiter holds no lease, no lock and no connection
//! while it waits.

use super::Engine;
use redial_store::{Attempt, Job, JobId, StoreError};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::broadcast;

/// The finishes this node makes, for waiters; and how many wait.
#[derive(Debug)]
pub(super) struct Finishes {
    tx: broadcast::Sender<JobId>,
    waiters: AtomicUsize,
}

impl Default for Finishes {
    fn default() -> Self {
        // A waiter that falls this far behind reads its job at once (a lagged receiver).
        let (tx, _) = broadcast::channel(1024);
        Finishes {
            tx,
            waiters: AtomicUsize::new(0),
        }
    }
}

impl Finishes {
    /// Tells the waiters that `id` finished, if any wait.
    pub(super) fn tell(&self, id: &JobId) {
        if self.waiters.load(Ordering::Relaxed) > 0 {
            let _ = self.tx.send(id.clone());
        }
    }
}

/// Why a wait was not served.
#[derive(Debug, thiserror::Error)]
pub enum WaitError {
    /// As many wait on this node as it allows: ask again later.
    #[error("{0} requests already wait for jobs on this node")]
    Busy(usize),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One waiter, counted while it lives.
struct Waiter<'a>(&'a AtomicUsize);

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Engine {
    /// The job (with its attempts) once it has finished, or as it stands when `wait` ends; `None`
    /// when there is no such job (or it was dismissed meanwhile). At most `max` wait at once.
    pub async fn wait_finished(
        &self,
        id: &JobId,
        wait: Duration,
        max: usize,
    ) -> Result<Option<(Job, Vec<Attempt>)>, WaitError> {
        let finishes = &self.inner.finishes;
        let before = finishes.waiters.fetch_add(1, Ordering::Relaxed);
        let _waiter = Waiter(&finishes.waiters);
        if before >= max {
            return Err(WaitError::Busy(before));
        }
        // Subscribed before the first read: a finish after it is heard.
        let mut told = finishes.tx.subscribe();
        let end = tokio::time::Instant::now() + wait;
        loop {
            let got = self.inner.store.job_get(id).await?;
            let finished = got.as_ref().is_none_or(|(job, _)| job.state.is_finished());
            if finished || tokio::time::Instant::now() >= end {
                return Ok(got);
            }
            let recheck = end.min(tokio::time::Instant::now() + self.inner.config.wait_recheck);
            loop {
                tokio::select! {
                    heard = told.recv() => match heard {
                        Ok(done) if done == *id => break,
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => {
                            tokio::time::sleep_until(recheck).await;
                            break;
                        }
                    },
                    () = tokio::time::sleep_until(recheck) => break,
                }
            }
        }
    }

    /// Cancels a job ([`redial_store::Store::job_cancel`]) and tells those waiting for it when
    /// that finished it (a running job finishes when its attempt returns).
    pub async fn cancel(&self, id: &JobId) -> Result<Job, StoreError> {
        let job = self
            .inner
            .store
            .job_cancel(id, self.inner.clock.now())
            .await?;
        if job.state.is_finished() {
            self.inner.finishes.tell(&job.id);
        }
        Ok(job)
    }
}
