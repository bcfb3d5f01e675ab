//! Signed deliveries (issue 17): a queue configured with signing secrets sends Standard Webhooks
//! headers that the specification's own reference library accepts (`standardwebhooks` on PyPI,
//! which `./scripts/test` installs in its virtual environment and puts first on PATH), with every
//! secret of a rotation; the id stays the same across a job's attempts; other queues send none.
//! The real binary and a receiver on loopback.

use redial_test_receiver::{Receiver, Reply};
use serde_json::{json, Value};
use std::process::Command;

mod common;
use common::{eventually, reference_verifies, serve_command, Server};

const OLD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const NEW: &str = "whsec_BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=";

fn post(server: &str, body: Value) -> u16 {
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "content-type: application/json",
            "-d",
        ])
        .arg(body.to_string())
        .arg(format!("{server}/v1/jobs"))
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).parse().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn signed_deliveries_verify_with_the_reference_library() {
    let rx = Receiver::start().await;
    // The first attempt fails, so the job is sent twice.
    rx.script("/hook", vec![Reply::status(503), Reply::status(200)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        format!(
            "[queues.events]\nsigning_secrets = [\"{NEW}\", \"{OLD}\"]\n[queues.events.policy.transient]\nbase = \"10ms\"\ncap = \"20ms\"\n\n[queues.plain]\n"
        ),
    )
    .expect("config");
    let mut cmd = serve_command();
    cmd.arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"));
    let server = Server::start(cmd);

    let body = r#"{"order": 42, "note": "ünïcode"}"#;
    for (id, queue, path) in [("signed", "events", "/hook"), ("plain", "plain", "/plain")] {
        let status = post(
            &server.url,
            json!({"id": id, "queue": queue, "request": {"method": "POST", "url": rx.url(path), "body": body}}),
        );
        assert_eq!(status, 201, "enqueue {id}");
    }
    eventually("the deliveries came", || async {
        rx.received("/hook").len() >= 2 && !rx.received("/plain").is_empty()
    })
    .await;
    let hooks = rx.received("/hook");
    let id_of = |r: &redial_test_receiver::Received| {
        r.headers
            .iter()
            .find(|(k, _)| k == "webhook-id")
            .map(|(_, v)| v.clone())
    };
    // The same id on both attempts: the job's idempotency key.
    let ids: Vec<_> = hooks.iter().map(id_of).collect();
    assert!(ids[0].is_some(), "{:?}", hooks[0].headers);
    assert_eq!(ids[0], ids[1]);
    for r in &hooks {
        assert_eq!(r.body, body);
        // Either secret of the rotation verifies every delivery.
        for secret in [OLD, NEW] {
            reference_verifies(secret, &r.headers, &r.body)
                .unwrap_or_else(|e| panic!("the reference library refused it with {secret}: {e}"));
        }
        // A wrong secret does not.
        assert!(reference_verifies(
            "whsec_AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
            &r.headers,
            &r.body
        )
        .is_err());
        // Nor a changed body.
        assert!(reference_verifies(OLD, &r.headers, "{\"order\": 43}").is_err());
    }
    let plain = &rx.received("/plain")[0];
    assert!(
        plain
            .headers
            .iter()
            .all(|(k, _)| !k.starts_with("webhook-")),
        "an unsigned queue sends no signature: {:?}",
        plain.headers
    );
    server.terminate();
}

#[test]
fn a_bad_signing_secret_refuses_the_start_with_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("redial.toml");
    std::fs::write(&config, "[queues.events]\nconcurrency = 4\nsigning_secrets = [\"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]\n")
        .expect("config");
    let out = serve_command()
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3"), "{err}");
    assert!(
        err.contains("queues.events.signing_secrets: a signing secret is written whsec_"),
        "{err}"
    );
}
