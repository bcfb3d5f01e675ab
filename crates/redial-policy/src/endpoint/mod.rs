//! Protection of each downstream endpoint: shared pause, learned quotas, a pace learned from bare
//! 429s, rate limit (GCRA), slow start, first contact, concurrency limit (static or AIMD), retry
//! budget and circuit breaker.
//!
//! Pure like the rest of the policy core: [`EndpointState::admit`] and [`EndpointState::record`]
//! take `now` and plain values, and the whole state is a serde value the engine persists, so a
//! pause, an open breaker or a spent budget survive a restart. Does not own which jobs exist or
//! how many wait: the engine asks, per job, whether it may go now.

mod config;
pub mod pace;
mod share;
mod state;

pub use config::{BreakerConfig, BudgetConfig, EndpointConfig, Rate, WhenExhausted};
pub use share::Share;
pub use state::{
    Admission, BreakerEvent, BreakerState, EndpointState, EndpointView, HandPause, Hold, HoldKind,
    Observed, Permit, ResultClass, SharedHolds,
};
