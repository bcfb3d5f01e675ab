//! Pauses: those the server sets, those people set by hand, what a resume and a reset end.

use super::*;

#[test]
fn a_pause_holds_everything_then_slow_start_releases_gradually() {
    let cfg = EndpointConfig {
        ramp_for: Duration::from_secs(10),
        ramp_step: Duration::from_secs(1),
        ramp_initial: 2,
        ..bare()
    };
    let mut s = EndpointState::default();
    let mut o = observed(ResultClass::Neutral);
    o.server_wait = Some((Duration::from_secs(30), "429 Retry-After 30s".into()));
    s.record(&cfg, T0, Permit::default(), &o);
    let a = s.admit(&cfg, at(29_999), false, 0);
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert_eq!((h.kind, h.until), (HoldKind::Pause, Some(at(30_000))));
    assert!(h.reason.contains("429 Retry-After 30s"), "{}", h.reason);
    // After the pause: 2 in the first step, 4 more in the second (ramp_initial 2, doubling).
    let mut went = 0;
    while s.admit(&cfg, at(30_000), false, 0).is_go() {
        went += 1;
    }
    assert_eq!(went, 2);
    assert_eq!(
        s.last_hold.as_ref().map(|(r, _)| r.as_str()),
        Some("endpoint pause (429 Retry-After 30s)")
    );
    assert_eq!(kind(&s.admit(&cfg, at(30_500), false, 0)), "hold Ramp");
    while s.admit(&cfg, at(31_000), false, 0).is_go() {
        went += 1;
    }
    assert_eq!(went, 6);
    assert_eq!(
        s.last_hold.as_ref().map(|(r, _)| r.as_str()),
        Some("slow start: 2 requests so far")
    );
    // After the ramp, no limit.
    for _ in 0..1000 {
        assert!(s.admit(&cfg, at(40_000), false, 0).is_go());
    }
}

#[test]
fn a_later_pause_extends_an_earlier_one_never_shortens_it() {
    let mut s = EndpointState::default();
    s.pause(at(10_000), "a".into());
    s.pause(at(5_000), "b".into());
    assert_eq!(
        (s.paused_until, s.pause_reason.as_deref()),
        (Some(at(10_000)), Some("a"))
    );
    s.pause(at(20_000), "c".into());
    assert_eq!(s.paused_until, Some(at(20_000)));
}

#[test]
fn state_round_trips_through_json() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("5/s").expect("rate")),
        ..EndpointConfig::default()
    };
    let mut s = EndpointState::default();
    for i in 0..17 {
        if let Admission::Go(p) = s.admit(&cfg, at(i * 250), true, 0) {
            s.record(&cfg, at(i * 250), p, &observed(ResultClass::Failure));
        }
    }
    s.pause(at(60_000), "test".into());
    let json = serde_json::to_string(&s).expect("serialises");
    let back: EndpointState = serde_json::from_str(&json).expect("reads back");
    assert_eq!(back, s);
    // The breaker opened at the tenth failure (2.25 s), in the outage's first minute for a
    // second: half-open from 3.25 s (no probe went since).
    let view = s.clone().view(&cfg, at(4_000), 0);
    assert_eq!(view.breaker, "half_open");
    assert!(view
        .holding
        .expect("held")
        .starts_with("endpoint paused until"));
}

/// What stops a job admitted a moment ago from starting: a pause or an open breaker that came
/// down since, and nothing else (limits already counted it). Reading changes nothing.
#[test]
fn stopped_by_names_a_pause_or_an_open_breaker_only() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("1/s").expect("rate")),
        burst: 1,
        ..bare()
    };
    let mut s = EndpointState::default();
    assert_eq!(kind(&s.admit(&cfg, at(0), false, 0)), "go");
    // The rate holds the next job, but does not stop one already admitted.
    assert_eq!(kind(&s.admit(&cfg, at(1), false, 1)), "hold Rate");
    assert_eq!(s.stopped_by(at(1)), None);
    s.record(&cfg, at(2), Permit::default(), &refused(5_000));
    let before = s.clone();
    let why = s.stopped_by(at(3)).expect("paused");
    assert!(why.contains("paused until"), "{why}");
    assert_eq!(s, before, "reading changed nothing");
    assert_eq!(s.stopped_by(at(5_002)), None, "the pause is over");
    s.breaker = BreakerState::Open { until: at(9_000) };
    assert!(s
        .stopped_by(at(8_999))
        .expect("open")
        .contains("circuit open"));
    assert_eq!(s.stopped_by(at(9_000)), None);
}

#[test]
fn a_hand_pause_holds_everything_until_it_ends_or_is_lifted() {
    let cfg = bare();
    let mut s = EndpointState::default();
    s.hand_pause = Some(HandPause {
        since: at(0),
        until: Some(at(60_000)),
        reason: "provider maintenance".into(),
    });
    let held = s.admit(&cfg, at(1_000), false, 0);
    let Admission::Hold(h) = held else {
        panic!("expected a hold, got {held:?}")
    };
    assert_eq!(h.kind, HoldKind::Pause);
    assert_eq!(h.until, Some(at(60_000)));
    assert!(
        h.reason
            .starts_with("paused by hand until 2026-11-30T00:01:00"),
        "{}",
        h.reason
    );
    assert!(h.reason.ends_with(": provider maintenance"), "{}", h.reason);
    assert!(s.stopped_by(at(1_000)).is_some());
    assert_eq!(s.next_change(at(1_000)), Some(at(60_000)));
    assert!(s.view(&cfg, at(1_000), 0).paused_by_hand.is_some());
    // At its end it holds no more, although the control still names it.
    assert_eq!(kind(&s.admit(&cfg, at(60_000), false, 0)), "go");
    assert_eq!(s.view(&cfg, at(60_000), 0).paused_by_hand, None);
    // Without an end, it holds until lifted.
    s.hand_pause = Some(HandPause {
        since: at(0),
        until: None,
        reason: String::new(),
    });
    assert_eq!(kind(&s.admit(&cfg, at(10_000_000), true, 0)), "hold Pause");
    s.hand_pause = None;
    assert_eq!(kind(&s.admit(&cfg, at(10_000_000), true, 0)), "go");
}

#[test]
fn a_hand_resume_ends_a_server_pause_once() {
    let cfg = bare();
    let mut s = EndpointState::default();
    s.pause(at(30_000), "429 Retry-After 30s".into());
    assert!(s.take_resume(&cfg, at(1_000), at(1_000)));
    assert_eq!(kind(&s.admit(&cfg, at(1_000), false, 0)), "go");
    // The same resume seen again (every node reads the controls often) changes nothing: a
    // pause the endpoint asked for since stays.
    s.pause(at(40_000), "429 Retry-After 38s".into());
    assert!(!s.take_resume(&cfg, at(1_000), at(1_000)));
    assert_eq!(kind(&s.admit(&cfg, at(2_000), false, 0)), "hold Pause");
    assert!(s.take_resume(&cfg, at(2_000), at(2_000)));
    assert_eq!(kind(&s.admit(&cfg, at(2_000), false, 0)), "go");
}

#[test]
fn a_hand_breaker_reset_closes_it_with_an_empty_window_once() {
    let cfg = breaker_cfg();
    let mut s = half_open(&cfg);
    assert!(s.take_breaker_reset(at(5_000), at(5_000)));
    assert_eq!(s.breaker, BreakerState::Closed);
    let last = s.breaker_history.back().expect("event");
    assert_eq!(last.to, "closed");
    assert!(last.reason.starts_with("reset by hand"), "{}", last.reason);
    assert_eq!(s.view(&cfg, at(5_000), 0).breaker_window_failures, 0);
    assert_eq!(kind(&s.admit(&cfg, at(5_000), false, 0)), "go");
    // Seen again: nothing. A breaker that opened since stays open.
    feed(&mut s, &cfg, 6_000, 10, true, ResultClass::Failure);
    assert!(matches!(s.breaker, BreakerState::Open { .. }));
    assert!(!s.take_breaker_reset(at(5_000), at(7_000)));
    assert!(matches!(s.breaker, BreakerState::Open { .. }));
    // Its open time starts again from the first step after a reset.
    assert_eq!(s.breaker, BreakerState::Open { until: at(36_000) });
}

#[test]
fn a_hand_resume_ends_a_spent_quotas_hold_too() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let mut s = EndpointState::default();
    s.quota_limit = Some(100);
    s.quota_tokens = Some(0);
    s.quota_reset_at = Some(at(3_600_000));
    assert_eq!(kind(&s.admit(&cfg, at(1_000), false, 0)), "hold Quota");
    assert!(s.take_resume(&cfg, at(1_000), at(1_000)));
    assert_eq!(kind(&s.admit(&cfg, at(1_000), false, 0)), "go");
    // What was learned of the limit stays; the next answer's headers say what remains.
    assert_eq!(s.quota_limit, Some(100));
}

#[test]
fn a_hand_resume_ends_the_hold_of_a_nodes_spent_part_of_a_quota() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let mut s = EndpointState::default();
    s.set_share(Share::new(0, 3));
    // 29 of 30 remain: this node's part of them is 10, of the limit 10 (its first request
    // counted), so it sends 9 more and still holds a token of the remaining count.
    let mut o = observed(ResultClass::Success);
    o.quota = quota(
        [
            ("x-ratelimit-limit", "30"),
            ("x-ratelimit-remaining", "29"),
            ("x-ratelimit-reset", "3600"),
        ],
        T0,
    );
    s.record(&cfg, T0, Permit::default(), &o);
    let mut sent = 0;
    while s.admit(&cfg, at(1), false, sent).is_go() {
        sent += 1;
    }
    assert_eq!(sent, 9);
    assert_eq!(s.quota_tokens, Some(1));
    let a = s.admit(&cfg, at(2), false, sent);
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert!(
        h.reason.contains("this node's part (10 of 30)"),
        "{}",
        h.reason
    );
    assert!(
        s.take_resume(&cfg, at(2), at(2)),
        "the part's hold was in force"
    );
    assert!(s.admit(&cfg, at(3), false, sent).is_go());
}
