//! Reason patterns (`reason_pattern`): properties over arbitrary text and over the reasons
//! `decide` writes.

mod common;

use proptest::prelude::*;
use redial_policy::{
    decide, reason_pattern, FixedJitter, JobCounters, Outcome, Policy, Response, Timestamp,
};
use std::time::Duration;

fn now() -> Timestamp {
    Timestamp::from_unix_millis(1_772_049_727_000)
}

/// Text that looks like reasons: words, digits, separators, quotes, escapes, ids, non-ASCII.
fn reasonish() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-z]{1,8}",
            "[0-9]{1,6}",
            "[0-9]{1,3}(ms|s|m|h|KiB|%)",
            "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,3})?Z",
            "[ ;:,./\\-_\"`\\\\<>()\\[\\]]",
            "[a-zA-Z_]{2,5}[0-9]{3,9}[a-zA-Z]{0,3}",
            ".",
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(common::cases(2000)))]

    /// A pattern is its own pattern, whatever the text (any Unicode, any quotes), and masking
    /// never panics.
    #[test]
    fn a_pattern_is_its_own_pattern(s in prop_oneof![reasonish(), ".{0,80}"]) {
        let p = reason_pattern(&s);
        prop_assert_eq!(reason_pattern(&p), p.clone(), "the pattern of {:?}", s);
    }

    /// Past a leading status, a pattern holds no run of two digits: numbers, times, ids and
    /// durations are masked, whatever surrounds them.
    #[test]
    fn numbers_do_not_survive(s in reasonish()) {
        let p = reason_pattern(&s);
        // A leading status is kept on purpose.
        let status = p.len() >= 3
            && p.as_bytes()[..3].iter().all(u8::is_ascii_digit)
            && !p.as_bytes().get(3).is_some_and(|c| c.is_ascii_alphanumeric() || b"_.-".contains(c));
        let rest = if status { &p[3..] } else { &p[..] };
        let bytes = rest.as_bytes();
        let doubled = bytes.windows(2).any(|w| w[0].is_ascii_digit() && w[1].is_ascii_digit());
        // Short words with digits are kept on purpose (http2, sha256, 5xx): only a digit run
        // that stands as a number of its own must be gone.
        if doubled {
            let standalone = rest
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-'))
                .any(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit()));
            prop_assert!(!standalone, "{:?} -> {:?}", s, p);
        }
    }

    /// The same decision with other delays (the jitter) and other counts is one pattern: a
    /// retried 503's reasons, whatever attempt they were written at.
    #[test]
    fn one_decision_one_pattern(
        attempts in 0u32..3,
        other in 0u32..3,
        j1 in 0.0f64..1.0,
        j2 in 0.0f64..1.0,
        status in prop::sample::select(vec![429u16, 500, 502, 503, 504]),
    ) {
        let policy = Policy::default();
        let reason = |attempts: u32, jitter: f64| {
            let mut c = JobCounters::new(now());
            c.failures = attempts;
            c.deferrals = attempts;
            decide(&Outcome::Response(Response::new(status)), &c, &policy, now(), &mut FixedJitter(jitter)).reason
        };
        let (a, b) = (reason(attempts, j1), reason(other, j2));
        prop_assert_eq!(reason_pattern(&a), reason_pattern(&b), "{:?} and {:?}", a, b);
    }
}

#[test]
fn a_long_wait_is_a_duration() {
    let d = redial_policy::Human(Duration::from_secs(3723)).to_string();
    assert_eq!(reason_pattern(&format!("wait {d}")), "wait <duration>");
}
