//! Pauses: every job of the endpoint waits until an instant. Two kinds, asked first of all:
//!
//! - a pause people set by hand ([`HandPause`], from the shared controls): it holds until they
//!   resume the endpoint, or until its end when one was given;
//! - a learned pause (`paused_until`): a server-given wait that applies to the whole endpoint
//!   (a 429's `Retry-After`), a spent quota's reset, or another node's pause taken in.
//!
//! Invariant: a learned pause is only ever lengthened ([`EndpointState::pause`] keeps the later
//! end), except by a hand resume, which ends it once, the first time it is seen. A learned pause
//! that ends, on an endpoint with no configured rate and no learned quota, begins slow start.

use super::admission::{hold, Admission, HoldKind};
use super::config::EndpointConfig;
use super::state::EndpointState;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};

/// A pause set by hand on an endpoint or a queue: since when, until when (`None`: until resumed)
/// and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandPause {
    pub since: Timestamp,
    pub until: Option<Timestamp>,
    pub reason: String,
}

impl HandPause {
    /// Whether it holds at `now`.
    pub fn in_force(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|u| now < u)
    }

    /// How reasons and views say it: "paused by hand until resumed: why" (or "until T").
    pub fn describe(&self) -> String {
        let until = self
            .until
            .map_or(String::from("until resumed"), |u| format!("until {u}"));
        let why = if self.reason.is_empty() {
            "no reason given"
        } else {
            &self.reason
        };
        format!("paused by hand {until}: {why}")
    }
}

impl EndpointState {
    /// A hand pause in force holds; then a learned pause, until its end. A learned pause that
    /// ended is cleared here, named as the last hold, and begins slow start.
    pub(super) fn check_pause(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
    ) -> Result<(), Admission> {
        if let Some(p) = self.hand_pause.as_ref().filter(|p| p.in_force(now)) {
            return hold(HoldKind::Pause, p.until, p.describe());
        }
        if let Some(until) = self.paused_until {
            if now < until {
                return hold(
                    HoldKind::Pause,
                    Some(until),
                    paused_text(until, self.pause_reason.as_deref()),
                );
            }
            self.paused_until = None;
            let why = self.pause_reason.take().unwrap_or_default();
            self.last_hold = Some((format!("endpoint pause ({why})"), until));
            if cfg.rate.is_none() && self.quota_limit.is_none() {
                self.start_ramp(now);
            }
        }
        Ok(())
    }

    /// Pauses the endpoint until `until` (or later, if already paused longer).
    pub fn pause(&mut self, until: Timestamp, reason: String) {
        if self.paused_until.is_none_or(|p| until > p) {
            self.paused_until = Some(until);
            self.pause_reason = Some(reason);
        }
    }

    /// Takes in a hand resume made at `at`: the first time it is seen, the pause in force ends
    /// (a server-given wait, a spent quota's reset: the person resuming takes over; the next
    /// answer may pause it again). Returns whether anything changed.
    pub fn take_resume(&mut self, cfg: &EndpointConfig, at: Timestamp, now: Timestamp) -> bool {
        if self.resumed_at.is_some_and(|seen| seen >= at) {
            return false;
        }
        self.resumed_at = Some(at);
        // A quarantine ends by hand too: the breaker closes, with slow start.
        let quarantined = self.quarantined();
        if let Some(since) = quarantined {
            self.end_quarantine();
            self.breaker_period = self.breaker_period.wrapping_add(1);
            self.close(
                cfg,
                now,
                format!("resumed by hand at {at}, in quarantine since {since}"),
            );
        }
        // A spent quota (or this node's spent part of it) holds until its reset too.
        let quota_spent = self.quota_spent();
        let was_held = self.paused_until.is_some() || quota_spent || quarantined.is_some();
        self.paused_until = None;
        self.pause_reason = None;
        if quota_spent {
            self.forget_spent_quota();
        }
        was_held
    }
}

/// Why a pause holds an endpoint's jobs, as reasons and views say it.
pub(super) fn paused_text(until: Timestamp, why: Option<&str>) -> String {
    format!("endpoint paused until {until}: {}", why.unwrap_or_default())
}
