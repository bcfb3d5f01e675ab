//! The API through `router(state)`, without a socket: validation, dedup, auth, listing, actions.
//! The store is a real SQLite file; the engine is not started (these cases are about the API).
//!
//! One test binary, a file per area: jobs (enqueue, batches, listing, actions, views), security
//! (tokens, foreign pages, answers' headers), operations (endpoints, queues, schedules, the
//! document, errors' shape). The harness is here.

mod jobs;
mod operations;
mod security;

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

pub(crate) const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

pub(crate) struct Api {
    app: axum::Router,
    _dir: tempfile::TempDir,
}

pub(crate) fn api_with(config: ServerConfig) -> Api {
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
            draining: redial_engine::Shutdown::new(),
            gates: Default::default(),
            engine,
            config: Arc::new(config),
        }),
        _dir: dir,
    }
}

pub(crate) fn api() -> Api {
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

pub(crate) fn job(id: &str) -> Value {
    json!({ "id": id, "request": { "method": "POST", "url": "https://api.example.com/v1/charges", "body": {"amount": 100} } })
}
