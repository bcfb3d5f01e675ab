//! A scriptable HTTP receiver on `127.0.0.1:0` for tests: each test says what a path answers, in
//! order, and reads back what was received. Also raw TCP misbehaviours (reset, garbage, hang) that
//! an HTTP framework cannot produce.
//!
//! Test support only: it is real HTTP over loopback, not a mock of Redial's code.
//!
//! A receiver keeps its own time for what depends on time (rate-limit windows, outages): the
//! monotonic clock by default, or a clock the test moves ([`Receiver::start_with_clock`]), so that
//! a test on a manual clock sees the same windows as the code under test, whatever the load.

mod raw;

pub use raw::{Misbehaviour, RawServer, TlsServer};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use redial_limiters::{Kind, Limiter, QuotaStyle, State as LimiterState, Wait};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// Wait this long before answering (for timeouts).
    pub delay: Duration,
}

impl Reply {
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: String::new(),
            delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn body(mut self, body: &str) -> Reply {
        self.body = body.to_owned();
        self
    }

    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }
}

/// A request as received.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// When it arrived.
    pub at: Instant,
    /// When it arrived on the receiver's clock: the time since the receiver started, by the
    /// test's clock when the receiver has one ([`Receiver::start_with_clock`]).
    pub since_start: Duration,
    /// When it arrived, by the wall clock (to compare with Redial's own records).
    pub wall: std::time::SystemTime,
    /// For a rate-limited path: the index of the window it fell in.
    pub window: Option<u64>,
    /// The status it was answered with.
    pub status: u16,
}

/// A path that behaves like a real API rather than a script. Times are on the receiver's clock.
#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// At most `limit` requests per `window` (windows start when the behaviour is set); each
    /// answer carries OpenAI-style `x-ratelimit-{limit,remaining,reset}-requests` headers, and
    /// requests over the limit get 429 with `Retry-After` (decimal seconds) until the window ends.
    RateLimited { limit: u32, window: Duration },
    /// The same, but answers carry no quota headers: only the 429s say anything, with
    /// `Retry-After`.
    RateLimitedQuietly { limit: u32, window: Duration },
    /// The same fixed windows, saying nothing at all: 429 with no `Retry-After` and no headers
    /// (express-rate-limit without its headers).
    RateLimitedBare { limit: u32, window: Duration },
    /// A leaky bucket (GCRA) of `per_second` requests a second with room for `burst` at once,
    /// answering bare 429s: no `Retry-After`, no quota headers (nginx `limit_req` with
    /// `limit_req_status 429`, HAProxy, Envoy's local rate limit).
    LeakyBucket { per_second: u32, burst: u32 },
    /// The same leaky bucket refusing with a bare 503, as nginx `limit_req` does unless
    /// `limit_req_status` is set.
    LeakyBucket503 { per_second: u32, burst: u32 },
    /// The same leaky bucket whose 429s carry `Retry-After` in whole seconds until room comes
    /// back, rounded up: 1 for a wait of 20 ms (as most gateways and APIs speak).
    LeakyBucketRounded { per_second: u32, burst: u32 },
    /// A moving window (a sliding log) of `per_second`: a request goes when fewer than
    /// `per_second` went in the second before it. Every answer carries `x-ratelimit-limit`,
    /// `-remaining` and `-reset`, the reset as epoch seconds, the oldest request's expiry
    /// rounded up (as Python's flask-limiter says it); a 429 adds `Retry-After` in whole
    /// seconds, truncated. `epoch_ms`: the Unix time, in milliseconds, at the receiver clock's
    /// zero (the test clock's origin for [`Receiver::start_with_clock`]).
    SlidingLogRounded { per_second: u32, epoch_ms: u64 },
    /// 503 without Retry-After for `down_for` after the behaviour is set, then 200.
    DownFor { down_for: Duration },
    /// An OAuth2 token endpoint (client credentials): a POST whose client says who it is (HTTP
    /// basic, or `client_id` in the form) gets `{"access_token": "tok-N", "token_type": "Bearer",
    /// "expires_in": <lifetime in seconds>}`, the token valid for `lifetime` on the receiver's
    /// clock; without one, 401 `invalid_client`.
    TokenServer { lifetime: Duration },
    /// An API that takes only `Authorization: Bearer` tokens this receiver's [`TokenServer`]
    /// issued and that have not expired (on its clock): 200, else 401 with `WWW-Authenticate`.
    ///
    /// [`TokenServer`]: Behaviour::TokenServer
    RequiresToken,
    /// Any limiter of the shared model (`redial-limiters`, which `redial simulate` runs too),
    /// its time counted from when the behaviour is set. `epoch_ms`: the Unix time, in
    /// milliseconds, at the receiver clock's zero, for resets given as epoch seconds.
    Limiter { limiter: Limiter, epoch_ms: i64 },
}

#[derive(Debug)]
struct Live {
    behaviour: Behaviour,
    /// When the behaviour was set, on the receiver's clock.
    started: Duration,
    window_index: u64,
    used: u32,
    /// What the shared limiter model remembers, for the behaviours it answers.
    limiter: LimiterState,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A reading of the test's clock: how far it has moved since some fixed origin.
type ClockFn = dyn Fn() -> Duration + Send + Sync;

struct Shared {
    /// Per path, the answers still to give; the last one repeats once the others are used.
    scripts: Mutex<HashMap<String, VecDeque<Reply>>>,
    behaviours: Mutex<HashMap<String, Live>>,
    received: Mutex<Vec<Received>>,
    /// Per path, requests being answered now and the most seen at once.
    in_flight: Mutex<HashMap<String, (usize, usize)>>,
    /// The receiver's clock, and its reading when the receiver started.
    clock: Box<ClockFn>,
    origin: Duration,
    /// The tokens [`Behaviour::TokenServer`] issued, and when each expires (receiver clock).
    tokens: Mutex<HashMap<String, Duration>>,
}

impl Shared {
    /// The time since the receiver started, on its clock. A clock that went backwards reads as
    /// the start.
    fn since_start(&self) -> Duration {
        (self.clock)().saturating_sub(self.origin)
    }
}

/// The receiver. Dropping it stops the server.
pub struct Receiver {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Receiver {
    /// Starts on 127.0.0.1 at a free port. Unscripted paths answer 200 `ok`. Its time is the
    /// monotonic clock's.
    pub async fn start() -> Receiver {
        let started = Instant::now();
        Receiver::start_with_clock(move || started.elapsed()).await
    }

    /// Starts like [`Receiver::start`], with its time read from `now`: how far the test's clock
    /// has moved since any fixed origin (it must not go backwards). Rate-limit windows, outages
    /// and [`Received::since_start`] then follow that clock, so a test that moves a manual clock
    /// and the code it drives agree on which window a request falls in, however slowly the
    /// machine runs.
    pub async fn start_with_clock(now: impl Fn() -> Duration + Send + Sync + 'static) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let origin = now();
        let shared = Arc::new(Shared {
            scripts: Mutex::default(),
            behaviours: Mutex::default(),
            received: Mutex::default(),
            in_flight: Mutex::default(),
            clock: Box::new(now),
            origin,
            tokens: Mutex::default(),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { addr, shared, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Sets what `path` answers, in order; the last reply repeats.
    pub fn script(&self, path: &str, replies: Vec<Reply>) {
        lock(&self.shared.scripts).insert(path.to_owned(), replies.into());
    }

    /// Makes `path` behave like a real API (see [`Behaviour`]).
    pub fn behave(&self, path: &str, behaviour: Behaviour) {
        let live = Live {
            behaviour,
            started: self.shared.since_start(),
            window_index: 0,
            used: 0,
            limiter: LimiterState::default(),
        };
        lock(&self.shared.behaviours).insert(path.to_owned(), live);
    }

    /// Forgets every token [`Behaviour::TokenServer`] issued: they are refused from now on, as a
    /// revoked token is.
    pub fn revoke_tokens(&self) {
        lock(&self.shared.tokens).clear();
    }

    /// Everything received on `path`, in order.
    pub fn received(&self, path: &str) -> Vec<Received> {
        lock(&self.shared.received)
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// The most requests to `path` that were being answered at once (a request counts from
    /// its arrival until its answer is sent or its client went away).
    pub fn most_in_flight(&self, path: &str) -> usize {
        lock(&self.shared.in_flight).get(path).map_or(0, |c| c.1)
    }

    /// Starts counting `most_in_flight` of `path` again from what is in flight now.
    pub fn reset_most_in_flight(&self, path: &str) {
        if let Some(c) = lock(&self.shared.in_flight).get_mut(path) {
            c.1 = c.0;
        }
    }

    pub fn count(&self, path: &str) -> usize {
        lock(&self.shared.received)
            .iter()
            .filter(|r| r.path == path)
            .count()
    }
}

async fn answer(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let headers: Vec<(String, String)> = req
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = axum::body::to_bytes(req.into_body(), 16 << 20)
        .await
        .unwrap_or_else(|_| Bytes::new());
    let at = Instant::now();
    let wall = std::time::SystemTime::now();
    let since_start = shared.since_start();
    let behaviour = lock(&shared.behaviours).get(&path).map(|l| l.behaviour);
    let live_reply = match behaviour {
        Some(Behaviour::TokenServer { lifetime }) => Some((
            issue_token(&shared, &headers, &body, since_start, lifetime),
            None,
        )),
        Some(Behaviour::RequiresToken) => Some((check_token(&shared, &headers, since_start), None)),
        _ => lock(&shared.behaviours)
            .get_mut(&path)
            .map(|live| live.answer(since_start)),
    };
    let window = live_reply.as_ref().and_then(|(_, w)| *w);
    let live_reply = live_reply.map(|(r, _)| r);
    let reply = live_reply
        .or_else(|| {
            let mut scripts = lock(&shared.scripts);
            match scripts.get_mut(&path) {
                Some(q) if q.len() > 1 => q.pop_front(),
                Some(q) => q.front().cloned(),
                None => None,
            }
        })
        .unwrap_or_else(|| Reply::status(200).body("ok"));
    lock(&shared.received).push(Received {
        method,
        path: path.clone(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        at,
        since_start,
        wall,
        window,
        status: reply.status,
    });
    // In flight until this function returns or is dropped (the client went away).
    struct InFlight<'a>(&'a Shared, &'a str);
    impl Drop for InFlight<'_> {
        fn drop(&mut self) {
            if let Some(c) = lock(&self.0.in_flight).get_mut(self.1) {
                c.0 = c.0.saturating_sub(1);
            }
        }
    }
    {
        let mut counts = lock(&shared.in_flight);
        let c = counts.entry(path.clone()).or_insert((0, 0));
        c.0 += 1;
        c.1 = c.1.max(c.0);
    }
    let _in_flight = InFlight(&shared, &path);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut headers = HeaderMap::new();
    for (n, v) in &reply.headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::try_from(n.as_str()),
            HeaderValue::try_from(v.as_str()),
        ) {
            headers.append(n, v);
        }
    }
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, headers, reply.body).into_response()
}

/// [`Behaviour::TokenServer`]'s answer.
fn issue_token(
    shared: &Shared,
    headers: &[(String, String)],
    body: &[u8],
    now: Duration,
    lifetime: Duration,
) -> Reply {
    let basic = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("authorization") && v.to_ascii_lowercase().starts_with("basic ")
    });
    let form = String::from_utf8_lossy(body);
    let posted = form.split('&').any(|kv| kv.starts_with("client_id="));
    if !basic && !posted {
        return Reply::status(401)
            .header("content-type", "application/json")
            .body(r#"{"error":"invalid_client","error_description":"no client authentication"}"#);
    }
    let mut tokens = lock(&shared.tokens);
    let token = format!("tok-{}", tokens.len() + 1);
    tokens.insert(token.clone(), now + lifetime);
    Reply::status(200)
        .header("content-type", "application/json")
        .body(&format!(
            r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":{}}}"#,
            lifetime.as_secs_f64()
        ))
}

/// [`Behaviour::RequiresToken`]'s answer.
fn check_token(shared: &Shared, headers: &[(String, String)], now: Duration) -> Reply {
    let given = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("authorization"))
        .and_then(|(_, v)| v.strip_prefix("Bearer "));
    let valid = given.is_some_and(|t| lock(&shared.tokens).get(t).is_some_and(|end| now < *end));
    if valid {
        Reply::status(200).body("ok")
    } else {
        Reply::status(401).header("www-authenticate", "Bearer error=\"invalid_token\"")
    }
}

impl Live {
    /// What limiter `l` answers a request `elapsed` after the behaviour was set, the receiver
    /// clock's zero being `epoch_ms` in Unix time.
    fn limited(&mut self, l: &Limiter, elapsed: Duration, epoch_ms: i64) -> Reply {
        let at_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        let started_ms = i64::try_from(self.started.as_millis()).unwrap_or(i64::MAX);
        let v = self
            .limiter
            .take(l, at_ms, epoch_ms.saturating_add(started_ms));
        let mut reply = Reply::status(v.status);
        if v.ok {
            reply = reply.body("ok").delay(Duration::from_millis(v.hold_ms));
        }
        for (name, value) in &v.headers {
            reply = reply.header(name, value);
        }
        reply
    }

    /// The reply to a request arriving at `at` (on the receiver's clock), and for rate-limited
    /// paths the window index.
    fn answer(&mut self, at: Duration) -> (Reply, Option<u64>) {
        let elapsed = at.saturating_sub(self.started);
        match self.behaviour {
            Behaviour::DownFor { down_for } if elapsed < down_for => (Reply::status(503), None),
            Behaviour::DownFor { .. } => (Reply::status(200).body("ok"), None),
            // Answered before a live behaviour is looked at (they read the request).
            Behaviour::TokenServer { .. } | Behaviour::RequiresToken => (Reply::status(500), None),
            Behaviour::SlidingLogRounded {
                per_second,
                epoch_ms,
            } => {
                let l = Limiter::new(Kind::SlidingLog {
                    limit: per_second,
                    window_ms: 1000,
                })
                .speaking(Wait::Truncated, QuotaStyle::GitHub);
                let epoch_ms = i64::try_from(epoch_ms).unwrap_or(i64::MAX);
                (self.limited(&l, elapsed, epoch_ms), None)
            }
            Behaviour::LeakyBucket { per_second, burst }
            | Behaviour::LeakyBucket503 { per_second, burst }
            | Behaviour::LeakyBucketRounded { per_second, burst } => {
                let l = Limiter::new(Kind::TokenBucket {
                    count: per_second,
                    per_ms: 1000,
                    burst,
                });
                let l = match self.behaviour {
                    Behaviour::LeakyBucket503 { .. } => l.refusing_with(503),
                    Behaviour::LeakyBucketRounded { .. } => {
                        l.speaking(Wait::Seconds, QuotaStyle::None)
                    }
                    _ => l,
                };
                (self.limited(&l, elapsed, 0), None)
            }
            Behaviour::Limiter { limiter, epoch_ms } => {
                (self.limited(&limiter, elapsed, epoch_ms), None)
            }
            Behaviour::RateLimited { limit, window }
            | Behaviour::RateLimitedQuietly { limit, window }
            | Behaviour::RateLimitedBare { limit, window } => {
                let quiet = matches!(self.behaviour, Behaviour::RateLimitedQuietly { .. });
                let bare = matches!(self.behaviour, Behaviour::RateLimitedBare { .. });
                let index = (elapsed.as_nanos() / window.as_nanos().max(1)) as u64;
                if index != self.window_index {
                    self.window_index = index;
                    self.used = 0;
                }
                let window_end = window * (index as u32 + 1);
                let reset = window_end.saturating_sub(elapsed);
                let reset_ms = format!("{}ms", reset.as_millis().max(1));
                let limited = self.used >= limit;
                if !limited {
                    self.used += 1;
                }
                let remaining = limit - self.used;
                let reply = if limited && bare {
                    Reply::status(429)
                } else if limited {
                    Reply::status(429).header(
                        "retry-after",
                        &format!("{:.3}", reset.as_secs_f64().max(0.001)),
                    )
                } else {
                    Reply::status(200).body("ok")
                };
                if quiet || bare {
                    return (reply, Some(index));
                }
                let reply = reply
                    .header("x-ratelimit-limit-requests", &limit.to_string())
                    .header("x-ratelimit-remaining-requests", &remaining.to_string())
                    .header("x-ratelimit-reset-requests", &reset_ms);
                (reply, Some(index))
            }
        }
    }
}
