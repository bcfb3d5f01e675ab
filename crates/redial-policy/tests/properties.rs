//! Invariants that hold for every input, checked with generated cases.

mod common;

use proptest::prelude::*;
use redial_policy::Strategy as BackoffStrategy;
use redial_policy::{
    decide, parse_duration, server_wait, Action, Backoff, Category, DeadCategory, FixedJitter,
    HandlerOutcome, Human, JobCounters, Outcome, Policy, Response, SplitMix64, StatusMatch,
    Timestamp, TransportError,
};
use std::time::Duration;

const NOW_MS: i64 = 1_772_049_727_000;

fn now() -> Timestamp {
    Timestamp::from_unix_millis(NOW_MS)
}

/// Header names the parsers read, in assorted case, plus a few they do not.
const NAMES: &[&str] = &[
    "Retry-After",
    "retry-after-ms",
    "x-amz-retry-after",
    "RateLimit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "X-Rate-Limit-Remaining",
    "x-rate-limit-reset",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "x-should-retry",
    "Stripe-Should-Retry",
    "content-type",
];

fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u64..100_000).prop_map(|n| n.to_string()),
        (0u64..10_000, 0u32..1000).prop_map(|(a, b)| format!("{a}.{b}")),
        (0i64..200_000).prop_map(|d| (NOW_MS / 1000 + d - 1000).to_string()),
        (0i64..200_000)
            .prop_map(|d| Timestamp::from_unix_secs(NOW_MS / 1000 + d - 1000).to_string()),
        Just("Wed, 25 Feb 2026 20:02:37 GMT".to_owned()),
        Just("6m0s".to_owned()),
        Just("\"default\";r=0;t=30".to_owned()),
        Just("true".to_owned()),
        Just("false".to_owned()),
        ".*",
    ]
}

fn response() -> impl Strategy<Value = Outcome> {
    (
        prop_oneof![
            100u16..1000,
            Just(429),
            Just(503),
            Just(409),
            Just(500),
            Just(200)
        ],
        prop::collection::vec((prop::sample::select(NAMES), header_value()), 0..5),
    )
        .prop_map(|(status, headers)| {
            Outcome::Response(Response {
                status,
                headers: headers
                    .into_iter()
                    .map(|(n, v)| (n.to_owned(), v))
                    .collect(),
            })
        })
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        3 => response(),
        1 => prop::sample::select(TransportError::ALL.to_vec()).prop_map(Outcome::Transport),
        1 => (0i64..10_000_000).prop_map(|ms| Outcome::Handler(HandlerOutcome::DeferUntil {
            until: Timestamp::from_unix_millis(NOW_MS - 1_000_000 + ms),
            reason: "later".into(),
        })),
    ]
}

fn counters() -> impl Strategy<Value = JobCounters> {
    (
        0u32..30,
        0u32..30,
        0u32..40,
        proptest::option::of(0u64..100_000),
        any::<bool>(),
        proptest::option::of(0u64..4_000_000),
    )
        .prop_map(
            |(failures, unknown, deferrals, deadline_s, key, last_ms)| JobCounters {
                failures,
                unknown_failures: unknown.min(failures),
                deferrals,
                enqueued_at: Timestamp::from_unix_millis(NOW_MS - 60_000),
                deadline: deadline_s.map(|s| now().saturating_add(Duration::from_secs(s))),
                has_idempotency_key: key,
                last_delay: last_ms.map(Duration::from_millis),
                method: redial_policy::Method::Post,
            },
        )
}

fn backoff() -> impl Strategy<Value = Backoff> {
    (
        prop::sample::select(vec![
            BackoffStrategy::Fixed,
            BackoffStrategy::Exponential,
            BackoffStrategy::FullJitter,
            BackoffStrategy::EqualJitter,
            BackoffStrategy::Decorrelated,
        ]),
        0u64..100_000,
        0u64..10_000_000,
        1.0f64..10.0,
    )
        .prop_map(|(strategy, base_ms, extra_ms, factor)| Backoff {
            strategy,
            base: Duration::from_millis(base_ms),
            cap: Duration::from_millis(base_ms + extra_ms),
            factor,
        })
}

fn policy() -> impl Strategy<Value = Policy> {
    (
        1u32..15,
        1u32..5,
        0u32..25,
        backoff(),
        backoff(),
        backoff(),
        proptest::option::of(1u64..100_000),
    )
        .prop_map(
            |(attempts, unknown, deferrals, t, u, d, max_age_s)| Policy {
                max_attempts: attempts,
                max_unknown_attempts: unknown,
                max_deferrals: deferrals,
                max_age: max_age_s.map(Duration::from_secs),
                transient: t,
                unknown: u,
                deferral: d,
                ..Policy::default()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(2000)))]

    #[test]
    fn a_delay_never_exceeds_its_cap(b in backoff(), n in 0u32..200, prev in proptest::option::of(0u64..u64::MAX / 2), u in any::<f64>()) {
        let d = b.delay(n, prev.map(Duration::from_millis), &mut FixedJitter(u));
        prop_assert!(d <= b.cap, "{d:?} > {:?}", b.cap);
    }

    #[test]
    fn decisions_respect_every_invariant(o in outcome(), job in counters(), p in policy(), seed in any::<u64>()) {
        let d = decide(&o, &job, &p, now(), &mut SplitMix64::new(seed));
        let next = job.after(&d);
        // A permanent outcome is never retried.
        if d.classification.category == Category::Permanent {
            prop_assert_eq!(d.action, Action::Dead(DeadCategory::Permanent));
        }
        if let Some(at) = d.action.next_run() {
            // Never earlier than now, nor than a server-given instant (after clamping).
            prop_assert!(at >= now());
            if let Some(w) = d.classification.server_wait {
                prop_assert!(at >= now().saturating_add(w.delay), "{} before the server's instant", at);
            }
            // The deadline always holds.
            if let Some(deadline) = job.deadline {
                prop_assert!(at <= deadline);
            }
            if let Some(age) = p.max_age {
                prop_assert!(at <= job.enqueued_at.saturating_add(age));
            }
        }
        // Ceilings: a retry or deferral is only scheduled below them.
        match d.action {
            Action::Retry { .. } => {
                prop_assert!(next.failures < p.max_attempts);
                if d.classification.category == Category::Unknown {
                    prop_assert!(next.unknown_failures < p.max_unknown_attempts);
                }
            }
            Action::Defer { .. } => prop_assert!(next.deferrals <= p.max_deferrals),
            Action::Complete | Action::Dead(_) => {}
        }
        // Deferrals never consume attempts.
        if matches!(d.action, Action::Defer { .. }) {
            prop_assert_eq!((next.failures, next.unknown_failures), (job.failures, job.unknown_failures));
            prop_assert_eq!(next.deferrals, job.deferrals + 1);
        }
        // The reason is one line.
        prop_assert!(!d.reason.is_empty() && !d.reason.contains('\n'));
    }

    /// Driven by any sequence of outcomes, a job ends within its ceilings.
    #[test]
    fn every_job_terminates(outcomes in prop::collection::vec(outcome(), 1..80), p in policy(), seed in any::<u64>()) {
        let mut job = JobCounters::new(now());
        let mut jitter = SplitMix64::new(seed);
        let mut t = now();
        let bound = p.max_attempts + p.max_deferrals + 1;
        for (i, o) in outcomes.iter().cycle().take(bound as usize + 1).enumerate() {
            let d = decide(o, &job, &p, t, &mut jitter);
            match d.action.next_run() {
                Some(at) => { job = job.after(&d); t = at; }
                None => return Ok(()),
            }
            prop_assert!((i as u32) < bound, "still running after {} decisions", i + 1);
        }
        prop_assert!(false, "no terminal decision within {bound} decisions");
    }

    #[test]
    fn header_parsers_survive_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..64), name in prop::sample::select(NAMES)) {
        let s = String::from_utf8_lossy(&bytes);
        let _ = Timestamp::parse_http_date(&s);
        let _ = Timestamp::parse_rfc3339(&s);
        let _ = parse_duration(&s);
        let _ = StatusMatch::parse(&s);
        let w = server_wait([(name, &*s)], now(), Duration::from_secs(3600));
        if let Some(w) = w {
            prop_assert!(w.delay <= Duration::from_secs(3600));
        }
    }

    #[test]
    fn header_parsers_survive_arbitrary_strings(s in ".{0,64}", name in prop::sample::select(NAMES)) {
        let _ = Timestamp::parse_http_date(&s);
        let _ = Timestamp::parse_rfc3339(&s);
        let _ = parse_duration(&s);
        let _ = server_wait([(name, s.as_str())], now(), Duration::from_secs(3600));
    }

    #[test]
    fn rfc3339_round_trips(ms in -62_135_596_800_000i64..253_402_300_799_999) {
        let t = Timestamp::from_unix_millis(ms);
        prop_assert_eq!(Timestamp::parse_rfc3339(&t.to_string()), Some(t));
    }

    #[test]
    fn human_durations_round_trip(ms in 0u64..10_000_000_000) {
        let d = Duration::from_millis(ms);
        prop_assert_eq!(parse_duration(&Human(d).to_string()), Some(d));
    }
}
