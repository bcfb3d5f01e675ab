//! The accept loop: serves the API over HTTP/1.1 connections with the limits a server exposed to
//! hostile clients needs, which a bare `axum::serve` does not have:
//! - a connection that has started a request's head must finish it within `header_timeout`;
//! - a connection with no request in progress is closed after `idle_timeout` (keep-alive, or a
//!   socket that connected and never sent a byte). A request is in progress from its head until
//!   its answer's last byte is handed to the socket: an event stream, a backup download or a
//!   wait is never idle, however long it lasts;
//! - a connection whose answer cannot be written for `write_timeout` (its reader stopped
//!   reading) is closed;
//! - at most `max_connections` at once. At the cap, the connection that has waited longest
//!   without a request in progress (for a second at least) is closed to make room, so sockets
//!   that hold a connection and send nothing cannot lock out a real client (or `/healthz`). When every connection is serving
//!   a request (waits, streams, bodies arriving: a token holder can make that happen), up to
//!   [`RESERVE`] more are let in for short calls only: a `GET` or `HEAD` that does not wait or
//!   stream (`/healthz`, `/readyz`, `/v1/stats`, a job's state). Anything else on them is
//!   refused at once with 503 `busy` and `Retry-After`, and each closes after its one answer.
//!   Only when those are taken too does accepting wait for one to end.
//!
//! The request body's own timeout (`body_timeout`) is the router's (see `routes::read_body`): the
//! body is read while a request is in progress.
//!
//! Over 600 lines: the accept loop and each of its limits, all over the same connection state.

use crate::{AppState, ErrorCode};
use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;
use tower::Service;

/// How long open connections get to finish once shutdown begins, before they are closed.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(10);

/// Connections beyond `max_connections`, for short calls only, when every connection is serving
/// a request.
pub const RESERVE: usize = 32;

/// A connection idle for less than this is not closed to make room: one just accepted has not
/// sent its head yet (and on a loaded machine it may take a while to be read).
const EVICT_AFTER: Duration = Duration::from_secs(1);

/// Serves `state`'s API on `listener` until `shutdown` resolves, then stops accepting, lets
/// requests in progress finish (up to 10 s) and returns.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    let config = state.config.clone();
    let draining = state.draining.clone();
    let router = crate::router(state);
    let registry = Arc::new(Registry::default());
    let epoch = Instant::now();
    let mut next_id: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        // Past the cap and its reserve: accept nothing until a connection ends, closing the
        // longest-idle one to make room (unless one is closing already).
        let cap = config.max_connections.max(1);
        while registry.len() >= cap + RESERVE {
            if !registry.evicting() {
                let _ = registry.evict_longest_idle(millis(epoch));
            }
            tokio::select! {
                _ = registry.closed.notified() => {}
                // Every connection was serving a request: look again soon, as one that finishes
                // its request becomes idle without closing.
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                _ = &mut shutdown => return drain(registry, &draining).await,
            }
        }
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors, or the peer gave up before accept: not fatal.
                    // Wait a little rather than spin on an error that persists.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => return drain(registry, &draining).await,
        };
        let _ = stream.set_nodelay(true);
        // At the cap, once a connection is waiting (never before: a connection just accepted
        // has not sent its head yet, and would look idle): the longest-idle one makes room; with
        // none idle, this one is a reserved one, for short calls.
        let reserved = registry.len() >= cap && !registry.evict_longest_idle(millis(epoch));
        next_id += 1;
        let conn = Arc::new(ConnState::new(epoch));
        registry.insert(next_id, conn.clone());
        let task = ConnTask {
            id: next_id,
            reserved,
            conn,
            registry: registry.clone(),
            header_timeout: config.header_timeout,
            idle_timeout: config.idle_timeout,
            write_timeout: config.write_timeout,
            epoch,
        };
        tokio::spawn(task.run(stream, router.clone()));
    }
}

/// Stops every connection that is not serving a request, asks the others to close after their
/// response, and waits for them (bounded).
async fn drain(registry: Arc<Registry>, draining: &redial_engine::Shutdown) -> std::io::Result<()> {
    draining.trigger();
    registry.shut_down.store(true, Ordering::Release);
    for conn in registry.all() {
        conn.stop.notify_one();
    }
    let deadline = Instant::now() + SHUTDOWN_DRAIN;
    while registry.len() > 0 {
        if tokio::time::timeout_at(deadline, registry.closed.notified())
            .await
            .is_err()
        {
            tracing::warn!(
                connections = registry.len(),
                "closing connections still open after the shutdown drain"
            );
            break;
        }
    }
    Ok(())
}

/// The open connections.
#[derive(Default)]
struct Registry {
    conns: Mutex<HashMap<u64, Arc<ConnState>>>,
    /// Notified when a connection ends.
    closed: Notify,
    shut_down: AtomicBool,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<ConnState>>> {
        // A connection task never panics while holding the lock; if one did, the map is still
        // consistent (every operation on it is a single insert, remove or read).
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    fn insert(&self, id: u64, conn: Arc<ConnState>) {
        self.lock().insert(id, conn);
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
        self.closed.notify_one();
    }

    fn all(&self) -> Vec<Arc<ConnState>> {
        self.lock().values().cloned().collect()
    }

    /// Whether a connection was told to close to make room and has not closed yet.
    fn evicting(&self) -> bool {
        self.lock()
            .values()
            .any(|c| c.evicted.load(Ordering::Acquire))
    }

    /// Closes the connection that has waited longest with no request in progress, if one has
    /// for [`EVICT_AFTER`] (`now` in ms since the epoch); false when none has.
    fn evict_longest_idle(&self, now: u64) -> bool {
        let victim = self
            .lock()
            .values()
            .filter(|c| c.busy.load(Ordering::Acquire) == 0 && !c.evicted.load(Ordering::Acquire))
            .filter(|c| c.waiting_since() + ms(EVICT_AFTER) <= now)
            .min_by_key(|c| c.waiting_since())
            .cloned();
        match victim {
            Some(c) => {
                c.evicted.store(true, Ordering::Release);
                c.stop.notify_one();
                tracing::debug!("at the connection cap: closing the longest-idle connection");
                true
            }
            None => false,
        }
    }
}

/// What the accept loop and the connection's watchdog know of one connection.
struct ConnState {
    /// Requests being served (handed to the router, response not yet produced).
    busy: AtomicUsize,
    /// Milliseconds since the epoch when the connection last had no request in progress.
    idle_since: AtomicU64,
    /// Milliseconds since the epoch (plus one; 0 for none) when the first byte of a request's
    /// head arrived while no request was in progress.
    head_since: AtomicU64,
    /// Wakes the watchdog when a head starts (its deadline moves earlier).
    head_started: Notify,
    /// Milliseconds since the epoch (plus one; 0 for none) since when a write to the socket has
    /// waited for room (the reader not taking the answer).
    write_blocked_since: AtomicU64,
    /// Wakes the watchdog when a write starts waiting.
    write_blocked: Notify,
    /// Tells the connection to close: evicted at the cap, or shutting down.
    stop: Notify,
    evicted: AtomicBool,
}

impl ConnState {
    fn new(epoch: Instant) -> Self {
        ConnState {
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(millis(epoch)),
            head_since: AtomicU64::new(0),
            head_started: Notify::new(),
            write_blocked_since: AtomicU64::new(0),
            write_blocked: Notify::new(),
            stop: Notify::new(),
            evicted: AtomicBool::new(false),
        }
    }

    /// Since when the connection has waited without a request in progress.
    fn waiting_since(&self) -> u64 {
        match self.head_since.load(Ordering::Acquire) {
            0 => self.idle_since.load(Ordering::Acquire),
            h => (h - 1).min(self.idle_since.load(Ordering::Acquire)),
        }
    }

    /// Notes whether a write to the socket went through or waits for room.
    fn wrote<T>(&self, polled: &Poll<T>, epoch: Instant) {
        if polled.is_pending() {
            if self.write_blocked_since.load(Ordering::Acquire) == 0 {
                self.write_blocked_since
                    .store(millis(epoch) + 1, Ordering::Release);
                self.write_blocked.notify_one();
            }
        } else {
            self.write_blocked_since.store(0, Ordering::Release);
        }
    }

    fn read_some(&self, epoch: Instant) {
        if self.busy.load(Ordering::Acquire) == 0 && self.head_since.load(Ordering::Acquire) == 0 {
            self.head_since.store(millis(epoch) + 1, Ordering::Release);
            self.head_started.notify_one();
        }
    }
}

fn millis(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Marks a request in progress on its connection for as long as it lives: from the request's
/// head until its answer's body has ended or was dropped ([`Answering`]).
struct Busy {
    conn: Arc<ConnState>,
    epoch: Instant,
}

impl Busy {
    fn start(conn: Arc<ConnState>, epoch: Instant) -> Self {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        conn.head_since.store(0, Ordering::Release);
        Busy { conn, epoch }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conn
            .idle_since
            .store(millis(self.epoch), Ordering::Release);
        self.conn.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body, keeping its request in progress until the last frame is taken (or the
/// body is dropped: the connection ended), so that a stream is not taken for an idle
/// connection.
struct Answering {
    body: Body,
    busy: Option<Busy>,
}

impl hyper::body::Body for Answering {
    type Data = hyper::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            self.busy = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

struct ConnTask {
    id: u64,
    /// Let in beyond the cap: short calls only, one answer, then closed.
    reserved: bool,
    conn: Arc<ConnState>,
    registry: Arc<Registry>,
    header_timeout: Duration,
    idle_timeout: Duration,
    write_timeout: Duration,
    epoch: Instant,
}

impl ConnTask {
    async fn run(self, stream: TcpStream, router: axum::Router) {
        let io = TokioIo::new(Watched {
            inner: stream,
            conn: self.conn.clone(),
            epoch: self.epoch,
            rewrite: None,
        });
        let (conn_state, epoch, reserved) = (self.conn.clone(), self.epoch, self.reserved);
        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
            let busy = Busy::start(conn_state.clone(), epoch);
            let mut router = router.clone();
            async move {
                let response = if reserved && !is_short(&req) {
                    crate::drain_briefly(Body::new(req.into_body())).await;
                    Ok(busy_answer())
                } else {
                    router.call(req.map(Body::new)).await
                };
                response.map(|mut r| {
                    if reserved {
                        r.headers_mut().insert(
                            axum::http::header::CONNECTION,
                            axum::http::HeaderValue::from_static("close"),
                        );
                    }
                    r.map(|body| Answering {
                        body,
                        busy: Some(busy),
                    })
                })
            }
        });
        let http = hyper::server::conn::http1::Builder::new()
            // A head over this gets 431 (hyper's default allows ~400 KiB).
            .max_header_size(MAX_HEAD_BYTES)
            .serve_connection(io, service);
        tokio::pin!(http);
        if self.registry.shut_down.load(Ordering::Acquire) {
            http.as_mut().graceful_shutdown();
        }
        tokio::select! {
            result = http.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
            }
            why = self.watchdog() => {
                tracing::debug!(why, "closing a connection");
                if why == "shutting down" {
                    // Let a request in progress finish; an idle connection closes at once.
                    http.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(SHUTDOWN_DRAIN, http.as_mut()).await;
                }
                // Otherwise dropping the connection closes the socket.
            }
        }
        self.registry.remove(self.id);
    }

    /// Resolves when the connection must close, with the reason.
    async fn watchdog(&self) -> &'static str {
        loop {
            let c = &self.conn;
            let now = millis(self.epoch);
            let blocked = c.write_blocked_since.load(Ordering::Acquire);
            let deadline = if blocked > 0 {
                // An answer whose reader stopped taking it.
                let at = (blocked - 1) + ms(self.write_timeout);
                if at <= now {
                    return "write timeout";
                }
                at
            } else if c.busy.load(Ordering::Acquire) > 0 {
                // A request in progress has its own bounds (the body timeout, the handlers');
                // look again after an idle period, or when a write starts to wait.
                now + ms(self.idle_timeout)
            } else {
                match c.head_since.load(Ordering::Acquire) {
                    0 => c.idle_since.load(Ordering::Acquire) + ms(self.idle_timeout),
                    h => (h - 1) + ms(self.header_timeout),
                }
            };
            let idle = c.busy.load(Ordering::Acquire) == 0;
            if idle && deadline <= now {
                return if c.head_since.load(Ordering::Acquire) == 0 {
                    "idle timeout"
                } else {
                    "request head timeout"
                };
            }
            let at = self.epoch + Duration::from_millis(deadline);
            tokio::select! {
                _ = tokio::time::sleep_until(at.max(Instant::now())) => {}
                _ = c.head_started.notified() => {}
                _ = c.write_blocked.notified() => {}
                _ = c.stop.notified() => {
                    return if c.evicted.load(Ordering::Acquire) {
                        "connection cap reached"
                    } else {
                        "shutting down"
                    };
                }
            }
        }
    }
}

/// Whether a request is a short call, which a reserved connection serves: a `GET` or `HEAD`
/// with no body, that neither waits for a job nor streams.
fn is_short<B>(req: &Request<B>) -> bool {
    use axum::http::Method;
    let path = req.uri().path();
    let waits = req
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|p| p.starts_with("wait=")));
    matches!(*req.method(), Method::GET | Method::HEAD)
        && !req
            .headers()
            .contains_key(axum::http::header::CONTENT_LENGTH)
        && !req
            .headers()
            .contains_key(axum::http::header::TRANSFER_ENCODING)
        && !waits
        && path != "/v1/events/stream"
}

/// The answer a reserved connection gives to anything but a short call.
fn busy_answer() -> axum::response::Response {
    use axum::response::IntoResponse;
    crate::ApiError::new(
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Busy,
        "every connection of this server is serving a request (waits, streams, bodies arriving): only short calls (a GET that neither waits nor streams) are taken now; try again after Retry-After",
    )
    .into_response()
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 2)
}

/// The most a request's head may take (the request line and the headers).
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The socket, noting when a request's head begins to arrive, and giving the answers hyper
/// writes itself (a request it cannot parse: 400, a head over 64 KiB, URL included: 431, both
/// with an empty body) the API's error shape.
struct Watched {
    inner: TcpStream,
    conn: Arc<ConnState>,
    epoch: Instant,
    /// A replacement answer being written: its bytes, how many are written, and how many of
    /// hyper's bytes it stands for.
    rewrite: Option<(Vec<u8>, usize, usize)>,
}

/// hyper's own error answer: a 4xx head with no `Content-Type` (every answer of the router's
/// has one: `routes::json_errors` makes every error JSON), as the API would have written it.
fn bare_error_answer(buf: &[u8]) -> Option<Vec<u8>> {
    if !(buf.starts_with(b"HTTP/1.1 4") || buf.starts_with(b"HTTP/1.0 4")) {
        return None;
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    if head.contains("\r\ncontent-type:") {
        return None;
    }
    let status: u16 = head.get(9..12)?.parse().ok()?;
    let (reason, code, message) = match status {
        414 => (
            "URI Too Long",
            ErrorCode::UriTooLong,
            "the request's URL is over the server's limit (64 KiB): send data in the body",
        ),
        431 => (
            "Request Header Fields Too Large",
            ErrorCode::HeadersTooLarge,
            "the request's head (its URL and headers) is over the server's limit (64 KiB): send data in the body",
        ),
        408 => (
            "Request Timeout",
            ErrorCode::RequestTimeout,
            "the request's head did not arrive in time",
        ),
        _ => (
            "Bad Request",
            ErrorCode::BadRequest,
            "the request is not valid HTTP/1.1",
        ),
    };
    let body = serde_json::to_string(&crate::error::error_body(code, message.to_owned()))
        .unwrap_or_default();
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.conn.read_some(self.epoch);
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if self.rewrite.is_none() {
            if let Some(answer) = bare_error_answer(buf) {
                self.rewrite = Some((answer, 0, buf.len()));
            }
        }
        let this = &mut *self;
        let Some((answer, written, stands_for)) = &mut this.rewrite else {
            let polled = Pin::new(&mut this.inner).poll_write(cx, buf);
            this.conn.wrote(&polled, this.epoch);
            return polled;
        };
        while *written < answer.len() {
            match Pin::new(&mut this.inner).poll_write(cx, &answer[*written..]) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into()))
                }
                Poll::Ready(Ok(n)) => *written += n,
                other => return other,
            }
        }
        let n = (*stands_for).min(buf.len());
        this.rewrite = None;
        Poll::Ready(Ok(n))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        // hyper writes a head in one piece: an error head to replace comes first.
        if let Some(first) = bufs.iter().find(|b| !b.is_empty()) {
            if self.rewrite.is_some() || bare_error_answer(first).is_some() {
                return self.poll_write(cx, first);
            }
        }
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.conn.wrote(&polled, self.epoch);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
