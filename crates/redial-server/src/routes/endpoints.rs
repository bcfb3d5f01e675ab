//! Endpoints and queues: views, pauses and resumes, a breaker's reset, a queue's groups and
//! ordering keys.

use super::ApiResult;
use crate::{input, view, ApiError, AppState, ErrorCode};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use redial_store::ControlKind;
use std::collections::HashMap;

/// An endpoint's view as the API shows it: its protection state, its name, and its backlog
/// (`held`: due but waiting on its limits; `waiting_later`: scheduled ahead).
fn endpoint_view(
    state: &AppState,
    name: &str,
    v: &redial_policy::endpoint::EndpointView,
    backlog: Option<&redial_store::EndpointBacklog>,
) -> redial_api::Endpoint {
    let wide = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    redial_api::Endpoint {
        name: name.to_owned(),
        held: wide(backlog.map_or(0, |b| b.due)),
        waiting_later: wide(backlog.map_or(0, |b| b.later)),
        credentials: state
            .config
            .credentials
            .of(name)
            .map(|c| credentials_view(c, &*state.config.credentials.clock)),
        forecast: None,
        holding: v.holding.clone(),
        paused_by_hand: v.paused_by_hand.as_ref().map(view::hand_pause),
        paused_until: v.paused_until,
        pause_reason: v.pause_reason.clone(),
        rate: v.rate.clone(),
        burst: i64::from(v.burst),
        nodes: i64::from(v.nodes),
        learned_limit: v.learned_limit.map(wide),
        learned_remaining: v.learned_remaining.map(wide),
        learned_reset_at: v.learned_reset_at,
        learned_pace: v.learned_pace,
        concurrency_limit: v.concurrency_limit.map(i64::from),
        in_flight: i64::from(v.in_flight),
        slow_start_since: v.slow_start_since,
        budget_allowed: wide(v.budget_allowed),
        budget_used: i64::from(v.budget_used),
        budget_remaining: wide(v.budget_remaining),
        breaker: redial_api::BreakerState::parse(v.breaker),
        breaker_until: v.breaker_until,
        breaker_window_failures: i64::from(v.breaker_window_failures),
        breaker_window_retry_failures: i64::from(v.breaker_window_retry_failures),
        breaker_window_calls: i64::from(v.breaker_window_calls),
        breaker_history: v
            .breaker_history
            .iter()
            .map(|e| redial_api::EndpointBreakerHistory {
                at: e.at,
                to: e.to.clone(),
                reason: e.reason.clone(),
            })
            .collect(),
        quarantined_since: v.quarantined_since,
        failing_since: v.failing_since,
        outage_began: v.outage_began,
    }
}

/// Which credentials an endpoint's requests carry, where their secret comes from, and for
/// OAuth2 the token's state (held, valid until, the last failure to get one): never a secret.
fn credentials_view(
    c: &redial_engine::credentials::EndpointCredentials,
    clock: &dyn redial_engine::Clock,
) -> redial_api::EndpointCredentials {
    use redial_engine::credentials::Auth;
    let source = match &c.auth {
        Auth::Bearer { token } => token.describe(),
        Auth::Basic { password, .. } => password.describe(),
        Auth::Header { value, .. } => value.describe(),
        Auth::OAuth2(o) => o.client_secret.describe(),
        Auth::Mtls(m) => match &m.certificate {
            Some(c) => format!("file {}", c.key_file.display()),
            None => "none".into(),
        },
    };
    let token = match &c.auth {
        Auth::OAuth2(o) => {
            let t = o.status();
            let now = clock.now();
            Some(redial_api::EndpointToken {
                token_url: redial_engine::redact::url(&o.token_url),
                held: t.held,
                valid_until: t.valid_until,
                fetched: i64::try_from(t.fetched).unwrap_or(i64::MAX),
                last_failure: t
                    .last_failure
                    .map(|(at, reason)| redial_api::TokenFailure { at, reason }),
                held_until: t.held_until.filter(|u| now < *u),
                failures: i64::from(t.failures),
            })
        }
        _ => None,
    };
    redial_api::EndpointCredentials {
        kind: redial_api::CredentialsKind::parse(c.auth.kind()),
        secret_from: source,
        allow_job_credentials: c.allow_job_credentials,
        client_certificate: c
            .client_certificate()
            .map(|m| m.cert_file.display().to_string()),
        token,
    }
}

/// A page of endpoints by name (those seen, configured, or with jobs waiting), each with its
/// protection state and backlog: `limit` (1 to 500, 100 by default) after `cursor` (the
/// `next_cursor` of the page before).
pub(super) async fn endpoints(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let (mut after, mut limit) = (None::<String>, 100usize);
    for (k, v) in q {
        match k.as_str() {
            "cursor" => after = Some(v),
            "limit" => limit = super::jobs::page_limit(&v)? as usize,
            other => {
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!("unknown query parameter {other:?}: use cursor, limit"),
                ))
            }
        }
    }
    let now = state.engine.clock().now();
    let backlog = state.engine.store().endpoint_backlog(now).await?;
    let names: Vec<String> = backlog.iter().map(|b| b.endpoint.clone()).collect();
    let views = state.engine.endpoint_views(&names);
    let mut page = Vec::with_capacity(limit.min(views.len()));
    let mut next = None;
    let start = match &after {
        Some(a) => std::ops::Bound::Excluded(a.clone()),
        None => std::ops::Bound::Unbounded,
    };
    for (name, view) in views.range((start, std::ops::Bound::Unbounded)) {
        if page.len() == limit {
            next = page.last().map(|v: &redial_api::Endpoint| v.name.clone());
            break;
        }
        let b = backlog.iter().find(|b| &b.endpoint == name);
        page.push(endpoint_view(&state, name, view, b));
    }
    Ok(Json(redial_api::EndpointList {
        endpoints: page,
        next_cursor: next,
    })
    .into_response())
}

fn unknown_endpoint(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        format!("endpoint {name:?} is not known: it has no jobs, no configuration and was not seen lately (names are URL origins such as https://api.example.com, percent-encoded in the path)"),
    )
}

pub(super) async fn endpoint(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    if !state.engine.endpoint_known(&name).await? {
        return Err(unknown_endpoint(&name));
    }
    endpoint_after(&state, &name).await
}

/// An endpoint name people may act on: exactly the names a job may carry.
pub(super) fn check_endpoint_name(name: &str) -> Result<(), ApiError> {
    if !redial_store::plain_name(name, crate::input::MAX_ENDPOINT_CHARS) {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidEndpoint,
            crate::input::ENDPOINT_RULE,
        ));
    }
    Ok(())
}

/// Before a control: the name must be one people may act on, and known, unless the request
/// asks to create its record (`?create=true`, to pause an endpoint before its first job).
async fn check_control(
    state: &AppState,
    name: &str,
    q: HashMap<String, String>,
) -> Result<(), ApiError> {
    let mut create = false;
    for (k, v) in q {
        match (k.as_str(), v.as_str()) {
            ("create", "true") => create = true,
            ("create", "false") => create = false,
            ("create", other) => {
                return Err(ApiError::bad_request(
                    ErrorCode::InvalidParameter,
                    format!("create must be true or false, not {other:?}"),
                ))
            }
            (other, _) => {
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!("unknown query parameter {other:?}: use create"),
                ))
            }
        }
    }
    check_endpoint_name(name)?;
    if create || state.engine.endpoint_known(name).await? {
        return Ok(());
    }
    let mut e = unknown_endpoint(name);
    e.message
        .push_str("; to set a control before its first job, add ?create=true");
    Err(e)
}

/// The endpoint's view after a change made by hand (a control makes its endpoint known), or as
/// `GET /v1/endpoints/{name}` shows it, with its forecast: one endpoint read, whatever the
/// number of endpoints.
pub(super) async fn endpoint_after(state: &AppState, name: &str) -> ApiResult {
    let now = state.engine.clock().now();
    let backlog = state.engine.store().endpoint_backlog_of(name, now).await?;
    let view = state.engine.endpoint_view(name);
    let forecast = state.engine.endpoint_forecast(name).await?;
    let mut v = endpoint_view(state, name, &view, Some(&backlog));
    v.forecast = Some(view::forecast(&forecast));
    Ok(Json(v).into_response())
}

pub(super) async fn endpoint_pause(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    check_control(&state, &name, q).await?;
    let (reason, until) =
        input::pause_of(input::parse_optional(body)?, state.engine.clock().now())?;
    state
        .engine
        .pause(ControlKind::Endpoint, &name, until, reason)
        .await?;
    endpoint_after(&state, &name).await
}

pub(super) async fn endpoint_resume(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    check_control(&state, &name, q).await?;
    state.engine.resume(ControlKind::Endpoint, &name).await?;
    endpoint_after(&state, &name).await
}

pub(super) async fn endpoint_reset_breaker(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    check_control(&state, &name, q).await?;
    state.engine.reset_breaker(&name).await?;
    endpoint_after(&state, &name).await
}

/// Replays, in one action, the endpoint's dead letters that died since its last outage began
/// (its breaker's first opening, back to the first failure): what the outage cost, once it is
/// over. A bulk replay (an operation, a chunk at a time), answered when done.
pub(super) async fn endpoint_replay_outage(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult {
    check_endpoint_name(&name)?;
    if !state.engine.endpoint_known(&name).await? {
        return Err(unknown_endpoint(&name));
    }
    let Some(since) = state.engine.endpoint_view(&name).outage_began else {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidState,
            format!("endpoint {name:?} has no outage on record (its breaker has not opened since it was first seen): replay its dead letters with POST /v1/dead-letters/replay and a filter"),
        ));
    };
    let filter = redial_store::JobFilter {
        endpoint: Some(name),
        finished_since: Some(since),
        ..redial_store::JobFilter::default()
    };
    match super::bulk::bulk_answer(&state, redial_engine::BulkKind::Replay, filter, true).await? {
        super::bulk::BulkAnswer::Done(done) => Ok(Json(redial_api::OutageReplay {
            affected: done.affected,
            operation: done.operation,
            state: done.state,
            since,
        })
        .into_response()),
        // Waited for, so done.
        super::bulk::BulkAnswer::Started(op) => {
            Ok((StatusCode::ACCEPTED, Json(op)).into_response())
        }
    }
}

pub(super) fn queue_view(state: &AppState, name: &str) -> Response {
    let found = state
        .engine
        .queue_views()
        .into_iter()
        .find(|q| q.name == name);
    Json(found.as_ref().map(view::queue)).into_response()
}

pub(super) async fn queues(State(state): State<AppState>) -> Response {
    Json(redial_api::QueueList {
        queues: state.engine.queue_views().iter().map(view::queue).collect(),
    })
    .into_response()
}

/// The queue's groups with work, most waiting first: `limit` (1 to 1000, 100 by default).
pub(super) async fn queue_groups(
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
                        ApiError::bad_request(
                            ErrorCode::InvalidLimit,
                            "limit must be from 1 to 1000",
                        )
                    })?
            }
            other => {
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!("unknown query parameter {other:?}: use limit"),
                ))
            }
        }
    }
    match state.engine.queue_groups(&name, limit).await? {
        Some(groups) => Ok(Json(view::queue_groups(&groups)).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no queue {name:?} is configured"),
        )),
    }
}

/// The lines of a queue's ordering keys, a page at a time (in the order of the lines' numbers,
/// `OrderingKey::line`): each key's head (the job that goes first), how many jobs wait behind
/// it, and why the next one waits. `blocked=true`: only the keys whose head is dead (they wait
/// for it to be replayed or dismissed). `limit` (1 to 500, 100 by default) after `cursor` (the
/// `next_cursor` of the page before: its last key).
pub(super) async fn queue_ordering_keys(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let (mut after, mut limit, mut blocked) = (None::<String>, 100u32, false);
    for (k, v) in q {
        match k.as_str() {
            "cursor" => after = Some(v),
            "limit" => limit = super::jobs::page_limit(&v)?,
            "blocked" => {
                blocked = match v.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(ApiError::bad_request(
                            ErrorCode::InvalidParameter,
                            "blocked must be true or false",
                        ))
                    }
                }
            }
            other => {
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!("unknown query parameter {other:?}: use blocked, cursor, limit"),
                ))
            }
        }
    }
    let Some(on_dead) = state
        .engine
        .config()
        .queues
        .get(&name)
        .map(|q| q.ordering_on_dead)
    else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no queue {name:?} is configured"),
        ));
    };
    let mut lines = state
        .engine
        .store()
        .ordering_keys(redial_store::OrderingKeysParams {
            queue: name.clone(),
            blocked,
            after,
            limit: limit + 1,
        })
        .await?;
    let next = (lines.len() > limit as usize).then(|| {
        lines.truncate(limit as usize);
        lines.last().map(|l| l.key.clone())
    });
    let now = state.engine.clock().now();
    let keys = lines
        .iter()
        .map(|l| redial_api::OrderingKeyLine {
            key: l.key.clone(),
            blocked: l.blocked(),
            behind: i64::try_from(l.behind).unwrap_or(i64::MAX),
            why: l.why(now),
            head: view::job(&l.head),
        })
        .collect();
    Ok(Json(redial_api::OrderingKeys {
        queue: name,
        ordering_on_dead: redial_api::OrderingOnDead::parse(on_dead.as_str()),
        keys,
        next_cursor: next.flatten(),
    })
    .into_response())
}

pub(super) async fn queue_pause(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    input::check_queue(&state.intake(), &name)?;
    let (reason, until) =
        input::pause_of(input::parse_optional(body)?, state.engine.clock().now())?;
    state
        .engine
        .pause(ControlKind::Queue, &name, until, reason)
        .await?;
    Ok(queue_view(&state, &name))
}

pub(super) async fn queue_resume(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult {
    input::check_queue(&state.intake(), &name)?;
    state.engine.resume(ControlKind::Queue, &name).await?;
    Ok(queue_view(&state, &name))
}
