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
//!
//! # The order of admission, and what recording learns
//!
//! Before each attempt the engine asks the job's endpoint, in this order: paused by hand? paused?
//! breaker open (or half-open with its probes out)? for a retry, a quarantine's due probe kept
//! for a first attempt (`quarantine.rs`)? for a first attempt, suspect? first request
//! still unanswered (`probe_first`)? first contact's window full (`first_contact_ramp`: until 64
//! answers, at most one more in flight than answered, 16 at most)? learned quota spent? configured
//! rate (GCRA) ahead? pace learned from bare 429s ahead (`endpoint/pace.rs`)? slow start's
//! allowance used? concurrency limit reached? and, for a retry, retry budget spent? The first that
//! applies holds the job; a hold with a known end wakes the queue then, one without (concurrency,
//! probes, retries in flight) wakes it when an attempt ends. An admission hands out a `Permit`
//! (neither Clone nor Copy) that goes back exactly once: to `EndpointState::record` with the
//! result, or to `EndpointState::release` when the attempt never ran. In the engine it lives in an
//! `Admitted` guard (`endpoints.rs`) that releases on drop, so every path (given back unstarted,
//! store error, abort at shutdown, handler panic) frees the probe slot, the retry's place and the
//! in-flight count. After each attempt the result is recorded: the breaker counts successes and
//! failed retries (a failed first attempt does not count: flaky, not down), first attempts failing
//! in a row with no success make the endpoint suspect (its first attempts wait, for at most
//! `open_for`, while its retries tell; `Admission::HoldFirsts`, `Verdict::HoldFirsts`; the retry of
//! the failure that made it suspect goes at once when it is safe to send, once per suspicion:
//! `EndpointState::record` returns it, `Decision::retry_at_once` moves it), probes decide half-open
//! on their failure ratio, the retry budget counts failed and in-flight retries against ratio x
//! first attempts + one per success + the minimum, a server-given wait pauses the endpoint, quota
//! headers set the remaining count and its reset (in-flight attempts are counted as already spent),
//! a bare 429 (no wait, no quota) sets or cuts the endpoint's learned pace and successes raise it
//! (`Pace`; the refused job's deferral is brought forward to the pace's next place,
//! `Decision::defer_at_pace`), and an API that reports no quota gets one inferred from the
//! successes before its 429: counted since the reset the previous 429 gave, and only when that
//! reset and this one's are one server window apart (the shortest gap seen); successes that
//! trickled through several windows may lower the inferred limit, never raise it, and a window
//! lowers it by half at most. Once two server-given resets came a whole number of windows apart
//! (within a tenth; windows of at most a second; the length measured from the first of them, so
//! predictions do not drift), a spent inferred quota waits for the predicted next reset (plus a
//! sixteenth of a window) instead of probing, for up to 8 windows (and a second) in a row while
//! probes keep being refused; a 429 in a predicted window before half its quota went through drops
//! the prediction. A quota whose reset the headers give in whole seconds, at most 2 s away, may be
//! rounded up (a moving window's oldest request expiring): a spent window asks one request before
//! the reset, halving what is known of when the quota frees, and at such a reset one request goes
//! first (`rounded_reset.rs`).
//!
//! Recording also tells some answers apart before the mechanisms take them in
//! (`EndpointState::finish`): a bare 503 from an endpoint that answers others and whose 503s
//! follow its pace is a limiter's refusal, taken as a bare 429 (`unavailable.rs`); a 429 whose
//! only wait is a whole-second `Retry-After` from an endpoint that rounds its waits up is taken
//! as a bare 429 too (`rounded.rs`); a job that failed again after the endpoint answered
//! another a success fails for its own sake, and a quarantine does not hold it
//! (`quarantine.rs`).
//!
//! State is per process, saved to the store about every second and on shutdown, restored at
//! start; with several nodes, what is shared and what is divided is in `cluster.rs`'s docs.
//!
//! # Invariants
//!
//! **Protection never strands a healthy endpoint.** Every admission is matched by exactly one
//! release (a `Permit` consumed by `record` or `release`; the engine's `Admitted` guard releases on
//! drop). Probes and retries in flight are never persisted, so no saved state holds jobs forever.
//! For any history, an endpoint that then answers successes admits first attempts and retries again
//! within the longest server-given wait plus one open period plus the probes' time, and its breaker
//! ends closed; a pace learned from bare 429s never falls below its floor (0.5/s) while requests
//! succeed, grows with each success, and is forgotten 10 s after the last such 429. Property-tested
//! on the pure state in virtual time (`redial-policy/tests/liveness.rs`).
//!
//! **Endpoint state is a value of the policy core.** The engine only counts attempts in flight,
//! feeds results in (`record`) and saves the serialised state; every rule (pause, quota, rate,
//! budget, breaker) is pure and unit-tested with plain timestamps.

mod admission;
mod breaker;
mod budget;
mod cluster;
mod concurrency;
mod config;
mod finish;
mod forecast;
mod learned_quota;
pub mod pace;
mod pause;
mod quarantine;
mod rate;
mod rounded;
mod rounded_reset;
mod share;
mod state;
mod suspect;
mod unavailable;
mod view;
mod window;

pub use admission::{Admission, Hold, HoldKind, Observed, Permit, ResultClass};
pub use breaker::{BreakerEvent, BreakerState};
pub use cluster::SharedHolds;
pub use config::{BreakerConfig, BudgetConfig, EndpointConfig, Rate, WhenExhausted};
pub use finish::{conclude, Concluded, Finished, Sooner};
pub use forecast::{pace_text, AtRisk, Forecast, ForecastInput, WaitingDeadline};
pub use pause::HandPause;
pub use share::Share;
pub use state::EndpointState;
pub use view::EndpointView;
