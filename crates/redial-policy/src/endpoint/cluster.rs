//! An endpoint's state among several nodes on one store: this node's part of the limits, and
//! the holds every node honours.
//!
//! The engine sets the part ([`Share`]) as nodes come and go, and after restoring a saved state;
//! it is never saved. The holds that must be shared, a pause, an open breaker and the latest
//! bare 429, go out through [`EndpointState::shareable`] (published by the engine to the store)
//! and come in through [`EndpointState::absorb`].
//!
//! Invariant: taking in another node's holds never shortens ours: a pause ending later than
//! theirs stays, and so does a breaker open until later. A breaker another node opened does not
//! count as one of this node's openings, so the open time doubles only for what this node saw
//! itself.

use super::breaker::BreakerState;
use super::share::Share;
use super::state::EndpointState;
use crate::time::Timestamp;

/// The holds of an endpoint that every node honours, as (until, reason).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedHolds {
    pub pause: Option<(Timestamp, String)>,
    pub breaker: Option<(Timestamp, String)>,
    /// A pace learned from bare 429s holds until then (unless refused again): the send instant
    /// of the latest request refused bare, plus [`super::pace::FORGET_AFTER`].
    pub paced_until: Option<Timestamp>,
}

impl EndpointState {
    /// This node's part of the cluster's limits.
    pub fn share(&self) -> Share {
        self.share
    }

    /// Sets this node's part of the cluster's limits (the engine does, as nodes come and go,
    /// and when a saved state is restored). A quota learned from headers is divided by the
    /// smaller of this division and the one its window began with (see `quota_part` in
    /// `learned_quota.rs`).
    pub fn set_share(&mut self, share: Share) {
        self.share = share;
    }

    /// The holds other nodes must honour, while in force at `now`: the pause and the open
    /// breaker, each with its end and reason, and the learned pace's latest bare refusal.
    pub fn shareable(&self, now: Timestamp) -> SharedHolds {
        let pause = self
            .paused_until
            .filter(|t| *t > now)
            .map(|t| (t, self.pause_reason.clone().unwrap_or_default()));
        let breaker = match self.breaker {
            BreakerState::Open { until } if until > now => {
                let why = self
                    .breaker_history
                    .back()
                    .map(|e| e.reason.clone())
                    .unwrap_or_default();
                Some((until, why))
            }
            _ => None,
        };
        SharedHolds {
            pause,
            breaker,
            paced_until: self.pace.shared_until().filter(|t| *t > now),
        }
    }

    /// Takes in another node's holds: a pause that ends later than ours, a breaker that node
    /// opened (ours opens until the same instant, without counting as one of our openings, so
    /// the open time doubles only for what this node saw itself), a bare refusal it met (the
    /// learned pace takes it in as a refusal of its own, see [`super::pace`]).
    pub fn absorb(&mut self, now: Timestamp, other: &SharedHolds) {
        if let Some(until) = other.paced_until {
            self.pace.refused_elsewhere_until(now, until);
        }
        if let Some((until, why)) = &other.pause {
            if *until > now {
                self.pause(*until, why.clone());
            }
        }
        if let Some((until, why)) = &other.breaker {
            let later = match self.breaker {
                BreakerState::Open { until: ours } => *until > ours,
                _ => true,
            };
            if *until > now && later {
                self.breaker = BreakerState::Open { until: *until };
                self.event(now, "open", format!("opened by another node: {why}"));
            }
        }
    }
}
