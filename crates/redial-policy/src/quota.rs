//! Rate-limit quotas as servers report them on every response: how many requests remain, out of
//! what limit, until when. The engine uses them to stop before the 429 happens.
//!
//! Owns the limit/remaining/reset header families and the IETF `RateLimit` fields. Shares value
//! parsing with `wait` (numbers read by magnitude, Go durations, RFC 3339, HTTP-dates). Pure and
//! total: malformed values are ignored.

use crate::time::Timestamp;
use crate::wait::{parse_decimal, parse_reset};
use std::time::Duration;

/// What a response says about the endpoint's quotas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quota {
    /// The tightest request-count quota (fewest remaining).
    pub requests: Option<RequestQuota>,
    /// The latest reset among quotas of any kind (requests or tokens) that are spent: no request
    /// should be sent before it.
    pub exhausted: Option<(Duration, &'static str)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestQuota {
    pub limit: Option<u64>,
    pub remaining: u64,
    pub reset_after: Option<Duration>,
    /// The reset was given in whole seconds (an integer: epoch seconds or a delta), so it may
    /// be up to a second later than the quota frees (`endpoint/rounded_reset.rs`).
    pub reset_whole: bool,
    /// The remaining-count header it came from.
    pub source: &'static str,
}

/// (limit, remaining, reset, counts requests) header names, lowercase.
const FAMILIES: [(&str, &str, &str, bool); 9] = [
    (
        "x-ratelimit-limit",
        "x-ratelimit-remaining",
        "x-ratelimit-reset",
        true,
    ),
    (
        "x-rate-limit-limit",
        "x-rate-limit-remaining",
        "x-rate-limit-reset",
        true,
    ),
    (
        "ratelimit-limit",
        "ratelimit-remaining",
        "ratelimit-reset",
        true,
    ),
    (
        "x-ratelimit-limit-requests",
        "x-ratelimit-remaining-requests",
        "x-ratelimit-reset-requests",
        true,
    ),
    (
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
        false,
    ),
    (
        "anthropic-ratelimit-requests-limit",
        "anthropic-ratelimit-requests-remaining",
        "anthropic-ratelimit-requests-reset",
        true,
    ),
    (
        "anthropic-ratelimit-tokens-limit",
        "anthropic-ratelimit-tokens-remaining",
        "anthropic-ratelimit-tokens-reset",
        false,
    ),
    (
        "anthropic-ratelimit-input-tokens-limit",
        "anthropic-ratelimit-input-tokens-remaining",
        "anthropic-ratelimit-input-tokens-reset",
        false,
    ),
    (
        "anthropic-ratelimit-output-tokens-limit",
        "anthropic-ratelimit-output-tokens-remaining",
        "anthropic-ratelimit-output-tokens-reset",
        false,
    ),
];

/// Reads the quotas in `headers`.
pub fn quota<'a, I>(headers: I, now: Timestamp) -> Quota
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    // Three values per family, then the two IETF fields.
    let mut seen: [Option<&str>; FAMILIES.len() * 3 + 3] = [None; FAMILIES.len() * 3 + 3];
    let ietf = FAMILIES.len() * 3;
    let shopify = ietf + 2;
    for (name, value) in headers {
        let slot = if name.eq_ignore_ascii_case("ratelimit") {
            Some(ietf)
        } else if name.eq_ignore_ascii_case("ratelimit-policy") {
            Some(ietf + 1)
        } else if name.eq_ignore_ascii_case("x-shopify-shop-api-call-limit") {
            Some(shopify)
        } else {
            FAMILIES.iter().enumerate().find_map(|(i, (l, r, t, _))| {
                [l, r, t]
                    .iter()
                    .position(|n| n.len() == name.len() && n.eq_ignore_ascii_case(name))
                    .map(|k| i * 3 + k)
            })
        };
        if let Some(i) = slot {
            seen[i].get_or_insert(value);
        }
    }
    let count = |v: &str| parse_decimal(v, 1_000_000_000).map(|d| d.as_secs());
    let mut out = Quota::default();
    let mut consider = |remaining: u64,
                        limit: Option<u64>,
                        reset: Option<Duration>,
                        reset_whole: bool,
                        requests: bool,
                        source: &'static str| {
        if remaining == 0 {
            if let Some(r) = reset {
                if out.exhausted.is_none_or(|(best, _)| r > best) {
                    out.exhausted = Some((r, source));
                }
            }
        }
        if requests && out.requests.is_none_or(|q| remaining < q.remaining) {
            out.requests = Some(RequestQuota {
                limit,
                remaining,
                reset_after: reset,
                reset_whole: reset_whole && reset.is_some(),
                source,
            });
        }
    };
    for (i, (_, remaining_name, _, requests)) in FAMILIES.iter().enumerate() {
        let Some(remaining) = seen[i * 3 + 1].and_then(count) else {
            continue;
        };
        let limit = seen[i * 3].and_then(count);
        let reset_value = seen[i * 3 + 2];
        let reset = reset_value.and_then(|v| parse_reset(v, now));
        let whole = reset_value.is_some_and(is_whole);
        consider(remaining, limit, reset, whole, *requests, remaining_name);
    }
    // Shopify's leaky bucket: "used/limit", no reset (it drains continuously).
    if let Some((used, limit)) = seen[shopify].and_then(|v| v.split_once('/')) {
        if let (Some(used), Some(limit)) = (count_u64(used.trim()), count_u64(limit.trim())) {
            consider(
                limit.saturating_sub(used),
                Some(limit),
                None,
                false,
                true,
                "X-Shopify-Shop-Api-Call-Limit",
            );
        }
    }
    if let Some(field) = seen[ietf] {
        let policy_q = seen[ietf + 1]
            .and_then(|p| param(p, "q"))
            .and_then(count_u64);
        for item in field.split(',') {
            let (Some(r), t) = (param(item, "r").and_then(count_u64), param(item, "t")) else {
                continue;
            };
            let reset = t.and_then(|t| parse_decimal(t, 1_000_000_000));
            consider(
                r,
                policy_q,
                reset,
                t.is_some_and(is_whole),
                true,
                "RateLimit",
            );
        }
    }
    out
}

/// The value of `key` among `;`-separated `key=value` parameters.
fn param<'a>(item: &'a str, key: &str) -> Option<&'a str> {
    item.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        (k.trim() == key).then_some(v.trim())
    })
}

/// A value of whole seconds: an integer (epoch seconds or a delta), no fraction, no unit.
fn is_whole(v: &str) -> bool {
    // Epoch milliseconds are digits too, but not whole seconds.
    let v = v.trim();
    !v.is_empty()
        && v.bytes().all(|b| b.is_ascii_digit())
        && v.parse::<u64>().is_ok_and(|n| n < 1_000_000_000_000)
}

fn count_u64(v: &str) -> Option<u64> {
    parse_decimal(v, 1_000_000_000).map(|d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Timestamp = Timestamp::from_unix_millis(1_772_049_727_000);

    fn q(headers: &[(&str, &str)]) -> Quota {
        quota(headers.iter().copied(), NOW)
    }

    #[test]
    fn github_style() {
        let got = q(&[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "4999"),
            ("x-ratelimit-reset", "1772049757"),
        ]);
        assert_eq!(
            got.requests,
            Some(RequestQuota {
                limit: Some(5000),
                remaining: 4999,
                reset_after: Some(Duration::from_secs(30)),
                reset_whole: true,
                source: "x-ratelimit-remaining"
            })
        );
        assert_eq!(got.exhausted, None);
    }

    #[test]
    fn openai_tokens_spent_pauses_but_requests_count() {
        let got = q(&[
            ("x-ratelimit-limit-requests", "60"),
            ("x-ratelimit-remaining-requests", "59"),
            ("x-ratelimit-reset-requests", "1s"),
            ("x-ratelimit-remaining-tokens", "0"),
            ("x-ratelimit-reset-tokens", "6m0s"),
        ]);
        assert_eq!(
            got.requests.map(|r| (r.limit, r.remaining)),
            Some((Some(60), 59))
        );
        // A Go duration is not taken as rounded to whole seconds.
        assert!(!got.requests.is_some_and(|r| r.reset_whole));
        assert_eq!(
            got.exhausted,
            Some((Duration::from_secs(360), "x-ratelimit-remaining-tokens"))
        );
    }

    #[test]
    fn ietf_fields() {
        let got = q(&[
            ("RateLimit-Policy", "\"default\";q=100;w=60"),
            ("RateLimit", "\"default\";r=0;t=12"),
        ]);
        assert_eq!(
            got.requests.map(|r| (r.limit, r.remaining)),
            Some((Some(100), 0))
        );
        assert_eq!(got.exhausted, Some((Duration::from_secs(12), "RateLimit")));
    }

    #[test]
    fn shopify_call_limit() {
        let got = q(&[("X-Shopify-Shop-Api-Call-Limit", "38/40")]);
        assert_eq!(
            got.requests.map(|r| (r.limit, r.remaining, r.reset_after)),
            Some((Some(40), 2, None))
        );
        assert_eq!(
            q(&[("X-Shopify-Shop-Api-Call-Limit", "40/forty")]).requests,
            None
        );
    }

    #[test]
    fn tightest_request_quota_wins_and_garbage_is_ignored() {
        let got = q(&[
            ("x-ratelimit-remaining", "40"),
            ("anthropic-ratelimit-requests-remaining", "3"),
            ("anthropic-ratelimit-requests-reset", "2026-02-25T20:02:37Z"),
            ("ratelimit-remaining", "lots"),
        ]);
        assert_eq!(
            got.requests.map(|r| (r.remaining, r.source)),
            Some((3, "anthropic-ratelimit-requests-remaining"))
        );
        assert_eq!(q(&[("content-type", "text/plain")]), Quota::default());
    }
}
