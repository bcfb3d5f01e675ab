//! Failure shapes for the `protection` and `protection-nodes` workloads: receiver routes whose
//! answer depends on the job (`/shape/{run}/{job}`) and on the time since the run began, so that
//! Redial and the plain retry loop meet exactly the same endpoint, each in its own run.
//!
//! Owns the shapes, the per-run and per-job state, the count of answers by kind, and a second
//! listener that speaks just enough HTTP/1.1 to answer like the routes and, where a shape asks
//! for it, to reset the connection (a real TCP RST: axum cannot drop a connection mid-request).
//! Does not own the jobs or the systems under test.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the endpoint behaves during one run.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// Each job's first call fails, every later call answers 200. Even jobs get a 500; odd jobs
    /// are sent to the reset listener ([`serve_raw`]) and get a connection reset.
    Flaky,
    /// By job number modulo 5: 0, 1 and 2 fail once with a 500, then answer 200; 3 answers 400
    /// (permanent) every time; 4 answers 200.
    Mixed,
    /// 503 without `Retry-After` until `down` has passed since the run began, then 200.
    Down { down: Duration },
    /// 503 with `Retry-After`: the whole seconds until the outage ends, rounded up; then 200.
    Outage { down: Duration },
    /// Answers 200 only after `delay`, longer than the jobs' timeout: every call times out.
    Slow { delay: Duration },
    /// A flaky endpoint with some slow answers (the `protection-nodes` workload). By job number:
    /// `k % 5 == 0` (20%) fails once with a 500, then answers 200; of the rest, one in ten
    /// (`(k / 5) % 10 == 0`: 8% of all jobs) answers 200 after `late`, on every call; the others
    /// answer 200 at once.
    FlakyLate { late: Duration },
    /// A leaky bucket (GCRA) of `per_second` with room for `burst`, answering bare 429s (no
    /// `Retry-After`, no quota headers), as nginx `limit_req` or HAProxy do; from `halves_at`
    /// after the run began, if given, at half the rate.
    LeakyBucket {
        per_second: u32,
        burst: u32,
        halves_at: Option<Duration>,
    },
    /// At most `limit` a `window`, windows from the run's start (express-rate-limit), saying
    /// what `says` says.
    FixedWindow {
        limit: u32,
        window: Duration,
        says: Says,
    },
    /// A token bucket of `burst` refilled at `per_second`, whose 429s carry `Retry-After`: the
    /// whole seconds until a token is back, rounded up.
    TokenBucket { per_second: u32, burst: u32 },
}

impl Shape {
    /// The limiter's rate in requests per second, for the limiter shapes (before any change).
    pub fn limit_rate(self) -> Option<f64> {
        match self {
            Shape::LeakyBucket { per_second, .. } | Shape::TokenBucket { per_second, .. } => {
                Some(f64::from(per_second))
            }
            Shape::FixedWindow { limit, window, .. } => {
                Some(f64::from(limit) / window.as_secs_f64())
            }
            _ => None,
        }
    }
}

impl Shape {
    /// Whether job `k` is sent to the reset listener instead of the HTTP routes.
    pub fn uses_reset_listener(self, k: usize) -> bool {
        matches!(self, Shape::Flaky) && k % 2 == 1
    }
}

/// What a fixed-window limiter tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Says {
    /// Bare 429s: no `Retry-After`, no quota headers.
    Nothing,
    /// 429s with `Retry-After` (the whole seconds to the window's end, rounded up), no quota
    /// headers.
    RetryAfter,
    /// Every answer with the IETF draft's `RateLimit-Limit`, `-Remaining` and `-Reset` (whole
    /// seconds to the window's end, rounded up), and 429s with `Retry-After` as well
    /// (express-rate-limit's `standardHeaders`).
    Quota,
}

/// What one call gets.
#[derive(Debug)]
enum Answer {
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
    },
    /// Close the connection with a TCP reset, no response.
    Reset,
    /// Wait, then answer 200 (the caller has given up by then).
    Slow(Duration),
    /// Wait, then answer 200 (within the caller's timeout).
    Late(Duration),
}

impl Answer {
    fn label(&self) -> &'static str {
        match self {
            Answer::Status { status: 200, .. } => "200",
            Answer::Status { status: 400, .. } => "400",
            Answer::Status { status: 404, .. } => "404",
            Answer::Status { status: 500, .. } => "500",
            Answer::Status { status: 503, .. } => "503",
            Answer::Status { status: 429, .. } => "429",
            Answer::Status { .. } => "other",
            Answer::Reset => "reset",
            Answer::Slow(_) => "slow (timed out)",
            Answer::Late(_) => "200 late",
        }
    }
}

#[derive(Debug)]
struct Run {
    shape: Shape,
    /// When the run began (just before its first enqueue): the clock of `Down` and `Outage`.
    since: Instant,
    /// Calls so far, per job number.
    calls: HashMap<u32, u32>,
    /// Calls so far, by the answer's label.
    answers: BTreeMap<&'static str, u64>,
    /// The limiter shapes' state: a bucket's theoretical arrival time (since the run began),
    /// and a fixed window's index and count.
    tat: Duration,
    window: (u64, u32),
    /// Calls per second since the run began: (2xx, 429).
    per_second: BTreeMap<u64, (u64, u64)>,
}

/// Every run's state. Runs are named by the workload, one per shape and system.
#[derive(Debug, Default)]
pub struct Shapes {
    runs: Mutex<HashMap<String, Run>>,
}

impl Shapes {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Run>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the clock of `run` (and forgets any earlier run of that name).
    pub fn begin(&self, run: &str, shape: Shape) {
        self.lock().insert(
            run.to_owned(),
            Run {
                shape,
                since: Instant::now(),
                calls: HashMap::new(),
                answers: BTreeMap::new(),
                tat: Duration::ZERO,
                window: (0, 0),
                per_second: BTreeMap::new(),
            },
        );
    }

    /// The calls `run` has had in each second since it began: (2xx, 429).
    pub fn per_second(&self, run: &str) -> BTreeMap<u64, (u64, u64)> {
        self.lock()
            .get(run)
            .map(|r| r.per_second.clone())
            .unwrap_or_default()
    }

    /// The calls `run` has had so far, by answer.
    pub fn answers(&self, run: &str) -> BTreeMap<&'static str, u64> {
        self.lock()
            .get(run)
            .map(|r| r.answers.clone())
            .unwrap_or_default()
    }

    /// Decides the answer to job `job`'s call in `run`, and counts it.
    fn answer(&self, run: &str, job: u32) -> Answer {
        let mut runs = self.lock();
        let Some(r) = runs.get_mut(run) else {
            return Answer::Status {
                status: 404,
                headers: Vec::new(),
            };
        };
        let calls = r.calls.entry(job).or_default();
        *calls += 1;
        let first = *calls == 1;
        let elapsed = r.since.elapsed();
        let status = |status| Answer::Status {
            status,
            headers: Vec::new(),
        };
        let retry_after = |status, secs: u64| Answer::Status {
            status,
            headers: vec![("retry-after", secs.to_string())],
        };
        let answer = match r.shape {
            Shape::Flaky if first && job % 2 == 1 => Answer::Reset,
            Shape::Flaky if first => status(500),
            Shape::Flaky => status(200),
            Shape::Mixed => match job % 5 {
                0..=2 if first => status(500),
                3 => status(400),
                _ => status(200),
            },
            Shape::Down { down } if elapsed < down => status(503),
            Shape::Down { .. } => status(200),
            Shape::Outage { down } if elapsed < down => {
                retry_after(503, (down - elapsed).as_secs_f64().ceil().max(1.0) as u64)
            }
            Shape::Outage { .. } => status(200),
            Shape::Slow { delay } => Answer::Slow(delay),
            Shape::FlakyLate { .. } if job.is_multiple_of(5) && first => status(500),
            Shape::FlakyLate { late } if !job.is_multiple_of(5) && (job / 5).is_multiple_of(10) => {
                Answer::Late(late)
            }
            Shape::FlakyLate { .. } => status(200),
            Shape::LeakyBucket {
                per_second,
                burst,
                halves_at,
            } => {
                let rate = match halves_at {
                    Some(at) if elapsed >= at => (per_second / 2).max(1),
                    _ => per_second.max(1),
                };
                match take(&mut r.tat, elapsed, rate, burst) {
                    Ok(()) => status(200),
                    Err(_) => status(429),
                }
            }
            Shape::TokenBucket { per_second, burst } => {
                match take(&mut r.tat, elapsed, per_second.max(1), burst) {
                    Ok(()) => status(200),
                    Err(free_in) => retry_after(429, free_in.as_secs_f64().ceil().max(1.0) as u64),
                }
            }
            Shape::FixedWindow {
                limit,
                window,
                says,
            } => {
                let index = (elapsed.as_nanos() / window.as_nanos().max(1)) as u64;
                if index != r.window.0 {
                    r.window = (index, 0);
                }
                let ok = r.window.1 < limit;
                if ok {
                    r.window.1 += 1;
                }
                let ends_in = window
                    .saturating_mul(u32::try_from(index + 1).unwrap_or(u32::MAX))
                    .saturating_sub(elapsed);
                let reset = ends_in.as_secs_f64().ceil().max(1.0) as u64;
                let mut headers = Vec::new();
                if says == Says::Quota {
                    headers.push(("ratelimit-limit", limit.to_string()));
                    headers.push(("ratelimit-remaining", (limit - r.window.1).to_string()));
                    headers.push(("ratelimit-reset", reset.to_string()));
                }
                if !ok && says != Says::Nothing {
                    headers.push(("retry-after", reset.to_string()));
                }
                Answer::Status {
                    status: if ok { 200 } else { 429 },
                    headers,
                }
            }
        };
        *r.answers.entry(answer.label()).or_default() += 1;
        if let Answer::Status { status, .. } = &answer {
            let s = r.per_second.entry(elapsed.as_secs()).or_default();
            match *status {
                200 => s.0 += 1,
                429 => s.1 += 1,
                _ => {}
            }
        }
        answer
    }
}

/// GCRA: one request at `now` (since the run began) against `per_second` with room for
/// `burst`; refused, how long until one would go.
fn take(tat: &mut Duration, now: Duration, per_second: u32, burst: u32) -> Result<(), Duration> {
    let interval = Duration::from_secs(1) / per_second;
    let tolerance = interval * burst.saturating_sub(1);
    let earliest = tat.saturating_sub(tolerance);
    if earliest > now {
        return Err(earliest - now);
    }
    *tat = (*tat).max(now) + interval;
    Ok(())
}

/// The shape routes, to merge into the benchmark receiver's app.
pub fn routes(shapes: Arc<Shapes>) -> axum::Router {
    async fn shape(
        State(s): State<Arc<Shapes>>,
        Path((run, job)): Path<(String, u32)>,
    ) -> axum::response::Response {
        match s.answer(&run, job) {
            Answer::Status { status, headers } => {
                let code = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
                let mut res = (code, "").into_response();
                for (name, value) in headers {
                    if let Ok(v) = axum::http::HeaderValue::from_str(&value) {
                        res.headers_mut().insert(name, v);
                    }
                }
                res
            }
            // Jobs that a shape resets are sent to the reset listener; if one comes here anyway,
            // the nearest HTTP answer is a 500.
            Answer::Reset => (StatusCode::INTERNAL_SERVER_ERROR, "").into_response(),
            Answer::Slow(delay) | Answer::Late(delay) => {
                tokio::time::sleep(delay).await;
                "ok".into_response()
            }
        }
    }
    axum::Router::new()
        .route("/shape/{run}/{job}", axum::routing::any(shape))
        .with_state(shapes)
}

/// Starts the reset listener on a free loopback port; returns its base URL. It answers
/// `/shape/{run}/{job}` like [`routes`], one request per connection (`connection: close`), and
/// resets the connection where the shape says so.
pub async fn serve_raw(shapes: Arc<Shapes>) -> anyhow::Result<String> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                continue;
            };
            let shapes = shapes.clone();
            tokio::spawn(async move {
                let _ = raw_connection(sock, &shapes).await;
            });
        }
    });
    Ok(base)
}

async fn raw_connection(mut sock: TcpStream, shapes: &Shapes) -> std::io::Result<()> {
    // The whole request is read first, so that the reset comes after the client has sent it
    // (the client then fails reading the response, as with a server that crashed mid-request).
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Ok(());
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let body_len = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < head_end + body_len {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let path = head.split_whitespace().nth(1).unwrap_or("/");
    let answer = match path
        .strip_prefix("/shape/")
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(run, job)| Some((run, job.parse::<u32>().ok()?)))
    {
        Some((run, job)) => shapes.answer(run, job),
        None => Answer::Status {
            status: 404,
            headers: Vec::new(),
        },
    };
    let (status, headers) = match answer {
        Answer::Reset => {
            // A zero linger makes the close send RST instead of FIN. The deprecation is about a
            // non-zero linger, which blocks the thread on drop; zero does not.
            #[allow(deprecated)]
            sock.set_linger(Some(Duration::ZERO))?;
            drop(sock);
            return Ok(());
        }
        Answer::Slow(delay) | Answer::Late(delay) => {
            tokio::time::sleep(delay).await;
            (200, Vec::new())
        }
        Answer::Status { status, headers } => (status, headers),
    };
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|c| c.canonical_reason())
        .unwrap_or("Unknown");
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    sock.write_all(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-length: 0\r\nconnection: close\r\n{extra}\r\n"
        )
        .as_bytes(),
    )
    .await?;
    sock.shutdown().await
}
