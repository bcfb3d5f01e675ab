//! Issue 54: jobs that fail for their own sake on an endpoint that answers others, run through
//! the pure core as the engine runs them (`decide`, `EndpointState::admit`,
//! `EndpointState::finish`, `Finished::apply`) in virtual time. Every such job ends in its
//! dead-letter category within a bound, healthy jobs are never held behind them, and a
//! quarantine's probe goes to a job not yet tried before a retry.

mod common;

use proptest::prelude::*;
use redial_policy::endpoint::*;
use redial_policy::{
    decide, Action, Backoff, DeadCategory, FixedJitter, JobCounters, Method, Outcome, Policy,
    Response, Strategy as BackoffStrategy, Timestamp,
};
use std::time::Duration;

const T0: i64 = 1_795_996_800_000;
/// Virtual time moves in steps of this.
const STEP: i64 = 10;
/// An answer comes this long after its request.
const ROUND_TRIP: i64 = 5;

struct Job {
    arrived: i64,
    poison: bool,
    counters: JobCounters,
    run_at: i64,
    /// When it was first sent, and when it ended (completed or dead), with its category.
    started: Option<i64>,
    ended: Option<(i64, Option<DeadCategory>)>,
    flying: bool,
}

struct Flight {
    job: usize,
    permit: Permit,
    answer_at: i64,
}

/// One endpoint whose poison jobs fail on every attempt (a bare 503) while its healthy jobs,
/// arriving every `gap` ms, succeed; unlimited concurrency, leases in (run time, arrival)
/// order, as the engine's.
struct Model {
    cfg: EndpointConfig,
    policy: Policy,
    state: EndpointState,
    jobs: Vec<Job>,
    flights: Vec<Flight>,
    now: i64,
}

impl Model {
    fn at(&self) -> Timestamp {
        Timestamp::from_unix_millis(self.now)
    }

    fn add(&mut self, poison: bool) {
        let now = self.now;
        let mut counters = JobCounters::new(Timestamp::from_unix_millis(now));
        counters.has_idempotency_key = true;
        counters.method = Method::from_name("POST");
        self.jobs.push(Job {
            arrived: now,
            poison,
            counters,
            run_at: now,
            started: None,
            ended: None,
            flying: false,
        });
    }

    /// The answers due now, then a lease pass.
    fn step(&mut self) {
        let at = self.at();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flights)
            .into_iter()
            .partition(|f| f.answer_at <= self.now);
        self.flights = later;
        for f in due {
            let job = &mut self.jobs[f.job];
            job.flying = false;
            let outcome = Outcome::Response(Response::new(if job.poison { 503 } else { 200 }));
            let mut d = decide(
                &outcome,
                &job.counters,
                &self.policy,
                at,
                &mut FixedJitter(0.5),
            );
            let mut o = Observed::of(&outcome, &d, at);
            o.job = Some(f.job as u64);
            let finished = self.state.finish(&self.cfg, at, f.permit, &o);
            job.counters = finished.apply(&mut d, &job.counters, &self.policy, at);
            match d.action {
                Action::Complete => job.ended = Some((self.now, None)),
                Action::Dead(c) => job.ended = Some((self.now, Some(c))),
                Action::Retry { at: t, .. } | Action::Defer { until: t, .. } => {
                    job.run_at = t.as_unix_millis();
                }
            }
            if let Some(since) = finished.recovered_from {
                // The outage is over: retries scheduled since it began are due now.
                for j in &mut self.jobs {
                    if j.ended.is_none()
                        && !j.flying
                        && j.counters.failures > 0
                        && j.run_at > self.now
                        && since <= at
                    {
                        j.run_at = self.now;
                    }
                }
            }
        }
        let mut order: Vec<usize> = (0..self.jobs.len())
            .filter(|&k| {
                let j = &self.jobs[k];
                j.ended.is_none() && !j.flying && j.run_at <= self.now
            })
            .collect();
        order.sort_by_key(|&k| (self.jobs[k].run_at, k));
        let (mut firsts, mut retries) = (true, true);
        for k in order {
            let retry = self.jobs[k].counters.failures > 0;
            if (retry && !retries) || (!retry && !firsts) {
                continue;
            }
            let n = u32::try_from(self.flights.len()).expect("few");
            match self.state.admit(&self.cfg, at, retry, n) {
                Admission::Go(permit) => {
                    let job = &mut self.jobs[k];
                    job.flying = true;
                    job.started.get_or_insert(self.now);
                    self.flights.push(Flight {
                        job: k,
                        permit,
                        answer_at: self.now + ROUND_TRIP,
                    });
                }
                Admission::HoldRetries(_) | Admission::FailRetry(_) => retries = false,
                Admission::HoldFirsts(_) => firsts = false,
                Admission::Hold(_) => break,
            }
        }
    }
}

fn model(quarantine_after_s: u64, probe_every_ms: u64, max_attempts: u32, cap_ms: u64) -> Model {
    let cfg = EndpointConfig {
        breaker: BreakerConfig {
            quarantine_after: Duration::from_secs(quarantine_after_s),
            quarantine_probe_every: Duration::from_millis(probe_every_ms),
            ..BreakerConfig::default()
        },
        ..EndpointConfig::default()
    };
    let policy = Policy {
        max_attempts,
        transient: Backoff {
            strategy: BackoffStrategy::FullJitter,
            base: Duration::from_millis(100),
            factor: 2.0,
            cap: Duration::from_millis(cap_ms),
        },
        ..Policy::default()
    };
    Model {
        cfg,
        policy,
        state: EndpointState::default(),
        jobs: Vec::new(),
        flights: Vec::new(),
        now: T0,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(64), ..ProptestConfig::default() })]

    /// On an endpoint that answers its healthy jobs (one every `gap`), every job that fails on
    /// every attempt ends dead (`transient_exhausted`) within its attempts' backoff plus the
    /// breaker's holds: at most `max_attempts` x (the backoff's cap + `max_open_for` + a probe
    /// interval) after it arrived; quarantine never holds it for good. No healthy job waits
    /// longer than the breaker's longest open period plus a probe interval.
    #[test]
    fn every_job_that_fails_for_its_own_sake_ends_dead_within_a_bound(
        poison_at in proptest::collection::vec(0u64..60_000, 1..30),
        gap in 50i64..3_000,
        quarantine_after_s in 5u64..60,
        probe_every_ms in 1_000u64..10_000,
        max_attempts in 1u32..15,
        cap_ms in 200u64..10_000,
    ) {
        let mut m = model(quarantine_after_s, probe_every_ms, max_attempts, cap_ms);
        let max_open = i64::try_from(m.cfg.breaker.max_open_for.as_millis()).expect("small");
        let bound = i64::from(max_attempts)
            * (i64::try_from(cap_ms).expect("small") + max_open + i64::try_from(probe_every_ms).expect("small"))
            + gap;
        let mut poison_at = poison_at;
        poison_at.sort_unstable();
        let mut next_poison = 0;
        let mut next_healthy = T0;
        let end = T0 + 60_000 + bound + 1_000;
        while m.now <= end {
            while next_poison < poison_at.len()
                && T0 + i64::try_from(poison_at[next_poison]).expect("small") <= m.now
            {
                m.add(true);
                next_poison += 1;
            }
            if m.now >= next_healthy {
                m.add(false);
                next_healthy += gap;
            }
            m.step();
            if next_poison == poison_at.len()
                && m.jobs.iter().filter(|j| j.poison).all(|j| j.ended.is_some())
            {
                break;
            }
            m.now += STEP;
        }
        for j in m.jobs.iter().filter(|j| j.poison) {
            let (ended, category) = j.ended.ok_or_else(|| {
                TestCaseError::fail(format!("a poison job that arrived at {} never ended", j.arrived - T0))
            })?;
            // Its attempts spent; or, when its bare 503s among the others' successes were taken
            // for a limiter's refusals (`endpoint/unavailable.rs`), its deferrals.
            prop_assert!(
                matches!(
                    category,
                    Some(DeadCategory::TransientExhausted | DeadCategory::DeferralExhausted)
                ),
                "{category:?}"
            );
            prop_assert!(ended - j.arrived <= bound, "ended {} ms after it arrived (bound {bound})", ended - j.arrived);
        }
        let longest = max_open + i64::try_from(probe_every_ms).expect("small") + 2 * STEP;
        for j in m.jobs.iter().filter(|j| !j.poison) {
            if let Some(started) = j.started {
                prop_assert!(started - j.arrived <= longest, "a healthy job waited {} ms", started - j.arrived);
            }
        }
    }

    /// A quarantined endpoint's probe goes to a job not yet tried when one is due, however
    /// many retries wait: jobs that fail with no success between (down) quarantine it, and
    /// once each was tried, one fresh job arrives; it is sent within one probe interval (and
    /// the moment kept for it).
    #[test]
    fn a_quarantines_probe_goes_first_to_a_job_not_yet_tried(
        failing in 1usize..40,
        quarantine_after_s in 5u64..60,
        probe_every_ms in 1_000u64..10_000,
        wait_probes in 0u32..5,
    ) {
        let mut m = model(quarantine_after_s, probe_every_ms, 1_000, 2_000);
        for _ in 0..failing {
            m.add(true);
        }
        while m.state.quarantined().is_none() {
            prop_assert!(m.now - T0 < 3_600_000, "never quarantined");
            m.step();
            m.now += STEP;
        }
        // Each failing job tried (older jobs not yet tried go first, in order), and some
        // probes later, a fresh job.
        while m.jobs.iter().any(|j| j.started.is_none()) {
            prop_assert!(m.now - T0 < 3_600_000, "a failing job never tried");
            m.step();
            m.now += STEP;
        }
        let tried = m.now;
        while m.now < tried + i64::from(wait_probes) * i64::try_from(probe_every_ms).expect("small") {
            m.step();
            m.now += STEP;
        }
        let fresh = m.jobs.len();
        m.add(false);
        let arrived = m.now;
        while m.jobs[fresh].started.is_none() {
            prop_assert!(m.now - arrived < 600_000, "the fresh job never went");
            m.step();
            m.now += STEP;
        }
        let waited = m.jobs[fresh].started.expect("started") - arrived;
        prop_assert!(
            waited <= i64::try_from(probe_every_ms).expect("small") + 2 * STEP,
            "the fresh job waited {waited} ms (a probe every {probe_every_ms} ms)"
        );
    }
}
