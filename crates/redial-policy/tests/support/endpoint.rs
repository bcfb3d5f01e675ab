//! What the endpoint tests share (`tests/endpoint/`, `tests/saved_state/`): an instant to start
//! from, a config with every mechanism off, and the results and permits they feed in.

#![allow(dead_code)] // each test binary uses its own part

use redial_policy::endpoint::*;
use redial_policy::{Quota, Timestamp};
use std::time::Duration;

pub const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

pub fn at(ms: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0.as_unix_millis() + ms)
}

/// A config with every mechanism off, so that each test turns on only its own.
pub fn bare() -> EndpointConfig {
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

/// A breaker that opens for fixed periods (30 s, doubling), however long the endpoint has been
/// failing: the tests that pin its steps need not feed a streak first.
pub fn breaker_cfg() -> EndpointConfig {
    EndpointConfig {
        breaker: BreakerConfig {
            open_for: Duration::from_secs(30),
            min_open_for: Duration::from_secs(30),
            ..BreakerConfig::default()
        },
        ..bare()
    }
}

/// The permit of an admission that must go.
pub fn go(a: Admission) -> Permit {
    match a {
        Admission::Go(p) => p,
        other => panic!("expected go, got {other:?}"),
    }
}

pub fn observed(class: ResultClass) -> Observed {
    Observed {
        class,
        overload: false,
        rate_limited: false,
        unavailable: false,
        server_wait: None,
        quota: Quota::default(),
        others_in_flight: 0,
        safe_retry: false,
        job: None,
    }
}

/// A 429 with only `Retry-After`: the wait ends the server's window.
pub fn refused(wait_ms: u64) -> Observed {
    Observed {
        overload: true,
        rate_limited: true,
        unavailable: false,
        server_wait: Some((Duration::from_millis(wait_ms), "429 Retry-After".into())),
        ..observed(ResultClass::Neutral)
    }
}
