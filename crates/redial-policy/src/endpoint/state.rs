//! The state of one endpoint and the two operations on it: admit an attempt, record its result.
//!
//! Every mechanism reads and changes the one [`EndpointState`], and the order in which
//! [`EndpointState::check`] asks them and [`EndpointState::record`] tells them is the behaviour:
//! that order is written here, once, as a sequence of calls. What each mechanism holds and why
//! is in its own module, an `impl EndpointState` block beside its helpers and its invariant:
//! `pause.rs`, `breaker.rs`, `suspect.rs`, `concurrency.rs` (first contact and the limit),
//! `learned_quota.rs`, `rate.rs` (GCRA, the learned pace, slow start), `budget.rs`; what they
//! count over time in `window.rs`; `cluster.rs` and `view.rs` for what the state shares with
//! other nodes and shows people.
//!
//! The fields stay in this one struct because its serde form is the saved state: fields are
//! saved in the order they are declared, so the saved ones keep the order they have always had
//! (`tests/saved_state/` loads states saved by earlier releases and saves them byte for byte).
//! Fields never saved sit with their mechanism's.

use super::admission::{Admission, HoldKind, Observed, Permit};
use super::breaker::{BreakerEvent, BreakerState};
use super::config::EndpointConfig;
use super::pace::Pace;
use super::pause::HandPause;
use super::rounded::Rounding;
use super::rounded_reset::{ResetOffset, MOST as ROUNDED_MOST};
use super::share::Share;
use super::unavailable::Verdict;
use super::window::{or_empty, Bucket};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};

/// Everything the limits remember about an endpoint. Serialisable, so it can be persisted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EndpointState {
    // The learned pause (pause.rs).
    /// No request before this instant: a server-given wait, or a spent quota's reset.
    pub paused_until: Option<Timestamp>,
    pub pause_reason: Option<String>,

    // The breaker (breaker.rs) and the retry budget (budget.rs).
    pub breaker: BreakerState,
    /// The last transitions, newest last, at most `HISTORY`.
    pub breaker_history: VecDeque<BreakerEvent>,
    /// Breaker window. A window saved in an older form is read as empty.
    #[serde(deserialize_with = "or_empty")]
    pub(super) window: VecDeque<Bucket>,
    /// Retry budget window.
    #[serde(deserialize_with = "or_empty")]
    pub(super) budget: VecDeque<Bucket>,
    /// Retries admitted and not yet ended. Never saved: after a restart nothing is in flight.
    #[serde(skip)]
    pub(super) retries_in_flight: u32,
    /// Which half-open period a probe belongs to: a probe's result counts only in its own.
    pub breaker_period: u32,

    // Suspect first attempts (suspect.rs).
    /// First attempts that failed since the last success (in this breaker state). Enough of them
    /// make the endpoint suspect: down, or flaky? Its retries tell, so first attempts wait.
    pub first_failures: u32,
    /// While suspect: first attempts are held until then, retries go.
    pub firsts_held_until: Option<Timestamp>,
    /// Suspicion began and no retry has yet been sent at once to end it: the next failed
    /// attempt whose retry is safe to send at once is retried now ([`EndpointState::record`]),
    /// so a flaky endpoint is told from a down one in one round trip, not after a backoff.
    #[serde(skip)]
    pub(super) probe_wanted: bool,

    // The learned quota (learned_quota.rs).
    /// The request quota learned from responses.
    pub quota_limit: Option<u64>,
    pub quota_tokens: Option<u64>,
    pub quota_reset_at: Option<Timestamp>,
    /// Whether `quota_limit` was inferred from 429s rather than read from headers.
    pub quota_inferred: bool,
    /// Successful attempts since the quota window last began (for inferring a limit).
    pub(super) ok_in_window: u64,
    /// The reset from which `ok_in_window` counts: the start of the server's window, as far as
    /// the last inferring 429 said.
    pub(super) ok_since: Option<Timestamp>,
    /// The shortest time seen between two inferred resets, in milliseconds: the server's window
    /// length, or a multiple of it until two 429s land in consecutive windows.
    pub(super) quota_period_ms: Option<i64>,
    /// A reset the server gave (by a 429's wait), from which the windows are measured, and the
    /// time from it to the latest one with the whole windows between: their length, to a
    /// fraction of a millisecond once several windows are counted.
    pub(super) quota_anchor_ms: Option<i64>,
    /// Set once a second reset came a whole number of windows after the anchor: the windows
    /// are fixed, of the measured length, and their resets can be predicted.
    pub(super) quota_windows: Option<(i64, u32)>,
    /// Whether `quota_reset_at` is this side's prediction (the inferred window's start plus its
    /// period) rather than what a response said.
    pub(super) quota_reset_predicted: bool,
    /// Whether the current quota window began at a predicted reset.
    pub(super) quota_window_predicted: bool,
    /// Windows whose inferred quota ran out and whose reset was predicted instead of probed,
    /// since the last probe.
    pub(super) quota_probe_skips: u32,
    /// How many such windows may pass between probes: none at first or after a probe found
    /// room, doubling (up to `QUOTA_PROBE_EVERY`) each time a probe is refused.
    pub(super) quota_probe_every: u32,
    /// Probing the current window for more room: it goes on until a 429, in rounds that grow.
    pub(super) quota_probing: bool,
    /// How many requests a round of probes of an inferred quota may send: one more after each
    /// round's worth of probes that found room, half as many after a 429 (at least 1, at most
    /// the inferred limit). A limiter that refills as it goes (a token bucket) refuses no
    /// probe, and one at a time would hold it to one request a round trip. Not saved.
    #[serde(skip)]
    pub(super) quota_probe_room: u32,
    /// Probes that found room since the round grew last.
    #[serde(skip)]
    pub(super) quota_probe_ok: u32,
    /// The division of the limits when the current quota window began (or its first answer
    /// came): a node that leaves does not give its part to the others before the window ends,
    /// since what it sent of it is not known.
    #[serde(skip)]
    pub(super) quota_window_share: Option<Share>,
    /// What remained for the whole cluster by the last answer that said.
    #[serde(skip)]
    pub(super) quota_cluster_remaining: Option<u64>,
    /// Requests this node sent in the current window of a quota learned from headers (from the
    /// window's start, or from the first answer that told of it; nothing is counted before a
    /// limit is known). With several nodes, this node's part of the window's limit is the most
    /// it sends in the window. Not saved: the saved state of an endpoint is the last node's to
    /// save it, and a restarted node is a new one (it joins).
    #[serde(skip)]
    pub(super) quota_sent: u64,
    /// Whether `quota_sent` counts from the current window's start (this node saw the reset
    /// pass), so that the window's first answer adds to it rather than starting it.
    #[serde(skip)]
    pub(super) quota_window_counted: bool,

    // The configured rate (rate.rs).
    /// GCRA theoretical arrival time, and its part below the millisecond (not saved: a restart
    /// loses less than a millisecond of it).
    pub(super) tat: Option<Timestamp>,
    #[serde(skip)]
    pub(super) tat_sub_ns: u32,

    // Concurrency (concurrency.rs) and slow start (rate.rs).
    /// The adaptive concurrency limit, when adaptive.
    pub adaptive_limit: Option<f64>,
    /// Slow start after a pause or an outage: when it began and how many went since.
    pub ramp_started: Option<Timestamp>,
    pub(super) ramp_admitted: u64,
    /// Whether the endpoint has answered at least once.
    pub answered: bool,

    // Saved after the fields above, though they belong with them: the breaker's openings
    // (breaker.rs), what held jobs last (admit, here), and what people set by hand
    // (pause.rs, breaker.rs).
    /// Times the breaker opened since it was last closed: each reopening doubles the open time.
    pub breaker_opens: u32,
    /// The last hold and when it ended, so that attempts can say what held them.
    pub last_hold: Option<(String, Timestamp)>,
    /// The hold in force at the last refused admission, until an admission goes through.
    pub(super) holding: Option<String>,
    /// A pause people set by hand: it holds every job until they resume the endpoint (or until
    /// its end, when one was given). Set from the shared controls, not learned here.
    pub hand_pause: Option<HandPause>,
    /// The last hand resume and breaker reset this state took in (see
    /// [`EndpointState::take_resume`], [`EndpointState::take_breaker_reset`]), so each applies
    /// once.
    pub resumed_at: Option<Timestamp>,
    pub breaker_reset_at: Option<Timestamp>,

    // The cluster (cluster.rs).
    /// This node's part of the cluster's limits (see [`Share`]); whole when alone. Set by the
    /// engine from the nodes it sees, never saved.
    #[serde(skip)]
    pub(super) share: Share,

    // The learned pace (rate.rs, pace.rs) and first contact (concurrency.rs).
    /// The rate learned from 429s that said nothing (see [`Pace`]).
    pub(super) pace: Pace,
    /// Answers counted for the first contact's widening window (up to
    /// [`super::concurrency::CONTACT_ANSWERS`]).
    pub(super) contact_answers: u32,

    // The failure streak (breaker.rs), saved after the fields above.
    /// The first failure since the endpoint's last success: how long it has been failing, which
    /// sets how long the breaker opens and suspicion holds first attempts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_since: Option<Timestamp>,
    /// How long the breaker stayed open the last time it opened (since it was last closed): a
    /// reopening lasts twice as long.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_period: Option<std::time::Duration>,

    // Quarantine (quarantine.rs), saved after the fields above.
    /// Since when the endpoint is quarantined (down for long: its jobs held, not failed, one
    /// probe an interval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quarantined_since: Option<Timestamp>,
    /// When the last outage began (the first failure before the breaker opened): what "replay
    /// what died since the outage began" replays from. Kept after the outage ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outage_began: Option<Timestamp>,
    /// Successes since slow start began: each lets two more requests go (the allowance doubles
    /// each round trip, as TCP's slow start), on top of what the time steps allow.
    #[serde(skip)]
    pub(super) ramp_successes: u64,

    // Jobs that fail for their own sake, and the quarantine's probe (quarantine.rs). Never
    // saved: a restarted node learns them again from the next failures.
    /// When the endpoint last answered a success.
    #[serde(skip)]
    pub(super) last_success: Option<Timestamp>,
    /// Of the jobs this node saw fail (at most `JOBS_REMEMBERED`), when each last failed and
    /// whether it failed again after the endpoint answered another job a success.
    #[serde(skip)]
    pub(super) job_failures: HashMap<u64, (Timestamp, bool)>,
    /// When the quarantine's current probe became due (its open period's end): for a moment
    /// after, the probe is kept for a job that has not failed yet.
    #[serde(skip)]
    pub(super) quarantine_probe_at: Option<Timestamp>,

    // Bare 503s from a limiter (unavailable.rs). Never saved.
    /// Successes and bare 503s in the last ten seconds, by bucket start (ms).
    #[serde(skip)]
    pub(super) recent_answers: VecDeque<(i64, u32, u32)>,
    /// Whether the endpoint's bare 503s are a limiter's refusals.
    #[serde(skip)]
    pub(super) unavailable: Verdict,
    /// Whether the endpoint's whole-second waits are rounded up (rounded.rs). Never saved.
    #[serde(skip)]
    pub(super) rounding: Rounding,
    /// When a quota whose reset is given in whole seconds frees, after the oldest request the
    /// server counts (rounded_reset.rs). Never saved.
    #[serde(skip)]
    pub(super) reset_offset: ResetOffset,
    /// When a quota read from headers last came back (its reset passed, or a question found
    /// room), and how long after the time before (learned_quota.rs): the forecast's window.
    /// Never saved.
    #[serde(skip)]
    pub(super) quota_back_at: Option<Timestamp>,
    #[serde(skip)]
    pub(super) quota_cycle_ms: Option<i64>,
    /// The lowest count of requests remaining reported since nothing was last in flight
    /// (learned_quota.rs). Never saved.
    #[serde(skip)]
    pub(super) quota_reported: Option<u64>,
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

    /// The first hold that applies now, if any, without counting anything. Moves time-driven
    /// states forward (an expired pause ends, an open breaker turns half-open).
    pub fn check(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        is_retry: bool,
        in_flight: u32,
    ) -> Result<(), Admission> {
        self.check_pause(cfg, now)?;
        self.check_breaker(cfg, now)?;
        if is_retry {
            self.check_quarantine_retry(now)?;
        } else {
            self.check_suspect(cfg, now)?;
        }
        self.check_contact(cfg, in_flight)?;
        self.check_quota(cfg, now, in_flight)?;
        self.check_rate(cfg, now)?;
        self.check_pace(cfg, now)?;
        self.check_ramp(cfg, now)?;
        self.check_concurrency(cfg, in_flight)?;
        if is_retry {
            self.check_budget(cfg, now)?;
        }
        Ok(())
    }

    /// Counts an admission `check` let through against every limit, and hands out its permit.
    fn count_admission(&mut self, cfg: &EndpointConfig, now: Timestamp, is_retry: bool) -> Permit {
        let reset_question = self.ask_rounded_reset(now);
        let quota_probe = self.count_quota();
        self.count_rate(cfg, now);
        self.count_ramp();
        let pace_epoch = self.count_pace(cfg, now);
        let probe = self.count_probe();
        if is_retry {
            self.retries_in_flight += 1;
        }
        Permit {
            reset_question,
            quarantine: probe.is_some() && self.quarantined_since.is_some(),
            retry: is_retry,
            probe,
            quota_probe,
            pace_epoch,
            admitted_at: Some(now),
        }
    }

    /// Hands back the permit of an attempt that did not run (given back before it started) or
    /// whose result will never be known here: its probe slot and its place as a retry in flight
    /// free, and what it took of the rate, the quota and slow start is returned.
    pub fn release(&mut self, cfg: &EndpointConfig, now: Timestamp, permit: Permit) {
        self.end_permit(&permit);
        self.unsend_rounded(&permit, now);
        self.release_rate(cfg, now);
        self.release_quota();
        self.release_ramp();
        self.release_pace(cfg, now);
    }

    /// Frees what a permit holds in the breaker and the budget; returns whether it was a probe
    /// of the current half-open period.
    fn end_permit(&mut self, permit: &Permit) -> bool {
        if permit.retry {
            self.retries_in_flight = self.retries_in_flight.saturating_sub(1);
        }
        self.end_probe(permit)
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
        self.count_answer();
        self.learn_pace(cfg, now, &permit, o);
        let probe = self.end_permit(&permit);
        self.count_budget(cfg, now, &permit, o.class);
        self.suspect(cfg, now, &permit, o.class);
        self.count_ramp_success(o.class);
        let retry_now = self.take_retry_now(now, &permit, o);
        self.record_breaker(cfg, now, probe, &permit, o.class);
        self.track_streak(now, o.class);
        self.adapt_concurrency(cfg, o);
        // A server-given wait holds every job of the endpoint, but that of a question about a
        // whole-second quota reset (rounded_reset.rs): the quota holds it.
        let asked = self.learn_rounded_reset(now, &permit, o);
        if let Some((wait, why)) = &o.server_wait {
            if !(asked && *wait <= ROUNDED_MOST) {
                self.pause(now.saturating_add(*wait), why.clone());
            }
        }
        self.learn_quota(cfg, now, o);
        retry_now
    }
}
