//! A request rate learned from refusals that say nothing: 429s with no wait and no quota, as
//! leaky buckets in front of many APIs answer (nginx `limit_req`, HAProxy, Envoy, framework
//! limiters without their headers).
//!
//! The shape is TCP's (RFC 5681) on a rate instead of a window: the first bare refusal sets the
//! rate to what went through in the second before it, which then grows fast (doubling about
//! every quarter second of successes) until the next refusal; from then on each refusal cuts it
//! by a tenth, but not below nine tenths of what went through in the second before (a fixed
//! window spent before its end refuses everything until it ends: that says nothing new about the
//! rate), and each success adds a twentieth of a request per second (about 5% a second while
//! the endpoint answers). One refusal cuts once: the refusals of requests sent before the cut
//! were answered by it. The rate grows only while it is what limits the endpoint: not past twice
//! what went through lately, in the last second or its last three tenths, whichever went faster
//! (an engine that cannot send as fast, or has fewer jobs, does not raise it without bound;
//! RFC 7661's rule for an application-limited sender; the tenths let a slow start double more
//! than once a second). Requests go at the rate (GCRA), at most [`BURST`] of it at once (one at
//! low rates; a few at high rates, so that one lease can take more than one job); once a request
//! that went in such a burst is refused, one at a time, and that refusal does not cut the rate
//! (the limiter tolerates no burst, as nginx `limit_req` without `burst`: refused bursts held 500
//! a second to about 90 in issue 54's matrix). So a cut is also a short pause for
//! every job of the endpoint: one interval, doubled for each refusal in a row with no success
//! between (up to [`MAX_PAUSE`]), which finds the end of a spent window in a few requests. The
//! rate is never below [`FLOOR`] and is forgotten once the endpoint has refused nothing for
//! [`FORGET_AFTER`].
//!
//! With several nodes in front of one limiter, each learns its own part, and a bare refusal
//! another node met is a signal to every node (as ECN is to TCP senders sharing a link): a node
//! that sends to the endpoint sets its rate at the first such signal and cuts it at the next,
//! once per refusal of a request sent after its latest cut (one sent before was answered by
//! it). So the nodes slow down together, not one after the other as each meets its own
//! refusal, and a rate stays learned while any node is refused.
//!
//! Owns that rate and its clock of admissions. Does not own the other limits (a configured rate
//! applies as well: both hold), nor which answers are bare refusals (the caller says).

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// The lowest rate learned, in requests per second: while some requests succeed, at least one
/// goes every two seconds.
pub const FLOOR: f64 = 0.5;
/// A learned rate is forgotten after this long without a refusal.
pub const FORGET_AFTER: Duration = Duration::from_secs(10);
/// Each cut keeps this much of the rate.
const CUT: f64 = 0.9;
/// The longest pause refusals in a row lead to.
pub const MAX_PAUSE: Duration = Duration::from_secs(1);
/// At most this much of the rate goes at once (at least one request).
pub const BURST: Duration = Duration::from_millis(20);
/// Until the first cut after the first estimate, each success adds this many requests per
/// second: the rate doubles about every `ln 2 / SLOW_START_GAIN` seconds.
const SLOW_START_GAIN: f64 = 3.0;
/// After it, each success adds this much: about 5% a second.
const GAIN: f64 = 0.05;
/// Successes are counted in buckets of this many milliseconds, over the last second.
const BUCKET_MS: i64 = 100;
const BUCKETS: usize = 10;

/// The learned rate of one endpoint on this node (each node's successes are its part of the
/// limiter's; the other nodes' bare refusals reach it as signals).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pace {
    /// Requests per second; `None` until a bare refusal, and again once forgotten.
    rate: Option<f64>,
    /// Growing fast, until the first cut after the first estimate.
    slow_start: bool,
    /// Counts cuts: a refusal of a request admitted before the latest cut does not cut again.
    epoch: u32,
    /// The latest refusal, from which [`FORGET_AFTER`] counts.
    last_refusal: Option<Timestamp>,
    /// When the latest cut (or first estimate) was made: another node's refusal of a request
    /// sent before it does not cut again.
    cut_at: Option<Timestamp>,
    /// When the latest request refused bare (here or on another node) was sent: what the other
    /// nodes are told.
    refused_sent: Option<Timestamp>,
    /// Refusals that cut, in a row with no success between.
    in_a_row: u32,
    /// GCRA theoretical arrival time, in nanoseconds since the epoch.
    #[serde(skip)]
    tat_ns: Option<i128>,
    /// Successes in the last second, by bucket start (ms): the first estimate.
    #[serde(skip)]
    recent_ok: VecDeque<(i64, u32)>,
    /// While set, cuts keep the rate at this or more and pause one interval only: the refusals
    /// are on trial (bare 503s, `unavailable.rs`), and an endpoint failing at random must not
    /// be paced down to nothing before the trial ends.
    #[serde(skip)]
    floor: Option<f64>,
    /// While on trial, the rate does not grow past this.
    #[serde(skip)]
    ceiling: Option<f64>,
    /// The latest admissions (ns since the epoch), to tell whether a refused request went in
    /// a burst.
    #[serde(skip)]
    admissions: VecDeque<i128>,
    /// A request that went in a burst was refused: the limiter tolerates none (nginx
    /// `limit_req` without `burst`), so requests go one at a time, an interval apart.
    #[serde(skip)]
    one_at_a_time: bool,
}

/// Admissions remembered to tell a burst.
const ADMISSIONS: usize = 64;

impl Pace {
    /// The learned rate, requests per second, if one holds at `now`.
    pub fn rate(&self) -> Option<f64> {
        self.rate
    }

    /// Whether the rate is growing fast, until its first cut after the first estimate.
    pub fn in_slow_start(&self) -> bool {
        self.rate.is_some() && self.slow_start
    }

    /// Forgets the rate once the endpoint refused nothing for [`FORGET_AFTER`].
    pub fn forget_if_quiet(&mut self, now: Timestamp) {
        if self
            .last_refusal
            .is_some_and(|at| now.saturating_since(at) >= FORGET_AFTER)
        {
            self.rate = None;
            self.slow_start = false;
            self.one_at_a_time = false;
            self.admissions.clear();
            self.tat_ns = None;
            self.last_refusal = None;
            self.refused_sent = None;
        }
    }

    /// Until when the other nodes should keep a learned pace for this endpoint: the send
    /// instant of the latest request refused bare, plus [`FORGET_AFTER`]. `None` without one.
    pub fn shared_until(&self) -> Option<Timestamp> {
        self.rate?;
        Some(self.refused_sent?.saturating_add(FORGET_AFTER))
    }

    /// When the next request may go at the learned rate, if one holds (for wake-ups; may be
    /// past).
    pub fn next(&self) -> Option<Timestamp> {
        let (tat, interval) = (self.tat_ns?, self.interval_ns()?);
        let earliest = tat - interval * (self.burst() - 1);
        Some(Timestamp::from_unix_millis(
            i64::try_from((earliest + 999_999).div_euclid(1_000_000)).unwrap_or(i64::MAX),
        ))
    }

    /// Requests that may go at once: [`BURST`] of the rate, at least one; one once a burst was
    /// refused.
    fn burst(&self) -> i128 {
        if self.one_at_a_time {
            return 1;
        }
        self.rate
            .map_or(1, |r| ((r * BURST.as_secs_f64()).floor() as i128).max(1))
    }

    /// When the next request may go, if not now.
    pub fn hold(&mut self, now: Timestamp) -> Option<Timestamp> {
        self.forget_if_quiet(now);
        self.next().filter(|t| *t > now)
    }

    /// Counts an admission; returns its epoch (for [`Pace::refused`]).
    pub fn admitted(&mut self, now: Timestamp) -> u32 {
        if let Some(interval) = self.interval_ns() {
            self.admissions.push_back(ns_of(now));
            while self.admissions.len() > ADMISSIONS {
                self.admissions.pop_front();
            }
            let from = self.tat_ns.unwrap_or(i128::MIN).max(ns_of(now));
            self.tat_ns = Some(from + interval);
        }
        self.epoch
    }

    /// An admission given back unsent: its place at the rate is free again (never before now).
    pub fn released(&mut self, now: Timestamp) {
        if let (Some(interval), Some(tat)) = (self.interval_ns(), self.tat_ns) {
            self.tat_ns = Some((tat - interval).max(ns_of(now)));
        }
    }

    /// A success: counted for the first estimate, and the rate grows.
    pub fn succeeded(&mut self, now: Timestamp) {
        let ms = now.as_unix_millis();
        let bucket = ms - ms.rem_euclid(BUCKET_MS);
        match self.recent_ok.back_mut() {
            Some((start, n)) if *start == bucket => *n += 1,
            _ => self.recent_ok.push_back((bucket, 1)),
        }
        while self.recent_ok.len() > BUCKETS {
            self.recent_ok.pop_front();
        }
        self.in_a_row = 0;
        // What went through lately, per second: the last second's, or the last few tenths'
        // when the rate grew within it (so that a slow start is not held to doubling a second).
        let lately = self
            .went_through_last_second(now)
            .max(self.went_through_since(now, 300) / 0.3);
        // On trial (a floor is set) the rate does not grow past what went through at the
        // onset: the trial asks whether refusals fall as the rate comes down to the limiter's,
        // and growth past it would hide that.
        let limit = (2.0 * lately).min(self.ceiling.unwrap_or(f64::INFINITY));
        let gain = if self.slow_start {
            SLOW_START_GAIN
        } else {
            GAIN
        };
        if let Some(rate) = self.rate.as_mut() {
            if *rate < limit {
                *rate = (*rate + gain).min(limit);
            }
        }
    }

    /// A bare refusal of a request admitted in `epoch` and sent at `sent`: the first sets the
    /// rate, a later one cuts it (once per epoch). Either way the next request waits one
    /// interval, more for refusals in a row.
    pub fn refused(&mut self, now: Timestamp, epoch: u32, sent: Timestamp) {
        self.forget_if_quiet(now);
        self.last_refusal = Some(now);
        self.refused_sent = Some(self.refused_sent.map_or(sent, |s| s.max(sent)));
        if self.rate.is_some() && epoch != self.epoch {
            return;
        }
        if !self.one_at_a_time && self.rate.is_some() && self.went_in_a_burst(sent) {
            // The limiter refused the burst, not the rate: requests go one at a time from now
            // on, and the rate stays (a slow start goes on).
            self.one_at_a_time = true;
            self.epoch = self.epoch.wrapping_add(1);
            let next = ns_of(now) + self.interval_ns().unwrap_or(0);
            self.tat_ns = Some(self.tat_ns.map_or(next, |t| t.max(next)));
            return;
        }
        self.in_a_row = self.in_a_row.saturating_add(1);
        self.cut(now);
    }

    /// Whether a request sent at `sent` went with another within half an interval before it.
    fn went_in_a_burst(&self, sent: Timestamp) -> bool {
        let Some(interval) = self.interval_ns() else {
            return false;
        };
        let at = ns_of(sent);
        self.admissions
            .iter()
            .filter(|a| **a <= at && at - **a < interval / 2)
            .count()
            >= 2
    }

    /// Another node's bare refusal, told as [`Pace::shared_until`] says it.
    pub fn refused_elsewhere_until(&mut self, now: Timestamp, until: Timestamp) -> bool {
        let forget = i64::try_from(FORGET_AFTER.as_millis()).unwrap_or(i64::MAX);
        let sent = Timestamp::from_unix_millis(until.as_unix_millis().saturating_sub(forget));
        self.refused_elsewhere(now, sent)
    }

    /// Another node's bare refusal of a request sent at `sent`: keeps the rate learned as long, sets one if this node sends to the
    /// endpoint (it had successes in the last second), and cuts it once if the request was sent
    /// after this node's latest cut. Returns whether the rate changed.
    pub fn refused_elsewhere(&mut self, now: Timestamp, sent: Timestamp) -> bool {
        self.forget_if_quiet(now);
        if now.saturating_since(sent) >= FORGET_AFTER {
            return false;
        }
        if self.refused_sent.is_some_and(|s| s >= sent) {
            return false;
        }
        self.refused_sent = Some(sent);
        self.last_refusal = Some(self.last_refusal.map_or(sent, |t| t.max(sent)));
        let cuts = match self.rate {
            None => self.went_through_last_second(now) > 0.0,
            Some(_) => self.cut_at.is_none_or(|c| sent > c),
        };
        if cuts {
            self.cut(now);
        }
        cuts
    }

    /// Keeps the rate between `floor` and `ceiling` (growth stops there), cuts pausing one
    /// interval only, until set to `None`.
    pub fn set_trial(&mut self, trial: Option<(f64, f64)>) {
        self.floor = trial.map(|(floor, _)| floor);
        self.ceiling = trial.map(|(_, ceiling)| ceiling);
    }

    /// Sets the rate (the first time) or cuts it, and holds the next request for a pause.
    fn cut(&mut self, now: Timestamp) {
        let rate = match self.rate {
            None => {
                self.slow_start = true;
                self.went_through_last_second(now)
            }
            Some(rate) => {
                self.slow_start = false;
                (rate * CUT)
                    .max(self.went_through_last_second(now) * CUT)
                    .min(rate)
            }
        };
        let rate = rate.max(FLOOR).max(self.floor.unwrap_or(0.0));
        self.rate = Some(rate);
        self.epoch = self.epoch.wrapping_add(1);
        self.cut_at = Some(now);
        let interval = self.interval_ns().unwrap_or(0);
        let doubled = if self.floor.is_some() {
            0
        } else {
            self.in_a_row.saturating_sub(1).min(20)
        };
        let pause = (interval << doubled)
            .min(i128::try_from(MAX_PAUSE.as_nanos()).unwrap_or(i128::MAX))
            .max(interval);
        // The next request goes after the pause, whatever burst the rate allows.
        let next = ns_of(now) + pause + interval * (self.burst() - 1);
        self.tat_ns = Some(self.tat_ns.map_or(next, |t| t.max(next)));
    }

    /// Successes in the second before `now`.
    pub(super) fn went_through_last_second(&self, now: Timestamp) -> f64 {
        self.went_through_since(now, 1_000)
    }

    /// Successes in the `ms` before `now`, by whole buckets.
    fn went_through_since(&self, now: Timestamp, ms: i64) -> f64 {
        let since = now.as_unix_millis() - ms;
        let n: u32 = self
            .recent_ok
            .iter()
            .filter(|(start, _)| *start + BUCKET_MS > since)
            .map(|(_, n)| n)
            .sum();
        f64::from(n)
    }

    fn interval_ns(&self) -> Option<i128> {
        self.rate.map(|r| (1e9 / r.max(FLOOR)).ceil() as i128)
    }
}

fn ns_of(t: Timestamp) -> i128 {
    i128::from(t.as_unix_millis()) * 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(1_800_000_000_000 + ms)
    }

    #[test]
    fn a_refused_burst_sends_one_at_a_time_and_keeps_the_rate() {
        // A limiter that tolerates no burst (nginx `limit_req` without `burst`) refused the
        // second of two requests sent at once at 500 a second: the rate stays, and requests
        // go one at a time, an interval apart.
        let mut p = Pace::default();
        for i in 0..500 {
            p.succeeded(at(i * 2));
        }
        p.refused(at(1_000), 0, at(1_000));
        let rate = p.rate().expect("a rate");
        let t = at(1_010);
        assert_eq!(p.hold(t), None);
        let epoch = p.admitted(t);
        assert_eq!(p.hold(t), None, "a burst of the rate");
        p.admitted(t);
        p.refused(at(1_011), epoch, t);
        assert_eq!(p.rate(), Some(rate), "not cut");
        let next = p.hold(at(1_011)).expect("one interval");
        p.admitted(next);
        assert!(p.hold(next).is_some(), "one at a time");
    }

    #[test]
    fn the_first_refusal_sets_the_rate_to_what_went_through_in_the_second_before() {
        let mut p = Pace::default();
        for i in 0..30 {
            p.succeeded(at(500 + i));
        }
        assert_eq!(p.hold(at(600)), None, "no rate, no hold");
        p.refused(at(600), 0, at(600));
        assert_eq!(p.rate(), Some(30.0));
        // One interval (1/30 s) before the next request.
        assert_eq!(p.hold(at(600)), Some(at(634)));
        assert_eq!(p.hold(at(634)), None);
    }

    #[test]
    fn one_refusal_cuts_once_and_the_rate_never_falls_below_the_floor() {
        let mut p = Pace::default();
        p.refused(at(0), 0, at(0));
        assert_eq!(p.rate(), Some(FLOOR), "nothing went through: the floor");
        let e = p.admitted(at(5_000));
        p.refused(at(5_000), e, at(5_000));
        assert_eq!(p.rate(), Some(FLOOR));
        let mut p = Pace::default();
        for _ in 0..100 {
            p.succeeded(at(0));
        }
        p.refused(at(10), 0, at(10));
        let before = p.admitted(at(10));
        p.refused(at(20), before, at(20));
        assert_eq!(p.rate(), Some(90.0), "cut by a tenth");
        p.refused(at(21), before, at(21));
        assert_eq!(p.rate(), Some(90.0), "the same epoch: no second cut");
    }

    #[test]
    fn a_rate_is_forgotten_after_a_quiet_while() {
        let mut p = Pace::default();
        p.succeeded(at(0));
        p.refused(at(0), 0, at(0));
        assert!(p.rate().is_some());
        assert!(p.hold(at(9_999)).is_none());
        assert!(p.rate().is_some());
        p.hold(at(10_000));
        assert_eq!(p.rate(), None);
    }

    #[test]
    fn another_nodes_refusal_sets_the_rate_of_a_node_that_sends_and_cuts_once_per_cut() {
        let mut idle = Pace::default();
        assert!(
            !idle.refused_elsewhere(at(0), at(0)),
            "sends nothing: no rate"
        );
        assert_eq!(idle.rate(), None);
        let mut p = Pace::default();
        for _ in 0..40 {
            p.succeeded(at(0));
        }
        assert!(p.refused_elsewhere(at(10), at(5)));
        assert_eq!(
            p.rate(),
            Some(40.0),
            "what went through here in the last second"
        );
        assert_eq!(p.hold(at(10)), Some(at(35)), "one interval before the next");
        assert!(!p.refused_elsewhere(at(20), at(8)), "sent before the cut");
        assert!(!p.refused_elsewhere(at(20), at(5)), "already told");
        assert!(p.refused_elsewhere(at(30), at(20)), "sent after the cut");
        assert_eq!(p.rate(), Some(36.0));
        assert_eq!(p.shared_until(), Some(at(10_020)));
        // Kept while any node is refused, forgotten when none is.
        assert!(p.refused_elsewhere(at(9_000), at(9_000)));
        p.hold(at(18_000));
        assert!(p.rate().is_some());
        assert!(
            !p.refused_elsewhere(at(20_000), at(9_500)),
            "too old to matter"
        );
        p.hold(at(19_000));
        assert_eq!(p.rate(), None);
    }
}
