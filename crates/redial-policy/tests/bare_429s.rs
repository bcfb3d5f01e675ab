//! Limiters that say nothing but "429", on virtual time: a thousand jobs at once against a leaky
//! bucket or fixed windows that answer bare 429s (no wait, no quota), through the pure endpoint
//! state as the engine drives it (a queue's concurrency of 32, answers a round trip later, a
//! refused job due again when the learned pace lets it go, otherwise after its deferral backoff).
//! Counts the refusals and the time to drain against the ideal (jobs / rate).

use redial_policy::endpoint::*;
use redial_policy::{SplitMix64, Timestamp};
use std::collections::VecDeque;
use std::time::Duration;

const T0: i64 = 1_795_996_800_000;
/// The queue's concurrency (the engine's default).
const CONCURRENCY: usize = 32;
/// Deferrals after which a job is dead (the policy's default).
const MAX_DEFERRALS: u32 = 20;

#[derive(Clone, Copy, Debug)]
enum Limiter {
    /// GCRA / leaky bucket: `rate` a second, `burst` at once.
    LeakyBucket { rate: f64, burst: u32 },
    /// `limit` a window of `window_ms`, windows fixed from time zero.
    FixedWindow { limit: u32, window_ms: i64 },
    /// A token bucket of `burst` refilled at `rate` a second whose 429s carry `Retry-After`:
    /// the whole seconds until a token is back, rounded up.
    TokenBucketRetryAfter { rate: f64, burst: u32 },
    /// A leaky bucket whose rate becomes `after` at `at_ms`.
    Halving {
        rate: f64,
        after: f64,
        burst: u32,
        at_ms: i64,
    },
}

impl Limiter {
    fn rate(self) -> f64 {
        match self {
            Limiter::LeakyBucket { rate, .. }
            | Limiter::Halving { rate, .. }
            | Limiter::TokenBucketRetryAfter { rate, .. } => rate,
            Limiter::FixedWindow { limit, window_ms } => {
                f64::from(limit) * 1000.0 / window_ms as f64
            }
        }
    }
}

/// The limiter's own state.
struct Api {
    limiter: Limiter,
    /// Leaky bucket: theoretical arrival time, in microseconds.
    tat_us: i64,
    window: i64,
    used: u32,
}

impl Api {
    fn new(limiter: Limiter) -> Api {
        Api {
            limiter,
            tat_us: 0,
            window: 0,
            used: 0,
        }
    }

    /// The wait a refusal at `ms` carries, if the limiter gives one.
    fn retry_after(&self, ms: i64) -> Option<Duration> {
        let Limiter::TokenBucketRetryAfter { rate, burst } = self.limiter else {
            return None;
        };
        let interval = (1e6 / rate) as i64;
        let free_at_us = self.tat_us - interval * i64::from(burst.saturating_sub(1));
        let secs = ((free_at_us - ms * 1000).max(1) as u64).div_ceil(1_000_000);
        Some(Duration::from_secs(secs))
    }

    /// Whether a request arriving at `ms` goes through.
    fn take(&mut self, ms: i64) -> bool {
        let now_us = ms * 1000;
        let bucket = |tat_us: &mut i64, rate: f64, burst: u32| {
            let interval = (1e6 / rate) as i64;
            let tolerance = interval * i64::from(burst.saturating_sub(1));
            if *tat_us - tolerance > now_us {
                return false;
            }
            *tat_us = (*tat_us).max(now_us) + interval;
            true
        };
        match self.limiter {
            Limiter::LeakyBucket { rate, burst }
            | Limiter::TokenBucketRetryAfter { rate, burst } => {
                bucket(&mut self.tat_us, rate, burst)
            }
            Limiter::Halving {
                rate,
                after,
                burst,
                at_ms,
            } => bucket(
                &mut self.tat_us,
                if ms < at_ms { rate } else { after },
                burst,
            ),
            Limiter::FixedWindow { limit, window_ms } => {
                let w = ms / window_ms;
                if w != self.window {
                    self.window = w;
                    self.used = 0;
                }
                if self.used < limit {
                    self.used += 1;
                    true
                } else {
                    false
                }
            }
        }
    }
}

#[derive(Debug)]
struct Run {
    refused: u64,
    dead: u64,
    drain_ms: i64,
    /// Accepted and refused requests per second.
    per_second: Vec<(u32, u32)>,
}

/// A thousand jobs (or `jobs`) at once; each answer comes `rtt_ms` after its request.
fn run(limiter: Limiter, jobs: usize, rtt_ms: i64) -> Run {
    run_with(&EndpointConfig::default(), limiter, jobs, rtt_ms)
}

fn run_with(cfg: &EndpointConfig, limiter: Limiter, jobs: usize, rtt_ms: i64) -> Run {
    run_nodes(cfg, limiter, jobs, rtt_ms, 1, None)
}

/// One node's endpoint state and its attempts in flight.
struct Node {
    state: EndpointState,
    /// In flight: (answer at, accepted, the refusal's wait, permit, deferrals).
    in_flight: VecDeque<(i64, bool, Option<Duration>, Permit, u32)>,
    /// What it last told the others.
    told: SharedHolds,
}

/// `nodes` nodes leasing from one queue, each with the queue's concurrency, in front of one
/// limiter. With `share_ms`, what a node shares (its holds, its latest bare refusal) reaches
/// the others that many milliseconds after it changed, as through the store; without, nothing
/// is shared.
fn run_nodes(
    cfg: &EndpointConfig,
    limiter: Limiter,
    jobs: usize,
    rtt_ms: i64,
    nodes: u32,
    share_ms: Option<i64>,
) -> Run {
    let cfg = cfg.clone();
    let mut api = Api::new(limiter);
    let mut fleet: Vec<Node> = (0..nodes)
        .map(|i| {
            let mut state = EndpointState::default();
            state.set_share(Share::new(i, nodes));
            Node {
                state,
                in_flight: VecDeque::new(),
                told: SharedHolds::default(),
            }
        })
        .collect();
    // What is on its way from one node to the others: (arrives at, from, holds).
    let mut mail: VecDeque<(i64, usize, SharedHolds)> = VecDeque::new();
    // Due jobs by run_at (ms), with their deferrals.
    let mut queue: Vec<(i64, u32)> = vec![(0, 0); jobs];
    let (mut done, mut refused, mut dead) = (0usize, 0u64, 0u64);
    let mut per_second: Vec<(u32, u32)> = Vec::new();
    let mut ms = 0i64;
    let mut jitter = SplitMix64::new(7);
    while done < jobs {
        assert!(
            ms < 600_000,
            "not drained in 10 minutes: {done} of {jobs} done"
        );
        let now = Timestamp::from_unix_millis(T0 + ms);
        for node in fleet.iter_mut() {
            // Answers due now.
            while node.in_flight.front().is_some_and(|(at, ..)| *at <= ms) {
                let (_, ok, wait, permit, deferrals) = node.in_flight.pop_front().expect("one due");
                let o = Observed {
                    class: if ok {
                        ResultClass::Success
                    } else {
                        ResultClass::Neutral
                    },
                    overload: !ok,
                    rate_limited: !ok,
                    unavailable: false,
                    server_wait: wait.map(|w| (w, "429 Retry-After".to_owned())),
                    quota: Default::default(),
                    others_in_flight: node.in_flight.len() as u32,
                    safe_retry: false,
                    job: None,
                };
                node.state.record(&cfg, now, permit, &o);
                if ok {
                    done += 1;
                } else if deferrals + 1 >= MAX_DEFERRALS {
                    dead += 1;
                    done += 1;
                } else {
                    // Due again at the pace's next place, else after the deferral backoff (the
                    // policy's default: equal jitter, base 5 s doubling, cap 5 min).
                    let step = (5_000i64 << deferrals.min(10)).min(300_000);
                    let backoff = step / 2 + (jitter.next_u64() % (step as u64 / 2 + 1)) as i64;
                    let at = match wait {
                        // The server's instant, plus up to a second (server_wait_jitter).
                        Some(w) => ms + w.as_millis() as i64 + (jitter.next_u64() % 1_000) as i64,
                        None => node
                            .state
                            .pace_release(&cfg, now)
                            .map_or(ms + backoff, |t| t.as_unix_millis() - T0),
                    };
                    queue.push((at, deferrals + 1));
                }
            }
        }
        if let Some(delay) = share_ms {
            for (i, node) in fleet.iter_mut().enumerate() {
                let holds = node.state.shareable(now);
                if holds != node.told && holds != SharedHolds::default() {
                    mail.push_back((ms + delay, i, holds.clone()));
                }
                node.told = holds;
            }
            while mail.front().is_some_and(|(at, ..)| *at <= ms) {
                let (_, from, holds) = mail.pop_front().expect("one due");
                for (i, node) in fleet.iter_mut().enumerate() {
                    if i != from {
                        node.state.absorb(now, &holds);
                    }
                }
            }
        }
        // Leases: due jobs, oldest due first, while the endpoint admits; the nodes take turns.
        queue.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        let first = (ms as usize) % fleet.len();
        for k in 0..fleet.len() {
            let node = &mut fleet[(first + k) % nodes as usize];
            while node.in_flight.len() < CONCURRENCY
                && queue.last().is_some_and(|(at, _)| *at <= ms)
            {
                let Admission::Go(permit) =
                    node.state
                        .admit(&cfg, now, false, node.in_flight.len() as u32)
                else {
                    break;
                };
                let (_, deferrals) = queue.pop().expect("a due job");
                // Arrives half a round trip later.
                let ok = api.take(ms + rtt_ms / 2);
                let wait = (!ok).then(|| api.retry_after(ms + rtt_ms / 2)).flatten();
                let second = (ms / 1000) as usize;
                if per_second.len() <= second {
                    per_second.resize(second + 1, (0, 0));
                }
                if ok {
                    per_second[second].0 += 1;
                } else {
                    per_second[second].1 += 1;
                    refused += 1;
                }
                node.in_flight
                    .push_back((ms + rtt_ms.max(1), ok, wait, permit, deferrals));
            }
        }
        ms += 1;
    }
    Run {
        refused,
        dead,
        drain_ms: ms,
        per_second,
    }
}

fn check(limiter: Limiter, jobs: usize) -> Run {
    let r = run(limiter, jobs, 2);
    let ideal_ms = jobs as f64 / limiter.rate() * 1000.0;
    let ratio = r.drain_ms as f64 / ideal_ms;
    eprintln!(
        "{limiter:?}: {} refused ({:.1}%), {} dead, drained in {} ms ({ratio:.2}x the ideal {ideal_ms:.0} ms)",
        r.refused,
        r.refused as f64 * 100.0 / jobs as f64,
        r.dead,
        r.drain_ms
    );
    r
}

/// The goals of issue 30 for bare 429s: refused at most 10% of the jobs, drained within 1.25x
/// of jobs / rate, none dead; against leaky buckets and fixed windows of several rates.
#[test]
fn a_thousand_jobs_against_limiters_that_say_nothing() {
    let limiters = [
        Limiter::LeakyBucket {
            rate: 20.0,
            burst: 5,
        },
        Limiter::LeakyBucket {
            rate: 50.0,
            burst: 10,
        },
        Limiter::LeakyBucket {
            rate: 200.0,
            burst: 20,
        },
        Limiter::FixedWindow {
            limit: 20,
            window_ms: 1000,
        },
        Limiter::FixedWindow {
            limit: 50,
            window_ms: 1000,
        },
        Limiter::FixedWindow {
            limit: 200,
            window_ms: 1000,
        },
    ];
    let mut failed = Vec::new();
    for l in limiters {
        let r = check(l, 1000);
        let ideal_ms = 1000.0 / l.rate() * 1000.0;
        if r.refused > 100 || r.drain_ms as f64 > 1.25 * ideal_ms || r.dead > 0 {
            failed.push(format!("{l:?}: {r:?}"));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A limiter whose rate halves midway: the pace follows, and the refusals stay bounded.
#[test]
fn the_pace_follows_a_limit_that_halves() {
    let l = Limiter::Halving {
        rate: 50.0,
        after: 25.0,
        burst: 10,
        at_ms: 10_000,
    };
    let r = check(l, 1000);
    // 500 at 50/s, then 500 at 25/s: 30 s ideal.
    assert!(r.dead == 0 && r.refused <= 100, "{r:?}");
    assert!(r.drain_ms <= 30_000 * 5 / 4, "{r:?}");
    // Within a few seconds of the change, the accepted rate is the new one.
    let after: u32 = r.per_second[13..20].iter().map(|(ok, _)| ok).sum();
    assert!(
        (7 * 22..=7 * 26).contains(&after),
        "{:?}",
        &r.per_second[8..20]
    );
}

/// What issue 30 measured from outside, before the pace: without it (and without the first
/// contact's ramp) a bare 429 backs off only its own job, so the next goes at once: more
/// refusals than jobs, and a drain of several times the ideal.
#[test]
fn without_the_pace_a_bare_429_backs_off_only_its_own_job() {
    let cfg = EndpointConfig {
        learn_pace: false,
        first_contact_ramp: false,
        ..EndpointConfig::default()
    };
    let l = Limiter::LeakyBucket {
        rate: 50.0,
        burst: 10,
    };
    let r = run_with(&cfg, l, 1000, 2);
    eprintln!(
        "without the pace: {} refused, drained in {} ms",
        r.refused, r.drain_ms
    );
    assert!(r.refused > 1000, "{} refused", r.refused);
    assert!(r.drain_ms > 40_000, "drained in {} ms", r.drain_ms);
}

/// A limit met for the first time costs few refusals: 600 jobs at once against a token bucket
/// of 50 a second with a burst of 50 whose 429s carry `Retry-After` (at most 5% refused; issue
/// 30 measured 40 before the first contact's ramp, most sent before the first 429 came back).
#[test]
fn a_limit_met_for_the_first_time_refuses_few() {
    let l = Limiter::TokenBucketRetryAfter {
        rate: 50.0,
        burst: 50,
    };
    let before = EndpointConfig {
        first_contact_ramp: false,
        ..EndpointConfig::default()
    };
    let old = run_with(&before, l, 600, 2);
    let new = check(l, 600);
    eprintln!("without the ramp: {} refused", old.refused);
    assert!(new.refused <= 30, "{new:?}");
    assert_eq!(new.dead, 0);
}

/// Three nodes in front of one limiter that says nothing, sharing what each learns through the
/// store (here 5 ms later): the goals hold for the cluster as for one node, and the cluster does
/// not refuse more than the nodes would each learning alone.
#[test]
fn three_nodes_learn_one_pace_together() {
    let limiters = [
        Limiter::LeakyBucket {
            rate: 50.0,
            burst: 10,
        },
        Limiter::FixedWindow {
            limit: 50,
            window_ms: 1000,
        },
        Limiter::LeakyBucket {
            rate: 200.0,
            burst: 20,
        },
    ];
    let cfg = EndpointConfig::default();
    let mut failed = Vec::new();
    for l in limiters {
        let ideal_ms = 1000.0 / l.rate() * 1000.0;
        let shared = run_nodes(&cfg, l, 1000, 2, 3, Some(5));
        let alone = run_nodes(&cfg, l, 1000, 2, 3, None);
        eprintln!(
            "{l:?}, 3 nodes: shared {} refused, {:.2}x; each alone {} refused, {:.2}x",
            shared.refused,
            shared.drain_ms as f64 / ideal_ms,
            alone.refused,
            alone.drain_ms as f64 / ideal_ms
        );
        if shared.refused > 100
            || shared.refused > alone.refused
            || shared.drain_ms as f64 > 1.25 * ideal_ms
            || shared.dead > 0
        {
            failed.push(format!("{l:?}: {shared:?}"));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A token bucket whose 429s carry `Retry-After` (whole seconds) reports no quota, so its
/// first 429 infers one. The bucket refills as it goes: once the inferred quota is spent, a
/// probe finds room at once, and no 429 comes to say when a window resets. Such an endpoint
/// must still be drained near its rate, not one request at a time, one a round trip (found by
/// `redial simulate`: 3,000 jobs against 100 a second, answers 50 ms after their requests, took
/// 2m14s, 22 a second).
#[test]
fn a_token_bucket_that_says_when_is_drained_near_its_rate() {
    for (rate, burst, jobs) in [(100.0, 100, 3000), (50.0, 50, 1500)] {
        let l = Limiter::TokenBucketRetryAfter { rate, burst };
        let r = run(l, jobs, 50);
        let ideal_ms = jobs as f64 / rate * 1000.0;
        eprintln!(
            "{l:?}: drained in {} ms (ideal {ideal_ms}), {} refused",
            r.drain_ms, r.refused
        );
        assert!(r.dead == 0, "{r:?}");
        assert!(r.drain_ms as f64 <= 1.25 * ideal_ms, "{l:?}: {r:?}");
        // Probing past the inferred quota finds the bucket's rate by going over it now and
        // then: about 12% refused (a plain retry loop, 32 at once against it, is refused for
        // most of its requests). One at a time refused 1% and drained 4.5 times slower.
        assert!(r.refused as usize <= jobs * 15 / 100, "{l:?}: {r:?}");
    }
}
