//! Waiting for a job to finish (`GET /v1/jobs/{id}?wait=`, issue 33) through the Rust client,
//! against a real server with its engine running on a SQLite file and a real receiver. Woken by
//! the change: the engine here reads a waiting job again only once an hour, so a waiter that
//! answers before its wait ends was told.

use redial_client::{Client, ErrorCode, JobInput, JobInputRequest, PauseInput};
use redial_engine::{EngineConfig, SystemClock};
use redial_server::ServerConfig;
use redial_test_receiver::{Receiver, Reply};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::Server;

mod support;

async fn server(max_waiters: usize) -> Server {
    let config = ServerConfig {
        max_waiters,
        ..ServerConfig::default()
    };
    let engine = EngineConfig {
        // Only being told wakes a waiter within a test.
        wait_recheck: Duration::from_secs(3600),
        ..EngineConfig::default()
    };
    Server::start(config, Arc::new(SystemClock), Some(engine)).await
}

fn job(id: &str, url: String) -> JobInput {
    JobInput {
        id: Some(id.into()),
        request: JobInputRequest {
            method: "POST".into(),
            url,
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The queue "default", paused by hand, so that a job enqueued waits until it is resumed.
async fn paused(c: &Client) {
    c.pause_queue("default", &PauseInput::default())
        .await
        .expect("paused");
}

#[tokio::test]
async fn a_waiter_is_answered_when_its_job_completes_told_by_the_change() {
    let s = server(100).await;
    let rx = Receiver::start().await;
    let c = Client::builder(&s.base).build().expect("a client");
    paused(&c).await;
    c.enqueue(&job("done-soon", rx.url("/ok")))
        .await
        .expect("enqueued");

    let waiting = {
        let c = c.clone();
        tokio::spawn(async move {
            let asked = Instant::now();
            let job = c
                .job_after("done-soon", Duration::from_secs(60))
                .await
                .expect("an answer");
            (job, asked.elapsed())
        })
    };
    // The job is still waiting in its paused queue: the waiter waits with it.
    let before = c.job("done-soon").await.expect("the job");
    assert_eq!(before.state.as_str(), "ready");
    c.resume_queue("default").await.expect("resumed");
    let (job, took) = waiting.await.expect("the waiter");
    assert_eq!(job.state.as_str(), "completed", "{job:?}");
    assert_eq!(
        job.attempt_log.map(|l| l.len()),
        Some(1),
        "with its attempts"
    );
    // Told, not found by a read: the next read would have been an hour later, so an untold
    // waiter answers only when its 60 s wait ends. Answered before that, it was told.
    assert!(took < Duration::from_secs(59), "answered after {took:?}");
    eprintln!("answered {took:?} after the request (the job ran in between)");
    s.stop().await;
}

#[tokio::test]
async fn a_wait_that_ends_answers_with_the_job_as_it_stands_and_a_cancel_wakes_waiters() {
    let s = server(100).await;
    let rx = Receiver::start().await;
    let c = Client::builder(&s.base).build().expect("a client");
    paused(&c).await;
    c.enqueue(&job("held", rx.url("/ok")))
        .await
        .expect("enqueued");
    let still = c
        .job_after("held", Duration::from_millis(200))
        .await
        .expect("an answer");
    assert_eq!(
        still.state.as_str(),
        "ready",
        "not finished when the wait ended"
    );
    let not_yet = c
        .wait_for_job("held", Duration::from_millis(300))
        .await
        .expect("an answer");
    assert_eq!(not_yet.state.as_str(), "ready");

    let waiting = {
        let c = c.clone();
        tokio::spawn(async move { c.wait_for_job("held", Duration::from_secs(60)).await })
    };
    // A cancel through the API finishes the job and tells its waiters.
    let cancelled = c.cancel("held").await.expect("cancelled");
    assert_eq!(cancelled.state.as_str(), "cancelled");
    let job = waiting.await.expect("the waiter").expect("an answer");
    assert_eq!(job.state.as_str(), "cancelled");
    assert_eq!(rx.count("/ok"), 0, "a cancelled job makes no request");

    // A finished job answers at once; one that does not exist, 404.
    let again = c
        .job_after("held", Duration::from_secs(60))
        .await
        .expect("an answer");
    assert_eq!(again.state.as_str(), "cancelled");
    let err = c
        .job_after("no-such-job", Duration::from_secs(60))
        .await
        .expect_err("not found");
    assert_eq!(err.code(), Some(ErrorCode::NotFound), "{err}");
    s.stop().await;
}

#[tokio::test]
async fn a_dead_job_answers_its_waiter_and_bad_waits_are_refused() {
    let s = server(100).await;
    let rx = Receiver::start().await;
    rx.script("/bad", vec![Reply::status(400).body("no")]);
    let c = Client::builder(&s.base).build().expect("a client");
    c.enqueue(&job("refused", rx.url("/bad")))
        .await
        .expect("enqueued");
    let job = c
        .wait_for_job("refused", Duration::from_secs(120))
        .await
        .expect("an answer");
    assert_eq!(job.state.as_str(), "dead");
    assert_eq!(job.category.map(|c| c.as_str()), Some("permanent"));

    for bad in ["61s", "soon", "-1s"] {
        let resp = reqwest::get(format!("{}/v1/jobs/refused?wait={bad}", s.base))
            .await
            .expect("an answer");
        assert_eq!(resp.status().as_u16(), 400, "wait={bad}");
        let body = resp.text().await.expect("a body");
        assert!(body.contains("invalid_wait"), "{body}");
    }
    let resp = reqwest::get(format!("{}/v1/jobs/refused?after=1", s.base))
        .await
        .expect("an answer");
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp
        .text()
        .await
        .expect("a body")
        .contains("unknown_parameter"));
    s.stop().await;
}

#[tokio::test]
async fn waiters_beyond_the_servers_bound_are_refused_at_once_with_retry_after() {
    let s = server(1).await;
    let rx = Receiver::start().await;
    let c = Client::builder(&s.base)
        .max_retries(0)
        .build()
        .expect("a client");
    paused(&c).await;
    c.enqueue(&job("slow", rx.url("/ok")))
        .await
        .expect("enqueued");
    let first = {
        let c = c.clone();
        // Asked again while the probes below hold the one place.
        tokio::spawn(async move {
            loop {
                match c.job_after("slow", Duration::from_secs(60)).await {
                    Err(e) if e.code() == Some(ErrorCode::TooManyWaiters) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    other => return other,
                }
            }
        })
    };
    // Once the first waits, a probe is refused (until then it waits a millisecond and answers:
    // asked again).
    let mut refused = None;
    for _ in 0..6000 {
        match c.job_after("slow", Duration::from_millis(1)).await {
            Err(e) => {
                refused = Some(e);
                break;
            }
            Ok(j) => assert_eq!(j.state.as_str(), "ready"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let refused = refused.expect("the second waiter refused once the first waits");
    assert_eq!(refused.code(), Some(ErrorCode::TooManyWaiters), "{refused}");
    assert!(matches!(
        refused,
        redial_client::Error::Api {
            status: 503,
            retry_after: Some(_),
            ..
        }
    ));
    // Without wait, the job is read as always.
    assert_eq!(c.job("slow").await.expect("read").state.as_str(), "ready");
    c.resume_queue("default").await.expect("resumed");
    let job = first.await.expect("the waiter").expect("an answer");
    assert_eq!(job.state.as_str(), "completed");
    s.stop().await;
}
