//! The API's one error type: a status, a machine-readable code and a message that says what to fix.
//! Server faults are logged once here and answered without internals.
//!
//! Every code is a [`redial_api::ErrorCode`]: the OpenAPI document's `Error.error.code` enum and
//! the clients' error code types are checked against `ErrorCode::ALL` by `tests/error_codes.rs`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
pub use redial_api::ErrorCode;
use redial_store::StoreError;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn unprocessable(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    pub fn too_large(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
    }

    pub fn internal(context: &str, e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "{context}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "internal error; the server log has the details",
        )
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(id) => ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound,
                format!("job {id} not found"),
            ),
            StoreError::InvalidJob(why) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::InvalidJob, why)
            }
            e @ (StoreError::InvalidState { .. } | StoreError::Changed(_)) => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::InvalidState, e.to_string())
            }
            e @ (StoreError::LeaseLost(_) | StoreError::Backend(_)) => {
                ApiError::internal("storage failure", e)
            }
            StoreError::Unsupported(why) => {
                ApiError::new(StatusCode::NOT_IMPLEMENTED, ErrorCode::NotSupported, why)
            }
            StoreError::Unavailable(why) => {
                tracing::error!(error = %why, "storage unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::StorageUnavailable,
                    "the server cannot store or read jobs now (the server log says why): nothing was done; try again later",
                )
            }
        }
    }
}

/// An error answer's body, as the document's `Error` types it.
pub fn error_body(code: ErrorCode, message: String) -> redial_api::Error {
    redial_api::Error {
        error: redial_api::ErrorError {
            code: code.as_str().to_owned(),
            message,
        },
    }
}

/// Seconds a client is told to wait before trying again after a 503.
const RETRY_AFTER_SECS: &str = "5";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = error_body(self.code, self.message);
        let mut resp = (self.status, Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static(RETRY_AFTER_SECS),
            );
        }
        resp
    }
}

/// An intake's refusal as the API answers it: 422, or 413 for a body over the limit.
impl From<redial_intake::IntakeError> for ApiError {
    fn from(e: redial_intake::IntakeError) -> Self {
        let status = match e.kind {
            redial_intake::IntakeErrorKind::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
            redial_intake::IntakeErrorKind::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        };
        ApiError::new(status, e.code, e.message)
    }
}
