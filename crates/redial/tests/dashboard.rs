//! The dashboard in a real headless Chromium (Debian's `chromium` and `chromium-driver`, driven
//! over WebDriver), against the real `redial serve` and a scripted receiver (issue 15): the
//! overview counts what failed, triage finds the group, replaying it is confirmed and the jobs
//! leave the dead letters, a job's attempt timeline reads as it happened, and a read-only token
//! sees no action. Assertions are on what the page shows. Every wait has a generous bound.

use redial_test_receiver::{Receiver, Reply};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

mod common;
use common::{eventually, serve_command, within_patience, Server};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// A chromedriver process and one browser session in it.
struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Browser {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(bin).exists(),
                "{bin} is missing: the dashboard tests need Debian's chromium and chromium-driver (./scripts/test installs them: scripts/prerequisites)"
            );
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        // In a process group of its own, with the browsers it starts: the drop ends them all.
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        eventually("chromedriver answers", || async {
            http.get(format!("{base}/status")).send().await.is_ok()
        })
        .await;
        let profile = tempfile::tempdir().expect("a profile folder");
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1280,800",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            },
        }}});
        let v: Value = http
            .post(format!("{base}/session"))
            .header("content-type", "application/json")
            .body(caps.to_string())
            .send()
            .await
            .expect("new session")
            .bytes()
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .expect("session JSON");
        let session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_owned();
        Browser {
            driver,
            base,
            session,
            http,
            _profile: profile,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let v: Value = self
            .http
            .request(method, url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("a WebDriver call")
            .bytes()
            .await
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .expect("WebDriver JSON");
        v["value"].clone()
    }

    async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", json!({ "url": url }))
            .await;
    }

    /// Runs `script` in the page (`arguments[0]` is `arg`).
    async fn js(&self, script: &str, arg: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            json!({ "script": script, "args": [arg] }),
        )
        .await
    }

    /// The text of the first element `css` matches, as shown (`None` when there is none, or it
    /// is hidden).
    async fn text(&self, css: &str) -> Option<String> {
        self.js(
            "const e = document.querySelector(arguments[0]); return e && e.checkVisibility() ? e.innerText : null;",
            css,
        )
        .await
        .as_str()
        .map(str::to_owned)
    }

    /// Waits until the element `css` matches shows text for which `want` holds.
    async fn wait_text(&self, css: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
        let shown = within_patience(|| async { self.text(css).await.filter(|t| want(t)) }).await;
        let Some(text) = shown else {
            panic!("{what}: {css} shows {:?}", self.text(css).await);
        };
        text
    }

    /// The WebDriver id of the first element `css` matches.
    async fn element(&self, css: &str) -> String {
        let e = self
            .call(
                reqwest::Method::POST,
                "/element",
                json!({ "using": "css selector", "value": css }),
            )
            .await;
        e[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {e}"))
            .to_owned()
    }

    /// Clicks the element `css` matches, as a person would (WebDriver's click).
    async fn click(&self, css: &str) {
        let id = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            json!({}),
        )
        .await;
    }

    /// Finds `css` and clicks it in one script run in the page, so a refresh cannot replace the
    /// button between the two (a WebDriver click on the old one does nothing); waits for it to
    /// be there first.
    async fn press(&self, css: &str) {
        let script = "const e = document.querySelector(arguments[0]); if (!e) return false; e.click(); return true;";
        eventually(&format!("{css} showed and was pressed"), || async {
            self.js(script, css).await == Value::Bool(true)
        })
        .await;
    }

    /// Presses `css`, waits for the confirmation whose text `want` accepts, and confirms it.
    async fn press_and_confirm(&self, css: &str, want: impl Fn(&str) -> bool) {
        self.press(css).await;
        self.wait_text("#confirm-text", "the confirmation", want)
            .await;
        self.click("#confirm-ok").await;
    }

    async fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/value"),
            json!({ "text": text }),
        )
        .await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // The whole group: killing chromedriver alone leaves its browser running.
        let _ = Command::new("kill")
            .args(["-KILL", "--"])
            .arg(format!("-{}", self.driver.id()))
            .status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn serve(data: &std::path::Path, env: &[(&str, &str)]) -> Server {
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(data);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Server::start(cmd)
}

async fn enqueue(http: &reqwest::Client, server: &str, token: Option<&str>, id: &str, url: &str) {
    let mut req = http
        .post(format!("{server}/v1/jobs"))
        .header("content-type", "application/json")
        .body(
            json!({ "id": id, "request": { "method": "POST", "url": url, "body": "{}" } })
                .to_string(),
        );
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let status = req.send().await.expect("enqueue").status();
    assert_eq!(status.as_u16(), 201, "enqueue {id}");
}

async fn dead_count(http: &reqwest::Client, server: &str, token: Option<&str>) -> u64 {
    let mut req = http.get(format!("{server}/v1/dead-letters/groups"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let v: Value = req
        .send()
        .await
        .expect("groups")
        .bytes()
        .await
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .expect("JSON");
    v["total"].as_u64().expect("a total")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_replay_and_the_attempt_timeline_in_a_browser() {
    let gone = Receiver::start().await;
    // Each of the three jobs is refused once (dead, permanent); replayed, they succeed.
    gone.script(
        "/hook",
        vec![
            Reply::status(404),
            Reply::status(404),
            Reply::status(404),
            Reply::status(200),
        ],
    );
    let other = Receiver::start().await;
    other.script("/x", vec![Reply::status(410)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    for id in ["a1", "a2", "a3"] {
        enqueue(&http, &server.url, None, id, &gone.url("/hook")).await;
    }
    enqueue(&http, &server.url, None, "b1", &other.url("/x")).await;
    eventually("four dead letters", || async {
        dead_count(&http, &server.url, None).await == 4
    })
    .await;

    let b = Browser::start().await;
    b.goto(&format!("{}/", server.url)).await;
    // The overview counts them.
    b.wait_text("[data-count=dead]", "the overview's dead count", |t| {
        t == "4"
    })
    .await;
    // Its chart of the last hour counts the four refusals.
    b.wait_text(
        "#chart-attempts li[data-series=permanent]",
        "the attempts chart's legend",
        |t| t == "permanent: 4",
    )
    .await;
    let label = b
        .js(
            "return document.querySelector('#chart-attempts svg').getAttribute('aria-label');",
            "",
        )
        .await;
    assert!(
        label.as_str().is_some_and(|l| l.contains("permanent 4")),
        "{label}"
    );
    // Triage: the refused endpoint's group, replayed after a confirmation.
    b.click("nav a[href='#/triage']").await;
    b.wait_text("#triage-total", "triage's total", |t| {
        t.starts_with("4 dead letters")
    })
    .await;
    let group = format!("tr[data-group='default permanent http://{}']", gone.addr());
    b.wait_text(&format!("{group} td.num"), "the group's count", |t| {
        t == "3"
    })
    .await;
    b.press_and_confirm(&format!("{group} button"), |t| {
        t.contains("Replay 3 dead jobs")
    })
    .await;
    // The result stays in the toast after it fades (its text is read, not its visibility).
    eventually("the result was shown", || async {
        b.js("return document.getElementById('toast').textContent;", "")
            .await
            == json!("3 replayed")
    })
    .await;
    // The jobs leave the dead letters: the page says so once they ran again.
    eventually("the replayed jobs complete", || async {
        dead_count(&http, &server.url, None).await == 1
    })
    .await;
    b.goto(&format!("{}/ui/#/triage", server.url)).await;
    b.wait_text("#triage-total", "triage after the replay", |t| {
        t.starts_with("1 dead letter")
    })
    .await;
    // A job's page: its attempts as they happened, the refusal then the success.
    b.goto(&format!("{}/ui/#/job/a1", server.url)).await;
    b.wait_text("#job-state", "the job's state", |t| t == "completed")
        .await;
    let timeline = b
        .wait_text("table tbody", "the attempt timeline", |t| {
            t.contains("404") && t.contains("200")
        })
        .await;
    assert!(timeline.contains("permanent"), "{timeline}");
    assert!(timeline.contains("complete"), "{timeline}");
    drop(b);
    server.terminate();
}

/// Triage by cause: the dead letters' reason patterns with their counts, one chosen as the
/// filter (the groups narrow to it), and a pattern dismissed after a confirmation that names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn triage_by_reason_pattern_in_a_browser() {
    let gone = Receiver::start().await;
    gone.script("/hook", vec![Reply::status(404)]);
    let other = Receiver::start().await;
    other.script("/x", vec![Reply::status(410)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    for id in ["a1", "a2"] {
        enqueue(&http, &server.url, None, id, &gone.url("/hook")).await;
    }
    enqueue(&http, &server.url, None, "b1", &other.url("/x")).await;
    eventually("three dead letters", || async {
        dead_count(&http, &server.url, None).await == 3
    })
    .await;

    let b = Browser::start().await;
    b.goto(&format!("{}/ui/#/triage", server.url)).await;
    let not_found = "tr[data-pattern^='404 not found']";
    let gone_row = "tr[data-pattern^='410 gone']";
    b.wait_text(
        &format!("{not_found} td.num"),
        "the 404 pattern's count",
        |t| t.starts_with("2"),
    )
    .await;
    b.wait_text(
        &format!("{gone_row} td.num"),
        "the 410 pattern's count",
        |t| t.starts_with("1"),
    )
    .await;
    // Chosen as the filter: the groups and the total narrow to it, the causes stay in view.
    b.press(&format!("{not_found} a[href^='#/triage']")).await;
    b.wait_text("#triage-total", "the total under the pattern", |t| {
        t.starts_with("2 dead letters")
    })
    .await;
    let groups = b
        .js(
            "return [...document.querySelectorAll('tr[data-group]')].map(r => r.dataset.group);",
            "",
        )
        .await;
    assert_eq!(
        groups,
        json!([format!("default permanent http://{}", gone.addr())])
    );
    b.wait_text(
        &format!("{gone_row} td.num"),
        "the other pattern still listed",
        |t| t.starts_with("1"),
    )
    .await;
    // The other pattern dismissed: the confirmation names it.
    b.press_and_confirm(&format!("{gone_row} button.danger"), |t| {
        t.contains("Dismiss 1 dead job") && t.contains("reason like 410 gone")
    })
    .await;
    eventually("the 410 dead letter dismissed", || async {
        dead_count(&http, &server.url, None).await == 2
    })
    .await;

    // The jobs page's search (by its address, which its form writes: typing races the page's
    // live refresh): words no reason has find nothing; the words of a reason, in any case, find
    // its dead letters, and the form shows them.
    b.goto(&format!("{}/ui/#/jobs?reason_text=zebra", server.url))
        .await;
    b.wait_text("p.muted", "no dead letter with that word", |t| {
        t.contains("No job matches")
    })
    .await;
    b.goto(&format!("{}/ui/#/jobs?reason_text=NOT%20fou", server.url))
        .await;
    b.wait_text("table", "the dead letters the words find", |t| {
        t.contains("a1") && t.contains("a2")
    })
    .await;
    let shown = b
        .js(
            "return document.querySelector(arguments[0]).value;",
            "input[name='reason_text']",
        )
        .await;
    assert_eq!(shown, json!("NOT fou"));
    drop(b);
    server.terminate();
}

/// A dead job replayed with changes from its page: the edit form's preview says what would
/// change and changes nothing; the replay, after a confirmation, sends the new request; the page
/// then shows the request as enqueued and the change between the attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_job_replayed_with_changes_in_a_browser() {
    let old = Receiver::start().await;
    old.script("/v1/hook", vec![Reply::status(404)]);
    let new = Receiver::start().await;
    new.script("/v2/hook", vec![Reply::status(200)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    enqueue(&http, &server.url, None, "e1", &old.url("/v1/hook")).await;
    eventually("dead", || async {
        dead_count(&http, &server.url, None).await == 1
    })
    .await;

    let b = Browser::start().await;
    // A link with `?replay` opens the job's "Replay with changes" form.
    b.goto(&format!("{}/ui/#/job/e1?replay", server.url)).await;
    b.wait_text("#job-state", "the job's state", |t| t.starts_with("dead"))
        .await;
    eventually("the replay form is open", || async {
        b.js(
            "const d = document.querySelector(arguments[0]); return !!(d && d.open);",
            "#replay-edit",
        )
        .await
            == Value::Bool(true)
    })
    .await;
    b.type_into("#replay-edit input[name=url]", &new.url("/v2/hook"))
        .await;
    b.type_into("#replay-edit textarea[name=set]", "X-Api-Version: 2")
        .await;
    b.press("#replay-preview-button").await;
    b.wait_text("#replay-preview-summary", "the preview", |t| {
        t.starts_with("1 dead job would be replayed")
    })
    .await;
    let changes = b
        .wait_text("#replay-preview [data-preview=e1] ul", "the changes", |t| {
            t.contains("header x-api-version set")
        })
        .await;
    assert!(changes.contains("url "), "{changes}");
    assert_eq!(new.count("/v2/hook"), 0, "a preview sends nothing");
    b.press_and_confirm("#replay-apply", |t| {
        t.contains("Replay 1 dead job with these changes")
    })
    .await;
    eventually("the new request was sent", || async {
        new.received("/v2/hook")
            .iter()
            .any(|r| r.header("x-api-version") == Some("2"))
    })
    .await;
    b.goto(&format!("{}/ui/#/job/e1", server.url)).await;
    b.wait_text("#job-state", "the job's state", |t| t == "completed")
        .await;
    b.wait_text("#job-original", "the request as enqueued", |t| {
        t.contains("/v1/hook")
    })
    .await;
    b.wait_text("tr.change", "the change in the timeline", |t| {
        t.contains("Replayed with changes (replay 1)") && t.contains("header x-api-version set")
    })
    .await;
    drop(b);
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_token_signs_in_and_sees_no_action() {
    let rx = Receiver::start().await;
    rx.script("/x", vec![Reply::status(400)]);
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(
        &dir.path().join("data"),
        &[
            ("REDIAL_TOKEN", "full-token"),
            ("REDIAL_READ_ONLY_TOKEN", "look-token"),
        ],
    );
    let http = reqwest::Client::new();
    enqueue(&http, &server.url, Some("full-token"), "d1", &rx.url("/x")).await;
    eventually("a dead letter", || async {
        dead_count(&http, &server.url, Some("full-token")).await == 1
    })
    .await;

    let b = Browser::start().await;
    b.goto(&format!("{}/ui/#/triage", server.url)).await;
    // Signed out: the sign-in form, and no data.
    b.wait_text("#login", "the sign-in form, shown", |t| {
        t.contains("Sign in")
    })
    .await;
    b.type_into("#token", "look-token").await;
    b.click("#login-form button").await;
    b.wait_text("#triage-total", "triage, read-only", |t| {
        t.starts_with("1 dead letter")
    })
    .await;
    let buttons = b
        .js(
            "return [...document.querySelectorAll('main button')].map(b => b.innerText).join(',');",
            "",
        )
        .await;
    assert_eq!(buttons, json!("Filter"), "no action is offered read-only");
    // And the API refuses one anyway.
    let resp = http
        .post(format!("{}/v1/dead-letters/replay", server.url))
        .bearer_auth("look-token")
        .header("content-type", "application/json")
        .body(json!({ "all": true }).to_string())
        .send()
        .await
        .expect("replay");
    assert_eq!(resp.status().as_u16(), 403);
    drop(b);
    server.terminate();
}

async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    let bytes = http
        .get(url)
        .send()
        .await
        .expect("an answer")
        .bytes()
        .await
        .expect("a body");
    serde_json::from_slice(&bytes).expect("JSON")
}

async fn job_state(http: &reqwest::Client, server: &str, id: &str) -> String {
    let v = get_json(http, &format!("{server}/v1/jobs/{id}")).await;
    v["state"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoint_and_a_queue_paused_and_resumed_in_a_browser() {
    let rx = Receiver::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    enqueue(&http, &server.url, None, "first", &rx.url("/ok")).await;
    eventually("the first job completes", || async {
        job_state(&http, &server.url, "first").await == "completed"
    })
    .await;

    let b = Browser::start().await;
    b.goto(&format!("{}/ui/#/endpoints", server.url)).await;
    let row = format!("tr[data-endpoint='http://{}']", rx.addr());
    b.wait_text(&format!("{row} .holding"), "the endpoint's row", |t| {
        t == "nothing"
    })
    .await;
    b.press(&format!("{row} button.danger")).await;
    b.wait_text("#pause-text", "the pause dialog", |t| {
        t.starts_with("Pause endpoint http://")
    })
    .await;
    b.type_into("#pause-reason", "provider maintenance").await;
    b.click("#pause-ok").await;
    b.wait_text(&format!("{row} .holding"), "the endpoint held", |t| {
        t.starts_with("paused by hand") && t.ends_with("provider maintenance")
    })
    .await;
    // A job sent to it now waits, and one with a deadline is at risk: nothing is sent before
    // the pause is lifted by hand.
    enqueue(&http, &server.url, None, "second", &rx.url("/ok")).await;
    let r = http
        .post(format!("{}/v1/jobs", server.url))
        .header("content-type", "application/json")
        .body(
            json!({ "id": "third", "deadline": "2999-01-01T00:00:00Z",
                    "request": { "method": "POST", "url": rx.url("/later") } })
            .to_string(),
        )
        .send()
        .await
        .expect("enqueue");
    assert_eq!(r.status().as_u16(), 201);
    b.goto(&format!(
        "{}/ui/#/endpoint/{}",
        server.url,
        url_escape(&format!("http://{}", rx.addr()))
    ))
    .await;
    b.wait_text("#endpoint-holding", "the endpoint's page", |t| {
        t.starts_with("paused by hand")
    })
    .await;
    // It answered no 429 without Retry-After: no pace learned.
    b.wait_text("#endpoint-pace", "the endpoint's learned pace", |t| {
        t == "none learned"
    })
    .await;
    b.wait_text("#endpoint-drains", "the endpoint's forecast", |t| {
        t == "not known: paused by hand until resumed"
    })
    .await;
    b.wait_text("#endpoint-at-risk", "the deadlines at risk", |t| {
        t.starts_with("1 of 1 with a deadline; the first is due by ")
            && t.ends_with("forecast to start when resumed")
    })
    .await;
    assert_eq!(job_state(&http, &server.url, "second").await, "ready");
    assert_eq!(rx.count("/ok"), 1, "a paused endpoint got a request");
    b.press_and_confirm("main button", |t| t.starts_with("Resume endpoint"))
        .await;
    eventually("the held job completes", || async {
        job_state(&http, &server.url, "second").await == "completed"
    })
    .await;
    b.wait_text("#endpoint-holding", "the endpoint resumed", |t| {
        t == "nothing"
    })
    .await;

    // The queue, from the overview.
    b.goto(&format!("{}/ui/#/", server.url)).await;
    let queue = "tr[data-queue='default']";
    b.wait_text(&format!("{queue} td:last-child"), "the queue's row", |t| {
        t.starts_with("on")
    })
    .await;
    b.press(&format!("{queue} button")).await;
    b.wait_text("#pause-text", "the pause dialog", |t| {
        t.starts_with("Pause queue default")
    })
    .await;
    b.click("#pause-ok").await;
    b.wait_text(&format!("{queue} td:last-child"), "the queue paused", |t| {
        t.starts_with("paused by hand until resumed")
    })
    .await;
    let v = get_json(&http, &format!("{}/v1/queues", server.url)).await;
    let default = v["queues"]
        .as_array()
        .and_then(|q| q.iter().find(|q| q["name"] == "default"))
        .expect("the default queue");
    assert!(default["paused_by_hand"].is_object(), "{v}");

    // A schedule, from its page: shown with its rule, paused, resumed.
    let made = http
        .post(format!("{}/v1/schedules", server.url))
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "id": "morning", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin",
                "job": { "request": { "method": "POST", "url": rx.url("/ok") } }
            })
            .to_string(),
        )
        .send()
        .await
        .expect("create a schedule");
    assert_eq!(made.status(), 201);
    b.goto(&format!("{}/ui/#/schedules", server.url)).await;
    let sched = "tr[data-schedule='morning']";
    b.wait_text(
        &format!("{sched} td:nth-of-type(1)"),
        "the schedule's rule",
        |t| t == "cron 0 9 * * 1-5 (Europe/Berlin)",
    )
    .await;
    b.press_and_confirm(&format!("{sched} button"), |t| {
        t.starts_with("Pause schedule morning?")
    })
    .await;
    b.wait_text(
        &format!("{sched} td:last-child"),
        "the schedule paused",
        |t| t.starts_with("paused"),
    )
    .await;
    let v = get_json(&http, &format!("{}/v1/schedules/morning", server.url)).await;
    assert_eq!(v["paused"], true, "{v}");
    b.press_and_confirm(&format!("{sched} button"), |t| {
        t.starts_with("Resume schedule morning?")
    })
    .await;
    b.wait_text(
        &format!("{sched} td:last-child"),
        "the schedule resumed",
        |t| t.starts_with("on"),
    )
    .await;

    // Issue 36: the page drew every schedule (10,000 rows every 5 s); it shows 100 and a link to
    // the next page.
    for i in 0..100 {
        let made = http
            .post(format!("{}/v1/schedules", server.url))
            .header("content-type", "application/json")
            .body(
                serde_json::json!({
                    "id": format!("s{i:03}"), "every": "1h",
                    "job": { "request": { "method": "POST", "url": rx.url("/ok") } }
                })
                .to_string(),
            )
            .send()
            .await
            .expect("create a schedule");
        assert_eq!(made.status(), 201);
    }
    // (Another address than the page's own, so that it draws at once.)
    b.goto(&format!("{}/ui/#/schedules?again", server.url))
        .await;
    b.wait_text(
        "tr[data-schedule='s098'] th",
        "the first page's last row",
        |t| t == "s098",
    )
    .await;
    assert_eq!(
        b.js(
            "return document.querySelectorAll('tr[data-schedule]').length",
            ""
        )
        .await,
        100
    );
    assert!(b.text("tr[data-schedule='s099']").await.is_none());
    b.click("a[href^='#/schedules?cursor=']").await;
    b.wait_text("tr[data-schedule='s099'] th", "the next page's row", |t| {
        t == "s099"
    })
    .await;
    assert_eq!(
        b.js(
            "return document.querySelectorAll('tr[data-schedule]').length",
            ""
        )
        .await,
        1
    );
    assert!(b.text("a[href^='#/schedules?cursor=']").await.is_none());
    drop(b);
    server.terminate();
}

fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queues_groups_in_a_browser() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    // Jobs for later stay waiting, to be counted.
    for (id, group) in [("a1", "tenant-a"), ("a2", "tenant-a"), ("b1", "tenant-b")] {
        let job = serde_json::json!({
            "id": id, "group": group, "run_at": "2999-01-01T00:00:00Z",
            "request": {"method": "POST", "url": "https://api.example.com/x"}
        });
        let r = http
            .post(format!("{}/v1/jobs", server.url))
            .header("content-type", "application/json")
            .body(job.to_string())
            .send()
            .await
            .expect("enqueue");
        assert!(r.status().is_success(), "{}", r.status());
    }
    let b = Browser::start().await;
    // From the overview's queue row to the queue's groups.
    b.goto(&format!("{}/ui/#/", server.url)).await;
    b.press("tr[data-queue='default'] th a").await;
    b.wait_text(
        "tr[data-group='tenant-a'] td:nth-child(2)",
        "tenant-a's waiting jobs",
        |t| t == "2",
    )
    .await;
    b.wait_text(
        "tr[data-group='tenant-b'] td:nth-child(2)",
        "tenant-b's waiting jobs",
        |t| t == "1",
    )
    .await;
    b.wait_text("main p.muted", "the summary", |t| {
        t.starts_with("2 groups have work")
    })
    .await;
    // No limit and no attempt timed: how long the groups take is not known, and said so.
    b.wait_text(
        "tr[data-group='tenant-a'] td.drains",
        "tenant-a's forecast",
        |t| t == "not known",
    )
    .await;
    b.wait_text(
        "tr[data-group='tenant-a'] td.at-risk",
        "tenant-a's deadlines at risk",
        |t| t == "0 of 0",
    )
    .await;
    // A job's page names its group.
    b.goto(&format!("{}/ui/#/job/a1", server.url)).await;
    b.wait_text("dl.facts a[href^='#/groups/']", "the job's group", |t| {
        t == "tenant-a"
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_callback_links_to_its_delivery_in_a_browser() {
    let rx = redial_test_receiver::Receiver::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    let job = serde_json::json!({
        "id": "paid", "request": {"method": "POST", "url": rx.url("/charge")},
        "callback": {"url": rx.url("/done")}
    });
    let r = http
        .post(format!("{}/v1/jobs", server.url))
        .header("content-type", "application/json")
        .body(job.to_string())
        .send()
        .await
        .expect("enqueue");
    assert!(r.status().is_success(), "{}", r.status());
    let url = format!("{}/v1/jobs/paid?wait=30s", server.url);
    let done = eventually("the job finished", || async {
        let j = get_json(&http, &url).await;
        (j["state"] == "completed").then_some(j)
    })
    .await;
    let delivery = done["callback_delivery"]
        .as_str()
        .expect("a delivery")
        .to_owned();

    let b = Browser::start().await;
    b.goto(&format!("{}/ui/#/job/paid", server.url)).await;
    b.wait_text("#job-callback", "the job's callback", |t| {
        t.contains("/done") && t.contains("on completed, dead")
    })
    .await;
    b.click("#job-callback-delivery").await;
    b.wait_text("h1 code", "the delivery's page", |t| t == delivery)
        .await;
    b.wait_text("#job-callback-for", "the job it tells of", |t| t == "paid")
        .await;
}

/// The dashboard follows the event stream: a job that finishes shows at once on its page, not
/// at the next refresh (30 s while the stream is up, longer than this test waits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_updates_live_from_the_event_stream() {
    let rx = redial_test_receiver::Receiver::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/v1/queues/default/pause", server.url))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .expect("pause");
    assert!(r.status().is_success(), "{}", r.status());
    enqueue(&http, &server.url, None, "held", &rx.url("/ok")).await;

    let b = Browser::start().await;
    b.goto(&format!("{}/ui/#/job/held", server.url)).await;
    b.wait_text("#live-status", "the stream is up", |t| t == "Live")
        .await;
    b.wait_text("#job-state", "the job waits", |t| t == "ready")
        .await;
    let r = http
        .post(format!("{}/v1/queues/default/resume", server.url))
        .send()
        .await
        .expect("resume");
    assert!(r.status().is_success(), "{}", r.status());
    // Bounded below the live refresh: only the stream can have drawn it in time.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if b.text("#job-state").await.as_deref() == Some("completed") {
            break;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the page did not show the job completed: {:?}",
            b.text("#job-state").await
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let last = b.js("return state.lastEvent;", "").await;
    assert!(last.as_str().is_some_and(|id| id.contains('-')), "{last}");
}

/// A queue's ordering keys: from the overview to the blocked key, its dead head replayed from
/// the page after a confirmation, and the job behind it sent next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_ordering_key_replayed_in_a_browser() {
    let rx = redial_test_receiver::Receiver::start().await;
    rx.script(
        "/ledger",
        vec![
            redial_test_receiver::Reply::status(400),
            redial_test_receiver::Reply::status(200),
        ],
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let server = serve(&dir.path().join("data"), &[]);
    let http = reqwest::Client::new();
    for id in ["h0", "h1"] {
        let job = serde_json::json!({
            "id": id, "ordering_key": "acct-7",
            "request": {"method": "POST", "url": rx.url("/ledger")}
        });
        let r = http
            .post(format!("{}/v1/jobs", server.url))
            .header("content-type", "application/json")
            .body(job.to_string())
            .send()
            .await
            .expect("enqueue");
        assert!(r.status().is_success(), "{}", r.status());
    }
    eventually("the head died", || async {
        job_state(&http, &server.url, "h0").await == "dead"
    })
    .await;
    let b = Browser::start().await;
    b.goto(&format!("{}/ui/#/", server.url)).await;
    b.press("tr[data-queue='default'] a.ordering-link").await;
    b.wait_text(
        "tr[data-key='acct-7'] td:nth-child(5)",
        "why the key waits",
        |t| t.starts_with("blocked: its head h0 is dead"),
    )
    .await;
    b.wait_text(
        "tr[data-key='acct-7'] td:nth-child(4)",
        "jobs behind",
        |t| t == "1",
    )
    .await;
    // The blocked keys only, then the head's replay, confirmed.
    b.press("#ordering-blocked").await;
    b.press_and_confirm("tr[data-key='acct-7'] button", |t| {
        t.contains("Replay job h0")
    })
    .await;
    eventually("the job behind the head completed", || async {
        job_state(&http, &server.url, "h1").await == "completed"
    })
    .await;
    let sent: Vec<u16> = rx.received("/ledger").iter().map(|r| r.status).collect();
    assert_eq!(sent, [400, 200, 200], "h0, h0 again, then h1");
    b.goto(&format!("{}/ui/#/ordering/default?again", server.url))
        .await;
    b.wait_text("main p.muted:last-of-type", "no line left", |t| {
        t == "No key has a line."
    })
    .await;
    // A job's page links to its key's queue.
    b.goto(&format!("{}/ui/#/job/h1", server.url)).await;
    b.wait_text("#job-ordering-key", "the job's ordering key", |t| {
        t == "acct-7"
    })
    .await;
}

/// An endpoint with OAuth2 client credentials: its page says which, where the client secret
/// comes from (never the secret), the token this node holds and until when, and no failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endpoints_credentials_and_token_on_its_page() {
    use redial_test_receiver::Behaviour;
    let rx = Receiver::start().await;
    rx.behave(
        "/token",
        Behaviour::TokenServer {
            lifetime: std::time::Duration::from_secs(3600),
        },
    );
    rx.behave("/api", Behaviour::RequiresToken);
    let dir = tempfile::tempdir().expect("temp dir");
    let origin = format!("http://{}", rx.addr());
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        format!(
            "[endpoints.\"{origin}\".auth]\nkind = \"oauth2_client_credentials\"\n\
             token_url = \"{}\"\nclient_id = \"redial\"\nclient_secret_env = \"DASH_CLIENT_SECRET\"\n\n\
             [credentials.tenant-b]\nkind = \"header\"\nheader = \"X-Key\"\nsecret_env = \"DASH_TENANT_KEY\"\n",
            rx.url("/token")
        ),
    )
    .expect("config");
    let server = serve(
        &dir.path().join("data"),
        &[
            ("REDIAL_CONFIG", config.to_str().expect("utf-8")),
            ("DASH_CLIENT_SECRET", "dash-secret-never-shown"),
            ("DASH_TENANT_KEY", "dash-tenant-key-never-shown"),
        ],
    );
    let http = reqwest::Client::new();
    enqueue(&http, &server.url, None, "paid", &rx.url("/api")).await;
    eventually("the job completes with a token", || async {
        job_state(&http, &server.url, "paid").await == "completed"
    })
    .await;
    let b = Browser::start().await;
    b.goto(&format!(
        "{}/ui/#/endpoint/{}",
        server.url,
        url_escape(&origin)
    ))
    .await;
    b.wait_text("#endpoint-credentials", "the endpoint's credentials", |t| {
        t == "oauth2_client_credentials, client secret from env DASH_CLIENT_SECRET"
    })
    .await;
    b.wait_text("#endpoint-token", "the token's state", |t| {
        t.starts_with("valid until ") && t.contains("1 token fetched from http://")
    })
    .await;
    b.wait_text("#endpoint-token-failure", "no token failure", |t| {
        t == "none"
    })
    .await;
    b.wait_text(
        "#endpoint-token-gate",
        "the token endpoint's breaker",
        |t| t == "may be asked",
    )
    .await;
    // A job that names a credentials profile says which on its page.
    let r = http
        .post(format!("{}/v1/jobs", server.url))
        .header("content-type", "application/json")
        .body(
            serde_json::json!({"id": "tenant", "request": {"method": "POST",
                "url": rx.url("/plain"), "credentials": "tenant-b"}})
            .to_string(),
        )
        .send()
        .await
        .expect("enqueue");
    assert_eq!(r.status(), 201);
    b.goto(&format!("{}/ui/#/job/tenant", server.url)).await;
    b.wait_text("#job-credentials", "the job's profile", |t| {
        t == "profile tenant-b (instead of the endpoint's)"
    })
    .await;
    drop(b);
    server.terminate();
}
