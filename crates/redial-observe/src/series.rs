//! The last hour, minute by minute, kept in this process for the dashboard's charts: attempts by
//! category, jobs that finished, and attempt latency. No Prometheus needed; each node keeps its
//! own.
//!
//! Latency quantiles come from a histogram with 10 buckets per decade (each bound 1.26 times the
//! last), so a quantile is known to within 26%: the bucket's upper bound is reported.

use redial_policy::{Category, Timestamp};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Mutex;

/// Minutes kept.
pub const MINUTES: usize = 60;
const MINUTE_MS: i64 = 60_000;
/// Latency buckets: 10 per decade from 1 ms to 1,000 s, and one above.
const BUCKETS_PER_DECADE: f64 = 10.0;
const LATENCY_BUCKETS: usize = 61;

/// One minute's counts.
#[derive(Clone, Debug, PartialEq)]
struct Minute {
    /// Minutes since the Unix epoch.
    index: i64,
    /// Attempts by category, in [`CATEGORIES`] order.
    attempts: [u64; 5],
    /// Jobs that completed, and that went dead.
    completed: u64,
    dead: u64,
    latency: [u32; LATENCY_BUCKETS],
}

/// The attempt categories, in the order the series keep them.
pub const CATEGORIES: [Category; 5] = [
    Category::Success,
    Category::Defer,
    Category::Transient,
    Category::Unknown,
    Category::Permanent,
];

impl Minute {
    fn new(index: i64) -> Minute {
        Minute {
            index,
            attempts: [0; 5],
            completed: 0,
            dead: 0,
            latency: [0; LATENCY_BUCKETS],
        }
    }
}

/// A minute as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// When the minute began.
    pub at: Timestamp,
    /// Attempts by category (success, defer, transient, unknown, permanent).
    pub attempts: std::collections::BTreeMap<&'static str, u64>,
    pub completed: u64,
    pub dead: u64,
    /// Attempt latency quantiles, in milliseconds (`None`: no attempt that minute).
    pub p50_ms: Option<u64>,
    pub p99_ms: Option<u64>,
}

/// The series, updated by every attempt.
#[derive(Debug, Default)]
pub struct Series {
    minutes: Mutex<VecDeque<Minute>>,
}

/// What one attempt did, for the series.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub category: Category,
    pub duration_ms: u64,
    /// The job finished with this attempt: completed (`Some(true)`) or dead (`Some(false)`).
    pub finished: Option<bool>,
}

fn bucket_of(ms: u64) -> usize {
    if ms <= 1 {
        return 0;
    }
    let b = ((ms as f64).log10() * BUCKETS_PER_DECADE).ceil() as usize;
    b.min(LATENCY_BUCKETS - 1)
}

fn bucket_bound(b: usize) -> u64 {
    10f64.powf(b as f64 / BUCKETS_PER_DECADE).round() as u64
}

fn quantile(latency: &[u32; LATENCY_BUCKETS], q: f64) -> Option<u64> {
    let total: u64 = latency.iter().map(|n| u64::from(*n)).sum();
    if total == 0 {
        return None;
    }
    // The smallest bucket at or below which at least q of the samples fall.
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0u64;
    for (b, n) in latency.iter().enumerate() {
        seen += u64::from(*n);
        if seen >= rank {
            return Some(bucket_bound(b));
        }
    }
    Some(bucket_bound(LATENCY_BUCKETS - 1))
}

impl Series {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Minute>> {
        self.minutes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one attempt that ended at `now`.
    pub fn record(&self, now: Timestamp, s: Sample) {
        let index = now.as_unix_millis().div_euclid(MINUTE_MS);
        let mut minutes = self.lock();
        // A clock that went back a little counts in the minute it is in, if still kept.
        let m = match minutes.iter().rposition(|m| m.index == index) {
            Some(i) => &mut minutes[i],
            None => {
                if minutes.back().is_some_and(|m| m.index > index) {
                    return;
                }
                minutes.push_back(Minute::new(index));
                while minutes.len() > MINUTES {
                    minutes.pop_front();
                }
                minutes.back_mut().expect("just pushed")
            }
        };
        if let Some(i) = CATEGORIES.iter().position(|c| *c == s.category) {
            m.attempts[i] += 1;
        }
        match s.finished {
            Some(true) => m.completed += 1,
            Some(false) => m.dead += 1,
            None => {}
        }
        let b = bucket_of(s.duration_ms);
        m.latency[b] = m.latency[b].saturating_add(1);
    }

    /// The last `MINUTES` minutes up to the one holding `now`, oldest first; minutes with
    /// nothing in them are there, with zeros.
    pub fn points(&self, now: Timestamp) -> Vec<Point> {
        let last = now.as_unix_millis().div_euclid(MINUTE_MS);
        let minutes = self.lock();
        (last - MINUTES as i64 + 1..=last)
            .map(|index| {
                let empty = Minute::new(index);
                let m = minutes.iter().find(|m| m.index == index).unwrap_or(&empty);
                Point {
                    at: Timestamp::from_unix_millis(index * MINUTE_MS),
                    attempts: CATEGORIES
                        .iter()
                        .zip(m.attempts)
                        .map(|(c, n)| (c.as_str(), n))
                        .collect(),
                    completed: m.completed,
                    dead: m.dead,
                    p50_ms: quantile(&m.latency, 0.5),
                    p99_ms: quantile(&m.latency, 0.99),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(T0.as_unix_millis() + ms)
    }

    fn sample(category: Category, duration_ms: u64) -> Sample {
        Sample {
            category,
            duration_ms,
            finished: None,
        }
    }

    #[test]
    fn counts_land_in_their_minute_and_an_hour_is_kept() {
        let s = Series::default();
        s.record(at(0), sample(Category::Success, 10));
        s.record(at(59_999), sample(Category::Transient, 10));
        s.record(
            at(60_000),
            Sample {
                finished: Some(false),
                ..sample(Category::Permanent, 10)
            },
        );
        let p = s.points(at(60_000));
        assert_eq!(p.len(), MINUTES);
        let (prev, last) = (&p[MINUTES - 2], &p[MINUTES - 1]);
        assert_eq!(prev.at, T0);
        assert_eq!(
            (prev.attempts["success"], prev.attempts["transient"]),
            (1, 1)
        );
        assert_eq!((last.attempts["permanent"], last.dead), (1, 1));
        assert!(p[..MINUTES - 2].iter().all(|m| m.p50_ms.is_none()));
        // An hour later the first minute is gone.
        let later = s.points(at(3_600_000 + 1));
        assert_eq!(later[0].at, at(60_000));
        assert_eq!(later[0].attempts["permanent"], 1);
        let total: u64 = later.iter().flat_map(|m| m.attempts.values()).sum();
        assert_eq!(total, 1);
    }

    #[test]
    fn quantiles_are_bucket_bounds_within_26_percent() {
        let s = Series::default();
        for ms in 1..=100 {
            s.record(at(0), sample(Category::Success, ms));
        }
        let p = &s.points(at(0))[MINUTES - 1];
        let (p50, p99) = (p.p50_ms.expect("p50"), p.p99_ms.expect("p99"));
        assert!((50..=63).contains(&p50), "{p50}");
        assert!((99..=125).contains(&p99), "{p99}");
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1_000_000_000), LATENCY_BUCKETS - 1);
    }
}
