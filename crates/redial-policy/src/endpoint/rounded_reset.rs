//! Quota resets given in whole seconds. A limiter that reports its quota in headers often gives
//! the reset as epoch seconds or a whole number of seconds, rounded up: Python's flask-limiter
//! over a moving window (a sliding log) of 50 a second says the oldest request expires "at
//! second S" when it expires up to a second earlier. Obeyed as the window's end, that held 600
//! jobs to 23.2 s against 12 s ideal (issue 54, observation 4: a burst of 50, then most of a
//! second of nothing).
//!
//! What a node alone in front of such a limiter can learn is when, after the oldest request the
//! server still counts (of this node's latest requests, as many as the limit less what the
//! server says remains), the quota frees: an offset the same from window to window (a moving
//! window's length, or a fixed window's length less the moment the window began). A spent
//! quota whose reset `S` is given in whole seconds, at most [`MOST`] away, is known to free
//! between `S` less a second and `S`; between the offsets already learned (refused at `lo`,
//! room at `hi`), it frees at the offset halfway: one request goes then to ask, not the window's
//! worth.
//! - Room (for more than itself): that offset is the new `hi`; the answer's headers say how
//!   many more may go.
//! - Refused: that offset is the new `lo`; the question is asked again at `hi` when one is
//!   known, else the endpoint waits for `S` as before. Its own `Retry-After` does not pause the
//!   endpoint.
//!
//! At such a reset, one request goes first and its answer says how many more: only the oldest
//! request is known to have expired then. Each window halves what is not known, so within about
//! seven windows the quota is asked for within [`KNOWN_WITHIN`] of when it frees, and a window
//! costs its length plus a round trip instead of up to a second more. A refusal at an offset
//! that had room before, or room where one was refused (the windows moved: a fixed window keyed
//! to the clock, a changed limit), forgets what was learned. A limiter whose resets are exact
//! refuses its questions; three refused in a row, and its resets are obeyed as given for
//! [`MEANT_FOR`].
//!
//! Only alone: with several nodes the oldest request counted may be another node's. Never
//! saved: a restarted node learns again. Does not own the quota (`learned_quota.rs`) nor the
//! reading of its headers ([`crate::quota`]).

use super::admission::{hold, Admission, HoldKind, Observed, Permit, ResultClass};
use super::state::EndpointState;
use crate::quota::RequestQuota;
use crate::time::Timestamp;
use std::collections::VecDeque;
use std::time::Duration;

/// Resets given in whole seconds up to this far away may be rounded.
pub(super) const MOST: Duration = Duration::from_secs(2);
/// Once `hi` and `lo` are this close (ms), the quota is asked for at `hi`.
const KNOWN_WITHIN: i64 = 8;
/// Asked a little after `hi` (ms): the time a request takes to reach the server varies.
const SLACK_MS: i64 = 2;
/// Questions refused this many times in a row (each refused question is asked again where
/// there was room before): the resets are obeyed as given for [`MEANT_FOR`].
const REFUSED_AT_MOST: u32 = 3;
const MEANT_FOR: Duration = Duration::from_secs(60);
/// Send times kept: of a larger quota, the oldest kept stands for the oldest counted (its
/// question goes later than it could).
const KEPT: usize = 4_096;

/// What is known of when the quota frees after the request that will free it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct ResetOffset {
    /// When this node sent its latest requests (at most the quota's limit, and [`KEPT`]), but
    /// those refused, oldest first.
    sent: VecDeque<Timestamp>,
    /// The largest offset (ms) at which a request was refused: the quota frees later.
    lo_ms: i64,
    /// The smallest offset (ms) at which a request found room.
    hi_ms: Option<i64>,
    /// A spent quota with a whole-second reset: one request goes at this instant to ask, about
    /// the quota that the request sent at the second instant frees.
    ask_at: Option<(Timestamp, Timestamp)>,
    /// A question in this window was refused: the window waits for its reset, or for the
    /// offset that had room before.
    refused: bool,
    /// Questions refused in a row.
    refused_in_a_row: u32,
    /// Resets are obeyed as given until then.
    meant_until: Option<Timestamp>,
    /// The latest quota read gave a reset that may be rounded ([`EndpointState::may_ask`]).
    may_round: bool,
    /// The request sent to ask is in flight: its offset, and the request whose expiry it asks
    /// about.
    asking: Option<(i64, Timestamp)>,
}

impl ResetOffset {
    /// The request whose expiry frees the quota next, when the server counts `counted` of this
    /// node's latest requests: the oldest of them.
    fn oldest(&self, counted: u64) -> Option<Timestamp> {
        let counted = usize::try_from(counted).unwrap_or(usize::MAX).max(1);
        (counted <= self.sent.len())
            .then(|| self.sent[self.sent.len() - counted])
            .or(self.sent.front().copied())
    }

    /// Forgets one request sent at `at` (refused, or never sent).
    fn unsend(&mut self, at: Option<Timestamp>) {
        if let Some(i) = at.and_then(|at| self.sent.iter().rposition(|t| *t == at)) {
            self.sent.remove(i);
        }
    }
}

impl EndpointState {
    /// Notes whether the latest quota read gave a reset that may be rounded.
    pub(super) fn note_reset_may_round(&mut self, may: bool) {
        self.reset_offset.may_round = may;
    }

    /// Whether the latest quota read gave a reset that may be rounded: at that reset only the
    /// oldest request the server counts is known to expire (a moving window), so one request
    /// goes first and its answer says what is left.
    pub(super) fn reset_may_round(&self) -> bool {
        self.reset_offset.may_round
    }

    /// When the next question about a whole-second reset goes, if one is planned.
    pub(super) fn next_question(&self) -> Option<Timestamp> {
        self.reset_offset.ask_at.map(|(at, _)| at)
    }

    /// A new window begins at its reset: a question refused in the last one is forgotten.
    pub(super) fn end_rounded_window(&mut self) {
        self.reset_offset.ask_at = None;
        self.reset_offset.refused = false;
    }

    /// A spent quota whose reset may be rounded: `None` when no question is planned; otherwise
    /// until the question is due, jobs wait for it (rather than for the reset), and from then
    /// one request may go ([`EndpointState::ask_rounded_reset`] counts it).
    pub(super) fn check_rounded_reset(&self, now: Timestamp) -> Option<Result<(), Admission>> {
        if self.reset_offset.asking.is_some() {
            return Some(hold(
                HoldKind::Quota,
                None,
                "quota spent; asking whether it freed".into(),
            ));
        }
        let (at, _) = self.reset_offset.ask_at?;
        if now >= at {
            return Some(Ok(()));
        }
        let reset = self.quota_reset_at.map_or(String::new(), |r| {
            format!(" (its reset, {r}, is given in whole seconds)")
        });
        Some(hold(
            HoldKind::Quota,
            Some(at),
            format!("quota spent; asking at {at} whether it freed{reset}"),
        ))
    }

    /// Counts an admission at `now`; returns whether it is a question (the one request that goes
    /// when one is due).
    pub(super) fn ask_rounded_reset(&mut self, now: Timestamp) -> bool {
        let Some(limit) = self.quota_limit.filter(|_| !self.quota_inferred) else {
            return false;
        };
        let o = &mut self.reset_offset;
        let question = o.ask_at.filter(|(at, _)| now >= *at);
        if let Some((_, first)) = question {
            o.ask_at = None;
            let offset = now.as_unix_millis() - first.as_unix_millis();
            o.asking = Some((offset, first));
            self.quota_reset_at = None;
            self.quota_tokens = Some(1);
        }
        let o = &mut self.reset_offset;
        o.sent.push_back(now);
        let keep = usize::try_from(limit).unwrap_or(usize::MAX).min(KEPT);
        while o.sent.len() > keep {
            o.sent.pop_front();
        }
        question.is_some()
    }

    /// A request admitted at `at` never ran, or its result is lost; a question is asked again by
    /// the next request.
    pub(super) fn unsend_rounded(&mut self, permit: &Permit, now: Timestamp) {
        let o = &mut self.reset_offset;
        o.unsend(permit.admitted_at);
        if permit.reset_question {
            if let Some((_, first)) = o.asking.take() {
                o.ask_at = Some((now, first));
            }
        }
    }

    /// What an answer teaches; called before the answer's quota is read. A refused request
    /// does not count among those sent. Returns whether it was a question refused: its own
    /// wait (whole seconds, [`MOST`] at most, like the reset it comes from) does not pause the
    /// endpoint; the quota holds it.
    pub(super) fn learn_rounded_reset(
        &mut self,
        now: Timestamp,
        permit: &Permit,
        o: &Observed,
    ) -> bool {
        let r = &mut self.reset_offset;
        if o.rate_limited {
            r.unsend(permit.admitted_at);
        }
        if !permit.reset_question {
            return false;
        }
        let Some((offset, _)) = r.asking.take() else {
            return false;
        };
        let moved = if o.rate_limited {
            r.lo_ms = r.lo_ms.max(offset);
            // The window waits for its reset, or for the offset that had room before.
            r.refused = true;
            r.refused_in_a_row += 1;
            if r.refused_in_a_row >= REFUSED_AT_MOST {
                // Not where it had room before either: the resets mean what they say (or
                // the windows are not this node's to learn) for a while.
                r.refused_in_a_row = 0;
                r.meant_until = Some(now.saturating_add(MEANT_FOR));
            }
            r.hi_ms.is_some_and(|hi| offset >= hi)
        } else if o.class == ResultClass::Success
            && o.quota.requests.is_some_and(|q| q.remaining > 0)
        {
            // Room for more than itself: the quota freed (room for one only may be a request
            // older than the one asked about).
            r.hi_ms = Some(r.hi_ms.map_or(offset, |hi| hi.min(offset)));
            r.refused = false;
            r.refused_in_a_row = 0;
            let moved = offset <= r.lo_ms;
            self.note_quota_back(now);
            moved
        } else {
            false
        };
        let r = &mut self.reset_offset;
        if moved {
            // Refused where there was room before, or the reverse: the windows moved (a fixed
            // window keyed to the clock, a changed limit, requests counted that were not
            // sent together). Learned again.
            r.hi_ms = None;
            r.lo_ms = 0;
        }
        o.rate_limited
    }

    /// Whether a spent request quota `q` may have its reset asked about: given in whole seconds,
    /// at most [`MOST`] away, this node alone, and not obeyed as given for now. Its spent
    /// answers then do not pause the endpoint; the quota holds it (until its question or its
    /// reset).
    pub(super) fn may_ask(&self, now: Timestamp, q: &RequestQuota) -> bool {
        q.reset_whole
            && q.reset_after.is_some_and(|after| after <= MOST)
            && self.share.is_whole()
            && self.quota_limit.is_some()
            && !self.quota_inferred
            && self
                .reset_offset
                .meant_until
                .is_none_or(|until| now >= until)
    }

    /// After an answer `o` whose quota gave its reset in whole seconds: when this node's quota
    /// is spent (nothing left, counting what is in flight), its reset at most [`MOST`] away,
    /// and this node alone, when to ask whether it freed.
    pub(super) fn plan_rounded_reset(&mut self, now: Timestamp, o: &Observed) {
        let Some(q) = o.quota.requests else {
            return;
        };
        // The last answer of what was sent: what was sent is all known.
        if o.others_in_flight > 0 {
            return;
        }
        let (Some(reset), Some(0), Some(limit)) =
            (self.quota_reset_at, self.quota_tokens, self.quota_limit)
        else {
            return;
        };
        let o = &self.reset_offset;
        if !o.may_round || reset.saturating_since(now) > MOST || o.asking.is_some() {
            return;
        }
        // What the server counts of this node's requests: the limit less what it says remains.
        let Some(first) = o.oldest(limit.saturating_sub(q.remaining)) else {
            return;
        };
        let first_at = first;
        let reset = reset.as_unix_millis();
        let first = first.as_unix_millis();
        // Rounded up by less than a second: it frees after `reset` less a second, and by
        // `reset`. What was learned in other windows narrows that, when it agrees.
        let lo = o.lo_ms.max(reset - 1_000 - first);
        let known = o.hi_ms.filter(|h| *h > lo);
        let hi = known.map_or(reset - first, |h| h.min(reset - first));
        if hi <= lo {
            return;
        }
        let offset = match known {
            // A question refused in this window: again at the offset that had room before.
            Some(known) if o.refused => known + SLACK_MS,
            _ if o.refused => return,
            _ if hi - lo <= KNOWN_WITHIN => hi + SLACK_MS,
            _ => lo + (hi - lo) / 2,
        };
        if offset + first >= reset {
            // Nothing left to ask before the reset: it is meant.
            return;
        }
        let at = Timestamp::from_unix_millis((first + offset).max(now.as_unix_millis()));
        self.reset_offset.ask_at = Some((at, first_at));
    }
}
