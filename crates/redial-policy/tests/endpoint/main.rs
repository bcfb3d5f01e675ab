//! Endpoint protection, mechanism by mechanism, with plain values for time.
//!
//! One test binary (link time is the slow part of a build), a file per area:
//! pauses and hand controls, the breaker and suspicion, the limits (rate, quotas, concurrency,
//! budget, first contact, pace), and several nodes. The helpers shared by all are here.

mod breaker;
mod limits;
mod nodes;
mod pauses;

use redial_policy::endpoint::*;
use redial_policy::{quota, Quota, Timestamp};
use std::time::Duration;

pub(crate) const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

pub(crate) fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0.as_unix_millis() + ms)
}

/// A config with every mechanism off, so that each test turns on only its own.
pub(crate) fn bare() -> EndpointConfig {
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

pub(crate) fn observed(class: ResultClass) -> Observed {
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

pub(crate) fn kind(a: &Admission) -> String {
    match a {
        Admission::Go(_) => "go".into(),
        Admission::Hold(h) => format!("hold {:?}", h.kind),
        Admission::HoldRetries(h) => format!("hold-retries {:?}", h.kind),
        Admission::HoldFirsts(h) => format!("hold-firsts {:?}", h.kind),
        Admission::FailRetry(h) => format!("fail-retry {:?}", h.kind),
    }
}

/// The permit of an admission that must go.
pub(crate) fn go(a: Admission) -> Permit {
    match a {
        Admission::Go(p) => p,
        other => panic!("expected go, got {other:?}"),
    }
}

pub(crate) fn breaker_cfg() -> EndpointConfig {
    EndpointConfig {
        breaker: BreakerConfig {
            open_for: Duration::from_secs(30),
            ..BreakerConfig::default()
        },
        ..bare()
    }
}

/// A closed breaker fed `n` results of `class`, as retries when `retry`.
pub(crate) fn feed(
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

/// An endpoint whose breaker opened at 0 and is half-open at 30 s.
pub(crate) fn half_open(cfg: &EndpointConfig) -> EndpointState {
    let mut s = EndpointState::default();
    feed(&mut s, cfg, 0, 10, true, ResultClass::Failure);
    assert_eq!(s.breaker, BreakerState::Open { until: at(30_000) });
    s
}

/// A 429 with only `Retry-After`: the wait ends the server's window.
pub(crate) fn refused(wait_ms: u64) -> Observed {
    Observed {
        overload: true,
        rate_limited: true,
        server_wait: Some((Duration::from_millis(wait_ms), "429 Retry-After".into())),
        ..observed(ResultClass::Neutral)
    }
}

/// Admits `n` attempts at `now` (each answered before the next) and records them as successes.
pub(crate) fn succeed(s: &mut EndpointState, cfg: &EndpointConfig, now: Timestamp, n: usize) {
    for i in 0..n {
        assert_eq!(
            kind(&s.admit(cfg, now, false, 0)),
            "go",
            "attempt {i} at {now}"
        );
        s.record(cfg, now, Permit::default(), &observed(ResultClass::Success));
    }
}

/// Three nodes, each with its part of one endpoint's limits: what all three let through together
/// stays within what one node alone would.
pub(crate) fn three_nodes(name: &str) -> Vec<EndpointState> {
    (0..3)
        .map(|rank| {
            let mut s = EndpointState::default();
            s.set_share(Share::for_endpoint(rank, 3, name));
            s
        })
        .collect()
}
