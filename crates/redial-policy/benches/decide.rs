//! Cost of classify + decide, per decision, for representative outcomes.
//!
//! Run: `cargo bench -p redial-policy --bench decide`. A benchmark, not a test: it prints
//! figures and asserts nothing. Each case runs for about half a second after a warm-up; the
//! best of five rounds is reported, since noise on a shared machine only ever adds time.

use redial_policy::{
    decide, JobCounters, Outcome, Policy, Response, SplitMix64, Timestamp, TransportError,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

fn main() {
    let now = Timestamp::from_unix_secs(1_772_049_727);
    let policy = Policy::default();
    let job = JobCounters {
        failures: 2,
        deferrals: 1,
        has_idempotency_key: true,
        ..JobCounters::new(now)
    };
    let http = |status: u16, headers: &[(&str, &str)]| {
        let mut r = Response::new(status);
        for (n, v) in headers {
            r = r.header(n, v);
        }
        Outcome::Response(r)
    };
    let common = [
        ("content-type", "application/json"),
        ("date", "Wed, 25 Feb 2026 20:02:07 GMT"),
        ("server", "nginx"),
        ("x-request-id", "req_8f2a1c"),
    ];
    let with_common = |status: u16, extra: &[(&'static str, &'static str)]| {
        let all: Vec<_> = common.iter().chain(extra).copied().collect();
        http(status, &all)
    };
    let cases: Vec<(&str, Outcome)> = vec![
        ("200 ok, 4 headers", with_common(200, &[])),
        (
            "429 Retry-After: 30",
            with_common(429, &[("retry-after", "30")]),
        ),
        (
            "429 Retry-After HTTP-date",
            with_common(429, &[("retry-after", "Wed, 25 Feb 2026 20:02:37 GMT")]),
        ),
        (
            "429 OpenAI, 6 rate-limit headers",
            with_common(
                429,
                &[
                    ("x-ratelimit-limit-requests", "60"),
                    ("x-ratelimit-remaining-requests", "59"),
                    ("x-ratelimit-reset-requests", "1s"),
                    ("x-ratelimit-limit-tokens", "150000"),
                    ("x-ratelimit-remaining-tokens", "0"),
                    ("x-ratelimit-reset-tokens", "6m0s"),
                ],
            ),
        ),
        ("503 no wait (backoff)", with_common(503, &[])),
        ("500 unknown", with_common(500, &[])),
        ("400 permanent", with_common(400, &[])),
        (
            "read-timeout",
            Outcome::Transport(TransportError::ReadTimeout),
        ),
    ];

    println!("{:<36} {:>12}", "case", "ns/decision");
    let mut jitter = SplitMix64::new(1);
    for (name, outcome) in &cases {
        let run = |iters: u64, jitter: &mut SplitMix64| {
            let start = Instant::now();
            for _ in 0..iters {
                let d = decide(
                    black_box(outcome),
                    black_box(&job),
                    black_box(&policy),
                    black_box(now),
                    jitter,
                );
                black_box(d);
            }
            start.elapsed()
        };
        // Calibrate to ~100 ms a round.
        let mut iters = 1_000u64;
        while run(iters, &mut jitter) < Duration::from_millis(100) {
            iters *= 2;
        }
        let best = (0..5)
            .map(|_| run(iters, &mut jitter).as_nanos() as f64 / iters as f64)
            .fold(f64::INFINITY, f64::min);
        println!("{name:<36} {best:>12.0}");
    }
}
