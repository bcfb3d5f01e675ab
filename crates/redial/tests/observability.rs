//! The real `redial serve` process with traces, metrics, JSON logs and alerts on, through a
//! scripted scenario against test receivers on loopback: an OTLP receiver takes the spans, a
//! webhook receiver the alert notifications, and the server's own standard error the logs.

use redial_test_receiver::{Receiver, Reply};
use serde_json::{json, Value};

mod common;
use common::{eventually, serve_command, within_patience, Server};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const SECRET: &str = "s3cr3t-key-value";

fn start(config: &std::path::Path, data: &std::path::Path, otlp: &str) -> Server {
    let mut cmd = serve_command();
    cmd.arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .args(["--log-format", "json"])
        .env("REDIAL_LOG", "info")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("OTEL_SERVICE_NAME", "redial-test");
    Server::start(cmd)
}

async fn get(http: &reqwest::Client, url: String) -> String {
    http.get(url)
        .send()
        .await
        .expect("GET")
        .text()
        .await
        .expect("a body")
}

async fn enqueue(http: &reqwest::Client, s: &Server, id: &str, url: &str) {
    let res = http
        .post(format!("{}/v1/jobs", s.url))
        .header("content-type", "application/json")
        .header("traceparent", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .body(
            json!({"id": id, "request": {"method": "POST", "url": url, "body": "{}"}}).to_string(),
        )
        .send()
        .await
        .expect("enqueue");
    assert_eq!(res.status().as_u16(), 201, "{id}");
}

async fn state(http: &reqwest::Client, s: &Server, id: &str) -> String {
    let j: Value = serde_json::from_str(&get(http, format!("{}/v1/jobs/{id}", s.url)).await)
        .expect("job JSON");
    j["state"].as_str().unwrap_or_default().to_owned()
}

/// Every span the OTLP receiver got, flattened, attributes as a key -> JSON value map.
fn spans(otlp: &Receiver) -> Vec<Value> {
    let mut out = Vec::new();
    for r in otlp.received("/v1/traces") {
        let body: Value = serde_json::from_str(&r.body).expect("OTLP JSON");
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            let service = rs["resource"]["attributes"][0]["value"]["stringValue"].clone();
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for span in ss["spans"].as_array().into_iter().flatten() {
                    let mut attrs = serde_json::Map::new();
                    for a in span["attributes"].as_array().into_iter().flatten() {
                        let v = &a["value"];
                        let v = v
                            .get("stringValue")
                            .or_else(|| v.get("intValue"))
                            .or_else(|| v.get("boolValue"))
                            .cloned()
                            .unwrap_or(Value::Null);
                        attrs.insert(a["key"].as_str().unwrap_or_default().to_owned(), v);
                    }
                    let mut s = span.clone();
                    s["attrs"] = Value::Object(attrs);
                    s["service"] = service.clone();
                    out.push(s);
                }
            }
        }
    }
    out
}

fn metric(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_spans_logs_and_alerts_tell_the_retry_story() {
    let api = Receiver::start().await;
    api.script("/ok", vec![Reply::status(200)]);
    api.script(
        "/bad",
        vec![Reply::status(400).body("{\"error\":\"invalid\"}")],
    );
    api.script(
        "/limited",
        vec![
            Reply::status(429).header("Retry-After", "1"),
            Reply::status(200),
        ],
    );
    let otlp = Receiver::start().await;
    let hook = Receiver::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        format!(
            r#"
[endpoint_defaults]
probe_first = false

[alerts]
interval = "200ms"
webhook = "{}"

# The window is counted back from each evaluation, by the finish times the store holds: wide
# enough that an evaluation or a recording held up for a few seconds on a busy machine still
# sees the dead letter, and short enough for the test to wait for the alert to clear.
[[alerts.rules]]
name = "permanent_dead_letters"
category = "permanent"
more_than = 0
within = "10s"
"#,
            hook.url("/hook")
        ),
    )
    .expect("write config");
    let s = start(
        &config,
        &dir.path().join("data"),
        &format!("http://{}", otlp.addr()),
    );
    let http = reqwest::Client::new();

    enqueue(&http, &s, "ok1", &api.url("/ok")).await;
    enqueue(
        &http,
        &s,
        "bad1",
        &format!("{}?api_key={SECRET}", api.url("/bad")),
    )
    .await;
    enqueue(&http, &s, "lim1", &api.url("/limited")).await;
    for (id, want) in [
        ("ok1", "completed"),
        ("bad1", "dead"),
        ("lim1", "completed"),
    ] {
        eventually(&format!("{id} {want}"), || async {
            state(&http, &s, id).await == want
        })
        .await;
    }

    // Metrics: the story by outcome and category, the dead letter, the deferral and its reason.
    let endpoint = format!("http://{}", api.addr());
    // Once the gauge counts both completed jobs; if it never does, the assertions below say what
    // the text lacks.
    let metrics = || get(&http, format!("{}/metrics", s.url));
    let counted = within_patience(|| async {
        let text = metrics().await;
        let completed = metric(&text, "redial_jobs{queue=\"default\",state=\"completed\"}");
        (completed == Some(2.0)).then_some(text)
    })
    .await;
    let text = match counted {
        Some(text) => text,
        None => metrics().await,
    };
    let attempts = |outcome: &str, category: &str| {
        metric(
            &text,
            &format!(
                "redial_attempts_total{{queue=\"default\",endpoint=\"{endpoint}\",outcome=\"{outcome}\",category=\"{category}\"}}"
            ),
        )
    };
    assert_eq!(attempts("200", "success"), Some(2.0), "{text}");
    assert_eq!(attempts("400", "permanent"), Some(1.0), "{text}");
    assert_eq!(attempts("429", "defer"), Some(1.0));
    assert_eq!(
        metric(&text, "redial_dead_letters_total{category=\"permanent\"}"),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &text,
            &format!("redial_deferrals_total{{queue=\"default\",endpoint=\"{endpoint}\",reason=\"Retry-After\"}}")
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "redial_decisions_total{queue=\"default\",decision=\"complete\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        metric(
            &text,
            "redial_dead_letter_depth{queue=\"default\",category=\"permanent\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &text,
            &format!("redial_attempt_duration_seconds_count{{queue=\"default\",endpoint=\"{endpoint}\"}}")
        ),
        Some(4.0)
    );
    assert_eq!(
        metric(
            &text,
            "redial_job_latency_seconds_count{queue=\"default\",state=\"completed\"}"
        ),
        Some(2.0)
    );
    assert!(!text.contains(SECRET));

    // Spans: the caller's trace, a job span under the caller's span, attempt spans under it.
    eventually("spans of every attempt arrived", || async {
        spans(&otlp)
            .iter()
            .filter(|s| s["attrs"]["redial.attempt"].is_string())
            .count()
            >= 4
    })
    .await;
    let all = spans(&otlp);
    let bad = all
        .iter()
        .find(|s| s["attrs"]["redial.job.id"] == "bad1" && s["kind"] == 3)
        .expect("the failed attempt's span");
    assert_eq!(bad["traceId"], CALLER_TRACE);
    assert_eq!(bad["service"], "redial-test");
    let a = &bad["attrs"];
    assert_eq!(a["http.request.method"], "POST");
    assert_eq!(a["server.address"], "127.0.0.1");
    assert_eq!(a["http.response.status_code"], "400");
    assert_eq!(a["error.type"], "400");
    assert_eq!(a["redial.category"], "permanent");
    assert_eq!(a["redial.decision"], "dead");
    assert_eq!(a["redial.dead_category"], "permanent");
    assert_eq!(a["redial.attempt"], "1");
    assert_eq!(a["redial.attempt.max"], "10");
    let url = a["url.full"].as_str().expect("url.full");
    assert!(url.contains("api_key=") && !url.contains(SECRET), "{url}");
    assert_eq!(bad["status"]["code"], 2);
    let job_span = all
        .iter()
        .find(|s| s["attrs"]["redial.job.id"] == "bad1" && s["kind"] == 1)
        .expect("the job's span");
    assert_eq!(job_span["parentSpanId"], CALLER_SPAN);
    assert_eq!(bad["parentSpanId"], job_span["spanId"]);
    let deferred = all
        .iter()
        .find(|s| s["attrs"]["redial.job.id"] == "lim1" && s["attrs"]["redial.decision"] == "defer")
        .expect("the deferred attempt's span");
    assert_eq!(deferred["attrs"]["redial.server_wait_ms"], "1000");
    assert_eq!(
        deferred["attrs"]["redial.server_wait_source"],
        "Retry-After"
    );
    // Each request carried its attempt's context, in the caller's trace.
    let sent = api.received("/bad");
    let tp = sent[0].header("traceparent").expect("a traceparent");
    assert_eq!(
        tp,
        format!(
            "00-{CALLER_TRACE}-{}-01",
            bad["spanId"].as_str().expect("id")
        )
    );

    // Logs: one JSON event per decision, with the span's fields, and no secret anywhere.
    let logs = s.logs();
    // JSON was asked for: every line is one JSON object, each event once (issue 16).
    for line in &logs {
        assert!(
            serde_json::from_str::<Value>(line).is_ok_and(|v| v.is_object()),
            "a line that is not a JSON object: {line}"
        );
    }
    let listening = logs
        .iter()
        .filter(|l| l.contains("redial listening"))
        .count();
    assert_eq!(listening, 1, "{logs:?}");
    let decided: Vec<Value> = logs
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|l| l["message"] == "attempt decided")
        .collect();
    assert_eq!(decided.len(), 4, "{logs:?}");
    let e = decided
        .iter()
        .find(|e| e["job"] == "bad1")
        .expect("bad1's event");
    assert_eq!(e["category"], "permanent");
    assert_eq!(e["decision"], "dead");
    assert_eq!(e["attempt"], 1);
    assert_eq!(e["attempt_max"], 10);
    assert_eq!(e["http.response.status_code"], 400);
    assert_eq!(e["error.type"], "400");
    assert!(e["url.full"].as_str().is_some_and(|u| !u.contains(SECRET)));
    let d = decided
        .iter()
        .find(|e| e["job"] == "lim1" && e["decision"] == "defer")
        .expect("lim1's deferral");
    assert_eq!(d["server_wait_ms"], 1000);
    assert!(
        logs.iter().all(|l| !l.contains(SECRET)),
        "a secret reached the logs"
    );

    // The alert fired on the permanent dead letter and told the webhook; it clears once the
    // dead letter is older than the rule's window.
    let heard = within_patience(|| async {
        hook.received("/hook")
            .iter()
            .any(|r| r.body.contains("\"status\":\"firing\""))
    })
    .await;
    if heard.is_none() {
        // What the server said about its alerts tells a rule that never fired from a
        // notification that was not delivered.
        let said: Vec<String> = s
            .logs()
            .into_iter()
            .filter(|l| l.contains("alert"))
            .collect();
        panic!(
            "never happened: the webhook heard the alert fire; the server's alert lines: {said:?}"
        );
    }
    let firing: Value = serde_json::from_str(&hook.received("/hook")[0].body).expect("JSON");
    assert_eq!(firing["alert"], "permanent_dead_letters");
    assert!(firing["text"]
        .as_str()
        .is_some_and(|t| t.contains("FIRING")));
    let alerts: Value =
        serde_json::from_str(&get(&http, format!("{}/v1/alerts", s.url)).await).expect("alerts");
    let text = get(&http, format!("{}/metrics", s.url)).await;
    let now_firing = alerts["alerts"][0]["firing"].as_bool();
    let gauge = metric(
        &text,
        "redial_alert_firing{alert=\"permanent_dead_letters\"}",
    );
    assert!(
        (now_firing == Some(true) && gauge == Some(1.0)) || now_firing == Some(false),
        "/v1/alerts and the metric agree: {alerts} {gauge:?}"
    );
    eventually("the webhook heard the alert resolve", || async {
        hook.received("/hook")
            .iter()
            .any(|r| r.body.contains("\"status\":\"resolved\""))
    })
    .await;
    let alerts: Value =
        serde_json::from_str(&get(&http, format!("{}/v1/alerts", s.url)).await).expect("alerts");
    assert_eq!(alerts["alerts"][0]["firing"], false);
    assert_eq!(
        hook.received("/hook").len(),
        2,
        "told once when it fired, once when it cleared"
    );
}
