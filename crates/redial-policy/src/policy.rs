//! The policy in force: ceilings, backoff per category, server-wait limits and override rules.
//!
//! Owns the configuration types, their documented defaults, validation, and the merge of a
//! per-endpoint or per-job override onto a queue's policy. Reads from any serde format; the
//! binary uses TOML, where durations are human strings (`"30s"`, `"5m"`).

use crate::backoff::{Backoff, Strategy};
use crate::classify::Category;
use crate::duration::serde_human;
use crate::outcome::{Response, TransportError};
use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::time::Duration;

/// A complete, validated policy. Deserialize it from a table of [`PolicyOverride`] fields: every
/// field is optional and falls back to [`Policy::default`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PolicyOverride")]
pub struct Policy {
    /// Failed attempts (transient and unknown) after which the job is dead. Deferrals do not count.
    pub max_attempts: u32,
    /// Unknown failures after which the job is dead (`unknown_exhausted`); kept smaller because an
    /// unknown failure may have taken effect.
    pub max_unknown_attempts: u32,
    /// Deferrals after which the job is dead (`deferral_exhausted`).
    pub max_deferrals: u32,
    /// A deadline counted from enqueue, applied when it is earlier than the job's own deadline.
    #[serde(with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    pub max_age: Option<Duration>,
    /// Server-given waits longer than this are clamped to it, and the reason says so.
    #[serde(with = "serde_human")]
    pub max_server_wait: Duration,
    /// Up to this much is added after a server-given instant, so that jobs released by the same
    /// reset do not all arrive at once. It only ever pushes later.
    #[serde(with = "serde_human")]
    pub server_wait_jitter: Duration,
    /// Whether `x-should-retry` and `Stripe-Should-Retry` override the built-in table.
    pub trust_provider_hints: bool,
    /// Statuses that are deferred, not failed, when the response carries a server-given wait.
    /// 429 and 529 are always deferred.
    pub defer_with_server_wait: Vec<StatusMatch>,
    /// Backoff for transient failures.
    pub transient: Backoff,
    /// Backoff for unknown failures: a longer base than transient.
    pub unknown: Backoff,
    /// Whether an unknown outcome on a request that is safe to repeat (an idempotent method, RFC
    /// 9110 section 9.2.2, or an idempotency key) waits the `transient` backoff instead of
    /// `unknown`. It still counts against `max_unknown_attempts`.
    pub safe_repeat_transient_backoff: bool,
    /// Backoff for deferrals that came without a server-given wait (a bare 429).
    pub deferral: Backoff,
    /// Overrides of the built-in table, first match wins.
    pub rules: Vec<Rule>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            max_attempts: 10,
            max_unknown_attempts: 3,
            max_deferrals: 20,
            max_age: None,
            max_server_wait: Duration::from_secs(3600),
            server_wait_jitter: Duration::from_secs(1),
            trust_provider_hints: true,
            defer_with_server_wait: vec![StatusMatch::Exact(403), StatusMatch::Exact(503)],
            transient: Backoff {
                strategy: Strategy::FullJitter,
                base: Duration::from_secs(2),
                factor: 2.0,
                cap: Duration::from_secs(600),
            },
            unknown: Backoff {
                strategy: Strategy::FullJitter,
                base: Duration::from_secs(30),
                factor: 2.0,
                cap: Duration::from_secs(1800),
            },
            safe_repeat_transient_backoff: true,
            deferral: Backoff {
                strategy: Strategy::EqualJitter,
                base: Duration::from_secs(5),
                factor: 2.0,
                cap: Duration::from_secs(300),
            },
            rules: Vec::new(),
        }
    }
}

impl Policy {
    /// This policy with `o` laid over it. Fields `o` sets replace ours; `o`'s rules go before ours,
    /// so the more specific policy is consulted first. The result is validated.
    pub fn merged(&self, o: &PolicyOverride) -> Result<Policy, PolicyError> {
        let merge_backoff = |b: &Backoff, o: &Option<BackoffOverride>| match o {
            None => *b,
            Some(o) => Backoff {
                strategy: o.strategy.unwrap_or(b.strategy),
                base: o.base.unwrap_or(b.base),
                factor: o.factor.unwrap_or(b.factor),
                cap: o.cap.unwrap_or(b.cap),
            },
        };
        let p = Policy {
            max_attempts: o.max_attempts.unwrap_or(self.max_attempts),
            max_unknown_attempts: o.max_unknown_attempts.unwrap_or(self.max_unknown_attempts),
            max_deferrals: o.max_deferrals.unwrap_or(self.max_deferrals),
            max_age: o.max_age.or(self.max_age),
            max_server_wait: o.max_server_wait.unwrap_or(self.max_server_wait),
            server_wait_jitter: o.server_wait_jitter.unwrap_or(self.server_wait_jitter),
            trust_provider_hints: o.trust_provider_hints.unwrap_or(self.trust_provider_hints),
            defer_with_server_wait: o
                .defer_with_server_wait
                .clone()
                .unwrap_or_else(|| self.defer_with_server_wait.clone()),
            transient: merge_backoff(&self.transient, &o.transient),
            unknown: merge_backoff(&self.unknown, &o.unknown),
            safe_repeat_transient_backoff: o
                .safe_repeat_transient_backoff
                .unwrap_or(self.safe_repeat_transient_backoff),
            deferral: merge_backoff(&self.deferral, &o.deferral),
            rules: o
                .rules
                .iter()
                .flatten()
                .chain(&self.rules)
                .cloned()
                .collect(),
        };
        p.validate()?;
        Ok(p)
    }

    /// Checks the values that would make decisions meaningless.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let err = |field: &str, msg: &str| Err(PolicyError(format!("{field}: {msg}")));
        if self.max_attempts == 0 {
            return err("max_attempts", "must be at least 1 (1 means no retries)");
        }
        if self.max_unknown_attempts == 0 {
            return err(
                "max_unknown_attempts",
                "must be at least 1 (1 means no retries)",
            );
        }
        for (name, b) in [
            ("transient", &self.transient),
            ("unknown", &self.unknown),
            ("deferral", &self.deferral),
        ] {
            if !b.factor.is_finite() || b.factor < 1.0 {
                return err(
                    &format!("{name}.factor"),
                    "must be a number of at least 1.0",
                );
            }
            if b.base > b.cap {
                return err(&format!("{name}.base"), "must not be longer than cap");
            }
        }
        for (i, rule) in self.rules.iter().enumerate() {
            let field = format!("rules[{i}]");
            if rule.status.is_none() && rule.header.is_none() && rule.error.is_none() {
                return err(&field, "needs at least one of status, header or error");
            }
            if rule.error.is_some() && (rule.status.is_some() || rule.header.is_some()) {
                return err(
                    &field,
                    "error cannot be combined with status or header: a transport error has no response",
                );
            }
            if rule.header.as_deref().is_some_and(|h| !is_http_token(h)) {
                return err(
                    &field,
                    "header must be a header name such as \"x-retry-hint\"",
                );
            }
        }
        Ok(())
    }
}

/// A policy's fields, each optional: how a policy file, an endpoint or a job overrides the policy
/// above it. Unknown fields are refused, so a typo is an error, not a silent default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PolicyOverride {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unknown_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_deferrals: Option<u32>,
    #[serde(with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    pub max_age: Option<Duration>,
    #[serde(with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    pub max_server_wait: Option<Duration>,
    #[serde(with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    pub server_wait_jitter: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_provider_hints: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub defer_with_server_wait: Option<Vec<StatusMatch>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transient: Option<BackoffOverride>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<BackoffOverride>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub safe_repeat_transient_backoff: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deferral: Option<BackoffOverride>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<Rule>>,
}

impl TryFrom<PolicyOverride> for Policy {
    type Error = PolicyError;
    fn try_from(o: PolicyOverride) -> Result<Self, Self::Error> {
        Policy::default().merged(&o)
    }
}

impl From<Policy> for PolicyOverride {
    fn from(p: Policy) -> Self {
        let b = |b: Backoff| {
            Some(BackoffOverride {
                strategy: Some(b.strategy),
                base: Some(b.base),
                factor: Some(b.factor),
                cap: Some(b.cap),
            })
        };
        PolicyOverride {
            max_attempts: Some(p.max_attempts),
            max_unknown_attempts: Some(p.max_unknown_attempts),
            max_deferrals: Some(p.max_deferrals),
            max_age: p.max_age,
            max_server_wait: Some(p.max_server_wait),
            server_wait_jitter: Some(p.server_wait_jitter),
            trust_provider_hints: Some(p.trust_provider_hints),
            defer_with_server_wait: Some(p.defer_with_server_wait),
            transient: b(p.transient),
            unknown: b(p.unknown),
            safe_repeat_transient_backoff: Some(p.safe_repeat_transient_backoff),
            deferral: b(p.deferral),
            rules: Some(p.rules),
        }
    }
}

/// A backoff's fields, each optional.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackoffOverride {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    #[serde(with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    pub base: Option<Duration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factor: Option<f64>,
    #[serde(with = "serde_human::option", skip_serializing_if = "Option::is_none")]
    pub cap: Option<Duration>,
}

/// An override of the built-in table. Every condition given must hold; a rule with `error` matches
/// transport errors only, one with `status` or `header` matches responses only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusMatch>,
    /// Matches when the response carries this header, whatever its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TransportError>,
    pub category: Category,
}

impl Rule {
    pub fn matches_response(&self, r: &Response) -> bool {
        self.error.is_none()
            && (self.status.is_some() || self.header.is_some())
            && self.status.is_none_or(|m| m.matches(r.status))
            && self
                .header
                .as_deref()
                .is_none_or(|h| r.header_value(h).is_some())
    }

    pub fn matches_error(&self, e: TransportError) -> bool {
        self.error == Some(e)
    }
}

/// A status, written `503`, `"503"`, `"5xx"` or `"500-504"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusMatch {
    Exact(u16),
    /// Inclusive bounds.
    Range(u16, u16),
}

impl StatusMatch {
    pub fn matches(self, status: u16) -> bool {
        match self {
            StatusMatch::Exact(s) => s == status,
            StatusMatch::Range(lo, hi) => (lo..=hi).contains(&status),
        }
    }

    /// Parses the text forms; the error says what is accepted.
    pub fn parse(s: &str) -> Result<StatusMatch, String> {
        let s = s.trim();
        let status = |t: &str| {
            t.trim()
                .parse::<u16>()
                .ok()
                .filter(|n| (100..=999).contains(n))
        };
        let parsed = if let Some(class) = s.strip_suffix("xx").or_else(|| s.strip_suffix("XX")) {
            match class.parse::<u16>() {
                Ok(c @ 1..=9) if class.len() == 1 => {
                    Some(StatusMatch::Range(c * 100, c * 100 + 99))
                }
                _ => None,
            }
        } else if let Some((lo, hi)) = s.split_once('-') {
            match (status(lo), status(hi)) {
                (Some(lo), Some(hi)) if lo <= hi => Some(StatusMatch::Range(lo, hi)),
                _ => None,
            }
        } else {
            status(s).map(StatusMatch::Exact)
        };
        parsed.ok_or_else(|| {
            format!("invalid status {s:?}: write a status (503), a class (\"5xx\") or a range (\"500-504\")")
        })
    }
}

impl fmt::Display for StatusMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            StatusMatch::Exact(s) => write!(f, "{s}"),
            StatusMatch::Range(lo, hi) if lo % 100 == 0 && hi == lo + 99 => {
                write!(f, "{}xx", lo / 100)
            }
            StatusMatch::Range(lo, hi) => write!(f, "{lo}-{hi}"),
        }
    }
}

impl Serialize for StatusMatch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StatusMatch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = StatusMatch;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a status (503), a class (\"5xx\") or a range (\"500-504\")")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<StatusMatch, E> {
                StatusMatch::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<StatusMatch, E> {
                StatusMatch::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<StatusMatch, E> {
                StatusMatch::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A policy value that makes no sense; the message names the field and says what to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError(pub String);

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

/// An HTTP token (RFC 9110 section 5.6.2): what a header name and a method must be.
pub fn is_http_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
