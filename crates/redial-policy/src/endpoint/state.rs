//! The state of one endpoint and the two operations on it: admit an attempt, record its result.

use super::config::{EndpointConfig, WhenExhausted};
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
    /// Breaker window: (bucket start ms, successes, failures).
    window: VecDeque<(i64, u32, u32)>,
    /// Retry budget window: (bucket start ms, first attempts, retries).
    budget: VecDeque<(i64, u32, u32)>,
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
    /// GCRA theoretical arrival time.
    tat: Option<Timestamp>,
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
}

const HISTORY: usize = 20;
const WINDOW_BUCKETS: i64 = 10;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum BreakerState {
    #[default]
    Closed,
    Open {
        until: Timestamp,
    },
    HalfOpen {
        sent: u32,
        succeeded: u32,
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
}

/// A hold: what, until when (when known; otherwise until an attempt in flight ends), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hold {
    pub kind: HoldKind,
    pub until: Option<Timestamp>,
    pub reason: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    Go,
    /// No job of this endpoint may go now.
    Hold(Hold),
    /// First attempts may go, retries may not (the retry budget is spent); they wait.
    HoldRetries(Hold),
    /// The retry budget is spent and the policy says to fail such retries.
    FailRetry(Hold),
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
    /// A server-given wait that applies to the whole endpoint, with a reason for people.
    pub server_wait: Option<(Duration, String)>,
    pub quota: Quota,
    /// Attempts of this endpoint still in flight, not counting this one.
    pub others_in_flight: u32,
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
                self.count_admission(cfg, now, is_retry);
                Admission::Go
            }
            Err(a) => {
                if let Admission::Hold(h) = &a {
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
                    sent: 0,
                    succeeded: 0,
                };
                self.event(
                    now,
                    "half_open",
                    format!("open period ended at {until}; letting probes through"),
                );
            }
            BreakerState::HalfOpen { sent, .. } if sent >= cfg.breaker.half_open_probes => {
                return hold(
                    HoldKind::Breaker,
                    None,
                    format!("circuit half-open: {sent} probes in flight"),
                );
            }
            _ => {}
        }
        if cfg.probe_first && !self.answered && in_flight >= 1 {
            return hold(
                HoldKind::Probe,
                None,
                "first request to this endpoint in flight; waiting for its answer".into(),
            );
        }
        if cfg.learn_from_headers {
            if let Some(reset) = self.quota_reset_at {
                if now >= reset {
                    // A new window. Attempts still in flight will likely land in it and count.
                    self.quota_tokens = self
                        .quota_limit
                        .map(|l| l.saturating_sub(u64::from(in_flight)));
                    self.quota_reset_at = None;
                    self.ok_in_window = 0;
                    self.ok_since = Some(reset);
                }
            }
            if self.quota_tokens == Some(0) {
                match self.quota_reset_at {
                    Some(reset) => {
                        return hold(
                            HoldKind::Quota,
                            Some(reset),
                            format!("quota spent until {reset}"),
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
                    None => self.quota_tokens = Some(1),
                }
            }
        }
        if let Some(rate) = cfg.rate {
            let tolerance = rate.interval() * cfg.burst.saturating_sub(1);
            let tat = self.tat.unwrap_or(now).max(now);
            let earliest = Timestamp::from_unix_millis(
                tat.as_unix_millis() - i64::try_from(tolerance.as_millis()).unwrap_or(i64::MAX),
            );
            if earliest > now {
                return hold(HoldKind::Rate, Some(earliest), format!("rate limit {rate}"));
            }
        }
        if let Some(started) = self.ramp_started {
            let elapsed = now.saturating_since(started);
            if elapsed >= cfg.ramp_for {
                self.ramp_started = None;
            } else {
                let step = (elapsed.as_millis() / cfg.ramp_step.as_millis().max(1)) as u32;
                let allowed = u64::from(cfg.ramp_initial.max(1))
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
                return hold(
                    HoldKind::Concurrency,
                    None,
                    format!("concurrency limit {limit} reached"),
                );
            }
        }
        if is_retry && cfg.retry_budget.enabled {
            let (firsts, retries) = self.budget_counts(cfg, now);
            let allowed = self.budget_allowed(cfg, firsts);
            if f64::from(retries) >= allowed {
                let b = &cfg.retry_budget;
                let reason = format!(
                    "retry budget spent: {retries} retries in {} against {} allowed ({}% of {firsts} first attempts + {}/s)",
                    Human(b.window),
                    allowed.floor(),
                    (b.ratio * 100.0).round(),
                    b.min_per_second
                );
                let until = self.budget.front().map(|(start, _, _)| {
                    Timestamp::from_unix_millis(
                        start + i64::try_from(b.window.as_millis()).unwrap_or(i64::MAX),
                    )
                });
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

    fn count_admission(&mut self, cfg: &EndpointConfig, now: Timestamp, is_retry: bool) {
        if let Some(rate) = cfg.rate {
            let tat = self.tat.unwrap_or(now).max(now);
            self.tat = Some(tat.saturating_add(rate.interval()));
        }
        if let Some(t) = self.quota_tokens.as_mut() {
            *t = t.saturating_sub(1);
        }
        if self.ramp_started.is_some() {
            self.ramp_admitted += 1;
        }
        if let BreakerState::HalfOpen { sent, .. } = &mut self.breaker {
            *sent += 1;
        }
        let bucket = bucket_start(now, cfg.retry_budget.window);
        match self.budget.back_mut() {
            Some((start, f, r)) if *start == bucket => {
                if is_retry {
                    *r += 1;
                } else {
                    *f += 1;
                }
            }
            _ => self
                .budget
                .push_back((bucket, u32::from(!is_retry), u32::from(is_retry))),
        }
    }

    /// Takes in what a finished attempt taught.
    pub fn record(&mut self, cfg: &EndpointConfig, now: Timestamp, o: &Observed) {
        self.answered = true;
        match (o.class, self.breaker) {
            (ResultClass::Neutral, _) => {}
            (class, BreakerState::HalfOpen { sent, succeeded }) => {
                if class == ResultClass::Success {
                    let succeeded = succeeded + 1;
                    if succeeded >= cfg.breaker.half_open_probes {
                        self.breaker = BreakerState::Closed;
                        self.breaker_opens = 0;
                        self.window.clear();
                        self.event(now, "closed", format!("{succeeded} probes succeeded"));
                        self.last_hold = Some(("circuit breaker".into(), now));
                        if cfg.rate.is_none() && self.quota_limit.is_none() {
                            self.start_ramp(now);
                        }
                    } else {
                        self.breaker = BreakerState::HalfOpen { sent, succeeded };
                    }
                } else {
                    self.open(cfg, now, "a probe failed".into());
                }
            }
            (class, BreakerState::Closed) if cfg.breaker.enabled => {
                let bucket = bucket_start(now, cfg.breaker.window);
                let (ok, failed) = (
                    u32::from(class == ResultClass::Success),
                    u32::from(class == ResultClass::Failure),
                );
                match self.window.back_mut() {
                    Some((start, s, f)) if *start == bucket => {
                        *s += ok;
                        *f += failed;
                    }
                    _ => self.window.push_back((bucket, ok, failed)),
                }
                prune(&mut self.window, now, cfg.breaker.window);
                let (s, f) = self
                    .window
                    .iter()
                    .fold((0, 0), |(s, f), (_, a, b)| (s + a, f + b));
                let total = s + f;
                if total >= cfg.breaker.min_throughput
                    && f64::from(f) >= cfg.breaker.failure_ratio * f64::from(total)
                {
                    self.open(
                        cfg,
                        now,
                        format!(
                            "{f} of {total} calls failed in {}",
                            Human(cfg.breaker.window)
                        ),
                    );
                }
            }
            _ => {}
        }
        if cfg.adaptive_concurrency {
            let max = f64::from(cfg.concurrency.unwrap_or(1000));
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
                // Successes counted over more than one of the server's windows (probes that
                // trickled through several) say nothing about one window: they may only lower
                // the limit. Counted over one window, they are the limit.
                let span = self
                    .ok_since
                    .map(|since| reset.as_unix_millis() - since.as_unix_millis())
                    .filter(|ms| *ms > 0);
                if let Some(span) = span {
                    self.quota_period_ms = Some(self.quota_period_ms.map_or(span, |p| p.min(span)));
                }
                let one_window = match (span, self.quota_period_ms) {
                    (Some(span), Some(period)) => span <= period + period / 2,
                    _ => true,
                };
                let counted = self.ok_in_window.max(1);
                self.quota_limit = Some(match self.quota_limit {
                    Some(limit) if self.quota_inferred && !one_window => limit.min(counted),
                    _ => counted,
                });
                self.quota_inferred = true;
                self.quota_tokens = Some(0);
                self.quota_reset_at = Some(reset);
            }
        }
        if cfg.learn_from_headers {
            if let Some(q) = o.quota.requests {
                self.quota_limit = q.limit.or(self.quota_limit);
                self.quota_inferred = false;
                let tokens = q.remaining.saturating_sub(u64::from(o.others_in_flight));
                let reset_at = q.reset_after.map(|d| now.saturating_add(d));
                let window_open = self.quota_reset_at.is_some_and(|r| now < r);
                if window_open {
                    // Answers can arrive out of order: within a window the count only goes down,
                    // so the lowest report wins, and the later reset.
                    self.quota_tokens = Some(self.quota_tokens.map_or(tokens, |t| t.min(tokens)));
                    self.quota_reset_at = self.quota_reset_at.max(reset_at);
                } else {
                    self.quota_tokens = Some(tokens);
                    self.quota_reset_at = reset_at;
                }
            }
            if let Some((reset, source)) = o.quota.exhausted {
                self.pause(
                    now.saturating_add(reset),
                    format!("quota spent ({source} 0), resets in {}", Human(reset)),
                );
            }
        }
    }

    /// Pauses the endpoint until `until` (or later, if already paused longer).
    pub fn pause(&mut self, until: Timestamp, reason: String) {
        if self.paused_until.is_none_or(|p| until > p) {
            self.paused_until = Some(until);
            self.pause_reason = Some(reason);
        }
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

    fn concurrency_limit(&self, cfg: &EndpointConfig) -> Option<u32> {
        let adaptive = self
            .adaptive_limit
            .filter(|_| cfg.adaptive_concurrency)
            .map(|l| l.floor().max(1.0) as u32);
        match (cfg.concurrency, adaptive) {
            (Some(c), Some(a)) => Some(c.min(a)),
            (c, a) => c.or(a),
        }
    }

    fn budget_counts(&mut self, cfg: &EndpointConfig, now: Timestamp) -> (u32, u32) {
        prune(&mut self.budget, now, cfg.retry_budget.window);
        self.budget
            .iter()
            .fold((0, 0), |(f, r), (_, a, b)| (f + a, r + b))
    }

    fn budget_allowed(&self, cfg: &EndpointConfig, firsts: u32) -> f64 {
        let b = &cfg.retry_budget;
        b.ratio * f64::from(firsts) + b.min_per_second * b.window.as_secs_f64()
    }

    /// What people see: the limits in force and the state of each mechanism.
    pub fn view(&mut self, cfg: &EndpointConfig, now: Timestamp, in_flight: u32) -> EndpointView {
        let (firsts, retries) = self.budget_counts(cfg, now);
        let allowed = self.budget_allowed(cfg, firsts);
        let hold = self.describe(cfg, now, in_flight);
        let (s, f) = self
            .window
            .iter()
            .fold((0, 0), |(s, f), (_, a, b)| (s + a, f + b));
        EndpointView {
            holding: hold,
            paused_until: self.paused_until.filter(|p| *p > now),
            pause_reason: self
                .pause_reason
                .clone()
                .filter(|_| self.paused_until.is_some_and(|p| p > now)),
            rate: cfg.rate.map(|r| r.to_string()),
            burst: cfg.burst,
            learned_limit: self.quota_limit,
            learned_remaining: self.quota_tokens,
            learned_reset_at: self.quota_reset_at,
            concurrency_limit: self.concurrency_limit(cfg),
            in_flight,
            slow_start_since: self.ramp_started,
            budget_allowed: allowed.floor() as u64,
            budget_used: retries,
            budget_remaining: (allowed - f64::from(retries)).max(0.0).floor() as u64,
            breaker: self.breaker.name(),
            breaker_until: match self.breaker {
                BreakerState::Open { until } => Some(until),
                _ => None,
            },
            breaker_window_failures: f,
            breaker_window_calls: s + f,
            breaker_history: self.breaker_history.iter().cloned().collect(),
        }
    }

    /// When this endpoint's current holds end, if a time is known.
    pub fn next_change(&self) -> Option<Timestamp> {
        let mut t: Option<Timestamp> = None;
        let mut consider = |x: Option<Timestamp>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        consider(self.paused_until);
        if let BreakerState::Open { until } = self.breaker {
            consider(Some(until));
        }
        consider(self.quota_reset_at);
        consider(self.tat);
        t
    }

    /// The holds other nodes must honour, while in force at `now`: the pause and the open
    /// breaker, each with its end and reason.
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
        SharedHolds { pause, breaker }
    }

    /// Takes in another node's holds: a pause that ends later than ours, a breaker that node
    /// opened (ours opens until the same instant, without counting as one of our openings, so
    /// the open time doubles only for what this node saw itself).
    pub fn absorb(&mut self, now: Timestamp, other: &SharedHolds) {
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
            Err(Admission::Hold(h) | Admission::HoldRetries(h) | Admission::FailRetry(h)) => {
                Some(h.reason)
            }
            Err(Admission::Go) => None,
        }
    }
}

/// The holds of an endpoint that every node honours, as (until, reason).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SharedHolds {
    pub pause: Option<(Timestamp, String)>,
    pub breaker: Option<(Timestamp, String)>,
}

/// The endpoint as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EndpointView {
    /// What holds its jobs right now, if anything.
    pub holding: Option<String>,
    pub paused_until: Option<Timestamp>,
    pub pause_reason: Option<String>,
    /// Configured rate and burst.
    pub rate: Option<String>,
    pub burst: u32,
    /// Learned from response headers.
    pub learned_limit: Option<u64>,
    pub learned_remaining: Option<u64>,
    pub learned_reset_at: Option<Timestamp>,
    pub concurrency_limit: Option<u32>,
    pub in_flight: u32,
    pub slow_start_since: Option<Timestamp>,
    pub budget_allowed: u64,
    pub budget_used: u32,
    pub budget_remaining: u64,
    pub breaker: &'static str,
    pub breaker_until: Option<Timestamp>,
    pub breaker_window_failures: u32,
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

/// Drops buckets that started a whole window or more before `now`.
fn prune(buckets: &mut VecDeque<(i64, u32, u32)>, now: Timestamp, window: Duration) {
    let horizon = now.as_unix_millis() - i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    while buckets
        .front()
        .is_some_and(|(start, _, _)| *start <= horizon)
    {
        buckets.pop_front();
    }
}
