//! Endpoints and queues: views, pauses and resumes, a breaker's reset, a queue's groups.

use super::*;

/// Every endpoint with its protection state and its backlog: `held` jobs are due but waiting on
/// the endpoint's limits, `later` ones are scheduled ahead.
pub(super) async fn endpoint_list(state: &AppState) -> Result<Vec<serde_json::Value>, ApiError> {
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

pub(super) async fn endpoints(State(state): State<AppState>) -> ApiResult {
    Ok(Json(json!({ "endpoints": endpoint_list(&state).await? })).into_response())
}

pub(super) async fn endpoint(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult {
    endpoint_list(&state)
        .await?
        .into_iter()
        .find(|v| v["name"] == name)
        .map(|v| Json(v).into_response())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                format!("endpoint {name:?} is not known: it has no jobs and no configuration (names are URL origins such as https://api.example.com, percent-encoded in the path)"),
            )
        })
}

/// An endpoint name people may act on: any name a job may carry.
pub(super) fn check_endpoint_name(name: &str) -> Result<(), ApiError> {
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidEndpoint,
            "endpoint must be 1 to 200 characters (names are URL origins such as https://api.example.com, percent-encoded in the path)",
        ));
    }
    Ok(())
}

/// The endpoint's view after a change made by hand (a control makes its endpoint known).
pub(super) async fn endpoint_after(state: &AppState, name: &str) -> ApiResult {
    endpoint(State(state.clone()), Path(name.to_owned())).await
}

pub(super) async fn endpoint_pause(
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

pub(super) async fn endpoint_resume(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult {
    check_endpoint_name(&name)?;
    state.engine.resume(ControlKind::Endpoint, &name).await?;
    endpoint_after(&state, &name).await
}

pub(super) async fn endpoint_reset_breaker(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult {
    check_endpoint_name(&name)?;
    state.engine.reset_breaker(&name).await?;
    endpoint_after(&state, &name).await
}

pub(super) fn queue_view(state: &AppState, name: &str) -> Response {
    let view = state
        .engine
        .queue_views()
        .into_iter()
        .find(|q| q.name == name);
    Json(json!(view)).into_response()
}

pub(super) async fn queues(State(state): State<AppState>) -> Response {
    Json(json!({ "queues": state.engine.queue_views() })).into_response()
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
        Some(groups) => Ok(Json(groups).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no queue {name:?} is configured"),
        )),
    }
}

pub(super) async fn queue_pause(
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

pub(super) async fn queue_resume(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult {
    input::check_queue(&state, &name)?;
    state.engine.resume(ControlKind::Queue, &name).await?;
    Ok(queue_view(&state, &name))
}
