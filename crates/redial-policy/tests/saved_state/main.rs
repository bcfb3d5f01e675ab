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
//!
//! One test binary, a file per group of mechanisms; the cases' machinery is here.

mod breaker_and_limits;
mod pauses_and_quotas;

#[path = "../support/endpoint.rs"]
mod support;
use redial_policy::endpoint::*;
use redial_policy::{quota, Timestamp};
use std::path::PathBuf;
use support::*;

/// A 429 that says nothing.
pub(crate) fn bare_429() -> Observed {
    Observed {
        overload: true,
        rate_limited: true,
        ..observed(ResultClass::Neutral)
    }
}

/// Admits an attempt at `ms` and records how it ended.
pub(crate) fn attempt(
    s: &mut EndpointState,
    cfg: &EndpointConfig,
    ms: i64,
    retry: bool,
    o: &Observed,
) {
    let p = go(s.admit(cfg, at(ms), retry, 0));
    s.record(cfg, at(ms), p, o);
}

/// One question asked of a state read back: admit at `ms` after `T0`, as a retry or not, with
/// `in_flight` attempts running.
pub(crate) struct Ask {
    ms: i64,
    retry: bool,
    in_flight: u32,
}

pub(crate) fn first(ms: i64) -> Ask {
    Ask {
        ms,
        retry: false,
        in_flight: 0,
    }
}

pub(crate) fn retry(ms: i64) -> Ask {
    Ask {
        ms,
        retry: true,
        in_flight: 0,
    }
}

/// One case: how the state is built through the public API, the config it is asked under, and
/// the share of the node that reads it back (set by the engine after loading, never saved).
pub(crate) struct Case {
    name: &'static str,
    cfg: EndpointConfig,
    build: fn(&EndpointConfig) -> EndpointState,
    share: Share,
}

/// An instant as its distance from `T0`, so that the answers read at a glance.
pub(crate) fn rel(t: Option<Timestamp>) -> String {
    t.map_or("-".into(), |t| {
        format!("+{}ms", t.as_unix_millis() - T0.as_unix_millis())
    })
}

/// The state's answers: its view at the first question's instant, then each admission, one line
/// each. What an admission let go ends at once as a success.
pub(crate) fn answers(s: &mut EndpointState, cfg: &EndpointConfig, asks: &[Ask]) -> Vec<String> {
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

/// Fields saved since the fixtures were written (each last in the saved form, and left out when
/// empty, so a fixture still reads and saves to its own bytes): taken out of a state built today
/// before it is compared with its fixture.
const ADDED_SINCE: &[&str] = &[
    "failing_since",
    "open_period",
    "quarantined_since",
    "outage_began",
];

fn without_added_fields(mut saved: String) -> String {
    for field in ADDED_SINCE {
        let key = format!(",\"{field}\":");
        if let Some(start) = saved.find(&key) {
            let value = &saved[start + key.len()..];
            // A timestamp (a quoted string), a duration (an object of numbers) or null.
            let len = if let Some(rest) = value.strip_prefix('"') {
                rest.find('"').map_or(value.len(), |end| end + 2)
            } else if value.starts_with('{') {
                value.find('}').map_or(value.len(), |end| end + 1)
            } else {
                value.find([',', '}']).unwrap_or(value.len())
            };
            saved.replace_range(start..start + key.len() + len, "");
        }
    }
    saved
}

pub(crate) fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/endpoint_state")
        .join(format!("{name}.json"))
}

/// Builds the case's state and saves it as the engine does: it must be the fixture, byte for
/// byte. Reads the fixture back: it must save to the same bytes, and answer `expected`.
pub(crate) fn check(case: Case, asks: &[Ask], expected: &[&str]) {
    let built = (case.build)(&case.cfg);
    let saved = without_added_fields(serde_json::to_string(&built).expect("a state serialises"));
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

/// `n` attempts at `ms`, as retries when `retry`, each ending as `class`.
pub(crate) fn feed(
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
