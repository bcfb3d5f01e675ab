//! Protection of each downstream endpoint: shared pause, learned quotas, a pace learned from bare
//! 429s, rate limit (GCRA), slow start, first contact, concurrency limit (static or AIMD), retry
//! budget and circuit breaker.
//!
//! Pure like the rest of the policy core: [`EndpointState::admit`] and [`EndpointState::record`]
//! take `now` and plain values, and the whole state is a serde value the engine persists, so a
//! pause, an open breaker or a spent budget survive a restart. Does not own which jobs exist or
//! how many wait: the engine asks, per job, whether it may go now.
//!
//! `state.rs` holds the state and the order in which admission and recording ask each mechanism;
//! each mechanism has its own module (see `state.rs`).

mod admission;
mod breaker;
mod budget;
mod cluster;
mod concurrency;
mod config;
mod learned_quota;
pub mod pace;
mod pause;
mod rate;
mod share;
mod state;
mod suspect;
mod view;
mod window;

pub use admission::{Admission, Hold, HoldKind, Observed, Permit, ResultClass};
pub use breaker::{BreakerEvent, BreakerState};
pub use cluster::SharedHolds;
pub use config::{BreakerConfig, BudgetConfig, EndpointConfig, Rate, WhenExhausted};
pub use pause::HandPause;
pub use share::Share;
pub use state::EndpointState;
pub use view::EndpointView;
