//! Counts over a sliding window of time, in buckets: the breaker's window (results while
//! closed) and the retry budget's (attempts that ended).
//!
//! A window is kept in buckets a tenth of its length wide; a bucket is dropped once it started a
//! whole window or more before now, so a count stays in the window from when it was made until
//! its bucket's start plus the window: between nine tenths of the window and all of it. Saved
//! with the state; a window saved in a form this version does not read is read as empty
//! ([`or_empty`]), so an older state still loads. Does not own what is counted, nor what the
//! counts decide.

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

const WINDOW_BUCKETS: i64 = 10;

/// Counts over one slice of a window. In the breaker's window `firsts` counts failed first
/// attempts; in the budget's, every first attempt that ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Bucket {
    pub(super) start: i64,
    pub(super) firsts: u32,
    pub(super) successes: u32,
    pub(super) failed_retries: u32,
}

/// The start of the bucket `now` falls in, for a window of `window`.
pub(super) fn bucket_start(now: Timestamp, window: Duration) -> i64 {
    let width = (i64::try_from(window.as_millis()).unwrap_or(i64::MAX) / WINDOW_BUCKETS).max(1);
    now.as_unix_millis().div_euclid(width) * width
}

/// Reads a value, or its default when it was saved in a form this version does not read.
pub(super) fn or_empty<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OrOther<T> {
        Value(T),
        Other(serde::de::IgnoredAny),
    }
    Ok(match OrOther::<T>::deserialize(d)? {
        OrOther::Value(v) => v,
        OrOther::Other(_) => T::default(),
    })
}

/// Adds to the bucket that starts at `start`, opening it if it is new.
pub(super) fn add_to(buckets: &mut VecDeque<Bucket>, start: i64, add: impl FnOnce(&mut Bucket)) {
    match buckets.back_mut() {
        Some(b) if b.start == start => add(b),
        _ => {
            let mut b = Bucket {
                start,
                ..Bucket::default()
            };
            add(&mut b);
            buckets.push_back(b);
        }
    }
}

pub(super) fn totals(buckets: &VecDeque<Bucket>) -> Bucket {
    buckets.iter().fold(Bucket::default(), |t, b| Bucket {
        start: t.start,
        firsts: t.firsts + b.firsts,
        successes: t.successes + b.successes,
        failed_retries: t.failed_retries + b.failed_retries,
    })
}

/// Drops buckets that started a whole window or more before `now`.
pub(super) fn prune(buckets: &mut VecDeque<Bucket>, now: Timestamp, window: Duration) {
    let horizon = now.as_unix_millis() - i64::try_from(window.as_millis()).unwrap_or(i64::MAX);
    while buckets.front().is_some_and(|b| b.start <= horizon) {
        buckets.pop_front();
    }
}
