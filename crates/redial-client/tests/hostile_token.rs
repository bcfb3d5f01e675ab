//! Issue 55, against a real server on loopback (the API's router behind its own accept loop, a
//! SQLite file, the engine started, a receiver on loopback): answers that last (event streams,
//! backup downloads) outlive the idle timeout and a stalled reader is cut by the write timeout;
//! only Redial signs its own deliveries; one rule for names; secrets redacted in responses too;
//! one backup at a time. Each case failed before its fix. Waits are bounded and generous, and
//! assert what happened, never how fast.

use redial_engine::{EngineConfig, SystemClock};
use redial_server::ServerConfig;
use redial_test_receiver::{Receiver, Reply};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use support::Server;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

mod support;

/// A bound for what must happen, whatever the machine's load.
const PATIENCE: Duration = Duration::from_secs(60);

async fn start(config: ServerConfig) -> Server {
    Server::start(config, Arc::new(SystemClock), Some(EngineConfig::default())).await
}

async fn call(base: &str, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let c = reqwest::Client::new();
    let mut req = c.request(method.parse().expect("a method"), format!("{base}{path}"));
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().await.expect("an answer");
    let status = resp.status().as_u16();
    let bytes = resp.bytes().await.unwrap_or_default();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

/// Waits (bounded) until `job` is in `state`.
async fn wait_state(base: &str, job: &str, state: &str) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (_, j) = call(base, "GET", &format!("/v1/jobs/{job}"), None).await;
        if j["state"] == state {
            return j;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "job {job} never became {state}: {j}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `request` on a new raw socket and reads the answer's head: the socket (its body next),
/// the status line and the `Content-Length`, if any.
async fn raw_head(base: &str, request: &str) -> (BufReader<TcpStream>, String, Option<u64>) {
    let addr = base.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(format!("{request}Host: {addr}\r\n\r\n").as_bytes())
        .await
        .expect("a request");
    let mut r = BufReader::new(s);
    let mut status = String::new();
    r.read_line(&mut status).await.expect("a status line");
    let mut length = None;
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.expect("a header");
        if line == "\r\n" {
            return (r, status, length);
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = Some(v.trim().parse().expect("a length"));
        }
    }
}

/// Opens an event stream on a raw socket and reads its head.
async fn open_stream(base: &str) -> BufReader<TcpStream> {
    let request = "GET /v1/events/stream HTTP/1.1\r\nAccept: text/event-stream\r\n";
    let (r, status, _) = raw_head(base, request).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    r
}

/// Reads the stream until `needle` comes, within [`PATIENCE`]; false if it ended first.
async fn stream_sees(r: &mut BufReader<TcpStream>, needle: &str) -> bool {
    let read = async {
        let mut line = String::new();
        loop {
            line.clear();
            match r.read_line(&mut line).await {
                Ok(0) | Err(_) => return false,
                Ok(_) if line.contains(needle) => return true,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(PATIENCE, read).await.unwrap_or(false)
}

/// Observed at c38adc7: 1,000 event streams, keepalives flowing, all closed at exactly the
/// idle timeout; 200 sockets that never sent a request knocked most of them off as "the longest
/// idle". Here the idle timeout is 1 s, the cap 150 connections: 100 streams outlive 100 silent
/// sockets, each closed by the idle timer or to make room, and each stream still gets the next
/// event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_outlive_the_idle_timeout_and_idle_sockets() {
    let s = start(ServerConfig {
        idle_timeout: Duration::from_secs(1),
        header_timeout: Duration::from_secs(1),
        max_connections: 150,
        ..ServerConfig::default()
    })
    .await;
    let mut streams = Vec::new();
    for _ in 0..100 {
        streams.push(open_stream(&s.base).await);
    }
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut silent = Vec::new();
    for _ in 0..100 {
        silent.push(TcpStream::connect(&addr).await.expect("connect"));
    }
    // Every silent socket closed by the server (the idle timer, or room made at the cap): a
    // stream taken for idle would have gone the same way.
    for (i, q) in silent.iter_mut().enumerate() {
        let mut byte = [0u8; 1];
        let closed = tokio::time::timeout(PATIENCE, q.read(&mut byte)).await;
        assert!(
            matches!(closed, Ok(Ok(0) | Err(_))),
            "silent socket {i} still open"
        );
    }
    // An event: a job scheduled for later, cancelled.
    let (st, _) = call(
        &s.base,
        "POST",
        "/v1/jobs",
        Some(json!({"id": "later", "run_at": "2099-01-01T00:00:00Z",
                    "request": {"method": "GET", "url": "http://127.0.0.1:9/x"}})),
    )
    .await;
    assert_eq!(st, 201);
    let (st, v) = call(&s.base, "POST", "/v1/jobs/later/cancel", None).await;
    assert_eq!(st, 200, "{v}");
    for (i, r) in streams.iter_mut().enumerate() {
        assert!(
            stream_sees(r, "job.cancelled").await,
            "stream {i} was cut before the event"
        );
    }
    s.stop().await;
}

/// A job with a big body, so that the database (and its backup) is larger than what loopback
/// sockets buffer.
async fn fill(base: &str, jobs: usize) {
    let body = "x".repeat(900_000);
    for i in 0..jobs {
        let (st, v) = call(
            base,
            "POST",
            "/v1/jobs",
            Some(json!({"id": format!("big-{i}"), "run_at": "2099-01-01T00:00:00Z",
                        "request": {"method": "POST", "url": "http://127.0.0.1:9/x", "body": body}})),
        )
        .await;
        assert_eq!(st, 201, "{v}");
    }
}

/// Starts `POST /v1/backup` on a raw socket and reads its head; answers the socket and the
/// body's length, or `None` when the server answered 503 (another backup holds the node's slot).
async fn try_backup(base: &str) -> Option<(BufReader<TcpStream>, u64)> {
    let request = "POST /v1/backup HTTP/1.1\r\nContent-Length: 0\r\n";
    let (r, status, length) = raw_head(base, request).await;
    if status.starts_with("HTTP/1.1 503") {
        return None;
    }
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    Some((r, length.expect("a Content-Length")))
}

/// Observed at c38adc7: a backup download read at 300 KB/s was cut by the idle timer after 26
/// MB of 213 MB. Here (idle timeout 1 s, write timeout 10 s) a reader that takes a little at a
/// time, for far longer than the idle timeout, gets the whole copy; one that stops reading is
/// cut by the write timeout; and while the first is being sent, a second backup is refused at
/// once (503 backup_in_progress: each copy takes the database's size on disk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_download_is_whole_a_stalled_one_is_cut_and_one_runs_at_a_time() {
    let s = start(ServerConfig {
        idle_timeout: Duration::from_secs(1),
        // Far above the reader's pauses, whatever the machine's load.
        write_timeout: Duration::from_secs(10),
        max_job_body_bytes: 1 << 20,
        ..ServerConfig::default()
    })
    .await;
    fill(&s.base, 30).await;

    let (mut slow, length) = try_backup(&s.base).await.expect("the first backup starts");
    assert!(length > 20_000_000, "a copy of {length} bytes");
    // While it is sent: a second is refused, with Retry-After.
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/backup", s.base))
        .send()
        .await
        .expect("an answer");
    assert_eq!(resp.status().as_u16(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    let v: Value = serde_json::from_slice(&resp.bytes().await.expect("a body")).expect("JSON");
    assert_eq!(code(&v), "backup_in_progress", "{v}");
    // 256 KiB every 50 ms: about 6 s for the whole copy, six idle timeouts.
    let mut got = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    while got < length {
        let n = slow.read(&mut buf).await.expect("reading the copy");
        assert!(n > 0, "cut after {got} of {length} bytes");
        got += n as u64;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(slow);

    // The next one starts once the first is done (the slot is freed when its body ends).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let (mut stalled, length) = loop {
        if let Some(started) = try_backup(&s.base).await {
            break started;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slot was never freed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Not read at all: the server gives up on it at the write timeout, and the node's backup
    // slot, which goes with the answer's body, is free again.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while try_backup(&s.base).await.is_none() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stalled download was never cut"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut got = 0u64;
    let read_all = async {
        loop {
            match stalled.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got += n as u64,
            }
        }
    };
    tokio::time::timeout(PATIENCE, read_all)
        .await
        .expect("the stalled download ended");
    assert!(got < length, "the stalled reader got the whole copy: {got}");
    s.stop().await;
}

/// Observed at c38adc7: a job enqueued into the `callbacks` queue with the idempotency key
/// `callback~completed~1.0~victim` arrived signed with the callbacks secret under that
/// `webhook-id`, and the genuine delivery, coming later under the same id, was dropped as a
/// repeat; a replay patched into `callbacks` was signed too. Every way in is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_redial_signs_its_own_deliveries() {
    let rx = Receiver::start().await;
    rx.script("/bad", vec![Reply::status(400)]);
    rx.script("/hook", vec![Reply::status(400)]);
    let s = start(ServerConfig::default()).await;
    let get = json!({"method": "GET", "url": rx.url("/ok")});
    for (what, path, body, want) in [
        (
            "an enqueue into callbacks",
            "/v1/jobs",
            json!({"queue": "callbacks", "request": get}),
            "reserved_queue",
        ),
        (
            "a batch into callbacks",
            "/v1/jobs/batch",
            json!({"jobs": [{"queue": "callbacks", "request": get}]}),
            "reserved_queue",
        ),
        (
            "a delivery's key",
            "/v1/jobs",
            json!({"idempotency_key": "callback~completed~1.0~victim", "request": get}),
            "invalid_idempotency_key",
        ),
        (
            "a notification's id",
            "/v1/jobs",
            json!({"id": "notify-ops-endpoint.paused-0123456789abcdef-1796000000000", "request": get}),
            "invalid_id",
        ),
        (
            "a notification's key",
            "/v1/jobs",
            json!({"idempotency_key": "notify-ops-endpoint.paused-0123456789abcdef-1796000000000", "request": get}),
            "invalid_idempotency_key",
        ),
        (
            "a schedule into callbacks",
            "/v1/schedules",
            json!({"id": "forge", "every": "1h", "job": {"queue": "callbacks", "request": get}}),
            "reserved_queue",
        ),
    ] {
        let (st, v) = call(&s.base, "POST", path, Some(body)).await;
        assert_eq!((st, code(&v)), (422, want), "{what}: {v}");
    }

    // A dead job, replayed into callbacks or with a delivery's key: refused.
    let (st, _) = call(
        &s.base,
        "POST",
        "/v1/jobs",
        Some(
            json!({"id": "victim", "request": {"method": "POST", "url": rx.url("/bad")},
                    "callback": {"url": rx.url("/hook")}}),
        ),
    )
    .await;
    assert_eq!(st, 201);
    wait_state(&s.base, "victim", "dead").await;
    let (st, v) = call(
        &s.base,
        "POST",
        "/v1/jobs/victim/replay",
        Some(json!({"patch": {"queue": "callbacks"}})),
    )
    .await;
    assert_eq!((st, code(&v)), (422, "reserved_queue"), "{v}");

    // Its callback's delivery (answered 400, so dead too): a replay with changes would sign a
    // forged body under the genuine webhook-id; refused. As it was, it may be replayed.
    let (_, list) = call(&s.base, "GET", "/v1/jobs?queue=callbacks", None).await;
    let delivery = list["jobs"][0]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a delivery: {list}"))
        .to_owned();
    wait_state(&s.base, &delivery, "dead").await;
    let (st, v) = call(
        &s.base,
        "POST",
        &format!("/v1/jobs/{delivery}/replay"),
        Some(json!({"patch": {"body": "{\"forged\": true}"}})),
    )
    .await;
    assert_eq!((st, code(&v)), (422, "reserved_queue"), "{v}");
    let (st, v) = call(
        &s.base,
        "POST",
        &format!("/v1/jobs/{delivery}/replay"),
        Some(json!({"patch": {"queue": "default"}})),
    )
    .await;
    assert_eq!((st, code(&v)), (422, "invalid_idempotency_key"), "{v}");
    let (st, v) = call(
        &s.base,
        "POST",
        &format!("/v1/jobs/{delivery}/replay"),
        None,
    )
    .await;
    assert_eq!(st, 200, "a plain replay of a dead delivery: {v}");
    s.stop().await;
}

/// Observed at c38adc7: enqueue took an endpoint with ESC, C1 `\u{9b}` or `\u{202e}`, which
/// pause and reset-breaker then refused; tags took ESC, NUL and U+2028. One rule now: what an
/// enqueue takes, every control takes, and such names are refused everywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_follow_one_rule_everywhere() {
    let s = start(ServerConfig::default()).await;
    let req = json!({"method": "GET", "url": "http://127.0.0.1:9/x"});
    for bad in [
        "api\u{1b}[31m",
        "api\u{9b}2J",
        "\u{202e}ipa",
        "two\u{2028}lines",
        "   ",
    ] {
        let (st, v) = call(
            &s.base,
            "POST",
            "/v1/jobs",
            Some(json!({"endpoint": bad, "request": req, "run_at": "2099-01-01T00:00:00Z"})),
        )
        .await;
        assert_eq!((st, code(&v)), (422, "invalid_endpoint"), "{bad:?}: {v}");
        let name: String = bad.bytes().map(|b| format!("%{b:02X}")).collect();
        let (st, v) = call(
            &s.base,
            "POST",
            &format!("/v1/endpoints/{name}/pause?create=true"),
            None,
        )
        .await;
        assert_eq!(
            (st, code(&v)),
            (422, "invalid_endpoint"),
            "pause {bad:?}: {v}"
        );
        let (st, v) = call(
            &s.base,
            "POST",
            "/v1/jobs",
            Some(json!({"tags": [bad], "request": req, "run_at": "2099-01-01T00:00:00Z"})),
        )
        .await;
        assert_eq!((st, code(&v)), (422, "invalid_tags"), "tag {bad:?}: {v}");
    }
    for tag in ["nul\u{0}here", "esc\u{1b}"] {
        let (st, v) = call(
            &s.base,
            "POST",
            "/v1/jobs",
            Some(json!({"tags": [tag], "request": req, "run_at": "2099-01-01T00:00:00Z"})),
        )
        .await;
        assert_eq!((st, code(&v)), (422, "invalid_tags"), "tag {tag:?}: {v}");
    }
    // A name enqueue takes (spaces, accents, punctuation) is one every control takes.
    let good = "Ops API (eu) — été";
    let (st, v) = call(
        &s.base,
        "POST",
        "/v1/jobs",
        Some(json!({"endpoint": good, "tags": [good], "request": req, "run_at": "2099-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let name: String = good.bytes().map(|b| format!("%{b:02X}")).collect();
    for control in ["pause", "resume", "reset-breaker"] {
        let (st, v) = call(
            &s.base,
            "POST",
            &format!("/v1/endpoints/{name}/{control}"),
            None,
        )
        .await;
        assert_eq!(st, 200, "{control} {good:?}: {v}");
    }
    s.stop().await;
}

/// Observed at c38adc7: `X-Webhook-Pass` and `X-Upstream-Pass` were shown in previews and to
/// the read-only token, and a response's `Location: https://user:PW@...?token=...` was kept as
/// it was in attempt records and callback bodies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_response_headers_and_pass_headers_are_redacted() {
    let rx = Receiver::start().await;
    rx.script(
        "/moved",
        vec![Reply::status(201)
            .header(
                "location",
                "https://user:PW1@api.example.com/next?token=T0K&page=2",
            )
            .header(
                "link",
                "<https://api.example.com/p?access_token=T0K2>; rel=\"next\"",
            )
            .header("x-upstream-pass", "UPSTREAM-SECRET")],
    );
    let s = start(ServerConfig::default()).await;
    let (st, v) = call(
        &s.base,
        "POST",
        "/v1/jobs",
        Some(
            json!({"id": "moved", "request": {"method": "POST", "url": rx.url("/moved"),
                    "headers": {"x-webhook-pass": "WEBHOOK-SECRET"}}}),
        ),
    )
    .await;
    assert_eq!(st, 201, "{v}");
    let job = wait_state(&s.base, "moved", "completed").await;
    let shown = job.to_string();
    for secret in ["PW1", "T0K", "T0K2", "UPSTREAM-SECRET", "WEBHOOK-SECRET"] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
    }
    assert!(
        shown.contains("page=2"),
        "what is not secret stays: {shown}"
    );
    s.stop().await;
}

/// Sends `raw` on a new connection and reads the answer's status line (within [`PATIENCE`]).
async fn status_of(addr: &str, raw: &str) -> String {
    let exchange = async {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(raw.as_bytes()).await.expect("a request");
        let mut r = BufReader::new(s);
        let mut line = String::new();
        r.read_line(&mut line)
            .await
            .unwrap_or_else(|e| panic!("the answer to {raw:?}: {e}"));
        line
    };
    tokio::time::timeout(PATIENCE, exchange)
        .await
        .expect("an answer in time")
}

/// Observed at c38adc7: 1,000 `?wait=60s` requests plus 60 POSTs whose bodies trickle in kept
/// `/healthz`, `/v1/stats` and enqueues from answering for about 30 s; 1,100 slow bodies alone
/// reset two thirds of other requests. Here (40 connections): every connection waiting for a
/// job, health and stats still answer from another client, and what cannot be served is
/// refused at once (503 busy, Retry-After); bodies arriving slowly hold a quarter of the
/// connections at most, and the ones beyond are refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_holder_cannot_lock_out_short_calls() {
    let s = start(ServerConfig {
        max_connections: 40,
        ..ServerConfig::default()
    })
    .await;
    let addr = s.base.trim_start_matches("http://").to_owned();
    let (st, _) = call(
        &s.base,
        "POST",
        "/v1/jobs",
        Some(json!({"id": "never", "run_at": "2099-01-01T00:00:00Z",
                    "request": {"method": "GET", "url": "http://127.0.0.1:9/x"}})),
    )
    .await;
    assert_eq!(st, 201);
    // Every connection waits for a job that will not finish.
    let mut waits = Vec::new();
    for _ in 0..40 {
        let mut w = TcpStream::connect(&addr).await.expect("connect");
        w.write_all(
            format!("GET /v1/jobs/never?wait=60s HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes(),
        )
        .await
        .expect("a wait");
        waits.push(w);
    }
    // Let them all reach the server before the short calls.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let line = status_of(
            &addr,
            &format!("POST /v1/jobs HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"),
        )
        .await;
        if line.starts_with("HTTP/1.1 503") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the waits never filled the server: {line}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for path in ["/healthz", "/readyz", "/v1/stats", "/v1/jobs/never"] {
        let line = status_of(
            &addr,
            &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(line.starts_with("HTTP/1.1 200"), "{path}: {line}");
    }
    let line = status_of(
        &addr,
        &format!("GET /v1/jobs/never?wait=1s HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
    )
    .await;
    assert!(line.starts_with("HTTP/1.1 503"), "another wait: {line}");
    drop(waits);
    s.stop().await;

    // Slow bodies, on a server of their own: 30 POSTs that announce 100 bytes and send one. A
    // quarter of the 40 connections (10) may be reading a body; the others are refused at
    // once, and the 10 end with 408 at the body timeout.
    let s = start(ServerConfig {
        max_connections: 40,
        // Long enough that the 30 heads all arrive while the first 10 bodies hold.
        body_timeout: Duration::from_secs(15),
        ..ServerConfig::default()
    })
    .await;
    let addr = s.base.trim_start_matches("http://").to_owned();
    let mut bodies = Vec::new();
    for _ in 0..30 {
        let mut b = TcpStream::connect(&addr).await.expect("connect");
        b.write_all(format!("POST /v1/jobs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{").as_bytes())
            .await
            .expect("a head and a byte");
        bodies.push(b);
    }
    // While they hold, health answers from another client.
    let line = status_of(
        &addr,
        &format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
    .await;
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    let mut reading = tokio::task::JoinSet::new();
    for mut b in bodies {
        reading.spawn(async move {
            let mut buf = [0u8; 12];
            tokio::time::timeout(PATIENCE, b.read_exact(&mut buf))
                .await
                .expect("an answer in time")
                .expect("a status line");
            String::from_utf8_lossy(&buf).into_owned()
        });
    }
    let answers: Vec<String> = reading.join_all().await;
    let refused = answers.iter().filter(|a| *a == "HTTP/1.1 503").count();
    let timed_out = answers.iter().filter(|a| *a == "HTTP/1.1 408").count();
    assert_eq!((refused, timed_out), (20, 10), "{answers:?}");
    s.stop().await;
}
