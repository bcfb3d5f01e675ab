//! Saved states of the breaker, suspicion, the rate, the budget, the pace and concurrency;
//! holds from other nodes; older and newer forms.

use super::*;

/// Retries that failed again opened the breaker, twice (in the outage's first minute, for
/// `min_open_for` each time: 30 s here), with its events.
#[test]
fn an_open_breaker() {
    check(
        Case {
            name: "breaker_open",
            cfg: breaker_cfg(),
            build: |cfg| {
                let mut s = EndpointState::default();
                feed(&mut s, cfg, 0, 5, false, ResultClass::Success);
                feed(&mut s, cfg, 0, 5, true, ResultClass::Failure);
                let probes: Vec<Permit> = (0..3)
                    .map(|_| go(s.admit(cfg, at(30_000), true, 0)))
                    .collect();
                for p in probes {
                    s.record(cfg, at(30_001), p, &observed(ResultClass::Failure));
                }
                s
            },
            share: Share::default(),
        },
        &[
            first(40_000),
            retry(60_000),
            retry(60_001),
            retry(60_001),
            retry(60_001),
            first(60_002),
            retry(60_002),
        ],
        &[
            "view: holding Some(\"circuit open until 2026-11-30T00:01:00.001Z\"); hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start -",
            "view: budget 0/10 (10 left); breaker open until +60001ms, window 0/0 (0 retries), events [\"+0ms open: 5 retries failed again against 5 successes in 30s\", \"+30000ms half_open: open period ended at 2026-11-30T00:00:30Z; letting probes through\", \"+30001ms open: 2 of 3 probes failed (0 succeeded)\"]",
            "next change +60001ms; shared pause None, breaker Some((\"+60001ms\", \"2 of 3 probes failed (0 succeeded)\")), paced until -; last hold None",
            "+40000ms first, 0 in flight: hold Breaker until +60001ms: circuit open until 2026-11-30T00:01:00.001Z",
            "+60000ms retry, 0 in flight: hold Breaker until +60001ms: circuit open until 2026-11-30T00:01:00.001Z",
            "+60001ms retry, 0 in flight: go, a retry, a probe",
            "+60001ms retry, 0 in flight: go, a retry, a probe",
            "+60001ms retry, 0 in flight: go, a retry",
            "+60002ms first, 0 in flight: go",
            "+60002ms retry, 0 in flight: go, a retry",
            "permits out (0, 0)",
        ],
    );
}

/// A half-open breaker with one probe succeeded and one failed; one was in flight when saved.
#[test]
fn a_half_open_breaker() {
    check(
        Case {
            name: "breaker_half_open",
            cfg: breaker_cfg(),
            build: |cfg| {
                let mut s = EndpointState::default();
                feed(&mut s, cfg, 0, 10, true, ResultClass::Failure);
                let a = go(s.admit(cfg, at(30_000), true, 0));
                let b = go(s.admit(cfg, at(30_000), true, 0));
                let _in_flight = go(s.admit(cfg, at(30_000), true, 0));
                s.record(cfg, at(30_010), a, &observed(ResultClass::Success));
                s.record(cfg, at(30_020), b, &observed(ResultClass::Failure));
                s
            },
            share: Share::default(),
        },
        &[retry(30_100), retry(30_100), retry(30_100)],
        &[
            "view: holding None; hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start -",
            "view: budget 1/11 (10 left); breaker half_open until -, window 0/0 (0 retries), events [\"+0ms open: 10 retries failed again against 0 successes in 30s\", \"+30000ms half_open: open period ended at 2026-11-30T00:00:30Z; letting probes through\"]",
            "next change -; shared pause None, breaker None, paced until -; last hold None",
            "+30100ms retry, 0 in flight: go, a retry, a probe",
            "+30100ms retry, 0 in flight: go, a retry",
            "+30100ms retry, 0 in flight: go, a retry",
            "permits out (0, 0)",
        ],
    );
}

/// First attempts failed with no success since: the endpoint is suspect, first attempts wait.
#[test]
fn a_suspect_endpoint() {
    check(
        Case {
            name: "suspect",
            cfg: breaker_cfg(),
            build: |cfg| {
                let mut s = EndpointState::default();
                feed(&mut s, cfg, 0, 10, false, ResultClass::Failure);
                assert!(!s.admit(cfg, at(5), false, 0).is_go());
                s
            },
            share: Share::default(),
        },
        &[first(10), retry(10), first(20), first(30_000)],
        &[
            "view: holding Some(\"10 first attempts failed and nothing succeeded since; first attempts wait until 2026-11-30T00:00:30Z while retries tell whether it is down or flaky\"); hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start -",
            "view: budget 0/12 (12 left); breaker closed until -, window 10/10 (0 retries), events []",
            "next change +30000ms; shared pause None, breaker None, paced until -; last hold None",
            "+10ms first, 0 in flight: hold firsts Suspect until +30000ms: 10 first attempts failed and nothing succeeded since; first attempts wait until 2026-11-30T00:00:30Z while retries tell whether it is down or flaky",
            "+10ms retry, 0 in flight: go, a retry",
            "+20ms first, 0 in flight: go",
            "+30000ms first, 0 in flight: go",
            "permits out (0, 0)",
        ],
    );
}

/// A configured rate (GCRA) whose arrival time is ahead, to below the millisecond.
#[test]
fn a_configured_rate() {
    check(
        Case {
            name: "rate",
            cfg: EndpointConfig {
                rate: Some(Rate::parse("30/s").expect("a rate")),
                burst: 3,
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                for _ in 0..5 {
                    if let Admission::Go(p) = s.admit(cfg, at(0), false, 0) {
                        s.record(cfg, at(0), p, &observed(ResultClass::Success));
                    }
                }
                s
            },
            share: Share::default(),
        },
        &[
            first(0),
            first(33),
            first(34),
            first(67),
            first(67),
            first(1_000),
            first(1_000),
            first(1_000),
            first(1_000),
        ],
        &[
            "view: holding Some(\"rate limit 30/1s\"); hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start -",
            "view: budget 0/13 (13 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change +100ms; shared pause None, breaker None, paced until -; last hold None",
            "+0ms first, 0 in flight: hold Rate until +34ms: rate limit 30/1s",
            "+33ms first, 0 in flight: hold Rate until +34ms: rate limit 30/1s",
            "+34ms first, 0 in flight: go",
            "+67ms first, 0 in flight: go",
            "+67ms first, 0 in flight: hold Rate until +100ms: rate limit 30/1s",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: hold Rate until +1034ms: rate limit 30/1s",
            "permits out (0, 0)",
        ],
    );
}

/// A retry budget part spent by failed retries, two retries in flight when saved.
#[test]
fn a_retry_budget_part_spent() {
    check(
        Case {
            name: "budget",
            cfg: EndpointConfig {
                retry_budget: BudgetConfig {
                    min_per_second: 0.0,
                    ..BudgetConfig::default()
                },
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                feed(&mut s, cfg, 0, 20, false, ResultClass::Failure);
                feed(&mut s, cfg, 1_500, 2, true, ResultClass::Failure);
                feed(&mut s, cfg, 2_500, 1, true, ResultClass::Success);
                let _r1 = go(s.admit(cfg, at(3_000), true, 0));
                let _r2 = go(s.admit(cfg, at(3_000), true, 0));
                s
            },
            share: Share::default(),
        },
        &[
            retry(4_000),
            retry(4_000),
            retry(4_000),
            retry(4_000),
            first(4_000),
            retry(11_500),
        ],
        &[
            "view: holding None; hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start -",
            "view: budget 2/5 (3 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change -; shared pause None, breaker None, paced until -; last hold None",
            "+4000ms retry, 0 in flight: go, a retry",
            "+4000ms retry, 0 in flight: go, a retry",
            "+4000ms retry, 0 in flight: go, a retry",
            "+4000ms retry, 0 in flight: go, a retry",
            "+4000ms first, 0 in flight: go",
            "+11500ms retry, 0 in flight: go, a retry",
            "permits out (0, 0)",
        ],
    );
}

/// The same budget spent, with a policy that fails such retries.
#[test]
fn a_spent_retry_budget_that_fails_retries() {
    check(
        Case {
            name: "budget_fail",
            cfg: EndpointConfig {
                retry_budget: BudgetConfig {
                    min_per_second: 0.0,
                    when_exhausted: WhenExhausted::Fail,
                    ..BudgetConfig::default()
                },
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                feed(&mut s, cfg, 0, 10, false, ResultClass::Failure);
                feed(&mut s, cfg, 100, 2, true, ResultClass::Failure);
                s
            },
            share: Share::default(),
        },
        &[retry(200), first(200), retry(10_100)],
        &[
            "view: holding None; hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start -",
            "view: budget 2/2 (0 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change -; shared pause None, breaker None, paced until -; last hold None",
            "+200ms retry, 0 in flight: fail retry Budget until +10000ms: retry budget spent: 2 retries failed and 0 in flight in 10s against 2 allowed (20% of 10 first attempts + 0 successes + 0/s)",
            "+200ms first, 0 in flight: go",
            "+10100ms retry, 0 in flight: fail retry Budget until -: retry budget spent: 0 retries failed and 0 in flight in 10s against 0 allowed (20% of 0 first attempts + 0 successes + 0/s)",
            "permits out (0, 0)",
        ],
    );
}

/// A pace learned from bare 429s, cut once, and what the other nodes are told of it.
#[test]
fn a_pace_learned_from_bare_429s() {
    check(
        Case {
            name: "pace",
            cfg: EndpointConfig {
                learn_pace: true,
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                for i in 0..20 {
                    attempt(&mut s, cfg, i * 50, false, &observed(ResultClass::Success));
                }
                attempt(&mut s, cfg, 1_000, false, &bare_429());
                attempt(&mut s, cfg, 1_050, false, &observed(ResultClass::Success));
                attempt(&mut s, cfg, 1_100, false, &bare_429());
                s
            },
            share: Share::default(),
        },
        &[
            first(1_100),
            first(1_100),
            first(1_160),
            first(1_200),
            first(11_200),
            first(11_200),
        ],
        &[
            "view: holding None; hand None; paused - None; learned None/None until -, pace Some(20.7); concurrency None; slow start -",
            "view: budget 0/35 (35 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change -; shared pause None, breaker None, paced until +11100ms; last hold None",
            "+1100ms first, 0 in flight: go",
            "+1100ms first, 0 in flight: hold Rate until +1149ms: pace learned from bare refusals (429s, a limiter's 503s): 20.7 requests/s",
            "+1160ms first, 0 in flight: go",
            "+1200ms first, 0 in flight: hold Rate until +1209ms: pace learned from bare refusals (429s, a limiter's 503s): 20.7 requests/s",
            "+11200ms first, 0 in flight: go",
            "+11200ms first, 0 in flight: go",
            "permits out (0, 0)",
        ],
    );
}

/// First contact, the first answer, and an adaptive concurrency limit cut by overload.
#[test]
fn first_contact_and_adaptive_concurrency() {
    check(
        Case {
            name: "concurrency",
            cfg: EndpointConfig {
                probe_first: true,
                first_contact_ramp: true,
                adaptive_concurrency: true,
                concurrency: Some(20),
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                attempt(&mut s, cfg, 0, false, &observed(ResultClass::Success));
                attempt(&mut s, cfg, 0, false, &observed(ResultClass::Success));
                let mut o = observed(ResultClass::Neutral);
                o.overload = true;
                attempt(&mut s, cfg, 10, false, &o);
                assert!(!s.admit(cfg, at(20), false, 4).is_go());
                s
            },
            share: Share::default(),
        },
        &[
            Ask {
                ms: 20,
                retry: false,
                in_flight: 4,
            },
            Ask {
                ms: 20,
                retry: false,
                in_flight: 2,
            },
            Ask {
                ms: 20,
                retry: false,
                in_flight: 8,
            },
            Ask {
                ms: 20,
                retry: false,
                in_flight: 9,
            },
        ],
        &[
            "view: holding None; hand None; paused - None; learned None/None until -, pace None; concurrency Some(9); slow start -",
            "view: budget 0/12 (12 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change -; shared pause None, breaker None, paced until -; last hold None",
            "+20ms first, 4 in flight: hold Probe until -: first contact: 4 in flight after 3 answers; more go as answers come",
            "+20ms first, 2 in flight: go",
            "+20ms first, 8 in flight: hold Probe until -: first contact: 8 in flight after 4 answers; more go as answers come",
            "+20ms first, 9 in flight: hold Probe until -: first contact: 9 in flight after 4 answers; more go as answers come",
            "permits out (0, 0)",
        ],
    );
}

/// An adaptive concurrency limit cut by overload, after first contact.
#[test]
fn an_adaptive_concurrency_limit() {
    check(
        Case {
            name: "adaptive_concurrency",
            cfg: EndpointConfig {
                first_contact_ramp: true,
                adaptive_concurrency: true,
                concurrency: Some(20),
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                feed(&mut s, cfg, 0, 64, false, ResultClass::Success);
                let mut o = observed(ResultClass::Neutral);
                o.overload = true;
                attempt(&mut s, cfg, 10, false, &o);
                s
            },
            share: Share::default(),
        },
        &[
            Ask {
                ms: 20,
                retry: false,
                in_flight: 9,
            },
            Ask {
                ms: 20,
                retry: false,
                in_flight: 8,
            },
        ],
        &[
            "view: holding None; hand None; paused - None; learned None/None until -, pace None; concurrency Some(9); slow start -",
            "view: budget 0/87 (87 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change -; shared pause None, breaker None, paced until -; last hold None",
            "+20ms first, 9 in flight: hold Concurrency until -: concurrency limit 9 reached",
            "+20ms first, 8 in flight: go",
            "permits out (0, 0)",
        ],
    );
}

/// Holds another node shared: its pause, its open breaker, its latest bare refusal.
#[test]
fn holds_taken_in_from_another_node() {
    check(
        Case {
            name: "absorbed",
            cfg: EndpointConfig {
                learn_pace: true,
                ..breaker_cfg()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                feed(&mut s, cfg, 0, 3, false, ResultClass::Success);
                s.absorb(
                    at(100),
                    &SharedHolds {
                        pause: Some((at(5_000), "429 Retry-After 5s".into())),
                        breaker: Some((at(20_000), "10 retries failed again".into())),
                        paced_until: Some(at(10_050)),
                    },
                );
                s
            },
            share: Share::new(1, 2),
        },
        &[
            first(200),
            first(5_000),
            first(20_000),
            first(20_000),
            first(20_000),
            first(20_000),
        ],
        &[
            "view: holding Some(\"endpoint paused until 2026-11-30T00:00:05Z: 429 Retry-After 5s\"); hand None; paused +5000ms Some(\"429 Retry-After 5s\"); learned None/None until -, pace Some(3.0); concurrency None; slow start -",
            "view: budget 0/8 (8 left); breaker open until +20000ms, window 0/3 (0 retries), events [\"+100ms open: opened by another node: 10 retries failed again\"]",
            "next change +5000ms; shared pause Some((\"+5000ms\", \"429 Retry-After 5s\")), breaker Some((\"+20000ms\", \"opened by another node: 10 retries failed again\")), paced until +10050ms; last hold None",
            "+200ms first, 0 in flight: hold Pause until +5000ms: endpoint paused until 2026-11-30T00:00:05Z: 429 Retry-After 5s",
            "+5000ms first, 0 in flight: hold Breaker until +20000ms: circuit open until 2026-11-30T00:00:20Z",
            "+20000ms first, 0 in flight: go, a probe",
            "+20000ms first, 0 in flight: go, a probe",
            "+20000ms first, 0 in flight: go",
            "+20000ms first, 0 in flight: go",
            "permits out (0, 0)",
        ],
    );
}

/// What the engine may find saved besides a whole state of this release: a field missing (an
/// older release) takes its default, a field it does not know (a newer one) is ignored, and a
/// breaker or budget window saved in a form this release does not read is read as empty.
#[test]
fn partial_older_and_newer_forms_read_back() {
    let fresh = std::fs::read_to_string(fixture("fresh")).expect("the fresh fixture");
    let fresh = fresh.trim_end_matches('\n');
    let read = |json: &str| -> String {
        let s: EndpointState =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{json} does not read: {e}"));
        serde_json::to_string(&s).expect("a state serialises")
    };
    assert_eq!(read("{}"), fresh, "every field missing");
    assert_eq!(
        read(r#"{"a_field_of_a_newer_release": [1, 2], "breaker": {"state": "closed"}}"#),
        fresh,
        "a field not known"
    );
    assert_eq!(
        read(r#"{"window": {"buckets": 3}, "budget": 7}"#),
        fresh,
        "windows in an older form"
    );
    let open: EndpointState = serde_json::from_str(
        r#"{"breaker": {"state": "half_open", "in_flight": 2, "succeeded": 1, "failed": 0}}"#,
    )
    .expect("a half-open breaker reads");
    assert_eq!(
        open.breaker,
        BreakerState::HalfOpen {
            in_flight: 0,
            succeeded: 1,
            failed: 0
        },
        "probes in flight are never read back"
    );
}
