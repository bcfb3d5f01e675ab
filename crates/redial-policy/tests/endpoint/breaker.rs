//! The breaker, its probes, and suspicion (first attempts held while retries tell flaky from down).

use super::*;

#[test]
fn a_flaky_endpoint_whose_retries_succeed_keeps_its_breaker_closed() {
    let cfg = breaker_cfg();
    let mut s = EndpointState::default();
    // Ten first attempts failed, nothing succeeded: down or flaky? First attempts wait, retries
    // go and tell.
    feed(&mut s, &cfg, 0, 10, false, ResultClass::Failure);
    assert_eq!(kind(&s.admit(&cfg, at(0), false, 0)), "hold-firsts Suspect");
    let retry = go(s.admit(&cfg, at(0), true, 0));
    s.record(&cfg, at(1), retry, &observed(ResultClass::Success));
    assert!(
        s.admit(&cfg, at(1), false, 0).is_go(),
        "a success cleared it"
    );

    // A backlog where every first call fails and every retry succeeds drains without time
    // passing: no hold waits for a clock, and the breaker never opens.
    let mut s = EndpointState::default();
    let (mut firsts, mut retries, mut done) = (300, 0, 0);
    for _ in 0..1_000 {
        if done == 300 {
            break;
        }
        while firsts > 0 {
            match s.admit(&cfg, at(0), false, 0) {
                Admission::Go(p) => {
                    s.record(&cfg, at(0), p, &observed(ResultClass::Failure));
                    firsts -= 1;
                    retries += 1;
                }
                _ => break,
            }
        }
        while retries > 0 {
            match s.admit(&cfg, at(0), true, 0) {
                Admission::Go(p) => {
                    s.record(&cfg, at(0), p, &observed(ResultClass::Success));
                    retries -= 1;
                    done += 1;
                }
                _ => break,
            }
        }
    }
    assert_eq!(done, 300);
    assert_eq!(s.breaker, BreakerState::Closed);
    assert!(s.breaker_history.is_empty());

    // Retries failing now and then among successes: under the ratio, still closed.
    let mut s = EndpointState::default();
    feed(&mut s, &cfg, 1_000, 300, true, ResultClass::Success);
    feed(&mut s, &cfg, 2_000, 200, true, ResultClass::Failure);
    assert_eq!(
        s.breaker,
        BreakerState::Closed,
        "200 failed retries against 300 successes"
    );
}

#[test]
fn suspicion_holds_first_attempts_for_at_most_the_open_time() {
    let cfg = breaker_cfg();
    let mut s = EndpointState::default();
    feed(&mut s, &cfg, 0, 10, false, ResultClass::Failure);
    let a = s.admit(&cfg, at(5), false, 0);
    let Admission::HoldFirsts(h) = &a else {
        panic!("{a:?}")
    };
    assert_eq!(
        h.until,
        Some(at(30_000)),
        "open_for after the tenth failure"
    );
    assert_eq!(s.next_change(at(5)), Some(at(30_000)));
    // No retry came to tell (jobs that are not retried): first attempts go again, one at a time.
    let p = go(s.admit(&cfg, at(30_000), false, 0));
    s.record(&cfg, at(30_001), p, &observed(ResultClass::Failure));
    assert_eq!(
        kind(&s.admit(&cfg, at(30_002), false, 0)),
        "hold-firsts Suspect"
    );
    assert_eq!(
        s.breaker,
        BreakerState::Closed,
        "first failures never open it"
    );
}

/// The failure that makes an endpoint suspect has its retry sent at once, when that retry is
/// safe to send at once: its answer tells flaky from down, which the held first attempts wait
/// on, in one round trip rather than after a backoff. One per suspicion.
#[test]
fn the_failure_that_makes_an_endpoint_suspect_is_retried_at_once() {
    let cfg = breaker_cfg();
    let safe = Observed {
        safe_retry: true,
        ..observed(ResultClass::Failure)
    };
    // Nine first attempts fail: not suspect yet, nothing moves.
    let mut s = EndpointState::default();
    for _ in 0..9 {
        let p = go(s.admit(&cfg, at(0), false, 0));
        assert!(!s.record(&cfg, at(0), p, &safe));
    }
    // The tenth makes it suspect: its retry goes at once.
    let p = go(s.admit(&cfg, at(0), false, 0));
    assert!(s.record(&cfg, at(0), p, &safe), "the retry goes at once");
    assert_eq!(kind(&s.admit(&cfg, at(1), false, 0)), "hold-firsts Suspect");
    // Only once: further failures wait their backoff.
    let p = go(s.admit(&cfg, at(1), true, 0));
    assert!(!s.record(&cfg, at(2), p, &safe));
    // The probe's success ends the suspicion; the next suspicion has a probe of its own.
    let p = go(s.admit(&cfg, at(3), true, 0));
    assert!(!s.record(&cfg, at(3), p, &observed(ResultClass::Success)));
    assert_eq!(kind(&s.admit(&cfg, at(4), false, 0)), "go");
    // A retry that is not safe to send at once (an unknown outcome of a POST without a key)
    // keeps its backoff; a retry that fails again is not sent at once either (it has told).
    let mut fresh = EndpointState::default();
    for n in 0..10 {
        let p = go(fresh.admit(&cfg, at(0), false, 0));
        assert!(
            !fresh.record(&cfg, at(0), p, &observed(ResultClass::Failure)),
            "failure {n}"
        );
    }
    let p = go(fresh.admit(&cfg, at(1), true, 0));
    assert!(!fresh.record(&cfg, at(1), p, &safe));
}

#[test]
fn retries_that_fail_again_open_the_breaker() {
    let cfg = breaker_cfg();
    let mut s = EndpointState::default();
    feed(&mut s, &cfg, 0, 10, false, ResultClass::Failure);
    feed(&mut s, &cfg, 1, 9, true, ResultClass::Failure);
    assert_eq!(
        s.breaker,
        BreakerState::Closed,
        "9 is under the minimum throughput"
    );
    feed(&mut s, &cfg, 20, 1, true, ResultClass::Failure);
    assert_eq!(s.breaker, BreakerState::Open { until: at(30_020) });
    let why = &s.breaker_history.back().expect("event").reason;
    assert_eq!(why, "10 retries failed again against 0 successes in 30s");
    assert_eq!(kind(&s.admit(&cfg, at(30_019), false, 0)), "hold Breaker");
    // Neutral answers (a 400, a deferral) count for nothing.
    let mut n = EndpointState::default();
    feed(&mut n, &cfg, 0, 10, true, ResultClass::Neutral);
    feed(&mut n, &cfg, 0, 9, true, ResultClass::Failure);
    assert_eq!(n.breaker, BreakerState::Closed);
}

#[test]
fn half_open_decides_on_the_probes_failure_ratio() {
    let cfg = breaker_cfg();
    // Three probes, then hold; one failure among them does not reopen it, two successes close.
    let mut s = half_open(&cfg);
    let [p0, p1, p2]: [Permit; 3] =
        std::array::from_fn(|_| go(s.admit(&cfg, at(30_000), false, 0)));
    assert!([&p0, &p1, &p2].iter().all(|p| p.is_probe()));
    let a = s.admit(&cfg, at(30_000), false, 3);
    assert_eq!(kind(&a), "hold Breaker");
    s.record(&cfg, at(30_100), p0, &observed(ResultClass::Failure));
    assert!(
        matches!(s.breaker, BreakerState::HalfOpen { .. }),
        "one failed probe of three"
    );
    s.record(&cfg, at(30_100), p1, &observed(ResultClass::Success));
    assert!(matches!(s.breaker, BreakerState::HalfOpen { .. }));
    s.record(&cfg, at(30_100), p2, &observed(ResultClass::Success));
    assert_eq!(s.breaker, BreakerState::Closed);
    assert!(s.ramp_started.is_some(), "traffic ramps back up");
    let names: Vec<_> = s.breaker_history.iter().map(|e| e.to.as_str()).collect();
    assert_eq!(names, ["open", "half_open", "closed"]);
    assert_eq!(s.breaker_opens, 0);

    // Two failed probes of three reopen it: in the outage's first minute for `min_open_for`
    // (here 30 s), after it for twice as long as the time before.
    let mut s = half_open(&cfg);
    let p1 = go(s.admit(&cfg, at(30_000), true, 0));
    let p2 = go(s.admit(&cfg, at(30_000), true, 0));
    s.record(&cfg, at(30_001), p1, &observed(ResultClass::Failure));
    s.record(&cfg, at(30_001), p2, &observed(ResultClass::Failure));
    assert_eq!(s.breaker, BreakerState::Open { until: at(60_001) });
    let why = &s.breaker_history.back().expect("event").reason;
    assert_eq!(why, "2 of 3 probes failed (0 succeeded)");
}

#[test]
fn every_probe_ends_whatever_its_outcome() {
    let cfg = breaker_cfg();
    // The observed case: probes answered 200, 400, 200. The 400 counts for nothing and frees
    // its place; another probe goes; two successes close the breaker.
    let mut s = half_open(&cfg);
    let [p0, p1, p2]: [Permit; 3] =
        std::array::from_fn(|_| go(s.admit(&cfg, at(30_000), false, 0)));
    s.record(&cfg, at(30_010), p0, &observed(ResultClass::Success));
    s.record(&cfg, at(30_010), p1, &observed(ResultClass::Neutral));
    let fourth = go(s.admit(&cfg, at(30_010), false, 1));
    assert!(fourth.is_probe(), "the 400's place went to another probe");
    s.record(&cfg, at(30_020), p2, &observed(ResultClass::Success));
    assert_eq!(s.breaker, BreakerState::Closed);
    // The fourth probe ends after the close: it counts as an ordinary result.
    s.record(&cfg, at(30_030), fourth, &observed(ResultClass::Failure));
    assert_eq!(s.breaker, BreakerState::Closed);

    // A probe that never ran (given back, lease lost, shutdown) frees its place too.
    let mut s = half_open(&cfg);
    let [p0, _p1, _p2]: [Permit; 3] =
        std::array::from_fn(|_| go(s.admit(&cfg, at(30_000), false, 0)));
    assert_eq!(kind(&s.admit(&cfg, at(30_000), false, 3)), "hold Breaker");
    s.release(&cfg, at(30_000), p0);
    assert!(s.admit(&cfg, at(30_000), false, 2).is_go());

    // A result of an attempt admitted before the breaker opened does not count as a probe.
    let mut s = EndpointState::default();
    let early = go(s.admit(&cfg, at(0), true, 0));
    feed(&mut s, &cfg, 0, 10, true, ResultClass::Failure);
    let probe = go(s.admit(&cfg, at(30_000), false, 1));
    s.record(&cfg, at(30_001), early, &observed(ResultClass::Failure));
    assert_eq!(
        s.breaker,
        BreakerState::HalfOpen {
            in_flight: 1,
            succeeded: 0,
            failed: 0
        }
    );
    s.release(&cfg, at(30_002), probe);

    // After a restart no probe is in flight, whatever was saved.
    let mut s = half_open(&cfg);
    for _ in 0..3 {
        let _ = go(s.admit(&cfg, at(30_000), false, 0));
    }
    let json = serde_json::to_string(&s).expect("serialises");
    let mut back: EndpointState = serde_json::from_str(&json).expect("reads back");
    assert!(back.admit(&cfg, at(30_000), false, 0).is_go());
}

/// Issue 36: a two-second outage was probed only after the breaker's whole first step (5 s).
/// Issue 54: an outage of 8 s was still left 2-3 s late (the openings doubled: 1, 2, 4 s). In
/// an outage's first minute every opening lasts `min_open_for` (a probe about every second);
/// after it, the first opening lasts as long as the endpoint has been failing (at most
/// `open_for`), and each reopening twice the one before.
#[test]
fn the_first_opening_lasts_as_long_as_the_failure_streak() {
    let cfg = EndpointConfig {
        breaker: BreakerConfig {
            open_for: Duration::from_secs(5),
            min_open_for: Duration::from_secs(1),
            max_open_for: Duration::from_secs(120),
            ..BreakerConfig::default()
        },
        ..bare()
    };
    let open_until = |s: &EndpointState| match s.breaker {
        BreakerState::Open { until } => until,
        other => panic!("not open: {other:?}"),
    };
    // Failing since 0, retries failing from 1.5 s: it opens at the tenth, for a second.
    let mut s = EndpointState::default();
    feed(&mut s, &cfg, 0, 1, false, ResultClass::Failure);
    feed(&mut s, &cfg, 1_500, 10, true, ResultClass::Failure);
    assert_eq!(open_until(&s), at(2_500));
    assert_eq!(s.failing_since, Some(at(0)));
    // Its probes fail: a second again, until the outage is a minute old.
    let mut t = 2_500;
    while t < 60_000 {
        feed(&mut s, &cfg, t, 2, true, ResultClass::Failure);
        assert_eq!(open_until(&s), at(t + 1_000), "at {t} ms");
        t += 1_000;
    }
    // Then twice as long each time.
    feed(&mut s, &cfg, t, 2, true, ResultClass::Failure);
    assert_eq!(open_until(&s), at(t + 2_000));
    t += 2_000;
    feed(&mut s, &cfg, t, 2, true, ResultClass::Failure);
    assert_eq!(open_until(&s), at(t + 4_000));
    t += 4_000;
    // Its probes succeed: closed, the streak and the doubling over.
    feed(&mut s, &cfg, t, 2, true, ResultClass::Success);
    assert_eq!(s.breaker, BreakerState::Closed);
    assert_eq!((s.failing_since, s.open_period), (None, None));

    // In the first minute, min_open_for; a streak of a minute or more opens for as long as it
    // has been failing, at most open_for.
    for (streak_ms, open_ms) in [(0, 1_000), (300, 1_000), (4_000, 1_000), (60_000, 5_000)] {
        let mut s = EndpointState::default();
        feed(&mut s, &cfg, 0, 1, false, ResultClass::Failure);
        feed(&mut s, &cfg, streak_ms, 10, true, ResultClass::Failure);
        assert_eq!(
            open_until(&s),
            at(streak_ms + open_ms),
            "streak {streak_ms} ms"
        );
    }

    // A success in between starts the streak again.
    let mut s = EndpointState::default();
    feed(&mut s, &cfg, 0, 1, false, ResultClass::Failure);
    feed(&mut s, &cfg, 10_000, 1, false, ResultClass::Success);
    feed(&mut s, &cfg, 11_000, 1, false, ResultClass::Failure);
    feed(&mut s, &cfg, 13_000, 1, true, ResultClass::Failure);
    assert_eq!(s.failing_since, Some(at(11_000)));
}

/// Slow start after the breaker closes: each success lets two more go, so an endpoint that
/// answers well is back at full speed in a few round trips; without answers, the time steps.
#[test]
fn slow_start_doubles_with_each_round_trip_of_successes() {
    let cfg = EndpointConfig {
        ramp_initial: 2,
        ..breaker_cfg()
    };
    let mut s = EndpointState::default();
    feed(&mut s, &cfg, 0, 10, true, ResultClass::Failure);
    feed(&mut s, &cfg, 30_000, 2, true, ResultClass::Success);
    assert_eq!(s.breaker, BreakerState::Closed);
    assert_eq!(s.ramp_started, Some(at(30_000)));
    // Round trips at one instant: 2 go, their successes let 4 go, theirs 8, and so on.
    let mut sent_per_trip = vec![];
    for _ in 0..5 {
        let mut permits = vec![];
        while let Admission::Go(p) = s.admit(&cfg, at(30_000), false, 0) {
            permits.push(p);
        }
        sent_per_trip.push(permits.len());
        for p in permits {
            s.record(&cfg, at(30_000), p, &observed(ResultClass::Success));
        }
    }
    assert_eq!(sent_per_trip, [2, 4, 8, 16, 32]);
    // Failures let none more go: the step's allowance alone.
    let mut s = EndpointState::default();
    feed(&mut s, &cfg, 0, 10, true, ResultClass::Failure);
    feed(&mut s, &cfg, 30_000, 2, true, ResultClass::Success);
    for _ in 0..2 {
        let p = go(s.admit(&cfg, at(30_000), false, 0));
        s.record(&cfg, at(30_000), p, &observed(ResultClass::Failure));
    }
    assert_eq!(kind(&s.admit(&cfg, at(30_000), false, 0)), "hold Ramp");
}

/// Issue 36, part 1: an endpoint down for hours was probed at the breaker's pace and its jobs
/// died one by one. Failing for `quarantine_after` when its breaker opens again, it is
/// quarantined: open for `quarantine_probe_every` at a time, one probe each time (a first
/// attempt's failure counts: the probe costs its job nothing), and the first success closes it.
#[test]
fn an_endpoint_down_for_long_is_quarantined_until_a_probe_succeeds() {
    let cfg = EndpointConfig {
        breaker: BreakerConfig {
            open_for: Duration::from_secs(5),
            min_open_for: Duration::from_secs(1),
            max_open_for: Duration::from_secs(120),
            quarantine_after: Duration::from_secs(60),
            quarantine_probe_every: Duration::from_secs(10),
            ..BreakerConfig::default()
        },
        ..bare()
    };
    let mut s = EndpointState::default();
    feed(&mut s, &cfg, 0, 1, false, ResultClass::Failure);
    feed(&mut s, &cfg, 1_000, 10, true, ResultClass::Failure);
    assert_eq!(s.outage_began, Some(at(0)), "the first failure");
    // Probes fail, the breaker reopens for twice as long each time, until the endpoint has
    // been failing for a minute.
    let mut t = 1_000;
    while s.quarantined().is_none() {
        let BreakerState::Open { until } = s.breaker else {
            panic!("{:?}", s.breaker)
        };
        t = until.as_unix_millis() - T0.as_unix_millis();
        assert!(t < 120_000, "not quarantined by {t} ms");
        feed(&mut s, &cfg, t, 2, true, ResultClass::Failure);
    }
    assert!(
        t >= 60_000,
        "quarantined after a minute of failures, at {t} ms"
    );
    assert_eq!(s.quarantined(), Some(at(t)));
    assert_eq!(
        s.breaker,
        BreakerState::Open {
            until: at(t + 10_000)
        }
    );
    let held = s.admit(&cfg, at(t + 5_000), false, 0);
    let Admission::Hold(h) = &held else {
        panic!("{held:?}")
    };
    assert!(h.reason.starts_with("quarantined since"), "{}", h.reason);
    // One probe per interval; a failed first attempt reopens it for another interval.
    let probe = go(s.admit(&cfg, at(t + 10_000), false, 0));
    assert!(probe.quarantined());
    assert_eq!(
        kind(&s.admit(&cfg, at(t + 10_000), true, 1)),
        "hold Breaker"
    );
    s.record(&cfg, at(t + 10_000), probe, &observed(ResultClass::Failure));
    assert_eq!(
        s.breaker,
        BreakerState::Open {
            until: at(t + 20_000)
        }
    );
    // The probe is kept for a job not yet tried for a quarter second; then a retry takes it.
    assert_eq!(
        kind(&s.admit(&cfg, at(t + 20_000), true, 0)),
        "hold-retries Breaker"
    );
    let t = t + 250;
    // A neutral answer (a 400) lets another probe go.
    let probe = go(s.admit(&cfg, at(t + 20_000), true, 0));
    s.record(&cfg, at(t + 20_000), probe, &observed(ResultClass::Neutral));
    let probe = go(s.admit(&cfg, at(t + 20_000), true, 0));
    // A success ends it: closed, slow start, the outage's start kept for its replay.
    s.record(&cfg, at(t + 20_000), probe, &observed(ResultClass::Success));
    assert_eq!(s.quarantined(), None);
    assert_eq!(s.breaker, BreakerState::Closed);
    assert_eq!(s.ramp_started, Some(at(t + 20_000)));
    assert_eq!(s.outage_began, Some(at(0)));
    let p = go(s.admit(&cfg, at(t + 20_000), false, 0));
    assert!(!p.quarantined());
    let history: Vec<&str> = s.breaker_history.iter().map(|e| e.to.as_str()).collect();
    assert!(history.contains(&"quarantined"), "{history:?}");
    assert_eq!(history.last(), Some(&"closed"));

    // A hand resume ends it too, and so does a hand reset.
    for by_hand in ["resume", "reset"] {
        let mut s = EndpointState::default();
        feed(&mut s, &cfg, 0, 1, false, ResultClass::Failure);
        let mut t = 1_000;
        feed(&mut s, &cfg, t, 10, true, ResultClass::Failure);
        while s.quarantined().is_none() {
            let BreakerState::Open { until } = s.breaker else {
                panic!("{:?}", s.breaker)
            };
            t = until.as_unix_millis() - T0.as_unix_millis();
            feed(&mut s, &cfg, t, 2, true, ResultClass::Failure);
        }
        let changed = match by_hand {
            "resume" => s.take_resume(&cfg, at(t + 1), at(t + 1)),
            _ => s.take_breaker_reset(at(t + 1), at(t + 1)),
        };
        assert!(changed, "{by_hand}");
        assert_eq!(
            (s.quarantined(), s.breaker),
            (None, BreakerState::Closed),
            "{by_hand}"
        );
        assert!(s.admit(&cfg, at(t + 1), false, 0).is_go(), "{by_hand}");
    }

    // Off (zero), the breaker keeps doubling up to max_open_for.
    let off = EndpointConfig {
        breaker: BreakerConfig {
            quarantine_after: Duration::ZERO,
            ..cfg.breaker.clone()
        },
        ..cfg.clone()
    };
    let mut s = EndpointState::default();
    feed(&mut s, &off, 0, 1, false, ResultClass::Failure);
    feed(&mut s, &off, 1_000, 10, true, ResultClass::Failure);
    // A probe a second in the outage's first minute, then doubling.
    for _ in 0..70 {
        let BreakerState::Open { until } = s.breaker else {
            panic!("{:?}", s.breaker)
        };
        let t = until.as_unix_millis() - T0.as_unix_millis();
        feed(&mut s, &off, t, 2, true, ResultClass::Failure);
    }
    assert_eq!(s.quarantined(), None);
    assert_eq!(s.open_period, Some(Duration::from_secs(120)));
}

/// Issue 54: a job that failed, and failed again after the endpoint answered another job a
/// success, fails for its own sake: a quarantine's probe it fails is not held (its failure
/// counts), where a job that never saw a success between its failures is held.
#[test]
fn a_job_that_fails_while_others_succeed_is_not_held_by_a_quarantine() {
    let cfg = EndpointConfig {
        breaker: BreakerConfig {
            open_for: Duration::from_secs(5),
            min_open_for: Duration::from_secs(1),
            quarantine_after: Duration::from_secs(60),
            quarantine_probe_every: Duration::from_secs(10),
            ..BreakerConfig::default()
        },
        ..bare()
    };
    let failed = |job: u64| Observed {
        job: Some(job),
        ..observed(ResultClass::Failure)
    };
    let mut s = EndpointState::default();
    // Job 1 fails, job 2 succeeds: job 1 failing again is poison from then on.
    let p = go(s.admit(&cfg, at(0), false, 0));
    s.finish(&cfg, at(0), p, &failed(1));
    let p = go(s.admit(&cfg, at(1), false, 0));
    s.finish(
        &cfg,
        at(1),
        p,
        &Observed {
            job: Some(2),
            ..observed(ResultClass::Success)
        },
    );
    // Then the endpoint fails everything (jobs 10 and up) until it is quarantined.
    let mut t = 2;
    let mut job = 10;
    while s.quarantined().is_none() {
        assert!(t < 3_600_000, "never quarantined");
        if let Admission::Go(p) = s.admit(&cfg, at(t), true, 0) {
            let j = if job == 10 { 1 } else { job };
            s.finish(&cfg, at(t), p, &failed(j));
            job += 1;
        }
        t += 100;
    }
    // Probes: job 1's failure is its own (not held); job 7's, never a success between, is held.
    let probe_at = |s: &EndpointState| match s.breaker {
        BreakerState::Open { until } => until.as_unix_millis() - T0.as_unix_millis() + 250,
        _ => t,
    };
    let t1 = probe_at(&s);
    let p = go(s.admit(&cfg, at(t1), true, 0));
    assert_eq!(
        s.finish(&cfg, at(t1), p, &failed(1)).held_until,
        None,
        "poison"
    );
    let t2 = probe_at(&s);
    let p = go(s.admit(&cfg, at(t2), true, 0));
    let first = s.finish(&cfg, at(t2), p, &failed(7));
    let p = go(s.admit(&cfg, at(probe_at(&s)), true, 0));
    let again = s.finish(&cfg, at(probe_at(&s)), p, &failed(7));
    assert!(
        first.held_until.is_some() || again.held_until.is_some(),
        "down: held"
    );
}
