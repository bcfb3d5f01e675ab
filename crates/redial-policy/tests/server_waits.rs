//! Server-given waits, as real APIs send them. Each row: the headers, then the expected
//! `"<source> <requested>"` (or `"none"`), with `now` fixed at 2026-02-25T20:02:07Z.

use redial_policy::*;
use std::time::Duration;

const NOW_SECS: i64 = 1_772_049_727;
/// `NOW_SECS + 30` as epoch seconds text.
const IN_30S_EPOCH: &str = "1772049757";

fn wait(headers: &[(&str, &str)]) -> Option<ServerWait> {
    server_wait(
        headers.iter().copied(),
        Timestamp::from_unix_secs(NOW_SECS),
        Duration::from_secs(3600),
    )
}

fn check(headers: &[(&str, &str)], expected: &str) {
    let got = match wait(headers) {
        Some(w) => format!("{} {}", w.source, Human(w.requested)),
        None => "none".to_owned(),
    };
    assert_eq!(got, expected, "{headers:?}");
}

#[test]
fn retry_after_seconds_and_dates() {
    check(&[("Retry-After", "30")], "Retry-After 30s");
    check(&[("retry-after", " 30 ")], "Retry-After 30s");
    check(&[("Retry-After", "2.0")], "Retry-After 2s");
    check(&[("Retry-After", "0.25")], "Retry-After 250ms");
    check(&[("Retry-After", "0")], "Retry-After 0s");
    check(
        &[("Retry-After", "Wed, 25 Feb 2026 20:02:37 GMT")],
        "Retry-After 30s",
    );
    check(
        &[("Retry-After", "Wednesday, 25-Feb-26 20:02:37 GMT")],
        "Retry-After 30s",
    );
    check(
        &[("Retry-After", "Wed Feb 25 20:02:37 2026")],
        "Retry-After 30s",
    );
    // A date in the past means now.
    check(
        &[("Retry-After", "Sun, 06 Nov 1994 08:49:37 GMT")],
        "Retry-After 0s",
    );
}

#[test]
fn malformed_values_are_ignored() {
    for bad in [
        "",
        "-5",
        "soon",
        "1e3",
        "30s",
        "NaN",
        "inf",
        "0x10",
        "Wed, 32 Feb 2026 20:02:37 GMT",
        "३०",
    ] {
        check(&[("Retry-After", bad)], "none");
    }
    check(&[("retry-after-ms", "fast")], "none");
    check(&[("RateLimit", "\"default\";r=zero;t=30")], "none");
    check(&[("x-ratelimit-reset", "tomorrow")], "none");
    // A malformed explicit wait falls through to the next source.
    check(
        &[("Retry-After", "soon"), ("x-amz-retry-after", "1500")],
        "x-amz-retry-after 1.5s",
    );
}

#[test]
fn github() {
    // Primary limit: 403 or 429 with remaining 0; reset is epoch seconds.
    check(
        &[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-used", "5000"),
            ("x-ratelimit-reset", IN_30S_EPOCH),
            ("x-ratelimit-resource", "core"),
        ],
        "x-ratelimit-reset 30s",
    );
    // Secondary limit: retry-after, while the primary quota is not spent.
    check(
        &[
            ("retry-after", "60"),
            ("x-ratelimit-remaining", "4990"),
            ("x-ratelimit-reset", IN_30S_EPOCH),
        ],
        "Retry-After 1m",
    );
    // A quota that is not spent says nothing about when to come back.
    check(
        &[
            ("x-ratelimit-remaining", "12"),
            ("x-ratelimit-reset", IN_30S_EPOCH),
        ],
        "none",
    );
}

#[test]
fn openai() {
    // The token quota is spent, the request quota is not: its reset is the one that counts.
    check(
        &[
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-limit-tokens", "150000"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ],
        "x-ratelimit-reset-tokens 6m",
    );
    check(
        &[
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "250ms"),
        ],
        "x-ratelimit-reset-requests 250ms",
    );
    // retry-after-ms is the most precise and wins.
    check(
        &[("retry-after-ms", "1500"), ("retry-after", "2")],
        "retry-after-ms 1.5s",
    );
    check(
        &[("retry-after-ms", "20.5"), ("retry-after", "1")],
        "retry-after-ms 20ms",
    );
    check(&[("retry-after", "1.5")], "Retry-After 1.5s");
}

#[test]
fn anthropic() {
    check(
        &[
            ("retry-after", "30"),
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-02-25T20:03:07Z"),
        ],
        "Retry-After 30s",
    );
    check(
        &[
            ("anthropic-ratelimit-requests-remaining", "0"),
            ("anthropic-ratelimit-requests-reset", "2026-02-25T20:02:37Z"),
            ("anthropic-ratelimit-tokens-remaining", "4000"),
            ("anthropic-ratelimit-tokens-reset", "2026-02-25T20:05:07Z"),
        ],
        "anthropic-ratelimit-requests-reset 30s",
    );
    // Two spent quotas: the later reset wins, because a request before it would be refused.
    check(
        &[
            ("anthropic-ratelimit-input-tokens-remaining", "0"),
            (
                "anthropic-ratelimit-input-tokens-reset",
                "2026-02-25T20:02:37Z",
            ),
            ("anthropic-ratelimit-output-tokens-remaining", "0"),
            (
                "anthropic-ratelimit-output-tokens-reset",
                "2026-02-25T20:03:07Z",
            ),
        ],
        "anthropic-ratelimit-output-tokens-reset 1m",
    );
}

#[test]
fn shopify_x_sendgrid_aws() {
    check(
        &[
            ("Retry-After", "2.0"),
            ("X-Shopify-Shop-Api-Call-Limit", "40/40"),
        ],
        "Retry-After 2s",
    );
    check(
        &[
            ("x-rate-limit-limit", "900"),
            ("x-rate-limit-remaining", "0"),
            ("x-rate-limit-reset", IN_30S_EPOCH),
        ],
        "x-rate-limit-reset 30s",
    );
    check(
        &[
            ("X-RateLimit-Limit", "600"),
            ("X-RateLimit-Remaining", "0"),
            ("X-RateLimit-Reset", IN_30S_EPOCH),
        ],
        "x-ratelimit-reset 30s",
    );
    check(&[("x-amz-retry-after", "1500")], "x-amz-retry-after 1.5s");
}

#[test]
fn ietf_ratelimit_fields() {
    check(
        &[
            ("RateLimit-Policy", "\"burst\";q=100;w=60"),
            ("RateLimit", "\"burst\";r=0;t=30"),
        ],
        "RateLimit 30s",
    );
    check(&[("RateLimit", "\"default\";r=50;t=30")], "none");
    check(
        &[(
            "RateLimit",
            "\"a\";r=0;t=10, \"b\";r=0;t=40, \"c\";r=5;t=90",
        )],
        "RateLimit 40s",
    );
    // Retry-After takes precedence over the RateLimit fields, as the draft says.
    check(
        &[("RateLimit", "\"default\";r=0;t=30"), ("Retry-After", "5")],
        "Retry-After 5s",
    );
    // Older drafts.
    check(
        &[("RateLimit", "limit=100, remaining=0, reset=30")],
        "RateLimit 30s",
    );
    check(
        &[
            ("ratelimit-limit", "100"),
            ("ratelimit-remaining", "0"),
            ("ratelimit-reset", "30"),
        ],
        "ratelimit-reset 30s",
    );
}

#[test]
fn epoch_or_delta_by_magnitude() {
    // Below 10^9 a number is a delta in seconds; at or above, epoch seconds; at or above 10^12,
    // epoch milliseconds.
    check(&[("x-ratelimit-reset", "30")], "x-ratelimit-reset 30s");
    check(
        &[("x-ratelimit-reset", "999999999")],
        "x-ratelimit-reset 11574d1h46m39s",
    );
    check(
        &[("x-ratelimit-reset", IN_30S_EPOCH)],
        "x-ratelimit-reset 30s",
    );
    check(
        &[("x-ratelimit-reset", "1772049757500")],
        "x-ratelimit-reset 30.5s",
    );
    check(
        &[("x-ratelimit-reset", "1000000000")],
        "x-ratelimit-reset 0s",
    );
    // Without a remaining count the reset still counts; with one above zero it does not.
    check(
        &[("x-ratelimit-reset", "30"), ("x-rate-limit-reset", "40")],
        "x-rate-limit-reset 40s",
    );
    check(
        &[
            ("x-ratelimit-reset", "30"),
            ("x-rate-limit-remaining", "0"),
            ("x-rate-limit-reset", "20"),
        ],
        "x-rate-limit-reset 20s",
    );
}

#[test]
fn clamping_is_recorded() {
    let w = wait(&[("Retry-After", "86400")]).expect("a wait");
    assert_eq!(
        (w.requested, w.delay, w.clamped),
        (Duration::from_secs(86_400), Duration::from_secs(3600), true)
    );
    let w = wait(&[("Retry-After", "3600")]).expect("a wait");
    assert!(!w.clamped);
    let w = wait(&[("Retry-After", "99999999999999999999")]);
    assert_eq!(w.map(|w| w.delay), Some(Duration::from_secs(3600)));
}

#[test]
fn first_of_repeated_headers_wins() {
    check(
        &[("Retry-After", "5"), ("Retry-After", "50")],
        "Retry-After 5s",
    );
}
