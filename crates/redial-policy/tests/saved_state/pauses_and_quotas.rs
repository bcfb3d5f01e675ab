//! Saved states of pauses, slow start and quotas (from headers, inferred, shared).

use super::*;

#[test]
fn a_fresh_state() {
    check(
        Case {
            name: "fresh",
            cfg: EndpointConfig::default(),
            build: |_| EndpointState::default(),
            share: Share::default(),
        },
        &[
            first(0),
            Ask {
                ms: 0,
                retry: false,
                in_flight: 1,
            },
            retry(0),
        ],
        &[
            "view: holding None; hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start -",
            "view: budget 0/10 (10 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change -; shared pause None, breaker None, paced until -; last hold None",
            "+0ms first, 0 in flight: go",
            "+0ms first, 1 in flight: go",
            "+0ms retry, 0 in flight: go, a retry",
            "permits out (0, 0)",
        ],
    );
}

/// A server-given wait lifted by a hand resume, a second one, a hand pause over it, a hand
/// breaker reset, and what held jobs last.
#[test]
fn pauses_by_the_server_and_by_hand() {
    check(
        Case {
            name: "pauses",
            cfg: EndpointConfig::default(),
            build: |cfg| {
                let mut s = EndpointState::default();
                attempt(&mut s, cfg, 0, false, &observed(ResultClass::Success));
                s.record(cfg, at(10), Permit::default(), &refused(60_000));
                assert!(s.take_resume(cfg, at(20), at(20)));
                s.record(cfg, at(30), Permit::default(), &refused(30_000));
                s.hand_pause = Some(HandPause {
                    since: at(40),
                    until: Some(at(120_000)),
                    reason: "maintenance".into(),
                });
                s.take_breaker_reset(at(50), at(50));
                assert!(!s.admit(cfg, at(60), false, 0).is_go());
                s
            },
            share: Share::default(),
        },
        &[
            first(100),
            retry(30_100),
            first(120_000),
            first(120_000),
            first(120_000),
            first(120_100),
        ],
        &[
            "view: holding Some(\"paused by hand until 2026-11-30T00:02:00Z: maintenance\"); hand Some(\"paused by hand until 2026-11-30T00:02:00Z: maintenance\"); paused +30030ms Some(\"429 Retry-After\"); learned Some(0)/Some(1) until +30030ms, pace None; concurrency None; slow start -",
            "view: budget 0/11 (11 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change +30030ms; shared pause Some((\"+30030ms\", \"429 Retry-After\")), breaker None, paced until -; last hold None",
            "+100ms first, 0 in flight: hold Pause until +120000ms: paused by hand until 2026-11-30T00:02:00Z: maintenance",
            "+30100ms retry, 0 in flight: hold Pause until +120000ms: paused by hand until 2026-11-30T00:02:00Z: maintenance",
            "+120000ms first, 0 in flight: go",
            "+120000ms first, 0 in flight: go, a quota probe",
            "+120000ms first, 0 in flight: go, a quota probe",
            "+120100ms first, 0 in flight: go, a quota probe",
            "permits out (0, 0)",
        ],
    );
}

/// Slow start after a pause, part spent when saved.
#[test]
fn slow_start_after_a_pause() {
    check(
        Case {
            name: "slow_start",
            cfg: EndpointConfig {
                ramp_initial: 2,
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                s.record(cfg, at(0), Permit::default(), &refused(1_000));
                attempt(&mut s, cfg, 1_000, false, &observed(ResultClass::Success));
                attempt(&mut s, cfg, 1_000, false, &observed(ResultClass::Success));
                // Each success lets two more go (not saved: read back, the steps alone count).
                let mut answered = s.clone();
                for _ in 0..4 {
                    assert!(answered.admit(cfg, at(1_100), false, 0).is_go());
                }
                assert!(!answered.admit(cfg, at(1_100), false, 0).is_go());
                let mut s: EndpointState =
                    serde_json::from_str(&serde_json::to_string(&s).expect("saves"))
                        .expect("reads back");
                assert!(!s.admit(cfg, at(1_100), false, 0).is_go());
                s
            },
            share: Share::default(),
        },
        &[
            first(1_100),
            first(1_250),
            first(1_250),
            first(1_250),
            first(1_250),
            first(1_250),
            first(6_000),
        ],
        &[
            "view: holding Some(\"slow start: 2 requests so far\"); hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start +1000ms",
            "view: budget 0/12 (12 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change -; shared pause None, breaker None, paced until -; last hold Some((\"endpoint pause (429 Retry-After)\", \"+1000ms\"))",
            "+1100ms first, 0 in flight: hold Ramp until +1250ms: slow start: 2 requests so far",
            "+1250ms first, 0 in flight: go",
            "+1250ms first, 0 in flight: go",
            "+1250ms first, 0 in flight: go",
            // The step allows six in all; each success (every answer here is one) two more.
            "+1250ms first, 0 in flight: go",
            "+1250ms first, 0 in flight: go",
            "+6000ms first, 0 in flight: go",
            "permits out (0, 0)",
        ],
    );
}

/// A quota learned from response headers, spent until its reset, and a token quota's pause.
#[test]
fn a_quota_learned_from_headers() {
    check(
        Case {
            name: "quota_headers",
            cfg: EndpointConfig {
                learn_from_headers: true,
                ..bare()
            },
            build: |cfg| {
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
                s.record(cfg, T0, Permit::default(), &o);
                attempt(&mut s, cfg, 10, false, &observed(ResultClass::Success));
                attempt(&mut s, cfg, 20, false, &observed(ResultClass::Success));
                assert!(!s.admit(cfg, at(30), false, 0).is_go());
                s
            },
            share: Share::default(),
        },
        &[
            first(500),
            first(1_000),
            first(1_000),
            first(1_000),
            first(1_000),
            first(1_000),
            Ask {
                ms: 1_000,
                retry: false,
                in_flight: 1,
            },
            first(1_000),
            first(1_000),
        ],
        &[
            "view: holding Some(\"quota spent until 2026-11-30T00:00:01Z\"); hand None; paused - None; learned Some(0)/Some(5) until +1000ms, pace None; concurrency None; slow start -",
            "view: budget 0/13 (13 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change +1000ms; shared pause None, breaker None, paced until -; last hold None",
            "+500ms first, 0 in flight: hold Quota until +1000ms: quota spent until 2026-11-30T00:00:01Z",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 1 in flight: hold Quota until -: quota spent; waiting for an answer to learn its reset",
            "+1000ms first, 0 in flight: go, a quota probe",
            "+1000ms first, 0 in flight: go, a quota probe",
            "permits out (0, 0)",
        ],
    );
}

/// A quota inferred from 429s that said only when to come back: its limit, its windows
/// (measured, then confirmed), probes made rarer, and a reset predicted when saved.
#[test]
fn a_quota_inferred_from_429s() {
    check(
        Case {
            name: "quota_inferred",
            cfg: EndpointConfig {
                learn_from_headers: true,
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                for w in [0, 100, 200] {
                    feed(&mut s, cfg, w, 10, false, ResultClass::Success);
                    attempt(&mut s, cfg, w + 50, false, &refused(50));
                }
                feed(&mut s, cfg, 300, 10, false, ResultClass::Success);
                let a = s.admit(cfg, at(350), false, 0);
                assert!(
                    matches!(a, Admission::Hold(ref h) if h.until == Some(at(406))),
                    "{a:?}"
                );
                s
            },
            share: Share::default(),
        },
        &[
            first(350),
            first(406),
            first(406),
            first(406),
            first(406),
            first(406),
            first(406),
            first(406),
            first(406),
            first(406),
            first(406),
            first(450),
            first(450),
        ],
        &[
            "view: holding Some(\"quota spent until 2026-11-30T00:00:00.406Z\"); hand None; paused - None; learned Some(0)/Some(10) until +406ms, pace None; concurrency None; slow start -",
            "view: budget 0/58 (58 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change +406ms; shared pause None, breaker None, paced until -; last hold Some((\"endpoint pause (429 Retry-After)\", \"+300ms\"))",
            "+350ms first, 0 in flight: hold Quota until +406ms: quota spent until 2026-11-30T00:00:00.406Z",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+406ms first, 0 in flight: go",
            "+450ms first, 0 in flight: hold Quota until +506ms: quota spent until 2026-11-30T00:00:00.506Z (the window learned from 429s)",
            "+450ms first, 0 in flight: hold Quota until +506ms: quota spent until 2026-11-30T00:00:00.506Z",
            "permits out (0, 0)",
        ],
    );
}

/// Node 0 of three, its part of a quota the headers told spent; read back by the same node.
#[test]
fn a_quota_shared_by_three_nodes() {
    check(
        Case {
            name: "quota_shared",
            cfg: EndpointConfig {
                learn_from_headers: true,
                ..bare()
            },
            build: |cfg| {
                let mut s = EndpointState::default();
                s.set_share(Share::new(0, 3));
                let mut o = observed(ResultClass::Success);
                o.quota = quota(
                    [
                        ("x-ratelimit-limit", "30"),
                        ("x-ratelimit-remaining", "29"),
                        ("x-ratelimit-reset", "1"),
                    ],
                    T0,
                );
                s.record(cfg, T0, Permit::default(), &o);
                for i in 0..12 {
                    if let Admission::Go(p) = s.admit(cfg, at(10 + i), false, 0) {
                        s.record(cfg, at(10 + i), p, &observed(ResultClass::Success));
                    }
                }
                s
            },
            share: Share::new(0, 3),
        },
        &[
            first(100),
            first(100),
            first(1_000),
            first(1_000),
            first(1_000),
        ],
        &[
            "view: holding None; hand None; paused - None; learned Some(1)/Some(30) until +1000ms, pace None; concurrency None; slow start -",
            "view: budget 0/15 (15 left); breaker closed until -, window 0/0 (0 retries), events []",
            "next change +1000ms; shared pause None, breaker None, paced until -; last hold None",
            "+100ms first, 0 in flight: go",
            "+100ms first, 0 in flight: hold Quota until +1000ms: quota spent until 2026-11-30T00:00:01Z",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: go",
            "+1000ms first, 0 in flight: go",
            "permits out (0, 0)",
        ],
    );
}
