//! Redial's worker runtime: lease jobs from a [`Store`](redial_store::Store), run them through a
//! [`Handler`], decide with the policy core, record the attempt; plus the maintenance that rescues
//! expired leases, promotes due jobs and applies retention.
//!
//! Owns scheduling, leases, heartbeats, graceful shutdown and the built-in HTTP executor. Does not
//! own storage (the store does) nor the meaning of an outcome (the policy core does), and knows
//! nothing of the API in front of it.

pub mod alerts;
mod clock;
pub mod credentials;
mod endpoints;
mod engine;
mod handler;
pub mod http;
pub mod net;
pub mod notifications;
pub mod redact;
mod shutdown;
// Re-exported where they were, so that `redial_engine::otel` (and the others) still name them.
pub use redial_observe::{metrics, otel, series};
pub mod signing;
mod tls_failure;

pub use clock::{Clock, ManualClock, SystemClock};
pub use endpoints::EndpointSettings;
pub use engine::{
    check_schedule_id, derived_idempotency_key, random_u64, BulkKind, CallbackTarget, CancelError,
    Checked, Engine, EngineConfig, GroupLimits, GroupView, Groups, IntoChecked, JobProblem,
    JobTemplate, MissedRule, OperationState, OperationView, QueueConfig, QueueGroups, QueueView,
    Retention, RunningEngine, ScheduleCheck, ScheduleDefinition, ScheduleError, ScheduleRule,
    ScheduleView, ShutdownReport, WaitError, CHUNK, MAX_TEMPLATE_TAGS,
};
pub use handler::{AttemptOutput, Handler};
pub use shutdown::Shutdown;
