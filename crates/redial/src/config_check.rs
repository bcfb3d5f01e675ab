//! `redial config check`: resolves flags, `REDIAL_*` variables and the configuration file exactly
//! as `serve` does (the same [`Settings::resolve`]), then makes the checks `serve` makes at start
//! short of opening the database and the port (the `OTEL_*` variables, the HTTP client, the
//! file's schedules, checked by the API's own intake against the configuration alone), and reports
//! every problem, each with the file's line when it has one. `--print` shows what was resolved
//! as TOML, tokens, secrets and passwords redacted.

use crate::config::{describe_problems, Problem};
use crate::serve::redact_url;
use crate::settings::{Settings, StoreChoice};
use anyhow::{anyhow, Result};
use redial_policy::Human;
use serde_json::{json, Map, Value};

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Resolve flags, REDIAL_* variables and the file (--config or REDIAL_CONFIG) as `serve`
    /// would and report every problem, with the file's line; exit 1 if there is any. --print
    /// shows the resolved configuration as TOML, secrets redacted.
    Check(CheckArgs),
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    #[command(flatten)]
    serve: crate::serve::Args,
    /// Print the resolved configuration as TOML: every value in force, defaults included;
    /// tokens, signing secrets, passwords and secret headers shown as "[redacted]".
    #[arg(long)]
    print: bool,
}

const REDACTED: &str = "[redacted]";

pub async fn run(command: ConfigCommand) -> Result<()> {
    let ConfigCommand::Check(args) = command;
    let source = args
        .serve
        .config
        .as_ref()
        .map_or_else(|| "no file".to_owned(), |p| p.display().to_string());
    // The file's and the flags' problems, all of them, as serve would tell them.
    let settings = Settings::resolve(&args.serve).map_err(|e| anyhow!("{e:#}"))?;
    let mut problems = Vec::new();
    if let Err(e) = redial_engine::otel::OtlpConfig::from_env(|k| std::env::var(k).ok()) {
        problems.push(Problem {
            line: None,
            message: e,
        });
    }
    if let Err(e) = redial_engine::http::HttpExecutor::new(settings.http.clone()) {
        problems.push(Problem {
            line: None,
            message: format!("the HTTP client: {e}"),
        });
    }
    for message in check_schedules(&settings) {
        problems.push(Problem {
            line: args
                .serve
                .config
                .as_ref()
                .and_then(|path| schedule_line(path, &message)),
            message,
        });
    }
    if !problems.is_empty() {
        return Err(anyhow!("{}", describe_problems(&source, &problems)));
    }
    if args.print {
        print!("{}", toml_text(&resolved(&settings)));
    } else {
        let store = match &settings.store {
            StoreChoice::Sqlite { data_dir } => {
                format!("SQLite in {}", data_dir.join("redial.db").display())
            }
            StoreChoice::Postgres { url, .. } => format!("PostgreSQL at {}", redact_url(url)),
        };
        println!(
            "configuration ok ({source}): listen on {}, {store}, {} queues, {} endpoints configured, {} schedules",
            settings.listen,
            settings.engine.queues.len(),
            settings.engine.endpoints.len(),
            settings.schedules.len()
        );
    }
    Ok(())
}

/// The file's schedules, checked by the API's own code (`redial_intake::config_schedules`)
/// against the configuration alone: no database, no engine, nothing written.
fn check_schedules(settings: &Settings) -> Vec<String> {
    let engine = settings.engine.clone().with_own_queues();
    let intake = redial_intake::Intake {
        engine: &engine,
        max_job_body_bytes: settings.server.max_job_body_bytes,
        credentials: &settings.http.credentials,
    };
    let now = redial_engine::Clock::now(&redial_engine::SystemClock);
    redial_intake::config_schedules(&intake, settings.schedules.clone(), now)
        .err()
        .unwrap_or_default()
}

/// The line of the `[[schedules]]` a "schedules[i]: ..." problem is about.
fn schedule_line(path: &std::path::Path, problem: &str) -> Option<usize> {
    let i: usize = problem
        .strip_prefix("schedules[")?
        .split(']')
        .next()?
        .parse()
        .ok()?;
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim().starts_with("[[schedules]]"))
        .nth(i)
        .map(|(n, _)| n + 1)
}

fn human(d: std::time::Duration) -> Value {
    Value::String(Human(d).to_string())
}

fn secret(given: bool) -> Value {
    if given {
        Value::String(REDACTED.into())
    } else {
        Value::Null
    }
}

/// What `serve` would run with, as a document in the configuration file's shape.
fn resolved(s: &Settings) -> Value {
    let mut doc = Map::new();
    store_section(&mut doc, s);
    server_sections(&mut doc, s);
    engine_sections(&mut doc, s);
    queues_and_endpoints(&mut doc, s);
    schedules_and_notifications(&mut doc, s);
    Value::Object(doc)
}

/// `data_dir`, or `database_url` (redacted) and `[postgres]`.
fn store_section(doc: &mut Map<String, Value>, s: &Settings) {
    match &s.store {
        StoreChoice::Sqlite { data_dir } => {
            doc.insert("data_dir".into(), json!(data_dir.display().to_string()));
        }
        StoreChoice::Postgres { url, config } => {
            doc.insert("database_url".into(), json!(redact_url(url)));
            doc.insert(
                "postgres".into(),
                json!({
                    "call_timeout": human(config.call_timeout()),
                    "ready_timeout": human(config.ready_timeout()),
                }),
            );
        }
    }
}

/// `[server]` (tokens redacted), `[ui]`, `[network]`, `[http]`.
fn server_sections(doc: &mut Map<String, Value>, s: &Settings) {
    let server = &s.server;
    doc.insert(
        "server".into(),
        json!({
            "listen": s.listen.to_string(),
            "token": secret(server.token.is_some()),
            "read_only_token": secret(server.read_only_token.is_some()),
            "max_batch": server.max_batch,
            "max_request_bytes": server.max_request_bytes,
            "max_job_body_bytes": server.max_job_body_bytes,
            "allowed_hosts": server.allowed_hosts,
            "allowed_origins": server.allowed_origins,
            "max_connections": server.max_connections,
            "header_timeout": human(server.header_timeout),
            "idle_timeout": human(server.idle_timeout),
            "write_timeout": human(server.write_timeout),
            "body_timeout": human(server.body_timeout),
            "max_waiters": server.max_waiters,
        }),
    );
    doc.insert("ui".into(), json!({ "read_only": server.ui_read_only }));
    doc.insert(
        "network".into(),
        json!({ "allow_private_networks": s.http.allow_private_networks }),
    );
    doc.insert(
        "http".into(),
        json!({
            "default_timeout": human(s.http.default_timeout),
            "connect_timeout": human(s.http.connect_timeout),
            "max_body_bytes": s.http.max_body_bytes,
            "idempotency_header": s.http.idempotency_header,
            "idempotency_methods": s.http.idempotency_methods,
        }),
    );
}

/// `[engine]`, `[retention]`, `[metrics]`, `[alerts]` (the webhook redacted).
fn engine_sections(doc: &mut Map<String, Value>, s: &Settings) {
    let e = &s.engine;
    doc.insert(
        "engine".into(),
        json!({
            "lease": human(e.lease),
            "heartbeat": human(e.heartbeat),
            "max_stalls": e.max_stalls,
            "shutdown_grace": human(s.shutdown_grace),
            "poll_interval": human(e.poll_interval),
        }),
    );
    doc.insert(
        "retention".into(),
        json!({
            "completed": human(e.retention.completed),
            "completed_max": e.retention.completed_max,
            "dead": human(e.retention.dead),
            "events": human(e.retention.events),
            "endpoints": human(e.retention.endpoints),
        }),
    );
    doc.insert(
        "metrics".into(),
        json!({ "max_endpoints": e.metrics_max_endpoints }),
    );
    let rules: Vec<Value> = e.alerts.rules.iter().map(alert_rule).collect();
    doc.insert(
        "alerts".into(),
        json!({
            "interval": human(e.alerts.interval),
            "webhook": e.alerts.webhook.as_deref().map(redial_engine::redact::url),
            "rules": rules,
        }),
    );
}

/// `[queues.*]` and `[endpoints.*]` (signing secrets redacted), `[endpoint_defaults]`, and
/// `[credentials.*]` (where their secrets come from, never the secrets).
fn queues_and_endpoints(doc: &mut Map<String, Value>, s: &Settings) {
    let e = &s.engine;
    let mut queues = Map::new();
    for (name, q) in &e.queues {
        let secrets = s.http.signing.by_queue.get(name).map_or(0, Vec::len);
        queues.insert(
            name.clone(),
            json!({
                "concurrency": q.concurrency,
                "signing_secrets": vec![REDACTED; secrets],
                "group_concurrency": q.groups.each.concurrency,
                "group_rate": q.groups.each.rate,
                "groups": q.groups.named,
                "policy": q.policy,
            }),
        );
    }
    doc.insert("queues".into(), Value::Object(queues));
    doc.insert(
        "endpoint_defaults".into(),
        serde_json::to_value(&e.endpoint_defaults).unwrap_or(Value::Null),
    );
    let mut endpoints = Map::new();
    for (origin, settings) in &e.endpoints {
        let mut one = match serde_json::to_value(&settings.limits) {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let secrets = s.http.signing.by_endpoint.get(origin).map_or(0, Vec::len);
        if secrets > 0 {
            one.insert("signing_secrets".into(), json!(vec![REDACTED; secrets]));
        }
        if let Some(p) = &settings.policy {
            one.insert(
                "policy".into(),
                serde_json::to_value(p).unwrap_or(Value::Null),
            );
        }
        if let Some(c) = s.http.credentials.of(origin) {
            one.insert(
                "allow_job_credentials".into(),
                json!(c.allow_job_credentials),
            );
            one.insert("auth".into(), auth_view(c));
        }
        endpoints.insert(origin.clone(), Value::Object(one));
    }
    doc.insert("endpoints".into(), Value::Object(endpoints));
    let mut profiles = Map::new();
    for (name, c) in &s.http.credentials.profiles {
        let mut one = match auth_view(c) {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        one.insert(
            "allow_job_credentials".into(),
            json!(c.allow_job_credentials),
        );
        profiles.insert(name.clone(), Value::Object(one));
    }
    if !profiles.is_empty() {
        doc.insert("credentials".into(), Value::Object(profiles));
    }
}

/// An endpoint's credentials as `--print` shows them: where each secret comes from (an
/// environment variable's name, a file's path), never its value; a secret written in the file
/// is "[redacted]".
fn auth_view(c: &redial_engine::credentials::EndpointCredentials) -> Value {
    use redial_engine::credentials::{Auth, ClientAuth, Secret};
    let auth = &c.auth;
    let source = |secret: &Secret, prefix: &str, doc: &mut Map<String, Value>| {
        let described = secret.describe();
        match described.split_once(' ') {
            Some(("env", name)) => doc.insert(format!("{prefix}_env"), json!(name)),
            Some(("file", path)) => doc.insert(format!("{prefix}_file"), json!(path)),
            _ => doc.insert(prefix.to_owned(), json!(REDACTED)),
        };
    };
    let mut doc = Map::new();
    doc.insert("kind".into(), json!(auth.kind()));
    match auth {
        Auth::Bearer { token } => source(token, "secret", &mut doc),
        Auth::Basic { username, password } => {
            doc.insert("username".into(), json!(username));
            source(password, "secret", &mut doc);
        }
        Auth::Header { name, value } => {
            doc.insert("header".into(), json!(name));
            source(value, "secret", &mut doc);
        }
        Auth::OAuth2(o) => {
            doc.insert(
                "token_url".into(),
                json!(redial_engine::redact::url(&o.token_url)),
            );
            doc.insert("client_id".into(), json!(o.client_id));
            source(&o.client_secret, "client_secret", &mut doc);
            doc.insert("scopes".into(), json!(o.scopes));
            if let Some(a) = &o.audience {
                doc.insert("audience".into(), json!(a));
            }
            let how = match o.client_auth {
                ClientAuth::ClientSecretBasic => "client_secret_basic",
                ClientAuth::ClientSecretPost => "client_secret_post",
            };
            doc.insert("client_auth".into(), json!(how));
        }
        Auth::Mtls(_) => {}
    }
    if let Some(m) = c.client_certificate() {
        doc.insert("cert_file".into(), json!(m.cert_file.display().to_string()));
        doc.insert("key_file".into(), json!(m.key_file.display().to_string()));
    }
    if let Some(ca) = c.tls().and_then(|t| t.ca_file.as_ref()) {
        doc.insert("ca_file".into(), json!(ca.display().to_string()));
    }
    Value::Object(doc)
}

/// `[[schedules]]` and `[[notifications]]`, their secrets redacted.
fn schedules_and_notifications(doc: &mut Map<String, Value>, s: &Settings) {
    let e = &s.engine;
    let schedules: Vec<Value> = s.schedules.iter().map(redact_schedule).collect();
    doc.insert("schedules".into(), Value::Array(schedules));
    let notifications: Vec<Value> = e
        .notifications
        .iter()
        .map(|n| {
            let origin = url::Url::parse(&n.url)
                .map(|u| u.origin().ascii_serialization())
                .unwrap_or_default();
            let secrets = s.http.signing.by_endpoint.get(&origin).map_or(0, Vec::len);
            json!({
                "name": n.name,
                "url": redial_engine::redact::url(&n.url),
                "events": n.events.iter().map(|e| e.as_str()).collect::<Vec<_>>(),
                "format": n.format,
                "paused_longer_than": human(n.paused_longer_than),
                "signing_secrets": vec![REDACTED; secrets],
            })
        })
        .collect();
    doc.insert("notifications".into(), Value::Array(notifications));
}

/// An alert rule as the file writes one.
fn alert_rule(rule: &redial_engine::alerts::AlertRule) -> Value {
    use redial_engine::alerts::AlertCondition;
    match &rule.condition {
        AlertCondition::DeadLetters {
            category,
            queue,
            more_than,
            within,
        } => json!({
            "name": rule.name,
            "category": category.map(|c| c.as_str()),
            "queue": queue,
            "more_than": more_than,
            "within": human(*within),
        }),
        AlertCondition::DeferredAge { queue, older_than } => json!({
            "name": rule.name,
            "queue": queue,
            "deferred_older_than": human(*older_than),
        }),
        AlertCondition::DeadlineAtRisk {
            endpoint,
            more_than,
        } => json!({
            "name": rule.name,
            "deadline_at_risk": true,
            "endpoint": endpoint,
            "more_than": more_than,
        }),
    }
}

/// A schedule as written, its job's secret headers and URL credentials redacted.
fn redact_schedule(schedule: &Value) -> Value {
    let mut out = schedule.clone();
    if let Some(request) = out.pointer_mut("/job/request") {
        if let Some(url) = request.get("url").and_then(Value::as_str) {
            request["url"] = json!(redial_engine::redact::url(url));
        }
        if let Some(Value::Object(headers)) = request.get_mut("headers") {
            for (name, value) in headers.iter_mut() {
                if redial_engine::redact::is_secret_name(name) {
                    *value = json!(REDACTED);
                }
            }
        }
    }
    out
}

/// `doc` as TOML: scalars and arrays of scalars first, then each table under its header, then
/// arrays of tables; nulls (unset values) left out.
fn toml_text(doc: &Value) -> String {
    let mut out = String::new();
    if let Value::Object(map) = doc {
        write_table(&mut out, &[], map);
    }
    out
}

fn write_table(out: &mut String, path: &[String], map: &Map<String, Value>) {
    let is_table_array =
        |v: &Value| matches!(v, Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_object));
    for (k, v) in map {
        if v.is_null() || v.is_object() || is_table_array(v) {
            continue;
        }
        out.push_str(&format!("{} = {}\n", key(k), inline(v)));
    }
    for (k, v) in map {
        let mut here = path.to_vec();
        here.push(key(k));
        match v {
            Value::Object(inner) => {
                out.push_str(&format!("\n[{}]\n", here.join(".")));
                write_table(out, &here, inner);
            }
            Value::Array(items) if is_table_array(v) => {
                for item in items {
                    out.push_str(&format!("\n[[{}]]\n", here.join(".")));
                    if let Value::Object(inner) = item {
                        write_table(out, &here, inner);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A bare key when it may be one, else a quoted one.
fn key(k: &str) -> String {
    if !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        Value::String(k.to_owned()).to_string()
    }
}

/// A value on one line: JSON's strings, numbers and booleans are TOML's; arrays and tables
/// written inline.
fn inline(v: &Value) -> String {
    match v {
        Value::Null => "\"\"".into(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(inline).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(m) => format!(
            "{{ {} }}",
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("{} = {}", key(k), inline(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_become_toml_that_reads_back_the_same() {
        let doc = json!({
            "data_dir": "/var/lib/redial",
            "server": {"listen": "127.0.0.1:8080", "token": "[redacted]", "allowed_hosts": ["a", "b"], "read_only_token": null},
            "queues": {"mail": {"concurrency": 4, "policy": {"max_attempts": 3, "rules": [{"match": {"status": 409}, "category": "transient"}]}}},
            "endpoints": {"https://api.example.com": {"rate": "5/s"}},
            "schedules": [{"id": "a", "every": "1m"}, {"id": "b", "cron": "* * * * *"}],
        });
        let text = toml_text(&doc);
        let back: toml::Table = toml::from_str(&text).expect(&text);
        let back = serde_json::to_value(back).expect("JSON");
        let mut want = doc.clone();
        want["server"]
            .as_object_mut()
            .expect("server")
            .remove("read_only_token");
        assert_eq!(back, want, "{text}");
    }
}
