//! The routes and their handlers.

use crate::input::{self, BatchInput, FilterInput, JobInput, PauseInput};
use crate::view;
use crate::{auth, ApiError, AppState, OPENAPI};
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Json, Router};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use redial_store::{ControlKind, InsertOutcome, JobFilter, JobId, JobListParams};
use serde_json::json;
use std::collections::HashMap;

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
        .route("/v1/queues", get(queues))
        .route("/v1/queues/{name}/groups", get(queue_groups))
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
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_FOUND => "no_route",
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::URI_TOO_LONG => "uri_too_long",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
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
    let (parts, body) = req.into_parts();
    let reading = Limited::new(body, state.config.max_request_bytes).collect();
    match tokio::time::timeout(state.config.body_timeout, reading).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes.to_bytes())))
                .await
        }
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
            input::body_too_large().into_response()
        }
        Ok(Err(e)) => ApiError::bad_request(
            "invalid_body",
            format!("the request body could not be read: {e}"),
        )
        .into_response(),
        Err(_) => {
            let mut resp = ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
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
        "no_route",
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
        "conflict",
        format!("job {id} already exists with a different request: use another id, or send the same request to get the existing job"),
    )
}

/// The caller's W3C trace context, when the enqueue request carries a valid one: the job joins
/// that trace (its request keeps it as a `traceparent` header unless it has its own).
fn caller_trace(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("traceparent")?.to_str().ok()?.trim();
    redial_engine::otel::parse_traceparent(v).map(|_| v.to_owned())
}

fn join_trace(job: &mut redial_store::NewJob, traceparent: Option<&str>) {
    if let Some(tp) = traceparent {
        let has_own = job
            .request
            .headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("traceparent"));
        if !has_own {
            job.request
                .headers
                .push(("traceparent".to_owned(), tp.to_owned()));
        }
    }
}

async fn enqueue(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let input: JobInput = input::parse_json(body)?;
    let now = state.engine.clock().now();
    let mut job = input::new_job(&state, input, now)?;
    join_trace(&mut job, caller_trace(&headers).as_deref());
    match state.engine.enqueue(job).await? {
        InsertOutcome::Inserted(j) => Ok(job_response(StatusCode::CREATED, &j, Some(false))),
        InsertOutcome::Duplicate(j) => Ok(job_response(StatusCode::OK, &j, Some(true))),
        InsertOutcome::Conflict(j) => Err(conflict(&j.id)),
    }
}

async fn enqueue_batch(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let trace = caller_trace(&headers);
    let batch: BatchInput = input::parse_json(body)?;
    if batch.jobs.is_empty() {
        return Err(ApiError::unprocessable(
            "empty_batch",
            "jobs is empty: send at least one job",
        ));
    }
    if batch.jobs.len() > state.config.max_batch {
        return Err(ApiError::too_large(
            "batch_too_large",
            format!(
                "{} jobs is over the batch limit of {}: split the batch",
                batch.jobs.len(),
                state.config.max_batch
            ),
        ));
    }
    let now = state.engine.clock().now();
    let mut jobs = Vec::with_capacity(batch.jobs.len());
    for (i, value) in batch.jobs.into_iter().enumerate() {
        let parsed = serde_json::from_value::<JobInput>(value).map_err(input::json_error);
        let mut job = parsed
            .and_then(|j| input::new_job(&state, j, now))
            .map_err(|mut e| {
                e.message = format!("jobs[{i}]: {}", e.message);
                e
            })?;
        join_trace(&mut job, trace.as_deref());
        jobs.push(job);
    }
    let outcomes = state.engine.enqueue_batch(jobs).await?;
    if let Some((i, o)) = outcomes
        .iter()
        .enumerate()
        .find(|(_, o)| matches!(o, InsertOutcome::Conflict(_)))
    {
        let mut e = conflict(&o.job().id);
        e.message = format!("jobs[{i}]: {}; nothing in the batch was stored", e.message);
        return Err(e);
    }
    let inserted = outcomes
        .iter()
        .filter(|o| matches!(o, InsertOutcome::Inserted(_)))
        .count();
    let views: Vec<_> = outcomes
        .iter()
        .map(|o| {
            let mut v = view::job(o.job());
            v.deduplicated = Some(matches!(o, InsertOutcome::Duplicate(_)));
            v
        })
        .collect();
    let status = if inserted > 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(
            json!({ "inserted": inserted, "deduplicated": views.len() - inserted, "jobs": views }),
        ),
    )
        .into_response())
}

async fn show(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let id = JobId(id);
    let (job, attempts) = state.engine.store().job_get(&id).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("job {id} not found"),
        )
    })?;
    let mut v = view::job(&job);
    v.attempt_log = Some(&attempts);
    Ok(Json(v).into_response())
}

/// Dead letters grouped by queue, category and endpoint (each group is what a bulk action with
/// that filter acts on), largest first.
async fn dead_letter_groups(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let mut filter = JobFilter::default();
    for (k, v) in q {
        match k.as_str() {
            "queue" => {
                input::check_queue(&state, &v)?;
                filter.queue = Some(v);
            }
            "category" => {
                filter.category = Some(
                    redial_store::parse_dead_category(&v)
                        .map_err(|e| ApiError::bad_request("invalid_category", e))?,
                )
            }
            "endpoint" => filter.endpoint = Some(v),
            "since" | "until" => {
                let t = redial_policy::Timestamp::parse_rfc3339(&v).ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_time",
                        format!("{k} must be an RFC 3339 instant such as 2026-12-01T10:00:00Z"),
                    )
                })?;
                if k == "since" {
                    filter.since = Some(t);
                } else {
                    filter.until = Some(t);
                }
            }
            other => {
                return Err(ApiError::bad_request(
                    "unknown_parameter",
                    format!("unknown query parameter {other:?}: use queue, category, endpoint, since, until"),
                ))
            }
        }
    }
    input::check_range(filter.since, filter.until)?;
    let groups = state.engine.store().dead_letter_groups(filter).await?;
    let total: u64 = groups.iter().map(|g| g.count).sum();
    Ok(Json(json!({ "groups": groups, "total": total })).into_response())
}

/// What the caller may do: whether it may only look (the read-only token, or a browser when the
/// dashboard is read-only).
async fn session(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let read_only = auth::looks_only(&state, &headers);
    Json(json!({
        "read_only": read_only,
        "token_required": state.config.token.is_some(),
    }))
    .into_response()
}

async fn list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let mut filter = JobFilter::default();
    let mut after = None;
    let mut limit = 50u32;
    for (k, v) in q {
        match k.as_str() {
            "queue" => {
                input::check_queue(&state, &v)?;
                filter.queue = Some(v);
            }
            "state" => {
                filter.state = Some(v.parse().map_err(|e: String| ApiError::bad_request("invalid_state", e))?)
            }
            "category" => {
                filter.category = Some(
                    redial_store::parse_dead_category(&v).map_err(|e| ApiError::bad_request("invalid_category", e))?,
                )
            }
            "endpoint" => filter.endpoint = Some(v),
            "cursor" => {
                after = Some(v.parse::<i64>().map_err(|_| {
                    ApiError::bad_request("invalid_cursor", "cursor must be a next_cursor value from a previous page")
                })?)
            }
            "limit" => {
                limit = v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=500).contains(n))
                    .ok_or_else(|| ApiError::bad_request("invalid_limit", "limit must be a number from 1 to 500"))?
            }
            other => {
                return Err(ApiError::bad_request(
                    "unknown_parameter",
                    format!("unknown query parameter {other:?}: use queue, state, category, endpoint, cursor, limit"),
                ))
            }
        }
    }
    let page = state
        .engine
        .store()
        .job_list(JobListParams {
            filter,
            after,
            limit,
        })
        .await?;
    let jobs: Vec<_> = page.jobs.iter().map(view::job).collect();
    Ok(
        Json(json!({ "jobs": jobs, "next_cursor": page.next.map(|n| n.to_string()) }))
            .into_response(),
    )
}

async fn replay(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let job = state.engine.replay(&JobId(id)).await?;
    Ok(job_response(StatusCode::OK, &job, None))
}

async fn dismiss(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let id = JobId(id);
    state.engine.store().job_dismiss(&id).await?;
    Ok(Json(json!({ "id": id, "dismissed": true })).into_response())
}

async fn cancel(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let job = state
        .engine
        .store()
        .job_cancel(&JobId(id), state.engine.clock().now())
        .await?;
    Ok(job_response(StatusCode::OK, &job, None))
}

fn bulk_filter(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<JobFilter, ApiError> {
    let input: FilterInput = match body {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => FilterInput::default(),
        other => input::parse_json(other)?,
    };
    // One empty request (a stray click, a page the user opened) must not reach every dead
    // letter: that takes saying so.
    if input.is_empty() && input.all != Some(true) {
        return Err(ApiError::unprocessable(
            "filter_required",
            "a bulk action with no filter would act on every dead letter: send {\"all\": true} to mean that, or filter by queue, category, endpoint, since or until",
        ));
    }
    input.into_filter(state)
}

async fn bulk_replay(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let filter = bulk_filter(&state, body)?;
    let n = state.engine.replay_dead_letters(filter).await?;
    Ok(Json(json!({ "affected": n })).into_response())
}

async fn bulk_dismiss(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let filter = bulk_filter(&state, body)?;
    let n = state.engine.store().dead_letter_dismiss(filter).await?;
    Ok(Json(json!({ "affected": n })).into_response())
}

async fn stats(State(state): State<AppState>) -> ApiResult {
    let s = state.engine.store().stats().await?;
    Ok(Json(json!({ "queues": s.by_queue, "endpoints": s.by_endpoint })).into_response())
}

/// Every endpoint with its protection state and its backlog: `held` jobs are due but waiting on
/// the endpoint's limits, `later` ones are scheduled ahead.
async fn endpoint_list(state: &AppState) -> Result<Vec<serde_json::Value>, ApiError> {
    let now = state.engine.clock().now();
    let backlog = state.engine.store().endpoint_backlog(now).await?;
    let names: Vec<String> = backlog.iter().map(|b| b.endpoint.clone()).collect();
    let views = state.engine.endpoint_views(&names);
    let mut out = Vec::with_capacity(views.len());
    for (name, view) in views {
        let b = backlog.iter().find(|b| b.endpoint == name);
        let mut v = serde_json::to_value(&view)
            .map_err(|e| ApiError::internal("encoding an endpoint view", e))?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("name".into(), json!(name));
            obj.insert("held".into(), json!(b.map_or(0, |b| b.due)));
            obj.insert("waiting_later".into(), json!(b.map_or(0, |b| b.later)));
        }
        out.push(v);
    }
    Ok(out)
}

async fn endpoints(State(state): State<AppState>) -> ApiResult {
    Ok(Json(json!({ "endpoints": endpoint_list(&state).await? })).into_response())
}

async fn endpoint(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    endpoint_list(&state)
        .await?
        .into_iter()
        .find(|v| v["name"] == name)
        .map(|v| Json(v).into_response())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                format!("endpoint {name:?} is not known: it has no jobs and no configuration (names are URL origins such as https://api.example.com, percent-encoded in the path)"),
            )
        })
}

/// An endpoint name people may act on: any name a job may carry.
fn check_endpoint_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::unprocessable(
            "invalid_endpoint",
            "endpoint must be 1 to 200 characters (names are URL origins such as https://api.example.com, percent-encoded in the path)",
        ));
    }
    Ok(())
}

/// The endpoint's view after a change made by hand (a control makes its endpoint known).
async fn endpoint_after(state: &AppState, name: &str) -> ApiResult {
    endpoint(State(state.clone()), Path(name.to_owned())).await
}

async fn endpoint_pause(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    check_endpoint_name(&name)?;
    let (reason, until) = PauseInput::read(body)?.resolve(state.engine.clock().now())?;
    state
        .engine
        .pause(ControlKind::Endpoint, &name, until, reason)
        .await?;
    endpoint_after(&state, &name).await
}

async fn endpoint_resume(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    check_endpoint_name(&name)?;
    state.engine.resume(ControlKind::Endpoint, &name).await?;
    endpoint_after(&state, &name).await
}

async fn endpoint_reset_breaker(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult {
    check_endpoint_name(&name)?;
    state.engine.reset_breaker(&name).await?;
    endpoint_after(&state, &name).await
}

fn queue_view(state: &AppState, name: &str) -> Response {
    let view = state
        .engine
        .queue_views()
        .into_iter()
        .find(|q| q.name == name);
    Json(json!(view)).into_response()
}

async fn queues(State(state): State<AppState>) -> Response {
    Json(json!({ "queues": state.engine.queue_views() })).into_response()
}

/// The queue's groups with work, most waiting first: `limit` (1 to 1000, 100 by default).
async fn queue_groups(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let mut limit = 100;
    for (k, v) in q {
        match k.as_str() {
            "limit" => {
                limit = v
                    .parse::<u32>()
                    .ok()
                    .filter(|l| (1..=1000).contains(l))
                    .ok_or_else(|| {
                        ApiError::bad_request("invalid_limit", "limit must be from 1 to 1000")
                    })?
            }
            other => {
                return Err(ApiError::bad_request(
                    "unknown_parameter",
                    format!("unknown query parameter {other:?}: use limit"),
                ))
            }
        }
    }
    match state.engine.queue_groups(&name, limit).await? {
        Some(groups) => Ok(Json(groups).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no queue {name:?} is configured"),
        )),
    }
}

async fn queue_pause(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    input::check_queue(&state, &name)?;
    let (reason, until) = PauseInput::read(body)?.resolve(state.engine.clock().now())?;
    state
        .engine
        .pause(ControlKind::Queue, &name, until, reason)
        .await?;
    Ok(queue_view(&state, &name))
}

async fn queue_resume(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    input::check_queue(&state, &name)?;
    state.engine.resume(ControlKind::Queue, &name).await?;
    Ok(queue_view(&state, &name))
}

impl From<redial_engine::ScheduleError> for ApiError {
    fn from(e: redial_engine::ScheduleError) -> Self {
        use redial_engine::ScheduleError as E;
        match e {
            E::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string()),
            E::Exists(_) => ApiError::new(StatusCode::CONFLICT, "schedule_exists", e.to_string()),
            E::Invalid(m) => ApiError::unprocessable("invalid_schedule", m),
            E::Store(e) => e.into(),
        }
    }
}

fn schedule_response(status: StatusCode, s: &redial_engine::ScheduleView) -> Response {
    (status, Json(s)).into_response()
}

async fn schedule_create(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let input: input::ScheduleInput = input::parse_json(body)?;
    let now = state.engine.clock().now();
    let (id, definition) = input::schedule_definition(&state, input, None, "api", now)?;
    let saved = state.engine.schedule_save(&id, definition, false).await?;
    Ok(schedule_response(StatusCode::CREATED, &saved))
}

async fn schedule_put(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let input: input::ScheduleInput = input::parse_json(body)?;
    let now = state.engine.clock().now();
    let (id, definition) = input::schedule_definition(&state, input, Some(&id), "api", now)?;
    let existed = state.engine.schedule(&id).await.is_ok();
    let saved = state.engine.schedule_save(&id, definition, true).await?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(schedule_response(status, &saved))
}

async fn schedule_list(State(state): State<AppState>) -> ApiResult {
    let schedules = state.engine.schedules().await?;
    Ok(Json(json!({ "schedules": schedules })).into_response())
}

async fn schedule_show(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    Ok(schedule_response(
        StatusCode::OK,
        &state.engine.schedule(&id).await?,
    ))
}

async fn schedule_delete(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    state.engine.schedule_delete(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn schedule_pause(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let s = state.engine.schedule_set_paused(&id, true).await?;
    Ok(schedule_response(StatusCode::OK, &s))
}

async fn schedule_resume(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let s = state.engine.schedule_set_paused(&id, false).await?;
    Ok(schedule_response(StatusCode::OK, &s))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// This node's last hour, minute by minute, for charts.
async fn series(State(state): State<AppState>) -> Response {
    Json(json!({ "minutes": state.engine.series() })).into_response()
}

async fn alerts(State(state): State<AppState>) -> Response {
    Json(json!({ "alerts": state.engine.alerts() })).into_response()
}

/// The Prometheus exposition (text format 0.0.4).
async fn metrics(State(state): State<AppState>) -> ApiResult {
    let text = state.engine.render_metrics(Default::default()).await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

async fn healthz() -> Response {
    Json(json!({ "status": "ok" })).into_response()
}

/// Ready when the store can serve and write (a full disk, a read-only or damaged database file,
/// an integrity check still running or failed, a lost database: 503 with the reason).
/// A consistent copy of the embedded database, made while jobs go on and checked before the
/// first byte is sent: a SQLite file, which `redial serve --data-dir` starts on as it is. The
/// copy is written beside the database (the disk needs room for it) and removed once sent.
async fn backup(State(state): State<AppState>) -> Result<Response, ApiError> {
    let copy = state.engine.store().backup().await?;
    let file =
        std::fs::File::open(&copy.path).map_err(|e| ApiError::internal("opening the backup", e))?;
    tracing::info!(
        bytes = copy.bytes,
        jobs = copy.jobs,
        took_ms = copy.took.as_millis() as u64,
        "backup made; sending it"
    );
    let (bytes, jobs) = (copy.bytes, copy.jobs);
    // Removed now: the open file reads on, and nothing is left behind if the client goes away.
    drop(copy);
    let chunks = futures_util::stream::unfold(Some(file), |file| async move {
        let file = file?;
        let read = tokio::task::spawn_blocking(move || {
            use std::io::Read;
            let mut file = file;
            let mut buf = vec![0; 256 * 1024];
            let n = file.read(&mut buf);
            (
                file,
                n.map(|n| {
                    buf.truncate(n);
                    buf
                }),
            )
        })
        .await;
        match read {
            Ok((_, Ok(buf))) if buf.is_empty() => None,
            Ok((file, Ok(buf))) => Some((Ok(Bytes::from(buf)), Some(file))),
            Ok((_, Err(e))) => Some((Err(e), None)),
            Err(e) => Some((Err(std::io::Error::other(e)), None)),
        }
    });
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/vnd.sqlite3"),
            ),
            (header::CONTENT_LENGTH, HeaderValue::from(bytes)),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_static("attachment; filename=\"redial-backup.db\""),
            ),
            (
                header::HeaderName::from_static("x-redial-backup-jobs"),
                HeaderValue::from(jobs),
            ),
        ],
        Body::from_stream(chunks),
    )
        .into_response())
}

async fn readyz(State(state): State<AppState>) -> Response {
    match state.engine.store().ping().await {
        Ok(()) => Json(json!({ "status": "ready" })).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            let reason = match e {
                redial_store::StoreError::Unavailable(why) => why,
                _ => "the store does not answer (the server log says why)".to_owned(),
            };
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, HeaderValue::from_static("5"))],
                Json(json!({ "status": "unavailable", "reason": reason })),
            )
                .into_response()
        }
    }
}
