//! The server's life: the quick start's rate limit, restarts, a killed process, binds, a bad file.

use super::*;

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
