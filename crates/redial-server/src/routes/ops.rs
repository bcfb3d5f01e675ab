//! Operations: stats, the OpenAPI document, series, alerts, metrics, health, readiness, backups.

use super::ApiResult;
use crate::{view, ApiError, AppState, ErrorCode, OPENAPI};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

pub(super) async fn stats(State(state): State<AppState>) -> ApiResult {
    let s = state.engine.store().stats().await?;
    Ok(Json(view::stats(&s)).into_response())
}

pub(super) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// This node's last hour, minute by minute, for charts.
pub(super) async fn series(State(state): State<AppState>) -> Response {
    Json(redial_api::Series {
        minutes: state.engine.series().iter().map(view::minute).collect(),
    })
    .into_response()
}

pub(super) async fn alerts(State(state): State<AppState>) -> Response {
    Json(redial_api::AlertList {
        alerts: state.engine.alerts().iter().map(view::alert).collect(),
    })
    .into_response()
}

/// The Prometheus exposition (text format 0.0.4).
pub(super) async fn metrics(State(state): State<AppState>) -> ApiResult {
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

pub(super) async fn healthz() -> Response {
    Json(redial_api::Health {
        status: "ok".into(),
    })
    .into_response()
}

/// Ready when the store can serve and write (a full disk, a read-only or damaged database file,
/// an integrity check still running or failed, a lost database: 503 with the reason).
/// A consistent copy of the embedded database, made while jobs go on and checked before the
/// first byte is sent: a SQLite file, which `redial serve --data-dir` starts on as it is. The
/// copy is written beside the database (the disk needs room for it) and removed once sent.
pub(super) async fn backup(State(state): State<AppState>) -> Result<Response, ApiError> {
    // One at a time: each copy holds the database's size on disk until its download ends.
    let Some(slot) = state.gates.backup() else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::BackupInProgress,
            "a backup is being made or sent on this node: one at a time (each copy takes the database's size on disk until it is sent); try again after Retry-After",
        ));
    };
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
    // The slot goes with the body: freed when the download ends or the client goes away.
    let chunks = futures_util::stream::unfold(Some((file, slot)), |held| async move {
        let (file, slot) = held?;
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
            Ok((file, Ok(buf))) => Some((Ok(Bytes::from(buf)), Some((file, slot)))),
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

pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    match state.engine.store().ping().await {
        Ok(()) => Json(redial_api::Ready {
            status: "ready".into(),
        })
        .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            let reason = match e {
                redial_store::StoreError::Unavailable(why) => why,
                _ => "the store does not answer (the server log says why)".to_owned(),
            };
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, HeaderValue::from_static("5"))],
                Json(redial_api::NotReady {
                    status: "unavailable".into(),
                    reason,
                }),
            )
                .into_response()
        }
    }
}
