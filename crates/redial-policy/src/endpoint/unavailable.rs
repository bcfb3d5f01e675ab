//! Bare 503s from a limiter: nginx `limit_req` refuses with 503, not 429, unless told otherwise,
//! and says nothing else (no `Retry-After`, no quota). A run of them while the endpoint answers
//! others successes is a rate limit, not an outage: read as failures, they opened the breaker,
//! made first attempts suspect and spent attempts on a healthy endpoint (issue 54: 1,000 jobs
//! against 50/s still not done after 120 s, 1,908 refused, where bare 429s took 20 s).
//!
//! A bare 503 is a refusal (taught to the pace as a bare 429 is, its job deferred at the pace
//! without spending an attempt, nothing told to the breaker) when the endpoint is alive (a
//! success within [`ALIVE`]) and its 503s follow its pace, as a limiter's do:
//! - **Onset.** Sent too much at once, a limiter refuses most of it: bare 503s making up half or
//!   more ([`LIMITER_ONSET`]) of the last second's answers (of [`ONSET_ANSWERS`] at least, with
//!   [`ONSET_SUCCESSES`] successes among them) start a trial, and the pace is set from what
//!   went through.
//! - **Trial** ([`TRIAL`], and [`TRIAL_ANSWERS`] answers to what was sent since; one that
//!   counts too few within [`TRIAL_LONGEST`] finds no limiter). Sent to at that pace, a limiter
//!   refuses far less: half the share before the trial at most (a limiter of a few a second,
//!   paced a little above what it sustains, still refuses one in three or so). An endpoint
//!   failing a share of its requests at random (a bad node behind a balancer) refuses as much
//!   at any pace, and an outage beginning refuses everything: a trial ends, finding no limiter,
//!   at once when [`TRIAL_ANSWERS`] answers refused nearly as much as before ([`NOT_FALLING`]),
//!   or when the first [`OUTAGE_REFUSALS`] answers to what was sent since are bare 503s and it
//!   has run [`OUTAGE_AFTER`]. (A trial is not cut short by a few clean successes: the retries
//!   of an endpoint failing first attempts at random succeed, and a trial of them found a
//!   limiter that held a healthy endpoint at 4 requests a second.) Meanwhile the pace
//!   is not cut below a quarter of what went through at the onset ([`TRIAL_FLOOR`]), nor grows
//!   past it, and pauses one interval a cut, so that a trial the endpoint fails costs it
//!   little, and one it passes is not hidden by a pace growing past the limiter's rate (one
//!   that allows no burst refuses half of what goes a little above it).
//! - **Limiter.** Its bare 503s are refusals while its pace holds (a pace is forgotten 10 s
//!   after the last refusal; the next onset starts a new trial) and while its runs of refusals
//!   (503s in a row count once) are fewer than [`LIMITER_SHARE`] of its successes and runs
//!   (from [`SETTLE`] after it was found and outside the pace's slow start, older answers
//!   weighing less every [`SHARE_WINDOW`], once [`LIMITER_ANSWERS`] were counted). A limiter
//!   refuses in runs when the pace grows past it (one that allows no burst half of what goes
//!   until the pace is cut back), then lets runs of requests through; an endpoint failing at
//!   random, half its answers or more, breaks its successes up every two or three answers and
//!   cuts the pace down and down: a verdict once the pace is below a quarter of what it was
//!   when the limiter was found (a limiter's refusals do not call for that; one whose rate
//!   halves, half).
//! - **Not a limiter** (the trial or the share says so): its bare 503s are failures, as before,
//!   for [`NOT_A_LIMITER_FOR`], and a pace they taught is forgotten.
//!
//! An endpoint that stops answering successes is down whatever was said: its 503s are failures.
//!
//! Never saved: a restarted node tries again. Does not own the pace (`pace.rs`) nor what a
//! refusal does to its job (`Finished::apply`, `Decision::refused_at_pace`).

use super::state::EndpointState;
use crate::time::Timestamp;
use std::time::Duration;

/// A success this recent: the endpoint answers others, so a bare 503 may be a limiter's.
pub const ALIVE: Duration = Duration::from_secs(2);
/// Bare 503s making up this share of the last second's answers start a trial.
const LIMITER_ONSET: f64 = 0.5;
/// Answers in the last second needed for an onset: with fewer, what went through (the trial's
/// pace) is counted over a few milliseconds of the endpoint's first contact, and an endpoint
/// failing at random would be tried at a few requests a second.
const ONSET_ANSWERS: u32 = 30;
/// Answers needed before a limiter's share of refusals says it is not one.
const LIMITER_ANSWERS: u32 = 30;
/// A trial lasts at least this long ...
const TRIAL: Duration = Duration::from_secs(1);
/// ... and counts at least this many answers to what was sent since it began.
const TRIAL_ANSWERS: u32 = 10;
/// A limiter lets some through: an onset needs this many successes in its second (one: a
/// limiter of a few a second that allows no burst lets one through among many refusals) ...
const ONSET_SUCCESSES: u32 = 1;
/// ... and a trial ends at once, finding no limiter, when this many bare 503s answered what was
/// sent since it began and nothing got through (an outage beginning).
const OUTAGE_REFUSALS: u32 = 3;
/// During a trial the pace is not cut below this share of what went through at the onset (nor
/// grows past it): low enough to fall below a limiter's rate when its burst made most of that
/// second (5/s with a burst of 10 let 14 through; nginx `limit_req` without `burst` refuses
/// half of what is sent a little above its rate), high enough that an endpoint failing at
/// random is not paced down to nothing before the verdict.
const TRIAL_FLOOR: f64 = 0.25;
/// A trial that counted enough answers and refused at least this share of what it refused
/// before it ends at once, finding no limiter (paced at or below what went through, a limiter
/// refuses far less than before; an endpoint failing at random as much).
const NOT_FALLING: f64 = 0.8;
/// The [`OUTAGE_REFUSALS`] are an outage's only once the trial has run this long: a limiter
/// whose window is spent refuses everything until it ends (a second, and a sliding counter's
/// last window weighs on a while after).
const OUTAGE_AFTER: Duration = Duration::from_secs(2);
/// A trial that counted too few answers after this long ends without a verdict.
const TRIAL_LONGEST: Duration = Duration::from_secs(10);
/// A limiter whose runs of refusals are this share of its successes and runs or more, once its
/// pace fell below a quarter, is not one: at its pace it refuses a run every few seconds (at
/// 5/s, one in ten answers or fewer); an endpoint failing half its requests at random, one in
/// three.
const LIMITER_SHARE: f64 = 0.2;
/// A limiter's answers are counted from this long after it was found ...
const SETTLE: Duration = Duration::from_secs(1);
/// ... and weigh fully this long.
const SHARE_WINDOW: Duration = Duration::from_secs(10);
/// An endpoint whose 503s are found not to be a limiter's is not tried again for this long.
const NOT_A_LIMITER_FOR: Duration = Duration::from_secs(60);
/// Answers are counted in buckets of this many ms over the last second.
const BUCKET_MS: i64 = 100;
const BUCKETS: usize = 10;

/// What is known of an endpoint's bare 503s.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) enum Verdict {
    #[default]
    Unknown,
    Trial(Trial),
    Limiter(Limiter),
    /// Not a limiter's (failures) until then.
    NotLimiter(Timestamp),
}

/// A trial of whether an endpoint's bare 503s follow its pace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Trial {
    since: Timestamp,
    /// Whether the trial set the pace (none was learned before it).
    set_pace: bool,
    /// The share refused in the second before it.
    before: f64,
    /// Successes and bare 503s answering what was sent since.
    during: (u32, u32),
}

/// A limiter found, and what it answered since.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Limiter {
    since: Timestamp,
    set_pace: bool,
    /// Successes, and runs of bare 503s (503s in a row count once), since [`SETTLE`] after
    /// it was found, halved every [`SHARE_WINDOW`]. A limiter refuses in runs, when the pace
    /// has grown past it, and then lets a run of requests through at the cut pace; an endpoint
    /// failing at random breaks its successes up every few answers.
    seen: (u32, u32),
    /// Whether the last answer counted was a bare 503.
    refusing: bool,
    /// The pace when it was found (requests a second).
    pace: f64,
    halved: Timestamp,
}

fn share((ok, refused): (u32, u32)) -> f64 {
    f64::from(refused) / f64::from((ok + refused).max(1))
}

impl EndpointState {
    /// Counts an answer to a request sent at `sent` for the shares refused, and ends a trial
    /// that counted enough.
    pub(super) fn count_unavailable(
        &mut self,
        now: Timestamp,
        sent: Option<Timestamp>,
        success: bool,
        bare_503: bool,
    ) {
        if !success && !bare_503 {
            return;
        }
        let ms = now.as_unix_millis();
        let bucket = ms - ms.rem_euclid(BUCKET_MS);
        match self.recent_answers.back_mut() {
            Some((start, ok, refused)) if *start == bucket => {
                *ok += u32::from(success);
                *refused += u32::from(bare_503);
            }
            _ => self
                .recent_answers
                .push_back((bucket, u32::from(success), u32::from(bare_503))),
        }
        while self.recent_answers.len() > BUCKETS {
            self.recent_answers.pop_front();
        }
        let (ok, refused) = (u32::from(success), u32::from(bare_503));
        match &mut self.unavailable {
            Verdict::Trial(t) => {
                // Sent after the trial began (not in the same millisecond, as on a manual
                // clock all of a burst is).
                if sent.is_some_and(|s| s > t.since) {
                    t.during = (t.during.0 + ok, t.during.1 + refused);
                }
                let t = *t;
                let ran = now.saturating_since(t.since);
                if t.during.0 == 0 && t.during.1 >= OUTAGE_REFUSALS && ran >= OUTAGE_AFTER {
                    // Nothing sent since got through: an outage beginning, not a limiter.
                    self.pace.set_trial(None);
                    self.unavailable = self.not_a_limiter(now, t.set_pace);
                } else if t.during.0 + t.during.1 >= TRIAL_ANSWERS
                    && share(t.during) >= t.before * NOT_FALLING
                {
                    // Refused as much at the trial's pace as before it, however soon: an
                    // endpoint failing at random, not a limiter.
                    self.pace.set_trial(None);
                    self.unavailable = self.not_a_limiter(now, t.set_pace);
                } else if ran >= TRIAL && t.during.0 + t.during.1 >= TRIAL_ANSWERS {
                    self.pace.set_trial(None);
                    self.unavailable = if share(t.during) <= t.before / 2.0 {
                        Verdict::Limiter(Limiter {
                            since: now,
                            set_pace: t.set_pace,
                            seen: (0, 0),
                            refusing: false,
                            pace: self.pace.rate().unwrap_or(0.0),
                            halved: now,
                        })
                    } else {
                        self.not_a_limiter(now, t.set_pace)
                    };
                } else if ran >= TRIAL_LONGEST {
                    // Too few answers to tell: too slow a limiter to matter, or not one.
                    self.pace.set_trial(None);
                    self.unavailable = self.not_a_limiter(now, t.set_pace);
                }
            }
            // A pace in slow start overshoots on purpose: what it has refused says nothing
            // of whether this is a limiter.
            Verdict::Limiter(l)
                if now.saturating_since(l.since) >= SETTLE && !self.pace.in_slow_start() =>
            {
                if now.saturating_since(l.halved) >= SHARE_WINDOW {
                    l.seen = (l.seen.0 / 2, l.seen.1 / 2);
                    l.halved = now;
                }
                l.seen = (
                    l.seen.0 + ok,
                    l.seen.1 + u32::from(refused == 1 && !l.refusing),
                );
                if ok + refused > 0 {
                    l.refusing = refused == 1;
                }
            }
            _ => {}
        }
    }

    /// Whether the endpoint answers others: a success within [`ALIVE`].
    pub(super) fn alive(&self, now: Timestamp) -> bool {
        self.last_success
            .is_some_and(|ok| now.saturating_since(ok) <= ALIVE)
    }

    /// Not a limiter: failures for a while, and the pace the 503s taught forgotten.
    fn not_a_limiter(&mut self, now: Timestamp, set_pace: bool) -> Verdict {
        if set_pace {
            self.pace = Default::default();
        }
        Verdict::NotLimiter(now.saturating_add(NOT_A_LIMITER_FOR))
    }

    /// Whether a bare 503 at `now` (counted already) is a limiter's refusal rather than a
    /// failure (see the module docs).
    pub(super) fn unavailable_is_refusal(&mut self, now: Timestamp) -> bool {
        let alive = self.alive(now);
        match self.unavailable {
            Verdict::NotLimiter(until) if now < until => return false,
            Verdict::NotLimiter(_) => self.unavailable = Verdict::Unknown,
            Verdict::Limiter(l) if self.pace.rate().is_some() => {
                let fell = self.pace.rate().is_some_and(|r| r < l.pace / 4.0);
                if l.seen.0 + l.seen.1 >= LIMITER_ANSWERS && share(l.seen) >= LIMITER_SHARE && fell
                {
                    self.unavailable = self.not_a_limiter(now, l.set_pace);
                    return false;
                }
            }
            Verdict::Trial(_) if self.pace.rate().is_some() => {}
            Verdict::Limiter(_) | Verdict::Trial(_) => {
                self.pace.set_trial(None);
                self.unavailable = Verdict::Unknown;
            }
            Verdict::Unknown => {}
        }
        if !alive {
            return false;
        }
        if self.unavailable == Verdict::Unknown {
            let since = now.as_unix_millis() - 1_000;
            let last = self
                .recent_answers
                .iter()
                .filter(|(start, _, _)| *start + BUCKET_MS > since)
                .fold((0, 0), |(o, r), (_, ok, refused)| (o + ok, r + refused));
            if last.0 + last.1 < ONSET_ANSWERS
                || last.0 < ONSET_SUCCESSES
                || share(last) < LIMITER_ONSET
            {
                return false;
            }
            let went = self.pace.went_through_last_second(now);
            self.pace
                .set_trial(Some((went * TRIAL_FLOOR, went.max(1.0))));
            self.unavailable = Verdict::Trial(Trial {
                since: now,
                set_pace: self.pace.rate().is_none(),
                before: share(last),
                during: (0, 0),
            });
        }
        true
    }
}
