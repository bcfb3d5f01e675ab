//! Per-endpoint limits as configured: rate, concurrency, retry budget, breaker, slow start.

use crate::duration::{parse_duration, serde_human, Human};
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// How an endpoint is protected. Every field has a default; a file sets only what it changes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EndpointConfig {
    /// Requests allowed per interval (GCRA), e.g. "10/s", "600/m", "5/100ms". None: no configured rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Requests that may go at once above the steady rate.
    pub burst: u32,
    /// Attempts in flight at most. None: only the queue's concurrency bounds it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// Adapt the concurrency limit (AIMD): x0.9 on 429, 503 or timeout; +1 when busy and well.
    pub adaptive_concurrency: bool,
    /// Use the quotas responses report (remaining, limit, reset) to stop before a 429.
    pub learn_from_headers: bool,
    /// Until an endpoint has answered once, send one request at a time: the first answer tells
    /// its quota.
    pub probe_first: bool,
    /// First contact: until an endpoint has answered 64 requests, at most one more in flight
    /// than it answered, and 16 at most (the number doubles each round trip), so a limit met for
    /// the first time refuses few.
    pub first_contact_ramp: bool,
    /// Learn a request rate from 429s that carry no wait and no quota (a cut on each, growth
    /// with each success), send at it, and release the jobs they deferred at it.
    pub learn_pace: bool,
    /// After a pause ends or the breaker closes, without a known rate: start at `ramp_initial`
    /// requests per step and double each `ramp_step`, for `ramp_for`.
    #[serde(with = "serde_human")]
    pub ramp_for: Duration,
    #[serde(with = "serde_human")]
    pub ramp_step: Duration,
    pub ramp_initial: u32,
    pub retry_budget: BudgetConfig,
    pub breaker: BreakerConfig,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            rate: None,
            burst: 1,
            concurrency: None,
            adaptive_concurrency: false,
            learn_from_headers: true,
            probe_first: true,
            first_contact_ramp: true,
            learn_pace: true,
            ramp_for: Duration::from_secs(5),
            ramp_step: Duration::from_millis(250),
            ramp_initial: 2,
            retry_budget: BudgetConfig::default(),
            breaker: BreakerConfig::default(),
        }
    }
}

/// Limits retries that fail, not retries that succeed. Within `window`, the retries that failed
/// plus those in flight may reach `ratio` x the first attempts that ended, plus one for each
/// success (of a first attempt or a retry), plus `min_per_second` x the window. A retry that
/// succeeds gives its place back: a backlog of retries to an endpoint that answers them drains
/// at the endpoint's pace, one that keeps failing trickles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    pub enabled: bool,
    pub ratio: f64,
    pub min_per_second: f64,
    #[serde(with = "serde_human")]
    pub window: Duration,
    /// `wait` holds retries until budget returns; `fail` sends them to the dead letters as
    /// `budget_exhausted`.
    pub when_exhausted: WhenExhausted,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        BudgetConfig {
            enabled: true,
            ratio: 0.2,
            min_per_second: 1.0,
            window: Duration::from_secs(10),
            when_exhausted: WhenExhausted::Wait,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenExhausted {
    Wait,
    Fail,
}

/// Opens when retries keep failing: over `window`, once at least `min_throughput` results counted
/// (successes and failed retries), when `failure_ratio` of them are failed retries. A failed first
/// attempt does not count: a flaky API fails single calls and answers their retries, a failing
/// one fails the retries too. Transient and unknown failures are failures; deferrals and
/// permanent errors count for nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BreakerConfig {
    pub enabled: bool,
    pub failure_ratio: f64,
    pub min_throughput: u32,
    #[serde(with = "serde_human")]
    pub window: Duration,
    /// How long it stays open before letting probes through, the first time after the outage's
    /// first minute, at most: it opens for as long as the endpoint has been failing (its failure
    /// streak, since its last success), between `min_open_for` and this. Each time the probes
    /// fail and it opens again, twice as long as the time before, up to `max_open_for`. A long
    /// outage is probed ever more rarely.
    #[serde(with = "serde_human")]
    pub open_for: Duration,
    /// The shortest open period, however short the failure streak that opened it; and every
    /// open period in an outage's first minute (`breaker::PROBE_OFTEN_FOR`), so that a short
    /// outage is left within about this long of its end (its failed probes hold their jobs,
    /// they do not spend their attempts).
    #[serde(with = "serde_human")]
    pub min_open_for: Duration,
    #[serde(with = "serde_human")]
    pub max_open_for: Duration,
    /// Failing this long (since the endpoint's last success) when the breaker opens again
    /// quarantines the endpoint: its jobs are held, not failed (a failed probe costs its job no
    /// attempt; deadlines still apply), and one probe goes every `quarantine_probe_every`. The
    /// first probe that succeeds ends it (slow start follows), as does a hand resume. Zero: never.
    #[serde(with = "serde_human")]
    pub quarantine_after: Duration,
    #[serde(with = "serde_human")]
    pub quarantine_probe_every: Duration,
    /// Probes let through when half-open. Once `failure_ratio` of them failed it opens again;
    /// once too few are left to reach that, it closes. A probe whose answer counts for nothing
    /// (a 400, a deferral) or that never ran frees its place for another.
    pub half_open_probes: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        BreakerConfig {
            enabled: true,
            failure_ratio: 0.5,
            min_throughput: 10,
            window: Duration::from_secs(30),
            open_for: Duration::from_secs(5),
            min_open_for: Duration::from_secs(1),
            max_open_for: Duration::from_secs(120),
            quarantine_after: Duration::from_secs(15 * 60),
            quarantine_probe_every: Duration::from_secs(60),
            half_open_probes: 3,
        }
    }
}

impl BreakerConfig {
    /// A first open period (or suspicion's hold) fitted to a failure streak: as long as it,
    /// between `min_open_for` and `open_for`.
    pub fn fitted(&self, streak: Duration) -> Duration {
        streak.clamp(self.min_open_for.min(self.open_for), self.open_for)
    }
}

impl EndpointConfig {
    /// Checks values that would make the limits meaningless; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        let b = &self.retry_budget;
        let non_negative = |x: f64| x.is_finite() && x >= 0.0;
        if !(non_negative(b.ratio) && non_negative(b.min_per_second)) {
            return Err(
                "retry_budget: ratio and min_per_second must be numbers of at least 0".into(),
            );
        }
        if b.window.is_zero() || self.breaker.window.is_zero() || self.ramp_step.is_zero() {
            return Err(
                "retry_budget.window, breaker.window and ramp_step must be longer than zero".into(),
            );
        }
        let br = &self.breaker;
        if !(br.failure_ratio > 0.0 && br.failure_ratio <= 1.0) {
            return Err("breaker.failure_ratio must be above 0 and at most 1".into());
        }
        if br.min_open_for > br.open_for {
            return Err("breaker.min_open_for must be at most breaker.open_for".into());
        }
        if !br.quarantine_after.is_zero() && br.quarantine_probe_every.is_zero() {
            return Err("breaker.quarantine_probe_every must be longer than zero (or quarantine_after zero: no quarantine)".into());
        }
        if br.half_open_probes == 0 {
            return Err("breaker.half_open_probes must be at least 1".into());
        }
        if self.concurrency == Some(0) {
            return Err("concurrency must be at least 1".into());
        }
        if self.burst == 0 {
            return Err("burst must be at least 1".into());
        }
        Ok(())
    }
}

/// `count` requests per `per`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    /// The steady spacing between requests.
    pub fn interval(&self) -> Duration {
        self.per / self.count.max(1)
    }

    /// Parses `10/s`, `600/m`, `5/100ms`, `1000/1h`.
    pub fn parse(s: &str) -> Result<Rate, String> {
        let err = || {
            format!("invalid rate {s:?}: write requests per interval, such as \"10/s\", \"600/m\" or \"5/100ms\"")
        };
        let (count, per) = s.split_once('/').ok_or_else(err)?;
        let count: u32 = count
            .trim()
            .parse()
            .ok()
            .filter(|c| *c > 0)
            .ok_or_else(err)?;
        let per = per.trim();
        let per = if per.starts_with(|c: char| c.is_ascii_digit()) {
            parse_duration(per)
        } else {
            parse_duration(&format!("1{per}"))
        }
        .filter(|d| !d.is_zero())
        .ok_or_else(err)?;
        Ok(Rate { count, per })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, Human(self.per))
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Rate::parse(&s).map_err(de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(
            Rate::parse("10/s"),
            Ok(Rate {
                count: 10,
                per: Duration::from_secs(1)
            })
        );
        assert_eq!(
            Rate::parse("600/m").map(|r| r.interval()),
            Ok(Duration::from_millis(100))
        );
        assert_eq!(
            Rate::parse("5/100ms").map(|r| r.per),
            Ok(Duration::from_millis(100))
        );
        assert_eq!(
            Rate::parse("10/s").map(|r| r.to_string()),
            Ok("10/1s".to_owned())
        );
        for bad in ["", "10", "0/s", "x/s", "10/", "10/0s", "10/parsec"] {
            assert!(Rate::parse(bad).is_err(), "{bad}");
        }
    }
}
