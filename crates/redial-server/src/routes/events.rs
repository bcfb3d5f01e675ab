//! The event log: `GET /v1/events` (a page from a cursor) and `GET /v1/events/stream`
//! (Server-Sent Events, resuming from `Last-Event-ID`).
//!
//! A stream reads the log on when this node may have written to it (the engine's event signal),
//! and once a second anyway (another node's events; on PostgreSQL an event is readable once
//! every older transaction has ended). Each event goes out once with its cursor as its `id`: a
//! client that reconnects with the last `id` it saw gets what followed, nothing missed, nothing
//! twice. At most `server.max_waiters` streams at once on a server; more are answered 503.

use super::ApiResult;
use crate::{view, ApiError, AppState, ErrorCode};
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use redial_store::{EventCursor, EventFrom, EventKind, EventListParams};
use std::collections::HashMap;
use std::time::Duration;

/// How long a stream waits for a sign before reading the log anyway.
const LOOK_EVERY: Duration = Duration::from_secs(1);
/// A comment line on a quiet stream this often, so that proxies and clients see it alive.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// Events read per look.
const PAGE: u32 = 200;

/// The filters and the start a request asks for.
fn parse(q: HashMap<String, String>, stream: bool) -> Result<EventListParams, ApiError> {
    let mut params = EventListParams {
        from: if stream {
            EventFrom::End
        } else {
            EventFrom::Start
        },
        queues: vec![],
        kinds: vec![],
        limit: 100,
    };
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    for (k, v) in q {
        match k.as_str() {
            "after" => params.from = EventFrom::After(cursor(&v)?),
            "queue" => params.queues = list(&v),
            "kind" => {
                params.kinds = list(&v)
                    .iter()
                    .map(|k| k.parse::<EventKind>())
                    .collect::<Result<_, _>>()
                    .map_err(|e| ApiError::bad_request(ErrorCode::InvalidEventKind, e))?
            }
            "limit" if !stream => {
                params.limit = v
                    .parse::<u32>()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            ErrorCode::InvalidLimit,
                            "limit must be a number from 1 to 1000",
                        )
                    })?
            }
            other => {
                let takes = if stream {
                    "after, queue, kind"
                } else {
                    "after, queue, kind, limit"
                };
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!("unknown query parameter {other:?}: use {takes}"),
                ));
            }
        }
    }
    Ok(params)
}

fn cursor(v: &str) -> Result<EventCursor, ApiError> {
    v.parse::<EventCursor>()
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidCursor, e))
}

pub(super) async fn events(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let params = parse(q, false)?;
    let from = params.from;
    let page = state.engine.store().event_list(params).await?;
    let events: Vec<_> = page.events.iter().map(view::event).collect();
    Ok(Json(redial_api::EventPage {
        events,
        next_cursor: page.next.to_string(),
        more: page.more,
        from: match from {
            EventFrom::After(c) => Some(c.to_string()),
            EventFrom::Start | EventFrom::End => None,
        },
    })
    .into_response())
}

pub(super) async fn stream(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let mut params = parse(q, true)?;
    if let Some(last) = headers.get("last-event-id") {
        let last = last.to_str().map_err(|_| {
            ApiError::bad_request(ErrorCode::InvalidCursor, "Last-Event-ID is not text")
        })?;
        params.from = EventFrom::After(cursor(last.trim())?);
    }
    let max = state.config.max_waiters;
    let Some(slot) = state.gates.stream(max) else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::TooManyWaiters,
            format!("{max} event streams are open on this server (server.max_waiters): try again after Retry-After"),
        ));
    };
    // Where the stream starts, read now: an error is an answer, not a stream that ends at once.
    params.limit = PAGE;
    let first = state.engine.store().event_list(params.clone()).await?;
    let signal = state.engine.event_signal();
    let store = state.engine.store().clone();
    let shutdown = state.draining.clone();
    let s = Stream {
        store,
        params,
        signal,
        pending: Some(first),
        since_sent: tokio::time::Instant::now(),
        _slot: slot,
        shutdown,
    };
    let body = futures_util::stream::unfold(s, |mut s| async move {
        let chunk = s.next().await?;
        Some((Ok::<_, std::convert::Infallible>(chunk), s))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-store")
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        // Proxies that buffer (nginx) pass it through as it comes.
        .header("x-accel-buffering", "no")
        .body(Body::from_stream(body))
        .map_err(|e| ApiError::internal("building the event stream", e))
}

struct Stream {
    store: std::sync::Arc<dyn redial_store::Store>,
    params: EventListParams,
    signal: tokio::sync::watch::Receiver<u64>,
    /// A page read and not yet sent.
    pending: Option<redial_store::EventPage>,
    since_sent: tokio::time::Instant,
    /// Its place among the node's streams, given back when the stream ends.
    _slot: crate::Gate,
    shutdown: redial_engine::Shutdown,
}

impl Stream {
    /// The next chunk of the body: events, or a keepalive comment; `None` ends the stream (the
    /// server stops, or the store failed: the client reconnects with its last id).
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(page) = self.pending.take() {
                self.params.from = EventFrom::After(page.next);
                let more = page.more;
                if !page.events.is_empty() {
                    let mut out = String::new();
                    for e in &page.events {
                        let data = serde_json::to_string(&view::event(e)).ok()?;
                        out.push_str(&format!(
                            "id: {}\nevent: {}\ndata: {data}\n\n",
                            e.cursor, e.kind
                        ));
                    }
                    self.since_sent = tokio::time::Instant::now();
                    if more {
                        self.pending = self.read().await?;
                    }
                    return Some(Bytes::from(out));
                }
                if more {
                    self.pending = self.read().await?;
                    continue;
                }
            }
            let keepalive = self.since_sent + KEEPALIVE;
            tokio::select! {
                _ = self.signal.changed() => {}
                _ = tokio::time::sleep(LOOK_EVERY) => {}
                _ = tokio::time::sleep_until(keepalive) => {
                    self.since_sent = tokio::time::Instant::now();
                    return Some(Bytes::from_static(b": keepalive\n\n"));
                }
                _ = self.shutdown.wait() => return None,
            }
            self.pending = self.read().await?;
        }
    }

    async fn read(&mut self) -> Option<Option<redial_store::EventPage>> {
        match self.store.event_list(self.params.clone()).await {
            Ok(page) => Some(Some(page)),
            Err(e) => {
                tracing::warn!(error = %e, "reading the event log for a stream failed; ending it");
                None
            }
        }
    }
}
