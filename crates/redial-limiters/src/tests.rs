//! The limiter kinds on a few instants each: what goes, what is refused, and what the answers say.

use super::*;

/// The statuses of requests at `times` (ms since the start).
fn statuses(l: &Limiter, times: &[u64]) -> Vec<u16> {
    let mut s = State::default();
    times.iter().map(|t| s.take(l, *t, 0).status).collect()
}

fn header<'a>(v: &'a Verdict, name: &str) -> Option<&'a str> {
    v.headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

const FIFTY_A_SECOND: Kind = Kind::TokenBucket {
    count: 50,
    per_ms: 1000,
    burst: 10,
};

#[test]
fn a_token_bucket_lets_its_burst_go_then_one_every_period() {
    let l = Limiter::new(FIFTY_A_SECOND);
    let mut times = vec![0; 11];
    times.extend([19, 20, 21, 40]);
    let mut want = vec![200; 10];
    want.extend([429, 429, 200, 429, 200]);
    assert_eq!(statuses(&l, &times), want);
}

#[test]
fn a_fixed_window_counts_afresh_each_window() {
    let l = Limiter::new(Kind::FixedWindow {
        limit: 2,
        window_ms: 1000,
    });
    assert_eq!(
        statuses(&l, &[0, 10, 20, 999, 1000, 1001, 1002]),
        [200, 200, 429, 429, 200, 200, 429]
    );
}

#[test]
fn a_sliding_log_frees_a_place_when_its_oldest_request_is_a_window_old() {
    let l = Limiter::new(Kind::SlidingLog {
        limit: 2,
        window_ms: 1000,
    });
    assert_eq!(
        statuses(&l, &[0, 500, 999, 1000, 1001, 1499, 1500]),
        [200, 200, 429, 200, 429, 429, 200]
    );
}

#[test]
fn a_sliding_counter_weighs_the_last_window_by_what_the_moving_window_still_covers() {
    let l = Limiter::new(Kind::SlidingCounter {
        limit: 4,
        window_ms: 1000,
    });
    // Four in the first window; at 1,250 ms they weigh 3: one more goes, then none until 1,500
    // (weight 2, plus the one: 3), then at 1,750 one more (1 + 2 = 3 < 4).
    assert_eq!(
        statuses(&l, &[0, 0, 0, 0, 1250, 1251, 1500, 1501, 1750]),
        [200, 200, 200, 200, 200, 429, 200, 429, 200]
    );
    let mut s = State::default();
    for _ in 0..4 {
        s.take(&l, 0, 0);
    }
    // Refused at 900 ms: the next place is at 1,250 ms (3 + 0 + 1 <= 4).
    let l = l.speaking(Wait::Millis, QuotaStyle::None);
    let v = s.take(&l, 900, 0);
    assert_eq!(header(&v, "retry-after-ms"), Some("350"));
}

#[test]
fn a_halved_rate_lets_half_as_many_through() {
    let l = Limiter::new(Kind::FixedWindow {
        limit: 4,
        window_ms: 1000,
    })
    .halved_between(1000, 2000);
    assert_eq!(
        statuses(&l, &[1000, 1001, 1002, 2000, 2001, 2002, 2003, 2004]),
        [200, 200, 429, 200, 200, 200, 200, 429]
    );
    // One every 250 ms, every 500 ms while halved.
    assert_eq!(l.ideal_ms(12), 3500);
}

#[test]
fn each_style_says_when_to_come_back_its_way() {
    let kind = Kind::FixedWindow {
        limit: 1,
        window_ms: 1000,
    };
    let check = |wait: Wait, quota: QuotaStyle, want: &[(&str, &str)]| {
        let l = Limiter::new(kind).speaking(wait, quota);
        let mut s = State::default();
        s.take(&l, 0, 1_700_000_000_400);
        let v = s.take(&l, 250, 1_700_000_000_400);
        assert_eq!(v.status, 429);
        let got: Vec<(&str, &str)> = v
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        assert_eq!(got, want, "{wait:?} {quota:?}");
    };
    check(Wait::Bare, QuotaStyle::None, &[]);
    check(Wait::Seconds, QuotaStyle::None, &[("retry-after", "1")]);
    // Now 1,700,000,000.650 s, frees at 1,700,000,001.400 s.
    check(Wait::Truncated, QuotaStyle::None, &[("retry-after", "1")]);
    check(Wait::Decimal, QuotaStyle::None, &[("retry-after", "0.750")]);
    check(
        Wait::Millis,
        QuotaStyle::OpenAi,
        &[
            ("x-ratelimit-limit-requests", "1"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "750ms"),
            ("retry-after-ms", "750"),
            ("retry-after", "1"),
        ],
    );
    // Frees at 1,700,000,001,400 ms: epoch second 1,700,000,002 rounded up.
    check(
        Wait::Bare,
        QuotaStyle::GitHub,
        &[
            ("x-ratelimit-limit", "1"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-used", "1"),
            ("x-ratelimit-reset", "1700000002"),
        ],
    );
    check(
        Wait::Seconds,
        QuotaStyle::Ietf,
        &[
            ("ratelimit-policy", "\"default\";q=1;w=1"),
            ("ratelimit", "\"default\";r=0;t=1"),
            ("retry-after", "1"),
        ],
    );
    check(
        Wait::Bare,
        QuotaStyle::Draft6,
        &[
            ("ratelimit-limit", "1"),
            ("ratelimit-remaining", "0"),
            ("ratelimit-reset", "1"),
        ],
    );
}

#[test]
fn go_durations_read_as_openai_writes_them() {
    for (ms, want) in [
        (20, "20ms"),
        (1000, "1s"),
        (1500, "1.5s"),
        (360_000, "6m0s"),
        (61_250, "1m1.25s"),
    ] {
        assert_eq!(go_duration(ms), want);
    }
}

#[test]
fn a_token_bucket_resets_when_it_is_full_again_and_frees_at_its_next_token() {
    let l = Limiter::new(FIFTY_A_SECOND).speaking(Wait::Millis, QuotaStyle::OpenAi);
    let mut s = State::default();
    for _ in 0..10 {
        s.take(&l, 0, 0);
    }
    let v = s.take(&l, 0, 0);
    // Ten spent: full again in 200 ms; the next token in 20 ms.
    assert_eq!(header(&v, "x-ratelimit-reset-requests"), Some("200ms"));
    assert_eq!(header(&v, "x-ratelimit-remaining-requests"), Some("0"));
    assert_eq!(header(&v, "retry-after-ms"), Some("20"));
}

#[test]
fn a_concurrency_limit_refuses_while_its_limit_is_being_answered() {
    let l = Limiter::new(Kind::Concurrency {
        limit: 2,
        hold_ms: 100,
    })
    .speaking(Wait::Decimal, QuotaStyle::None);
    let mut s = State::default();
    let first = s.take(&l, 0, 0);
    assert_eq!((first.status, first.hold_ms), (200, 100));
    assert_eq!(s.take(&l, 30, 0).status, 200);
    let refused = s.take(&l, 60, 0);
    assert_eq!((refused.status, refused.hold_ms), (429, 0));
    // The first answer goes out at 100 ms: room for one then.
    assert_eq!(header(&refused, "retry-after"), Some("0.040"));
    assert_eq!(s.take(&l, 99, 0).status, 429);
    assert_eq!(s.take(&l, 100, 0).status, 200);
    assert_eq!(s.take(&l, 101, 0).status, 429);
    assert_eq!(s.take(&l, 130, 0).status, 200);
    assert_eq!(l.per_second(), 20.0);
}

#[test]
fn openai_headers_reset_when_every_request_counted_is_gone() {
    // A moving window of 2 a second: at 900 ms, the requests of 0 and 500 ms count; the window
    // is back to its initial state at 1,500 ms (OpenAI: "the time until the rate limit resets
    // to its initial state"), not at 1,000 ms, when the oldest goes.
    let l = Limiter::new(Kind::SlidingLog {
        limit: 2,
        window_ms: 1000,
    })
    .speaking(Wait::Millis, QuotaStyle::OpenAi);
    let mut s = State::default();
    s.take(&l, 0, 0);
    s.take(&l, 500, 0);
    let v = s.take(&l, 900, 0);
    assert_eq!(v.status, 429);
    assert_eq!(header(&v, "x-ratelimit-reset-requests"), Some("600ms"));
    assert_eq!(header(&v, "retry-after-ms"), Some("100"));
}
