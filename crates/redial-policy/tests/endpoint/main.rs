//! Endpoint protection, mechanism by mechanism, with plain values for time.
//!
//! One test binary (link time is the slow part of a build), a file per area:
//! pauses and hand controls, the breaker and suspicion, the limits (rate, quotas, concurrency,
//! budget, first contact, pace), and several nodes. The helpers shared by all are here.

mod breaker;
mod forecast;
mod limits;
mod nodes;
mod pauses;

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/endpoint.rs"]
mod support;
use redial_policy::endpoint::*;
use redial_policy::{quota, Timestamp};
use std::time::Duration;
use support::*;

pub(crate) fn kind(a: &Admission) -> String {
    match a {
        Admission::Go(_) => "go".into(),
        Admission::Hold(h) => format!("hold {:?}", h.kind),
        Admission::HoldRetries(h) => format!("hold-retries {:?}", h.kind),
        Admission::HoldFirsts(h) => format!("hold-firsts {:?}", h.kind),
        Admission::FailRetry(h) => format!("fail-retry {:?}", h.kind),
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
