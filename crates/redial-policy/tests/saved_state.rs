//! The saved form of an endpoint's state: what the engine writes (`serde_json::to_string`, in
//! `redial-engine/src/endpoints.rs`) and reads back after a restart.
//!
//! Each file in `tests/fixtures/endpoint_state/` is a state saved by the release before the
//! state was split by mechanism (issue 32). Built the same way today, a state saves to the same
//! bytes; read back, a saved one saves to the same bytes again, and it answers as it did. A node
//! that restarts on a newer release must not lose a pause, an open breaker, a spent budget or a
//! learned quota to a change of form.
//!
//! To write the fixtures anew, on purpose only (a change of the saved form needs a reader for the
//! old one): `REDIAL_WRITE_FIXTURES=1 cargo test -p redial-policy --test saved_state`.

use redial_policy::endpoint::*;
use redial_policy::{quota, Quota, Timestamp};
use std::path::PathBuf;
use std::time::Duration;

const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0.as_unix_millis() + ms)
}

/// A config with every mechanism off, so that each case turns on only its own.
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

/// A 429 with only `Retry-After`.
fn refused(wait_ms: u64) -> Observed {
    Observed {
        overload: true,
        rate_limited: true,
        server_wait: Some((Duration::from_millis(wait_ms), "429 Retry-After".into())),
        ..observed(ResultClass::Neutral)
    }
}

/// A 429 that says nothing.
fn bare_429() -> Observed {
    Observed {
        overload: true,
        rate_limited: true,
        ..observed(ResultClass::Neutral)
    }
}

fn go(a: Admission) -> Permit {
    match a {
        Admission::Go(p) => p,
        other => panic!("expected go, got {other:?}"),
    }
}

/// Admits an attempt at `ms` and records how it ended.
fn attempt(s: &mut EndpointState, cfg: &EndpointConfig, ms: i64, retry: bool, o: &Observed) {
    let p = go(s.admit(cfg, at(ms), retry, 0));
    s.record(cfg, at(ms), p, o);
}

/// One question asked of a state read back: admit at `ms` after `T0`, as a retry or not, with
/// `in_flight` attempts running.
struct Ask {
    ms: i64,
    retry: bool,
    in_flight: u32,
}

fn first(ms: i64) -> Ask {
    Ask {
        ms,
        retry: false,
        in_flight: 0,
    }
}

fn retry(ms: i64) -> Ask {
    Ask {
        ms,
        retry: true,
        in_flight: 0,
    }
}

/// One case: how the state is built through the public API, the config it is asked under, and
/// the share of the node that reads it back (set by the engine after loading, never saved).
struct Case {
    name: &'static str,
    cfg: EndpointConfig,
    build: fn(&EndpointConfig) -> EndpointState,
    share: Share,
}

/// An instant as its distance from `T0`, so that the answers read at a glance.
fn rel(t: Option<Timestamp>) -> String {
    t.map_or("-".into(), |t| {
        format!("+{}ms", t.as_unix_millis() - T0.as_unix_millis())
    })
}

/// The state's answers: its view at the first question's instant, then each admission, one line
/// each. What an admission let go ends at once as a success.
fn answers(s: &mut EndpointState, cfg: &EndpointConfig, asks: &[Ask]) -> Vec<String> {
    let mut out = Vec::new();
    let t = at(asks.first().map_or(0, |a| a.ms));
    let v = s.view(cfg, t, 0);
    out.push(format!(
        "view: holding {:?}; hand {:?}; paused {} {:?}; learned {:?}/{:?} until {}, pace {:?}; \
         concurrency {:?}; slow start {}",
        v.holding,
        v.paused_by_hand.map(|p| p.describe()),
        rel(v.paused_until),
        v.pause_reason,
        v.learned_remaining,
        v.learned_limit,
        rel(v.learned_reset_at),
        v.learned_pace,
        v.concurrency_limit,
        rel(v.slow_start_since),
    ));
    out.push(format!(
        "view: budget {}/{} ({} left); breaker {} until {}, window {}/{} ({} retries), events {:?}",
        v.budget_used,
        v.budget_allowed,
        v.budget_remaining,
        v.breaker,
        rel(v.breaker_until),
        v.breaker_window_failures,
        v.breaker_window_calls,
        v.breaker_window_retry_failures,
        v.breaker_history
            .iter()
            .map(|e| format!("{} {}: {}", rel(Some(e.at)), e.to, e.reason))
            .collect::<Vec<_>>(),
    ));
    let shared = s.shareable(t);
    out.push(format!(
        "next change {}; shared pause {:?}, breaker {:?}, paced until {}; last hold {:?}",
        rel(s.next_change(t)),
        shared.pause.map(|(u, why)| (rel(Some(u)), why)),
        shared.breaker.map(|(u, why)| (rel(Some(u)), why)),
        rel(shared.paced_until),
        s.last_hold
            .as_ref()
            .map(|(why, u)| (why.clone(), rel(Some(*u)))),
    ));
    for a in asks {
        let now = at(a.ms);
        let who = if a.retry { "retry" } else { "first" };
        let hold = |what: &str, h: Hold| {
            format!("{what} {:?} until {}: {}", h.kind, rel(h.until), h.reason)
        };
        let line = match s.admit(cfg, now, a.retry, a.in_flight) {
            Admission::Go(p) => {
                let what = format!(
                    "go{}{}{}",
                    if p.is_retry() { ", a retry" } else { "" },
                    if p.is_probe() { ", a probe" } else { "" },
                    if p.is_quota_probe() {
                        ", a quota probe"
                    } else {
                        ""
                    },
                );
                s.record(cfg, now, p, &observed(ResultClass::Success));
                what
            }
            Admission::Hold(h) => hold("hold", h),
            Admission::HoldRetries(h) => hold("hold retries", h),
            Admission::HoldFirsts(h) => hold("hold firsts", h),
            Admission::FailRetry(h) => hold("fail retry", h),
        };
        out.push(format!(
            "+{}ms {who}, {} in flight: {line}",
            a.ms, a.in_flight
        ));
    }
    out.push(format!("permits out {:?}", s.permits_out()));
    out
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/endpoint_state")
        .join(format!("{name}.json"))
}

/// Builds the case's state and saves it as the engine does: it must be the fixture, byte for
/// byte. Reads the fixture back: it must save to the same bytes, and answer `expected`.
fn check(case: Case, asks: &[Ask], expected: &[&str]) {
    let built = (case.build)(&case.cfg);
    let saved = serde_json::to_string(&built).expect("a state serialises");
    let path = fixture(case.name);
    if std::env::var_os("REDIAL_WRITE_FIXTURES").is_some() {
        std::fs::create_dir_all(path.parent().expect("a fixture has a folder"))
            .expect("the fixtures' folder can be made");
        std::fs::write(&path, format!("{saved}\n")).expect("a fixture can be written");
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (REDIAL_WRITE_FIXTURES=1 writes it)",
            path.display()
        )
    });
    let stored = stored.trim_end_matches('\n');
    assert_eq!(saved, stored, "{}: built today, saved otherwise", case.name);

    let mut back: EndpointState = serde_json::from_str(stored)
        .unwrap_or_else(|e| panic!("{}: the saved state does not read: {e}", case.name));
    let again = serde_json::to_string(&back).expect("a state serialises");
    assert_eq!(again, stored, "{}: read back, saved otherwise", case.name);
    back.set_share(case.share);

    let got = answers(&mut back, &case.cfg, asks);
    if got != expected {
        panic!(
            "{}: answers differ\n--- got:\n{}\n--- expected:\n{}",
            case.name,
            got.join("\n"),
            expected.join("\n")
        );
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

/// `n` attempts at `ms`, as retries when `retry`, each ending as `class`.
fn feed(
    s: &mut EndpointState,
    cfg: &EndpointConfig,
    ms: i64,
    n: u32,
    retry: bool,
    class: ResultClass,
) {
    for _ in 0..n {
        attempt(s, cfg, ms, retry, &observed(class));
    }
}

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
                assert!(s.take_resume(at(20)));
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
            "+1250ms first, 0 in flight: go",
            "+1250ms first, 0 in flight: hold Ramp until +1500ms: slow start: 6 requests so far",
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

/// Retries that failed again opened the breaker, twice (the open time doubles), with its events.
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
            retry(90_000),
            retry(90_001),
            retry(90_001),
            retry(90_001),
            first(90_002),
            retry(90_002),
        ],
        &[
            "view: holding Some(\"circuit open until 2026-11-30T00:01:30.001Z\"); hand None; paused - None; learned None/None until -, pace None; concurrency None; slow start -",
            "view: budget 0/10 (10 left); breaker open until +90001ms, window 0/0 (0 retries), events [\"+0ms open: 5 retries failed again against 5 successes in 30s\", \"+30000ms half_open: open period ended at 2026-11-30T00:00:30Z; letting probes through\", \"+30001ms open: 2 of 3 probes failed (0 succeeded)\"]",
            "next change +90001ms; shared pause None, breaker Some((\"+90001ms\", \"2 of 3 probes failed (0 succeeded)\")), paced until -; last hold None",
            "+40000ms first, 0 in flight: hold Breaker until +90001ms: circuit open until 2026-11-30T00:01:30.001Z",
            "+90000ms retry, 0 in flight: hold Breaker until +90001ms: circuit open until 2026-11-30T00:01:30.001Z",
            "+90001ms retry, 0 in flight: go, a retry, a probe",
            "+90001ms retry, 0 in flight: go, a retry, a probe",
            "+90001ms retry, 0 in flight: go, a retry",
            "+90002ms first, 0 in flight: go",
            "+90002ms retry, 0 in flight: hold Ramp until +90251ms: slow start: 2 requests so far",
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
            "+1100ms first, 0 in flight: hold Rate until +1149ms: pace learned from 429s without Retry-After: 20.7 requests/s",
            "+1160ms first, 0 in flight: go",
            "+1200ms first, 0 in flight: hold Rate until +1209ms: pace learned from 429s without Retry-After: 20.7 requests/s",
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
            "+20000ms first, 0 in flight: hold Ramp until +20250ms: slow start: 1 requests so far",
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
