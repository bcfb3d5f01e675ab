//! Redial's policy core: classify the outcome of one attempt at an external API call and decide
//! what happens to the job next.
//!
//! Pure by construction: no I/O, no clock, no random generator inside. `now` and a [`Jitter`]
//! source are arguments, so every decision is reproducible, simulable and testable with plain
//! values. The worker, the simulator, the dashboard's "why" and `redial explain` all call
//! [`decide`].
//!
//! Does not own storage, scheduling or HTTP: it knows outcomes, counters and policies, nothing
//! about how they are produced or where they are kept.
//!
//! ```
//! use redial_policy::*;
//! let now = Timestamp::from_unix_secs(1_800_000_000);
//! let outcome = Outcome::Response(Response::new(429).header("Retry-After", "30"));
//! let d = decide(&outcome, &JobCounters::new(now), &Policy::default(), now, &mut FixedJitter(0.0));
//! assert_eq!(d.action, Action::Defer { until: now.saturating_add(std::time::Duration::from_secs(30)),
//!                                      delay: std::time::Duration::from_secs(30) });
//! assert_eq!(d.reason, "429 rate limited; Retry-After 30s; deferral 1 of 20");
//! ```

mod backoff;
mod classify;
mod decide;
mod duration;
pub mod endpoint;
mod jitter;
mod outcome;
mod pattern;
mod policy;
mod quota;
mod repeat;
pub mod schedule;
// The instant is `redial-time`'s (the API's types use it too); `crate::time` names it here.
use redial_time as time;
mod wait;

pub use backoff::{Backoff, Strategy};
pub use classify::{classify, status_phrase, transport_default, Basis, Category, Classification};
pub use decide::{decide, Action, DeadCategory, Decision, JobCounters};
pub use duration::{parse_duration, serde_human, Human};
pub use jitter::{FixedJitter, Jitter, SplitMix64};
pub use outcome::{HandlerOutcome, Outcome, Response, TransportError, UnknownTransportError};
pub use pattern::reason_pattern;
pub use policy::{
    is_http_token, BackoffOverride, Policy, PolicyError, PolicyOverride, Rule, StatusMatch,
};
pub use quota::{quota, Quota, RequestQuota};
pub use repeat::{Method, UnknownBackoff};
pub use time::Timestamp;
pub use wait::{server_wait, ServerWait};
