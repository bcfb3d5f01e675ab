//! The state of one endpoint and the two operations on it: admit an attempt, record its result.
//!
//! One file, over 800 lines, on purpose: the mechanisms (pause, learned quota, rate, slow start,
//! concurrency, retry budget, suspect first attempts, breaker) all read and change the one
//! `EndpointState` in `admit` and `record`, and their order there is the behaviour; split by
//! mechanism, that order would be spread over files.

use super::config::{EndpointConfig, WhenExhausted};
use super::pace::Pace;
use super::share::Share;
use crate::duration::Human;
use crate::quota::Quota;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// Everything the limits remember about an endpoint. Serialisable, so it can be persisted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EndpointState {
    /// No request before this instant: a server-given wait, or a spent quota's reset.
    pub paused_until: Option<Timestamp>,
    pub pause_reason: Option<String>,
    pub breaker: BreakerState,
    /// The last transitions, newest last, at most `HISTORY`.
    pub breaker_history: VecDeque<BreakerEvent>,
    /// Breaker window. A window saved in an older form is read as empty.
    #[serde(deserialize_with = "or_empty")]
    window: VecDeque<Bucket>,
    /// Retry budget window.
    #[serde(deserialize_with = "or_empty")]
    budget: VecDeque<Bucket>,
    /// Retries admitted and not yet ended. Never saved: after a restart nothing is in flight.
    #[serde(skip)]
    retries_in_flight: u32,
    /// Which half-open period a probe belongs to: a probe's result counts only in its own.
    pub breaker_period: u32,
    /// First attempts that failed since the last success (in this breaker state). Enough of them
    /// make the endpoint suspect: down, or flaky? Its retries tell, so first attempts wait.
    pub first_failures: u32,
    /// While suspect: first attempts are held until then, retries go.
    pub firsts_held_until: Option<Timestamp>,
    /// Suspicion began and no retry has yet been sent at once to end it: the next failed
    /// attempt whose retry is safe to send at once is retried now ([`EndpointState::record`]),
    /// so a flaky endpoint is told from a down one in one round trip, not after a backoff.
    #[serde(skip)]
    probe_wanted: bool,
    /// The request quota learned from responses.
    pub quota_limit: Option<u64>,
    pub quota_tokens: Option<u64>,
    pub quota_reset_at: Option<Timestamp>,
    /// Whether `quota_limit` was inferred from 429s rather than read from headers.
    pub quota_inferred: bool,
    /// Successful attempts since the quota window last began (for inferring a limit).
    ok_in_window: u64,
    /// The reset from which `ok_in_window` counts: the start of the server's window, as far as
    /// the last inferring 429 said.
    ok_since: Option<Timestamp>,
    /// The shortest time seen between two inferred resets, in milliseconds: the server's window
    /// length, or a multiple of it until two 429s land in consecutive windows.
    quota_period_ms: Option<i64>,
    /// A reset the server gave (by a 429's wait), from which the windows are measured, and the
    /// time from it to the latest one with the whole windows between: their length, to a
    /// fraction of a millisecond once several windows are counted.
    quota_anchor_ms: Option<i64>,
    /// Set once a second reset came a whole number of windows after the anchor: the windows
    /// are fixed, of the measured length, and their resets can be predicted.
    quota_windows: Option<(i64, u32)>,
    /// Whether `quota_reset_at` is this side's prediction (the inferred window's start plus its
    /// period) rather than what a response said.
    quota_reset_predicted: bool,
    /// Whether the current quota window began at a predicted reset.
    quota_window_predicted: bool,
    /// Windows whose inferred quota ran out and whose reset was predicted instead of probed,
    /// since the last probe.
    quota_probe_skips: u32,
    /// How many such windows may pass between probes: none at first or after a probe found
    /// room, doubling (up to `QUOTA_PROBE_EVERY`) each time a probe is refused.
    quota_probe_every: u32,
    /// Probing the current window for more room: it goes on, one at a time, until a 429.
    quota_probing: bool,
    /// GCRA theoretical arrival time, and its part below the millisecond (not saved: a restart
    /// loses less than a millisecond of it).
    tat: Option<Timestamp>,
    #[serde(skip)]
    tat_sub_ns: u32,
    /// The adaptive concurrency limit, when adaptive.
    pub adaptive_limit: Option<f64>,
    /// Slow start after a pause or an outage: when it began and how many went since.
    pub ramp_started: Option<Timestamp>,
    ramp_admitted: u64,
    /// Whether the endpoint has answered at least once.
    pub answered: bool,
    /// Times the breaker opened since it was last closed: each reopening doubles the open time.
    pub breaker_opens: u32,
    /// The last hold and when it ended, so that attempts can say what held them.
    pub last_hold: Option<(String, Timestamp)>,
    /// The hold in force at the last refused admission, until an admission goes through.
    holding: Option<String>,
    /// A pause people set by hand: it holds every job until they resume the endpoint (or until
    /// its end, when one was given). Set from the shared controls, not learned here.
    pub hand_pause: Option<HandPause>,
    /// The last hand resume and breaker reset this state took in (see
    /// [`EndpointState::take_resume`], [`EndpointState::take_breaker_reset`]), so each applies
    /// once.
    pub resumed_at: Option<Timestamp>,
    pub breaker_reset_at: Option<Timestamp>,
    /// This node's part of the cluster's limits (see [`Share`]); whole when alone. Set by the
    /// engine from the nodes it sees, never saved.
    #[serde(skip)]
    share: Share,
    /// The division of the limits when the current quota window began (or its first answer
    /// came): a node that leaves does not give its part to the others before the window ends,
    /// since what it sent of it is not known.
    #[serde(skip)]
    quota_window_share: Option<Share>,
    /// What remained for the whole cluster by the last answer that said.
    #[serde(skip)]
    quota_cluster_remaining: Option<u64>,
    /// Requests this node sent in the current window of a quota learned from headers (from the
    /// window's start, or from the first answer that told of it; nothing is counted before a
    /// limit is known). With several nodes, this node's part of the window's limit is the most
    /// it sends in the window. Not saved: the saved state of an endpoint is the last node's to
    /// save it, and a restarted node is a new one (it joins).
    #[serde(skip)]
    quota_sent: u64,
    /// Whether `quota_sent` counts from the current window's start (this node saw the reset
    /// pass), so that the window's first answer adds to it rather than starting it.
    #[serde(skip)]
    quota_window_counted: bool,
    /// The rate learned from 429s that said nothing (see [`Pace`]).
    pace: Pace,
    /// Answers counted for the first contact's widening window (up to [`CONTACT_ANSWERS`]).
    contact_answers: u32,
}

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

const HISTORY: usize = 20;
/// At most this many windows whose inferred quota ran out wait for the predicted reset in a row
/// before one probes for more room.
const QUOTA_PROBE_EVERY: u32 = 8;
/// ... and at most this long (ms) in all: windows longer than this are always probed, so that a
/// limit the server raised is found within a second. (One wasted probe per window matters for
/// short windows only.)
const QUOTA_PREDICTED_MS: i64 = 1_000;
const WINDOW_BUCKETS: i64 = 10;
/// First contact: until an endpoint has answered this many requests, at most one more is in
/// flight than it answered (the window doubles each round trip, as TCP's slow start), and never
/// more than [`CONTACT_WIDEST`].
pub const CONTACT_ANSWERS: u32 = 64;
/// The most in flight at first contact: what a limit met for the first time may refuse at once.
pub const CONTACT_WIDEST: u32 = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum BreakerState {
    #[default]
    Closed,
    Open {
        until: Timestamp,
    },
    /// Letting `half_open_probes` probes through, and deciding on their failure ratio.
    HalfOpen {
        /// Probes admitted and not yet ended. Never saved: after a restart none is in flight.
        #[serde(skip)]
        in_flight: u32,
        succeeded: u32,
        failed: u32,
    },
}

impl BreakerState {
    pub fn name(&self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open { .. } => "open",
            BreakerState::HalfOpen { .. } => "half_open",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BreakerEvent {
    pub at: Timestamp,
    pub to: String,
    pub reason: String,
}

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

/// What an admission counted, handed back exactly once: to [`EndpointState::record`] when the
/// attempt ends, or to [`EndpointState::release`] when it never ran (or its result is lost).
/// Until then it holds its place: a probe slot, a retry in flight.
///
/// Neither `Clone` nor `Copy`: handing one back consumes it, so it cannot be handed back twice.
#[derive(Debug, Default, PartialEq, Eq)]
#[must_use = "a permit is handed back to record or release, or its place stays taken"]
pub struct Permit {
    retry: bool,
    /// The half-open period this attempt probes, if it is a probe.
    probe: Option<u32>,
    /// Sent, this node's part of a learned quota spent, to find out whether its window ended
    /// (no answer told the reset: the answers in the window were timeouts, or none came yet).
    quota_probe: bool,
    /// The learned pace's epoch when admitted: a refusal cuts the pace once per epoch.
    pace_epoch: u32,
    /// When it was admitted (sent): what the other nodes are told of a bare refusal.
    admitted_at: Option<Timestamp>,
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
    /// A server-given wait that applies to the whole endpoint, with a reason for people.
    pub server_wait: Option<(Duration, String)>,
    pub quota: Quota,
    /// Attempts of this endpoint still in flight, not counting this one.
    pub others_in_flight: u32,
    /// The attempt failed and its job is to be retried, and that retry may be sent at once: the
    /// failure is transient, or an unknown outcome of a request safe to repeat.
    pub safe_retry: bool,
}

impl Observed {
    /// A 429 that said nothing: no server wait, no quota. It teaches the endpoint's pace.
    pub fn is_bare_refusal(&self) -> bool {
        self.rate_limited
            && self.server_wait.is_none()
            && self.quota.requests.is_none()
            && self.quota.exhausted.is_none()
    }
}

impl EndpointState {
    /// Whether an attempt (a retry when `is_retry`) may start now, with `in_flight` attempts
    /// of this endpoint running. On `Go`, the attempt is counted against every limit.
    pub fn admit(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        is_retry: bool,
        in_flight: u32,
    ) -> Admission {
        match self.check(cfg, now, is_retry, in_flight) {
            Ok(()) => {
                if let Some(reason) = self.holding.take() {
                    // Whatever held jobs until now is what released this one.
                    if self
                        .last_hold
                        .as_ref()
                        .is_none_or(|(_, ended)| *ended < now)
                    {
                        self.last_hold = Some((reason, now));
                    }
                }
                Admission::Go(self.count_admission(cfg, now, is_retry))
            }
            Err(a) => {
                if let Admission::Hold(h) | Admission::HoldFirsts(h) = &a {
                    if h.kind != HoldKind::Pause {
                        self.holding = Some(h.reason.clone());
                    }
                }
                a
            }
        }
    }

    /// What stops every job of the endpoint now, if anything: a pause or an open breaker. Only
    /// reads (unlike [`EndpointState::check`]): for a job admitted a moment ago and about to
    /// start, to see whether a pause or a breaker came down since.
    pub fn stopped_by(&self, now: Timestamp) -> Option<String> {
        if let Some(p) = self.hand_pause.as_ref().filter(|p| p.in_force(now)) {
            return Some(p.describe());
        }
        if let Some(until) = self.paused_until.filter(|u| now < *u) {
            return Some(paused_text(until, self.pause_reason.as_deref()));
        }
        match self.breaker {
            BreakerState::Open { until } if now < until => Some(open_text(until)),
            _ => None,
        }
    }

    /// The first hold that applies now, if any, without counting anything. Moves time-driven
    /// states forward (an expired pause ends, an open breaker turns half-open).
    pub fn check(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        is_retry: bool,
        in_flight: u32,
    ) -> Result<(), Admission> {
        let hold = |kind, until, reason: String| {
            Err(Admission::Hold(Hold {
                kind,
                until,
                reason,
            }))
        };
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
        match self.breaker {
            BreakerState::Open { until } if now < until => {
                return hold(HoldKind::Breaker, Some(until), open_text(until));
            }
            BreakerState::Open { until } => {
                self.breaker = BreakerState::HalfOpen {
                    in_flight: 0,
                    succeeded: 0,
                    failed: 0,
                };
                self.breaker_period = self.breaker_period.wrapping_add(1);
                self.clear_suspicion();
                self.event(
                    now,
                    "half_open",
                    format!("open period ended at {until}; letting probes through"),
                );
            }
            BreakerState::HalfOpen {
                in_flight,
                succeeded,
                failed,
            } if in_flight + succeeded + failed >= cfg.breaker.half_open_probes => {
                return hold(
                    HoldKind::Breaker,
                    None,
                    format!(
                        "circuit half-open: {in_flight} probes in flight, {succeeded} succeeded, {failed} failed"
                    ),
                );
            }
            _ => {}
        }
        if !is_retry && cfg.breaker.enabled {
            if let Some(until) = self.firsts_held_until {
                if now < until {
                    return Err(Admission::HoldFirsts(Hold {
                        kind: HoldKind::Suspect,
                        until: Some(until),
                        reason: format!(
                            "{} first attempts failed and nothing succeeded since; first attempts wait until {until} while retries tell whether it is down or flaky",
                            self.first_failures
                        ),
                    }));
                }
                // No retry settled it in time: let first attempts go again, until one more fails.
                self.firsts_held_until = None;
                self.first_failures = self.suspect_after(cfg).saturating_sub(1);
            }
        }
        if cfg.probe_first && !self.answered && in_flight >= 1 {
            return hold(
                HoldKind::Probe,
                None,
                "first request to this endpoint in flight; waiting for its answer".into(),
            );
        }
        if cfg.first_contact_ramp
            && self.contact_answers < CONTACT_ANSWERS
            && in_flight >= (self.contact_answers + 1).min(CONTACT_WIDEST)
        {
            return hold(
                HoldKind::Probe,
                None,
                format!(
                    "first contact: {in_flight} in flight after {} answers; more go as answers come",
                    self.contact_answers
                ),
            );
        }
        if cfg.learn_from_headers {
            if let Some(reset) = self.quota_reset_at {
                if now >= reset {
                    // A new window. Attempts still in flight will likely land in it and count.
                    let share = self.share;
                    let inferred = self.quota_inferred;
                    self.quota_tokens = self.quota_limit.map(|l| {
                        // A limit the headers gave is the cluster's; one inferred from this
                        // node's own successes is already this node's.
                        let mine = if inferred { l } else { share.part(l) };
                        mine.saturating_sub(u64::from(in_flight))
                    });
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
                }
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
                        self.quota_tokens = Some(1);
                    }
                }
            }
        }
        if let Some(rate) = cfg.rate {
            let tolerance = self.interval(rate) * self.burst(cfg).saturating_sub(1);
            let earliest_ns =
                self.tat_ns(now) - i128::try_from(tolerance.as_nanos()).unwrap_or(i128::MAX);
            if earliest_ns > ns_of(now) {
                // Rounded up: woken then, the request may go.
                let earliest = Timestamp::from_unix_millis(
                    i64::try_from((earliest_ns + 999_999).div_euclid(1_000_000))
                        .unwrap_or(i64::MAX),
                );
                let reason = if self.share.is_whole() {
                    format!("rate limit {rate}")
                } else {
                    format!(
                        "rate limit {rate} across {} nodes: this node sends one request every {}",
                        self.share.of,
                        Human(self.interval(rate))
                    )
                };
                return hold(HoldKind::Rate, Some(earliest), reason);
            }
        }
        if cfg.learn_pace {
            if let (Some(until), Some(rate)) = (self.pace.hold(now), self.pace.rate()) {
                return hold(
                    HoldKind::Rate,
                    Some(until),
                    format!("pace learned from 429s without Retry-After: {rate:.1} requests/s"),
                );
            }
        }
        if let Some(started) = self.ramp_started {
            let elapsed = now.saturating_since(started);
            if elapsed >= cfg.ramp_for {
                self.ramp_started = None;
            } else {
                let step = (elapsed.as_millis() / cfg.ramp_step.as_millis().max(1)) as u32;
                let allowed = u64::from(self.share.part32(cfg.ramp_initial.max(1)).max(1))
                    .saturating_mul((1u64 << (step + 1).min(62)) - 1);
                if self.ramp_admitted >= allowed {
                    let next = started.saturating_add(cfg.ramp_step * (step + 1));
                    return hold(
                        HoldKind::Ramp,
                        Some(next),
                        format!("slow start: {allowed} requests so far"),
                    );
                }
            }
        }
        if let Some(limit) = self.concurrency_limit(cfg) {
            if in_flight >= limit {
                let reason = if self.share.is_whole() {
                    format!("concurrency limit {limit} reached")
                } else {
                    format!(
                        "concurrency limit reached: {limit} in flight on this node, its part of the limit across {} nodes",
                        self.share.of
                    )
                };
                return hold(HoldKind::Concurrency, None, reason);
            }
        }
        if is_retry && cfg.retry_budget.enabled {
            let spent = self.budget_spent(cfg, now);
            let allowed = self.budget_allowed(cfg, now);
            if f64::from(spent.failed_retries + self.retries_in_flight) >= allowed {
                let b = &cfg.retry_budget;
                let reason = format!(
                    "retry budget spent: {} retries failed and {} in flight in {} against {} allowed ({}% of {} first attempts + {} successes + {}/s)",
                    spent.failed_retries,
                    self.retries_in_flight,
                    Human(b.window),
                    allowed.floor(),
                    (b.ratio * 100.0).round(),
                    spent.firsts,
                    spent.successes,
                    self.share.part_f64(b.min_per_second)
                );
                // Failed retries leave the window with their bucket; retries in flight give
                // their place back when they end (then the queue is woken).
                let until = (spent.failed_retries > 0)
                    .then(|| {
                        self.budget.iter().find(|b| b.failed_retries > 0).map(|b| {
                            Timestamp::from_unix_millis(
                                b.start
                                    + i64::try_from(cfg.retry_budget.window.as_millis())
                                        .unwrap_or(i64::MAX),
                            )
                        })
                    })
                    .flatten();
                let h = Hold {
                    kind: HoldKind::Budget,
                    until,
                    reason,
                };
                return Err(match b.when_exhausted {
                    WhenExhausted::Wait => Admission::HoldRetries(h),
                    WhenExhausted::Fail => Admission::FailRetry(h),
                });
            }
        }
        Ok(())
    }

    fn count_admission(&mut self, cfg: &EndpointConfig, now: Timestamp, is_retry: bool) -> Permit {
        // The one request `check` lets go while probing a spent quota with no reset known.
        let quota_probe =
            self.quota_probing && self.quota_reset_at.is_none() && self.quota_tokens == Some(1);
        if let Some(rate) = cfg.rate {
            let next =
                self.tat_ns(now) + i128::try_from(self.interval(rate).as_nanos()).unwrap_or(0);
            self.set_tat_ns(next);
        }
        if let Some(t) = self.quota_tokens.as_mut() {
            *t = t.saturating_sub(1);
        }
        if self.quota_limit.is_some() {
            self.quota_sent = self.quota_sent.saturating_add(1);
        }
        if self.ramp_started.is_some() {
            self.ramp_admitted += 1;
        }
        let mut permit = Permit {
            retry: is_retry,
            probe: None,
            quota_probe,
            pace_epoch: if cfg.learn_pace {
                self.pace.admitted(now)
            } else {
                0
            },
            admitted_at: Some(now),
        };
        if let BreakerState::HalfOpen { in_flight, .. } = &mut self.breaker {
            *in_flight += 1;
            permit.probe = Some(self.breaker_period);
        }
        if is_retry {
            self.retries_in_flight += 1;
        }
        permit
    }

    /// Hands back the permit of an attempt that did not run (given back before it started) or
    /// whose result will never be known here: its probe slot and its place as a retry in flight
    /// free, and what it took of the rate, the quota and slow start is returned.
    pub fn release(&mut self, cfg: &EndpointConfig, now: Timestamp, permit: Permit) {
        self.end_permit(&permit);
        if let (Some(rate), Some(_)) = (cfg.rate, self.tat) {
            // Never back past now: a returned slot is not a burst saved for later.
            let back =
                self.tat_ns(now) - i128::try_from(self.interval(rate).as_nanos()).unwrap_or(0);
            self.set_tat_ns(back.max(ns_of(now)));
        }
        if let (Some(t), Some(limit)) = (self.quota_tokens.as_mut(), self.quota_limit) {
            *t = (*t + 1).min(limit);
        }
        if self.quota_limit.is_some() {
            self.quota_sent = self.quota_sent.saturating_sub(1);
        }
        self.ramp_admitted = self.ramp_admitted.saturating_sub(1);
        if cfg.learn_pace {
            self.pace.released(now);
        }
    }

    /// Frees what a permit holds in the breaker and the budget; returns whether it was a probe
    /// of the current half-open period.
    fn end_permit(&mut self, permit: &Permit) -> bool {
        if permit.retry {
            self.retries_in_flight = self.retries_in_flight.saturating_sub(1);
        }
        match (&mut self.breaker, permit.probe) {
            (BreakerState::HalfOpen { in_flight, .. }, Some(period))
                if period == self.breaker_period =>
            {
                *in_flight = in_flight.saturating_sub(1);
                true
            }
            _ => false,
        }
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
    fn window_length(&self) -> Option<f64> {
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

    /// Takes in what a finished attempt taught, and hands back its permit.
    /// Returns whether the job is to be retried at once rather than after its backoff: the
    /// endpoint just became suspect (first attempts held), and this retry, safe to send at once,
    /// tells whether it is flaky (the retry passes, and the held first attempts go) or down
    /// (it fails; the first attempts wait on). One such retry per suspicion.
    pub fn record(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: Permit,
        o: &Observed,
    ) -> bool {
        self.answered = true;
        self.contact_answers = self.contact_answers.saturating_add(1).min(CONTACT_ANSWERS);
        if cfg.learn_pace {
            if o.class == ResultClass::Success {
                self.pace.succeeded(now);
            } else if o.is_bare_refusal() {
                let sent = permit.admitted_at.unwrap_or(now);
                self.pace.refused(now, permit.pace_epoch, sent);
            }
        }
        let probe = self.end_permit(&permit);
        self.count_budget(cfg, now, &permit, o.class);
        if cfg.breaker.enabled {
            self.suspect(cfg, now, &permit, o.class);
        }
        let retry_now = self.probe_wanted
            && !permit.retry
            && o.safe_retry
            && o.class == ResultClass::Failure
            && self.firsts_held_until.is_some_and(|t| now < t);
        if retry_now {
            self.probe_wanted = false;
        }
        if probe {
            self.record_probe(cfg, now, permit.retry, o.class);
        } else if self.breaker == BreakerState::Closed && cfg.breaker.enabled {
            self.record_closed(cfg, now, &permit, o.class);
        }
        // Results of attempts admitted before the breaker opened, or in an earlier half-open
        // period, say nothing about the endpoint now: the probes decide.
        if cfg.adaptive_concurrency {
            let max = f64::from(cfg.concurrency.map_or(1000, |c| self.share.part32(c)));
            let limit = self.adaptive_limit.unwrap_or(max.min(10.0));
            let limit = if o.overload {
                (limit * 0.9).max(1.0)
            } else if o.class == ResultClass::Success
                && f64::from(o.others_in_flight + 1) >= limit / 2.0
            {
                (limit + 1.0).min(max)
            } else {
                limit
            };
            self.adaptive_limit = Some(limit);
        }
        if o.class == ResultClass::Success {
            self.ok_in_window += 1;
            if self.quota_probing {
                // A probe found room: probe every window again.
                self.quota_probe_every = 0;
            }
        }
        if let Some((wait, why)) = &o.server_wait {
            self.pause(now.saturating_add(*wait), why.clone());
            // A 429 from an API that reports no quota: what went through since its window began
            // is the best guess of its limit. From then on that many go per window, and when
            // they are spent, one probe at a time finds out whether there is more room.
            if cfg.learn_from_headers
                && o.overload
                && o.quota.requests.is_none()
                && (self.quota_limit.is_none() || self.quota_inferred)
            {
                let reset = now.saturating_add(*wait);
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
                self.quota_inferred = true;
                self.quota_tokens = Some(0);
                self.quota_reset_at = Some(reset);
            }
        }
        if cfg.learn_from_headers {
            if let Some(q) = o.quota.requests {
                self.quota_limit = q.limit.or(self.quota_limit);
                self.quota_inferred = false;
                // What remains is the cluster's: this node takes its part.
                self.quota_cluster_remaining = Some(q.remaining);
                let tokens = self
                    .share
                    .part(q.remaining)
                    .saturating_sub(u64::from(o.others_in_flight));
                let reset_at = q.reset_after.map(|d| now.saturating_add(d));
                let window_open = self.quota_reset_at.is_some_and(|r| now < r);
                self.quota_reset_predicted = false;
                if window_open {
                    // Answers can arrive out of order: within a window the count only goes down,
                    // so the lowest report wins, and the later reset.
                    self.quota_tokens = Some(self.quota_tokens.map_or(tokens, |t| t.min(tokens)));
                    self.quota_reset_at = self.quota_reset_at.max(reset_at);
                } else {
                    // The first answer of a window: of this node's requests, this one and those
                    // still in flight are the ones known to fall in it, and, when this node saw
                    // the window begin, those it sent since (some answered without headers).
                    self.quota_tokens = Some(tokens);
                    self.quota_reset_at = reset_at;
                    let known = 1 + u64::from(o.others_in_flight);
                    if std::mem::take(&mut self.quota_window_counted) {
                        self.quota_sent = self.quota_sent.max(known);
                    } else {
                        self.quota_sent = known;
                        self.quota_window_share = Some(self.share);
                    }
                }
            }
            if let Some((reset, source)) = o.quota.exhausted {
                self.pause(
                    now.saturating_add(reset),
                    format!("quota spent ({source} 0), resets in {}", Human(reset)),
                );
            }
        }
        retry_now
    }

    /// Failed first attempts with no success since make the endpoint suspect: first attempts
    /// wait (for at most `open_for`) while its retries, which a flaky endpoint answers and a down
    /// one fails again, tell. Any success clears it.
    fn suspect(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: &Permit,
        class: ResultClass,
    ) {
        match class {
            ResultClass::Success => {
                self.first_failures = 0;
                self.firsts_held_until = None;
                self.probe_wanted = false;
            }
            ResultClass::Failure if !permit.retry && self.breaker_allows_firsts() => {
                self.first_failures = self.first_failures.saturating_add(1);
                if self.first_failures >= self.suspect_after(cfg)
                    && self.firsts_held_until.is_none()
                {
                    self.firsts_held_until = Some(now.saturating_add(cfg.breaker.open_for));
                    self.probe_wanted = true;
                }
            }
            _ => {}
        }
    }

    fn clear_suspicion(&mut self) {
        self.first_failures = 0;
        self.firsts_held_until = None;
        self.probe_wanted = false;
    }

    /// Whether first attempts are not already held by the breaker (closed or half-open).
    fn breaker_allows_firsts(&self) -> bool {
        !matches!(self.breaker, BreakerState::Open { .. })
    }

    /// Failed first attempts in a row that make the endpoint suspect: the breaker's minimum
    /// while closed, its probes while half-open.
    fn suspect_after(&self, cfg: &EndpointConfig) -> u32 {
        match self.breaker {
            BreakerState::HalfOpen { .. } => cfg.breaker.half_open_probes,
            _ => cfg.breaker.min_throughput,
        }
        .max(1)
    }

    /// A probe's result. Neutral results (a 400, a deferral) free the slot for another probe.
    /// Once the failures among `half_open_probes` reach `failure_ratio` the breaker opens again
    /// (for twice as long); once they can no longer reach it, it closes.
    fn record_probe(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        retry: bool,
        class: ResultClass,
    ) {
        let BreakerState::HalfOpen {
            in_flight,
            mut succeeded,
            mut failed,
        } = self.breaker
        else {
            return;
        };
        match class {
            ResultClass::Success => succeeded += 1,
            // A first attempt's failure says little (flaky APIs fail first calls); it made the
            // endpoint more suspect instead, and its place goes to another probe.
            ResultClass::Failure if !retry => {}
            ResultClass::Failure => failed += 1,
            ResultClass::Neutral => {}
        }
        self.breaker = BreakerState::HalfOpen {
            in_flight,
            succeeded,
            failed,
        };
        let probes = f64::from(cfg.breaker.half_open_probes);
        let ratio = cfg.breaker.failure_ratio;
        if f64::from(failed) >= ratio * probes {
            self.open(
                cfg,
                now,
                format!(
                    "{failed} of {} probes failed ({succeeded} succeeded)",
                    cfg.breaker.half_open_probes
                ),
            );
        } else if f64::from(cfg.breaker.half_open_probes.saturating_sub(succeeded)) < ratio * probes
        {
            self.breaker = BreakerState::Closed;
            self.breaker_opens = 0;
            self.window.clear();
            self.event(
                now,
                "closed",
                format!(
                    "{succeeded} of {} probes succeeded ({failed} failed)",
                    cfg.breaker.half_open_probes
                ),
            );
            self.last_hold = Some(("circuit breaker".into(), now));
            if cfg.rate.is_none() && self.quota_limit.is_none() {
                self.start_ramp(now);
            }
        }
    }

    /// A result while closed. It opens on failures of retries (jobs that failed before and
    /// failed again) against successes: a first attempt that fails says little (a flaky API fails
    /// single calls and answers the retry), a retry that fails again says the endpoint is failing.
    fn record_closed(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: &Permit,
        class: ResultClass,
    ) {
        let bucket = bucket_start(now, cfg.breaker.window);
        let failed = class == ResultClass::Failure;
        let add = |b: &mut Bucket| match class {
            ResultClass::Success => b.successes += 1,
            ResultClass::Failure => {
                b.firsts += u32::from(!permit.retry);
                b.failed_retries += u32::from(permit.retry);
            }
            ResultClass::Neutral => {}
        };
        add_to(&mut self.window, bucket, add);
        prune(&mut self.window, now, cfg.breaker.window);
        if !(failed && permit.retry) {
            return;
        }
        let w = totals(&self.window);
        let counted = w.successes + w.failed_retries;
        if counted >= cfg.breaker.min_throughput
            && f64::from(w.failed_retries) >= cfg.breaker.failure_ratio * f64::from(counted)
        {
            self.open(
                cfg,
                now,
                format!(
                    "{} retries failed again against {} successes in {}",
                    w.failed_retries,
                    w.successes,
                    Human(cfg.breaker.window)
                ),
            );
        }
    }

    /// The retry budget learns what the attempt was and how it ended.
    fn count_budget(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: &Permit,
        class: ResultClass,
    ) {
        let bucket = bucket_start(now, cfg.retry_budget.window);
        add_to(&mut self.budget, bucket, |b| {
            b.firsts += u32::from(!permit.retry);
            match class {
                ResultClass::Success => b.successes += 1,
                ResultClass::Failure => b.failed_retries += u32::from(permit.retry),
                ResultClass::Neutral => {}
            }
        });
        prune(&mut self.budget, now, cfg.retry_budget.window);
    }

    /// Permits handed out and not yet handed back that hold a place: (retries in flight, probes
    /// of the current half-open period in flight). Both are zero once every permit is back.
    pub fn permits_out(&self) -> (u32, u32) {
        let probes = match self.breaker {
            BreakerState::HalfOpen { in_flight, .. } => in_flight,
            _ => 0,
        };
        (self.retries_in_flight, probes)
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
    pub fn take_resume(&mut self, at: Timestamp) -> bool {
        if self.resumed_at.is_some_and(|seen| seen >= at) {
            return false;
        }
        self.resumed_at = Some(at);
        // A spent quota (or this node's spent part of it) holds until its reset too.
        let quota_spent = self.quota_tokens == Some(0) || self.quota_part_left() == Some(0);
        let was_held = self.paused_until.is_some() || quota_spent;
        self.paused_until = None;
        self.pause_reason = None;
        // What remains is unknown again, and the next answer's headers say (its window's count
        // starts from that answer).
        if quota_spent {
            self.quota_window_counted = false;
            self.quota_tokens = None;
            self.quota_reset_at = None;
            self.quota_reset_predicted = false;
        }
        was_held
    }

    /// Takes in a hand reset of the breaker made at `at`: the first time it is seen, an open or
    /// half-open breaker closes with an empty window and its open time back to the first step,
    /// and suspicion of first attempts ends. Returns whether anything changed.
    pub fn take_breaker_reset(&mut self, at: Timestamp, now: Timestamp) -> bool {
        if self.breaker_reset_at.is_some_and(|seen| seen >= at) {
            return false;
        }
        self.breaker_reset_at = Some(at);
        self.window.clear();
        self.breaker_opens = 0;
        self.clear_suspicion();
        if self.breaker == BreakerState::Closed {
            return false;
        }
        self.breaker = BreakerState::Closed;
        self.breaker_period = self.breaker_period.wrapping_add(1);
        self.event(now, "closed", format!("reset by hand at {at}"));
        true
    }

    fn open(&mut self, cfg: &EndpointConfig, now: Timestamp, reason: String) {
        let doubling = 1u32 << self.breaker_opens.min(16);
        let open_for = cfg
            .breaker
            .open_for
            .saturating_mul(doubling)
            .min(cfg.breaker.max_open_for.max(cfg.breaker.open_for));
        self.breaker_opens = self.breaker_opens.saturating_add(1);
        let until = now.saturating_add(open_for);
        self.breaker = BreakerState::Open { until };
        self.clear_suspicion();
        self.event(now, "open", reason);
    }

    fn event(&mut self, at: Timestamp, to: &str, reason: String) {
        self.breaker_history.push_back(BreakerEvent {
            at,
            to: to.into(),
            reason,
        });
        while self.breaker_history.len() > HISTORY {
            self.breaker_history.pop_front();
        }
    }

    fn start_ramp(&mut self, now: Timestamp) {
        self.ramp_started = Some(now);
        self.ramp_admitted = 0;
    }

    /// This node's part of the cluster's limits.
    pub fn share(&self) -> Share {
        self.share
    }

    /// Sets this node's part of the cluster's limits (the engine does, as nodes come and go,
    /// and when a saved state is restored). A quota learned from headers is divided by the
    /// smaller of this division and the one its window began with (see
    /// [`EndpointState::quota_part`]).
    pub fn set_share(&mut self, share: Share) {
        self.share = share;
    }

    /// This node's part of a quota `limit` learned from headers, for the current window: the
    /// smaller of its part now and its part when the window began. A node that joins makes the
    /// parts smaller at once; one that leaves gives its part to the others only from the next
    /// window, since what it sent of it may still reach the API.
    fn quota_part(&self, limit: u64) -> u64 {
        let now = self.share.part(limit);
        self.quota_window_share
            .map_or(now, |began| now.min(began.part(limit)))
    }

    /// What this node may still send of its part of a quota learned from headers, in the
    /// current window; `None` when no part applies (alone, no window known, or an inferred
    /// quota, which is this node's own already).
    fn quota_part_left(&self) -> Option<u64> {
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

    /// The spacing between this node's requests under `rate`: the cluster's spacing times the
    /// nodes, to the nanosecond (rounded up). The arrival time keeps its part below the
    /// millisecond, so "30/s" is 30 a second, not 30.3 (spacing rounded down to 33 ms) nor 29.4
    /// (rounded up to 34 ms).
    fn interval(&self, rate: super::config::Rate) -> Duration {
        let nanos = rate.per.as_nanos() * u128::from(self.share.of.max(1));
        let ns = nanos.div_ceil(u128::from(rate.count.max(1)));
        Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// The theoretical arrival time in nanoseconds since the epoch, never before `now`.
    fn tat_ns(&self, now: Timestamp) -> i128 {
        let tat = self
            .tat
            .map_or(i128::MIN, |t| ns_of(t) + i128::from(self.tat_sub_ns));
        tat.max(ns_of(now))
    }

    fn set_tat_ns(&mut self, ns: i128) {
        self.tat = Some(Timestamp::from_unix_millis(
            i64::try_from(ns.div_euclid(1_000_000)).unwrap_or(i64::MAX),
        ));
        self.tat_sub_ns = u32::try_from(ns.rem_euclid(1_000_000)).unwrap_or(0);
    }

    /// This node's part of the burst (at least one request).
    fn burst(&self, cfg: &EndpointConfig) -> u32 {
        self.share.part32(cfg.burst).max(1)
    }

    fn concurrency_limit(&self, cfg: &EndpointConfig) -> Option<u32> {
        let adaptive = self
            .adaptive_limit
            .filter(|_| cfg.adaptive_concurrency)
            .map(|l| l.floor().max(1.0) as u32);
        match (cfg.concurrency.map(|c| self.share.part32(c)), adaptive) {
            (Some(c), Some(a)) => Some(c.min(a)),
            (c, a) => c.or(a),
        }
    }

    /// What the budget window holds now.
    fn budget_spent(&mut self, cfg: &EndpointConfig, now: Timestamp) -> Bucket {
        prune(&mut self.budget, now, cfg.retry_budget.window);
        totals(&self.budget)
    }

    /// Retries that may fail or be in flight within the window: `ratio` of the first attempts,
    /// one for each success, and `min_per_second`. Retries that succeed spend nothing.
    fn budget_allowed(&mut self, cfg: &EndpointConfig, now: Timestamp) -> f64 {
        let b = &cfg.retry_budget;
        let w = self.budget_spent(cfg, now);
        b.ratio * f64::from(w.firsts)
            + f64::from(w.successes)
            + self.share.part_f64(b.min_per_second) * b.window.as_secs_f64()
    }

    /// What people see: the limits in force and the state of each mechanism.
    pub fn view(&mut self, cfg: &EndpointConfig, now: Timestamp, in_flight: u32) -> EndpointView {
        self.pace.forget_if_quiet(now);
        let spent = self.budget_spent(cfg, now);
        let used = spent.failed_retries + self.retries_in_flight;
        let allowed = self.budget_allowed(cfg, now);
        let hold = self.describe(cfg, now, in_flight);
        prune(&mut self.window, now, cfg.breaker.window);
        let w = totals(&self.window);
        EndpointView {
            holding: hold,
            paused_by_hand: self.hand_pause.clone().filter(|p| p.in_force(now)),
            paused_until: self.paused_until.filter(|p| *p > now),
            pause_reason: self
                .pause_reason
                .clone()
                .filter(|_| self.paused_until.is_some_and(|p| p > now)),
            rate: cfg.rate.map(|r| r.to_string()),
            burst: cfg.burst,
            nodes: self.share.of,
            learned_limit: self.quota_limit,
            learned_remaining: self
                .quota_tokens
                .map(|t| self.quota_part_left().map_or(t, |left| t.min(left))),
            learned_reset_at: self.quota_reset_at,
            learned_pace: self.pace.rate().filter(|_| cfg.learn_pace),
            concurrency_limit: self.concurrency_limit(cfg),
            in_flight,
            slow_start_since: self.ramp_started,
            budget_allowed: allowed.floor() as u64,
            budget_used: used,
            budget_remaining: (allowed - f64::from(used)).max(0.0).floor() as u64,
            breaker: self.breaker.name(),
            breaker_until: match self.breaker {
                BreakerState::Open { until } => Some(until),
                _ => None,
            },
            breaker_window_failures: w.firsts + w.failed_retries,
            breaker_window_retry_failures: w.failed_retries,
            breaker_window_calls: w.successes + w.firsts + w.failed_retries,
            breaker_history: self.breaker_history.iter().cloned().collect(),
        }
    }

    /// When this endpoint's current holds end after `now`, if a time is known. Each instant is
    /// taken only if it is still ahead: one that passed (an old rate's slot, a pause that ended
    /// unseen) must not hide one to come.
    pub fn next_change(&self, now: Timestamp) -> Option<Timestamp> {
        let mut t: Option<Timestamp> = None;
        let mut consider = |x: Option<Timestamp>| {
            if let Some(x) = x.filter(|x| *x > now) {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        consider(self.paused_until);
        consider(self.hand_pause.as_ref().and_then(|p| p.until));
        if let BreakerState::Open { until } = self.breaker {
            consider(Some(until));
        }
        consider(self.quota_reset_at);
        consider(self.tat);
        consider(self.pace.next());
        consider(self.firsts_held_until);
        t
    }

    /// When a job this endpoint just refused with a bare 429 may go again, if the endpoint keeps
    /// a learned pace: its next place at that pace. Such a job waits for the pace, not for its own
    /// deferral backoff, so that refused jobs go again as soon as the limiter has room.
    pub fn pace_release(&self, cfg: &EndpointConfig, now: Timestamp) -> Option<Timestamp> {
        if !cfg.learn_pace {
            return None;
        }
        self.pace.rate()?;
        Some(self.pace.next().map_or(now, |t| t.max(now)))
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

    /// A one-line description of the current holds, for reasons (deadline while held).
    pub fn describe(&self, cfg: &EndpointConfig, now: Timestamp, in_flight: u32) -> Option<String> {
        match self.clone().check(cfg, now, false, in_flight) {
            Ok(()) => None,
            Err(
                Admission::Hold(h)
                | Admission::HoldRetries(h)
                | Admission::HoldFirsts(h)
                | Admission::FailRetry(h),
            ) => Some(h.reason),
            Err(Admission::Go(_)) => None,
        }
    }
}

/// The holds of an endpoint that every node honours, as (until, reason).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedHolds {
    pub pause: Option<(Timestamp, String)>,
    pub breaker: Option<(Timestamp, String)>,
    /// A pace learned from bare 429s holds until then (unless refused again): the send instant
    /// of the latest request refused bare, plus [`super::pace::FORGET_AFTER`].
    pub paced_until: Option<Timestamp>,
}

/// The endpoint as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointView {
    /// What holds its jobs right now, if anything.
    pub holding: Option<String>,
    /// A pause set by hand, while in force.
    pub paused_by_hand: Option<HandPause>,
    pub paused_until: Option<Timestamp>,
    pub pause_reason: Option<String>,
    /// Configured rate and burst: the cluster's.
    pub rate: Option<String>,
    pub burst: u32,
    /// The nodes the limits are shared among (1 alone). With several, the rate, burst,
    /// concurrency limit, learned remaining count, retry budget's minimum and slow start below
    /// are each node's part of the cluster's, and `in_flight` is this node's.
    pub nodes: u32,
    /// Learned from response headers: the limit as the API gave it, and what this node may
    /// still send of it (with several nodes, the smaller of its part of what the answers said
    /// remains and what is left of its part of the limit in this window).
    pub learned_limit: Option<u64>,
    pub learned_remaining: Option<u64>,
    pub learned_reset_at: Option<Timestamp>,
    /// Requests per second this node sends the endpoint, learned from 429s that carried no
    /// wait and no quota; `None` when it refused nothing of the kind lately.
    pub learned_pace: Option<f64>,
    /// This node's concurrency limit.
    pub concurrency_limit: Option<u32>,
    pub in_flight: u32,
    pub slow_start_since: Option<Timestamp>,
    pub budget_allowed: u64,
    pub budget_used: u32,
    pub budget_remaining: u64,
    pub breaker: &'static str,
    pub breaker_until: Option<Timestamp>,
    /// Failures (of first attempts and retries) and calls that counted, in the breaker's window.
    pub breaker_window_failures: u32,
    /// Of the failures, those of retries: what opens the breaker.
    pub breaker_window_retry_failures: u32,
    pub breaker_window_calls: u32,
    pub breaker_history: Vec<BreakerEvent>,
}

/// Why a pause holds an endpoint's jobs, as reasons and views say it.
fn paused_text(until: Timestamp, why: Option<&str>) -> String {
    format!("endpoint paused until {until}: {}", why.unwrap_or_default())
}

/// Why an open breaker holds an endpoint's jobs.
fn open_text(until: Timestamp) -> String {
    format!("circuit open until {until}")
}

fn bucket_start(now: Timestamp, window: Duration) -> i64 {
    let width = (i64::try_from(window.as_millis()).unwrap_or(i64::MAX) / WINDOW_BUCKETS).max(1);
    now.as_unix_millis().div_euclid(width) * width
}

/// Counts over one slice of a window. In the breaker's window `firsts` counts failed first
/// attempts; in the budget's, every first attempt that ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Bucket {
    start: i64,
    firsts: u32,
    successes: u32,
    failed_retries: u32,
}

/// Reads a value, or its default when it was saved in a form this version does not read.
fn or_empty<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OrOther<T> {
        Value(T),
        Other(serde::de::IgnoredAny),
    }
    Ok(match OrOther::<T>::deserialize(d)? {
        OrOther::Value(v) => v,
        OrOther::Other(_) => T::default(),
    })
}

/// Adds to the bucket that starts at `start`, opening it if it is new.
fn add_to(buckets: &mut VecDeque<Bucket>, start: i64, add: impl FnOnce(&mut Bucket)) {
    match buckets.back_mut() {
        Some(b) if b.start == start => add(b),
        _ => {
            let mut b = Bucket {
                start,
                ..Bucket::default()
            };
            add(&mut b);
            buckets.push_back(b);
        }
    }
}

fn totals(buckets: &VecDeque<Bucket>) -> Bucket {
    buckets.iter().fold(Bucket::default(), |t, b| Bucket {
        start: t.start,
        firsts: t.firsts + b.firsts,
        successes: t.successes + b.successes,
        failed_retries: t.failed_retries + b.failed_retries,
    })
}

/// Drops buckets that started a whole window or more before `now`.
fn prune(buckets: &mut VecDeque<Bucket>, now: Timestamp, window: Duration) {
    let horizon = now.as_unix_millis() - i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    while buckets.front().is_some_and(|b| b.start <= horizon) {
        buckets.pop_front();
    }
}

/// A time in nanoseconds since the epoch.
fn ns_of(t: Timestamp) -> i128 {
    i128::from(t.as_unix_millis()) * 1_000_000
}
