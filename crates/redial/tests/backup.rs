//! `redial backup FILE` against a real `redial serve` (issue 31): the copy is taken while jobs
//! are enqueued and sent, holds every job acknowledged before it began, and restoring is serving
//! it; `--data-dir` copies without the server; a PostgreSQL-backed server says to use its
//! database's tools. Real SQLite files, a real PostgreSQL server, real HTTP on loopback.

use redial_test_receiver::{Receiver, Reply};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

mod common;
use common::{eventually, serve_command, within_patience, Server, BIN};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn redial(server: &str, args: &[&str]) -> Out {
    let out = Command::new(BIN)
        .args(args)
        .env("REDIAL_SERVER", server)
        .env_remove("REDIAL_TOKEN")
        .env_remove("REDIAL_DATA_DIR")
        .output()
        .expect("the CLI runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn serve_on(data: &Path) -> Server {
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(data);
    Server::start(cmd)
}

async fn enqueue(http: &reqwest::Client, server: &str, jobs: Vec<Value>) {
    let res = http
        .post(format!("{server}/v1/jobs/batch"))
        .header("content-type", "application/json")
        .body(json!({ "jobs": jobs }).to_string())
        .send()
        .await
        .expect("enqueue");
    assert!(
        res.status().is_success(),
        "{}",
        res.text().await.unwrap_or_default()
    );
}

async fn job(http: &reqwest::Client, server: &str, id: &str) -> Option<Value> {
    let res = http
        .get(format!("{server}/v1/jobs/{id}"))
        .send()
        .await
        .expect("show");
    match res.status().as_u16() {
        404 => None,
        200 => Some(serde_json::from_str(&res.text().await.expect("body")).expect("JSON")),
        other => panic!("GET /v1/jobs/{id}: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_while_jobs_run_is_served_as_it_is() {
    let rx = Receiver::start().await;
    rx.script("/ok", vec![Reply::status(200)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let s = serve_on(&data);
    let http = reqwest::Client::new();
    // Work that waits (for 2099) and work that runs now, to the receiver.
    let later: Vec<Value> = (0..2000)
        .map(|n| {
            json!({"id": format!("later-{n}"), "run_at": "2099-01-01T00:00:00Z",
                   "request": {"method": "POST", "url": rx.url("/later"), "body": "{}"}})
        })
        .collect();
    for chunk in later.chunks(500) {
        enqueue(&http, &s.url, chunk.to_vec()).await;
    }
    // The load: batches of 20 jobs to the receiver, one after another, until told to stop.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn({
        let (http, url, target, acked, stop) = (
            http.clone(),
            s.url.clone(),
            rx.url("/ok"),
            acked.clone(),
            stop.clone(),
        );
        async move {
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let ids: Vec<String> = (0..20).map(|k| format!("now-{round}-{k}")).collect();
                let jobs = ids
                    .iter()
                    .map(|id| json!({"id": id, "request": {"method": "POST", "url": target, "body": "{}"}}))
                    .collect();
                enqueue(&http, &url, jobs).await;
                acked.lock().expect("not poisoned").extend(ids);
                round += 1;
            }
        }
    });
    eventually("200 jobs acknowledged", || async {
        acked.lock().expect("not poisoned").len() >= 200
    })
    .await;
    let acked_before = acked.lock().expect("not poisoned").clone();
    let copy = dir.path().join("copy.db");
    let out = {
        let (url, copy) = (s.url.clone(), copy.clone());
        tokio::task::spawn_blocking(move || {
            redial(&url, &["backup", copy.to_str().expect("utf-8")])
        })
        .await
        .expect("the CLI ran")
    };
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("backed up "), "{}", out.stdout);
    assert!(out.stdout.contains("checked"), "{}", out.stdout);
    // Not a terminal: no progress line.
    assert!(out.stderr.is_empty(), "{}", out.stderr);
    stop.store(true, Ordering::Relaxed);
    load.await.expect("the load ends");
    // Once more to the same name: refused, the first copy kept.
    let again = redial(&s.url, &["backup", copy.to_str().expect("utf-8")]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
    // The server left nothing of the copy it sent beside its database.
    let beside: Vec<String> = std::fs::read_dir(&data)
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("backup"))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
    // --data-dir copies the same database without the server (here, while it runs).
    let direct = dir.path().join("direct.db");
    let out = redial(
        &s.url,
        &[
            "backup",
            direct.to_str().expect("utf-8"),
            "--data-dir",
            data.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    s.terminate();

    // Restore: the copy is a data folder's redial.db.
    let restored = dir.path().join("restored");
    std::fs::create_dir(&restored).expect("mkdir");
    std::fs::copy(&copy, restored.join("redial.db")).expect("copy");
    let r = serve_on(&restored);
    for id in acked_before.iter().step_by(7).chain(acked_before.last()) {
        assert!(
            job(&http, &r.url, id).await.is_some(),
            "{id} was acknowledged before the backup: it is in the copy"
        );
    }
    for n in (0..2000).step_by(97) {
        let j = job(&http, &r.url, &format!("later-{n}"))
            .await
            .expect("a waiting job is in the copy");
        assert_eq!(j["state"], "scheduled");
    }
    // The restored server runs what was waiting to run: every job acknowledged before the
    // backup ends completed (those sent before it, or sent again by it: their idempotency key
    // is the same).
    for id in &acked_before {
        let completed = within_patience(|| async {
            job(&http, &r.url, id).await.expect("in the copy")["state"] == "completed"
        })
        .await;
        if completed.is_none() {
            let j = job(&http, &r.url, id).await.expect("in the copy");
            panic!("{id} did not complete: {j}");
        }
    }
    r.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_server_says_which_tools_back_it_up() {
    let base = redial_store_postgres::testing::database_url();
    let schema = redial_store_postgres::testing::create_schema(&base)
        .await
        .expect("a schema");
    let url = redial_store_postgres::testing::url_in_schema(&base, &schema);
    let mut cmd = serve_command();
    cmd.env("REDIAL_DATABASE_URL", &url);
    let s = Server::start(cmd);
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("copy.db");
    let out = redial(&s.url, &["backup", copy.to_str().expect("utf-8")]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("501 not_supported") && out.stderr.contains("pg_dump"),
        "{}",
        out.stderr
    );
    assert!(!copy.exists());
    s.terminate();
}
