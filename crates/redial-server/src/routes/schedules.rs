//! Recurring schedules: create, replace, list, show, delete, pause, resume.

use super::ApiResult;
use crate::{input, ApiError, AppState, ErrorCode};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::collections::HashMap;

impl From<redial_engine::ScheduleError> for ApiError {
    fn from(e: redial_engine::ScheduleError) -> Self {
        use redial_engine::ScheduleError as E;
        match e {
            E::NotFound(_) => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, e.to_string())
            }
            E::Exists(_) => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::ScheduleExists,
                e.to_string(),
            ),
            E::Invalid(m) => ApiError::unprocessable(ErrorCode::InvalidSchedule, m),
            E::Store(e) => e.into(),
        }
    }
}

pub(super) fn schedule_response(status: StatusCode, s: &redial_engine::ScheduleView) -> Response {
    (status, Json(crate::view::schedule(s))).into_response()
}

pub(super) async fn schedule_create(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let input = input::parse_schedule(body)?;
    let now = state.engine.clock().now();
    let (id, definition) = input::schedule_definition(&state.intake(), input, None, "api", now)?;
    let saved = state.engine.schedule_save(&id, definition, false).await?;
    Ok(schedule_response(StatusCode::CREATED, &saved))
}

pub(super) async fn schedule_put(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let input = input::parse_schedule(body)?;
    let now = state.engine.clock().now();
    let (id, definition) =
        input::schedule_definition(&state.intake(), input, Some(&id), "api", now)?;
    let existed = state.engine.schedule(&id).await.is_ok();
    let saved = state.engine.schedule_save(&id, definition, true).await?;
    let status = if existed {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok(schedule_response(status, &saved))
}

/// A page of schedules by id: `limit` (1 to 500, 100 by default) after `cursor` (the
/// `next_cursor` of the page before).
pub(super) async fn schedule_list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let (mut after, mut limit) = (None, 100);
    for (k, v) in q {
        match k.as_str() {
            "cursor" => after = Some(v),
            "limit" => limit = super::jobs::page_limit(&v)?,
            other => {
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!("unknown query parameter {other:?}: use cursor, limit"),
                ))
            }
        }
    }
    let (schedules, next) = state.engine.schedules_page(after, limit).await?;
    Ok(Json(redial_api::ScheduleList {
        schedules: schedules.iter().map(crate::view::schedule).collect(),
        next_cursor: next,
    })
    .into_response())
}

pub(super) async fn schedule_show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult {
    Ok(schedule_response(
        StatusCode::OK,
        &state.engine.schedule(&id).await?,
    ))
}

pub(super) async fn schedule_delete(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult {
    state.engine.schedule_delete(&id).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(super) async fn schedule_pause(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult {
    let s = state.engine.schedule_set_paused(&id, true).await?;
    Ok(schedule_response(StatusCode::OK, &s))
}

pub(super) async fn schedule_resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult {
    let s = state.engine.schedule_set_paused(&id, false).await?;
    Ok(schedule_response(StatusCode::OK, &s))
}
