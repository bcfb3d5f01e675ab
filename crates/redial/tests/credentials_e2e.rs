//! Endpoint credentials (issue 58) through the real binary: `redial serve` with an endpoint's
//! OAuth2 client credentials in its configuration (the client secret in a file), a token server
//! and an API on loopback that takes only the tokens it issued. A job is sent with a token; one
//! that brings its own Authorization is refused; the endpoint's view tells the token's state;
//! and neither the client secret nor the token is in the database, a backup or an export.

use redial_test_receiver::{Behaviour, Receiver, Reply};
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

mod common;
use common::{eventually, serve_command, Server, BIN};

const CLIENT_SECRET: &str = "client-secret-7f3a9c1e-never-stored";

async fn post(http: &reqwest::Client, url: String, body: Value) -> (u16, Value) {
    let r = http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("post");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn get(http: &reqwest::Client, url: String) -> Value {
    let text = http
        .get(url)
        .send()
        .await
        .expect("get")
        .text()
        .await
        .expect("body");
    serde_json::from_str(&text).expect("JSON")
}

/// Every file under `dir`, read.
fn bytes_under(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir(dir).expect("a directory") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            all.extend(bytes_under(&path));
        } else if let Ok(b) = std::fs::read(&path) {
            all.extend(b);
        }
    }
    all
}

fn holds(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread")]
async fn oauth2_credentials_send_jobs_and_leave_no_secret_behind() {
    let rx = Receiver::start().await;
    rx.behave(
        "/token",
        Behaviour::TokenServer {
            lifetime: Duration::from_secs(3600),
        },
    );
    rx.behave("/api", Behaviour::RequiresToken);
    rx.script("/refuses", vec![Reply::status(400)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let secret_file = dir.path().join("client-secret");
    std::fs::write(&secret_file, format!("{CLIENT_SECRET}\n")).expect("secret");
    let origin = rx.url("");
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        format!(
            "[endpoints.\"{origin}\".auth]\nkind = \"oauth2_client_credentials\"\n\
             token_url = \"{}\"\nclient_id = \"redial\"\nclient_secret_file = {:?}\n",
            rx.url("/token"),
            secret_file.display().to_string()
        ),
    )
    .expect("config");
    let data = dir.path().join("data");
    let mut cmd = serve_command();
    cmd.arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(&data);
    let server = Server::start(cmd);
    let http = reqwest::Client::new();
    let jobs = format!("{}/v1/jobs", server.url);

    let (status, body) = post(
        &http,
        jobs.clone(),
        json!({"id": "sent", "request": {"method": "POST", "url": rx.url("/api"), "body": "{}"}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = post(
        &http,
        jobs.clone(),
        json!({"id": "dead", "request": {"method": "POST", "url": rx.url("/refuses")}}),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = post(
        &http,
        jobs.clone(),
        json!({"id": "own", "request": {"method": "POST", "url": rx.url("/api"),
               "headers": {"Authorization": "Bearer mine"}}}),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_header")),
        "{body}"
    );
    eventually(
        "the job was sent with a token and the other died",
        || async {
            let state = |id: &'static str| {
                let http = http.clone();
                let url = format!("{}/v1/jobs/{id}", server.url);
                async move {
                    get(&http, url).await["state"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                }
            };
            state("sent").await == "completed" && state("dead").await == "dead"
        },
    )
    .await;
    let api = rx.received("/api");
    assert_eq!(api.len(), 1);
    assert_eq!(api[0].status, 200);
    assert_eq!(api[0].header("authorization"), Some("Bearer tok-1"));

    let endpoint = get(
        &http,
        format!(
            "{}/v1/endpoints/{}",
            server.url,
            url::form_urlencoded::byte_serialize(origin.as_bytes()).collect::<String>()
        ),
    )
    .await;
    let c = &endpoint["credentials"];
    assert_eq!(c["kind"], "oauth2_client_credentials", "{endpoint}");
    assert_eq!(
        c["secret_from"],
        format!("file {}", secret_file.display()),
        "{endpoint}"
    );
    assert_eq!(c["token"]["held"], true, "{endpoint}");
    assert_eq!(c["token"]["fetched"], 1, "{endpoint}");
    assert!(c["token"]["valid_until"].is_string(), "{endpoint}");

    // What leaves the server: an export of the dead letters and a backup.
    let export = http
        .post(format!("{}/v1/dead-letters/export", server.url))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("export")
        .bytes()
        .await
        .expect("export body");
    assert!(holds(&export, "\"dead\""), "the export holds the dead job");
    let copy = dir.path().join("backup.db");
    let out = Command::new(BIN)
        .args(["backup", copy.to_str().expect("utf-8")])
        .env("REDIAL_SERVER", &server.url)
        .env_remove("REDIAL_TOKEN")
        .env_remove("REDIAL_DATA_DIR")
        .output()
        .expect("redial backup");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut everything = bytes_under(&data);
    everything.extend(std::fs::read(&copy).expect("the backup"));
    everything.extend_from_slice(&export);
    everything.extend(endpoint.to_string().into_bytes());
    for secret in [CLIENT_SECRET, "tok-1"] {
        assert!(!holds(&everything, secret), "{secret} left the process");
    }
    let logs = server.logs.lock().expect("logs").join("\n");
    assert!(
        !logs.contains(CLIENT_SECRET) && !logs.contains("tok-1"),
        "{logs}"
    );
}

/// A credentials profile (`[credentials.NAME]`) through the binary: a job that names it is sent
/// with it instead of its endpoint's and shows the name (never the secret); an unknown name and a
/// job that also brings its own Authorization are refused at enqueue; a dead job that carried its
/// own header is replayed with the header removed and the profile named.
#[tokio::test(flavor = "multi_thread")]
async fn a_job_names_a_credentials_profile() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let origin = rx.url("");
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        format!(
            "[endpoints.\"{origin}\".auth]\nkind = \"header\"\nheader = \"X-Api-Key\"\n\
             secret_env = \"E2E_ENDPOINT_KEY\"\n\n\
             [credentials.tenant-b]\nkind = \"header\"\nheader = \"X-Api-Key\"\n\
             secret_env = \"E2E_TENANT_B_KEY\"\n"
        ),
    )
    .expect("config");
    let mut cmd = serve_command();
    cmd.arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("E2E_ENDPOINT_KEY", "endpoint-key-1")
        .env("E2E_TENANT_B_KEY", "tenant-b-key-2");
    let server = Server::start(cmd);
    let http = reqwest::Client::new();
    let jobs = format!("{}/v1/jobs", server.url);
    let enqueue = |body: Value| post(&http, jobs.clone(), body);

    let (status, body) = enqueue(json!({"id": "b", "request": {"method": "POST",
        "url": rx.url("/b"), "credentials": "tenant-b"}}))
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["request"]["credentials"], "tenant-b", "{body}");
    let (status, body) = enqueue(json!({"id": "plain", "request": {"method": "POST",
        "url": rx.url("/plain")}}))
    .await;
    assert_eq!(
        (status, &body["request"]["credentials"]),
        (201, &Value::Null),
        "{body}"
    );
    let (status, body) = enqueue(json!({"id": "typo", "request": {"method": "POST",
        "url": rx.url("/b"), "credentials": "tenant-c"}}))
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_field")),
        "{body}"
    );
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("\"tenant-c\" is not in the configuration")
            && message.contains("it defines tenant-b"),
        "{message}"
    );
    let (status, body) = enqueue(json!({"id": "both", "request": {"method": "POST",
        "url": rx.url("/b"), "credentials": "tenant-b",
        "headers": {"Authorization": "Bearer mine"}}}))
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_header")),
        "{body}"
    );
    let (status, body) = enqueue(json!({"id": "bad-name", "request": {"method": "POST",
        "url": rx.url("/b"), "credentials": "no spaces"}}))
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("invalid_field")),
        "{body}"
    );
    eventually("both jobs complete", || async {
        rx.received("/b").len() == 1 && rx.received("/plain").len() == 1
    })
    .await;
    assert_eq!(
        rx.received("/b")[0].header("x-api-key"),
        Some("tenant-b-key-2")
    );
    assert_eq!(
        rx.received("/plain")[0].header("x-api-key"),
        Some("endpoint-key-1")
    );

    // A replay with changes names the profile: a dead job to another endpoint (none of its
    // own credentials) is sent again with tenant B's key.
    let other = Receiver::start().await;
    other.script("/pay", vec![Reply::status(401), Reply::status(200)]);
    let (status, body) = enqueue(json!({"id": "moved", "request": {"method": "POST",
        "url": other.url("/pay"), "headers": {"X-Api-Key": "old-key"}}}))
    .await;
    assert_eq!(status, 201, "{body}");
    let job = format!("{jobs}/moved");
    eventually("the job dies of its 401", || async {
        get(&http, job.clone()).await["state"] == "dead"
    })
    .await;
    let (status, body) = post(
        &http,
        format!("{job}/replay"),
        json!({"patch": {"headers": {"remove": ["X-Api-Key"]}, "credentials": "tenant-b"}}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    eventually("the replay completes", || async {
        get(&http, job.clone()).await["state"] == "completed"
    })
    .await;
    let sent = other.received("/pay");
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].header("x-api-key"), Some("tenant-b-key-2"));
    let shown = get(&http, job.clone()).await;
    assert_eq!(shown["request"]["credentials"], "tenant-b", "{shown}");
    assert!(!shown.to_string().contains("tenant-b-key-2"), "{shown}");

    // And back: a dead job that names the profile, replayed from the CLI with
    // --endpoint-credentials (the patch's null), goes with its endpoint's (here none).
    other.script("/back", vec![Reply::status(403), Reply::status(200)]);
    let (status, body) = enqueue(json!({"id": "back", "request": {"method": "POST",
        "url": other.url("/back"), "credentials": "tenant-b"}}))
    .await;
    assert_eq!(status, 201, "{body}");
    let back = format!("{jobs}/back");
    eventually("the job dies of its 403", || async {
        get(&http, back.clone()).await["state"] == "dead"
    })
    .await;
    let out = Command::new(BIN)
        .args(["jobs", "replay", "back", "--endpoint-credentials"])
        .env("REDIAL_SERVER", &server.url)
        .env_remove("REDIAL_TOKEN")
        .output()
        .expect("run the CLI");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eventually("the replay completes", || async {
        get(&http, back.clone()).await["state"] == "completed"
    })
    .await;
    let sent = other.received("/back");
    assert_eq!(sent[0].header("x-api-key"), Some("tenant-b-key-2"));
    assert_eq!(sent[1].header("x-api-key"), None, "the endpoint has none");
    let shown = get(&http, back.clone()).await;
    assert_eq!(shown["request"]["credentials"], Value::Null, "{shown}");
}
