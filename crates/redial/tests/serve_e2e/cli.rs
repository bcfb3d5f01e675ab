//! The CLI against a running server: actions, batches, pauses, messages, output for people and
//! JSON, hostile text.

use super::*;

/// Dead letters by the pattern of their reason: listed largest first for people and as JSON, a
/// pattern taken as a filter by `jobs list` and the bulk replay, and one that is not plain text
/// refused.
#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_by_reason_pattern_from_the_cli() {
    let rx = Receiver::start().await;
    rx.script("/reject", vec![Reply::status(400)]);
    rx.script("/gone", vec![Reply::status(404)]);
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    for (id, path) in [("r1", "/reject"), ("r2", "/reject"), ("g1", "/gone")] {
        let out = cli(
            &s.url,
            &["enqueue", "--id", id, "--url", &rx.url(path)],
            None,
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    for id in ["r1", "r2", "g1"] {
        wait_for(&s.url, id, "dead", |j| j["state"] == "dead");
    }
    let out = cli_text(&s.url, &["dead-letters", "patterns"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("DEAD"), "{}", out.stdout);
    assert!(
        lines[1].trim_start().starts_with("2 ") && lines[1].contains("400 bad request"),
        "the largest first: {}",
        out.stdout
    );
    assert!(lines[2].contains("404 not found"), "{}", out.stdout);
    assert_eq!(lines[3], "3 dead letters in 2 patterns", "{}", out.stdout);

    let out = cli(&s.url, &["dead-letters", "patterns", "--limit", "1"], None);
    assert_eq!(
        (out.json["count"].as_u64(), out.json["total"].as_u64()),
        (Some(2), Some(3))
    );
    let p = &out.json["patterns"][0];
    assert_eq!(
        (p["count"].as_u64(), p["reasons"].as_u64()),
        (Some(2), Some(1))
    );
    let pattern = p["pattern"].as_str().expect("a pattern").to_owned();

    let out = cli(&s.url, &["jobs", "list", "--pattern", &pattern], None);
    let mut ids: Vec<&str> = out.json.as_array().map_or(vec![], |a| {
        a.iter().filter_map(|j| j["id"].as_str()).collect()
    });
    ids.sort_unstable();
    assert_eq!(ids, vec!["r1", "r2"], "{}", out.stdout);
    rx.script("/reject", vec![Reply::status(200)]);
    let out = cli(
        &s.url,
        &["dead-letters", "replay", "--pattern", &pattern],
        None,
    );
    assert_eq!(
        (out.code, out.json["affected"].as_u64()),
        (0, Some(2)),
        "{}",
        out.stderr
    );
    for id in ["r1", "r2"] {
        wait_for(&s.url, id, "completed", |j| j["state"] == "completed");
    }
    assert_eq!(show(&s.url, "g1")["state"], "dead");

    let out = cli(
        &s.url,
        &["dead-letters", "dismiss", "--pattern", "two\nlines\u{7}"],
        None,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("invalid_pattern"), "{}", out.stderr);
}

/// A replay with changes: dead letters moved to a new URL with a header set, previewed first
/// (nothing changes), then replayed: the new receiver sees the new path and header and the same
/// idempotency key; each job keeps its attempts, tells what changed and shows its request as
/// enqueued. A patch that would not pass as an enqueue replays nothing; one job renewed its key.
#[tokio::test(flavor = "multi_thread")]
async fn replay_with_changes_from_the_cli() {
    let old = Receiver::start().await;
    old.script("/v1/hook", vec![Reply::status(404)]);
    let new = Receiver::start().await;
    new.script("/v2/hook", vec![Reply::status(200)]);
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    for id in ["m1", "m2", "m3"] {
        let url = old.url("/v1/hook");
        let args = [
            "enqueue",
            "--id",
            id,
            "--url",
            &url,
            "-H",
            "X-Api-Version: 1",
        ];
        assert_eq!(cli(&s.url, &args, None).code, 0);
    }
    for id in ["m1", "m2", "m3"] {
        wait_for(&s.url, id, "dead", |j| j["state"] == "dead");
    }
    let keys: Vec<String> = ["m1", "m2"]
        .iter()
        .map(|id| {
            show(&s.url, id)["idempotency_key"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    let prefix = format!("{}={}", old.url("/v1"), new.url("/v2"));
    let patch = ["--url-prefix", &prefix, "--set-header", "X-Api-Version: 2"];

    // A preview changes nothing.
    let mut args = vec!["dead-letters", "replay", "--all", "--dry-run"];
    args.extend(patch);
    let out = cli(&s.url, &args, None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let j = &out.json;
    assert_eq!(
        (
            j["matched"].as_u64(),
            j["affected"].as_u64(),
            j["skipped"].as_u64()
        ),
        (Some(3), Some(3), Some(0)),
        "{j}"
    );
    let first = &j["preview"][0];
    assert_eq!(first["after"]["request"]["url"], new.url("/v2/hook"));
    assert_eq!(first["before"]["request"]["url"], old.url("/v1/hook"));
    let changed: Vec<&str> = first["changed"]
        .as_array()
        .map_or(vec![], |a| a.iter().filter_map(Value::as_str).collect());
    assert!(changed.iter().any(|c| c.starts_with("url ")), "{changed:?}");
    assert!(changed.contains(&"header x-api-version set"), "{changed:?}");
    assert!(
        changed.iter().any(|c| c.starts_with("endpoint ")),
        "the endpoint follows the URL: {changed:?}"
    );
    assert_eq!(show(&s.url, "m1")["state"], "dead");
    let text = cli_text(&s.url, &args, None);
    assert!(
        text.stdout
            .contains("dry run: 3 dead jobs would be replayed"),
        "{}",
        text.stdout
    );

    // One that would not pass as an enqueue: nothing is replayed.
    let out = cli(
        &s.url,
        &["jobs", "replay", "m3", "--url", "ftp://example.com/x"],
        None,
    );
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("invalid_url"), "{}", out.stderr);
    assert_eq!(show(&s.url, "m3")["state"], "dead");
    // One job on its own, with a new key.
    let url = new.url("/v2/hook");
    let out = cli(
        &s.url,
        &["jobs", "replay", "m3", "--url", &url, "--renew-key"],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);

    let mut args = vec!["dead-letters", "replay", "--all"];
    args.extend(patch);
    let out = cli(&s.url, &args, None);
    assert_eq!(
        (
            out.json["affected"].as_u64(),
            out.json["matched"].as_u64(),
            out.json["skipped"].as_u64()
        ),
        (Some(2), Some(2), Some(0)),
        "{}",
        out.stdout
    );
    for id in ["m1", "m2", "m3"] {
        wait_for(&s.url, id, "completed", |j| j["state"] == "completed");
    }
    let seen = new.received("/v2/hook");
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|r| r.header("x-api-version").is_some()));
    let mut sent: Vec<String> = seen
        .iter()
        .filter(|r| r.header("x-api-version") == Some("2"))
        .filter_map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    sent.sort();
    let mut kept = keys.clone();
    kept.sort();
    assert_eq!(sent, kept, "the same keys as before the replay");
    let m3 = show(&s.url, "m3");
    assert!(!keys.contains(&m3["idempotency_key"].as_str().unwrap_or("").to_owned()));
    assert!(m3["changes"][0]["changed"]
        .as_array()
        .is_some_and(|c| c.iter().any(|l| l == "idempotency key renewed")));

    let m1 = show(&s.url, "m1");
    assert_eq!(m1["request"]["url"], new.url("/v2/hook"));
    assert_eq!(m1["original_request"]["url"], old.url("/v1/hook"));
    assert_eq!(m1["changes"].as_array().map(Vec::len), Some(1));
    assert_eq!(m1["changes"][0]["replay"], 1);
    assert_eq!(
        m1["attempt_log"].as_array().map(Vec::len),
        Some(2),
        "history kept"
    );
    let text = cli_text(&s.url, &["jobs", "show", "m1"], None);
    assert!(text.stdout.contains("enqueued"), "{}", text.stdout);
    assert!(
        text.stdout.contains("header x-api-version set"),
        "{}",
        text.stdout
    );
}

/// Dead letters exported (a job a line, the request as sent with its secret, what became of it)
/// and taken back: into the same server, replaying the ones still dead; into another, as new
/// jobs with their idempotency keys.
#[tokio::test(flavor = "multi_thread")]
async fn dead_letters_exported_and_taken_back() {
    let rx = Receiver::start().await;
    rx.script("/gone", vec![Reply::status(404)]);
    let (dir, data) = temp();
    let s = start(&data, &[], &[]);
    for id in ["x1", "x2"] {
        let args = [
            "enqueue",
            "--id",
            id,
            "--url",
            &rx.url("/gone"),
            "-H",
            "Authorization: Bearer sk-secret-1",
        ];
        assert_eq!(cli(&s.url, &args, None).code, 0);
    }
    for id in ["x1", "x2"] {
        wait_for(&s.url, id, "dead", |j| j["state"] == "dead");
    }
    let file = dir.path().join("dead.ndjson");
    let path = file.to_str().expect("a UTF-8 path");
    let out = cli_text(
        &s.url,
        &["dead-letters", "export", "--output-file", path],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("2 dead jobs written"), "{}", out.stdout);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file)
            .expect("the file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "readable by its owner only: {mode:o}");
    }
    let text = std::fs::read_to_string(&file).expect("read");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2);
    let first = &lines[0];
    assert_eq!(first["id"], "x1");
    assert_eq!(first["request"]["url"], rx.url("/gone"));
    assert!(
        text.contains("sk-secret-1"),
        "the request as sent, secrets included"
    );
    assert_eq!(first["dead"]["category"], "permanent");
    assert_eq!(first["dead"]["attempts"].as_array().map(Vec::len), Some(1));
    let piped = cli_text(
        &s.url,
        &["dead-letters", "export", "--queue", "default"],
        None,
    );
    assert_eq!(piped.stdout.lines().count(), 2, "{}", piped.stderr);

    // Back into the same server: still dead letters, so replayed.
    rx.script("/gone", vec![Reply::status(200)]);
    let out = cli(
        &s.url,
        &["enqueue", "--file", path, "--replay-existing"],
        None,
    );
    assert_eq!(
        (
            out.code,
            out.json["deduplicated"].as_u64(),
            out.json["replayed"].as_u64()
        ),
        (0, Some(2), Some(2)),
        "{}",
        out.stderr
    );
    for id in ["x1", "x2"] {
        wait_for(&s.url, id, "completed", |j| j["state"] == "completed");
    }

    // Into another server, as new jobs: new ids, the same keys.
    let (_other_dir, other_data) = temp();
    let other = start(&other_data, &[], &[]);
    let out = cli(&other.url, &["enqueue", "--file", path, "--new-ids"], None);
    assert_eq!(out.json["inserted"].as_u64(), Some(2), "{}", out.stderr);
    let listed = cli(&other.url, &["jobs", "list"], None);
    let jobs = listed.json.as_array().cloned().unwrap_or_default();
    assert_eq!(jobs.len(), 2);
    assert!(jobs.iter().all(|j| j["id"] != "x1" && j["id"] != "x2"));
    let mut keys: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j["idempotency_key"].as_str())
        .collect();
    keys.sort_unstable();
    let mut exported: Vec<&str> = lines
        .iter()
        .filter_map(|l| l["idempotency_key"].as_str())
        .collect();
    exported.sort_unstable();
    assert_eq!(keys, exported);
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
    // A category that is none is refused before anything is sent, naming those there are.
    let out = cli(
        &s.url,
        &["dead-letters", "replay", "--category", "permanant"],
        None,
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("\"permanant\" is not one of permanent, transient_exhausted"),
        "{}",
        out.stderr
    );
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
    // The forecast: sending starts when the pause ends, an hour on.
    let starts = out.json["forecast"]["starts_at"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(
        Some(starts),
        out.json["paused_until"].as_str(),
        "{}",
        out.json
    );
    let text = cli_text(&s.url, &["endpoints", "show", &origin], None).stdout;
    assert!(
        text.contains(&format!("  starts            {starts}")),
        "{text}"
    );
    assert!(
        text.contains("  deadlines at risk 0 of 0 with a deadline"),
        "{text}"
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
    // No job named it yet: refused, naming the flag that pauses it ahead of its first job.
    let out = cli(&s.url, &["endpoints", "pause", &origin], None);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("not_found") && out.stderr.contains("create"),
        "{}",
        out.stderr
    );
    let out = cli(
        &s.url,
        &[
            "endpoints",
            "pause",
            &origin,
            "--create",
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
        (vec!["events"], "ID"),
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

/// `redial jobs wait` (issue 33): for shell scripts, exit 0 when the job completed and non-zero
/// when it ended otherwise or the time ran out.
#[tokio::test(flavor = "multi_thread")]
async fn jobs_wait_exits_zero_only_for_a_completed_job() {
    let rx = Receiver::start().await;
    rx.script("/refuse", vec![Reply::status(400).body("bad order")]);
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    for (id, path) in [("w-ok", "/ok"), ("w-bad", "/refuse")] {
        let out = cli(
            &s.url,
            &["enqueue", "--id", id, "--url", &rx.url(path)],
            None,
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let ok = cli_text(&s.url, &["jobs", "wait", "w-ok", "--timeout", "2m"], None);
    assert_eq!(ok.code, 0, "{}", ok.stderr);
    assert_eq!(ok.stdout.trim(), "job w-ok completed");
    let bad = cli_text(&s.url, &["jobs", "wait", "w-bad", "--timeout", "2m"], None);
    assert_eq!(bad.code, 1, "{}", bad.stdout);
    assert!(bad.stderr.contains("job w-bad is dead"), "{}", bad.stderr);
    let json = cli(&s.url, &["jobs", "wait", "w-bad"], None);
    assert_eq!(json.code, 1);
    assert_eq!(json.json["state"], "dead", "--json prints the job too");

    // A job that cannot finish in time: a queue paused by hand holds it.
    let out = cli(&s.url, &["queues", "pause", "default"], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = cli(
        &s.url,
        &["enqueue", "--id", "w-held", "--url", &rx.url("/ok")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let held = cli_text(
        &s.url,
        &["jobs", "wait", "w-held", "--timeout", "300ms"],
        None,
    );
    assert_eq!(held.code, 1);
    assert!(
        held.stderr
            .contains("job w-held is still ready after 300ms"),
        "{}",
        held.stderr
    );
    let missing = cli_text(&s.url, &["jobs", "wait", "no-such-job"], None);
    assert_eq!(missing.code, 1);
    assert!(missing.stderr.contains("not_found"), "{}", missing.stderr);
}

/// Search from the CLI: a job by its idempotency key (one it named, and one Redial derived for
/// it), jobs by tag, dead letters by the words of their reason; reason text that holds no word,
/// or asked of live jobs, refused.
#[tokio::test(flavor = "multi_thread")]
async fn search_by_key_tag_and_reason_text_from_the_cli() {
    let rx = Receiver::start().await;
    rx.script("/gone", vec![Reply::status(404)]);
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    let later = "2099-01-01T00:00:00Z";
    for args in [
        vec![
            "--id",
            "k1",
            "--idempotency-key",
            "charge-42",
            "--tag",
            "order:42",
        ],
        vec!["--id", "k2", "--tag", "order:42", "--tag", "vip"],
        vec!["--id", "k3", "--tag", "order:43"],
    ] {
        let url = rx.url("/ok");
        let mut all = vec!["enqueue", "--url", &url, "--run-at", later];
        all.extend(args);
        let out = cli(&s.url, &all, None);
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let out = cli(
        &s.url,
        &["enqueue", "--id", "g1", "--url", &rx.url("/gone")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    wait_for(&s.url, "g1", "dead", |j| j["state"] == "dead");
    let found = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["jobs", "list"];
        all.extend(args);
        let out = cli(&s.url, &all, None);
        assert_eq!(out.code, 0, "{:?}: {}", args, out.stderr);
        let mut ids: Vec<String> = out.json.as_array().map_or(vec![], |a| {
            a.iter()
                .filter_map(|j| j["id"].as_str().map(str::to_owned))
                .collect()
        });
        ids.sort_unstable();
        ids
    };
    assert_eq!(found(&["--idempotency-key", "charge-42"]), ["k1"]);
    let derived = show(&s.url, "k3")["idempotency_key"]
        .as_str()
        .expect("a derived key")
        .to_owned();
    assert_eq!(found(&["--idempotency-key", &derived]), ["k3"]);
    assert_eq!(found(&["--tag", "order:42"]), ["k1", "k2"]);
    assert_eq!(found(&["--tag", "vip", "--state", "scheduled"]), ["k2"]);
    assert_eq!(found(&["--reason-text", "NOT fou"]), ["g1"]);
    assert_eq!(found(&["--reason-text", "404", "--state", "dead"]), ["g1"]);
    assert_eq!(found(&["--reason-text", "timeout"]), Vec::<String>::new());

    for args in [
        &["jobs", "list", "--reason-text", "!! ??"][..],
        &["jobs", "list", "--reason-text", "404", "--state", "ready"][..],
    ] {
        let out = cli(&s.url, args, None);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("invalid_reason_text"), "{}", out.stderr);
    }
}

/// `redial simulate --from-store`: what a server did, read back from its stopped data folder and
/// replayed: the jobs arrive as they did, the endpoint answers as it did, and the jobs refused
/// for their own sake (400) are refused again.
#[tokio::test(flavor = "multi_thread")]
async fn simulate_replays_what_a_store_holds() {
    let rx = Receiver::start().await;
    rx.script("/reject", vec![Reply::status(400)]);
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    let jobs: Vec<(String, &str)> = (0..6)
        .map(|i| (format!("ok{i}"), "/ok"))
        .chain((0..2).map(|i| (format!("no{i}"), "/reject")))
        .collect();
    for (id, path) in &jobs {
        let out = cli(
            &s.url,
            &["enqueue", "--id", id, "--url", &rx.url(path)],
            None,
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    for (id, _) in &jobs {
        wait_for(&s.url, id, "finished", |j| {
            j["state"] == "completed" || j["state"] == "dead"
        });
    }
    // A running server holds its folder: the simulator says what to do.
    let data_arg = data.display().to_string();
    let run = |args: &[&str]| {
        let out = Command::new(BIN)
            .args(["simulate", "--from-store", &data_arg])
            .args(args)
            .output()
            .expect("simulate runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, _, stderr) = run(&["--since", "1h"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("redial backup"), "{stderr}");
    s.terminate();

    let (code, stdout, stderr) = run(&["--since", "1h", "--seed", "7", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).expect("JSON");
    let total = &v["runs"][0]["total"];
    assert_eq!(
        (&total["jobs"], &total["completed"], &total["requests"]),
        (
            &serde_json::json!(8),
            &serde_json::json!(6),
            &serde_json::json!(8)
        ),
        "{v}"
    );
    assert_eq!(total["dead"]["permanent"], 2, "{v}");
    assert_eq!(
        v["runs"][0]["endpoints"][0]["name"],
        format!("http://{}", rx.addr())
    );
    // Nothing created in the window: said so.
    let (code, _, stderr) = run(&["--since", "1ms"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no job was created in the last"),
        "{stderr}"
    );
    // --since goes with --from-store only.
    let out = Command::new(BIN)
        .args(["simulate", "--workload", "x.toml", "--since", "1h"])
        .output()
        .expect("simulate runs");
    assert_eq!(out.status.code(), Some(2));
}
