//! What becomes of each kind of answer: deferrals, retries, dead letters by category, transport
//! failures, redirects, private addresses, typed handlers, the series.

use super::*;

#[tokio::test]
async fn rate_limited_job_is_deferred_without_spending_an_attempt() {
    let rx = Receiver::start().await;
    rx.script(
        "/send",
        vec![
            Reply::status(429).header("Retry-After", "30"),
            Reply::status(200),
        ],
    );
    let h = harness().start().await;
    h.enqueue("j1", "default", "POST", &rx.url("/send"), None)
        .await;
    let (job, attempts) = h.wait_state("j1", JobState::Deferred).await;
    assert_eq!(job.run_at, T0.saturating_add(Duration::from_secs(30)));
    assert_eq!((job.attempts, job.deferrals), (0, 1));
    let a = &attempts[0];
    assert_eq!(
        (a.status, a.category.as_str(), a.decision.as_str()),
        (Some(429), "defer", "defer")
    );
    assert_eq!(
        (
            a.server_wait_ms,
            a.server_wait_source.as_deref(),
            a.delay_ms
        ),
        (Some(30_000), Some("Retry-After"), Some(30_000))
    );
    assert_eq!(
        a.reason,
        "429 rate limited; Retry-After 30s; deferral 1 of 20"
    );
    assert!(a
        .response_headers
        .iter()
        .any(|(n, v)| n == "retry-after" && v == "30"));

    // Nothing happens before the server's instant, even when woken.
    h.clock.advance(Duration::from_secs(29));
    h.settle().await;
    assert_eq!(rx.count("/send"), 1);

    h.run_next("j1").await;
    let (job, attempts) = h.wait_state("j1", JobState::Completed).await;
    assert_eq!((job.attempts, job.deferrals, job.runs), (0, 1, 2));
    assert_eq!(attempts[1].decision, "complete");
    assert_eq!(rx.count("/send"), 2);
    h.stop().await;
}

#[tokio::test]
async fn outage_then_recovery_retries_with_backoff_and_the_same_idempotency_key() {
    let rx = Receiver::start().await;
    rx.script(
        "/charge",
        vec![Reply::status(503), Reply::status(502), Reply::status(201)],
    );
    let h = harness().start().await;
    h.enqueue("pay", "default", "POST", &rx.url("/charge"), None)
        .await;
    // Full jitter may choose no delay at all, so a retry can already have run when the test
    // looks: each wait accepts any later state.
    h.wait_for("pay", "retrying once", |j| {
        j.attempts >= 1 && matches!(j.state, JobState::Scheduled | JobState::Completed)
    })
    .await;
    h.run_next("pay").await;
    h.wait_for("pay", "retrying twice", |j| {
        j.attempts >= 2 && matches!(j.state, JobState::Scheduled | JobState::Completed)
    })
    .await;
    h.run_next("pay").await;
    let (job, attempts) = h.wait_state("pay", JobState::Completed).await;
    assert_eq!(job.attempts, 2);
    assert_eq!(
        attempts.iter().map(|a| a.status).collect::<Vec<_>>(),
        [Some(503), Some(502), Some(201)]
    );
    assert!(
        attempts[0].delay_ms.expect("a delay") <= 2_000,
        "first backoff within its 2s schedule"
    );
    let keys: Vec<_> = rx
        .received("/charge")
        .iter()
        .map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert_eq!(
        keys,
        vec![Some("key-pay".to_owned()); 3],
        "the same key on every attempt"
    );
    h.stop().await;
}

#[tokio::test]
async fn permanent_and_exhausted_failures_land_in_their_categories() {
    let rx = Receiver::start().await;
    rx.script(
        "/bad",
        vec![Reply::status(400).body("{\"error\":\"invalid amount\"}")],
    );
    rx.script("/flaky", vec![Reply::status(500)]);
    let h = harness().start().await;
    h.enqueue("bad", "default", "POST", &rx.url("/bad"), None)
        .await;
    h.enqueue("flaky", "default", "POST", &rx.url("/flaky"), None)
        .await;
    let (job, attempts) = h.wait_state("bad", JobState::Dead).await;
    assert_eq!(job.category, Some(DeadCategory::Permanent));
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        attempts[0].response_body.as_deref(),
        Some("{\"error\":\"invalid amount\"}")
    );
    assert_eq!(rx.count("/bad"), 1, "a 400 is never retried");

    for n in 1..=2 {
        // A retry due at once (full jitter may choose no delay) may already have run.
        h.wait_for("flaky", "retrying", |j| {
            j.attempts >= n && matches!(j.state, JobState::Scheduled | JobState::Dead)
        })
        .await;
        h.run_next("flaky").await;
    }
    let (job, attempts) = h.wait_state("flaky", JobState::Dead).await;
    assert_eq!(
        (job.category, job.unknown_attempts),
        (Some(DeadCategory::UnknownExhausted), 3)
    );
    assert!(attempts[0].delay_ms.expect("delay") <= 30_000);
    assert!(job
        .last_reason
        .expect("reason")
        .contains("unknown outcome 3 of 3"));
    h.stop().await;
}

#[tokio::test]
async fn transport_failures_are_told_apart() {
    let reset = RawServer::start(Misbehaviour::Reset).await;
    let garbage = RawServer::start(Misbehaviour::Garbage).await;
    let truncated = RawServer::start(Misbehaviour::Truncated).await;
    let rx = Receiver::start().await;
    rx.script(
        "/slow",
        vec![Reply::status(200).delay(Duration::from_secs(5))],
    );
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let a = l.local_addr().expect("addr");
        drop(l);
        // A secret in the query string: the client's error text names the URL, the record
        // must not.
        format!("http://{a}/?api_key=SECRET-IN-QUERY")
    };
    let h = harness().start().await;
    h.enqueue("reset", "default", "GET", &reset.url("/"), None)
        .await;
    h.enqueue("garbage", "default", "GET", &garbage.url("/"), None)
        .await;
    h.enqueue("truncated", "default", "GET", &truncated.url("/"), None)
        .await;
    h.enqueue("slow", "default", "GET", &rx.url("/slow"), Some(200))
        .await;
    h.enqueue("refused", "default", "GET", &closed, None).await;
    for (id, error, category) in [
        ("reset", "connection-reset", "transient"),
        ("garbage", "malformed-response", "unknown"),
        ("truncated", "truncated-response", "unknown"),
        ("slow", "timeout", "transient"),
        ("refused", "connection-refused", "transient"),
    ] {
        let (_, attempts) = h.wait_for(id, "attempted", |j| j.runs >= 1).await;
        let a = &attempts[0];
        assert_eq!(
            (a.error.as_deref(), a.category.as_str()),
            (Some(error), category),
            "{id}: {a:?}"
        );
        assert_eq!(a.decision, "retry", "{id}");
        assert!(a.error_detail.is_some(), "{id} keeps the error's own words");
        assert!(
            !a.error_detail
                .as_deref()
                .unwrap_or("")
                .contains("SECRET-IN-QUERY"),
            "{id}: {a:?}"
        );
    }
    h.stop().await;
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let rx = Receiver::start().await;
    rx.script("/old", vec![Reply::status(302).header("Location", "/new")]);
    let h = harness().start().await;
    h.enqueue("redir", "default", "GET", &rx.url("/old"), None)
        .await;
    let (_, attempts) = h.wait_for("redir", "attempted", |j| j.runs >= 1).await;
    assert_eq!(
        (attempts[0].status, attempts[0].category.as_str()),
        (Some(302), "unknown")
    );
    assert!(attempts[0]
        .response_headers
        .iter()
        .any(|(n, v)| n == "location" && v == "/new"));
    assert!(attempts[0].reason.starts_with("302 redirect"));
    assert_eq!(rx.count("/new"), 0);
    h.stop().await;
}

#[tokio::test]
async fn private_destinations_are_refused_unless_allowed() {
    let rx = Receiver::start().await;
    let h = harness().allow_private_networks(false).start().await;
    h.enqueue("ssrf", "default", "POST", &rx.url("/internal"), None)
        .await;
    h.enqueue(
        "ssrf-name",
        "default",
        "POST",
        &format!("http://localhost:{}/internal", rx.addr().port()),
        None,
    )
    .await;
    // IPv6 spellings of loopback: IPv4-compatible and 6to4 (issue 13).
    let port = rx.addr().port();
    h.enqueue(
        "ssrf-v4compat",
        "default",
        "POST",
        &format!("http://[::127.0.0.1]:{port}/internal"),
        None,
    )
    .await;
    h.enqueue(
        "ssrf-6to4",
        "default",
        "POST",
        &format!("http://[2002:7f00:1::]:{port}/internal"),
        None,
    )
    .await;
    for id in ["ssrf", "ssrf-name", "ssrf-v4compat", "ssrf-6to4"] {
        let (job, attempts) = h.wait_state(id, JobState::Dead).await;
        assert_eq!(job.category, Some(DeadCategory::Permanent));
        assert_eq!(
            attempts[0].error.as_deref(),
            Some("destination-refused"),
            "{id}"
        );
    }
    assert_eq!(
        rx.count("/internal"),
        0,
        "no request reached the private address"
    );
    h.stop().await;
}

#[tokio::test]
async fn custom_handlers_return_typed_outcomes() {
    let h = harness()
        .allow_private_networks(false)
        .handler("custom", Arc::new(Typed))
        .start()
        .await;
    h.enqueue("ok", "custom", "RUN", "task:ok", None).await;
    h.enqueue("later", "custom", "RUN", "task:later", None)
        .await;
    h.enqueue("nope", "custom", "RUN", "task:nope", None).await;
    h.wait_state("ok", JobState::Completed).await;
    let (job, attempts) = h.wait_state("nope", JobState::Dead).await;
    assert_eq!(job.category, Some(DeadCategory::Permanent));
    assert_eq!(attempts[0].error_detail.as_deref(), Some("unknown task"));
    let (job, _) = h.wait_state("later", JobState::Deferred).await;
    assert_eq!(job.run_at, T0.saturating_add(Duration::from_secs(90)));
    h.run_next("later").await;
    h.wait_state("later", JobState::Completed).await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_series_count_attempts_by_category_on_the_engines_clock() {
    let rx = Receiver::start().await;
    rx.script("/flaky", vec![Reply::status(503), Reply::status(200)]);
    let h = harness().start().await;
    h.enqueue("j", "default", "POST", &rx.url("/flaky"), None)
        .await;
    h.wait_for("j", "retrying", |j| j.attempts >= 1).await;
    h.run_next("j").await;
    h.wait_state("j", JobState::Completed).await;
    let minutes = h.engine.series();
    assert_eq!(minutes.len(), redial_engine::series::MINUTES);
    // The manual clock's minutes: the last one holds its instant.
    assert!(minutes.last().expect("a minute").at <= h.clock.now());
    let sum =
        |f: &dyn Fn(&redial_engine::series::Point) -> u64| -> u64 { minutes.iter().map(f).sum() };
    assert_eq!(sum(&|m| m.attempts["transient"]), 1);
    assert_eq!(sum(&|m| m.attempts["success"]), 1);
    assert_eq!((sum(&|m| m.completed), sum(&|m| m.dead)), (1, 0));
    assert!(minutes.iter().any(|m| m.p50_ms.is_some()));
    h.stop().await;
}
