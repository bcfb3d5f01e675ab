//! The real `redial serve` against hostile clients over real sockets (issue 13): connections
//! that hold a slot and send nothing, slow heads and bodies, and requests a web page could send.
//! Every wait has a generous bound and asserts what happened, never how fast.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

mod common;
use common::{eventually_blocking, exchange, serve_command, serve_command_after, status, Server};

/// `redial serve` with `config` as its configuration file.
fn start(dir: &Path, config: &str) -> (Server, SocketAddr) {
    let file = dir.join("redial.toml");
    std::fs::write(&file, config).expect("config written");
    let mut cmd = serve_command();
    cmd.arg("--data-dir")
        .arg(dir.join("data"))
        .arg("--config")
        .arg(&file);
    let server = Server::start(cmd);
    let addr = server.addr();
    (server, addr)
}

fn get(addr: SocketAddr, path: &str) -> String {
    exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    )
}

fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut raw = format!("POST {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        raw.push_str("Host: 127.0.0.1\r\n");
    }
    for (k, v) in headers {
        raw.push_str(&format!("{k}: {v}\r\n"));
    }
    raw.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    exchange(addr, &raw)
}

/// Whether the server has closed `s` (a read returns end of file or a reset); never blocks.
fn closed(s: &mut TcpStream) -> bool {
    s.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 512];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // an answer (408...) before the close
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

/// The observation: with the open-file limit at 1,024, 1,100 sockets that send half a request
/// head and stop made `/healthz` and every call time out, and were never closed. Here the limit
/// is 256 and 400 such sockets connect: the connection cap is lowered to fit the limit, and at
/// the cap the longest-idle connection makes room, so a real client is still served.
#[test]
fn sockets_that_send_nothing_cannot_lock_out_a_real_client() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("redial.toml");
    // Long timeouts: only the cap is at work.
    std::fs::write(
        &file,
        "[server]\nheader_timeout = \"10m\"\nidle_timeout = \"10m\"\n",
    )
    .expect("config written");
    let mut cmd = serve_command_after("ulimit -n 256");
    cmd.arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--config")
        .arg(&file);
    let server = Server::start(cmd);
    let addr = server.addr();
    let hogs_count = 400;
    let mut hogs: Vec<TcpStream> = (0..hogs_count)
        .map(|_| {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.write_all(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n")
                .expect("half a head");
            s
        })
        .collect();
    let answer = get(addr, "/healthz");
    assert_eq!(status(&answer), 200, "{answer}");
    let answer = get(addr, "/v1/stats");
    assert_eq!(status(&answer), 200, "{answer}");
    // Everything beyond the cap was closed to make room: 256 files hold at most 256 sockets.
    eventually_blocking("the idle sockets beyond the cap are closed", || {
        hogs.iter_mut().map(closed).filter(|c| *c).count() >= hogs_count - 256
    });
    assert!(
        server
            .logs()
            .iter()
            .any(|l| l.contains("max_connections lowered")),
        "the lowered cap is logged: {:?}",
        server.logs()
    );
    drop(hogs);
    server.terminate();
}

#[test]
fn slow_heads_slow_bodies_and_idle_connections_are_closed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server, addr) = start(
        dir.path(),
        "[server]\nheader_timeout = \"1s\"\nidle_timeout = \"2s\"\nbody_timeout = \"1s\"\n",
    );
    // Connected, never a byte.
    let mut silent = TcpStream::connect(addr).expect("connect");
    // Half a head, then nothing.
    let mut half_head = TcpStream::connect(addr).expect("connect");
    half_head
        .write_all(b"GET /v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .expect("half a head");
    // One request served on a keep-alive connection, then nothing.
    let mut kept = TcpStream::connect(addr).expect("connect");
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .expect("a request");
    let mut first = [0u8; 12];
    kept.read_exact(&mut first).expect("the answer begins");
    assert_eq!(&first, b"HTTP/1.1 200");
    eventually_blocking("the silent connection is closed", || closed(&mut silent));
    eventually_blocking("the half head is closed", || closed(&mut half_head));
    eventually_blocking("the idle keep-alive connection is closed", || {
        closed(&mut kept)
    });

    // A body announced and never finished: 408 with the API's error shape, then the close.
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout set");
    s.write_all(
        b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"request\":",
    )
    .expect("head and part of the body");
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .expect("answer, then end of file");
    assert_eq!(status(&answer), 408, "{answer}");
    assert!(answer.contains("\"request_timeout\""), "{answer}");

    // The server still serves.
    assert_eq!(status(&get(addr, "/healthz")), 200);
    server.terminate();
}

/// The observation: a `text/plain` POST from another site with a rebound `Host` created a job,
/// and an empty bulk dismiss dismissed every dead letter. Over a real socket, each is refused;
/// an origin named in `server.allowed_origins` may call the API (CORS).
#[test]
fn a_hostile_page_is_refused_over_real_sockets() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server, addr) = start(
        dir.path(),
        "[server]\nallowed_origins = [\"http://ops.example\"]\n",
    );
    let job = r#"{"request": {"url": "http://127.0.0.1:9/hook", "method": "POST"}}"#;
    let port = addr.port().to_string();
    let rebound = format!("rebind.attacker.example:{port}");
    type Case<'a> = (Vec<(&'a str, &'a str)>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (
            vec![("Host", &rebound), ("Content-Type", "text/plain")],
            403,
            "foreign_host",
        ),
        (
            vec![
                ("Origin", "http://attacker.example"),
                ("Content-Type", "text/plain"),
            ],
            403,
            "cross_site",
        ),
        (
            vec![
                ("Sec-Fetch-Site", "cross-site"),
                ("Content-Type", "application/json"),
            ],
            403,
            "cross_site",
        ),
        (
            vec![("Content-Type", "text/plain")],
            415,
            "unsupported_media_type",
        ),
    ];
    for (headers, want, code) in cases {
        let answer = post(addr, "/v1/jobs", &headers, job);
        assert_eq!(status(&answer), want, "{headers:?}: {answer}");
        assert!(answer.contains(code), "{headers:?}: {answer}");
    }
    let answer = post(
        addr,
        "/v1/dead-letters/dismiss",
        &[("Content-Type", "application/json")],
        "",
    );
    assert_eq!(status(&answer), 422, "{answer}");
    assert!(answer.contains("filter_required"), "{answer}");
    // Nothing was created by any of the above.
    let stats = get(addr, "/v1/jobs");
    assert!(stats.contains("\"jobs\":[]"), "{stats}");

    // The allowed origin: a preflight, then the call, both with the CORS headers.
    let preflight = exchange(
        addr,
        "OPTIONS /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://ops.example\r\nAccess-Control-Request-Method: POST\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&preflight), 204, "{preflight}");
    let lower = preflight.to_ascii_lowercase();
    assert!(
        lower.contains("access-control-allow-origin: http://ops.example"),
        "{preflight}"
    );
    let answer = post(
        addr,
        "/v1/jobs",
        &[
            ("Origin", "http://ops.example"),
            ("Sec-Fetch-Site", "cross-site"),
            ("Content-Type", "application/json"),
        ],
        job,
    );
    assert_eq!(status(&answer), 201, "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("access-control-allow-origin: http://ops.example"),
        "{answer}"
    );
    server.terminate();
}

/// What hyper answers itself (a head, URL or headers, over 64 KiB; bytes that are not HTTP) has
/// the API's error shape too, like every other error.
#[test]
fn requests_too_big_or_broken_to_parse_get_json_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server, addr) = start(dir.path(), "");
    let long_url = format!(
        "GET /v1/jobs/{} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        "a".repeat(100_000)
    );
    let big_head = format!(
        "GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Filler: {}\r\nConnection: close\r\n\r\n",
        "a".repeat(100_000)
    );
    for (raw, want, code) in [
        (long_url.as_str(), 431, "headers_too_large"),
        (big_head.as_str(), 431, "headers_too_large"),
        ("NOT HTTP AT ALL\r\n\r\n", 400, "bad_request"),
    ] {
        let answer = exchange(addr, raw);
        assert_eq!(status(&answer), want, "{answer}");
        let lower = answer.to_ascii_lowercase();
        assert!(lower.contains("content-type: application/json"), "{answer}");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or("");
        let v: serde_json::Value = serde_json::from_str(body).expect("a JSON body");
        assert_eq!(v["error"]["code"], code, "{answer}");
    }
    // A method a route does not take: 405 with the methods it takes in Allow.
    let answer = exchange(
        addr,
        "PUT /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status(&answer), 405, "{answer}");
    assert!(answer.contains("\"method_not_allowed\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("allow: post,get"),
        "{answer}"
    );
    server.terminate();
}
