//! The words admission and recording are spoken in: what holds a job ([`Hold`], [`HoldKind`]),
//! what an admission answers ([`Admission`]), what it hands out ([`Permit`]), and what a
//! finished attempt taught ([`Observed`], [`ResultClass`]).
//!
//! Invariant: a [`Permit`] is handed back exactly once, to
//! [`record`](super::EndpointState::record) or to [`release`](super::EndpointState::release); it
//! is neither `Clone` nor `Copy`, so it cannot be handed back twice. Does not own any rule: the
//! mechanisms' modules say when a hold applies.

use crate::quota::Quota;
use crate::time::Timestamp;
use serde::Serialize;
use std::time::Duration;

/// Why a job may not go now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HoldKind {
    Pause,
    Breaker,
    Probe,
    Quota,
    Rate,
    Ramp,
    Concurrency,
    Budget,
    /// First attempts kept back while retries tell whether the endpoint is down or flaky.
    Suspect,
}

/// A hold: what, until when (when known; otherwise until an attempt in flight ends), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub kind: HoldKind,
    pub until: Option<Timestamp>,
    pub reason: String,
}

/// A hold of every job of the endpoint, as a check answers it.
pub(super) fn hold(
    kind: HoldKind,
    until: Option<Timestamp>,
    reason: String,
) -> Result<(), Admission> {
    Err(Admission::Hold(Hold {
        kind,
        until,
        reason,
    }))
}

/// What an admission counted, handed back exactly once: to
/// [`EndpointState::record`](super::EndpointState::record) when the attempt ends, or to
/// [`EndpointState::release`](super::EndpointState::release) when it never ran (or its result
/// is lost). Until then it holds its place: a probe slot, a retry in flight.
///
/// Neither `Clone` nor `Copy`: handing one back consumes it, so it cannot be handed back twice.
#[derive(Debug, Default, PartialEq, Eq)]
#[must_use = "a permit is handed back to record or release, or its place stays taken"]
pub struct Permit {
    pub(super) retry: bool,
    /// The half-open period this attempt probes, if it is a probe.
    pub(super) probe: Option<u32>,
    /// Sent, this node's part of a learned quota spent, to find out whether its window ended
    /// (no answer told the reset: the answers in the window were timeouts, or none came yet).
    pub(super) quota_probe: bool,
    /// The learned pace's epoch when admitted: a refusal cuts the pace once per epoch.
    pub(super) pace_epoch: u32,
    /// When it was admitted (sent): what the other nodes are told of a bare refusal.
    pub(super) admitted_at: Option<Timestamp>,
    /// A quarantined endpoint's probe ([`Permit::quarantined`]).
    pub(super) quarantine: bool,
    /// Sent to ask whether a quota whose reset was given in whole seconds freed before it
    /// (`rounded_reset.rs`).
    pub(super) reset_question: bool,
}

impl Permit {
    /// Whether the attempt was admitted as a retry.
    pub fn is_retry(&self) -> bool {
        self.retry
    }

    /// Whether the attempt was admitted as a probe of a half-open breaker.
    pub fn is_probe(&self) -> bool {
        self.probe.is_some()
    }

    /// Whether the attempt was admitted to find out whether a spent quota's window has ended:
    /// no answer told its reset, so it may be refused (or, with several nodes, take what is
    /// another node's part of the next window).
    pub fn is_quota_probe(&self) -> bool {
        self.quota_probe
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// It may go; the permit goes back when the attempt ends.
    Go(Permit),
    /// No job of this endpoint may go now.
    Hold(Hold),
    /// First attempts may go, retries may not (the retry budget is spent); they wait.
    HoldRetries(Hold),
    /// Retries may go, first attempts may not (first attempts failed with no success since:
    /// the retries tell whether the endpoint is down or flaky); they wait.
    HoldFirsts(Hold),
    /// The retry budget is spent and the policy says to fail such retries.
    FailRetry(Hold),
}

impl Admission {
    pub fn is_go(&self) -> bool {
        matches!(self, Admission::Go(_))
    }
}

/// How a result counts for the breaker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResultClass {
    Success,
    /// Transient and unknown failures.
    Failure,
    /// Deferrals and permanent errors: the endpoint answered, but they say nothing of its health.
    Neutral,
}

/// What one finished attempt taught about the endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub class: ResultClass,
    /// A 429, a 503 or a timeout: a sign of overload for adaptive concurrency.
    pub overload: bool,
    /// A 429: the API refused the request for its rate. Without a server wait or quota headers
    /// (a bare 429) it teaches the endpoint's pace.
    pub rate_limited: bool,
    /// A 503. Without a server wait or quota headers, from an endpoint that answers others, it
    /// may be a limiter's refusal (`unavailable.rs`).
    pub unavailable: bool,
    /// A server-given wait that applies to the whole endpoint, with a reason for people.
    pub server_wait: Option<(Duration, String)>,
    pub quota: Quota,
    /// Attempts of this endpoint still in flight, not counting this one.
    pub others_in_flight: u32,
    /// The attempt failed and its job is to be retried, and that retry may be sent at once: the
    /// failure is transient, or an unknown outcome of a request safe to repeat.
    pub safe_retry: bool,
    /// Which job it was (any number the caller keeps for a job while it waits: the engine's
    /// store sequence), left `None` by [`Observed::of`] for the caller to fill in. With it the
    /// endpoint tells a job that fails for its own sake from an endpoint that is down
    /// (`quarantine.rs`); without it every failure is taken as the endpoint's.
    pub job: Option<u64>,
}

impl Observed {
    /// A 503 that said nothing: no server wait, no quota (nginx `limit_req` as shipped).
    pub fn is_bare_unavailable(&self) -> bool {
        self.unavailable
            && self.server_wait.is_none()
            && self.quota.requests.is_none()
            && self.quota.exhausted.is_none()
    }

    /// A 429 that said nothing: no server wait, no quota. It teaches the endpoint's pace.
    pub fn is_bare_refusal(&self) -> bool {
        self.rate_limited
            && self.server_wait.is_none()
            && self.quota.requests.is_none()
            && self.quota.exhausted.is_none()
    }
}
