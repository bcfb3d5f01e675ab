//! The limits: the configured rate, learned quotas, concurrency, the retry budget, first contact
//! and the pace learned from bare 429s.

use super::*;

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
            // To the millisecond: a reset in whole seconds may be rounded, and is asked about
            // (`whole_second_resets_are_asked_about`).
            ("x-ratelimit-reset", "1.000"),
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
    assert!(
        h.reason.contains("pace learned from bare refusals"),
        "{}",
        h.reason
    );
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

/// A limiter that reports its quota with the reset in whole epoch seconds, driven on plain time:
/// requests are sent in bursts (all admitted at one instant, answered 1 ms later, the last
/// with nothing else in flight). Returns the instant the last of `jobs` went, how many were
/// refused, and the drain the endpoint's forecast gave 2 s in (from the start).
fn against_whole_second_resets(
    jobs: usize,
    answer: impl Fn(&mut Vec<i64>, i64) -> (bool, u64, i64),
) -> (i64, usize, f64) {
    // The defaults: the first request goes alone, first contact ramps up.
    let cfg = EndpointConfig::default();
    let mut s = EndpointState::default();
    let mut log = Vec::new();
    let (mut done, mut refused, mut ms) = (0, 0, 0_i64);
    let mut forecast = 0.0;
    while done < jobs && ms < 120_000 {
        if ms == 2_000 {
            let input = ForecastInput {
                due: (jobs - done) as u64,
                attempt_time: Some(Duration::from_millis(1)),
                workers: Some(32),
                ..Default::default()
            };
            let f = s.forecast(&cfg, at(ms), &input);
            forecast = 2.0 + f.drain_seconds.unwrap_or(f64::NAN);
        }
        let mut permits = Vec::new();
        while done + permits.len() < jobs && permits.len() < 32 {
            match s.admit(&cfg, at(ms), false, permits.len() as u32) {
                Admission::Go(p) => permits.push(p),
                _ => break,
            }
        }
        let n = permits.len();
        for (i, p) in permits.into_iter().enumerate() {
            let (ok, remaining, reset_s) = answer(&mut log, ms);
            let mut o = observed(if ok {
                ResultClass::Success
            } else {
                ResultClass::Neutral
            });
            o.rate_limited = !ok;
            o.overload = !ok;
            let (limit, remaining, reset) = (
                "50".to_string(),
                remaining.to_string(),
                (T0.as_unix_millis() / 1000 + reset_s).to_string(),
            );
            o.quota = quota(
                [
                    ("x-ratelimit-limit", limit.as_str()),
                    ("x-ratelimit-remaining", remaining.as_str()),
                    ("x-ratelimit-reset", reset.as_str()),
                ],
                at(ms + 1),
            );
            o.others_in_flight = (n - 1 - i) as u32;
            s.record(&cfg, at(ms + 1), p, &o);
            if ok {
                done += 1;
            } else {
                refused += 1;
            }
        }
        ms += 1;
    }
    (ms, refused, forecast)
}

/// A moving window (a sliding log) of 50 a second whose reset is the oldest request's expiry
/// rounded up to the epoch second (flask-limiter's headers): obeyed as the window's end, 600
/// jobs take about 23 s (a burst, then up to a second more of nothing); asked about before it,
/// within 1.15x of 12 s, refusing at most 5% (issue 54, observation 4).
#[test]
fn whole_second_resets_are_asked_about() {
    let sliding_log = |log: &mut Vec<i64>, ms: i64| {
        log.retain(|t| t + 1_000 > ms);
        let ok = log.len() < 50;
        if ok {
            log.push(ms);
        }
        let oldest = log.first().copied().unwrap_or(ms);
        // Epoch seconds since T0 (a whole second), rounded up.
        (ok, 50 - log.len() as u64, (oldest + 1_000) / 1_000 + 1)
    };
    let (took, refused, forecast) = against_whole_second_resets(600, sliding_log);
    println!("moving window: 600 jobs in {took} ms, {refused} refused, forecast {forecast:.1} s");
    assert!(took <= 13_800, "600 jobs took {took} ms (ideal 12 s)");
    assert!(refused <= 30, "{refused} refused");
    // The forecast 2 s in takes the time the quota took to come back for its window, not the
    // whole-second reset (issue 54, item 4: within 25%).
    let real = took as f64 / 1000.0;
    assert!(
        (forecast - real).abs() <= 0.25 * real,
        "forecast {forecast} s, drained in {real} s"
    );
}

/// Fixed windows on the epoch's seconds whose whole-second resets are exact: each question
/// before the reset is refused, so they stop; at most a handful refused.
#[test]
fn whole_second_resets_that_are_exact_are_obeyed_after_a_few_questions() {
    let exact = |log: &mut Vec<i64>, ms: i64| {
        let window = ms / 1_000;
        log.retain(|t| t / 1_000 == window);
        let ok = log.len() < 50;
        if ok {
            log.push(ms);
        }
        (ok, 50 - log.len() as u64, window + 1)
    };
    let (took, refused, forecast) = against_whole_second_resets(1_000, exact);
    println!("exact resets: 1000 jobs in {took} ms, {refused} refused, forecast {forecast:.1} s");
    let real = took as f64 / 1000.0;
    assert!(
        (forecast - real).abs() <= 0.25 * real,
        "forecast {forecast} s, drained in {real} s"
    );
    assert!(refused <= 10, "{refused} refused");
    assert!(took <= 21_000, "1000 jobs took {took} ms");
}
