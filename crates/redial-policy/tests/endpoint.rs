//! Endpoint protection, mechanism by mechanism, with plain values for time.

use redial_policy::endpoint::*;
use redial_policy::{quota, Quota, Timestamp};
use std::time::Duration;

const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0.as_unix_millis() + ms)
}

/// A config with every mechanism off, so that each test turns on only its own.
fn bare() -> EndpointConfig {
    EndpointConfig {
        probe_first: false,
        first_contact_ramp: false,
        learn_pace: false,
        learn_from_headers: false,
        retry_budget: BudgetConfig {
            enabled: false,
            ..BudgetConfig::default()
        },
        breaker: BreakerConfig {
            enabled: false,
            ..BreakerConfig::default()
        },
        ..EndpointConfig::default()
    }
}

fn observed(class: ResultClass) -> Observed {
    Observed {
        class,
        overload: false,
        rate_limited: false,
        server_wait: None,
        quota: Quota::default(),
        others_in_flight: 0,
        safe_retry: false,
    }
}

fn kind(a: &Admission) -> String {
    match a {
        Admission::Go(_) => "go".into(),
        Admission::Hold(h) => format!("hold {:?}", h.kind),
        Admission::HoldRetries(h) => format!("hold-retries {:?}", h.kind),
        Admission::HoldFirsts(h) => format!("hold-firsts {:?}", h.kind),
        Admission::FailRetry(h) => format!("fail-retry {:?}", h.kind),
    }
}

#[test]
fn a_pause_holds_everything_then_slow_start_releases_gradually() {
    let cfg = EndpointConfig {
        ramp_for: Duration::from_secs(10),
        ramp_step: Duration::from_secs(1),
        ramp_initial: 2,
        ..bare()
    };
    let mut s = EndpointState::default();
    let mut o = observed(ResultClass::Neutral);
    o.server_wait = Some((Duration::from_secs(30), "429 Retry-After 30s".into()));
    s.record(&cfg, T0, Permit::default(), &o);
    let a = s.admit(&cfg, at(29_999), false, 0);
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert_eq!((h.kind, h.until), (HoldKind::Pause, Some(at(30_000))));
    assert!(h.reason.contains("429 Retry-After 30s"), "{}", h.reason);
    // After the pause: 2 in the first step, 4 more in the second (ramp_initial 2, doubling).
    let mut went = 0;
    while s.admit(&cfg, at(30_000), false, 0).is_go() {
        went += 1;
    }
    assert_eq!(went, 2);
    assert_eq!(
        s.last_hold.as_ref().map(|(r, _)| r.as_str()),
        Some("endpoint pause (429 Retry-After 30s)")
    );
    assert_eq!(kind(&s.admit(&cfg, at(30_500), false, 0)), "hold Ramp");
    while s.admit(&cfg, at(31_000), false, 0).is_go() {
        went += 1;
    }
    assert_eq!(went, 6);
    assert_eq!(
        s.last_hold.as_ref().map(|(r, _)| r.as_str()),
        Some("slow start: 2 requests so far")
    );
    // After the ramp, no limit.
    for _ in 0..1000 {
        assert!(s.admit(&cfg, at(40_000), false, 0).is_go());
    }
}

#[test]
fn a_later_pause_extends_an_earlier_one_never_shortens_it() {
    let mut s = EndpointState::default();
    s.pause(at(10_000), "a".into());
    s.pause(at(5_000), "b".into());
    assert_eq!(
        (s.paused_until, s.pause_reason.as_deref()),
        (Some(at(10_000)), Some("a"))
    );
    s.pause(at(20_000), "c".into());
    assert_eq!(s.paused_until, Some(at(20_000)));
}

/// The permit of an admission that must go.
fn go(a: Admission) -> Permit {
    match a {
        Admission::Go(p) => p,
        other => panic!("expected go, got {other:?}"),
    }
}

fn breaker_cfg() -> EndpointConfig {
    EndpointConfig {
        breaker: BreakerConfig {
            open_for: Duration::from_secs(30),
            ..BreakerConfig::default()
        },
        ..bare()
    }
}

/// A closed breaker fed `n` results of `class`, as retries when `retry`.
fn feed(
    s: &mut EndpointState,
    cfg: &EndpointConfig,
    t: i64,
    n: u32,
    retry: bool,
    class: ResultClass,
) {
    for _ in 0..n {
        let p = go(s.admit(cfg, at(t), retry, 0));
        s.record(cfg, at(t), p, &observed(class));
    }
}

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

/// An endpoint whose breaker opened at 0 and is half-open at 30 s.
fn half_open(cfg: &EndpointConfig) -> EndpointState {
    let mut s = EndpointState::default();
    feed(&mut s, cfg, 0, 10, true, ResultClass::Failure);
    assert_eq!(s.breaker, BreakerState::Open { until: at(30_000) });
    s
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

    // Two failed probes of three reopen it, for twice as long.
    let mut s = half_open(&cfg);
    let p1 = go(s.admit(&cfg, at(30_000), true, 0));
    let p2 = go(s.admit(&cfg, at(30_000), true, 0));
    s.record(&cfg, at(30_001), p1, &observed(ResultClass::Failure));
    s.record(&cfg, at(30_001), p2, &observed(ResultClass::Failure));
    assert_eq!(s.breaker, BreakerState::Open { until: at(90_001) });
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

#[test]
fn gcra_spaces_requests_and_allows_the_burst() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("10/s").expect("rate")),
        burst: 3,
        ..bare()
    };
    let mut s = EndpointState::default();
    for _ in 0..3 {
        assert!(s.admit(&cfg, T0, false, 0).is_go());
    }
    let a = s.admit(&cfg, T0, false, 0);
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert_eq!((h.kind, h.until), (HoldKind::Rate, Some(at(100))));
    assert!(s.admit(&cfg, at(100), false, 0).is_go());
    assert_eq!(
        s.last_hold,
        Some(("rate limit 10/1s".to_owned(), at(100))),
        "the release names the hold"
    );
    assert_eq!(kind(&s.admit(&cfg, at(150), false, 0)), "hold Rate");
    // Over a long run the count stays within rate x time + burst.
    let mut went = 0;
    for ms in (1_000..11_000).step_by(10) {
        if s.admit(&cfg, at(ms), false, 0).is_go() {
            went += 1;
        }
    }
    assert!((100..=103).contains(&went), "{went} in 10 s at 10/s");
}

#[test]
fn learned_quotas_stop_before_the_429() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let mut s = EndpointState::default();
    let mut o = observed(ResultClass::Success);
    o.quota = quota(
        [
            ("x-ratelimit-limit", "5"),
            ("x-ratelimit-remaining", "3"),
            ("x-ratelimit-reset", "1"),
        ],
        T0,
    );
    o.others_in_flight = 1;
    s.record(&cfg, T0, Permit::default(), &o);
    assert_eq!(
        (s.quota_limit, s.quota_tokens),
        (Some(5), Some(2)),
        "one more may already be counted"
    );
    assert!(s.admit(&cfg, T0, false, 0).is_go());
    assert!(s.admit(&cfg, T0, false, 0).is_go());
    let a = s.admit(&cfg, at(999), false, 0);
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert_eq!((h.kind, h.until), (HoldKind::Quota, Some(at(1_000))));
    for _ in 0..5 {
        assert!(
            s.admit(&cfg, at(1_000), false, 0).is_go(),
            "the limit again after the reset"
        );
    }
    assert_eq!(kind(&s.admit(&cfg, at(1_000), false, 1)), "hold Quota");
    assert!(
        s.admit(&cfg, at(1_000), false, 0).is_go(),
        "with nothing in flight, one probe"
    );

    // A spent token quota pauses the endpoint before any 429.
    let mut o = observed(ResultClass::Success);
    o.quota = quota(
        [
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6s"),
        ],
        T0,
    );
    let mut s = EndpointState::default();
    s.record(&cfg, T0, Permit::default(), &o);
    assert_eq!(s.paused_until, Some(at(6_000)));
    assert!(s
        .pause_reason
        .as_deref()
        .expect("reason")
        .contains("x-ratelimit-remaining-tokens"));
}

/// A 429 with only `Retry-After`: the wait ends the server's window.
fn refused(wait_ms: u64) -> Observed {
    Observed {
        overload: true,
        rate_limited: true,
        server_wait: Some((Duration::from_millis(wait_ms), "429 Retry-After".into())),
        ..observed(ResultClass::Neutral)
    }
}

/// Admits `n` attempts at `now` (each answered before the next) and records them as successes.
fn succeed(s: &mut EndpointState, cfg: &EndpointConfig, now: Timestamp, n: usize) {
    for i in 0..n {
        assert_eq!(
            kind(&s.admit(cfg, now, false, 0)),
            "go",
            "attempt {i} at {now}"
        );
        s.record(cfg, now, Permit::default(), &observed(ResultClass::Success));
    }
}

#[test]
fn a_limit_inferred_from_429s_counts_one_window_only() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    // The server allows 50 per 100 ms window and says nothing but Retry-After.
    let mut s = EndpointState::default();
    succeed(&mut s, &cfg, at(10), 50);
    assert_eq!(kind(&s.admit(&cfg, at(20), false, 0)), "go");
    s.record(&cfg, at(20), Permit::default(), &refused(80));
    assert_eq!((s.quota_limit, s.quota_tokens), (Some(50), Some(0)));
    assert_eq!(kind(&s.admit(&cfg, at(99), false, 0)), "hold Pause");

    // The next window: the 50, then one probe finds it full.
    succeed(&mut s, &cfg, at(100), 50);
    assert_eq!(kind(&s.admit(&cfg, at(110), false, 0)), "go");
    s.record(&cfg, at(110), Permit::default(), &refused(90));
    assert_eq!(s.quota_limit, Some(50));

    // The 50 again, then probes slowed by a stall trickle through three windows: 20 more
    // successes that were never in one window. The 429 that ends them must not raise the limit.
    succeed(&mut s, &cfg, at(200), 50);
    for ms in [310, 340, 420, 450, 480, 510, 520, 530, 540, 550] {
        succeed(&mut s, &cfg, at(ms), 2);
    }
    assert_eq!(kind(&s.admit(&cfg, at(560), false, 0)), "go");
    s.record(&cfg, at(560), Permit::default(), &refused(40));
    assert_eq!(s.quota_limit, Some(50), "counted over several windows");

    // A server that raised its limit to 60. Its windows are known now (100 ms), and probes were
    // refused: a window whose 50 are spent may wait for the predicted reset instead of probing,
    // but a probe comes at least every ninth window, finds room, and the limit grows, counted
    // within one window.
    let mut window = 600;
    let mut waited = 0;
    loop {
        // At the boundary, or a little after it when the window's start was predicted.
        succeed(&mut s, &cfg, at(window + 6), 50);
        let a = s.admit(&cfg, at(window + 50), false, 0);
        match a {
            Admission::Hold(h) => {
                // A little after the boundary (a sixteenth of the window), never before it.
                assert_eq!((h.kind, h.until), (HoldKind::Quota, Some(at(window + 106))));
                waited += 1;
                window += 100;
                assert!(waited <= 8, "a probe at least every eighth window");
            }
            Admission::Go(p) => {
                s.record(&cfg, at(window + 50), p, &observed(ResultClass::Success));
                succeed(&mut s, &cfg, at(window + 50), 9);
                assert_eq!(kind(&s.admit(&cfg, at(window + 60), false, 0)), "go");
                s.record(&cfg, at(window + 60), Permit::default(), &refused(40));
                break;
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(
        waited >= 1,
        "windows wait for the predicted reset: {waited}"
    );
    assert_eq!(s.quota_limit, Some(60), "counted within one window");
}

#[test]
fn a_wrong_prediction_of_the_quota_window_is_dropped() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    // 10 per 100 ms window: each window's probe is refused until the window's end, so the
    // windows are learned (100 ms, seen twice) and probes become rarer.
    let mut s = EndpointState::default();
    for w in [0, 100, 200] {
        succeed(&mut s, &cfg, at(w), 10);
        assert_eq!(
            kind(&s.admit(&cfg, at(w + 50), false, 0)),
            "go",
            "probe at {w}"
        );
        s.record(&cfg, at(w + 50), Permit::default(), &refused(50));
    }
    succeed(&mut s, &cfg, at(300), 10);
    let a = s.admit(&cfg, at(350), false, 0);
    let Admission::Hold(h) = a else {
        panic!("{a:?}")
    };
    assert_eq!(h.until, Some(at(406)), "the window predicted from the 429s");
    // The server's window had not moved on (it changed its windows): the 429 at the predicted
    // reset stops the predictions; the spent quota probes again.
    assert_eq!(kind(&s.admit(&cfg, at(406), false, 0)), "go");
    s.record(&cfg, at(406), Permit::default(), &refused(164));
    assert_eq!(s.quota_limit, Some(10), "the limit stands");
    succeed(&mut s, &cfg, at(570), 10);
    assert_eq!(
        kind(&s.admit(&cfg, at(580), false, 0)),
        "go",
        "a probe, not a predicted wait"
    );
}

#[test]
fn probe_first_then_concurrency_limits() {
    let cfg = EndpointConfig {
        probe_first: true,
        concurrency: Some(3),
        ..bare()
    };
    let mut s = EndpointState::default();
    assert!(s.admit(&cfg, T0, false, 0).is_go());
    assert_eq!(kind(&s.admit(&cfg, T0, false, 1)), "hold Probe");
    s.record(&cfg, T0, Permit::default(), &observed(ResultClass::Success));
    assert!(s.admit(&cfg, T0, false, 1).is_go());
    assert!(s.admit(&cfg, T0, false, 2).is_go());
    assert_eq!(kind(&s.admit(&cfg, T0, false, 3)), "hold Concurrency");
}

#[test]
fn adaptive_concurrency_backs_off_and_grows() {
    let cfg = EndpointConfig {
        adaptive_concurrency: true,
        concurrency: Some(20),
        ..bare()
    };
    let mut s = EndpointState::default();
    let mut o = observed(ResultClass::Neutral);
    o.overload = true;
    s.record(&cfg, T0, Permit::default(), &o);
    assert_eq!(s.adaptive_limit, Some(9.0));
    let mut ok = observed(ResultClass::Success);
    ok.others_in_flight = 8;
    s.record(&cfg, T0, Permit::default(), &ok);
    assert_eq!(s.adaptive_limit, Some(10.0));
    ok.others_in_flight = 0;
    s.record(&cfg, T0, Permit::default(), &ok);
    assert_eq!(s.adaptive_limit, Some(10.0), "no growth when not busy");
    for _ in 0..50 {
        s.record(&cfg, T0, Permit::default(), &o);
    }
    assert_eq!(s.adaptive_limit, Some(1.0), "never below one");
}

#[test]
fn the_retry_budget_caps_failing_retries_not_first_attempts() {
    let budget = BudgetConfig {
        min_per_second: 0.0,
        ..BudgetConfig::default()
    };
    let cfg = EndpointConfig {
        retry_budget: budget.clone(),
        ..bare()
    };
    let mut s = EndpointState::default();
    // Ten first attempts failed: 20% of them, two retries, may fail or be in flight.
    feed(&mut s, &cfg, 0, 10, false, ResultClass::Failure);
    let r1 = go(s.admit(&cfg, T0, true, 0));
    let r2 = go(s.admit(&cfg, T0, true, 0));
    assert!(r1.is_retry());
    let a = s.admit(&cfg, T0, true, 0);
    assert_eq!(kind(&a), "hold-retries Budget");
    let Admission::HoldRetries(h) = a else {
        unreachable!()
    };
    assert_eq!(h.until, None, "ends when a retry in flight ends");
    assert!(
        h.reason.contains("0 retries failed and 2 in flight"),
        "{}",
        h.reason
    );
    assert!(
        s.admit(&cfg, T0, false, 0).is_go(),
        "first attempts still go"
    );
    // A retry that succeeds gives its place back and earns one more.
    s.record(&cfg, T0, r1, &observed(ResultClass::Success));
    let r3 = go(s.admit(&cfg, T0, true, 0));
    let r4 = go(s.admit(&cfg, T0, true, 0));
    assert_eq!(kind(&s.admit(&cfg, T0, true, 0)), "hold-retries Budget");
    // Failed retries stay spent until their bucket leaves the window.
    for p in [r2, r3, r4] {
        s.record(&cfg, at(1), p, &observed(ResultClass::Failure));
    }
    let a = s.admit(&cfg, at(2), true, 0);
    let Admission::HoldRetries(h) = a else {
        panic!("{a:?}")
    };
    assert_eq!(h.until, Some(at(10_000)));
    feed(&mut s, &cfg, 10_000, 5, false, ResultClass::Failure);
    assert!(
        s.admit(&cfg, at(10_000), true, 0).is_go(),
        "the failed retries left the window"
    );

    let fail = EndpointConfig {
        retry_budget: BudgetConfig {
            when_exhausted: WhenExhausted::Fail,
            ..budget
        },
        ..bare()
    };
    let mut s = EndpointState::default();
    assert_eq!(kind(&s.admit(&fail, T0, true, 0)), "fail-retry Budget");
}

#[test]
fn a_backlog_of_retries_drains_when_they_succeed() {
    // The default budget, no first attempts left in the window: retries whose answers are
    // successes keep going, as fast as they come back.
    let cfg = EndpointConfig {
        retry_budget: BudgetConfig::default(),
        ..bare()
    };
    let mut s = EndpointState::default();
    let mut sent = 0;
    for round in 0..20 {
        let t = 60_000 + round * 10;
        let mut permits = Vec::new();
        while let Admission::Go(p) = s.admit(&cfg, at(t), true, 0) {
            permits.push(p);
        }
        sent += permits.len();
        for p in permits {
            s.record(&cfg, at(t + 5), p, &observed(ResultClass::Success));
        }
    }
    // 10 in flight at first (1/s over 10 s), then each success earns one more.
    assert!(sent > 10_000, "only {sent} retries in 200 ms of successes");
}

#[test]
fn state_round_trips_through_json() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("5/s").expect("rate")),
        ..EndpointConfig::default()
    };
    let mut s = EndpointState::default();
    for i in 0..25 {
        if let Admission::Go(p) = s.admit(&cfg, at(i * 250), true, 0) {
            s.record(&cfg, at(i * 250), p, &observed(ResultClass::Failure));
        }
    }
    s.pause(at(60_000), "test".into());
    let json = serde_json::to_string(&s).expect("serialises");
    let back: EndpointState = serde_json::from_str(&json).expect("reads back");
    assert_eq!(back, s);
    let view = s.clone().view(&cfg, at(6_300), 0);
    assert_eq!(view.breaker, "open");
    assert!(view
        .holding
        .expect("held")
        .starts_with("endpoint paused until"));
}

#[test]
fn holds_shared_by_another_node_hold_here_too() {
    let cfg = EndpointConfig {
        breaker: BreakerConfig::default(),
        ..bare()
    };
    // Node A learns of a pause and its breaker opens.
    let mut a = EndpointState::default();
    a.pause(at(5_000), "429 Retry-After 5s".into());
    let shared = a.shareable(T0);
    assert_eq!(shared.pause, Some((at(5_000), "429 Retry-After 5s".into())));
    assert_eq!(shared.breaker, None);

    // Node B takes it in and holds its jobs until then, naming the reason.
    let mut b = EndpointState::default();
    b.absorb(T0, &shared);
    let held = b.admit(&cfg, at(100), false, 0);
    assert_eq!(kind(&held), "hold Pause");
    assert_eq!(kind(&b.admit(&cfg, at(5_001), false, 0)), "go");
    // A shorter pause shared later does not shorten it; a hold that already ended is ignored.
    let mut c = EndpointState::default();
    c.pause(at(9_000), "own".into());
    c.absorb(
        at(1),
        &SharedHolds {
            pause: Some((at(2_000), "other".into())),
            breaker: Some((at(0), "ended".into())),
            paced_until: None,
        },
    );
    assert_eq!(c.paused_until, Some(at(9_000)));
    assert_eq!(c.breaker, BreakerState::Closed);

    // An open breaker elsewhere opens ours until the same instant, not counted as our opening.
    let mut d = EndpointState::default();
    d.absorb(
        T0,
        &SharedHolds {
            pause: None,
            breaker: Some((at(30_000), "50% of 20 calls failed".into())),
            paced_until: None,
        },
    );
    assert_eq!(d.breaker, BreakerState::Open { until: at(30_000) });
    assert_eq!(d.breaker_opens, 0);
    assert_eq!(kind(&d.admit(&cfg, at(10), false, 0)), "hold Breaker");
    assert_eq!(
        d.shareable(at(10)).breaker.map(|(t, _)| t),
        Some(at(30_000)),
        "and shares it on"
    );
}

/// What stops a job admitted a moment ago from starting: a pause or an open breaker that came
/// down since, and nothing else (limits already counted it). Reading changes nothing.
#[test]
fn stopped_by_names_a_pause_or_an_open_breaker_only() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("1/s").expect("rate")),
        burst: 1,
        ..bare()
    };
    let mut s = EndpointState::default();
    assert_eq!(kind(&s.admit(&cfg, at(0), false, 0)), "go");
    // The rate holds the next job, but does not stop one already admitted.
    assert_eq!(kind(&s.admit(&cfg, at(1), false, 1)), "hold Rate");
    assert_eq!(s.stopped_by(at(1)), None);
    s.record(&cfg, at(2), Permit::default(), &refused(5_000));
    let before = s.clone();
    let why = s.stopped_by(at(3)).expect("paused");
    assert!(why.contains("paused until"), "{why}");
    assert_eq!(s, before, "reading changed nothing");
    assert_eq!(s.stopped_by(at(5_002)), None, "the pause is over");
    s.breaker = BreakerState::Open { until: at(9_000) };
    assert!(s
        .stopped_by(at(8_999))
        .expect("open")
        .contains("circuit open"));
    assert_eq!(s.stopped_by(at(9_000)), None);
}

#[test]
fn a_hand_pause_holds_everything_until_it_ends_or_is_lifted() {
    let cfg = bare();
    let mut s = EndpointState::default();
    s.hand_pause = Some(HandPause {
        since: at(0),
        until: Some(at(60_000)),
        reason: "provider maintenance".into(),
    });
    let held = s.admit(&cfg, at(1_000), false, 0);
    let Admission::Hold(h) = held else {
        panic!("expected a hold, got {held:?}")
    };
    assert_eq!(h.kind, HoldKind::Pause);
    assert_eq!(h.until, Some(at(60_000)));
    assert!(
        h.reason
            .starts_with("paused by hand until 2026-11-30T00:01:00"),
        "{}",
        h.reason
    );
    assert!(h.reason.ends_with(": provider maintenance"), "{}", h.reason);
    assert!(s.stopped_by(at(1_000)).is_some());
    assert_eq!(s.next_change(at(1_000)), Some(at(60_000)));
    assert!(s.view(&cfg, at(1_000), 0).paused_by_hand.is_some());
    // At its end it holds no more, although the control still names it.
    assert_eq!(kind(&s.admit(&cfg, at(60_000), false, 0)), "go");
    assert_eq!(s.view(&cfg, at(60_000), 0).paused_by_hand, None);
    // Without an end, it holds until lifted.
    s.hand_pause = Some(HandPause {
        since: at(0),
        until: None,
        reason: String::new(),
    });
    assert_eq!(kind(&s.admit(&cfg, at(10_000_000), true, 0)), "hold Pause");
    s.hand_pause = None;
    assert_eq!(kind(&s.admit(&cfg, at(10_000_000), true, 0)), "go");
}

#[test]
fn a_hand_resume_ends_a_server_pause_once() {
    let cfg = bare();
    let mut s = EndpointState::default();
    s.pause(at(30_000), "429 Retry-After 30s".into());
    assert!(s.take_resume(at(1_000)));
    assert_eq!(kind(&s.admit(&cfg, at(1_000), false, 0)), "go");
    // The same resume seen again (every node reads the controls often) changes nothing: a
    // pause the endpoint asked for since stays.
    s.pause(at(40_000), "429 Retry-After 38s".into());
    assert!(!s.take_resume(at(1_000)));
    assert_eq!(kind(&s.admit(&cfg, at(2_000), false, 0)), "hold Pause");
    assert!(s.take_resume(at(2_000)));
    assert_eq!(kind(&s.admit(&cfg, at(2_000), false, 0)), "go");
}

#[test]
fn a_hand_breaker_reset_closes_it_with_an_empty_window_once() {
    let cfg = breaker_cfg();
    let mut s = half_open(&cfg);
    assert!(s.take_breaker_reset(at(5_000), at(5_000)));
    assert_eq!(s.breaker, BreakerState::Closed);
    let last = s.breaker_history.back().expect("event");
    assert_eq!(last.to, "closed");
    assert!(last.reason.starts_with("reset by hand"), "{}", last.reason);
    assert_eq!(s.view(&cfg, at(5_000), 0).breaker_window_failures, 0);
    assert_eq!(kind(&s.admit(&cfg, at(5_000), false, 0)), "go");
    // Seen again: nothing. A breaker that opened since stays open.
    feed(&mut s, &cfg, 6_000, 10, true, ResultClass::Failure);
    assert!(matches!(s.breaker, BreakerState::Open { .. }));
    assert!(!s.take_breaker_reset(at(5_000), at(7_000)));
    assert!(matches!(s.breaker, BreakerState::Open { .. }));
    // Its open time starts again from the first step after a reset.
    assert_eq!(s.breaker, BreakerState::Open { until: at(36_000) });
}

#[test]
fn a_hand_resume_ends_a_spent_quotas_hold_too() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let mut s = EndpointState::default();
    s.quota_limit = Some(100);
    s.quota_tokens = Some(0);
    s.quota_reset_at = Some(at(3_600_000));
    assert_eq!(kind(&s.admit(&cfg, at(1_000), false, 0)), "hold Quota");
    assert!(s.take_resume(at(1_000)));
    assert_eq!(kind(&s.admit(&cfg, at(1_000), false, 0)), "go");
    // What was learned of the limit stays; the next answer's headers say what remains.
    assert_eq!(s.quota_limit, Some(100));
}

#[test]
fn a_hand_resume_ends_the_hold_of_a_nodes_spent_part_of_a_quota() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let mut s = EndpointState::default();
    s.set_share(Share::new(0, 3));
    // 29 of 30 remain: this node's part of them is 10, of the limit 10 (its first request
    // counted), so it sends 9 more and still holds a token of the remaining count.
    let mut o = observed(ResultClass::Success);
    o.quota = quota(
        [
            ("x-ratelimit-limit", "30"),
            ("x-ratelimit-remaining", "29"),
            ("x-ratelimit-reset", "3600"),
        ],
        T0,
    );
    s.record(&cfg, T0, Permit::default(), &o);
    let mut sent = 0;
    while s.admit(&cfg, at(1), false, sent).is_go() {
        sent += 1;
    }
    assert_eq!(sent, 9);
    assert_eq!(s.quota_tokens, Some(1));
    let a = s.admit(&cfg, at(2), false, sent);
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert!(
        h.reason.contains("this node's part (10 of 30)"),
        "{}",
        h.reason
    );
    assert!(s.take_resume(at(2)), "the part's hold was in force");
    assert!(s.admit(&cfg, at(3), false, sent).is_go());
}

/// Three nodes, each with its part of one endpoint's limits: what all three let through together
/// stays within what one node alone would.
fn three_nodes(name: &str) -> Vec<EndpointState> {
    (0..3)
        .map(|rank| {
            let mut s = EndpointState::default();
            s.set_share(Share::for_endpoint(rank, 3, name));
            s
        })
        .collect()
}

#[test]
fn a_rate_shared_by_three_nodes_holds_for_the_three_together() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("30/s").expect("rate")),
        burst: 4,
        ..bare()
    };
    let mut nodes = three_nodes("https://api.example.com");
    // Every node asks every millisecond for 10 s: the total is the cluster's rate plus its burst.
    let mut went = 0;
    for ms in 0..10_000 {
        for s in nodes.iter_mut() {
            if s.admit(&cfg, at(ms), false, 0).is_go() {
                went += 1;
            }
        }
    }
    assert!((300..=304).contains(&went), "{went} in 10 s at 30/s");
    let mut a = nodes[0].admit(&cfg, at(10_000), false, 0);
    while a.is_go() {
        a = nodes[0].admit(&cfg, at(10_000), false, 0);
    }
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert!(
        h.reason.contains("across 3 nodes") && h.reason.contains("100ms"),
        "{}",
        h.reason
    );
    // Alone again (the others died): the whole rate.
    nodes[0].set_share(Share::default());
    let mut alone = 0;
    for ms in 20_000..30_000 {
        if nodes[0].admit(&cfg, at(ms), false, 0).is_go() {
            alone += 1;
        }
    }
    // Spacing is kept below the millisecond (33.3 ms): neither 30.3/s nor 29.4/s.
    assert!((300..=304).contains(&alone), "{alone} in 10 s alone");
}

#[test]
fn a_concurrency_limit_is_split_so_the_parts_add_up() {
    for limit in [1u32, 2, 4, 5, 9] {
        let cfg = EndpointConfig {
            concurrency: Some(limit),
            ..bare()
        };
        let mut total = 0;
        for mut s in three_nodes(&format!("endpoint-{limit}")) {
            let mut in_flight = 0;
            while s.admit(&cfg, T0, false, in_flight).is_go() {
                in_flight += 1;
            }
            assert_eq!(s.clone().view(&cfg, T0, in_flight).nodes, 3);
            total += in_flight;
        }
        assert_eq!(total, limit, "in flight across the three at limit {limit}");
    }
}

#[test]
fn a_learned_quota_is_split_so_the_nodes_never_spend_more_than_remains() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let mut nodes = three_nodes("https://api.example.com");
    // Each node hears a different moment of the same count (older answers say more remains).
    let mut spent = 0;
    for (i, s) in nodes.iter_mut().enumerate() {
        let mut o = observed(ResultClass::Success);
        let remaining = (20 - i).to_string();
        o.quota = quota(
            [
                ("x-ratelimit-limit", "20"),
                ("x-ratelimit-remaining", remaining.as_str()),
                ("x-ratelimit-reset", "60"),
            ],
            T0,
        );
        s.record(&cfg, T0, Permit::default(), &o);
        let mut in_flight = 0;
        while s.admit(&cfg, at(1), false, in_flight).is_go() {
            in_flight += 1;
        }
        spent += in_flight;
        assert_eq!(kind(&s.admit(&cfg, at(2), false, in_flight)), "hold Quota");
    }
    // Each node's part of the 20 counts the request whose answer it heard.
    assert_eq!(spent + 3, 20, "each node sends its part, and no more");
    // Node 1 dies. What it sent of its part may still reach the API, so the two left keep
    // their parts until the window ends: neither sends more, whatever an answer says remains.
    for (rank, i) in [0usize, 2].into_iter().enumerate() {
        let s = &mut nodes[i];
        s.set_share(Share::for_endpoint(
            rank as u32,
            2,
            "https://api.example.com",
        ));
        assert_eq!(kind(&s.admit(&cfg, at(3), false, 0)), "hold Quota");
    }
    // After the reset each of the two takes its part of the whole limit.
    let mut after = 0;
    for i in [0, 2] {
        let s = &mut nodes[i];
        let mut in_flight = 0;
        while s.admit(&cfg, at(60_000), false, in_flight).is_go() {
            in_flight += 1;
        }
        after += in_flight;
    }
    assert_eq!(after, 20);
}

#[test]
fn the_retry_budgets_minimum_is_split_between_nodes() {
    let cfg = EndpointConfig {
        retry_budget: BudgetConfig {
            enabled: true,
            ratio: 0.0,
            min_per_second: 3.0,
            window: Duration::from_secs(10),
            when_exhausted: WhenExhausted::Wait,
        },
        ..bare()
    };
    let mut retries = 0;
    for mut s in three_nodes("https://api.example.com") {
        while let Admission::Go(p) = s.admit(&cfg, T0, true, 0) {
            retries += 1;
            // The retry fails: it stays counted in the window.
            s.record(&cfg, T0, p, &observed(ResultClass::Failure));
        }
    }
    assert_eq!(retries, 30, "3/s over 10 s for the three together");
}

#[test]
fn a_node_whose_part_is_spent_sends_one_at_a_time_while_the_cluster_has_some_left() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let answer = |remaining: &str| {
        let mut o = observed(ResultClass::Success);
        o.quota = quota(
            [
                ("x-ratelimit-limit", "10"),
                ("x-ratelimit-remaining", remaining),
                ("x-ratelimit-reset", "60"),
            ],
            T0,
        );
        o
    };
    let mut s = EndpointState::default();
    s.set_share(Share::new(1, 2));
    // 3 remain for the two nodes: this one's part is 1.
    s.record(&cfg, T0, Permit::default(), &answer("3"));
    let Admission::Go(p) = s.admit(&cfg, at(1), false, 0) else {
        panic!("its part")
    };
    assert_eq!(kind(&s.admit(&cfg, at(1), false, 1)), "hold Quota");
    // Its answer says 1 remains (the other node took one): one more may go, alone.
    s.record(&cfg, at(2), p, &answer("1"));
    assert_eq!(kind(&s.admit(&cfg, at(3), false, 1)), "hold Quota");
    let Admission::Go(p) = s.admit(&cfg, at(3), false, 0) else {
        panic!("one at a time while some remain")
    };
    // None remain: held until the reset.
    s.record(&cfg, at(4), p, &answer("0"));
    let a = s.admit(&cfg, at(5), false, 0);
    assert!(!a.is_go(), "{a:?}");
    // Alone, a spent count waits for the reset whatever the answers said.
    let mut alone = EndpointState::default();
    alone.record(&cfg, T0, Permit::default(), &answer("1"));
    assert!(alone.admit(&cfg, at(1), false, 0).is_go());
    assert_eq!(kind(&alone.admit(&cfg, at(1), false, 0)), "hold Quota");
}

/// First contact: until an endpoint has answered 64 requests, at most one more is in flight than
/// it answered, so the number in flight doubles each round trip, up to 16; then only the other
/// limits hold.
#[test]
fn first_contact_widens_with_the_answers() {
    let cfg = EndpointConfig {
        first_contact_ramp: true,
        ..bare()
    };
    let mut s = EndpointState::default();
    let mut in_flight = Vec::new();
    let mut widths = Vec::new();
    for _round in 0..8 {
        while let Admission::Go(p) = s.admit(&cfg, T0, false, in_flight.len() as u32) {
            in_flight.push(p);
        }
        widths.push(in_flight.len());
        assert_eq!(
            kind(&s.admit(&cfg, T0, false, in_flight.len() as u32)),
            "hold Probe"
        );
        for p in in_flight.drain(..) {
            s.record(&cfg, T0, p, &observed(ResultClass::Success));
        }
    }
    assert_eq!(widths, [1, 2, 4, 8, 16, 16, 16, 16]);
    // Past 64 answers, nothing of the kind holds.
    let mut n = 0;
    while s.admit(&cfg, T0, false, n).is_go() && n < 1000 {
        n += 1;
    }
    assert_eq!(n, 1000);
}

/// A bare 429 (no wait, no quota) is about the endpoint: it sets a pace that holds the next job
/// for one interval, where a 429 with Retry-After pauses instead and sets none.
#[test]
fn a_bare_429_sets_a_pace_and_a_429_that_says_when_does_not() {
    let cfg = EndpointConfig {
        learn_pace: true,
        ..bare()
    };
    let mut s = EndpointState::default();
    // 20 went through in the last second.
    for i in 0..20 {
        let p = s.admit(&cfg, at(i * 50), false, 0);
        let Admission::Go(p) = p else { panic!("{p:?}") };
        s.record(&cfg, at(i * 50), p, &observed(ResultClass::Success));
    }
    let Admission::Go(p) = s.admit(&cfg, at(1_000), false, 0) else {
        panic!("goes")
    };
    let bare_429 = Observed {
        overload: true,
        rate_limited: true,
        ..observed(ResultClass::Neutral)
    };
    assert!(bare_429.is_bare_refusal() && !refused(1_000).is_bare_refusal());
    s.record(&cfg, at(1_000), p, &bare_429);
    let view = s.view(&cfg, at(1_000), 0);
    assert_eq!(view.learned_pace, Some(20.0));
    // One request every 50 ms from here on.
    let a = s.admit(&cfg, at(1_000), false, 0);
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert_eq!(h.kind, HoldKind::Rate);
    assert_eq!(h.until, Some(at(1_050)));
    assert!(h.reason.contains("pace learned from 429s"), "{}", h.reason);
    assert_eq!(s.pace_release(&cfg, at(1_000)), Some(at(1_050)));
    assert!(s.admit(&cfg, at(1_050), false, 0).is_go());
    // The same with Retry-After: a pause, no pace.
    let mut s = EndpointState::default();
    let Admission::Go(p) = s.admit(&cfg, at(0), false, 0) else {
        panic!("goes")
    };
    s.record(&cfg, at(0), p, &refused(1_000));
    assert_eq!(s.view(&cfg, at(0), 0).learned_pace, None);
    assert_eq!(s.pace_release(&cfg, at(0)), None);
}
