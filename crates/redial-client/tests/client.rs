//! The Rust client against a real server on loopback (the API's router on a SQLite file, the
//! engine not started: these cases are about the API): every kind of route, typed answers that
//! lose nothing the server said, typed errors, and retries of what is safe to retry.

use redial_client::{
    Client, DeadGroupsQuery, DeadLetterFilter, Error, ErrorCode, JobInput, JobInputRequest,
    JobTemplateInput, JobsQuery, PauseInput, ScheduleInput, ROUTES,
};
use redial_engine::ManualClock;
use redial_policy::Timestamp;
use redial_server::{ServerConfig, OPENAPI};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use support::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;

const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);
const TOKEN: &str = "client-test-token";

async fn server() -> Server {
    let config = ServerConfig {
        token: Some(TOKEN.into()),
        ..ServerConfig::default()
    };
    Server::start(config, Arc::new(ManualClock::new(T0)), None).await
}

fn client(base: &str) -> Client {
    Client::builder(base)
        .token(TOKEN)
        .build()
        .expect("a client")
}

/// The same call's raw JSON, to check the typed answer against.
async fn raw(base: &str, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("an answer")
        .text()
        .await
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .expect("JSON")
}

/// Every field the server wrote is in the typed answer, with its value (a null the server
/// wrote may be left out): the types lose nothing.
fn loses_nothing(what: &str, raw: &Value, typed: &impl serde::Serialize) {
    let typed = serde_json::to_value(typed).expect("encodes");
    fn walk(at: &str, raw: &Value, typed: &Value) {
        match (raw, typed) {
            (Value::Object(r), Value::Object(t)) => {
                for (k, v) in r {
                    match t.get(k) {
                        Some(tv) => walk(&format!("{at}.{k}"), v, tv),
                        None if v.is_null() => {}
                        None => panic!("{at}.{k} = {v} is lost by the typed answer"),
                    }
                }
            }
            (Value::Array(r), Value::Array(t)) => {
                assert_eq!(r.len(), t.len(), "{at}: as many items");
                for (i, (rv, tv)) in r.iter().zip(t).enumerate() {
                    walk(&format!("{at}[{i}]"), rv, tv);
                }
            }
            (Value::Number(r), Value::Number(t)) => {
                assert_eq!(r.as_f64(), t.as_f64(), "{at}");
            }
            (r, t) => assert_eq!(r, t, "{at}"),
        }
    }
    walk(what, raw, &typed);
}

fn job(id: &str) -> JobInput {
    JobInput {
        id: Some(id.into()),
        request: JobInputRequest {
            method: "POST".into(),
            url: "https://api.example.com/hook".into(),
            body: Some(serde_json::json!({"n": 1})),
            ..Default::default()
        },
        tags: Some(vec!["client".into()]),
        ..Default::default()
    }
}

#[test]
fn every_route_of_the_document_has_a_method() {
    let doc: Value = serde_json::from_str(OPENAPI).expect("JSON");
    let mut documented = BTreeSet::new();
    for (path, ops) in doc["paths"].as_object().expect("paths") {
        for method in ops.as_object().expect("operations").keys() {
            if method != "parameters" {
                documented.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    let covered: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    assert_eq!(
        covered, documented,
        "ROUTES and the OpenAPI document's paths"
    );
}

#[tokio::test]
async fn jobs_are_enqueued_read_listed_and_acted_on_with_typed_answers() {
    let s = server().await;
    let c = client(&s.base);
    let created = c.enqueue(&job("job-1")).await.expect("enqueued");
    assert_eq!(
        (created.id.as_str(), created.state.as_str()),
        ("job-1", "ready")
    );
    let again = c.enqueue(&job("job-1")).await.expect("deduplicated");
    assert_eq!(again.deduplicated, Some(true));

    let batch = c
        .enqueue_batch(&[job("job-2"), job("job-3")])
        .await
        .expect("a batch");
    assert_eq!(batch.inserted, 2);

    let shown = c.job("job-1").await.expect("shown");
    loses_nothing("job", &raw(&s.base, "/v1/jobs/job-1").await, &shown);
    assert_eq!(shown.tags, vec!["client".to_owned()]);

    let page = c
        .jobs(&JobsQuery {
            limit: Some(2),
            ..Default::default()
        })
        .await
        .expect("a page");
    assert_eq!(page.jobs.len(), 2);
    loses_nothing("page", &raw(&s.base, "/v1/jobs?limit=2").await, &page);
    let cursor = page.next_cursor.clone().expect("a next page");
    let rest = c
        .jobs(&JobsQuery {
            cursor: Some(cursor),
            ..Default::default()
        })
        .await
        .expect("the next page");
    assert_eq!(rest.jobs.len(), 1);

    let cancelled = c.cancel("job-3").await.expect("cancelled");
    assert_eq!(cancelled.state.as_str(), "cancelled");

    // A refusal is typed, with the API's code.
    let err = c
        .replay("job-1")
        .await
        .expect_err("a ready job cannot be replayed");
    assert_eq!(err.code(), Some(ErrorCode::InvalidState), "{err}");
    assert_eq!(err.status(), Some(409));
    let err = c.job("no-such-job").await.expect_err("not found");
    assert_eq!(err.code(), Some(ErrorCode::NotFound), "{err}");
    let err = c.dismiss("job-1").await.expect_err("not dead");
    assert!(matches!(err, Error::Api { .. }), "{err}");
    // Ids travel as one path segment, whatever they hold.
    let err = c.job("a/b?c").await.expect_err("not found");
    assert_eq!(err.code(), Some(ErrorCode::NotFound), "{err}");
}

#[tokio::test]
async fn the_read_routes_answer_in_their_types() {
    let s = server().await;
    let c = client(&s.base);
    c.enqueue(&job("job-1")).await.expect("enqueued");
    let stats = c.stats().await.expect("stats");
    loses_nothing("stats", &raw(&s.base, "/v1/stats").await, &stats);
    let endpoints = c
        .endpoints(&redial_client::PageQuery::default())
        .await
        .expect("endpoints");
    loses_nothing(
        "endpoints",
        &raw(&s.base, "/v1/endpoints").await,
        &endpoints,
    );
    let queues = c.queues().await.expect("queues");
    loses_nothing("queues", &raw(&s.base, "/v1/queues").await, &queues);
    let queue = &queues.queues[0].name;
    let groups = c.queue_groups(queue, Some(10)).await.expect("groups");
    assert_eq!(&groups.queue, queue);
    let session = c.session().await.expect("session");
    assert!(session.token_required && !session.read_only);
    let dead = c
        .dead_letter_groups(&DeadGroupsQuery::default())
        .await
        .expect("dead letter groups");
    assert_eq!(dead.total, 0);
    let affected = c
        .dismiss_dead_letters(&DeadLetterFilter {
            all: Some(true),
            ..Default::default()
        })
        .await
        .expect("dismissed");
    assert_eq!(affected.affected, 0);
    let replayed = c
        .replay_dead_letters(&DeadLetterFilter {
            all: Some(true),
            ..Default::default()
        })
        .await
        .expect("replayed");
    assert_eq!(replayed.affected, 0);
    c.alerts().await.expect("alerts");
    let series = c.series().await.expect("series");
    loses_nothing("series", &raw(&s.base, "/v1/series").await, &series);
    assert_eq!(c.health().await.expect("health").status, "ok");
    c.ready().await.expect("ready");
    assert!(c.metrics().await.expect("metrics").contains("redial_"));
    assert!(c.openapi().await.expect("the document")["paths"].is_object());
}

#[tokio::test]
async fn endpoints_queues_and_schedules_are_controlled() {
    let s = server().await;
    let c = client(&s.base);
    let pause = PauseInput {
        r#for: Some("10m".into()),
        reason: Some("maintenance".into()),
        ..Default::default()
    };
    // Not known yet: refused; paused ahead of its first job when asked.
    match c.pause_endpoint("api.example.com", &pause).await {
        Err(Error::Api {
            status: 404, code, ..
        }) => assert_eq!(code, "not_found"),
        other => panic!("expected not_found, got {other:?}"),
    }
    let paused = c
        .pause_endpoint_ahead("api.example.com", &pause)
        .await
        .expect("paused");
    assert_eq!(paused.name, "api.example.com");
    assert!(paused.paused_by_hand.is_some());
    let shown = c.endpoint("api.example.com").await.expect("shown");
    loses_nothing(
        "endpoint",
        &raw(&s.base, "/v1/endpoints/api.example.com").await,
        &shown,
    );
    let resumed = c.resume_endpoint("api.example.com").await.expect("resumed");
    assert!(resumed.paused_by_hand.is_none());
    c.reset_breaker("api.example.com").await.expect("reset");

    let queue = c.queues().await.expect("queues").queues[0].name.clone();
    let q = c
        .pause_queue(&queue, &PauseInput::default())
        .await
        .expect("paused");
    assert!(q.paused_by_hand.is_some());
    let q = c.resume_queue(&queue).await.expect("resumed");
    assert!(q.paused_by_hand.is_none());

    let input = ScheduleInput {
        id: Some("nightly".into()),
        cron: Some("0 3 * * *".into()),
        job: JobTemplateInput {
            request: redial_client::JobTemplateInputRequest {
                method: "POST".into(),
                url: "https://api.example.com/nightly".into(),
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let made = c.create_schedule(&input).await.expect("created");
    assert_eq!(made.id, "nightly");
    assert_eq!(
        made.rule.cron.as_ref().map(|c| c.expr.as_str()),
        Some("0 3 * * *")
    );
    let err = c.create_schedule(&input).await.expect_err("exists");
    assert_eq!(err.code(), Some(ErrorCode::ScheduleExists), "{err}");
    let list = c
        .schedules(&redial_client::PageQuery::default())
        .await
        .expect("listed");
    loses_nothing("schedules", &raw(&s.base, "/v1/schedules").await, &list);
    assert!(c.pause_schedule("nightly").await.expect("paused").paused);
    assert!(!c.resume_schedule("nightly").await.expect("resumed").paused);
    let replaced = c
        .put_schedule(
            "nightly",
            &ScheduleInput {
                id: None,
                cron: Some("0 4 * * *".into()),
                ..input.clone()
            },
        )
        .await
        .expect("replaced");
    assert_eq!(
        replaced.rule.cron.map(|c| c.expr),
        Some("0 4 * * *".to_owned())
    );
    c.schedule("nightly").await.expect("shown");
    c.delete_schedule("nightly").await.expect("deleted");
    let err = c.schedule("nightly").await.expect_err("gone");
    assert_eq!(err.code(), Some(ErrorCode::NotFound), "{err}");

    // The backup streams the SQLite file.
    let backup = c.backup().await.expect("a backup");
    let bytes = backup.bytes().await.expect("its bytes");
    assert!(bytes.starts_with(b"SQLite format 3\0"));
}

#[tokio::test]
async fn a_wrong_token_is_a_typed_refusal_and_a_bad_base_is_refused_at_once() {
    let s = server().await;
    let c = Client::builder(&s.base)
        .token("wrong")
        .build()
        .expect("a client");
    let err = c.stats().await.expect_err("unauthorized");
    assert_eq!(err.code(), Some(ErrorCode::Unauthorized), "{err}");
    let err = Client::builder("ftp://example.com")
        .build()
        .expect_err("not http");
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    let bare = Client::builder(s.base.trim_start_matches("http://"))
        .token(TOKEN)
        .build()
        .expect("http:// is assumed");
    bare.health().await.expect("reached");
}

/// A server that answers each connection with the next of `answers` (raw HTTP), then closes it;
/// returns its address and how many requests it read.
async fn scripted(answers: Vec<&'static str>) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = format!("http://{}", listener.local_addr().expect("address"));
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        for answer in answers {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = vec![0u8; 8192];
            let _ = sock.read(&mut buf).await;
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = sock.write_all(answer.as_bytes()).await;
            let _ = sock.shutdown().await;
        }
    });
    (addr, seen)
}

const UNAVAILABLE: &str = "HTTP/1.1 503 Service Unavailable\r\nretry-after: 0\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 70\r\n\r\n{\"error\":{\"code\":\"storage_unavailable\",\"message\":\"try again later..\"}}";
const LIMITED: &str =
    "HTTP/1.1 429 Too Many Requests\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
const OK: &str = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: 15\r\n\r\n{\"status\":\"ok\"}";

#[tokio::test]
async fn a_503_and_a_429_are_retried_and_the_answer_after_them_is_returned() {
    let (addr, seen) = scripted(vec![UNAVAILABLE, LIMITED, OK]).await;
    let c = Client::builder(&addr).build().expect("a client");
    let health = c.health().await.expect("the third answer");
    assert_eq!(health.status, "ok");
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 3);
}

#[tokio::test]
async fn retries_end_with_the_last_refusal() {
    let (addr, seen) = scripted(vec![UNAVAILABLE, UNAVAILABLE]).await;
    let c = Client::builder(&addr)
        .max_retries(1)
        .build()
        .expect("a client");
    let err = c.health().await.expect_err("still unavailable");
    assert_eq!(err.code(), Some(ErrorCode::StorageUnavailable), "{err}");
    assert!(matches!(
        err,
        Error::Api {
            status: 503,
            retry_after: Some(d),
            ..
        } if d == Duration::ZERO
    ));
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_server_that_is_not_there_is_a_connection_error() {
    // A port just freed: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = format!("http://{}", listener.local_addr().expect("address"));
    drop(listener);
    let c = Client::builder(&addr)
        .max_retries(1)
        .build()
        .expect("a client");
    let err = c.health().await.expect_err("nothing there");
    assert!(matches!(err, Error::Connection { .. }), "{err}");
    assert_eq!(err.status(), None);
}

#[tokio::test]
async fn from_env_reads_the_server_and_the_token_as_the_cli_does() {
    let s = server().await;
    // The only test in this file that sets the environment, so no other reads it meanwhile.
    std::env::set_var("REDIAL_SERVER", &s.base);
    std::env::set_var("REDIAL_TOKEN", TOKEN);
    let c = Client::from_env().expect("a client");
    std::env::remove_var("REDIAL_SERVER");
    std::env::remove_var("REDIAL_TOKEN");
    assert_eq!(c.base(), s.base);
    c.stats().await.expect("authorized");
}
