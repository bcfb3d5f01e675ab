//! Forecasts: how long a backlog takes to drain at the limits in force, and which waiting jobs
//! miss their deadline.

use super::*;

fn deadline(ahead: u64, run_at: i64, deadline: i64) -> WaitingDeadline {
    WaitingDeadline {
        ahead,
        run_at: at(run_at),
        deadline: at(deadline),
    }
}

fn secs(f: &Forecast) -> f64 {
    f.drain_seconds.expect("a drain time")
}

#[test]
fn a_configured_rate_sets_the_drain_time() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("10/s").expect("rate")),
        ..bare()
    };
    let s = EndpointState::default();
    let input = ForecastInput {
        due: 100,
        later: 0,
        ..Default::default()
    };
    let f = s.forecast(&cfg, at(0), &input);
    assert_eq!(f.waiting, 100);
    assert_eq!(f.starts_at, Some(at(0)));
    assert_eq!(f.jobs_per_second, Some(10.0));
    assert!(f.limited_by.contains("configured rate"), "{}", f.limited_by);
    // The 100th job starts 9.9 s in.
    assert!((secs(&f) - 9.9).abs() < 0.01, "{f:?}");
    assert_eq!(f.deadline_at_risk, 0);
}

#[test]
fn concurrency_over_the_attempt_time_sets_the_pace_when_it_is_the_smallest() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("100/s").expect("rate")),
        concurrency: Some(4),
        ..bare()
    };
    let s = EndpointState::default();
    let input = ForecastInput {
        due: 201,
        attempt_time: Some(Duration::from_millis(200)),
        workers: Some(32),
        ..Default::default()
    };
    let f = s.forecast(&cfg, at(0), &input);
    assert_eq!(f.jobs_per_second, Some(20.0));
    assert!(
        f.limited_by.contains("concurrency limit, 4"),
        "{}",
        f.limited_by
    );
    assert!((secs(&f) - 10.0).abs() < 0.01, "{f:?}");

    // Without an endpoint limit, the workers bound it.
    let f = s.forecast(&bare(), at(0), &input);
    assert_eq!(f.jobs_per_second, Some(160.0));
    assert!(f.limited_by.contains("workers, 32"), "{}", f.limited_by);
}

#[test]
fn with_nothing_known_the_pace_and_the_drain_are_unknown_and_said_so() {
    let s = EndpointState::default();
    let d = [deadline(5, 0, 1_000)];
    let input = ForecastInput {
        due: 10,
        deadlines: &d,
        ..Default::default()
    };
    let f = s.forecast(&bare(), at(0), &input);
    assert_eq!(f.jobs_per_second, None);
    assert_eq!(f.drains_at, None);
    assert!(f.limited_by.starts_with("not known"), "{}", f.limited_by);
    // Nothing holds it: a job is at risk only if its deadline falls before its own time.
    assert_eq!((f.with_deadline, f.deadline_at_risk), (1, 0));
}

#[test]
fn a_pause_delays_the_start_and_puts_the_jobs_behind_it_at_risk() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("10/s").expect("rate")),
        ..bare()
    };
    let mut s = EndpointState::default();
    s.paused_until = Some(at(60_000));
    // Starts: the 6th at 60.5 s, the 51st at 65 s, the first scheduled for 100 s at 100 s and
    // the 11th after it 1 s later (the 20 scheduled jobs come after the 100 due).
    let d = [
        deadline(5, 0, 62_000),
        deadline(50, 0, 62_000),
        deadline(100, 100_000, 100_000),
        deadline(110, 100_000, 100_999),
    ];
    let input = ForecastInput {
        due: 100,
        later: 20,
        deadlines: &d,
        ..Default::default()
    };
    let f = s.forecast(&cfg, at(0), &input);
    assert_eq!(f.starts_at, Some(at(60_000)));
    // The last starts 0.9 s after the 11th scheduled one: held up with it.
    assert!((secs(&f) - 101.9).abs() < 0.01, "{f:?}");
    assert_eq!((f.with_deadline, f.deadline_at_risk), (4, 2));
    let first = f.first_at_risk.expect("one at risk");
    assert_eq!(first.deadline, at(62_000));
    assert_eq!(first.forecast_start, Some(at(65_000)));
}

#[test]
fn a_pause_by_hand_without_an_end_has_no_start_and_every_deadline_is_at_risk() {
    let mut s = EndpointState::default();
    s.hand_pause = Some(HandPause {
        since: at(0),
        until: None,
        reason: "maintenance".into(),
    });
    let d = [deadline(0, 0, 3_600_000), deadline(1, 0, 7_200_000)];
    let input = ForecastInput {
        due: 2,
        deadlines: &d,
        ..Default::default()
    };
    let f = s.forecast(&bare(), at(0), &input);
    assert_eq!((f.starts_at, f.drains_at), (None, None));
    assert_eq!(f.limited_by, "paused by hand until resumed");
    assert_eq!(f.deadline_at_risk, 2);
    assert_eq!(f.first_at_risk.and_then(|a| a.forecast_start), None);
}

#[test]
fn an_open_breaker_starts_the_forecast_at_its_end() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("1/s").expect("rate")),
        ..bare()
    };
    let mut s = EndpointState::default();
    s.breaker = BreakerState::Open { until: at(30_000) };
    let f = s.forecast(
        &cfg,
        at(0),
        &ForecastInput {
            due: 1,
            ..Default::default()
        },
    );
    assert_eq!(f.starts_at, Some(at(30_000)));
    assert_eq!(f.drains_at, Some(at(30_000)));
}

#[test]
fn a_spent_quota_drains_window_by_window() {
    // 100 a window, none left, the reset in 30 s; the window's length is not known yet, so it is
    // taken to be the time to the reset.
    let mut s = EndpointState::default();
    s.quota_limit = Some(100);
    s.quota_tokens = Some(0);
    s.quota_reset_at = Some(at(30_000));
    let f = s.forecast(
        &bare(),
        at(0),
        &ForecastInput {
            due: 250,
            ..Default::default()
        },
    );
    // Jobs 0-99 at 30 s, 100-199 at 60 s, 200-249 at 90 s.
    assert!((secs(&f) - 90.0).abs() < 0.01, "{f:?}");
    assert!(
        f.limited_by.contains("learned quota, 100"),
        "{}",
        f.limited_by
    );
    let per_second = f.jobs_per_second.expect("a pace");
    assert!((per_second - 100.0 / 30.0).abs() < 0.01, "{per_second}");

    // What remains goes first, at the other limits' pace.
    s.quota_tokens = Some(40);
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("10/s").expect("rate")),
        ..bare()
    };
    let d = [deadline(39, 0, 4_000), deadline(40, 0, 29_000)];
    let f = s.forecast(
        &cfg,
        at(0),
        &ForecastInput {
            due: 50,
            deadlines: &d,
            ..Default::default()
        },
    );
    // 40 go within 3.9 s; the 41st waits for the reset at 30 s, the 50th goes at 30.9 s.
    assert!((secs(&f) - 30.9).abs() < 0.01, "{f:?}");
    assert_eq!(f.deadline_at_risk, 1);
    assert_eq!(
        f.first_at_risk.map(|a| a.forecast_start),
        Some(Some(at(30_000)))
    );
}

#[test]
fn a_quota_whose_reset_passed_unseen_does_not_bound_the_pace() {
    let mut s = EndpointState::default();
    s.quota_limit = Some(100);
    s.quota_tokens = Some(0);
    s.quota_reset_at = Some(at(0));
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("10/s").expect("rate")),
        ..bare()
    };
    let f = s.forecast(
        &cfg,
        at(5_000),
        &ForecastInput {
            due: 11,
            ..Default::default()
        },
    );
    assert_eq!(f.jobs_per_second, Some(10.0), "{}", f.limited_by);
    assert!((secs(&f) - 1.0).abs() < 0.01, "{f:?}");
}

#[test]
fn an_empty_backlog_drains_now() {
    let f = EndpointState::default().forecast(&bare(), at(5), &ForecastInput::default());
    assert_eq!(
        (f.waiting, f.drains_at, f.drain_seconds),
        (0, Some(at(5)), Some(0.0))
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    use crate::common;

    /// A pause's end, a learned quota (limit, tokens, reset), jobs due and later, and each job
    /// with a deadline as (places after the one before, run at, deadline).
    type Case = (
        Option<i64>,
        Option<(u64, u64, i64)>,
        u64,
        u64,
        Vec<(u64, i64, i64)>,
    );

    fn case() -> impl Strategy<Value = Case> {
        (
            prop::option::of(0i64..600_000),
            prop::option::of((1u64..200, 0u64..200, 0i64..120_000)),
            0u64..5_000,
            0u64..200,
            prop::collection::vec((0u64..50, 0i64..900_000, 0i64..900_000), 0..40),
        )
    }

    fn state(pause: Option<i64>, quota: Option<(u64, u64, i64)>) -> EndpointState {
        let mut s = EndpointState::default();
        s.paused_until = pause.map(at);
        if let Some((limit, tokens, reset)) = quota {
            s.quota_limit = Some(limit);
            s.quota_tokens = Some(tokens.min(limit));
            s.quota_reset_at = Some(at(reset));
        }
        s
    }

    /// The deadlines as a store lists them: in start order (by time), each some places past
    /// the one before.
    fn deadlines(raw: &[(u64, i64, i64)]) -> Vec<WaitingDeadline> {
        let mut rows: Vec<(i64, i64)> = raw.iter().map(|(_, r, d)| (*r, *d)).collect();
        rows.sort_unstable();
        let mut ahead = 0;
        rows.iter()
            .zip(raw)
            .map(|((run_at, dl), (gap, _, _))| {
                ahead += gap;
                deadline(ahead, *run_at, *dl)
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(common::cases(500)))]

        /// A faster configured rate never puts more jobs at risk nor drains later; the counts
        /// agree with each other and the drain is never before the start.
        #[test]
        fn a_faster_pace_never_puts_more_jobs_at_risk_nor_drains_later(
            (pause, quota, due, later, raw) in case(),
            slow in 1u32..500,
            faster in 0u32..500,
        ) {
            let s = state(pause, quota);
            let d = deadlines(&raw);
            let waiting = due + later;
            let d: Vec<WaitingDeadline> = d.into_iter().filter(|w| w.ahead < waiting.max(1)).collect();
            let input = ForecastInput {
                due,
                later,
                deadlines: &d,
                ..Default::default()
            };
            let cfg = |n: u32| EndpointConfig {
                rate: Some(Rate { count: n, per: Duration::from_secs(1) }),
                ..bare()
            };
            let f1 = s.forecast(&cfg(slow), at(0), &input);
            let f2 = s.forecast(&cfg(slow + faster), at(0), &input);
            for f in [&f1, &f2] {
                prop_assert!(f.deadline_at_risk <= f.with_deadline);
                prop_assert_eq!(f.first_at_risk.is_some(), f.deadline_at_risk > 0);
                prop_assert_eq!(f.with_deadline, d.len() as u64);
                if let (Some(start), Some(drain)) = (f.starts_at, f.drains_at) {
                    prop_assert!(drain >= start, "{:?}", f);
                }
            }
            prop_assert!(f2.deadline_at_risk <= f1.deadline_at_risk, "{:?}\n{:?}", f1, f2);
            if let (Some(a), Some(b)) = (f1.drains_at, f2.drains_at) {
                prop_assert!(b <= a, "{:?}\n{:?}", f1, f2);
            }
        }
    }
}

/// Issue 54, observation 3: an inferred quota spent, its reset not yet told ("quota spent;
/// waiting for an answer to learn its reset"), was left out of the forecast, which then said the
/// workers' pace (3 s for a drain that took 30). It holds the endpoint as a known reset does:
/// its window's limit a window, from one window from now.
#[test]
fn a_spent_quota_whose_reset_is_not_told_yet_holds_for_a_window() {
    let s: EndpointState = serde_json::from_str(
        r#"{"quota_limit":50,"quota_tokens":0,"quota_reset_at":null,"quota_inferred":true,"quota_period_ms":1000}"#,
    )
    .expect("a saved state");
    let f = s.forecast(
        &bare(),
        at(0),
        &ForecastInput {
            due: 500,
            attempt_time: Some(Duration::from_millis(1)),
            workers: Some(64),
            ..Default::default()
        },
    );
    assert!(
        f.limited_by.contains("learned quota, 50"),
        "{}",
        f.limited_by
    );
    // 500 jobs at 50 a window, the first window a second from now: the last starts at 10 s.
    assert!((secs(&f) - 10.0).abs() < 0.1, "{f:?}");
}
