//! How long an endpoint's backlog takes to drain, and which waiting jobs will miss their
//! deadline, at the limits the state holds now: pure arithmetic on the state, the backlog and
//! the attempt time the caller measured. The engine shows it (`GET /v1/endpoints/{name}`) and
//! alerts on it (`deadline_at_risk`); `redial simulate` answers the same question by running
//! the whole workload.
//!
//! The model, and what it leaves out:
//! - **When sending starts** ([`Forecast::starts_at`]): the end of what stops every job now, a
//!   pause (by hand or by an answer), an open breaker (also a quarantined endpoint's next
//!   probe), or suspect first attempts. A pause by hand with no end has no start: every job
//!   with a deadline is then at risk.
//! - **How fast it then goes** ([`Forecast::jobs_per_second`]): the smallest of the configured
//!   rate, the pace learned from bare 429s, and the concurrency (the endpoint's limit, else the
//!   workers the caller says may run at once) over the measured attempt time. A learned quota
//!   adds its windows: what remains goes before the reset, then `limit` per window. With none
//!   of these known, the pace is unknown and so is the drain.
//! - **Every job takes one request.** Retries, slow start and the retry budget are not counted:
//!   the forecast is the soonest the backlog can drain at the limits in force.
//! - **Jobs start in the order the caller lists them**, each no sooner than its `run_at`, and a
//!   job held up by one scheduled later (all of them behind it wait too) holds up those behind
//!   it by the time the jobs between them take at the pace of the limits other than a quota
//!   (each still no sooner than the quota's windows let it). Of the jobs without a deadline
//!   only the number is known, so they are taken to be due as soon as they can.
//! - **With several nodes**, the backlog is the cluster's, and so is the pace: this node's part
//!   of a learned pace or of the concurrency, times the nodes.

use super::breaker::BreakerState;
use super::config::EndpointConfig;
use super::state::EndpointState;
use crate::time::Timestamp;
use serde::Serialize;
use std::time::Duration;

/// A waiting job with a deadline, and how many waiting jobs of its endpoint go before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitingDeadline {
    pub ahead: u64,
    pub run_at: Timestamp,
    pub deadline: Timestamp,
}

/// What the caller knows besides the state.
#[derive(Clone, Debug, Default)]
pub struct ForecastInput<'a> {
    /// Waiting jobs of the endpoint, due now and scheduled later (the whole cluster's).
    pub due: u64,
    pub later: u64,
    /// How long an attempt of the endpoint takes, as measured lately; `None` when unknown.
    pub attempt_time: Option<Duration>,
    /// The most attempts of the endpoint the workers would run at once, without endpoint limits
    /// (the whole cluster's); `None` when unknown.
    pub workers: Option<u32>,
    /// The waiting jobs with a deadline, in the order they are forecast to start.
    pub deadlines: &'a [WaitingDeadline],
}

/// The forecast, as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Forecast {
    /// Waiting jobs counted (due now and scheduled later).
    pub waiting: u64,
    /// When sending can start: now, or the end of what stops every job; `None` for a pause by
    /// hand with no end.
    pub starts_at: Option<Timestamp>,
    /// Jobs a second once sending starts, in the long run; `None` when nothing bounds it that
    /// is known (no limit and no attempt timed yet).
    pub jobs_per_second: Option<f64>,
    /// What sets that pace, or why none is known, in words.
    pub limited_by: String,
    /// When the last waiting job is forecast to start; `None` when the pace or the start is
    /// unknown.
    pub drains_at: Option<Timestamp>,
    /// Seconds from now until then.
    pub drain_seconds: Option<f64>,
    /// Waiting jobs with a deadline, and those of them whose deadline falls before their
    /// forecast start.
    pub with_deadline: u64,
    pub deadline_at_risk: u64,
    /// The first job forecast to miss its deadline: its deadline and forecast start.
    pub first_at_risk: Option<AtRisk>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AtRisk {
    pub deadline: Timestamp,
    /// `None` when sending has no known start.
    pub forecast_start: Option<Timestamp>,
}

/// A learned quota, for the forecast: cluster-wide figures.
#[derive(Clone, Copy, Debug)]
struct Windows {
    limit: u64,
    remaining: u64,
    reset_at: f64,
    period: f64,
}

impl EndpointState {
    /// The forecast for the endpoint's backlog at the limits in force at `now` (see the module
    /// docs for the model). Reads the state only.
    ///
    /// Over 100 lines on purpose: one model's arithmetic (the module docs give it), step by step,
    /// each step naming the quantity it computes; the forecast properties check it whole.
    pub fn forecast(
        &self,
        cfg: &EndpointConfig,
        now: Timestamp,
        input: &ForecastInput,
    ) -> Forecast {
        let waiting = input.due + input.later;
        let start = self.forecast_start(now);
        let nodes = f64::from(self.share.of.max(1));
        let mut pace: Option<(f64, String)> = None;
        let mut consider = |rate: f64, why: String| {
            if rate.is_finite() && rate > 0.0 && pace.as_ref().is_none_or(|(r, _)| rate < *r) {
                pace = Some((rate, why));
            }
        };
        if let Some(r) = cfg.rate {
            consider(
                f64::from(r.count) / r.per.as_secs_f64(),
                format!("the configured rate, {r}"),
            );
        }
        if let Some(p) = self.pace.rate().filter(|_| cfg.learn_pace) {
            consider(
                p * nodes,
                format!("the pace learned from bare refusals, {p:.2}/s a node"),
            );
        }
        let secs = input.attempt_time.map(|d| d.as_secs_f64().max(0.001));
        if let Some(secs) = secs {
            let shown = shown(secs);
            match self.concurrency_limit(cfg) {
                Some(c) => consider(
                    f64::from(c) * nodes / secs,
                    format!("the concurrency limit, {c} a node, at {shown} an attempt"),
                ),
                None => {
                    if let Some(w) = input.workers {
                        consider(
                            f64::from(w) / secs,
                            format!("the workers, {w} at once, at {shown} an attempt"),
                        );
                    }
                }
            }
        }
        let windows = self.forecast_windows(now, nodes);
        let others = pace.as_ref().map_or(f64::INFINITY, |(r, _)| *r);
        let (jobs_per_second, limited_by) = match windows {
            Some(w) if (w.limit as f64 / w.period) < others => (
                Some(w.limit as f64 / w.period),
                format!(
                    "the learned quota, {} a window of {}",
                    w.limit,
                    shown(w.period)
                ),
            ),
            _ => match pace {
                Some((r, why)) => (Some(r), why),
                None => (
                    None,
                    "not known: no limit is configured or learned, and no attempt was timed here yet".into(),
                ),
            },
        };
        let at = |start: Timestamp, k: u64| -> Option<Timestamp> {
            let secs = offset(
                k,
                others,
                windows,
                (start.as_unix_millis() - now.as_unix_millis()) as f64 / 1000.0,
            )?;
            Some(Timestamp::from_unix_millis(
                start
                    .as_unix_millis()
                    .saturating_add((secs * 1000.0).round() as i64),
            ))
        };
        // A sweep in start order: each job with a deadline starts at its place in the schedule
        // from `start`, but no sooner than its own time, nor sooner after the one before than
        // the jobs between them take (a job scheduled later holds up those behind it).
        let mut risk = 0;
        let mut first = None;
        let mut prev: Option<(u64, Timestamp)> = None;
        let after = |s: Timestamp, k: u64, prev: Option<(u64, Timestamp)>| -> Option<Timestamp> {
            let planned = at(s, k)?;
            Some(match prev {
                // The jobs between go at the pace of the limits other than a quota (whose
                // windows `planned` keeps).
                Some((pk, pt)) => {
                    let gap = if others.is_finite() {
                        (k.saturating_sub(pk) as f64 / others * 1000.0).round() as i64
                    } else {
                        0
                    };
                    planned.max(Timestamp::from_unix_millis(pt.as_unix_millis() + gap))
                }
                None => planned,
            })
        };
        for d in input.deadlines {
            let forecast_start = start.map(|s| after(s, d.ahead, prev).unwrap_or(s).max(d.run_at));
            if let Some(f) = forecast_start {
                prev = Some((d.ahead, f));
            }
            if forecast_start.is_none_or(|f| d.deadline < f) {
                risk += 1;
                if first.is_none() {
                    first = Some(AtRisk {
                        deadline: d.deadline,
                        forecast_start,
                    });
                }
            }
        }
        let drains_at = start.and_then(|s| {
            if waiting == 0 {
                Some(s)
            } else {
                after(s, waiting - 1, prev.filter(|(k, _)| *k < waiting))
            }
        });
        Forecast {
            waiting,
            starts_at: start,
            jobs_per_second,
            limited_by: if start.is_none() {
                "paused by hand until resumed".into()
            } else {
                limited_by
            },
            drains_at,
            drain_seconds: drains_at.map(|d| d.saturating_since(now).as_secs_f64()),
            with_deadline: input.deadlines.len() as u64,
            deadline_at_risk: risk,
            first_at_risk: first,
        }
    }

    /// When sending can start: the end of what stops every job now.
    fn forecast_start(&self, now: Timestamp) -> Option<Timestamp> {
        let mut start = now;
        if let Some(p) = self.hand_pause.as_ref().filter(|p| p.in_force(now)) {
            start = start.max(p.until?);
        }
        if let Some(u) = self.paused_until {
            start = start.max(u);
        }
        if let BreakerState::Open { until } = self.breaker {
            start = start.max(until);
        }
        if let Some(u) = self.firsts_held_until {
            start = start.max(u);
        }
        Some(start)
    }

    /// The learned quota, cluster-wide, with its window: `None` when there is none, or its
    /// reset is not known and neither is its window's length. A spent quota whose reset no
    /// answer told yet (its probes find out) is taken to reset one window from now: it holds
    /// the endpoint as much as a known reset does (issue 54: a forecast that left it out said
    /// 3 s for a drain that took 30).
    fn forecast_windows(&self, now: Timestamp, nodes: f64) -> Option<Windows> {
        let limit = self.quota_limit.filter(|l| *l > 0)?;
        // A reset given in whole seconds may be asked about sooner (rounded_reset.rs).
        let back = self.next_question().or(self.quota_reset_at);
        let to_reset = match back {
            Some(reset) => (reset.as_unix_millis() - now.as_unix_millis()).max(0) as f64 / 1000.0,
            None if self.quota_tokens == Some(0) => self.window_length()? / 1000.0,
            None => return None,
        };
        // A window learned from 429s, else the time a quota read from headers took to come
        // back last, else from when it last came back to when it comes back next; without
        // these, the time to the reset stands for it (a reset that passed unseen says nothing
        // of the next window).
        let headers = !self.quota_inferred;
        let cycle = self.quota_cycle_ms.filter(|_| headers).or_else(|| {
            let (next, last) = (back?, self.quota_back_at.filter(|_| headers)?);
            Some(next.as_unix_millis() - last.as_unix_millis()).filter(|ms| *ms > 0)
        });
        let period = match self.window_length().or(cycle.map(|ms| ms as f64)) {
            Some(ms) => ms / 1000.0,
            None if to_reset > 0.0 => to_reset,
            None => return None,
        }
        .max(0.001);
        // An inferred quota is this node's own; one read from headers is the API's.
        let scale = if self.quota_inferred { nodes } else { 1.0 };
        Some(Windows {
            limit: (limit as f64 * scale) as u64,
            remaining: (self.quota_tokens.unwrap_or(limit) as f64 * scale) as u64,
            reset_at: to_reset,
            period,
        })
    }
}

/// Seconds in words, to the second from a second up (to the millisecond below).
fn shown(secs: f64) -> crate::Human {
    let ms = if secs >= 1.0 {
        secs.round() * 1000.0
    } else {
        (secs * 1000.0).round()
    };
    crate::Human(Duration::from_millis(ms as u64))
}

/// A pace in words: a second, a minute or an hour, whichever shows it best.
pub fn pace_text(per_second: f64) -> String {
    if per_second >= 1.0 {
        format!("{per_second:.1}/s")
    } else if per_second * 60.0 >= 1.0 {
        format!("{:.1}/min", per_second * 60.0)
    } else {
        format!("{:.2}/h", per_second * 3600.0)
    }
}

/// Seconds after sending starts (`start_in` seconds from now) that the `k`th job (from 0)
/// starts: at `pace` a second, and within a quota's windows. `None` when nothing bounds it.
fn offset(k: u64, pace: f64, windows: Option<Windows>, start_in: f64) -> Option<f64> {
    let spaced = |n: u64| {
        if pace.is_finite() {
            n as f64 / pace
        } else {
            0.0
        }
    };
    let Some(w) = windows else {
        return pace.is_finite().then(|| spaced(k));
    };
    // Windows are counted from now: the current one ends at its reset.
    let reset = (w.reset_at - start_in).max(0.0);
    if k < w.remaining && spaced(k) < reset {
        return Some(spaced(k));
    }
    let sent_before = w.remaining.min(if pace.is_finite() {
        (reset * pace).ceil() as u64
    } else {
        w.remaining
    });
    let j = k - sent_before.min(k);
    let per = w.limit.max(1);
    let window = j / per;
    Some(reset + window as f64 * w.period + spaced(j % per).min(w.period))
}
