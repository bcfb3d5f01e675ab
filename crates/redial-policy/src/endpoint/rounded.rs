//! Waits given in whole seconds, rounded up: a token or leaky bucket that is out of room for
//! 20 ms commonly says `Retry-After: 1`. Taken literally that holds a client to one burst a
//! second (issue 54: a leaky bucket of 50/s with a burst of 10 drained 600 jobs in 56-63 s
//! against 12 s ideal). A fixed window's `Retry-After` in whole seconds means what it says: the
//! window ends then. The two are told apart by asking once, early:
//!
//! - A 429 whose only wait is a `Retry-After` of whole seconds, two at most ([`MOST`]), from an
//!   endpoint that answers others (a success within `unavailable::ALIVE`), whose
//!   rounding is not known, is taken as a bare refusal: the pace learns from it (its first
//!   refusal sets it from what went through, and pauses one interval), no quota is inferred and
//!   the endpoint is not paused for the wait. The answers to what is sent after it tell:
//!   - a success (room came back before the second was out): the endpoint **rounds** its
//!     waits, and its whole-second waits are bare refusals (its jobs go again at the pace)
//!     for [`KNOWN_FOR`];
//!   - such a 429 again, twice ([`MEANT_AFTER`]), with no success between: the endpoint
//!     **means** its waits (a spent window) for [`KNOWN_FOR`]; the second pauses it for the
//!     whole wait, as any server wait does, and a pace set by the question is forgotten.
//! - Waits in fractions of a second (`retry-after-ms`, a decimal `Retry-After`), longer ones,
//!   and those of an endpoint that answers nothing else are honoured as given.
//!
//! An endpoint that means its waits costs one refused request to find out, once every
//! [`KNOWN_FOR`]. Never saved: a restarted node asks again. Does not own the pace (`pace.rs`)
//! nor what a job refused so does (`Finished::apply`, `Decision::released_at_pace`).

use super::admission::Observed;
use super::state::EndpointState;
use crate::time::Timestamp;
use std::time::Duration;

/// Whole-second waits up to this long may be rounded.
const MOST: Duration = Duration::from_secs(2);
/// How long what was learned of an endpoint's rounding holds.
const KNOWN_FOR: Duration = Duration::from_secs(60);
/// Such 429s, to what was sent after the question, that say an endpoint means its waits (a
/// bucket just out of room may refuse one sent a moment too soon).
const MEANT_AFTER: u32 = 2;

/// What is known of how an endpoint's whole-second waits are meant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) enum Rounding {
    #[default]
    Unknown,
    /// Asked by taking the wait at time `since` as a refusal; whether that set the pace, and
    /// such 429s since (to what was sent after it) with no success between.
    Asking {
        since: Timestamp,
        set_pace: bool,
        refused: u32,
    },
    /// Rounded up, until then.
    Rounds(Timestamp),
    /// Meant, until then.
    Means(Timestamp),
}

/// Whether a wait can be one rounded up to whole seconds: a `Retry-After` of one or two whole
/// seconds.
fn whole_seconds(o: &Observed) -> bool {
    o.rate_limited
        && o.quota.requests.is_none()
        && o.quota.exhausted.is_none()
        && o.server_wait.as_ref().is_some_and(|(wait, why)| {
            !wait.is_zero()
                && *wait <= MOST
                && wait.subsec_millis() == 0
                && why.contains("Retry-After")
        })
}

impl EndpointState {
    /// Whether this answer's whole-second wait is to be taken as a bare refusal (see the module
    /// docs); learns from the answers that tell. `sent` is when the request was admitted.
    pub(super) fn wait_is_rounded(
        &mut self,
        now: Timestamp,
        sent: Option<Timestamp>,
        o: &Observed,
    ) -> bool {
        let success = o.class == super::ResultClass::Success;
        match self.rounding {
            Rounding::Rounds(until) | Rounding::Means(until) if now >= until => {
                self.rounding = Rounding::Unknown;
            }
            Rounding::Asking {
                since,
                set_pace,
                refused,
            } if sent.is_some_and(|s| s > since) => {
                if success {
                    self.rounding = Rounding::Rounds(now.saturating_add(KNOWN_FOR));
                } else if whole_seconds(o) && refused + 1 >= MEANT_AFTER {
                    if set_pace {
                        self.pace = Default::default();
                    }
                    self.rounding = Rounding::Means(now.saturating_add(KNOWN_FOR));
                    return false;
                } else if whole_seconds(o) {
                    self.rounding = Rounding::Asking {
                        since,
                        set_pace,
                        refused: refused + 1,
                    };
                }
            }
            _ => {}
        }
        if !whole_seconds(o) {
            return false;
        }
        let alive = self.alive(now);
        match self.rounding {
            Rounding::Means(_) => false,
            Rounding::Rounds(_) | Rounding::Asking { .. } => alive,
            Rounding::Unknown if alive => {
                self.rounding = Rounding::Asking {
                    since: now,
                    set_pace: self.pace.rate().is_none(),
                    refused: 0,
                };
                true
            }
            Rounding::Unknown => false,
        }
    }
}
