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
//!
//! # What N nodes share, and what they divide
//!
//! - **pause (server-given wait, spent quota's reset)**: shared: every node holds until the latest
//!   instant any node learned.
//! - **pause by hand, hand resume, breaker reset, queue pause**: shared: kept in the store's
//!   `controls` table, which every node reads each quarter second (and at once when PostgreSQL
//!   notifies); a hand resume or reset first clears the shared hold, then each node applies it once
//!   (`EndpointState::take_resume`, `take_breaker_reset` remember the last one taken).
//! - **breaker open**: shared: a node that opens it publishes until when; the others open until
//!   then too (without doubling their own open time). Each node then probes on its own: up to N x
//!   `half_open_probes` probes.
//! - **configured rate (GCRA), burst, concurrency limit, slow start, retry budget's minimum**:
//!   divided: node `i` of `N` keeps `limit / N`, plus one when `i < limit % N`
//!   (`redial_policy::endpoint::Share`; rates by spacing each node's requests `N` times the
//!   cluster's interval, kept to the nanosecond), so the parts add up to the limit (a burst smaller
//!   than `N` gives every node one, so up to `N`). A concurrency limit smaller than `N` gives some
//!   nodes none: the endpoint's jobs then run only on the nodes with a part, and wait if those hang
//!   while connected (until their session ends) or do not run the queue. `i` is the node's rank
//!   among the worker ids in the store's `nodes` table (in byte order), turned per endpoint by a
//!   hash of its name so the remainders of different endpoints fall on different nodes. Every node
//!   reads the table each quarter second and at once when PostgreSQL notifies that a node announced
//!   itself or was forgotten.
//! - **learned quota (from headers)**: divided by the limit: in each window (from one reset an
//!   answer gave to the next) a node sends at most its part of the limit, counting its first
//!   request and, when it saw the window begin, its requests in flight then and all it sent since
//!   (also those answered without headers). Within that it takes its part of what each answer says
//!   remains (within a window the count only goes down), and once that is spent, one request at a
//!   time while its last answer said some remain (counts read at different moments leave some
//!   over), never past its part of the limit. So the parts add up to the limit whatever order
//!   requests arrive and answers come back in (simulated in
//!   `redial-policy/tests/cluster_quota.rs`). Beyond the quota the cluster may send: each node's
//!   first request, and then one per window from each node whose part is nothing, when the quota
//!   has fewer requests than there are nodes (each learns the next reset only by asking); while a
//!   node joins, the join bound below (the others' parts shrink as soon as they learn of it); when
//!   a node dies before the survivors heard the window's first answer, what the dead node sent in
//!   that window (at most its part); and one request for each answer without headers (a timeout:
//!   the API counted the request, the node learned nothing) after which a node, its part spent,
//!   knows no reset: it asks, one request at a time, whether its window ended, and each such
//!   request may be refused or take what is another node's part of the next window (a node learns a
//!   window's end only from an answer with headers in it; one that waited instead would have to
//!   guess the window's length). The simulation counts these requests (`Permit::is_quota_probe`);
//!   its bound had missed them until a search found a case (issue 29). A node that dies keeps its
//!   part until the window ends (what it sent of it may still reach the API): the survivors' parts
//!   grow from the next window. The cost: the part of a node that dies, or that has no work for the
//!   endpoint (a queue it does not run), goes unused for the window; with an hourly or daily quota,
//!   that is up to an hour or a day. An API that gives no limit or no reset keeps no part: each
//!   node takes its part of what remains and goes on one request at a time, as above, without the
//!   bound. An answer saying none remain, or a 429, pauses every node until the reset. A restarted
//!   node is a new node (its count is not saved). A quota inferred from 429s is inferred by each
//!   node from its own successes, which are its part already.
//! - **pace learned from bare 429s**: each node keeps its own rate, learned from its own successes
//!   (they are its part of the limiter's), so the nodes' paces add up to about the limiter's rate;
//!   a bare 429 is shared (`endpoint_holds.paced_until`) and is a signal to every node, as ECN is
//!   to TCP senders sharing a link: a node that sent to the endpoint in the last second sets its
//!   rate at the first signal, and a later one cuts it once if the refused request was sent after
//!   that node's latest cut (one sent before was answered by the cut). So the nodes slow down
//!   together instead of each meeting its own refusals, and a pace stays learned while any node is
//!   refused. Simulated with three nodes in `redial-policy/tests/bare_429s.rs` (shared: 26 refused
//!   of 1,000 jobs against a 50/s leaky bucket, 63 against 50/s fixed windows; each node learning
//!   alone: 55 and 77), end to end in `redial-engine/tests/nodes.rs`. The first contact's window is
//!   per node.
//! - **retry budget**: each node allows failed and in-flight retries up to `ratio` x its own first
//!   attempts + its own successes + its part of `min_per_second`, so the whole stays within `ratio`
//!   x all first attempts + all successes + the minimum.
//!
//! # The bounds while nodes come and go
//!
//! - **A node joins**: it sees the nodes already there as it starts (it announces itself, then
//!   reads the list, before its first lease), and the others divide anew when PostgreSQL notifies
//!   them of it (within a quarter second if the notification is lost). Until they do, the cluster
//!   may admit up to `limit x (1 + 1/(N+1))` (the old nodes' larger parts plus the new node's), and
//!   requests already in flight under the old parts stay in flight until they end.
//! - **A node dies**: its presence lock frees at once; the maintenance leader forgets it once it
//!   has been silent for the presence grace (3 s by default) and notifies; the survivors then take
//!   larger parts (of a learned quota, from its next window). Until then its part is unused, and
//!   its requests that were in flight may still be served by the API while the survivors use the
//!   larger parts: in flight at the API, at most the limit plus the dead node's part, for as long
//!   as those requests last.
//! - **A node hangs while connected** keeps its lock and its part: the survivors use only theirs
//!   (less than the limit, never more) until its session ends.
//! - **Older nodes** that never announce themselves are not counted, and keep whole limits.
//! - **A node with no work for an endpoint** leaves its part unused. Every node leases from the
//!   same queues, so under load each takes its share of every endpoint's jobs; a queue that only
//!   some nodes run gives those nodes less than the limit.

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
