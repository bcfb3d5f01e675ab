//! Quarantine: an endpoint down for long. Part of the breaker (on with it).
//!
//! When the breaker opens again (its probes failed) and the endpoint has been failing for
//! `quarantine_after` or more (since the first failure after its last success), the endpoint is
//! quarantined: it stays open for `quarantine_probe_every` at a time, each half-open period lets
//! one probe through, and a probe that fails costs its job no attempt (the engine holds the job
//! until the next probe instead of failing it, as any failed probe that reopens the breaker:
//! `Finished::held_until`; deadlines still apply;
//! a job at its first attempt counts that one failure and becomes a retry).
//! The first probe that succeeds ends it: the breaker closes, with slow start; so do a hand
//! resume and a hand breaker reset.
//!
//! Two things keep quarantine from holding what is not the endpoint's fault, and from keeping
//! a job that comes in behind the held ones:
//! - **A job that fails for its own sake is not held.** A job that failed, and failed again
//!   after the endpoint answered another job a success (a payload the API always refuses with a
//!   500, a request that always times out), is poison: a quarantine's probe it fails counts for
//!   it as any failure does, so it uses its attempts and lands in its dead-letter category.
//!   (The breaker still counts its failures: they cannot be told from the first failures of an
//!   outage that builds up.) While the whole endpoint is down no success comes between a job's
//!   failures, and its probes are held as before. Which jobs failed when is per node and not
//!   saved (at most `JOBS_REMEMBERED` jobs).
//! - **A job not yet tried probes first.** For a moment after a probe falls due
//!   (`FIRSTS_FIRST`), it is kept for a first attempt; only if none is due does a retry take
//!   it. A job that comes in during a quarantine goes at the next probe, however many failed
//!   jobs wait.
//!
//! Invariant: a quarantined endpoint's breaker is never closed, and never open longer than
//! `quarantine_probe_every` at a time: one that starts answering is back in service within one
//! probe interval plus slow start.

use super::admission::{Admission, Hold, HoldKind, ResultClass};
use super::breaker::BreakerState;
use super::config::EndpointConfig;
use super::state::EndpointState;
use super::Permit;
use crate::duration::Human;
use crate::time::Timestamp;
use std::time::Duration;

/// Jobs whose last failure a node remembers per endpoint, to tell poison from an outage.
const JOBS_REMEMBERED: usize = 4096;

/// How long a quarantine's due probe is kept for a first attempt before a retry may take it.
const FIRSTS_FIRST: Duration = Duration::from_millis(250);

impl EndpointState {
    /// Whether an opening now quarantines the endpoint (or keeps it quarantined).
    pub(super) fn quarantine_due(&self, cfg: &EndpointConfig, now: Timestamp) -> bool {
        let after = cfg.breaker.quarantine_after;
        self.quarantined_since.is_some()
            || (!after.is_zero() && self.breaker_opens > 0 && self.failure_streak(now) >= after)
    }

    /// Quarantines the endpoint (if it was not): returns the open period, one probe interval.
    pub(super) fn enter_quarantine(&mut self, cfg: &EndpointConfig, now: Timestamp) -> Duration {
        if self.quarantined_since.is_none() {
            self.quarantined_since = Some(now);
            let streak = self.failure_streak(now);
            self.event(
                now,
                "quarantined",
                format!(
                    "failing for {} with the breaker open; its jobs are held, not failed, and one probe goes every {}",
                    Human(streak),
                    Human(cfg.breaker.quarantine_probe_every)
                ),
            );
        }
        cfg.breaker.quarantine_probe_every
    }

    /// Ends quarantine (a probe succeeded, or people resumed or reset it by hand).
    pub(super) fn end_quarantine(&mut self) {
        self.quarantined_since = None;
        self.quarantine_probe_at = None;
    }

    /// A quarantine's probe goes to a first attempt when one is due: for `FIRSTS_FIRST` after
    /// the probe became due, retries wait (a retry is a job that failed already, maybe for its
    /// own sake). None due by then, a retry takes it.
    pub(super) fn check_quarantine_retry(&self, now: Timestamp) -> Result<(), Admission> {
        let (Some(_), Some(due), BreakerState::HalfOpen { .. }) = (
            self.quarantined_since,
            self.quarantine_probe_at,
            self.breaker,
        ) else {
            return Ok(());
        };
        let until = due.saturating_add(FIRSTS_FIRST);
        if now < until {
            return Err(Admission::HoldRetries(Hold {
                kind: HoldKind::Breaker,
                until: Some(until),
                reason: format!(
                    "quarantined: its probe goes to a job not yet tried if one is due by {until}, then to a retry"
                ),
            }));
        }
        Ok(())
    }

    /// Notes the end of an attempt of `job` (when the caller said which) and returns whether the
    /// job fails for its own sake: it failed before, and the endpoint answered another job a
    /// success since (or it was found so already).
    pub(super) fn note_job(
        &mut self,
        job: Option<u64>,
        now: Timestamp,
        class: ResultClass,
    ) -> bool {
        match class {
            ResultClass::Success => {
                if let Some(j) = job {
                    self.job_failures.remove(&j);
                }
                false
            }
            ResultClass::Failure => {
                let Some(j) = job else {
                    return false;
                };
                let poison = self.job_failures.get(&j).is_some_and(|&(failed, poison)| {
                    poison || self.last_success.is_some_and(|ok| ok > failed)
                });
                if !self.job_failures.contains_key(&j) && self.job_failures.len() >= JOBS_REMEMBERED
                {
                    // The one that failed longest ago is forgotten.
                    if let Some(oldest) = self
                        .job_failures
                        .iter()
                        .min_by_key(|(_, (at, _))| *at)
                        .map(|(k, _)| *k)
                    {
                        self.job_failures.remove(&oldest);
                    }
                }
                self.job_failures.insert(j, (now, poison));
                poison
            }
            ResultClass::Neutral => false,
        }
    }

    /// A quarantined endpoint's probe decides at once: a success closes the breaker, a failure
    /// (of a first attempt too: probes cost no attempt now) opens it for another interval.
    /// Returns false when not quarantined, for the breaker's own rule.
    pub(super) fn record_quarantine_probe(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        class: ResultClass,
    ) -> bool {
        let Some(since) = self.quarantined_since else {
            return false;
        };
        if !matches!(self.breaker, BreakerState::HalfOpen { .. }) {
            return true;
        }
        match class {
            ResultClass::Success => {
                self.end_quarantine();
                self.close(
                    cfg,
                    now,
                    format!(
                        "a probe succeeded after {} in quarantine",
                        Human(now.saturating_since(since))
                    ),
                );
            }
            ResultClass::Failure => self.open(cfg, now, "the quarantine's probe failed".into()),
            // Its place goes to another probe.
            ResultClass::Neutral => {}
        }
        true
    }

    /// Since when the endpoint is quarantined, if it is.
    pub fn quarantined(&self) -> Option<Timestamp> {
        self.quarantined_since
    }
}

impl Permit {
    /// Whether the attempt was a quarantined endpoint's probe. (If it fails and the breaker
    /// opens again, its job is held until the next probe, as any probe's is:
    /// `Finished::held_until`.)
    pub fn quarantined(&self) -> bool {
        self.quarantine
    }
}
