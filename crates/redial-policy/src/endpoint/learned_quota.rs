//! The request quota learned from responses, to stop before the 429 rather than after it.
//!
//! Two sources. Headers that report a quota (limit, remaining, reset: [`crate::quota`]) give it
//! outright: requests go while some remain, and when none do, jobs wait for the reset. A 429
//! that reports none but says when to come back (`Retry-After`) teaches it by inference: what
//! went through since the server's window began is the best guess of its limit; from then on
//! that many go per window, and when they are spent, probes find out whether there is more room:
//! one at first, then rounds that grow by one for each round that found room and halve at a 429
//! (a limiter that refills as it goes, a token bucket, never refuses a lone probe, and one at a
//! time would hold it to one request a round trip). Two resets a whole number of windows apart
//! confirm the windows (measured from an anchor, to a fraction of a millisecond), and a spent
//! window may then wait for its
//! predicted reset instead of probing: more and more windows in a row while probes keep being
//! refused, up to [`QUOTA_PROBE_EVERY`] of them and [`QUOTA_PREDICTED_MS`] in all, so that a
//! limit the server raised is found within a second.
//!
//! Invariants:
//! - within a window the count only goes down: answers can arrive out of order, so the lowest
//!   report wins, and the later reset;
//! - with several nodes, a quota the headers told is the cluster's: each node sends at most its
//!   part of the window's limit (the smaller of its part now and when the window began), so the
//!   parts add up to the limit whatever order the answers came in, and a node that leaves gives
//!   its part to the others only from the next window (`tests/cluster_quota.rs`);
//! - an inferred limit counted over more than one of the server's windows may only lower it,
//!   and one counted within a window lowers it by half at most;
//! - a predicted reset is waited for a little after the boundary (a sixteenth of the window),
//!   never before it, and a prediction refused early (before half the limit went) is dropped
//!   with the windows learned.
//!
//! What is counted per node (requests sent in the window, the division the window began with,
//! what the cluster had left) is never saved: the saved state is the last node's to save it,
//! and a restarted node is a new one. Does not own the pause a spent token quota or a 429's wait
//! sets (`pause.rs`), nor the parsing of quota headers ([`crate::quota`]).

use super::admission::{hold, Admission, HoldKind, Observed, ResultClass};
use super::config::EndpointConfig;
use super::state::EndpointState;
use super::Share;
use crate::duration::Human;
use crate::quota::RequestQuota;
use crate::time::Timestamp;

/// At most this many windows whose inferred quota ran out wait for the predicted reset in a row
/// before one probes for more room.
const QUOTA_PROBE_EVERY: u32 = 8;
/// ... and at most this long (ms) in all: windows longer than this are always probed, so that a
/// limit the server raised is found within a second. (One wasted probe per window matters for
/// short windows only.)
const QUOTA_PREDICTED_MS: i64 = 1_000;

impl EndpointState {
    /// A reset that passed begins a new window; then this node's spent part, or a spent quota,
    /// holds until the reset (or, none known, until an answer or a probe tells it).
    pub(super) fn check_quota(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        in_flight: u32,
    ) -> Result<(), Admission> {
        if !cfg.learn_from_headers {
            return Ok(());
        }
        if let Some(reset) = self.quota_reset_at.filter(|reset| now >= *reset) {
            self.begin_quota_window(reset, in_flight);
        }
        // A reset given in whole seconds: a question may go before it (rounded_reset.rs).
        if let Some(asked) = self.check_rounded_reset(now) {
            return asked;
        }
        // With several nodes, what an answer says remains is the other nodes' too, and
        // they may be about to spend it: this node sends no more than its part of the
        // window's limit, so that the parts add up to the limit whatever order the answers
        // came in.
        if let (Some(0), Some(limit), Some(reset)) = (
            self.quota_part_left(),
            self.quota_limit,
            self.quota_reset_at,
        ) {
            let part = self.quota_part(limit);
            return hold(
                HoldKind::Quota,
                Some(reset),
                format!("quota: this node's part ({part} of {limit}) spent until {reset}"),
            );
        }
        if self.quota_tokens == Some(0) {
            return self.check_spent_quota(now, in_flight);
        }
        Ok(())
    }

    /// A new window, at `reset`. Attempts still in flight will likely land in it and count.
    fn begin_quota_window(&mut self, reset: Timestamp, in_flight: u32) {
        let share = self.share;
        let inferred = self.quota_inferred;
        self.quota_tokens = self.quota_limit.map(|l| {
            // A limit the headers gave is the cluster's; one inferred from this
            // node's own successes is already this node's.
            let mine = if inferred { l } else { share.part(l) };
            mine.saturating_sub(u64::from(in_flight))
        });
        if self.reset_may_round() {
            // A whole-second reset may be a moving window's oldest request expiring, not the
            // window's end: one request asks what is left (rounded_reset.rs).
            self.quota_tokens = self.quota_tokens.map(|t| t.min(1));
        }
        self.quota_reset_at = None;
        self.quota_cluster_remaining = None;
        self.quota_sent = u64::from(in_flight);
        self.quota_window_counted = true;
        self.quota_window_share = Some(share);
        self.ok_in_window = 0;
        self.quota_window_predicted = std::mem::take(&mut self.quota_reset_predicted);
        // A predicted reset was waited for a little past the boundary; the window
        // began at the boundary, so that the windows do not drift later.
        let start = if self.quota_window_predicted {
            Timestamp::from_unix_millis(reset.as_unix_millis() - self.quota_slack_ms())
        } else {
            reset
        };
        self.ok_since = Some(start);
        self.quota_probing = false;
        self.end_rounded_window();
        if !inferred {
            self.note_quota_back(reset);
        }
    }

    /// A quota read from headers came back at `at`: the time since it last did is the cycle
    /// the forecast takes for its window (a reset given in whole seconds says little of it).
    pub(super) fn note_quota_back(&mut self, at: Timestamp) {
        if let Some(before) = self.quota_back_at {
            let cycle = at.as_unix_millis() - before.as_unix_millis();
            if (1..=3_600_000).contains(&cycle) {
                self.quota_cycle_ms = Some(cycle);
            }
        }
        self.quota_back_at = Some(at);
    }

    /// No token left: hold until the reset when one is known or can be predicted; otherwise
    /// let one request go (a probe, or with several nodes one of what the cluster has left).
    fn check_spent_quota(&mut self, now: Timestamp, in_flight: u32) -> Result<(), Admission> {
        match self.quota_reset_at {
            // With several nodes, this node's part is spent but the last answer said
            // some remain for the cluster (parts of counts read at different moments
            // leave a few over): one request at a time goes, each answer saying again.
            Some(_)
                if !self.share.is_whole()
                    && in_flight == 0
                    && self.quota_cluster_remaining.is_some_and(|r| r > 0) =>
            {
                // Used up: only a new answer lets another go.
                self.quota_cluster_remaining = None;
                self.quota_tokens = Some(1);
            }
            Some(reset) => {
                return hold(
                    HoldKind::Quota,
                    Some(reset),
                    format!("quota spent until {reset}"),
                );
            }
            // Spent, no reset known, but an inferred limit over fixed windows of a
            // known length: the next window starts one period after this one did.
            // While probes keep being refused, more and more windows wait for it
            // instead of probing for more room (up to QUOTA_PROBE_EVERY in a row).
            None if !self.quota_probing
                && self.quota_probe_skips < self.quota_probe_every
                && self.predicted_reset(now).is_some() =>
            {
                let next = self.predicted_reset(now).unwrap_or(now);
                self.quota_probe_skips += 1;
                self.quota_reset_at = Some(next);
                self.quota_reset_predicted = true;
                return hold(
                    HoldKind::Quota,
                    Some(next),
                    format!("quota spent until {next} (the window learned from 429s)"),
                );
            }
            // Spent, and no reset known (the limit was refilled after a reset): wait for
            // the answers in flight to say more, or, with none in flight, probe with one.
            None if in_flight > 0 => {
                return hold(
                    HoldKind::Quota,
                    None,
                    "quota spent; waiting for an answer to learn its reset".into(),
                );
            }
            None => {
                self.quota_probe_skips = 0;
                self.quota_probing = true;
                let room = if self.quota_inferred {
                    self.quota_probe_room.max(1)
                } else {
                    1
                };
                self.quota_tokens = Some(u64::from(room));
            }
        }
        Ok(())
    }

    /// Counts an admission against the quota. Returns whether it is the one request
    /// [`EndpointState::check`] lets go while probing a spent quota with no reset known.
    pub(super) fn count_quota(&mut self) -> bool {
        let quota_probe =
            self.quota_probing && self.quota_reset_at.is_none() && self.quota_tokens == Some(1);
        if let Some(t) = self.quota_tokens.as_mut() {
            *t = t.saturating_sub(1);
        }
        if self.quota_limit.is_some() {
            self.quota_sent = self.quota_sent.saturating_add(1);
        }
        quota_probe
    }

    /// Gives back what an admission that did not run took of the quota.
    pub(super) fn release_quota(&mut self) {
        if let (Some(t), Some(limit)) = (self.quota_tokens.as_mut(), self.quota_limit) {
            *t = (*t + 1).min(limit);
        }
        if self.quota_limit.is_some() {
            self.quota_sent = self.quota_sent.saturating_sub(1);
        }
    }

    /// What a finished attempt teaches the quota: a success counts in its window, a 429 that
    /// said when but reported no quota infers one, headers that report one tell it, and a spent
    /// token quota pauses the endpoint until its reset.
    pub(super) fn learn_quota(&mut self, cfg: &EndpointConfig, now: Timestamp, o: &Observed) {
        if o.class == ResultClass::Success {
            self.ok_in_window += 1;
            if self.quota_probing {
                // A probe found room: probe every window again; a round's worth of them, and
                // the rounds of an inferred quota's probes send one more.
                self.quota_probe_every = 0;
                if self.quota_inferred {
                    let most = self
                        .quota_limit
                        .map_or(1, |l| u32::try_from(l).unwrap_or(u32::MAX));
                    self.quota_probe_ok += 1;
                    if self.quota_probe_ok >= self.quota_probe_room.max(1) {
                        self.quota_probe_ok = 0;
                        self.quota_probe_room = self
                            .quota_probe_room
                            .max(1)
                            .saturating_add(1)
                            .min(most.max(1));
                    }
                }
            }
        }
        if let Some((wait, _)) = &o.server_wait {
            // A 429 from an API that reports no quota: what went through since its window began
            // is the best guess of its limit. From then on that many go per window, and when
            // they are spent, rounds of probes find out whether there is more room.
            if cfg.learn_from_headers
                && o.overload
                && o.quota.requests.is_none()
                && (self.quota_limit.is_none() || self.quota_inferred)
            {
                self.infer_quota(now.saturating_add(*wait));
            }
        }
        if cfg.learn_from_headers {
            let mut may_ask = false;
            if let Some(q) = o.quota.requests {
                self.read_quota(now, q, o.others_in_flight);
                may_ask = self.may_ask(now, &q);
                self.note_reset_may_round(may_ask);
                self.plan_rounded_reset(now, o);
            }
            // A spent request quota whose reset may be rounded holds until its question
            // (rounded_reset.rs) or its reset, not paused until the reset.
            let asking =
                |source: &str| may_ask && o.quota.requests.is_some_and(|q| q.source == source);
            if let Some((reset, source)) = o.quota.exhausted.filter(|(_, s)| !asking(s)) {
                self.pause(
                    now.saturating_add(reset),
                    format!("quota spent ({source} 0), resets in {}", Human(reset)),
                );
            }
        }
    }

    /// A 429 that said the server's window ends at `reset` and reported no quota.
    fn infer_quota(&mut self, reset: Timestamp) {
        self.quota_probe_room = (self.quota_probe_room / 2).max(1);
        self.quota_probe_ok = 0;
        // A window that began at a predicted reset and was refused before half its limit
        // went through most likely did not begin where predicted (what went through
        // were answers late from the window before). Refused later, it did, and what
        // went through is the limit, as below.
        let predicted = std::mem::take(&mut self.quota_window_predicted);
        if predicted && self.quota_limit.is_some_and(|l| self.ok_in_window * 2 < l) {
            // The server's windows are not what was learned. The limit stands (nothing
            // was counted in a window of the server's); probe again until two 429s teach
            // the windows anew.
            self.quota_period_ms = None;
            self.forget_windows();
            self.quota_probe_skips = 0;
            self.quota_probe_every = 0;
        } else {
            self.infer_limit(reset);
        }
        self.quota_inferred = true;
        self.quota_tokens = Some(0);
        self.quota_reset_at = Some(reset);
    }

    /// The limit the successes since the window began tell, and the windows the resets tell.
    fn infer_limit(&mut self, reset: Timestamp) {
        if self.quota_probing {
            // A probe refused: the limit holds; probe less often.
            let most = self.quota_period_ms.map_or(0, |p| {
                u32::try_from(QUOTA_PREDICTED_MS / p.max(1))
                    .unwrap_or(0)
                    .min(QUOTA_PROBE_EVERY)
            });
            self.quota_probe_every = (self.quota_probe_every * 2).clamp(1, most.max(1));
        }
        // Successes counted over more than one of the server's windows (probes that
        // trickled through several) say nothing about one window: they may only lower
        // the limit. Counted over one window, they are the limit.
        let span = self
            .ok_since
            .map(|since| reset.as_unix_millis() - since.as_unix_millis())
            .filter(|ms| *ms > 0);
        if let Some(span) = span {
            match self.quota_period_ms {
                // The same window, give or take the time answers take, or several.
                Some(p) if span >= p - p / 10 => {}
                _ => {
                    self.quota_period_ms = Some(span);
                    self.forget_windows();
                }
            }
        }
        self.learn_windows(reset);
        let one_window = match (span, self.quota_period_ms) {
            (Some(span), Some(period)) => span <= period + period / 2,
            _ => true,
        };
        let counted = self.ok_in_window.max(1);
        self.quota_limit = Some(match self.quota_limit {
            Some(limit) if self.quota_inferred && !one_window => limit.min(counted),
            // An inferred limit falls by half at most per window: a window that
            // counted few (little work, or answers that crossed its start) says
            // less than one that counted many.
            Some(limit) if self.quota_inferred => counted.max(limit / 2),
            _ => counted,
        });
    }

    /// Headers that report the quota: its limit, what remains (the cluster's: this node takes
    /// its part) and when it resets. What an answer reports remaining cannot reflect the
    /// requests the server had not seen yet: those in flight count as spent (whatever order the
    /// server took them in). The last answer of what this node sent, alone, comes after the
    /// server saw everything: what remains is the lowest count the answers since the last such
    /// reported (answers out of order said more).
    fn read_quota(&mut self, now: Timestamp, q: RequestQuota, others_in_flight: u32) {
        self.quota_limit = q.limit.or(self.quota_limit);
        self.quota_inferred = false;
        // What remains is the cluster's: this node takes its part.
        self.quota_cluster_remaining = Some(q.remaining);
        let tokens = self
            .share
            .part(q.remaining)
            .saturating_sub(u64::from(others_in_flight));
        let reset_at = q.reset_after.map(|d| now.saturating_add(d));
        let window_open = self.quota_reset_at.is_some_and(|r| now < r);
        self.quota_reset_predicted = false;
        if window_open {
            // Answers can arrive out of order: within a window the count only goes down,
            // so the lowest report wins, and the later reset.
            self.quota_tokens = Some(self.quota_tokens.map_or(tokens, |t| t.min(tokens)));
            self.quota_reset_at = self.quota_reset_at.max(reset_at);
            let lowest = self
                .quota_reported
                .map_or(q.remaining, |r| r.min(q.remaining));
            self.quota_reported = Some(lowest);
            if others_in_flight == 0 && self.share.is_whole() {
                self.quota_tokens = Some(lowest);
                self.quota_reported = None;
            }
        } else {
            self.quota_reported = (others_in_flight > 0).then_some(q.remaining);
            // The first answer of a window: of this node's requests, this one and those
            // still in flight are the ones known to fall in it, and, when this node saw
            // the window begin, those it sent since (some answered without headers).
            self.quota_tokens = Some(tokens);
            self.quota_reset_at = reset_at;
            let known = 1 + u64::from(others_in_flight);
            if std::mem::take(&mut self.quota_window_counted) {
                self.quota_sent = self.quota_sent.max(known);
            } else {
                self.quota_sent = known;
                self.quota_window_share = Some(self.share);
            }
        }
    }

    /// Whether the quota (or this node's part of it) is spent: it holds until its reset.
    pub(super) fn quota_spent(&self) -> bool {
        self.quota_tokens == Some(0) || self.quota_part_left() == Some(0)
    }

    /// Forgets a spent quota's window (a hand resume ended its hold): what remains is unknown
    /// again, and the next answer's headers say (its window's count starts from that answer).
    pub(super) fn forget_spent_quota(&mut self) {
        self.quota_window_counted = false;
        self.quota_tokens = None;
        self.quota_reset_at = None;
        self.quota_reset_predicted = false;
    }

    /// When the current inferred quota window ends, if its length is known and it has not ended
    /// yet: its start plus the server's window length, both learned from 429s.
    fn predicted_reset(&self, now: Timestamp) -> Option<Timestamp> {
        // Confirmed: two server-given resets came a whole number of windows apart.
        if !(self.quota_inferred && self.quota_windows.is_some()) {
            return None;
        }
        let len = self.window_length()?;
        if len > QUOTA_PREDICTED_MS as f64 {
            return None;
        }
        // The boundary after the one the current window began at, counted from the anchor so
        // that the predictions do not drift.
        let anchor = self.quota_anchor_ms? as f64;
        let start = self.ok_since?.as_unix_millis() as f64;
        let boundary = anchor + (((start - anchor) / len).round() + 1.0) * len;
        let next = Timestamp::from_unix_millis(boundary.round() as i64 + self.quota_slack_ms());
        (next > now).then_some(next)
    }

    /// The server's window length, as measured between its resets.
    pub(super) fn window_length(&self) -> Option<f64> {
        self.quota_windows
            .map(|(ms, windows)| ms as f64 / f64::from(windows.max(1)))
            .or(self.quota_period_ms.map(|p| p as f64))
    }

    /// Takes in a reset the server gave: a whole number of windows after the anchor (within a
    /// tenth of one), it measures the windows more finely and confirms them; otherwise it
    /// becomes the anchor.
    fn learn_windows(&mut self, reset: Timestamp) {
        let r = reset.as_unix_millis();
        let (Some(anchor), Some(len)) = (self.quota_anchor_ms, self.window_length()) else {
            self.quota_anchor_ms = Some(r);
            return;
        };
        let d = (r - anchor) as f64;
        let windows = (d / len).round();
        if windows >= 1.0 && (d - windows * len).abs() <= len / 10.0 {
            self.quota_windows = Some((r - anchor, windows as u32));
        } else {
            self.forget_windows();
            self.quota_anchor_ms = Some(r);
        }
    }

    fn forget_windows(&mut self) {
        self.quota_anchor_ms = None;
        self.quota_windows = None;
    }

    /// How long after a predicted window boundary to wait: a little after the reset rather than
    /// before it, since the period is the shortest gap seen and the server's clock and ours
    /// differ by the time an answer takes.
    fn quota_slack_ms(&self) -> i64 {
        self.window_length()
            .map_or(0, |len| (len / 16.0).round() as i64)
    }

    /// This node's part of a quota `limit` learned from headers, for the current window: the
    /// smaller of its part now and its part when the window began. A node that joins makes the
    /// parts smaller at once; one that leaves gives its part to the others only from the next
    /// window, since what it sent of it may still reach the API.
    pub(super) fn quota_part(&self, limit: u64) -> u64 {
        let now = self.share.part(limit);
        self.quota_window_share
            .map_or(now, |began| now.min(began.part(limit)))
    }

    /// What this node may still send of its part of a quota learned from headers, in the
    /// current window; `None` when no part applies (alone, no window known, or an inferred
    /// quota, which is this node's own already).
    pub(super) fn quota_part_left(&self) -> Option<u64> {
        let limit = self.quota_limit?;
        let alone = self.share.is_whole() && self.quota_window_share.is_none_or(Share::is_whole);
        if alone
            || self.quota_inferred
            || self.quota_reset_at.is_none()
            || self.quota_tokens.is_none()
        {
            return None;
        }
        Some(self.quota_part(limit).saturating_sub(self.quota_sent))
    }
}
