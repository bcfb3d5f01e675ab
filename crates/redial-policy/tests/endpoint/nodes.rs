//! Several nodes: holds one shares with the others, and each node's part of the limits.

use super::*;

#[test]
fn holds_shared_by_another_node_hold_here_too() {
    let cfg = EndpointConfig {
        breaker: BreakerConfig::default(),
        ..bare()
    };
    // Node A learns of a pause and its breaker opens.
    let mut a = EndpointState::default();
    a.pause(at(5_000), "429 Retry-After 5s".into());
    let shared = a.shareable(T0);
    assert_eq!(shared.pause, Some((at(5_000), "429 Retry-After 5s".into())));
    assert_eq!(shared.breaker, None);

    // Node B takes it in and holds its jobs until then, naming the reason.
    let mut b = EndpointState::default();
    b.absorb(T0, &shared);
    let held = b.admit(&cfg, at(100), false, 0);
    assert_eq!(kind(&held), "hold Pause");
    assert_eq!(kind(&b.admit(&cfg, at(5_001), false, 0)), "go");
    // A shorter pause shared later does not shorten it; a hold that already ended is ignored.
    let mut c = EndpointState::default();
    c.pause(at(9_000), "own".into());
    c.absorb(
        at(1),
        &SharedHolds {
            pause: Some((at(2_000), "other".into())),
            breaker: Some((at(0), "ended".into())),
            paced_until: None,
        },
    );
    assert_eq!(c.paused_until, Some(at(9_000)));
    assert_eq!(c.breaker, BreakerState::Closed);

    // An open breaker elsewhere opens ours until the same instant, not counted as our opening.
    let mut d = EndpointState::default();
    d.absorb(
        T0,
        &SharedHolds {
            pause: None,
            breaker: Some((at(30_000), "50% of 20 calls failed".into())),
            paced_until: None,
        },
    );
    assert_eq!(d.breaker, BreakerState::Open { until: at(30_000) });
    assert_eq!(d.breaker_opens, 0);
    assert_eq!(kind(&d.admit(&cfg, at(10), false, 0)), "hold Breaker");
    assert_eq!(
        d.shareable(at(10)).breaker.map(|(t, _)| t),
        Some(at(30_000)),
        "and shares it on"
    );
}

#[test]
fn a_rate_shared_by_three_nodes_holds_for_the_three_together() {
    let cfg = EndpointConfig {
        rate: Some(Rate::parse("30/s").expect("rate")),
        burst: 4,
        ..bare()
    };
    let mut nodes = three_nodes("https://api.example.com");
    // Every node asks every millisecond for 10 s: the total is the cluster's rate plus its burst.
    let mut went = 0;
    for ms in 0..10_000 {
        for s in nodes.iter_mut() {
            if s.admit(&cfg, at(ms), false, 0).is_go() {
                went += 1;
            }
        }
    }
    assert!((300..=304).contains(&went), "{went} in 10 s at 30/s");
    let mut a = nodes[0].admit(&cfg, at(10_000), false, 0);
    while a.is_go() {
        a = nodes[0].admit(&cfg, at(10_000), false, 0);
    }
    let Admission::Hold(h) = &a else {
        panic!("{a:?}")
    };
    assert!(
        h.reason.contains("across 3 nodes") && h.reason.contains("100ms"),
        "{}",
        h.reason
    );
    // Alone again (the others died): the whole rate.
    nodes[0].set_share(Share::default());
    let mut alone = 0;
    for ms in 20_000..30_000 {
        if nodes[0].admit(&cfg, at(ms), false, 0).is_go() {
            alone += 1;
        }
    }
    // Spacing is kept below the millisecond (33.3 ms): neither 30.3/s nor 29.4/s.
    assert!((300..=304).contains(&alone), "{alone} in 10 s alone");
}

#[test]
fn a_concurrency_limit_is_split_so_the_parts_add_up() {
    for limit in [1u32, 2, 4, 5, 9] {
        let cfg = EndpointConfig {
            concurrency: Some(limit),
            ..bare()
        };
        let mut total = 0;
        for mut s in three_nodes(&format!("endpoint-{limit}")) {
            let mut in_flight = 0;
            while s.admit(&cfg, T0, false, in_flight).is_go() {
                in_flight += 1;
            }
            assert_eq!(s.clone().view(&cfg, T0, in_flight).nodes, 3);
            total += in_flight;
        }
        assert_eq!(total, limit, "in flight across the three at limit {limit}");
    }
}

#[test]
fn a_learned_quota_is_split_so_the_nodes_never_spend_more_than_remains() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let mut nodes = three_nodes("https://api.example.com");
    // Each node hears a different moment of the same count (older answers say more remains).
    let mut spent = 0;
    for (i, s) in nodes.iter_mut().enumerate() {
        let mut o = observed(ResultClass::Success);
        let remaining = (20 - i).to_string();
        o.quota = quota(
            [
                ("x-ratelimit-limit", "20"),
                ("x-ratelimit-remaining", remaining.as_str()),
                ("x-ratelimit-reset", "60"),
            ],
            T0,
        );
        s.record(&cfg, T0, Permit::default(), &o);
        let mut in_flight = 0;
        while s.admit(&cfg, at(1), false, in_flight).is_go() {
            in_flight += 1;
        }
        spent += in_flight;
        assert_eq!(kind(&s.admit(&cfg, at(2), false, in_flight)), "hold Quota");
    }
    // Each node's part of the 20 counts the request whose answer it heard.
    assert_eq!(spent + 3, 20, "each node sends its part, and no more");
    // Node 1 dies. What it sent of its part may still reach the API, so the two left keep
    // their parts until the window ends: neither sends more, whatever an answer says remains.
    for (rank, i) in [0usize, 2].into_iter().enumerate() {
        let s = &mut nodes[i];
        s.set_share(Share::for_endpoint(
            rank as u32,
            2,
            "https://api.example.com",
        ));
        assert_eq!(kind(&s.admit(&cfg, at(3), false, 0)), "hold Quota");
    }
    // After the reset each of the two takes its part of the whole limit.
    let mut after = 0;
    for i in [0, 2] {
        let s = &mut nodes[i];
        let mut in_flight = 0;
        while s.admit(&cfg, at(60_000), false, in_flight).is_go() {
            in_flight += 1;
        }
        after += in_flight;
    }
    assert_eq!(after, 20);
}

#[test]
fn the_retry_budgets_minimum_is_split_between_nodes() {
    let cfg = EndpointConfig {
        retry_budget: BudgetConfig {
            enabled: true,
            ratio: 0.0,
            min_per_second: 3.0,
            window: Duration::from_secs(10),
            when_exhausted: WhenExhausted::Wait,
        },
        ..bare()
    };
    let mut retries = 0;
    for mut s in three_nodes("https://api.example.com") {
        while let Admission::Go(p) = s.admit(&cfg, T0, true, 0) {
            retries += 1;
            // The retry fails: it stays counted in the window.
            s.record(&cfg, T0, p, &observed(ResultClass::Failure));
        }
    }
    assert_eq!(retries, 30, "3/s over 10 s for the three together");
}

#[test]
fn a_node_whose_part_is_spent_sends_one_at_a_time_while_the_cluster_has_some_left() {
    let cfg = EndpointConfig {
        learn_from_headers: true,
        ..bare()
    };
    let answer = |remaining: &str| {
        let mut o = observed(ResultClass::Success);
        o.quota = quota(
            [
                ("x-ratelimit-limit", "10"),
                ("x-ratelimit-remaining", remaining),
                ("x-ratelimit-reset", "60"),
            ],
            T0,
        );
        o
    };
    let mut s = EndpointState::default();
    s.set_share(Share::new(1, 2));
    // 3 remain for the two nodes: this one's part is 1.
    s.record(&cfg, T0, Permit::default(), &answer("3"));
    let Admission::Go(p) = s.admit(&cfg, at(1), false, 0) else {
        panic!("its part")
    };
    assert_eq!(kind(&s.admit(&cfg, at(1), false, 1)), "hold Quota");
    // Its answer says 1 remains (the other node took one): one more may go, alone.
    s.record(&cfg, at(2), p, &answer("1"));
    assert_eq!(kind(&s.admit(&cfg, at(3), false, 1)), "hold Quota");
    let Admission::Go(p) = s.admit(&cfg, at(3), false, 0) else {
        panic!("one at a time while some remain")
    };
    // None remain: held until the reset.
    s.record(&cfg, at(4), p, &answer("0"));
    let a = s.admit(&cfg, at(5), false, 0);
    assert!(!a.is_go(), "{a:?}");
    // Alone, a spent count waits for the reset whatever the answers said.
    let mut alone = EndpointState::default();
    alone.record(&cfg, T0, Permit::default(), &answer("1"));
    assert!(alone.admit(&cfg, at(1), false, 0).is_go());
    assert_eq!(kind(&alone.admit(&cfg, at(1), false, 0)), "hold Quota");
}
