//! The event log (issue 33), end to end on both stores: the real binary, a receiver on loopback,
//! the Server-Sent Events stream read from a socket.
//!
//! A client reads part of the stream, drops the connection, and while it is away jobs finish,
//! die, are replayed and an endpoint is paused and resumed; it reconnects with `Last-Event-ID`
//! and gets exactly what it had not read: nothing missed, nothing twice, in the log's order,
//! the same as `GET /v1/events` pages. A filtered stream gets only its kinds.

use redial_test_receiver::{Receiver, Reply};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};

mod common;
use common::{eventually, exchange, status, Db, Place, Server, BIN, PATIENCE};

/// An open event stream: the raw socket, read line by line.
struct Stream {
    lines: BufReader<TcpStream>,
}

/// One event as the stream sent it.
#[derive(Clone, Debug, PartialEq)]
struct Sent {
    id: String,
    kind: String,
    data: Value,
}

impl Stream {
    /// Opens `GET /v1/events/stream{query}` (HTTP/1.0: the body is the raw stream, no chunks),
    /// with `Last-Event-ID` when given, and reads past the answer's head.
    fn open(addr: SocketAddr, query: &str, last: Option<&str>) -> Stream {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(PATIENCE)).expect("timeout");
        let last = last.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
        write!(
            s,
            "GET /v1/events/stream{query} HTTP/1.0\r\nHost: localhost\r\n{last}\r\n"
        )
        .expect("request written");
        let mut lines = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            lines.read_line(&mut line).expect("head line");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        assert!(head.starts_with("HTTP/1.0 200"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/event-stream"),
            "{head}"
        );
        Stream { lines }
    }

    /// The next event (keepalive comments skipped), waiting for it at most PATIENCE.
    fn next(&mut self) -> Sent {
        let (mut id, mut kind, mut data) = (None, None, None);
        loop {
            let mut line = String::new();
            let n = self
                .lines
                .read_line(&mut line)
                .expect("the stream goes on (an event within PATIENCE)");
            assert!(n > 0, "the stream ended");
            let line = line.trim_end_matches('\n');
            if line.is_empty() {
                if let (Some(id), Some(kind), Some(data)) = (id.take(), kind.take(), data.take()) {
                    return Sent { id, kind, data };
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("event: ") {
                kind = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(serde_json::from_str(v).expect("data is JSON"));
            } else {
                assert!(line.starts_with(':'), "unexpected line {line:?}");
            }
        }
    }

    /// The next `n` events.
    fn take(&mut self, n: usize) -> Vec<Sent> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn client(server: &Server) -> redial_client::Client {
    redial_client::Client::builder(&server.url)
        .build()
        .expect("client")
}

async fn enqueue(c: &redial_client::Client, jobs: Vec<Value>) {
    c.enqueue_batch(&jobs).await.expect("enqueue");
}

/// Waits until every job of `ids` is in a finished state.
async fn all_finished(c: &redial_client::Client, ids: &[String]) {
    for id in ids {
        eventually(&format!("job {id} finished"), || async {
            let j = c.job(id).await.expect("job");
            let state = serde_json::to_value(&j).expect("JSON")["state"].clone();
            (state == "completed" || state == "dead").then_some(())
        })
        .await;
    }
}

/// `GET {path}` on a connection of its own: the status and the body as JSON.
fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let answer = exchange(
        addr,
        &format!("GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n"),
    );
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (
        status(&answer),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// Every event of the log, through `GET /v1/events` pages of 7.
async fn paged(server: &Server) -> Vec<Value> {
    let addr = server.addr();
    let mut out = Vec::new();
    let mut after = String::new();
    loop {
        let path = format!("/v1/events?limit=7{after}");
        let page = tokio::task::spawn_blocking(move || get(addr, &path))
            .await
            .expect("GET /v1/events")
            .1;
        out.extend(page["events"].as_array().expect("events").iter().cloned());
        after = format!("&after={}", page["next_cursor"].as_str().expect("cursor"));
        if page["more"] == false {
            return out;
        }
    }
}

fn job_jobs(prefix: &str, n: usize, url: &str) -> Vec<Value> {
    (0..n)
        .map(|i| json!({"id": format!("{prefix}{i}"), "request": {"method": "POST", "url": url}}))
        .collect()
}

async fn resume_misses_nothing_and_repeats_nothing(db: Db) {
    let rx = Receiver::start().await;
    rx.script("/bad", vec![Reply::status(400)]);
    let place = Place::new(db).await;
    let server = place.serve("");
    let c = client(&server);
    let addr = server.addr();

    // First part: 8 jobs complete, 4 die (a 400 is never retried).
    let mut first: Vec<Value> = job_jobs("ok-", 8, &rx.url("/ok"));
    first.extend(job_jobs("bad-", 4, &rx.url("/bad")));
    let first_ids: Vec<String> = first
        .iter()
        .map(|j| j["id"].as_str().expect("id").to_owned())
        .collect();
    enqueue(&c, first).await;
    all_finished(&c, &first_ids).await;

    // A stream from the start of the log; the client reads 5 events and goes away (whatever
    // else the server sent is lost with the socket).
    let read_first = tokio::task::spawn_blocking(move || {
        let mut s = Stream::open(addr, "?after=0-0", None);
        s.take(5)
    })
    .await
    .expect("reader");
    let last = read_first.last().expect("events").id.clone();

    // While it is away: more jobs, a replay that dies again, an endpoint paused and resumed.
    let mut second: Vec<Value> = job_jobs("later-", 6, &rx.url("/ok"));
    second.extend(job_jobs("later-bad-", 2, &rx.url("/bad")));
    let second_ids: Vec<String> = second
        .iter()
        .map(|j| j["id"].as_str().expect("id").to_owned())
        .collect();
    enqueue(&c, second).await;
    all_finished(&c, &second_ids).await;
    c.replay("bad-0").await.expect("replay");
    eventually("the replayed job died again", || async {
        let j = serde_json::to_value(c.job("bad-0").await.expect("job")).expect("JSON");
        (j["state"] == "dead" && j["replays"] == 1).then_some(())
    })
    .await;
    let endpoint = format!("http://{}", rx.addr());
    let pause: redial_client::PauseInput =
        serde_json::from_value(json!({"reason": "maintenance window"})).expect("pause input");
    c.pause_endpoint(&endpoint, &pause).await.expect("pause");
    c.resume_endpoint(&endpoint).await.expect("resume");

    // 12 + 8 finishes, a replay, its second death, the pause and the resume.
    let total = 12 + 8 + 1 + 1 + 2;
    let log = eventually("every event is in the log", || async {
        let log = paged(&server).await;
        (log.len() >= total).then_some(log)
    })
    .await;
    assert_eq!(log.len(), total, "{log:#?}");

    // The client comes back with the last id it read, and reads everything after it.
    let rest = tokio::task::spawn_blocking(move || {
        let mut s = Stream::open(addr, "", Some(&last));
        s.take(total - 5)
    })
    .await
    .expect("reader");
    let mut seen: Vec<Sent> = read_first;
    seen.extend(rest);
    let ids: Vec<&str> = seen.iter().map(|e| e.id.as_str()).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), total, "nothing twice: {ids:?}");
    // The same events as the log, in its order.
    let log_ids: Vec<&str> = log.iter().map(|e| e["id"].as_str().expect("id")).collect();
    assert_eq!(ids, log_ids);
    for (sent, logged) in seen.iter().zip(&log) {
        assert_eq!(&sent.data, logged);
        assert_eq!(sent.kind, logged["type"].as_str().expect("type"));
    }
    let count = |kind: &str| seen.iter().filter(|e| e.kind == kind).count();
    assert_eq!(count("job.completed"), 14);
    assert_eq!(count("job.dead"), 7);
    assert_eq!(count("job.replayed"), 1);
    assert_eq!(count("endpoint.paused"), 1);
    assert_eq!(count("endpoint.resumed"), 1);
    let dead = seen.iter().find(|e| e.kind == "job.dead").expect("a death");
    assert_eq!(dead.data["category"], "permanent");
    assert!(dead.data["job_id"]
        .as_str()
        .is_some_and(|id| id.contains("bad-")));
    let paused = seen
        .iter()
        .find(|e| e.kind == "endpoint.paused")
        .expect("the pause");
    assert_eq!(paused.data["endpoint"], endpoint.as_str());
    assert_eq!(paused.data["reason"], "maintenance window");

    // A filtered stream from the start: only its kinds and queue.
    let dead_only = tokio::task::spawn_blocking(move || {
        let mut s = Stream::open(
            addr,
            "?after=0-0&kind=job.dead,job.replayed&queue=default",
            None,
        );
        s.take(8)
    })
    .await
    .expect("reader");
    assert!(dead_only
        .iter()
        .all(|e| e.kind == "job.dead" || e.kind == "job.replayed"));
    // From now on (no cursor): once the answer's head came, a job finished after it shows.
    // (On PostgreSQL "now" is the oldest transaction still running on the server, another
    // test's maybe: events a little older may come first, and they are ones already logged.)
    let (opened, is_open) = tokio::sync::oneshot::channel();
    let fresh = tokio::task::spawn_blocking(move || {
        let mut s = Stream::open(addr, "", None);
        opened.send(()).expect("told");
        let mut before = Vec::new();
        loop {
            let e = s.next();
            if e.data["job_id"] == "fresh-0" {
                return (before, e);
            }
            before.push(e.id);
        }
    });
    is_open.await.expect("the stream opened");
    enqueue(&c, job_jobs("fresh-", 1, &rx.url("/ok"))).await;
    let (before, fresh) = fresh.await.expect("reader");
    assert_eq!(fresh.kind, "job.completed");
    assert!(
        before.iter().all(|id| log_ids.contains(&id.as_str())),
        "{before:?}"
    );

    // The CLI: a page, and the stream followed from the start, a line per event.
    let out = std::process::Command::new(BIN)
        .args([
            "events",
            "--server",
            &server.url,
            "--kind",
            "job.replayed",
            "--json",
        ])
        .output()
        .expect("redial events");
    assert!(out.status.success(), "{out:?}");
    let page: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(page["events"][0]["job_id"], "bad-0");
    let out = std::process::Command::new(BIN)
        .args(["events", "--server", &server.url, "--kind", "job.replayed"])
        .output()
        .expect("redial events");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("job.replayed") && text.contains("bad-0"),
        "{text}"
    );
    let mut follow = follow_deaths(&server.url);
    let stdout = follow.stdout.take().expect("stdout");
    let first = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).expect("a line");
        line
    })
    .await
    .expect("reader");
    // Its reader gone, the command ends by itself at its next event (no panic on the closed
    // pipe): one more death makes one.
    enqueue(&c, job_jobs("last-bad-", 1, &rx.url("/bad"))).await;
    let ended = tokio::task::spawn_blocking(move || follow.wait_with_output())
        .await
        .expect("waiter")
        .expect("redial events --follow ended");
    assert!(ended.status.success(), "{ended:?}");
    assert!(
        !String::from_utf8_lossy(&ended.stderr).contains("panicked"),
        "{ended:?}"
    );
    assert!(
        first.contains("job.dead") && first.contains("permanent"),
        "{first}"
    );

    // Bad requests are refused with the documented codes.
    for (query, code) in [
        ("?after=x", "invalid_cursor"),
        ("?kind=job.done", "invalid_event_kind"),
        ("?limit=0", "invalid_limit"),
        ("?color=red", "unknown_parameter"),
    ] {
        let (status, body) = get(addr, &format!("/v1/events{query}"));
        assert_eq!(status, 400, "{query}");
        assert_eq!(body["error"]["code"], code, "{query}");
        let (status, body) = get(addr, &format!("/v1/events/stream{query}"));
        if query != "?limit=0" {
            assert_eq!(
                (status, &body["error"]["code"]),
                (400, &json!(code)),
                "{query}"
            );
        }
    }
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_event_stream_resumes_without_gaps_or_repeats() {
    resume_misses_nothing_and_repeats_nothing(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_event_stream_resumes_without_gaps_or_repeats() {
    resume_misses_nothing_and_repeats_nothing(Db::Postgres).await;
}

/// `redial events --follow` of the deaths from the start of the log, its output piped.
fn follow_deaths(server: &str) -> std::process::Child {
    std::process::Command::new(BIN)
        .args(["events", "--server", server, "--follow", "--after", "0-0"])
        .args(["--kind", "job.dead"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("redial events --follow")
}

/// The command's next line of output, within [`PATIENCE`].
async fn next_line(lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, lines.recv())
        .await
        .expect("a line in time")
        .expect("the command runs")
}

/// `redial serve` on `data`, listening on `port` (0: any).
fn serve_on(data: &std::path::Path, port: u16) -> Server {
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--allow-private-networks")
        .arg("--data-dir")
        .arg(data)
        .env_remove("REDIAL_TOKEN")
        .env_remove("REDIAL_CONFIG")
        .env_remove("REDIAL_DATABASE_URL")
        .env_remove("REDIAL_DATA_DIR")
        .env("REDIAL_LOG", "warn");
    Server::start(cmd)
}

/// Observed at c38adc7: `redial events --follow` exited 1 when its stream was cut ("error
/// decoding response body") and did not reconnect. Now a cut stream is reopened after the last
/// event printed: the server stops and starts again on the same address while the command
/// follows, and every death is printed once, before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_reopens_a_cut_stream_where_it_left_off() {
    let rx = Receiver::start().await;
    rx.script("/bad", vec![Reply::status(400), Reply::status(400)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let server = serve_on(&data, 0);
    let port = server.addr().port();
    let c = client(&server);
    let mut follow = follow_deaths(&server.url);
    let stdout = follow.stdout.take().expect("stdout");
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    enqueue(&c, job_jobs("first-", 1, &rx.url("/bad"))).await;
    let first = next_line(&mut lines).await;
    assert!(first.contains("first-0"), "{first}");

    // The stream is cut: the server stops, and comes back on the same address.
    server.terminate();
    let server = serve_on(&data, port);
    let c = client(&server);
    enqueue(&c, job_jobs("second-", 1, &rx.url("/bad"))).await;
    let second = next_line(&mut lines).await;
    assert!(
        second.contains("second-0"),
        "only what is new, once: {second}"
    );
    let _ = follow.kill();
    let out = follow.wait_with_output().expect("ended");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reopening"), "{stderr}");
    server.terminate();
}
