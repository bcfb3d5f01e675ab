//! Leases: cancels, shutdowns, rescues, wake-ups, jobs leased ahead, queues paused by hand.

use super::*;

#[tokio::test]
async fn cancel_while_running_ends_cancelled() {
    let rx = Receiver::start().await;
    rx.script("/fail", vec![Reply::status(503)]);
    let (gated, mut entered) = gated();
    let h = harness().handler("custom", gated.clone()).start().await;
    h.enqueue("c", "custom", "POST", &rx.url("/fail"), None)
        .await;
    // The attempt is running, held at its gate, when the cancellation comes; a 503 would
    // otherwise schedule a retry.
    assert_eq!(entered.recv().await.expect("entered"), "c");
    h.store
        .job_cancel(&JobId::from("c"), h.clock.now())
        .await
        .expect("cancel");
    gated.open("c");
    let (job, attempts) = h.wait_state("c", JobState::Cancelled).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].status, Some(503));
    assert!(job
        .last_reason
        .expect("reason")
        .ends_with("cancelled while running"));
    h.stop().await;
}

#[tokio::test]
async fn shutdown_gives_back_leases_of_attempts_that_do_not_finish() {
    let hang = RawServer::start(Misbehaviour::Hang).await;
    let h = harness().start().await;
    h.enqueue("stuck", "default", "POST", &hang.url("/"), Some(60_000))
        .await;
    h.wait_state("stuck", JobState::Running).await;
    let running = {
        let mut h = h;
        let r = h.running.take().expect("running");
        let report = r.shutdown(Duration::from_millis(200)).await;
        assert_eq!(report.released, 1);
        h
    };
    let (job, attempts) = running.wait_state("stuck", JobState::Ready).await;
    assert_eq!((job.attempts, job.stalls, job.lease_owner), (0, 0, None));
    assert!(attempts.is_empty(), "an abandoned attempt is not counted");
}

#[tokio::test]
async fn expired_leases_are_rescued_and_run_again() {
    let rx = Receiver::start().await;
    let h = harness().start().await;
    // Another worker leased the job and died: its lease runs out at T0 + 30s.
    let job = NewJob {
        ordering: None,
        callback: None,
        id: JobId::from("orphan"),
        queue: "elsewhere".into(),
        endpoint: "test".into(),
        request: HttpRequest {
            method: "POST".into(),
            url: rx.url("/orphan"),
            headers: vec![],
            body: None,
            timeout_ms: None,
            credentials: None,
        },
        idempotency_key: Some("k".into()),
        priority: 0,
        run_at: T0,
        deadline: None,
        tags: vec![],
        policy: None,
        created_at: T0,
        group: None,
    };
    h.store.job_insert(job).await.expect("insert");
    let leased = h
        .store
        .job_lease_available(redial_store::LeaseParams {
            queue: "elsewhere".into(),
            limit: 1,
            owner: "dead-worker".into(),
            now: T0,
            lease_until: T0.saturating_add(Duration::from_secs(30)),
        })
        .await
        .expect("lease");
    assert_eq!(leased.len(), 1);
    h.clock.advance(Duration::from_secs(31));
    let (job, _) = h.wait_state("orphan", JobState::Ready).await;
    assert_eq!(job.stalls, 1);
    assert!(job.last_reason.expect("reason").contains("lease expired"));
    h.stop().await;
}

/// A wake-up that comes while a lease is under way and cannot start one of its own (that lease
/// holds every free slot) is not lost: the lease under way may have read before the job the
/// wake-up is for, so the queue leases again instead of waiting for its next poll (an hour here;
/// a second by default). Looked for after a benchmark on PostgreSQL once gave 205 ms as the 99th
/// percentile from enqueue to first attempt on an idle queue: its poll interval is 200 ms.
#[tokio::test(flavor = "current_thread")]
async fn a_wake_up_during_a_lease_is_not_lost() {
    let rx = Receiver::start().await;
    let mut h = harness().poll_interval(Duration::from_secs(3600)).build();
    let (reached, go) = h.store.hold_next_lease("default");
    h.start().await;
    // The queue's first lease found nothing and waits before it returns.
    reached.await.expect("the first lease");
    h.enqueue("j1", "default", "POST", &rx.url("/ok"), None)
        .await;
    // One thread (the flavour is written out: on more, the loop could take the wake-up only
    // after the lease returned, and the test would pass without the fix): the queue's loop
    // takes the wake-up while the lease is out.
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    go.send(()).expect("the lease waits");
    let (_, attempts) = h.wait_state("j1", JobState::Completed).await;
    assert_eq!(attempts.len(), 1);
    h.stop().await;
}

/// A lease that finds nothing starts no other while one is still out: that one will say whether
/// there is more. Before, the queue leased again at once with the slot the empty lease gave back,
/// and again, for as long as the other was out (a review counted 1,241 leases in half a second).
/// And an attempt's end starts no lease when the last lease left nothing behind. The bounds
/// below only limit how long the test looks for extra leases: with the fix there are none
/// however long it looks.
#[tokio::test(flavor = "current_thread")]
async fn an_empty_lease_starts_no_other_while_one_is_out() {
    let rx = Receiver::start().await;
    let (gated, mut entered) = gated();
    // Polls an hour apart: every lease here follows a wake-up or another lease.
    let h = harness()
        .handler("custom", gated.clone())
        .poll_interval(Duration::from_secs(3600))
        .start()
        .await;
    warm_up(&h, &gated, &rx, &mut entered).await;
    // g runs and waits at its gate, holding one of the queue's three lease slots.
    h.enqueue("g", "custom", "POST", &rx.url("/ok"), None).await;
    assert_eq!(entered.recv().await.expect("entered"), "g");
    // The next lease takes the two free slots, finds nothing, and is held out.
    let (reached, go) = h.store.hold_next_lease("custom");
    h.engine.wake("custom");
    reached.await.expect("the held lease");
    let (before, _) = h.store.leases("custom");
    // g ends: its slot frees, but the queue's last finished lease (the one that took g) left
    // nothing behind, so its end starts no lease.
    gated.open("g");
    h.wait_state("g", JobState::Completed).await;
    let after_g = h
        .store
        .wait_leases("custom", Duration::from_millis(500), |(n, _)| n > before)
        .await;
    assert!(
        !after_g,
        "g's end started a lease: {:?} (it was {before})",
        h.store.leases("custom")
    );
    // A wake-up: one lease starts with g's slot and finds nothing.
    h.engine.wake("custom");
    let one_more_done = h
        .store
        .wait_leases("custom", Duration::from_secs(60), |(n, out)| {
            n > before && out == 1
        })
        .await;
    assert!(
        one_more_done,
        "no lease after the wake-up: {:?}",
        h.store.leases("custom")
    );
    let (after, _) = h.store.leases("custom");
    let again = h
        .store
        .wait_leases("custom", Duration::from_millis(500), |(n, _)| n > after)
        .await;
    assert!(
        !again,
        "the queue leased again while the held lease was out: {:?} (it was {after})",
        h.store.leases("custom")
    );
    go.send(()).expect("the lease waits");
    h.stop().await;
}

/// A queue leases jobs ahead of its free run slots (half its concurrency), but never runs more
/// attempts at once than its concurrency.
#[tokio::test]
async fn jobs_leased_ahead_wait_for_a_run_slot() {
    let rx = Receiver::start().await;
    let (gated, mut entered) = gated();
    let h = harness().handler("custom", gated.clone()).start().await;
    warm_up(&h, &gated, &rx, &mut entered).await;
    for id in ["a", "b"] {
        h.enqueue(id, "custom", "POST", &rx.url("/ok"), None).await;
    }
    let mut first = vec![
        entered.recv().await.expect("entered"),
        entered.recv().await.expect("entered"),
    ];
    first.sort();
    assert_eq!(first, ["a", "b"]);
    h.enqueue("c", "custom", "POST", &rx.url("/ok"), None).await;
    // Leased while both run slots are taken: it waits, its handler not called.
    h.wait_state("c", JobState::Running).await;
    let got = entered.try_recv();
    assert!(got.is_err(), "c started beyond the concurrency: {got:?}");
    gated.open("a");
    assert_eq!(entered.recv().await.expect("entered"), "c");
    gated.open("b");
    gated.open("c");
    for id in ["a", "b", "c"] {
        let (_, attempts) = h.wait_state(id, JobState::Completed).await;
        assert_eq!(attempts.len(), 1);
    }
    assert_eq!(gated.most.load(std::sync::atomic::Ordering::SeqCst), 2);
    h.stop().await;
}

/// A job leased ahead does not start once a result of its endpoint has paused it: it goes back,
/// unsent and uncounted, and runs when the pause is over.
#[tokio::test]
async fn a_job_leased_ahead_is_given_back_when_its_endpoint_pauses() {
    let rx = Receiver::start().await;
    rx.script(
        "/limited",
        vec![
            Reply::status(429).header("Retry-After", "60"),
            Reply::status(200),
        ],
    );
    let (gated, mut entered) = gated();
    let h = harness().handler("custom", gated.clone()).start().await;
    warm_up(&h, &gated, &rx, &mut entered).await;
    h.enqueue("limited", "custom", "POST", &rx.url("/limited"), None)
        .await;
    h.enqueue("slow", "custom", "POST", &rx.url("/ok"), None)
        .await;
    entered.recv().await.expect("entered");
    entered.recv().await.expect("entered");
    h.enqueue("ahead", "custom", "POST", &rx.url("/ok"), None)
        .await;
    h.wait_state("ahead", JobState::Running).await;
    // The 429 pauses the endpoint (all three jobs share it) and frees a run slot.
    gated.open("limited");
    let (job, attempts) = h
        .wait_for("ahead", "given back", |j| j.state == JobState::Ready)
        .await;
    assert!(attempts.is_empty(), "no attempt was made");
    assert_eq!((job.runs, job.attempts, job.stalls), (0, 0, 0));
    assert_eq!(rx.count("/ok"), 1, "only the warm-up");
    assert!(entered.try_recv().is_err(), "the handler was not called");

    gated.open("slow");
    h.wait_state("slow", JobState::Completed).await;
    h.clock.advance(Duration::from_secs(61));
    h.engine.wake_all();
    assert_eq!(entered.recv().await.expect("entered"), "ahead");
    gated.open("ahead");
    gated.open("limited");
    let (_, attempts) = h.wait_state("ahead", JobState::Completed).await;
    assert_eq!(attempts.len(), 1);
    h.wait_state("limited", JobState::Completed).await;
    h.stop().await;
}

/// A shutdown gives back jobs leased ahead at once, unstarted, and counts them as released.
#[tokio::test]
async fn shutdown_gives_back_jobs_leased_ahead_unstarted() {
    let rx = Receiver::start().await;
    let (gated, mut entered) = gated();
    let mut h = harness().handler("custom", gated.clone()).start().await;
    warm_up(&h, &gated, &rx, &mut entered).await;
    for id in ["a", "b"] {
        h.enqueue(id, "custom", "POST", &rx.url("/ok"), None).await;
    }
    entered.recv().await.expect("entered");
    entered.recv().await.expect("entered");
    h.enqueue("c", "custom", "POST", &rx.url("/ok"), None).await;
    h.wait_state("c", JobState::Running).await;
    let report = h
        .running
        .take()
        .expect("running")
        .shutdown(Duration::from_millis(200))
        .await;
    assert_eq!((report.finished, report.released), (0, 3));
    for id in ["a", "b", "c"] {
        let (job, attempts) = h.wait_state(id, JobState::Ready).await;
        assert!(attempts.is_empty());
        assert_eq!((job.runs, job.stalls, job.lease_owner), (0, 0, None));
    }
    assert!(entered.try_recv().is_err(), "c was not started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_paused_by_hand_leases_nothing_until_resumed() {
    let rx = Receiver::start().await;
    let h = harness().start().await;
    let pause = h
        .engine
        .pause(
            ControlKind::Queue,
            "custom",
            None,
            "deploying the receiver".into(),
        )
        .await
        .expect("pause");
    assert_eq!(pause.since, T0);
    h.enqueue("waits", "custom", "POST", &rx.url("/ok"), None)
        .await;
    h.enqueue("goes", "default", "POST", &rx.url("/ok"), None)
        .await;
    h.wait_state("goes", JobState::Completed).await;
    h.clock.set(T0.saturating_add(Duration::from_secs(3600)));
    h.settle().await;
    let (job, attempts) = h
        .store
        .job_get(&JobId::from("waits"))
        .await
        .expect("get")
        .expect("exists");
    assert_eq!((job.state, attempts.len()), (JobState::Ready, 0));
    assert_eq!(rx.received("/ok").len(), 1);
    let views = h.engine.queue_views();
    let custom = views.iter().find(|q| q.name == "custom").expect("custom");
    assert_eq!(custom.paused_by_hand.as_ref(), Some(&pause));
    let default = views.iter().find(|q| q.name == "default").expect("default");
    assert_eq!(default.paused_by_hand, None);

    h.engine
        .resume(ControlKind::Queue, "custom")
        .await
        .expect("resume");
    h.wait_state("waits", JobState::Completed).await;
    assert_eq!(rx.received("/ok").len(), 2);
    assert!(h
        .engine
        .queue_views()
        .iter()
        .all(|q| q.paused_by_hand.is_none()));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_pause_with_an_end_ends_by_itself() {
    let rx = Receiver::start().await;
    let h = harness().start().await;
    let until = T0.saturating_add(Duration::from_secs(60));
    h.engine
        .pause(ControlKind::Queue, "custom", Some(until), String::new())
        .await
        .expect("pause");
    h.enqueue("waits", "custom", "POST", &rx.url("/ok"), None)
        .await;
    h.settle().await;
    assert!(rx.received("/ok").is_empty());
    h.clock.set(until);
    h.wait_state("waits", JobState::Completed).await;
    h.stop().await;
}

/// A key's jobs run one after the other without waiting for a poll: the end of a keyed job's run
/// makes the next job of its key the head, and wakes its queue (whose last lease left nothing
/// else behind). Polls are an hour apart here: each lease follows a wake-up.
#[tokio::test]
async fn a_keys_next_job_starts_when_the_one_before_ends() {
    let rx = Receiver::start().await;
    let h = harness()
        .poll_interval(Duration::from_secs(3600))
        .start()
        .await;
    for n in 0..4 {
        let mut job = h.new_job(&format!("k{n}"), "default", "POST", &rx.url("/k"), None);
        job.ordering = Some(redial_store::OrderingKey {
            key: "customer-7".into(),
            on_dead: redial_store::OnDead::Block,
        });
        job.request.body = Some(n.to_string());
        h.store.job_insert(job).await.expect("insert");
    }
    h.engine.wake("default");
    h.wait_state("k3", JobState::Completed).await;
    let order: Vec<String> = rx.received("/k").iter().map(|r| r.body.clone()).collect();
    assert_eq!(order, ["0", "1", "2", "3"]);
    assert_eq!(rx.most_in_flight("/k"), 1);
    h.stop().await;
}
