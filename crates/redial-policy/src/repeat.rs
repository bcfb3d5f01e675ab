//! Whether a request is safe to repeat (RFC 9110 section 9.2.2), and so which backoff an unknown
//! outcome waits.
//!
//! Owns the request methods as retrying sees them and the rule that picks the backoff of an
//! unknown outcome. Does not own counting: an unknown outcome counts against
//! `max_unknown_attempts` whatever backoff it waits, because a repeat that is safe can still be
//! futile.

use crate::backoff::Backoff;
use crate::policy::Policy;
use std::fmt;

/// A request's method, as far as retrying cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    Get,
    Head,
    Options,
    Trace,
    Put,
    Delete,
    Post,
    Patch,
    Connect,
    /// Any other token (`PROPFIND`, a custom handler's `SEND`...): not known to be idempotent.
    Extension,
}

impl Method {
    /// The method named `name`. Method names are case-sensitive (RFC 9110 section 9.1): `get` is
    /// an extension method, not GET. The API stores methods upper case.
    pub fn from_name(name: &str) -> Method {
        match name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "POST" => Method::Post,
            "PATCH" => Method::Patch,
            "CONNECT" => Method::Connect,
            _ => Method::Extension,
        }
    }

    /// Whether repeating the request has the effect of sending it once (RFC 9110 section 9.2.2):
    /// GET, HEAD, OPTIONS, TRACE, PUT and DELETE.
    pub const fn is_idempotent(self) -> bool {
        matches!(
            self,
            Method::Get
                | Method::Head
                | Method::Options
                | Method::Trace
                | Method::Put
                | Method::Delete
        )
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Options => "OPTIONS",
            Method::Trace => "TRACE",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Post => "POST",
            Method::Patch => "PATCH",
            Method::Connect => "CONNECT",
            Method::Extension => "an extension method",
        })
    }
}

/// Which backoff an unknown outcome waits, and why. The decision's reason and `redial explain`'s
/// JSON are both built from this one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownBackoff {
    /// The transient backoff: the method is idempotent.
    IdempotentMethod(Method),
    /// The transient backoff: the request carries an idempotency key.
    IdempotencyKey,
    /// The unknown backoff: neither, so the request may have taken effect.
    NotSafeToRepeat(Method),
    /// The unknown backoff: the policy's `safe_repeat_transient_backoff` is off.
    PolicyOff,
}

impl UnknownBackoff {
    /// The rule for a request with `method`, with or without an idempotency key, under `policy`.
    /// An idempotent method is named before a key: it needs no cooperation from the server.
    pub fn choose(method: Method, has_idempotency_key: bool, policy: &Policy) -> UnknownBackoff {
        if !policy.safe_repeat_transient_backoff {
            UnknownBackoff::PolicyOff
        } else if method.is_idempotent() {
            UnknownBackoff::IdempotentMethod(method)
        } else if has_idempotency_key {
            UnknownBackoff::IdempotencyKey
        } else {
            UnknownBackoff::NotSafeToRepeat(method)
        }
    }

    /// Whether a repeat is safe, so the transient backoff applies.
    pub const fn is_safe(self) -> bool {
        matches!(
            self,
            UnknownBackoff::IdempotentMethod(_) | UnknownBackoff::IdempotencyKey
        )
    }

    /// `transient` or `unknown`: the policy's backoff this rule picks.
    pub const fn backoff_name(self) -> &'static str {
        if self.is_safe() {
            "transient"
        } else {
            "unknown"
        }
    }

    /// The schedule itself.
    pub fn backoff(self, policy: &Policy) -> &Backoff {
        if self.is_safe() {
            &policy.transient
        } else {
            &policy.unknown
        }
    }

    /// `idempotent_method`, `idempotency_key`, `not_safe_to_repeat` or `policy_off`.
    pub const fn as_str(self) -> &'static str {
        match self {
            UnknownBackoff::IdempotentMethod(_) => "idempotent_method",
            UnknownBackoff::IdempotencyKey => "idempotency_key",
            UnknownBackoff::NotSafeToRepeat(_) => "not_safe_to_repeat",
            UnknownBackoff::PolicyOff => "policy_off",
        }
    }
}

/// The clause of a decision's reason: `transient backoff: GET is idempotent (RFC 9110 9.2.2)`.
impl fmt::Display for UnknownBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} backoff: ", self.backoff_name())?;
        match self {
            UnknownBackoff::IdempotentMethod(m) => write!(f, "{m} is idempotent (RFC 9110 9.2.2)"),
            UnknownBackoff::IdempotencyKey => f.write_str("the request carries an idempotency key"),
            UnknownBackoff::NotSafeToRepeat(m) => {
                write!(f, "{m} without an idempotency key may have taken effect")
            }
            UnknownBackoff::PolicyOff => f.write_str("safe_repeat_transient_backoff is off"),
        }
    }
}
