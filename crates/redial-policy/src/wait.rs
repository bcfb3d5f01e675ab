//! Server-given waits: every header real APIs use to say "come back at T", parsed into one wait.
//!
//! Owns the header names, the value formats and the precedence between them. Does not own what
//! a wait means for a job (that is `decide`), nor the clock: `now` is an argument. Malformed values
//! are ignored, never an error and never a panic.
//!
//! # Precedence
//!
//! 1. Explicit waits, the most precise first: `retry-after-ms` (OpenAI), `Retry-After`
//!    (RFC 9110; seconds, decimals tolerated, or any HTTP-date form), `x-amz-retry-after`
//!    (milliseconds). The first one present and well-formed wins. The IETF RateLimit draft also
//!    says Retry-After takes precedence over its fields.
//! 2. Quota resets, used only when no explicit wait is given: the IETF `RateLimit` field
//!    (`"default";r=0;t=30`, and the older `remaining=0, reset=30` form) and the
//!    remaining/reset header pairs of GitHub, X, SendGrid, OpenAI, Anthropic and the older
//!    `ratelimit-remaining`/`ratelimit-reset` draft. A pair whose remaining count is above zero
//!    is not the limit that was hit and is ignored. Among the quotas that say they are spent, the
//!    latest reset wins, since a request before it would be refused; when no remaining count is
//!    given at all, the latest reset present wins.
//!
//! # Numbers that may be an epoch or a delta
//!
//! Reset headers carry epoch seconds under one vendor's name and a delta under another's. A plain
//! number is read by magnitude: at least 10^12 is epoch milliseconds, at least 10^9 (2001-09-09 as
//! epoch seconds, 31 years as a delta) is epoch seconds, anything smaller is delta seconds. A
//! reset may also be a Go-style duration (`6m0s`), an RFC 3339 instant or an HTTP-date.
//!
//! An instant in the past means "now": the wait is zero.

use crate::duration::parse_duration;
use crate::time::Timestamp;
use std::time::Duration;

/// The wait a response asks for, after parsing and clamping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerWait {
    /// The header the wait came from, spelled as vendors document it.
    pub source: &'static str,
    /// The wait the server asked for, counted from `now`.
    pub requested: Duration,
    /// The wait to honour: `requested`, clamped to the policy's maximum.
    pub delay: Duration,
    /// Whether `requested` was over the maximum.
    pub clamped: bool,
}

impl ServerWait {
    /// A wait of `requested`, clamped to `max`.
    pub fn new(source: &'static str, requested: Duration, max: Duration) -> Self {
        ServerWait {
            source,
            requested,
            delay: requested.min(max),
            clamped: requested > max,
        }
    }
}

/// Header names this module reads, lowercase. Explicit waits first, then the IETF field, then
/// remaining/reset pairs at even/odd positions from `PAIRS_START`.
const NAMES: [&str; 22] = [
    "retry-after-ms",
    "retry-after",
    "x-amz-retry-after",
    "ratelimit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "x-rate-limit-remaining",
    "x-rate-limit-reset",
    "ratelimit-remaining",
    "ratelimit-reset",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
];
const RETRY_AFTER_MS: usize = 0;
const RETRY_AFTER: usize = 1;
const AMZ_RETRY_AFTER: usize = 2;
const RATELIMIT: usize = 3;
const PAIRS_START: usize = 4;

/// How the names are shown in reasons.
const DISPLAY: [&str; 4] = [
    "retry-after-ms",
    "Retry-After",
    "x-amz-retry-after",
    "RateLimit",
];

/// Finds the server-given wait in `headers`, clamped to `max`; `None` when there is none or
/// every candidate is malformed.
pub fn server_wait<'a, I>(headers: I, now: Timestamp, max: Duration) -> Option<ServerWait>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut seen: [Option<&str>; NAMES.len()] = [None; NAMES.len()];
    for (name, value) in headers {
        // Header names are short; comparing lengths first makes the miss path cheap.
        if let Some(i) = NAMES
            .iter()
            .position(|n| n.len() == name.len() && n.eq_ignore_ascii_case(name))
        {
            seen[i].get_or_insert(value);
        }
    }

    let explicit = [
        (
            RETRY_AFTER_MS,
            seen[RETRY_AFTER_MS].and_then(|v| parse_decimal(v, 1_000_000)),
        ),
        (
            RETRY_AFTER,
            seen[RETRY_AFTER].and_then(|v| parse_retry_after(v, now)),
        ),
        (
            AMZ_RETRY_AFTER,
            seen[AMZ_RETRY_AFTER].and_then(|v| parse_decimal(v, 1_000_000)),
        ),
    ];
    if let Some((i, d)) = explicit.into_iter().find_map(|(i, d)| Some((i, d?))) {
        return Some(ServerWait::new(DISPLAY[i], d, max));
    }

    let mut exhausted: Option<(usize, Duration)> = None;
    let mut unqualified: Option<(usize, Duration)> = None;
    let keep_latest = |slot: &mut Option<(usize, Duration)>, i: usize, d: Duration| {
        if slot.is_none_or(|(_, best)| d > best) {
            *slot = Some((i, d));
        }
    };
    if let Some(d) = seen[RATELIMIT].and_then(parse_ratelimit_field) {
        keep_latest(&mut exhausted, RATELIMIT, d);
    }
    for remaining_i in (PAIRS_START..NAMES.len()).step_by(2) {
        let reset_i = remaining_i + 1;
        let Some(reset) = seen[reset_i].and_then(|v| parse_reset(v, now)) else {
            continue;
        };
        match seen[remaining_i].and_then(|v| parse_decimal(v, 1)) {
            Some(d) if d.is_zero() => keep_latest(&mut exhausted, reset_i, reset),
            Some(_) => {}
            None => keep_latest(&mut unqualified, reset_i, reset),
        }
    }
    let (i, d) = exhausted.or(unqualified)?;
    let source = if i == RATELIMIT {
        DISPLAY[RATELIMIT]
    } else {
        NAMES[i]
    };
    Some(ServerWait::new(source, d, max))
}

/// `Retry-After`: delay-seconds (decimals tolerated) or an HTTP-date.
fn parse_retry_after(v: &str, now: Timestamp) -> Option<Duration> {
    parse_decimal(v, 1_000_000_000)
        .or_else(|| Timestamp::parse_http_date(v.trim()).map(|t| t.saturating_since(now)))
}

/// A reset value: a number read by magnitude, a Go-style duration, RFC 3339 or an HTTP-date.
pub(crate) fn parse_reset(v: &str, now: Timestamp) -> Option<Duration> {
    let v = v.trim();
    if let Some(d) = parse_decimal(v, 1_000_000_000) {
        let secs = d.as_secs();
        return Some(if secs >= 1_000_000_000_000 {
            // Epoch milliseconds: the "seconds" we read are really milliseconds.
            let millis = i64::try_from(secs).unwrap_or(i64::MAX);
            Timestamp::from_unix_millis(millis).saturating_since(now)
        } else if secs >= 1_000_000_000 {
            let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
            Timestamp::from_unix_millis(millis).saturating_since(now)
        } else {
            d
        });
    }
    parse_duration(v)
        .or_else(|| Timestamp::parse_rfc3339(v).map(|t| t.saturating_since(now)))
        .or_else(|| Timestamp::parse_http_date(v).map(|t| t.saturating_since(now)))
}

/// The IETF `RateLimit` field. Structured form: items `"name";r=<remaining>;t=<seconds>`
/// separated by commas; an item with `r=0` contributes its `t`. Older drafts' flat form:
/// `limit=10, remaining=0, reset=5`. Returns the latest reset among spent quotas.
fn parse_ratelimit_field(v: &str) -> Option<Duration> {
    let mut latest: Option<Duration> = None;
    let mut flat_remaining = None;
    let mut flat_reset = None;
    for item in v.split(',') {
        let (mut r, mut t) = (None, None);
        for param in item.split(';') {
            let Some((key, value)) = param.split_once('=') else {
                continue;
            };
            let value = parse_decimal(value, 1_000_000_000);
            match key.trim() {
                "r" => r = value,
                "t" => t = value,
                "remaining" => flat_remaining = value,
                "reset" => flat_reset = value,
                _ => {}
            }
        }
        if let (Some(r), Some(t)) = (r, t) {
            if r.is_zero() {
                latest = latest.max(Some(t));
            }
        }
    }
    if let (Some(r), Some(t)) = (flat_remaining, flat_reset) {
        if r.is_zero() {
            latest = latest.max(Some(t));
        }
    }
    latest
}

/// A non-negative decimal number (`30`, `2.0`, `.5`) times `unit_nanos` nanoseconds. No sign, no
/// exponent, no surrounding text besides spaces. A number too large for a `Duration` saturates,
/// so that an absurd wait is clamped rather than ignored.
pub(crate) fn parse_decimal(v: &str, unit_nanos: u128) -> Option<Duration> {
    let b = v.trim().as_bytes();
    let mut whole: u128 = 0;
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        whole = whole
            .saturating_mul(10)
            .saturating_add(u128::from(b[i] - b'0'));
        i += 1;
    }
    let mut digits = i;
    let (mut frac, mut scale) = (0u128, 1u128);
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            if scale < 1_000_000_000_000 {
                frac = frac * 10 + u128::from(b[i] - b'0');
                scale *= 10;
            }
            i += 1;
            digits += 1;
        }
    }
    if digits == 0 || i != b.len() {
        return None;
    }
    let nanos = whole
        .saturating_mul(unit_nanos)
        .saturating_add(frac * unit_nanos / scale);
    let Ok(secs) = u64::try_from(nanos / 1_000_000_000) else {
        return Some(Duration::MAX);
    };
    // The remainder of a division by 1e9 always fits in u32 and cannot overflow `secs`.
    Some(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}
