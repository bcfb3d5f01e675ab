//! The real `redial serve` process and the real CLI, against a scripted receiver on loopback:
//! the quick start, restart on the same data, rescue after SIGKILL, auth, dedup, replay, files.

use redial_test_receiver::{Receiver, Reply};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;
use common::{eventually, serve_command, within_patience_blocking, Server, BIN};

/// `redial serve` on `data`, with `extra` arguments and `env` variables.
fn start(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(data).args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Server::start(cmd)
}

struct Out {
    code: i32,
    json: Value,
    stdout: String,
    stderr: String,
}

/// Runs a CLI command with `--json` and parses what it printed.
fn cli(server: &str, args: &[&str], token: Option<&str>) -> Out {
    let mut with_json = args.to_vec();
    if !with_json.contains(&"--json") {
        with_json.push("--json");
    }
    cli_text(server, &with_json, token)
}

/// Runs a CLI command as a person would (text output); `json` is set only if it printed JSON.
fn cli_text(server: &str, args: &[&str], token: Option<&str>) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("REDIAL_SERVER", server)
        .env_remove("REDIAL_TOKEN");
    if let Some(t) = token {
        cmd.env("REDIAL_TOKEN", t);
    }
    let out = cmd.output().expect("the CLI runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn show(server: &str, id: &str) -> Value {
    let out = cli(server, &["jobs", "show", id], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json
}

/// Waits until the job, as `redial jobs show` prints it, satisfies `pred`.
fn wait_for(server: &str, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let shown = within_patience_blocking(|| {
        let j = show(server, id);
        pred(&j).then_some(j)
    });
    shown.unwrap_or_else(|| panic!("job {id} never became {what}: {}", show(server, id)))
}

fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    (dir, data)
}

#[tokio::test(flavor = "multi_thread")]
async fn quick_start_rate_limit_then_success() {
    let rx = Receiver::start().await;
    rx.script(
        "/hook",
        vec![
            Reply::status(429).header("Retry-After", "1"),
            Reply::status(200),
        ],
    );
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    let out = cli(
        &s.url,
        &[
            "enqueue",
            "--id",
            "q1",
            "--url",
            &rx.url("/hook"),
            "--body",
            "{\"a\":1}",
        ],
        None,
    );
    assert_eq!(
        (out.code, out.json["state"].as_str()),
        (0, Some("ready")),
        "{}",
        out.stderr
    );
    let j = wait_for(&s.url, "q1", "completed", |j| j["state"] == "completed");
    assert_eq!(
        (
            j["attempts"].as_u64(),
            j["deferrals"].as_u64(),
            j["runs"].as_u64()
        ),
        (Some(0), Some(1), Some(2))
    );
    let log = j["attempt_log"].as_array().expect("attempt log");
    assert_eq!(
        log[0]["reason"],
        "429 rate limited; Retry-After 1s; deferral 1 of 20"
    );
    assert_eq!(log[0]["server_wait_ms"], 1000);
    assert!(
        log[0]["delay_ms"].as_u64().expect("delay") >= 1000,
        "never earlier than the server's instant"
    );
    let keys: Vec<_> = rx
        .received("/hook")
        .iter()
        .map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert!(
        keys[0].is_some() && keys[0] == keys[1],
        "the same idempotency key on both attempts: {keys:?}"
    );
    s.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn restart_on_the_same_data_loses_nothing() {
    let rx = Receiver::start().await;
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    let later = "2099-01-01T00:00:00Z";
    let out = cli(
        &s.url,
        &[
            "enqueue",
            "--id",
            "later",
            "--url",
            &rx.url("/x"),
            "--run-at",
            later,
        ],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = cli(
        &s.url,
        &["enqueue", "--id", "now", "--url", &rx.url("/x")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    wait_for(&s.url, "now", "completed", |j| j["state"] == "completed");
    s.terminate();

    let s = start(&data, &[], &[]);
    let j = show(&s.url, "later");
    assert_eq!(
        (j["state"].as_str(), j["run_at"].as_str()),
        (Some("scheduled"), Some(later))
    );
    assert_eq!(show(&s.url, "now")["state"], "completed");
    assert_eq!(rx.count("/x"), 1);
    s.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_whose_process_is_killed_mid_attempt_is_rescued() {
    let rx = Receiver::start().await;
    rx.script(
        "/slow",
        vec![
            Reply::status(200).delay(Duration::from_secs(120)),
            Reply::status(200),
        ],
    );
    let (dir, data) = temp();
    let config = dir.path().join("redial.toml");
    std::fs::write(&config, "[engine]\nlease = \"1s\"\nheartbeat = \"200ms\"\n")
        .expect("write config");
    let config = config.to_str().expect("utf-8 path");
    let mut a = start(&data, &["--config", config], &[]);
    let out = cli(
        &a.url,
        &[
            "enqueue",
            "--id",
            "k",
            "--url",
            &rx.url("/slow"),
            "--timeout",
            "5m",
        ],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    wait_for(&a.url, "k", "running", |j| j["state"] == "running");
    eventually("the attempt reached the receiver", || async {
        rx.count("/slow") > 0
    })
    .await;
    a.kill9();

    let b = start(&data, &["--config", config], &[]);
    let j = wait_for(&b.url, "k", "completed", |j| j["state"] == "completed");
    assert_eq!(
        (j["stalls"].as_u64(), j["attempts"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(rx.count("/slow"), 2);
    let keys: Vec<_> = rx
        .received("/slow")
        .iter()
        .map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert_eq!(keys[0], keys[1], "the rescued attempt sends the same key");
    b.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_and_unsafe_binds() {
    let (_dir, data) = temp();
    let s = start(&data, &[], &[("REDIAL_TOKEN", "t0k3n")]);
    let out = cli(&s.url, &["stats"], None);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("401 unauthorized"), "{}", out.stderr);
    assert_eq!(cli(&s.url, &["stats", "--json"], Some("t0k3n")).code, 0);
    s.terminate();

    let out = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(&data)
        .env_remove("REDIAL_TOKEN")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("without a token"));

    // A token set to spaces is refused at start, not taken as no token (issue 13).
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("REDIAL_TOKEN", "   ")
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("only spaces"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Spaces around a token are not part of it.
    let s = start(&data, &[], &[("REDIAL_TOKEN", "t0k3n ")]);
    assert_eq!(cli(&s.url, &["stats", "--json"], Some("t0k3n")).code, 0);
    s.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_config_file_fails_at_start_with_file_and_line() {
    let (dir, data) = temp();
    let config = dir.path().join("bad.toml");
    std::fs::write(
        &config,
        "[engine]\nlease = \"1s\"\n\n[queues.emails]\nconcurency = 4\n",
    )
    .expect("write");
    let out = Command::new(BIN)
        .args(["serve", "--data-dir"])
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.toml") && err.contains("line 5") && err.contains("concurency"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn dedup_replay_bulk_replay_and_cancel_from_the_cli() {
    let rx = Receiver::start().await;
    rx.script("/reject", vec![Reply::status(400)]);
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    let args = ["enqueue", "--id", "d1", "--url", &rx.url("/reject")];
    assert_eq!(cli(&s.url, &args, None).json["deduplicated"], false);
    let again = cli(&s.url, &args, None);
    assert_eq!(
        (again.code, &again.json["deduplicated"]),
        (0, &Value::Bool(true))
    );
    let conflict = cli(
        &s.url,
        &["enqueue", "--id", "d1", "--url", &rx.url("/other")],
        None,
    );
    assert_eq!(conflict.code, 1);
    assert!(
        conflict.stderr.contains("409 conflict"),
        "{}",
        conflict.stderr
    );

    wait_for(&s.url, "d1", "dead", |j| {
        j["state"] == "dead" && j["category"] == "permanent"
    });
    let out = cli(&s.url, &["jobs", "replay", "d1"], None);
    assert_eq!(
        (out.code, out.json["replays"].as_u64()),
        (0, Some(1)),
        "{}",
        out.stderr
    );
    let j = wait_for(&s.url, "d1", "dead again", |j| {
        j["state"] == "dead" && j["runs"] == 2
    });
    assert_eq!(
        j["attempt_log"].as_array().map(Vec::len),
        Some(2),
        "history kept across the replay"
    );
    let out = cli(
        &s.url,
        &["dead-letters", "replay", "--category", "permanent"],
        None,
    );
    assert_eq!(
        (out.code, out.json["affected"].as_u64()),
        (0, Some(1)),
        "{}",
        out.stderr
    );
    wait_for(&s.url, "d1", "dead a third time", |j| {
        j["state"] == "dead" && j["runs"] == 3
    });
    let out = cli(
        &s.url,
        &["dead-letters", "dismiss", "--queue", "default"],
        None,
    );
    assert_eq!(out.json["affected"].as_u64(), Some(1));
    assert_eq!(cli(&s.url, &["jobs", "show", "d1"], None).code, 1);
    // With no filter it takes --all to act on every dead letter (issue 13).
    let out = cli(&s.url, &["dead-letters", "dismiss"], None);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("--all"), "{}", out.stderr);
    let out = cli(&s.url, &["dead-letters", "dismiss", "--all"], None);
    assert_eq!(
        (out.code, out.json["affected"].as_u64()),
        (0, Some(0)),
        "{}",
        out.stderr
    );

    let out = cli(
        &s.url,
        &[
            "enqueue",
            "--id",
            "c1",
            "--url",
            &rx.url("/x"),
            "--run-at",
            "2099-01-01T00:00:00Z",
        ],
        None,
    );
    assert_eq!(out.code, 0);
    let out = cli(&s.url, &["jobs", "cancel", "c1"], None);
    assert_eq!(out.json["state"], "cancelled");
    let out = cli(
        &s.url,
        &["jobs", "list", "--state", "cancelled", "--json"],
        None,
    );
    assert_eq!(out.json.as_array().map(Vec::len), Some(1));
    s.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn enqueue_ndjson_in_batches() {
    let rx = Receiver::start().await;
    let (dir, data) = temp();
    let s = start(&data, &["--config", "/dev/null"], &[]);
    let file = dir.path().join("jobs.ndjson");
    let mut text = String::new();
    for i in 0..1200 {
        text.push_str(&format!(
            "{{\"id\":\"n{i}\",\"request\":{{\"method\":\"POST\",\"url\":\"{}\"}},\"run_at\":\"2099-01-01T00:00:00Z\"}}\n\n",
            rx.url("/bulk")
        ));
    }
    std::fs::write(&file, text).expect("write");
    let out = cli(
        &s.url,
        &["enqueue", "--file", file.to_str().expect("utf-8")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        (out.json["inserted"].as_u64(), out.json["total"].as_u64()),
        (Some(1200), Some(1200))
    );
    // Not a terminal: progress as plain lines, the last one complete.
    assert!(
        out.stderr.contains("] 1,200/1,200 jobs (100%), "),
        "{}",
        out.stderr
    );
    let again = cli(
        &s.url,
        &["enqueue", "--file", file.to_str().expect("utf-8")],
        None,
    );
    assert_eq!(again.json["deduplicated"].as_u64(), Some(1200));
    std::fs::write(
        &file,
        "{\"request\": {\"method\": \"GET\", \"url\": \"https://a.example/\"}}\nnot json\n",
    )
    .expect("write");
    let bad = cli(
        &s.url,
        &["enqueue", "--file", file.to_str().expect("utf-8")],
        None,
    );
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("line 2"), "{}", bad.stderr);
    s.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn endpoints_show_a_shared_pause() {
    let rx = Receiver::start().await;
    rx.script(
        "/busy",
        vec![Reply::status(429).header("Retry-After", "3600")],
    );
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    assert_eq!(
        cli(
            &s.url,
            &["enqueue", "--id", "p1", "--url", &rx.url("/busy")],
            None
        )
        .code,
        0
    );
    wait_for(&s.url, "p1", "deferred", |j| j["state"] == "deferred");
    assert_eq!(
        cli(
            &s.url,
            &["enqueue", "--id", "p2", "--url", &rx.url("/busy")],
            None
        )
        .code,
        0
    );
    let origin = format!("http://{}", rx.addr());
    let out = cli(&s.url, &["endpoints", "show", &origin], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.json["pause_reason"]
            .as_str()
            .is_some_and(|r| r.contains("429 rate limited; Retry-After 1h")),
        "{}",
        out.json
    );
    assert_eq!(
        out.json["held"], 1,
        "the second job is held by the pause: {}",
        out.json
    );
    let list = cli(&s.url, &["endpoints", "--json"], None);
    assert_eq!(list.json["endpoints"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        rx.count("/busy"),
        1,
        "one 429, then nothing until the pause ends"
    );
    s.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn hand_pauses_from_the_cli_hold_through_a_restart_until_resumed() {
    let rx = Receiver::start().await;
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    let origin = rx.url("").trim_end_matches('/').to_owned();
    let out = cli(
        &s.url,
        &[
            "endpoints",
            "pause",
            &origin,
            "--reason",
            "provider maintenance",
            "--json",
        ],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json["paused_by_hand"]["reason"], "provider maintenance");
    let out = cli(
        &s.url,
        &["queues", "pause", "default", "--for", "1h", "--json"],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.json["paused_by_hand"]["until"].is_string(),
        "{}",
        out.json
    );
    let out = cli(&s.url, &["queues", "resume", "default", "--json"], None);
    assert_eq!(
        (out.code, &out.json["paused_by_hand"]),
        (0, &Value::Null),
        "{}",
        out.stderr
    );
    let out = cli(
        &s.url,
        &["enqueue", "--id", "held", "--url", &rx.url("/x")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    s.terminate();

    // The pause outlives the process.
    let s = start(&data, &[], &[]);
    let out = cli(&s.url, &["endpoints", "show", &origin], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.json["paused_by_hand"]["reason"], "provider maintenance");
    let holding = out.json["holding"].as_str().unwrap_or_default().to_owned();
    assert!(holding.starts_with("paused by hand"), "{holding}");
    assert_eq!(show(&s.url, "held")["state"], "ready");
    assert_eq!(rx.count("/x"), 0);
    // Bad input is refused with the API's words.
    let out = cli(
        &s.url,
        &["endpoints", "pause", &origin, "--for", "soon"],
        None,
    );
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("invalid_pause"), "{}", out.stderr);
    let out = cli(&s.url, &["endpoints", "resume", &origin], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    wait_for(&s.url, "held", "completed", |j| j["state"] == "completed");
    assert_eq!(rx.count("/x"), 1);
    s.terminate();
}

#[tokio::test(flavor = "multi_thread")]
async fn cli_messages_point_the_right_way() {
    let (dir, data) = temp();
    let s = start(&data, &[], &[("REDIAL_TOKEN", "sesame")]);
    let bare = s.url.trim_start_matches("http://").to_owned();
    // An address without a scheme is taken as http://, and flags may come before the command.
    let out = cli(&bare, &["stats", "--json"], Some("sesame"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = Command::new(BIN)
        .args(["--server", &s.url, "--token", "sesame", "stats", "--json"])
        .env_remove("REDIAL_SERVER")
        .env_remove("REDIAL_TOKEN")
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A 401 says what to set.
    let out = cli(&s.url, &["stats"], None);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("set REDIAL_TOKEN"), "{}", out.stderr);
    let out = cli(&s.url, &["stats"], Some("wrong"));
    assert!(out.stderr.contains("refused the token"), "{}", out.stderr);
    // A job the API refuses is named by its line in the file.
    let file = dir.path().join("jobs.ndjson");
    std::fs::write(
        &file,
        "{\"request\": {\"method\": \"GET\", \"url\": \"https://a.example/\"}}\n\n{\"request\": {\"method\": \"GET\", \"url\": \"not a url\"}}\n",
    )
    .expect("write");
    let out = cli(
        &s.url,
        &["enqueue", "--file", file.to_str().expect("utf-8")],
        Some("sesame"),
    );
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("jobs.ndjson, line 3: "),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("jobs[1]"), "{}", out.stderr);
    assert!(
        out.stderr.contains("nothing from lines 1 to 3 was stored"),
        "{}",
        out.stderr
    );
    s.terminate();
    // Nobody there: where to look.
    let out = cli(&bare, &["stats"], None);
    assert!(
        out.stderr.contains("is `redial serve` running there?"),
        "{}",
        out.stderr
    );
    // Not an address at all.
    let out = cli("ftp://x", &["stats"], None);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("not an http:// or https://"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cli_speaks_to_people_by_default_and_json_on_request() {
    let rx = Receiver::start().await;
    rx.script(
        "/nope",
        vec![Reply::status(404).body(&format!("<html>{}</html>", "page ".repeat(2000)))],
    );
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    let out = cli_text(
        &s.url,
        &["enqueue", "--id", "hello", "--url", &rx.url("/ok")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("job hello enqueued: "),
        "{}",
        out.stdout
    );
    let out = cli_text(
        &s.url,
        &["enqueue", "--id", "missing", "--url", &rx.url("/nope")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    wait_for(&s.url, "missing", "dead", |j| j["state"] == "dead");
    wait_for(&s.url, "hello", "completed", |j| j["state"] == "completed");

    // jobs list: columns that mean what their header says.
    let out = cli_text(&s.url, &["jobs", "list"], None);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(
        lines[0].starts_with("ID ") && lines[0].contains("REQUESTS") && lines[0].contains("FAILED"),
        "{}",
        out.stdout
    );
    let missing = lines
        .iter()
        .find(|l| l.starts_with("missing"))
        .expect("a row");
    let cells: Vec<&str> = missing.split_whitespace().collect();
    // id, queue, state (category), requests 1, failed 0, deferred 0
    assert_eq!(
        &cells[..6],
        ["missing", "default", "dead", "(permanent)", "1", "0"],
        "{missing}"
    );

    // jobs show: a summary and a timeline, the receiver's page cut to a line.
    let out = cli_text(&s.url, &["jobs", "show", "missing"], None);
    assert!(
        out.stdout.starts_with("job missing  dead (permanent)\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("#  STARTED"), "{}", out.stdout);
    assert!(out.stdout.contains("404"), "{}", out.stdout);
    assert!(
        out.stdout.contains("last response body: <html>page page"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.len() < 3000, "{} bytes", out.stdout.len());
    // The same as JSON, both spellings.
    let a = cli_text(&s.url, &["jobs", "show", "missing", "--json"], None);
    let b = cli_text(&s.url, &["jobs", "show", "missing", "-o", "json"], None);
    assert_eq!(a.json["id"], "missing");
    assert_eq!(a.json, b.json);

    for (args, starts) in [
        (vec!["stats"], "QUEUE"),
        (vec!["endpoints"], "ENDPOINT"),
        (vec!["queues"], "QUEUE"),
    ] {
        let out = cli_text(&s.url, &args, None);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(out.stdout.starts_with(starts), "{args:?}: {}", out.stdout);
        let json = cli(&s.url, &args, None);
        assert!(json.json.is_object(), "{args:?} --json: {}", json.stderr);
    }
    let origin = rx.url("").trim_end_matches('/').to_owned();
    let out = cli_text(&s.url, &["endpoints", "show", &origin], None);
    assert!(
        out.stdout.starts_with(&format!("endpoint {origin}\n")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("  breaker "), "{}", out.stdout);

    let out = cli_text(&s.url, &["jobs", "replay", "missing"], None);
    assert!(
        out.stdout.starts_with("job missing replayed: ready"),
        "{}",
        out.stdout
    );
    wait_for(&s.url, "missing", "dead again", |j| {
        j["state"] == "dead" && j["replays"] == 1
    });
    let out = cli_text(
        &s.url,
        &["dead-letters", "dismiss", "--queue", "default"],
        None,
    );
    assert_eq!(out.stdout.trim(), "1 dead jobs dismissed", "{}", out.stderr);
    s.terminate();
}

/// Schedules from the configuration file and from the CLI: the file's are saved at start and
/// their occurrences run as jobs; one removed from the file is deleted at the next start, one made
/// through the API stays; a bad one refuses the start, naming it.
#[tokio::test(flavor = "multi_thread")]
async fn schedules_from_the_config_file_and_the_cli() {
    let rx = Receiver::start().await;
    rx.script("/tick", vec![Reply::status(200)]);
    let (dir, data) = temp();
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        format!(
            "[[schedules]]\nid = \"tick\"\nevery = \"1s\"\nmissed = \"skip\"\n\
             job = {{ request = {{ method = \"POST\", url = \"{}\" }} }}\n\n\
             [[schedules]]\nid = \"nightly\"\ncron = \"0 3 * * *\"\ntimezone = \"Europe/Berlin\"\n\
             job = {{ request = {{ method = \"POST\", url = \"https://api.example.com/n\" }} }}\n",
            rx.url("/tick")
        ),
    )
    .expect("write config");
    let config = config.to_str().expect("utf-8 path");
    let s = start(&data, &["--config", config], &[]);
    let listed = cli(&s.url, &["schedules"], None);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let ids: Vec<(&str, &str)> = listed.json["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().expect("id"),
                s["source"].as_str().expect("source"),
            )
        })
        .collect();
    assert_eq!(ids, [("nightly", "config"), ("tick", "config")]);
    // Occurrences arrive at the receiver as ordinary jobs, each with its own key.
    eventually("two occurrences arrived", || async {
        rx.count("/tick") >= 2
    })
    .await;
    let keys: std::collections::HashSet<String> = rx
        .received("/tick")
        .iter()
        .filter_map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert!(keys.len() >= 2, "each occurrence has its own key: {keys:?}");
    let made = cli(
        &s.url,
        &[
            "schedules",
            "create",
            "by-hand",
            "--every",
            "1h",
            "--url",
            "https://api.example.com/h",
        ],
        None,
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    assert_eq!(made.json["source"], "api");
    let shown = cli_text(&s.url, &["schedules", "show", "nightly"], None);
    assert!(
        shown.stdout.contains("cron \"0 3 * * *\" in Europe/Berlin"),
        "{}",
        shown.stdout
    );
    s.terminate();

    // The file without schedules: the file's are deleted, the one made by hand stays.
    std::fs::write(dir.path().join("redial.toml"), "").expect("rewrite config");
    let s = start(&data, &["--config", config], &[]);
    let listed = cli(&s.url, &["schedules"], None);
    let ids: Vec<&str> = listed.json["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["by-hand"]);
    s.terminate();

    // A bad schedule refuses the start and says which and why.
    std::fs::write(
        dir.path().join("redial.toml"),
        "[[schedules]]\nid = \"bad\"\ncron = \"0 9 * *\"\njob = { request = { method = \"POST\", url = \"https://api.example.com/\" } }\n",
    )
    .expect("rewrite config");
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(["--config", config])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("schedules[0]") && err.contains("give 5"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn groups_from_the_config_file_the_api_and_the_cli() {
    let rx = Receiver::start().await;
    let (dir, data) = temp();
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        "[queues.default]\ngroup_concurrency = 2\ngroup_rate = \"10/s\"\n\n\
         [queues.default.groups.vip]\nconcurrency = 5\nweight = 3\n",
    )
    .expect("write config");
    let config_arg = config.to_str().expect("utf-8 path");
    let s = start(&data, &["--config", config_arg], &[]);
    // Jobs for later stay waiting, to be counted.
    for (group, n) in [("acme", 3), ("vip", 2)] {
        for i in 0..n {
            let out = cli(
                &s.url,
                &[
                    "enqueue",
                    "--url",
                    &rx.url("/g"),
                    "--group",
                    group,
                    "--id",
                    &format!("{group}-{i}"),
                    "--run-at",
                    "2999-01-01T00:00:00Z",
                ],
                None,
            );
            assert_eq!(out.code, 0, "{}", out.stderr);
            assert_eq!(out.json["group"], group);
        }
    }
    let shown = cli_text(&s.url, &["jobs", "show", "vip-0"], None);
    assert!(shown.stdout.contains("group     vip"), "{}", shown.stdout);
    let groups = cli(&s.url, &["queues", "groups", "default"], None);
    assert_eq!(groups.code, 0, "{}", groups.stderr);
    assert_eq!(groups.json["total"], 2);
    let rows: Vec<(String, u64, Value, Value, u64)> = groups.json["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["group"].as_str().expect("group").to_owned(),
                g["waiting"].as_u64().expect("waiting"),
                g["limits"]["concurrency"].clone(),
                g["limits"]["rate"].clone(),
                g["limits"]["weight"].as_u64().expect("weight"),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "acme".to_owned(),
                3,
                Value::from(2),
                Value::from("10/1s"),
                1
            ),
            ("vip".to_owned(), 2, Value::from(5), Value::from("10/1s"), 3),
        ]
    );
    let text = cli_text(&s.url, &["queues", "groups", "default"], None);
    assert!(
        text.stdout.contains("2 group(s) with work") && text.stdout.contains("vip"),
        "{}",
        text.stdout
    );
    let unknown = cli(&s.url, &["queues", "groups", "nope"], None);
    assert_ne!(unknown.code, 0);
    assert!(unknown.stderr.contains("nope"), "{}", unknown.stderr);
    let queues = cli(&s.url, &["queues"], None);
    assert_eq!(
        queues.json["queues"][0]["groups"]["named"]["vip"]["weight"],
        3
    );
    drop(s);

    // A group limit out of range refuses the start, naming the field.
    std::fs::write(&config, "[queues.default.groups.vip]\nweight = 0\n").expect("write");
    let out = Command::new(BIN)
        .args(["serve", "--data-dir"])
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("queues.default.groups.vip.weight must be from 1 to 100"),
        "{err}"
    );
}

/// What an outside API answers cannot drive an operator's terminal (issue 31): a body that
/// would clear the screen, set the title and write the clipboard (OSC 52) is shown with its
/// control characters as escapes, in text and in JSON, and a reason with them is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_response_body_reaches_the_terminal_as_escapes() {
    let rx = Receiver::start().await;
    let hostile = "\u{1b}[2J\u{1b}]0;owned\u{7}\u{1b}]52;c;ZWNobw==\u{7}\u{9b}31m\u{202e}gpj.exe";
    rx.script("/hostile", vec![Reply::status(400).body(hostile)]);
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    let out = cli_text(
        &s.url,
        &["enqueue", "--id", "h", "--url", &rx.url("/hostile")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    wait_for(&s.url, "h", "dead", |j| j["state"] == "dead");
    let unsafe_char =
        |c: char| c.is_control() && c != '\n' || ('\u{202a}'..='\u{202e}').contains(&c);
    for args in [
        &["jobs", "show", "h"][..],
        &["jobs", "show", "h", "--json"][..],
    ] {
        let out = cli_text(&s.url, args, None);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            !out.stdout.chars().any(unsafe_char),
            "{args:?}: {:?}",
            out.stdout
        );
        assert!(
            out.stdout.contains("]52;c;ZWNobw=="),
            "{args:?}: {}",
            out.stdout
        );
    }
    // The JSON still says what the body was.
    let json = cli(&s.url, &["jobs", "show", "h"], None).json;
    assert_eq!(json["attempt_log"][0]["response_body"], hostile);
    let out = cli_text(
        &s.url,
        &[
            "endpoints",
            "pause",
            &format!("http://{}", rx.addr()),
            "--reason",
            "\u{1b}]0;x\u{7}",
        ],
        None,
    );
    assert_ne!(out.code, 0, "a reason with an escape is refused");
    assert!(out.stderr.contains("plain text"), "{}", out.stderr);
    assert!(!out.stderr.chars().any(unsafe_char), "{:?}", out.stderr);
}
