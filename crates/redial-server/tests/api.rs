//! The API through `router(state)`, without a socket: validation, dedup, auth, listing, actions.
//! The store is a real SQLite file; the engine is not started (these cases are about the API).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{Engine, EngineConfig, ManualClock};
use redial_policy::Timestamp;
use redial_server::{router, AppState, ServerConfig, OPENAPI};
use redial_store_sqlite::SqliteStore;
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

struct Api {
    app: axum::Router,
    _dir: tempfile::TempDir,
}

fn api_with(config: ServerConfig) -> Api {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(SqliteStore::open(&dir.path().join("redial.db")).expect("open"));
    let http = HttpExecutor::new(HttpConfig::default()).expect("client");
    let engine = Engine::new(
        store,
        EngineConfig::default(),
        Arc::new(ManualClock::new(T0)),
        Arc::new(http),
    );
    Api {
        app: router(AppState {
            engine,
            config: Arc::new(config),
        }),
        _dir: dir,
    }
}

fn api() -> Api {
    api_with(ServerConfig {
        max_batch: 3,
        max_request_bytes: 64 * 1024,
        max_job_body_bytes: 1024,
        ..ServerConfig::default()
    })
}

impl Api {
    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        token: Option<&str>,
    ) -> (StatusCode, Value) {
        self.call_with(method, path, body, token, &[]).await
    }

    async fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        token: Option<&str>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let mut req = Request::builder().method(method).uri(path);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(t) = token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let req = req
            .header("content-type", "application/json")
            .body(body.map_or_else(Body::empty, |b| Body::from(b.to_owned())))
            .expect("request");
        let resp = self.app.clone().oneshot(req).await.expect("response");
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call("POST", path, Some(&body.to_string()), None).await
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call("GET", path, None, None).await
    }

    async fn total_jobs(&self) -> u64 {
        let (_, stats) = self.get("/v1/stats").await;
        stats["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .map(|c| c["count"].as_u64().expect("count"))
            .sum()
    }
}

fn job(id: &str) -> Value {
    json!({ "id": id, "request": { "method": "POST", "url": "https://api.example.com/v1/charges", "body": {"amount": 100} } })
}

#[tokio::test]
async fn enqueue_fills_defaults() {
    let api = api();
    let (status, j) = api
        .post(
            "/v1/jobs",
            json!({ "request": { "method": "get", "url": "https://api.example.com:8443/x?y=1" } }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{j}");
    assert_eq!(j["state"], "ready");
    assert_eq!(j["queue"], "default");
    assert_eq!(j["endpoint"], "https://api.example.com:8443");
    assert_eq!(j["request"]["method"], "GET");
    assert_eq!(j["deduplicated"], false);
    assert_eq!(j["attempts"], 0);
    assert!(j["id"].as_str().expect("id").len() >= 32, "a generated id");
    assert_eq!(
        j["idempotency_key"].as_str().expect("key").len(),
        36,
        "a derived UUIDv5 key"
    );

    let (_, a) = api.post("/v1/jobs", job("same-id")).await;
    let (_, b) = api.post("/v1/jobs", job("same-id")).await;
    assert_eq!(
        a["idempotency_key"], b["idempotency_key"],
        "derived keys are deterministic"
    );
    let (status, j) = api.post("/v1/jobs", json!({ "id": "later", "request": { "method": "POST", "url": "https://a.example/" }, "run_at": "2030-01-01T00:00:00Z", "priority": 5, "tags": ["x"] })).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        (j["state"].as_str(), j["run_at"].as_str()),
        (Some("scheduled"), Some("2030-01-01T00:00:00Z"))
    );
    let (_, shown) = api.get("/v1/jobs/same-id").await;
    assert_eq!(shown["attempt_log"], json!([]));
    assert_eq!(
        shown["request"]["headers"],
        json!([["content-type", "application/json"]])
    );
}

#[tokio::test]
async fn same_id_is_deduplicated_and_a_different_request_conflicts() {
    let api = api();
    assert_eq!(
        api.post("/v1/jobs", job("pay-1")).await.0,
        StatusCode::CREATED
    );
    let (status, j) = api.post("/v1/jobs", job("pay-1")).await;
    assert_eq!((status, &j["deduplicated"]), (StatusCode::OK, &json!(true)));
    let mut different = job("pay-1");
    different["request"]["body"] = json!({"amount": 999});
    let (status, e) = api.post("/v1/jobs", different).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("conflict"))
    );
    assert_eq!(api.total_jobs().await, 1);
}

#[tokio::test]
async fn bad_input_gets_a_precise_4xx_and_nothing_is_stored() {
    let api = api();
    let big_body = "x".repeat(2000);
    let huge = "y".repeat(70 * 1024);
    let cases: Vec<(String, StatusCode, &str)> = vec![
        ("{not json".into(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("".into(), StatusCode::BAD_REQUEST, "invalid_json"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "colour": 1}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"queue": "default"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "not a url"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_url"),
        (json!({"request": {"method": "GET", "url": "ftp://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_url"),
        (json!({"request": {"method": "GE T", "url": "https://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_method"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"bad name": "1"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"x-a": "1\r\nInjected: yes"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "timeout": "10"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_timeout"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "timeout": "1h"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_timeout"),
        (json!({"queue": "nope", "request": {"method": "GET", "url": "https://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "unknown_queue"),
        (json!({"id": "a/b", "request": {"method": "GET", "url": "https://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_id"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "deadline": "2020-01-01T00:00:00Z"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_deadline"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "run_at": "tomorrow"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "idempotency_key": "has space"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_idempotency_key"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "policy": {"max_attempts": 0}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_policy"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "policy": {"max_atempts": 3}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "POST", "url": "https://a.example/", "body": big_body}}).to_string(), StatusCode::PAYLOAD_TOO_LARGE, "job_body_too_large"),
        // Accepted nonsense before (issue 13, item 8).
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "policy": [1]}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "run_at": "2030-01-02T00:00:00Z", "deadline": "2030-01-01T00:00:00Z"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_deadline"),
        (json!({"request": {"method": "GET", "url": format!("https://a.example/{}", "u".repeat(10_000))}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_url"),
        (json!({"request": {"method": "GET", "url": "http://127.0.0.1:0/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_url"),
        (json!({"request": {"method": "POST", "url": "https://a.example/", "headers": {"Content-Length": "0"}, "body": "x"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "POST", "url": "https://a.example/", "headers": [["transfer-encoding", "chunked"]]}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"Host": "other.example"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"Proxy-Authorization": "x"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"Connection": "close"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "str", "url": "https://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_method"),
        (json!({"request": {"method": "POST", "url": "https://a.example/", "body": huge}}).to_string(), StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": ""}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "g".repeat(129)}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "a\nb"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": " "}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "acme\u{202e}gpj.exe"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "a\u{2028}b"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": 7}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
    ];
    for (body, status, code) in cases {
        let (got, e) = api.call("POST", "/v1/jobs", Some(&body), None).await;
        assert_eq!(
            (got, e["error"]["code"].as_str()),
            (status, Some(code)),
            "{}: {e}",
            &body[..body.len().min(120)]
        );
        assert!(!e["error"]["message"].as_str().expect("message").is_empty());
    }
    assert_eq!(api.total_jobs().await, 0, "nothing half-stored");
}

#[tokio::test]
async fn a_queues_groups_are_shown_and_bad_requests_for_them_refused() {
    let api = api();
    let body = json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "tenant-1", "run_at": "2999-01-01T00:00:00Z"}).to_string();
    let (status, job) = api.call("POST", "/v1/jobs", Some(&body), None).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    assert_eq!(job["group"], "tenant-1");
    let (status, groups) = api
        .call("GET", "/v1/queues/default/groups", None, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{groups}");
    assert_eq!(groups["total"], 1);
    assert_eq!(groups["groups"][0]["group"], "tenant-1");
    assert_eq!(groups["groups"][0]["waiting"], 1);
    for (path, status, code) in [
        ("/v1/queues/nope/groups", StatusCode::NOT_FOUND, "not_found"),
        (
            "/v1/queues/default/groups?limit=0",
            StatusCode::BAD_REQUEST,
            "invalid_limit",
        ),
        (
            "/v1/queues/default/groups?limit=x",
            StatusCode::BAD_REQUEST,
            "invalid_limit",
        ),
        (
            "/v1/queues/default/groups?colour=1",
            StatusCode::BAD_REQUEST,
            "unknown_parameter",
        ),
    ] {
        let (got, e) = api.call("GET", path, None, None).await;
        assert_eq!(
            (got, e["error"]["code"].as_str()),
            (status, Some(code)),
            "{path}: {e}"
        );
    }
}

#[tokio::test]
async fn batches_are_atomic_and_bounded() {
    let api = api();
    api.post("/v1/jobs", job("b0")).await;
    let mut conflicting = job("b0");
    conflicting["request"]["url"] = json!("https://api.example.com/other");
    let (status, e) = api
        .post(
            "/v1/jobs/batch",
            json!({ "jobs": [job("b1"), conflicting] }),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("conflict"))
    );
    assert!(e["error"]["message"]
        .as_str()
        .expect("message")
        .starts_with("jobs[1]"));
    assert_eq!(api.total_jobs().await, 1);

    let (status, e) = api
        .post(
            "/v1/jobs/batch",
            json!({ "jobs": [job("b1"), {"request": {"method": "GET", "url": "nope"}}] }),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_url"))
    );
    assert!(e["error"]["message"]
        .as_str()
        .expect("message")
        .starts_with("jobs[1]"));
    let (status, e) = api
        .post(
            "/v1/jobs/batch",
            json!({ "jobs": [job("1"), job("2"), job("3"), job("4")] }),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("batch_too_large"))
    );
    let (status, e) = api.post("/v1/jobs/batch", json!({ "jobs": [] })).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("empty_batch"))
    );
    assert_eq!(api.total_jobs().await, 1);

    let (status, out) = api
        .post(
            "/v1/jobs/batch",
            json!({ "jobs": [job("b1"), job("b0"), job("b2")] }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        (out["inserted"].as_u64(), out["deduplicated"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(api.total_jobs().await, 3);
}

#[tokio::test]
async fn a_token_guards_the_v1_routes() {
    let api = api_with(ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    });
    let body = job("t").to_string();
    let (status, e) = api.call("POST", "/v1/jobs", Some(&body), None).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    assert_eq!(
        api.call("POST", "/v1/jobs", Some(&body), Some("wrong"))
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        api.call("GET", "/v1/stats", None, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        api.call("POST", "/v1/jobs", Some(&body), Some("s3cret"))
            .await
            .0,
        StatusCode::CREATED
    );
    assert_eq!(
        api.call("GET", "/healthz", None, None).await.0,
        StatusCode::OK
    );
    // Ready once the database file's integrity check (begun at open, in the background) passed.
    let mut tries = 0;
    while api.call("GET", "/readyz", None, None).await.0 != StatusCode::OK {
        tries += 1;
        assert!(tries < 3000, "never ready");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The scheme is case-insensitive (RFC 9110); other schemes are not a bearer token.
    for (authorization, status) in [
        ("bearer s3cret", StatusCode::OK),
        ("BEARER s3cret", StatusCode::OK),
        ("Bearer  s3cret ", StatusCode::OK),
        ("Basic s3cret", StatusCode::UNAUTHORIZED),
        ("Bearers3cret", StatusCode::UNAUTHORIZED),
        ("s3cret", StatusCode::UNAUTHORIZED),
    ] {
        let req = Request::builder()
            .method("GET")
            .uri("/v1/stats")
            .header("authorization", authorization)
            .body(Body::empty())
            .expect("request");
        let resp = api.app.clone().oneshot(req).await.expect("response");
        assert_eq!(resp.status(), status, "{authorization:?}");
    }
}

/// Every JSON answer, a success or an error, tells a browser not to guess its type and no cache
/// to keep it (issue 31).
#[tokio::test]
async fn json_answers_are_never_sniffed_nor_cached() {
    let api = api();
    let mut json_answers = 0;
    for (method, uri) in [
        ("GET", "/v1/stats"),
        ("GET", "/v1/jobs/nope"),
        ("POST", "/v1/jobs"),
        ("GET", "/healthz"),
    ] {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .expect("request");
        let resp = api.app.clone().oneshot(req).await.expect("response");
        let h = resp.headers();
        if h["content-type"]
            .to_str()
            .unwrap_or("")
            .starts_with("application/json")
        {
            assert_eq!(h["x-content-type-options"], "nosniff", "{method} {uri}");
            assert_eq!(h["cache-control"], "no-store", "{method} {uri}");
            json_answers += 1;
        }
    }
    assert!(json_answers >= 3, "the stats, the 404 and the 422 are JSON");
}

#[tokio::test]
async fn listing_filters_and_pages() {
    let api = api();
    for i in 0..7 {
        api.post("/v1/jobs", job(&format!("l{i}"))).await;
    }
    let mut seen = Vec::new();
    let mut path = "/v1/jobs?queue=default&state=ready&limit=3".to_owned();
    loop {
        let (status, page) = api.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for j in page["jobs"].as_array().expect("jobs") {
            seen.push(j["id"].as_str().expect("id").to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/jobs?queue=default&state=ready&limit=3&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["l0", "l1", "l2", "l3", "l4", "l5", "l6"]);
    let (_, page) = api.get("/v1/jobs?state=dead").await;
    assert_eq!(page["jobs"], json!([]));
    for (path, code) in [
        ("/v1/jobs?state=zombie", "invalid_state"),
        ("/v1/jobs?category=bad", "invalid_category"),
        ("/v1/jobs?limit=0", "invalid_limit"),
        ("/v1/jobs?cursor=abc", "invalid_cursor"),
        ("/v1/jobs?colour=red", "unknown_parameter"),
    ] {
        let (status, e) = api.get(path).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{path}"
        );
    }
    let (status, e) = api.get("/v1/jobs?queue=nope").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("unknown_queue"))
    );
}

#[tokio::test]
async fn actions_on_the_wrong_state_or_a_missing_job_are_refused() {
    let api = api();
    api.post("/v1/jobs", job("alive")).await;
    let (status, e) = api.post("/v1/jobs/alive/replay", json!(null)).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("invalid_state"))
    );
    assert_eq!(
        e["error"]["message"],
        "job alive is ready: cannot replay it"
    );
    let (status, _) = api.post("/v1/jobs/alive/dismiss", json!(null)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, e) = api.post("/v1/jobs/ghost/replay", json!(null)).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    assert_eq!(api.get("/v1/jobs/ghost").await.0, StatusCode::NOT_FOUND);
    let (status, j) = api.post("/v1/jobs/alive/cancel", json!(null)).await;
    assert_eq!(
        (status, j["state"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );
    let (status, _) = api.post("/v1/jobs/alive/cancel", json!(null)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    // No filter: refused unless it says "all" (issue 13).
    for body in [None, Some("{}")] {
        let (status, e) = api
            .call("POST", "/v1/dead-letters/replay", body, None)
            .await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("filter_required")),
            "{body:?}"
        );
    }
    // since after until: nothing could match, refused rather than answered with nothing.
    let (status, e) = api
        .post(
            "/v1/dead-letters/replay",
            json!({"since": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_range"))
    );
    let (status, e) = api
        .get("/v1/dead-letters/groups?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z")
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_range"))
    );
    let (status, e) = api
        .post("/v1/dead-letters/dismiss", json!({"all": false}))
        .await;
    assert_eq!(
        e["error"]["code"].as_str(),
        Some("filter_required"),
        "{status}"
    );
    let (status, out) = api
        .post("/v1/dead-letters/replay", json!({"all": true}))
        .await;
    assert_eq!(
        (status, out["affected"].as_u64()),
        (StatusCode::OK, Some(0))
    );
    let (status, e) = api
        .post("/v1/dead-letters/dismiss", json!({"category": "sad"}))
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_category"))
    );
    let (status, e) = api.get("/v2/nothing").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_route"))
    );
}

#[tokio::test]
async fn secrets_are_redacted_in_job_views() {
    let api = api();
    let (_, j) = api
        .post(
            "/v1/jobs",
            json!({ "id": "s", "request": { "method": "POST", "url": "https://api.example.com/v1?api_key=abc&page=2",
                    "headers": {"Authorization": "Bearer sk_live_123", "X-Trace": "t1"}, "body": "secret payload" } }),
        )
        .await;
    let text = j.to_string();
    assert!(
        !text.contains("sk_live_123") && !text.contains("abc") && !text.contains("secret payload"),
        "{text}"
    );
    assert_eq!(
        j["request"]["url"],
        "https://api.example.com/v1?api_key=%5Bredacted%5D&page=2"
    );
    assert_eq!(j["request"]["body_bytes"], 14);
}

#[tokio::test]
async fn the_openapi_document_covers_every_route() {
    let api = api();
    let (status, doc) = api.get("/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    let served: Value = serde_json::from_str(OPENAPI).expect("valid JSON");
    assert_eq!(doc, served);
    let paths = doc["paths"].as_object().expect("paths");
    for (method, path) in [
        ("post", "/v1/jobs"),
        ("get", "/v1/jobs"),
        ("post", "/v1/jobs/batch"),
        ("get", "/v1/jobs/{id}"),
        ("post", "/v1/jobs/{id}/replay"),
        ("post", "/v1/jobs/{id}/dismiss"),
        ("post", "/v1/jobs/{id}/cancel"),
        ("post", "/v1/dead-letters/replay"),
        ("post", "/v1/dead-letters/dismiss"),
        ("get", "/v1/dead-letters/groups"),
        ("get", "/v1/session"),
        ("get", "/v1/stats"),
        ("get", "/v1/endpoints"),
        ("get", "/v1/endpoints/{name}"),
        ("post", "/v1/endpoints/{name}/pause"),
        ("post", "/v1/endpoints/{name}/resume"),
        ("post", "/v1/endpoints/{name}/reset-breaker"),
        ("get", "/v1/queues"),
        ("post", "/v1/queues/{name}/pause"),
        ("post", "/v1/queues/{name}/resume"),
        ("get", "/v1/schedules"),
        ("post", "/v1/schedules"),
        ("get", "/v1/schedules/{id}"),
        ("put", "/v1/schedules/{id}"),
        ("delete", "/v1/schedules/{id}"),
        ("post", "/v1/schedules/{id}/pause"),
        ("post", "/v1/schedules/{id}/resume"),
        ("get", "/v1/openapi.json"),
        ("post", "/v1/backup"),
        ("get", "/v1/alerts"),
        ("get", "/v1/series"),
        ("get", "/metrics"),
        ("get", "/healthz"),
        ("get", "/readyz"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} is documented"
        );
        // And the route exists: anything but the fallback's no_route.
        let concrete = path.replace("{id}", "x").replace("{name}", "x");
        let (_, body) = api
            .call(&method.to_uppercase(), &concrete, Some("{}"), None)
            .await;
        assert_ne!(
            body["error"]["code"], "no_route",
            "{method} {path} is routed"
        );
    }
}

#[tokio::test]
async fn endpoints_show_their_backlog_and_state() {
    let api = api();
    api.post("/v1/jobs", job("e1")).await;
    api.post("/v1/jobs", job("e2")).await;
    let (status, out) = api.get("/v1/endpoints").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let list = out["endpoints"].as_array().expect("endpoints");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "https://api.example.com");
    assert_eq!(
        (list[0]["held"].as_u64(), list[0]["breaker"].as_str()),
        (Some(2), Some("closed"))
    );
    let (status, one) = api.get("/v1/endpoints/https%3A%2F%2Fapi.example.com").await;
    assert_eq!(
        (status, &one["name"]),
        (StatusCode::OK, &json!("https://api.example.com"))
    );
    let (status, e) = api.get("/v1/endpoints/nope").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
}

#[tokio::test]
async fn a_read_only_dashboard_refuses_what_a_browser_sends_and_lets_programs_act() {
    let api = api_with(ServerConfig {
        token: Some("secret".into()),
        ui_read_only: true,
        ..ServerConfig::default()
    });
    let browser = [
        ("sec-fetch-mode", "cors"),
        ("sec-fetch-site", "same-origin"),
    ];
    let body = job("b1").to_string();
    let (status, e) = api
        .call_with("POST", "/v1/jobs", Some(&body), Some("secret"), &browser)
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("read_only"))
    );
    // Without the token the answer is still 401: nothing is said before authentication.
    let (status, _) = api
        .call_with("POST", "/v1/jobs", Some(&body), None, &browser)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, s) = api
        .call_with("GET", "/v1/session", None, Some("secret"), &browser)
        .await;
    assert_eq!((status, &s["read_only"]), (StatusCode::OK, &json!(true)));
    // A program with the token acts, and its session says so.
    let (status, _) = api
        .call("POST", "/v1/jobs", Some(&body), Some("secret"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, s) = api.call("GET", "/v1/session", None, Some("secret")).await;
    assert_eq!(s["read_only"], json!(false));
}

#[tokio::test]
async fn endpoints_and_queues_pause_and_resume_by_hand() {
    let api = api();
    api.post("/v1/jobs", job("p1")).await;
    let path = "/v1/endpoints/https%3A%2F%2Fapi.example.com";
    let (status, v) = api
        .post(
            &format!("{path}/pause"),
            json!({ "reason": "provider maintenance", "for": "30m" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["paused_by_hand"]["reason"], "provider maintenance");
    assert_eq!(v["paused_by_hand"]["since"], "2026-11-30T00:00:00Z");
    assert_eq!(v["paused_by_hand"]["until"], "2026-11-30T00:30:00Z");
    let holding = v["holding"].as_str().expect("holding");
    assert!(holding.starts_with("paused by hand"), "{holding}");
    // An empty body pauses until resumed.
    let (status, v) = api.call("POST", &format!("{path}/pause"), None, None).await;
    assert_eq!(
        (status, &v["paused_by_hand"]["until"]),
        (StatusCode::OK, &Value::Null)
    );
    let (status, v) = api.post(&format!("{path}/resume"), json!({})).await;
    assert_eq!(
        (status, &v["paused_by_hand"]),
        (StatusCode::OK, &Value::Null)
    );
    assert_eq!(v["holding"], Value::Null);
    let (status, v) = api.post(&format!("{path}/reset-breaker"), json!({})).await;
    assert_eq!(
        (status, v["breaker"].as_str()),
        (StatusCode::OK, Some("closed"))
    );
    // An endpoint no job named yet can be paused ahead of its first job.
    let (status, v) = api
        .post(
            "/v1/endpoints/https%3A%2F%2Fnew.example.com/pause",
            json!({}),
        )
        .await;
    assert_eq!(
        (status, &v["name"]),
        (StatusCode::OK, &json!("https://new.example.com"))
    );

    for (body, code) in [
        (json!({ "for": "0s" }), "invalid_pause"),
        (json!({ "for": "soon" }), "invalid_pause"),
        (json!({ "until": "2026-11-29T00:00:00Z" }), "invalid_pause"),
        (
            json!({ "for": "1m", "until": "2027-01-01T00:00:00Z" }),
            "invalid_pause",
        ),
        (json!({ "reason": "x".repeat(501) }), "invalid_reason"),
        // Control characters an operator's terminal would act on (issue 31).
        (
            json!({ "reason": "\u{1b}]52;c;ZWNobw==\u{7}" }),
            "invalid_reason",
        ),
        (json!({ "reason": "two\nlines" }), "invalid_reason"),
        (json!({ "reason": "nul\u{0}" }), "invalid_reason"),
        (json!({ "reason": "\u{202e}txt.exe" }), "invalid_reason"),
        (json!({ "forever": true }), "invalid_body"),
    ] {
        let (status, e) = api.post(&format!("{path}/pause"), body.clone()).await;
        assert!(status.is_client_error(), "{body}: {status} {e}");
        if code != "invalid_body" {
            assert_eq!(e["error"]["code"], code, "{body}: {e}");
        }
    }

    let (status, q) = api.get("/v1/queues").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(q["queues"][0]["name"], "default");
    assert_eq!(q["queues"][0]["paused_by_hand"], Value::Null);
    let (status, q) = api
        .post("/v1/queues/default/pause", json!({ "reason": "deploy" }))
        .await;
    assert_eq!(
        (status, &q["paused_by_hand"]["reason"]),
        (StatusCode::OK, &json!("deploy"))
    );
    let (_, q) = api.get("/v1/queues").await;
    assert_eq!(q["queues"][0]["paused_by_hand"]["reason"], "deploy");
    let (status, q) = api.post("/v1/queues/default/resume", json!({})).await;
    assert_eq!(
        (status, &q["paused_by_hand"]),
        (StatusCode::OK, &Value::Null)
    );
    let (status, e) = api.post("/v1/queues/nope/pause", json!({})).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("unknown_queue"))
    );
}

/// Every error answer has the documented shape, including those the router and the extractors
/// make (issue 13): a method a route does not take, a path that is not UTF-8, an unknown route.
#[tokio::test]
async fn router_and_extractor_errors_have_the_documented_shape() {
    let api = api();
    for (method, path, status, code) in [
        (
            "PUT",
            "/v1/jobs",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "DELETE",
            "/v1/stats",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "GET",
            "/v1/jobs/%ff%fe",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        ("GET", "/v1/nothing-here", StatusCode::NOT_FOUND, "no_route"),
    ] {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .expect("request");
        let resp = api.app.clone().oneshot(req).await.expect("response");
        assert_eq!(resp.status(), status, "{method} {path}");
        let json = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        assert!(json, "{method} {path}: not JSON");
        if status == StatusCode::METHOD_NOT_ALLOWED {
            assert!(resp.headers().contains_key("allow"), "{method} {path}");
        }
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        let v: Value = serde_json::from_slice(&bytes).expect("a JSON body");
        assert_eq!(
            v["error"]["code"].as_str(),
            Some(code),
            "{method} {path}: {v}"
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{method} {path}: {v}"
        );
    }
}

/// What a web page in the user's browser could send to a tokenless API on loopback is refused
/// (issue 13): a Host rebound to 127.0.0.1, a cross-site request, a body that is not JSON.
#[tokio::test]
async fn a_hostile_page_cannot_drive_the_loopback_api() {
    let api = api_with(ServerConfig {
        check_host: true,
        allowed_hosts: vec!["redial.internal".into()],
        ..ServerConfig::default()
    });
    let body = job("page").to_string();
    type Case<'a> = (Vec<(&'a str, &'a str)>, StatusCode, Option<&'a str>);
    let cases: Vec<Case> = vec![
        (
            vec![("host", "rebind.attacker.example:8080")],
            StatusCode::FORBIDDEN,
            Some("foreign_host"),
        ),
        (
            vec![
                ("host", "localhost:8080"),
                ("origin", "http://attacker.example"),
            ],
            StatusCode::FORBIDDEN,
            Some("cross_site"),
        ),
        (
            vec![("host", "localhost:8080"), ("sec-fetch-site", "cross-site")],
            StatusCode::FORBIDDEN,
            Some("cross_site"),
        ),
        (
            vec![("host", "localhost:8080"), ("sec-fetch-site", "same-site")],
            StatusCode::FORBIDDEN,
            Some("cross_site"),
        ),
        (
            vec![("host", "localhost:8080"), ("content-type", "text/plain")],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("unsupported_media_type"),
        ),
        (
            vec![
                ("host", "127.0.0.1:8080"),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("unsupported_media_type"),
        ),
        // What a program (or a same-origin page) sends goes through.
        (vec![("host", "localhost:8080")], StatusCode::CREATED, None),
        (
            vec![
                ("host", "127.0.0.1:8080"),
                ("origin", "http://127.0.0.1:8080"),
            ],
            StatusCode::OK,
            None,
        ),
        (
            vec![("host", "[::1]:8080"), ("sec-fetch-site", "same-origin")],
            StatusCode::OK,
            None,
        ),
        (
            vec![("host", "redial.internal"), ("sec-fetch-site", "none")],
            StatusCode::OK,
            None,
        ),
    ];
    for (headers, status, code) in cases {
        let mut req = Request::builder().method("POST").uri("/v1/jobs");
        let mut has_type = false;
        for (n, v) in &headers {
            has_type |= *n == "content-type";
            req = req.header(*n, *v);
        }
        if !has_type {
            req = req.header("content-type", "application/json");
        }
        let req = req.body(Body::from(body.clone())).expect("request");
        let resp = api.app.clone().oneshot(req).await.expect("response");
        let got = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert_eq!(got, status, "{headers:?}: {v}");
        if let Some(code) = code {
            assert_eq!(v["error"]["code"].as_str(), Some(code), "{headers:?}");
        }
    }
    assert_eq!(
        api.total_jobs().await,
        1,
        "only the program's request made a job"
    );
}

/// Schedules: created, read, listed, replaced, paused, resumed and deleted; each mistake is a
/// 4xx with its own code.
#[tokio::test]
async fn schedules_round_trip_and_refuse_mistakes() {
    let a = api();
    let body = json!({
        "id": "nightly",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "job": { "request": { "method": "POST", "url": "https://api.example.com/report" }, "tags": ["r"] }
    });
    let (s, created) = a.post("/v1/schedules", body.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    // 2026-11-30T00:00:00Z is 01:00 in Berlin: 03:00 Berlin is 02:00Z.
    assert_eq!(created["next_at"], "2026-11-30T02:00:00Z");
    assert_eq!(created["rule"]["cron"]["timezone"], "Europe/Berlin");
    assert_eq!(created["missed"]["policy"], "run_once");
    assert_eq!(created["job"]["endpoint"], "https://api.example.com");
    assert_eq!(created["source"], "api");
    let (s, again) = a.post("/v1/schedules", body).await;
    assert_eq!(
        (s, again["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("schedule_exists"))
    );
    // PUT replaces (200) or creates (201).
    let every = json!({ "every": "5m", "missed": "run_all", "missed_max": 3,
        "job": { "request": { "method": "GET", "url": "https://api.example.com/ping" } } });
    let (s, replaced) = a
        .call(
            "PUT",
            "/v1/schedules/nightly",
            Some(&every.to_string()),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["rule"]["every"]["interval"], "5m");
    assert_eq!(replaced["next_at"], "2026-11-30T00:05:00Z");
    assert_eq!(replaced["missed"], json!({"policy": "run_all", "max": 3}));
    let (s, _) = a
        .call("PUT", "/v1/schedules/ping", Some(&every.to_string()), None)
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, list) = a.get("/v1/schedules").await;
    let ids: Vec<&str> = list["schedules"]
        .as_array()
        .expect("list")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["nightly", "ping"]);
    let (s, paused) = a.post("/v1/schedules/ping/pause", json!(null)).await;
    assert_eq!((s, &paused["paused"]), (StatusCode::OK, &json!(true)));
    let (s, resumed) = a.post("/v1/schedules/ping/resume", json!(null)).await;
    assert_eq!((s, &resumed["paused"]), (StatusCode::OK, &json!(false)));
    let (s, _) = a.call("DELETE", "/v1/schedules/ping", None, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, gone) = a.get("/v1/schedules/ping").await;
    assert_eq!(
        (s, gone["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );

    let refused = |body: Value, code: &'static str| {
        let a = &a;
        async move {
            let (s, out) = a.post("/v1/schedules", body.clone()).await;
            assert_eq!(
                (s, out["error"]["code"].as_str()),
                (StatusCode::UNPROCESSABLE_ENTITY, Some(code)),
                "{body} -> {out}"
            );
            out["error"]["message"]
                .as_str()
                .expect("message")
                .to_owned()
        }
    };
    let req = json!({ "request": { "method": "POST", "url": "https://api.example.com/x" } });
    refused(json!({ "cron": "* * * * *", "job": req }), "invalid_id").await;
    refused(
        json!({ "id": "a b", "cron": "* * * * *", "job": req }),
        "invalid_id",
    )
    .await;
    refused(json!({ "id": "x", "job": req }), "invalid_schedule").await;
    refused(
        json!({ "id": "x", "cron": "* * * * *", "every": "1m", "job": req }),
        "invalid_schedule",
    )
    .await;
    let m = refused(
        json!({ "id": "x", "cron": "0 9 * *", "job": req }),
        "invalid_schedule",
    )
    .await;
    assert!(m.contains("give 5"), "{m}");
    let m = refused(
        json!({ "id": "x", "cron": "0 9 * * *", "timezone": "Mars/Base", "job": req }),
        "invalid_schedule",
    )
    .await;
    assert!(m.contains("IANA"), "{m}");
    refused(
        json!({ "id": "x", "every": "0s", "job": req }),
        "invalid_schedule",
    )
    .await;
    // Accepted before, meaningless (issue 31): a cron that matches only times a daylight-saving
    // change skips (02:xx on the last Sunday of March in Berlin), units out of order, a step
    // no range takes twice.
    let m = refused(
        json!({ "id": "x", "cron": "* * 2 * 3 0L", "timezone": "Europe/Berlin", "job": req }),
        "invalid_schedule",
    )
    .await;
    assert!(m.contains("never fire"), "{m}");
    refused(
        json!({ "id": "x", "every": "1s1m", "job": req }),
        "invalid_schedule",
    )
    .await;
    let m = refused(
        json!({ "id": "x", "cron": "0-59/100 * * * *", "job": req }),
        "invalid_schedule",
    )
    .await;
    assert!(m.contains("one value only"), "{m}");
    refused(
        json!({ "id": "x", "every": "1m", "timezone": "UTC", "job": req }),
        "invalid_schedule",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "missed": "sometimes", "job": req }),
        "invalid_missed",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "missed_max": 3, "job": req }),
        "invalid_missed",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "missed": "run_all", "missed_max": 0, "job": req }),
        "invalid_missed",
    )
    .await;
    let m = refused(
        json!({ "id": "x", "every": "1m", "job": { "id": "j", "request": req["request"] } }),
        "invalid_job",
    )
    .await;
    assert!(m.contains("job.id"), "{m}");
    refused(
        json!({ "id": "x", "every": "1m", "job": "nope" }),
        "invalid_job",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "job": { "queue": "nope", "request": req["request"] } }),
        "unknown_queue",
    )
    .await;
    refused(json!({ "id": "x", "every": "1m", "job": { "request": { "method": "POST", "url": "ftp://x" } } }), "invalid_url").await;
    let (s, out) = a
        .call(
            "PUT",
            "/v1/schedules/a",
            Some(&json!({ "id": "b", "every": "1m", "job": req }).to_string()),
            None,
        )
        .await;
    assert_eq!(
        (s, out["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_id"))
    );
}
