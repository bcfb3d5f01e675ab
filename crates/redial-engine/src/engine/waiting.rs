//! Waiting for a job to finish (`GET /v1/jobs/{id}?wait=30s`): the answer comes when the job is
//! completed, dead or cancelled, or when the wait ends, whichever is first.
//!
//! Woken by the change, not by reading the job in a loop: each finish this node makes (an
//! attempt's result recorded, a cancel through the engine) wakes the requests waiting for that
//! job, and only them (one map lookup per finish while anyone waits, none otherwise). A waiter
//! arms its wake-up before each read, so that no finish falls between the read and the wait. A
//! finish this node does not see (another node's attempt, a deadline ended by the maintenance
//! leader) is found by one read every `EngineConfig::wait_recheck` (2 s) at most.
//!
//! Invariants: at most `max` waiters at once on this node, the rest refused at once
//! ([`WaitError::Busy`]) rather than queued; a waiter holds no lease, no lock and no connection
//! while it waits; a job's entry in the map lives exactly as long as someone waits for it.

use super::Engine;
use redial_store::{Attempt, Job, JobId, StoreError};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The requests waiting for jobs on this node: per job, what wakes them and how many they are.
#[derive(Debug, Default)]
pub(super) struct Finishes {
    waiting: Mutex<HashMap<JobId, (Arc<Notify>, usize)>>,
    /// Waiters in all (read without the lock: a finish with nobody waiting takes no lock).
    waiters: AtomicUsize,
}

impl Finishes {
    /// Wakes the requests waiting for `id`, if any.
    pub(super) fn tell(&self, id: &JobId) {
        if self.waiters.load(Ordering::Relaxed) == 0 {
            return;
        }
        let waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((notify, _)) = waiting.get(id) {
            notify.notify_waiters();
        }
    }
}

/// One waiter for one job, counted while it lives.
struct Waiter<'a> {
    finishes: &'a Finishes,
    id: JobId,
    notify: Arc<Notify>,
}

impl<'a> Waiter<'a> {
    fn new(finishes: &'a Finishes, id: &JobId) -> Waiter<'a> {
        let mut waiting = finishes.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let entry = waiting
            .entry(id.clone())
            .or_insert_with(|| (Arc::new(Notify::new()), 0));
        entry.1 += 1;
        Waiter {
            finishes,
            id: id.clone(),
            notify: entry.0.clone(),
        }
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut waiting = self
            .finishes
            .waiting
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(entry) = waiting.get_mut(&self.id) {
            entry.1 -= 1;
            if entry.1 == 0 {
                waiting.remove(&self.id);
            }
        }
    }
}

/// The count of waiters, released when dropped.
struct Counted<'a>(&'a AtomicUsize);

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
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
        let _counted = Counted(&finishes.waiters);
        if before >= max {
            return Err(WaitError::Busy(before));
        }
        let waiter = Waiter::new(finishes, id);
        let end = tokio::time::Instant::now() + wait;
        loop {
            // Armed before the read: a finish after it wakes this wait.
            let told = waiter.notify.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            let got = self.inner.store.job_get(id).await?;
            let finished = got.as_ref().is_none_or(|(job, _)| job.state.is_finished());
            if finished || tokio::time::Instant::now() >= end {
                return Ok(got);
            }
            let recheck = end.min(tokio::time::Instant::now() + self.inner.config.wait_recheck);
            tokio::select! {
                () = told => {}
                () = tokio::time::sleep_until(recheck) => {}
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
        self.inner.finished(&job, job.state, false);
        Ok(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_finish_wakes_the_waiters_of_its_job_only_and_entries_end_with_their_waiters() {
        let finishes = Finishes::default();
        let a = JobId("a".into());
        let b = JobId("b".into());
        let first = Waiter::new(&finishes, &a);
        let second = Waiter::new(&finishes, &a);
        let other = Waiter::new(&finishes, &b);
        finishes.waiters.store(3, Ordering::Relaxed);
        let (notify_a, notify_b) = (first.notify.clone(), other.notify.clone());
        let told_a = notify_a.notified();
        let told_b = notify_b.notified();
        tokio::pin!(told_a, told_b);
        told_a.as_mut().enable();
        told_b.as_mut().enable();
        finishes.tell(&a);
        // `a`'s wait is over; `b`'s is not.
        tokio::time::timeout(Duration::from_secs(60), told_a)
            .await
            .expect("a's waiters are woken");
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(
            std::future::Future::poll(told_b.as_mut(), &mut cx).is_pending(),
            "b's waiter is not woken by a's finish"
        );
        let len = |f: &Finishes| f.waiting.lock().expect("lock").len();
        assert_eq!(len(&finishes), 2);
        drop(first);
        assert_eq!(len(&finishes), 2, "a still has a waiter");
        drop(second);
        drop(other);
        assert_eq!(len(&finishes), 0, "no entry outlives its waiters");
    }
}
