//! Bearer-token authentication for the `/v1` routes.

use crate::{ApiError, AppState, ErrorCode};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The bearer token a request carries, if any. The scheme is case-insensitive (RFC 9110 section
/// 11.1): `bearer`, `BEARER` and `Bearer`.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
}

/// Whether the request carries the read-only token (`server.read_only_token`): it may read
/// everything and change nothing.
pub fn is_read_only(state: &AppState, headers: &HeaderMap) -> bool {
    match (state.config.read_only_token.as_deref(), bearer(headers)) {
        (Some(ro), Some(given)) => constant_time_eq(given.as_bytes(), ro.as_bytes()),
        _ => false,
    }
}

/// Whether a browser sent the request: browsers add `Sec-Fetch-Mode` to every request (and
/// `Origin` to those that change something); programs send neither.
fn from_browser(headers: &HeaderMap) -> bool {
    headers.contains_key("sec-fetch-mode") || headers.contains_key(header::ORIGIN)
}

/// Whether the request may read and change nothing: it carries the read-only token, or the
/// dashboard is read-only (`ui.read_only`) and a browser sent it.
pub fn looks_only(state: &AppState, headers: &HeaderMap) -> bool {
    is_read_only(state, headers) || (state.config.ui_read_only && from_browser(headers))
}

pub async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let reads = matches!(*req.method(), Method::GET | Method::HEAD);
    if is_read_only(&state, req.headers()) {
        if reads {
            return next.run(req).await;
        }
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::ReadOnly,
            "this token may read but not change anything: use the server's full token",
        )
        .into_response();
    }
    if let Some(expected) = state.config.token.as_deref() {
        let refusal = match bearer(req.headers()) {
            Some(t) if constant_time_eq(t.as_bytes(), expected.as_bytes()) => None,
            Some(_) => Some("the bearer token is not valid"),
            None => Some("this server needs a token: send 'Authorization: Bearer <token>'"),
        };
        if let Some(message) = refusal {
            return ApiError::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
                .into_response();
        }
    }
    if state.config.ui_read_only && from_browser(req.headers()) && !reads {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::ReadOnly,
            "the dashboard is read-only on this server (ui.read_only): act from the CLI or the API",
        )
        .into_response();
    }
    next.run(req).await
}

/// Refuses what a web page in the user's browser could send to an API on loopback: a request
/// whose `Host` is not a loopback name (DNS rebinding), a cross-site request (`Sec-Fetch-Site`, or
/// an `Origin` other than the request's own), and a body declared as anything but JSON (a page
/// can send `text/plain` or a form without asking first; it cannot send `application/json`).
pub async fn refuse_foreign(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // A request without Host (HTTP/1.0, or a test calling the router) comes from no browser.
    if state.config.check_host
        && !host.is_empty()
        && !host_allowed(host, &state.config.allowed_hosts)
    {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::ForeignHost,
            format!("Host {host:?} is not this server's: it serves localhost, 127.0.0.1 and [::1] (and server.allowed_hosts)"),
        )
        .into_response();
    }
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    let origin = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok());
    // A site named in server.allowed_origins may call the API from its pages (CORS); the rest
    // of the checks still apply to it.
    let allowed = origin
        .filter(|o| origin_allowed(o, &state.config.allowed_origins))
        .map(str::to_owned);
    if let Some(origin) = &allowed {
        if req.method() == Method::OPTIONS {
            return preflight(origin);
        }
    }
    let cross_site = allowed.is_none()
        && match (site, origin) {
            (Some(site), _) => !matches!(site, "same-origin" | "none"),
            (None, Some(origin)) => origin
                .split_once("://")
                .is_none_or(|(_, authority)| !authority.eq_ignore_ascii_case(host)),
            (None, None) => false,
        };
    if cross_site {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::CrossSite,
            "cross-site requests are refused: call the API from a program, not from another site's page",
        )
        .into_response();
    }
    let declared = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if let Some(ct) = declared {
        let essence = ct.split(';').next().unwrap_or("").trim();
        let json = essence.eq_ignore_ascii_case("application/json")
            || essence.to_ascii_lowercase().ends_with("+json");
        if !json {
            return ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
                format!("the body must be JSON, sent with Content-Type: application/json (not {essence:?})"),
            )
            .into_response();
        }
    }
    let mut resp = next.run(req).await;
    if let Some(origin) = &allowed {
        allow_origin(resp.headers_mut(), origin);
    }
    resp
}

fn origin_allowed(origin: &str, allowed: &[String]) -> bool {
    let origin = origin.trim_end_matches('/');
    allowed
        .iter()
        .any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(origin))
}

/// The answer to a CORS preflight from an allowed origin: the methods and headers the API takes.
fn preflight(origin: &str) -> Response {
    let mut resp = StatusCode::NO_CONTENT.into_response();
    let h = resp.headers_mut();
    allow_origin(h, origin);
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, traceparent"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    resp
}

fn allow_origin(h: &mut HeaderMap, origin: &str) {
    if let Ok(v) = HeaderValue::from_str(origin) {
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, v);
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
}

/// Whether `host` (a `Host` header: a name or address, maybe with a port) is loopback or allowed.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(&name))
}

/// Compares without an early exit, so the time taken does not reveal how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0));
    }
    diff == 0
}
