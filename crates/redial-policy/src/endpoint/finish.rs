//! What an attempt's end does to its endpoint and to its job's decision, in one place: the
//! engine (`redial-engine`'s endpoint registry and recording) and the simulator (`redial
//! simulate`) both take these steps, so a simulated attempt ends as a real one does.
//!
//! In order: the decision's outcome becomes what the endpoint learns ([`Observed::of`]); the
//! endpoint records it ([`EndpointState::finish`], which says what it asks of the job besides
//! the decision); the job's decision takes that ([`Finished::apply`]: a bare 429 goes again at
//! the learned pace, the failure that made the endpoint suspect is retried at once, a
//! quarantined endpoint's failed probe holds its job unless the job fails for its own sake),
//! which gives the job's counters after it.

use super::admission::{Observed, Permit, ResultClass};
use super::breaker::BreakerState;
use super::config::EndpointConfig;
use super::state::EndpointState;
use crate::classify::Category;
use crate::decide::{decide, Decision, JobCounters};
use crate::jitter::Jitter;
use crate::outcome::{Outcome, TransportError};
use crate::policy::Policy;
use crate::quota::quota;
use crate::time::Timestamp;
use crate::{status_phrase, Human};

/// An attempt's end, concluded: the decision with its endpoint's part in it, the job's counters
/// after it, and what the endpoint asked besides (a recovery, a hold).
#[derive(Clone, Debug, PartialEq)]
pub struct Concluded {
    pub decision: Decision,
    pub after: JobCounters,
    pub finished: Finished,
}

/// Concludes an attempt that ended in `outcome` for a job with `counters`: decides, lets its
/// endpoint learn from it (`learn`, given what the endpoint observes: the caller adds the job's
/// sequence and what else is in flight, records it in the endpoint's state, and returns what the
/// endpoint asks), and applies that to the decision. Pure but for what `learn` does.
pub fn conclude(
    outcome: &Outcome,
    counters: &JobCounters,
    policy: &Policy,
    now: Timestamp,
    jitter: &mut dyn Jitter,
    learn: impl FnOnce(Observed) -> Finished,
) -> Concluded {
    let mut decision = decide(outcome, counters, policy, now, jitter);
    let finished = learn(Observed::of(outcome, &decision, now));
    let after = finished.apply(&mut decision, counters, policy, now);
    Concluded {
        decision,
        after,
        finished,
    }
}

/// What a finished attempt tells its job besides the decision, and the engine besides the
/// endpoint's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finished {
    pub sooner: Option<Sooner>,
    /// This success ended an outage (`EndpointState::in_outage`: its breaker open or half-open,
    /// or suspect for a while) whose failures began then: the endpoint's retries scheduled since
    /// are due now.
    pub recovered_from: Option<Timestamp>,
    /// The endpoint's probe failed (its breaker opened again), and its job does not fail for
    /// its own sake: the job is held until then (the next probe), not failed, and its counters
    /// stay.
    pub held_until: Option<Timestamp>,
    /// The endpoint is quarantined (what a held job's reason says).
    pub quarantined: bool,
}

/// What an endpoint asks of a finished attempt's job besides its decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sooner {
    /// A bare 429's deferral ends at the endpoint's learned pace.
    AtPace(Timestamp),
    /// The retry goes at once: it tells whether the suspect endpoint is flaky or down.
    Now,
    /// A bare 503 that a limiter sent (`unavailable.rs`): not a failure but a refusal, deferred
    /// to the endpoint's pace (then) without spending an attempt.
    Refused(Timestamp),
    /// A 429 whose whole-second `Retry-After` is taken as rounded up (`rounded.rs`): its
    /// deferral ends at the endpoint's pace rather than at the wait.
    Rounded(Timestamp),
}

impl Observed {
    /// What an attempt's `outcome`, as `d` decided it, teaches its endpoint. `others_in_flight`
    /// is left at 0 for the caller, who knows what else is in flight.
    pub fn of(outcome: &Outcome, d: &Decision, now: Timestamp) -> Observed {
        let category = d.classification.category;
        let class = match category {
            Category::Success => ResultClass::Success,
            Category::Transient | Category::Unknown => ResultClass::Failure,
            Category::Defer | Category::Permanent => ResultClass::Neutral,
        };
        let mut o = Observed {
            class,
            overload: false,
            rate_limited: false,
            unavailable: false,
            server_wait: None,
            quota: Default::default(),
            others_in_flight: 0,
            safe_retry: d.is_safe_retry(),
            job: None,
        };
        match outcome {
            Outcome::Response(r) => {
                o.overload = matches!(r.status, 429 | 503 | 529);
                o.rate_limited = r.status == 429;
                o.unavailable = r.status == 503;
                o.server_wait = d
                    .classification
                    .server_wait
                    .filter(|_| matches!(category, Category::Defer | Category::Transient))
                    .map(|w| {
                        let why = format!(
                            "{} {}; {} {}",
                            r.status,
                            status_phrase(r.status),
                            w.source,
                            Human(w.requested)
                        );
                        (w.delay, why)
                    });
                o.quota = quota(r.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())), now);
            }
            Outcome::Transport(e) => {
                o.overload = matches!(
                    e,
                    TransportError::Timeout
                        | TransportError::ReadTimeout
                        | TransportError::ConnectTimeout
                );
            }
            Outcome::Handler(_) => {}
        }
        o
    }
}

impl EndpointState {
    /// Records a finished attempt (its `permit` back, what it taught in `observed`, whose
    /// `others_in_flight` the caller fills in) and says what the endpoint asks of its job.
    ///
    /// Over 100 lines on purpose: what one finished attempt teaches the endpoint, in the order its
    /// protections take it (pause, pace, quota, breaker, budget, quarantine), each reading what the
    /// one before decided.
    pub fn finish(
        &mut self,
        cfg: &EndpointConfig,
        now: Timestamp,
        permit: Permit,
        observed: &Observed,
    ) -> Finished {
        // A 503 that says when to come back, from an endpoint that answered a success within
        // `ALIVE` (2 s), is a limiter's refusal that says when (HAProxy, gateways, a
        // flask-limiter told to answer 503): taken as a 429 with that wait, so that the pace and
        // the quota learn from it. Otherwise every job it held came back at the wait's end
        // together and was refused again (a token bucket of 5/s answering `Retry-After: 0`: 6.6
        // refusals a job, some dead of deferrals).
        let limiter_503;
        let observed = if observed.unavailable
            && !observed.rate_limited
            && observed.server_wait.is_some()
            && self
                .last_success
                .is_some_and(|t| now.saturating_since(t) <= super::unavailable::ALIVE)
        {
            limiter_503 = Observed {
                rate_limited: true,
                ..observed.clone()
            };
            &limiter_503
        } else {
            observed
        };
        let failing_since = self.failing_since;
        let was_down = self.in_outage(cfg, now);
        let probe = permit.probe.is_some();
        // A bare 503 from an endpoint that answers others may be a limiter's refusal: then it is
        // taken as a bare 429 is (the pace learns from it), and its job deferred at the pace.
        let bare_503 = observed.is_bare_unavailable();
        self.count_unavailable(
            now,
            permit.admitted_at,
            observed.class == ResultClass::Success,
            bare_503,
        );
        if observed.class == ResultClass::Success {
            self.last_success = Some(now);
        }
        let refusal = bare_503 && cfg.learn_pace && self.unavailable_is_refusal(now);
        // A whole-second Retry-After that may be rounded up: taken as a bare 429 (the pace
        // learns from it, nothing is paused for the wait) while its rounding is asked or known.
        let rounded = cfg.learn_pace && self.wait_is_rounded(now, permit.admitted_at, observed);
        let class = if refusal {
            ResultClass::Neutral
        } else {
            observed.class
        };
        // A job that fails for its own sake is not held by a quarantine: its failure counts
        // for it. (The breaker still counts it: from here a job failing while others succeed
        // cannot be told from the first failures of an outage that builds up.)
        let poison = self.note_job(observed.job, now, class);
        let retry_now = if refusal || rounded {
            let own = Observed {
                class: if rounded {
                    observed.class
                } else {
                    ResultClass::Neutral
                },
                rate_limited: observed.rate_limited || refusal,
                server_wait: if rounded {
                    None
                } else {
                    observed.server_wait.clone()
                },
                ..observed.clone()
            };
            self.record(cfg, now, permit, &own)
        } else {
            self.record(cfg, now, permit, observed)
        };
        // A probe that failed and opened the breaker again holds its job until the next probe:
        // probing costs no attempt (unless the job fails for its own sake).
        let held_until = if probe && class == ResultClass::Failure && !poison {
            match self.breaker {
                BreakerState::Open { until } => Some(until),
                _ => None,
            }
        } else {
            None
        };
        let sooner = if retry_now {
            Some(Sooner::Now)
        } else if refusal {
            Some(Sooner::Refused(self.pace_release(cfg, now).unwrap_or(now)))
        } else if rounded {
            self.pace_release(cfg, now).map(Sooner::Rounded)
        } else {
            observed
                .is_bare_refusal()
                .then(|| self.pace_release(cfg, now))
                .flatten()
                .map(Sooner::AtPace)
        };
        let recovered = was_down && observed.class == ResultClass::Success && !self.held_as_down();
        Finished {
            sooner,
            recovered_from: recovered.then_some(failing_since).flatten(),
            held_until,
            quarantined: self.quarantined_since.is_some(),
        }
    }
}

impl Finished {
    /// Applies to the job's `decision` what its endpoint asked, and returns the job's counters
    /// after the attempt (`counters` are those before it): a job held by quarantine keeps them,
    /// but for the delay it waits.
    pub fn apply(
        &self,
        decision: &mut Decision,
        counters: &JobCounters,
        policy: &Policy,
        now: Timestamp,
    ) -> JobCounters {
        match self.sooner {
            Some(Sooner::AtPace(release)) => decision.defer_at_pace(release, now),
            Some(Sooner::Now) => decision.retry_at_once(now),
            Some(Sooner::Rounded(release)) => decision.released_at_pace(release, now),
            Some(Sooner::Refused(release)) => {
                decision.refused_at_pace(release, counters, policy, now);
            }
            None => {}
        }
        if let Some(next) = self.held_until {
            // A job at its first attempt counts this failure (it is one) and becomes a retry,
            // which waits for the next probe: a quarantine's probe goes to a job not yet tried
            // first, and the end of the outage brings retries back at once.
            let why = if self.quarantined {
                "quarantined"
            } else {
                "down"
            };
            if counters.failures == 0 && decision.retry_at_next_probe(next, now, why) {
                return counters.after(decision);
            }
            if decision.hold_until_next_probe(next, now, why) {
                return JobCounters {
                    last_delay: counters.after(decision).last_delay,
                    ..*counters
                };
            }
        }
        counters.after(decision)
    }
}
