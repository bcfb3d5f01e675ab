//! Classification: what kind of outcome an attempt had, before counters and ceilings.
//!
//! Owns the default table (2xx success, 429 defer, 503 transient or defer, 4xx permanent, 5xx
//! unknown...), the policy's override rules and the provider hints. Does not own what happens
//! next: `decide` turns a classification into a decision.

use crate::outcome::{HandlerOutcome, Outcome, Response, TransportError};
use crate::policy::Policy;
use crate::time::Timestamp;
use crate::wait::{server_wait, ServerWait};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The kind of an outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// The work is done.
    Success,
    /// Not a failure: come back later. Costs a deferral, not an attempt.
    Defer,
    /// A failure that may pass: retried with backoff.
    Transient,
    /// Retrying cannot help: dead at once.
    Permanent,
    /// It is not clear whether the request took effect: retried cautiously, under its own
    /// smaller ceiling and longer backoff.
    Unknown,
}

impl Category {
    pub const fn as_str(self) -> &'static str {
        match self {
            Category::Success => "success",
            Category::Defer => "defer",
            Category::Transient => "transient",
            Category::Permanent => "permanent",
            Category::Unknown => "unknown",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an outcome got its category.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Basis {
    /// The built-in table.
    Default,
    /// The policy's rule at this index (0-based) matched.
    Rule(usize),
    /// A provider hint the policy trusts: the header and whether it said to retry.
    Hint(&'static str, bool),
    /// A custom handler said so.
    Handler,
}

/// The result of [`classify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    pub category: Category,
    pub basis: Basis,
    /// The server-given wait, already clamped to the policy's maximum. For a handler's
    /// `DeferUntil` it is the handler's instant, with source `handler wait`.
    pub server_wait: Option<ServerWait>,
}

/// Provider hints, in the order they are consulted.
const HINTS: [&str; 2] = ["x-should-retry", "stripe-should-retry"];

/// Classifies one outcome. `has_idempotency_key` says whether the request carried one: with a key,
/// a 409 means the provider is still processing an earlier attempt, which is worth retrying.
pub fn classify(
    outcome: &Outcome,
    has_idempotency_key: bool,
    policy: &Policy,
    now: Timestamp,
) -> Classification {
    match outcome {
        Outcome::Response(r) => classify_response(r, has_idempotency_key, policy, now),
        Outcome::Transport(e) => {
            let rule = policy.rules.iter().position(|rule| rule.matches_error(*e));
            Classification {
                category: rule.map_or_else(|| transport_default(*e), |i| policy.rules[i].category),
                basis: rule.map_or(Basis::Default, Basis::Rule),
                server_wait: None,
            }
        }
        Outcome::Handler(h) => {
            let (category, server_wait) = match h {
                HandlerOutcome::Success => (Category::Success, None),
                HandlerOutcome::Transient { .. } => (Category::Transient, None),
                HandlerOutcome::Permanent { .. } => (Category::Permanent, None),
                HandlerOutcome::Unknown { .. } => (Category::Unknown, None),
                HandlerOutcome::DeferUntil { until, .. } => (
                    Category::Defer,
                    Some(ServerWait::new(
                        "handler wait",
                        until.saturating_since(now),
                        policy.max_server_wait,
                    )),
                ),
            };
            Classification {
                category,
                basis: Basis::Handler,
                server_wait,
            }
        }
    }
}

fn classify_response(
    r: &Response,
    has_key: bool,
    policy: &Policy,
    now: Timestamp,
) -> Classification {
    let rule = policy
        .rules
        .iter()
        .position(|rule| rule.matches_response(r));
    let success = (200..300).contains(&r.status);
    if success && rule.is_none() {
        // The hot path: nothing to parse.
        return Classification {
            category: Category::Success,
            basis: Basis::Default,
            server_wait: None,
        };
    }
    let wait = server_wait(
        r.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())),
        now,
        policy.max_server_wait,
    );
    if let Some(i) = rule {
        return Classification {
            category: policy.rules[i].category,
            basis: Basis::Rule(i),
            server_wait: wait,
        };
    }
    let default = response_default(r.status, has_key, wait.is_some(), policy);
    if policy.trust_provider_hints {
        for hint in HINTS {
            let Some(value) = r.header_value(hint) else {
                continue;
            };
            let retry = match value.trim() {
                v if v.eq_ignore_ascii_case("true") => true,
                v if v.eq_ignore_ascii_case("false") => false,
                _ => continue,
            };
            let category = match (retry, default) {
                (false, _) => Category::Permanent,
                (true, Category::Defer) => Category::Defer,
                (true, _) => Category::Transient,
            };
            return Classification {
                category,
                basis: Basis::Hint(hint, retry),
                server_wait: wait,
            };
        }
    }
    Classification {
        category: default,
        basis: Basis::Default,
        server_wait: wait,
    }
}

/// The built-in table for responses.
fn response_default(status: u16, has_key: bool, has_wait: bool, policy: &Policy) -> Category {
    match status {
        200..=299 => Category::Success,
        429 | 529 => Category::Defer,
        _ if has_wait
            && policy
                .defer_with_server_wait
                .iter()
                .any(|m| m.matches(status)) =>
        {
            Category::Defer
        }
        408 | 502 | 503 | 504 => Category::Transient,
        409 if has_key => Category::Transient,
        400..=499 => Category::Permanent,
        _ => Category::Unknown,
    }
}

/// The built-in table for transport errors.
pub fn transport_default(e: TransportError) -> Category {
    use TransportError::*;
    match e {
        ConnectionRefused | ConnectionReset | DnsTemporary | ConnectTimeout | ReadTimeout
        | Timeout => Category::Transient,
        DnsNotFound | InvalidRequest | DestinationRefused => Category::Permanent,
        // The request may have reached the server and taken effect: retry, but cautiously.
        Tls | MalformedResponse | TruncatedResponse | RedirectNotFollowed | ResponseTooLarge => {
            Category::Unknown
        }
    }
}

/// A short phrase for a status, for reasons: `rate limited`, `service unavailable`.
#[allow(clippy::match_overlapping_arm)] // specific statuses first, then their classes
pub fn status_phrase(status: u16) -> &'static str {
    match status {
        400 => "bad request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not found",
        405 => "method not allowed",
        408 => "request timeout",
        409 => "conflict",
        410 => "gone",
        413 => "payload too large",
        422 => "unprocessable content",
        429 => "rate limited",
        500 => "internal server error",
        501 => "not implemented",
        502 => "bad gateway",
        503 => "service unavailable",
        504 => "gateway timeout",
        529 => "overloaded",
        200..=299 => "success",
        300..=399 => "redirect",
        400..=499 => "client error",
        500..=599 => "server error",
        _ => "unexpected status",
    }
}
