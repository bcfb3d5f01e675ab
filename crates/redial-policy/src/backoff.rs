//! Backoff schedules: how long to wait before the next attempt when the server did not say.
//!
//! Owns the five strategies and their parameters. Pure: the random part comes from the caller's
//! [`Jitter`]. Every delay is at most the cap, whatever the inputs.

use crate::duration::serde_human;
use crate::jitter::{unit, Jitter};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How delays grow with the number of failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Always `base`.
    Fixed,
    /// `base * factor^(n-1)`, no randomness: synchronised clients retry together.
    Exponential,
    /// `random(0, exponential)`. The default: in AWS's simulation it does the least total work.
    FullJitter,
    /// `exponential/2 + random(0, exponential/2)`: never shorter than half the schedule.
    EqualJitter,
    /// `random(base, previous * 3)`, capped: each delay grows from the previous one.
    Decorrelated,
}

impl Strategy {
    pub const fn as_str(self) -> &'static str {
        match self {
            Strategy::Fixed => "fixed",
            Strategy::Exponential => "exponential",
            Strategy::FullJitter => "full jitter",
            Strategy::EqualJitter => "equal jitter",
            Strategy::Decorrelated => "decorrelated jitter",
        }
    }
}

/// One backoff schedule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Backoff {
    pub strategy: Strategy,
    /// The first delay (and the lower bound of decorrelated jitter).
    #[serde(with = "serde_human")]
    pub base: Duration,
    /// Growth per failure for the exponential strategies; at least 1.
    pub factor: f64,
    /// No delay is ever longer.
    #[serde(with = "serde_human")]
    pub cap: Duration,
}

impl Backoff {
    /// The delay before the attempt after the `failures`-th failure (1 for the first), given the
    /// delay chosen last time, if any (decorrelated jitter grows from it).
    pub fn delay(
        &self,
        failures: u32,
        previous: Option<Duration>,
        jitter: &mut dyn Jitter,
    ) -> Duration {
        let cap = self.cap.as_secs_f64();
        let base = self.base.as_secs_f64().min(cap);
        let exp = || {
            let power = i32::try_from(failures.saturating_sub(1)).unwrap_or(i32::MAX);
            let grown = base * self.factor.max(1.0).powi(power);
            if grown.is_finite() {
                grown.min(cap)
            } else {
                cap
            }
        };
        let secs = match self.strategy {
            Strategy::Fixed => base,
            Strategy::Exponential => exp(),
            Strategy::FullJitter => unit(jitter) * exp(),
            Strategy::EqualJitter => {
                let e = exp();
                e / 2.0 + unit(jitter) * e / 2.0
            }
            Strategy::Decorrelated => {
                let prev = previous.map_or(base, |p| p.as_secs_f64());
                let hi = (prev * 3.0).max(base);
                (base + unit(jitter) * (hi - base)).min(cap)
            }
        };
        // Float rounding must not push a delay past the cap.
        Duration::try_from_secs_f64(secs)
            .unwrap_or(self.cap)
            .min(self.cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jitter::FixedJitter;

    fn check(
        strategy: Strategy,
        failures: u32,
        previous_ms: Option<u64>,
        unit: f64,
        expected_ms: u64,
    ) {
        let b = Backoff {
            strategy,
            base: Duration::from_secs(1),
            factor: 2.0,
            cap: Duration::from_secs(60),
        };
        let got = b.delay(
            failures,
            previous_ms.map(Duration::from_millis),
            &mut FixedJitter(unit),
        );
        assert_eq!(
            got.as_millis() as u64,
            expected_ms,
            "{strategy:?} n={failures} unit={unit}"
        );
    }

    #[test]
    fn schedules() {
        use Strategy::*;
        check(Fixed, 1, None, 0.5, 1_000);
        check(Fixed, 9, None, 0.5, 1_000);
        check(Exponential, 1, None, 0.5, 1_000);
        check(Exponential, 4, None, 0.5, 8_000);
        check(Exponential, 7, None, 0.5, 60_000);
        check(Exponential, u32::MAX, None, 0.5, 60_000);
        check(FullJitter, 4, None, 0.0, 0);
        check(FullJitter, 4, None, 0.5, 4_000);
        check(EqualJitter, 4, None, 0.0, 4_000);
        check(EqualJitter, 4, None, 0.5, 6_000);
        check(Decorrelated, 1, None, 0.0, 1_000);
        check(Decorrelated, 1, None, 0.5, 2_000);
        check(Decorrelated, 3, Some(10_000), 0.5, 15_500);
        check(Decorrelated, 3, Some(50_000), 0.9, 60_000);
    }
}
