//! The dashboard at `/ui/`: one page and its script and style, embedded in the binary (no build
//! step, no external requests). The page calls the same API as every client, with the token the
//! person types (kept in the tab's session storage, never in a URL); the server gives the page
//! nothing the API does not.

use crate::ErrorCode;
use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

const INDEX: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

/// `/` and `/ui` lead to the dashboard.
pub async fn to_ui() -> Redirect {
    Redirect::to("/ui/")
}

pub async fn page() -> Response {
    with_headers(INDEX, "text/html; charset=utf-8")
}

pub async fn asset(Path(file): Path<String>) -> Response {
    match file.as_str() {
        "app.js" => with_headers(SCRIPT, "text/javascript; charset=utf-8"),
        "app.css" => with_headers(STYLE, "text/css; charset=utf-8"),
        _ => crate::ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NoRoute,
            "no such file in the dashboard",
        )
        .into_response(),
    }
}

/// The page loads only its own files, cannot be framed, and sends no referrer.
fn with_headers(body: &'static str, content_type: &'static str) -> Response {
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}
