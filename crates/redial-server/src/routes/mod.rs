//! The routes, the middleware every answer passes, and what the handlers share; the handlers by
//! area: jobs, endpoints (and queues), schedules, ops.

use crate::input::{self};
use crate::view;
use crate::{auth, ApiError, AppState, ErrorCode};
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Json, Router};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use redial_store::JobId;

mod bulk;
mod endpoints;
mod events;
mod jobs;
mod ops;
mod schedules;

use bulk::{bulk_dismiss, bulk_replay, export, operation, operation_cancel, operations};
use endpoints::{
    endpoint, endpoint_pause, endpoint_replay_outage, endpoint_reset_breaker, endpoint_resume,
    endpoints, queue_groups, queue_ordering_keys, queue_pause, queue_resume, queues,
};
use events::{events, stream};
use jobs::{
    cancel, dead_letter_groups, dead_letter_patterns, dismiss, enqueue, enqueue_batch, list,
    replay, session, show,
};
use ops::{alerts, backup, healthz, metrics, openapi, readyz, series, stats};
use schedules::{
    schedule_create, schedule_delete, schedule_list, schedule_pause, schedule_put, schedule_resume,
    schedule_show,
};

pub fn router(state: AppState) -> Router {
    let v1 = Router::new()
        .route("/v1/jobs", post(enqueue).get(list))
        .route("/v1/jobs/batch", post(enqueue_batch))
        .route("/v1/jobs/{id}", get(show))
        .route("/v1/jobs/{id}/replay", post(replay))
        .route("/v1/jobs/{id}/dismiss", post(dismiss))
        .route("/v1/jobs/{id}/cancel", post(cancel))
        .route("/v1/dead-letters/replay", post(bulk_replay))
        .route("/v1/dead-letters/dismiss", post(bulk_dismiss))
        .route("/v1/dead-letters/groups", get(dead_letter_groups))
        .route("/v1/dead-letters/patterns", get(dead_letter_patterns))
        .route("/v1/dead-letters/export", post(export))
        .route("/v1/operations", get(operations))
        .route("/v1/operations/{id}", get(operation))
        .route("/v1/operations/{id}/cancel", post(operation_cancel))
        .route("/v1/events", get(events))
        .route("/v1/events/stream", get(stream))
        .route("/v1/session", get(session))
        .route("/v1/stats", get(stats))
        .route("/v1/endpoints", get(endpoints))
        .route("/v1/endpoints/{name}", get(endpoint))
        .route("/v1/endpoints/{name}/pause", post(endpoint_pause))
        .route("/v1/endpoints/{name}/resume", post(endpoint_resume))
        .route(
            "/v1/endpoints/{name}/reset-breaker",
            post(endpoint_reset_breaker),
        )
        .route(
            "/v1/endpoints/{name}/replay-outage",
            post(endpoint_replay_outage),
        )
        .route("/v1/queues", get(queues))
        .route("/v1/queues/{name}/groups", get(queue_groups))
        .route("/v1/queues/{name}/ordering-keys", get(queue_ordering_keys))
        .route("/v1/queues/{name}/pause", post(queue_pause))
        .route("/v1/queues/{name}/resume", post(queue_resume))
        .route("/v1/schedules", post(schedule_create).get(schedule_list))
        .route(
            "/v1/schedules/{id}",
            get(schedule_show).put(schedule_put).delete(schedule_delete),
        )
        .route("/v1/schedules/{id}/pause", post(schedule_pause))
        .route("/v1/schedules/{id}/resume", post(schedule_resume))
        .route("/v1/backup", post(backup))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/alerts", get(alerts))
        .route("/v1/series", get(series))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), read_body))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    Router::new()
        .merge(v1)
        .route("/", get(crate::ui::to_ui))
        .route("/ui", get(crate::ui::to_ui))
        .route("/ui/", get(crate::ui::page))
        .route("/ui/{file}", get(crate::ui::asset))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            auth::refuse_foreign,
        ))
        .layer(middleware::map_response(json_errors))
        .layer(middleware::map_response(json_newline))
        .layer(DefaultBodyLimit::max(state.config.max_request_bytes))
        .with_state(state)
}

/// A JSON answer ends with a newline, as a text file's last line does: `curl` output then leaves
/// the shell's prompt on a line of its own, and answers can be concatenated as NDJSON. It says
/// `X-Content-Type-Options: nosniff` (a browser never reads it as anything but JSON, whatever a
/// job's body or reason holds) and `Cache-Control: no-store` (it holds requests, credentials
/// included, and is stale at once: no cache keeps it).
async fn json_newline(resp: Response) -> Response {
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !is_json {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    parts.headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    parts.headers.insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) if bytes.last() != Some(&b'\n') => {
            let mut with = Vec::with_capacity(bytes.len() + 1);
            with.extend_from_slice(&bytes);
            with.push(b'\n');
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(with))
        }
        Ok(bytes) => Response::from_parts(parts, Body::from(bytes)),
        Err(e) => ApiError::internal("finishing a JSON answer", e).into_response(),
    }
}

/// Every error answer has the documented shape, `{"error": {"code", "message"}}`, including those
/// the router and the extractors make themselves (a method a route does not take, a path that is
/// not UTF-8), which come with an empty or plain-text body.
async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let code = match status {
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::NOT_FOUND => ErrorCode::NoRoute,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::TooLarge,
        StatusCode::URI_TOO_LONG => ErrorCode::UriTooLong,
        StatusCode::REQUEST_TIMEOUT => ErrorCode::RequestTimeout,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        s if s.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::BadRequest,
    };
    let allow = resp.headers().get(header::ALLOW).cloned();
    // The text the extractor wrote says what was wrong; it is short (a rejection's message).
    let text = axum::body::to_bytes(resp.into_body(), 4096)
        .await
        .ok()
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .filter(|t| !t.is_empty());
    let message = match (status, text) {
        // The router sets `Allow` after this layer has run, so the message points at it.
        (StatusCode::METHOD_NOT_ALLOWED, _) => {
            "this route does not take that method: the Allow header lists those it takes (see /v1/openapi.json)".to_owned()
        }
        (s, _) if s.is_server_error() => "internal error".to_owned(),
        (_, Some(text)) => text,
        (s, None) => s
            .canonical_reason()
            .unwrap_or("the request was refused")
            .to_lowercase(),
    };
    let mut out = ApiError::new(status, code, message).into_response();
    if let Some(allow) = allow {
        out.headers_mut().insert(header::ALLOW, allow);
    }
    out
}

type ApiResult = Result<Response, ApiError>;

/// Reads a request's body before its handler runs, within `body_timeout`: a client that
/// declares a body and sends it slowly, or never, gets 408 (and the connection is closed) instead
/// of holding a task and a connection for as long as it likes.
async fn read_body(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let h = req.headers();
    if !(h.contains_key(header::CONTENT_LENGTH) || h.contains_key(header::TRANSFER_ENCODING)) {
        return next.run(req).await;
    }
    // A quarter of the connections at most may be sending a body: slow senders cannot take
    // every connection (issue 55); the others are refused at once.
    let most = (state.config.max_connections / 4).max(1);
    let Some(reading_gate) = state.gates.body(most) else {
        crate::drain_briefly(req.into_body()).await;
        let mut resp = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Busy,
            format!("{most} requests are sending their bodies to this server now (a quarter of server.max_connections): try again after Retry-After"),
        )
        .into_response();
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return resp;
    };
    let (parts, body) = req.into_parts();
    let reading = Limited::new(body, state.config.max_request_bytes).collect();
    let read = tokio::time::timeout(state.config.body_timeout, reading).await;
    // The body is in (or given up on): its place goes back before the handler runs.
    drop(reading_gate);
    match read {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes.to_bytes())))
                .await
        }
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            input::body_too_large().into_response()
        }
        Ok(Err(e)) => ApiError::bad_request(
            ErrorCode::InvalidBody,
            format!("the request body could not be read: {e}"),
        )
        .into_response(),
        Err(_) => {
            let mut resp = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::RequestTimeout,
                format!(
                    "the request body did not arrive within {} s: send it at once",
                    state.config.body_timeout.as_secs_f64()
                ),
            )
            .into_response();
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            resp
        }
    }
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NoRoute,
        "no such route: see /v1/openapi.json",
    )
}

fn job_response(
    status: StatusCode,
    job: &redial_store::Job,
    deduplicated: Option<bool>,
) -> Response {
    let mut v = view::job(job);
    v.deduplicated = deduplicated;
    (status, Json(v)).into_response()
}

fn conflict(id: &JobId) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        ErrorCode::Conflict,
        format!("job {id} already exists with a different request: use another id, or send the same request to get the existing job"),
    )
}

/// The caller's W3C trace context, when the enqueue request carries a valid one: the job joins
/// that trace (its request keeps it as a `traceparent` header unless it has its own).
fn caller_trace(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("traceparent")?.to_str().ok()?.trim();
    redial_engine::otel::parse_traceparent(v).map(|_| v.to_owned())
}

fn join_trace(job: &mut redial_engine::Checked, traceparent: Option<&str>) {
    if let Some(tp) = traceparent {
        let request = job.request_mut();
        let has_own = request
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("traceparent"));
        if !has_own {
            request
                .headers
                .push(("traceparent".to_owned(), tp.to_owned()));
        }
    }
}
