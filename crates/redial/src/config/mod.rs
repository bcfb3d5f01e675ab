//! The configuration file (TOML) and its defaults. Flags and `REDIAL_*` environment variables
//! override what the file says; the file overrides the defaults. A bad file fails at start with
//! the file, the line and the reason.
//!
//! Over 600 lines: every section of the file, its defaults and their resolution: the file's one
//! schema.

use crate::UsageError;
use anyhow::Result;
use redial_engine::EndpointSettings;
use redial_policy::endpoint::EndpointConfig;
use redial_policy::{serde_human, Policy, PolicyOverride};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod problems;
pub(crate) use problems::locate;
use problems::type_problems;

mod auth;
pub use problems::{describe_problems, Problem};

#[cfg(test)]
mod tests;

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    /// Where the embedded SQLite database lives.
    pub data_dir: Option<PathBuf>,
    /// A PostgreSQL database to use instead (several nodes may share it).
    pub database_url: Option<String>,
    pub server: ServerSection,
    pub postgres: PostgresSection,
    pub ui: UiSection,
    pub network: NetworkSection,
    pub http: HttpSection,
    pub engine: EngineSection,
    pub retention: RetentionSection,
    pub metrics: MetricsSection,
    pub alerts: AlertsSection,
    /// The policy every queue starts from.
    pub policy: Policy,
    /// Queues by name; `default` always exists.
    pub queues: BTreeMap<String, QueueSection>,
    /// Limits for every endpoint not named under `endpoints` (and the base of those named).
    pub endpoint_defaults: toml::Table,
    /// By endpoint (a URL origin such as "https://api.stripe.com"): limits laid over
    /// `endpoint_defaults`, and a `policy` table laid over the queue's policy.
    pub endpoints: BTreeMap<String, toml::Table>,
    /// Credentials profiles by name, each as an endpoint's `auth` table: a job names one with
    /// its request's `credentials` to be sent with it instead of its endpoint's.
    pub credentials: BTreeMap<String, toml::Table>,
    /// Recurring schedules defined at deploy time, each as `POST /v1/schedules` takes one;
    /// checked when serving starts. Those removed from the file are deleted then.
    pub schedules: Vec<toml::Table>,
    /// Webhook targets told of endpoint and alert events, through jobs of the `notifications`
    /// queue.
    pub notifications: Vec<NotificationSection>,
}

/// One `[[notifications]]` target.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationSection {
    /// Its name, in its jobs' ids (`notify-NAME-...`); `n1`, `n2`... by position when none.
    pub name: Option<String>,
    pub url: String,
    /// What it is told of: endpoint.quarantined, endpoint.recovered, endpoint.breaker_opened,
    /// endpoint.breaker_closed, endpoint.paused, endpoint.resumed, alert.firing, alert.resolved.
    pub events: Vec<String>,
    /// "standard" (`{"type", "timestamp", "data"}`) or "slack" (`{"text"}`).
    #[serde(default)]
    pub format: Option<String>,
    /// endpoint.paused only for pauses meant to last this long or more.
    #[serde(default, with = "serde_human::option")]
    pub paused_longer_than: Option<Duration>,
    /// Sign its deliveries (Standard Webhooks) with these, as `signing_secrets` of its URL's
    /// endpoint would.
    #[serde(default)]
    pub signing_secrets: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSection {
    pub listen: Option<String>,
    pub token: Option<String>,
    /// A token that may read everything and change nothing (the dashboard for people who look).
    pub read_only_token: Option<String>,
    /// Serve without a token on a non-loopback address. Off: such a start is refused.
    pub allow_unauthenticated: bool,
    pub max_batch: usize,
    pub max_request_bytes: usize,
    pub max_job_body_bytes: usize,
    /// Host names served besides localhost, 127.0.0.1 and [::1] when listening on loopback (a
    /// request with another `Host` is refused: DNS rebinding).
    pub allowed_hosts: Vec<String>,
    /// Origins whose web pages may call the API (CORS), such as "https://ops.example.com".
    pub allowed_origins: Vec<String>,
    /// Connections open at once (lowered to fit the open-file limit).
    pub max_connections: usize,
    /// How long a request's head may take to arrive, from its first byte.
    #[serde(with = "serde_human")]
    pub header_timeout: Duration,
    /// How long a connection may stay open with no request in progress.
    #[serde(with = "serde_human")]
    pub idle_timeout: Duration,
    /// How long an answer may wait for its reader to take more of it.
    #[serde(with = "serde_human")]
    pub write_timeout: Duration,
    /// How long a request's body may take to arrive once its head has.
    #[serde(with = "serde_human")]
    pub body_timeout: Duration,
    /// Requests waiting for a job to finish at once (`GET /v1/jobs/{id}?wait=`).
    pub max_waiters: usize,
}

impl Default for ServerSection {
    fn default() -> Self {
        let d = redial_server::ServerConfig::default();
        ServerSection {
            listen: None,
            token: None,
            read_only_token: None,
            allow_unauthenticated: false,
            max_batch: d.max_batch,
            max_request_bytes: d.max_request_bytes,
            max_job_body_bytes: d.max_job_body_bytes,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_connections: d.max_connections,
            header_timeout: d.header_timeout,
            idle_timeout: d.idle_timeout,
            write_timeout: d.write_timeout,
            body_timeout: d.body_timeout,
            max_waiters: d.max_waiters,
        }
    }
}

/// How long a node waits for its PostgreSQL database before it says the database is unavailable
/// (503 `storage_unavailable`, readiness down); the node recovers by itself when it answers again.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PostgresSection {
    /// Each store call: a free connection, then its answer.
    #[serde(with = "serde_human")]
    pub call_timeout: Duration,
    /// The readiness check (`/readyz`).
    #[serde(with = "serde_human")]
    pub ready_timeout: Duration,
}

impl Default for PostgresSection {
    fn default() -> Self {
        PostgresSection {
            call_timeout: redial_store_postgres::OP_TIMEOUT,
            ready_timeout: redial_store_postgres::PING_TIMEOUT,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UiSection {
    /// The dashboard only looks: what a browser sends may read and change nothing (the CLI and
    /// the API keep their rights).
    pub read_only: bool,
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSection {
    /// Endpoints beyond this many (besides those configured) share the label `other`.
    pub max_endpoints: usize,
}

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection {
            max_endpoints: redial_engine::EngineConfig::default().metrics_max_endpoints,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlertsSection {
    #[serde(with = "serde_human")]
    pub interval: Duration,
    /// Told (Slack-compatible JSON) when an alert starts and stops firing.
    pub webhook: Option<String>,
    /// Replace the default rules when given.
    pub rules: Option<Vec<AlertRuleSection>>,
}

impl Default for AlertsSection {
    fn default() -> Self {
        AlertsSection {
            interval: redial_engine::alerts::AlertConfig::default().interval,
            webhook: None,
            rules: None,
        }
    }
}

/// One rule: dead letters (`more_than` within `within`, of a `category` and a `queue` when
/// given), deferred work (`deferred_older_than`, of a `queue` when given), or deadlines at risk
/// (`deadline_at_risk = true`: more than `more_than` waiting jobs, of an `endpoint` when given,
/// forecast to miss their deadline).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertRuleSection {
    pub name: String,
    pub category: Option<String>,
    pub queue: Option<String>,
    pub more_than: Option<u64>,
    #[serde(default, with = "serde_human::option")]
    pub within: Option<Duration>,
    #[serde(default, with = "serde_human::option")]
    pub deferred_older_than: Option<Duration>,
    #[serde(default)]
    pub deadline_at_risk: bool,
    pub endpoint: Option<String>,
}

impl AlertsSection {
    pub fn to_config(&self) -> Result<redial_engine::alerts::AlertConfig, String> {
        use redial_engine::alerts::{AlertCondition, AlertConfig, AlertRule};
        if self.interval.is_zero() {
            return Err("alerts.interval must be longer than zero".into());
        }
        if let Some(url) = &self.webhook {
            let parsed =
                url::Url::parse(url).map_err(|e| format!("alerts.webhook is not a URL ({e})"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err("alerts.webhook must be an http or https URL".into());
            }
        }
        let rules = match &self.rules {
            None => AlertRule::defaults(),
            Some(rules) => {
                let mut out = Vec::new();
                for r in rules {
                    let at = format!("alerts.rules {:?}", r.name);
                    if r.name.is_empty() || out.iter().any(|o: &AlertRule| o.name == r.name) {
                        return Err(format!("{at}: each rule needs a name of its own"));
                    }
                    if r.endpoint.is_some() && !r.deadline_at_risk {
                        return Err(format!("{at}: endpoint is for deadline_at_risk rules only"));
                    }
                    let condition = match r.deferred_older_than {
                        _ if r.deadline_at_risk => {
                            if r.category.is_some()
                                || r.queue.is_some()
                                || r.within.is_some()
                                || r.deferred_older_than.is_some()
                            {
                                return Err(format!("{at}: deadline_at_risk takes only more_than and endpoint, not category, queue, within or deferred_older_than"));
                            }
                            AlertCondition::DeadlineAtRisk {
                                endpoint: r.endpoint.clone(),
                                more_than: r.more_than.unwrap_or(0),
                            }
                        }
                        Some(older_than) => {
                            if r.category.is_some() || r.more_than.is_some() || r.within.is_some() {
                                return Err(format!("{at}: deferred_older_than takes only a queue, not category, more_than or within"));
                            }
                            AlertCondition::DeferredAge {
                                queue: r.queue.clone(),
                                older_than,
                            }
                        }
                        None => {
                            let category = r
                                .category
                                .as_deref()
                                .map(redial_store::parse_dead_category)
                                .transpose()
                                .map_err(|e| format!("{at}: {e}"))?;
                            let within = r.within.unwrap_or(Duration::from_secs(300));
                            if within.is_zero() {
                                return Err(format!("{at}: within must be longer than zero"));
                            }
                            AlertCondition::DeadLetters {
                                category,
                                queue: r.queue.clone(),
                                more_than: r.more_than.unwrap_or(0),
                                within,
                            }
                        }
                    };
                    out.push(AlertRule {
                        name: r.name.clone(),
                        condition,
                    });
                }
                out
            }
        };
        Ok(AlertConfig {
            rules,
            interval: self.interval,
            webhook: self.webhook.clone(),
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NetworkSection {
    /// Let jobs call loopback, private, link-local and other non-public addresses.
    pub allow_private_networks: bool,
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSection {
    #[serde(with = "serde_human")]
    pub default_timeout: Duration,
    #[serde(with = "serde_human")]
    pub connect_timeout: Duration,
    pub max_body_bytes: usize,
    pub idempotency_header: String,
    pub idempotency_methods: Vec<String>,
}

impl Default for HttpSection {
    fn default() -> Self {
        let d = redial_engine::http::HttpConfig::default();
        HttpSection {
            default_timeout: d.default_timeout,
            connect_timeout: d.connect_timeout,
            max_body_bytes: d.max_body_bytes,
            idempotency_header: d.idempotency_header,
            idempotency_methods: d.idempotency_methods,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSection {
    #[serde(with = "serde_human")]
    pub lease: Duration,
    #[serde(with = "serde_human")]
    pub heartbeat: Duration,
    pub max_stalls: u32,
    #[serde(with = "serde_human")]
    pub shutdown_grace: Duration,
    #[serde(with = "serde_human")]
    pub poll_interval: Duration,
}

impl Default for EngineSection {
    fn default() -> Self {
        let d = redial_engine::EngineConfig::default();
        EngineSection {
            lease: d.lease,
            heartbeat: d.heartbeat,
            max_stalls: d.max_stalls,
            shutdown_grace: Duration::from_secs(10),
            poll_interval: d.poll_interval,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSection {
    #[serde(with = "serde_human")]
    pub completed: Duration,
    /// Keep at most this many completed and cancelled jobs (the newest).
    pub completed_max: Option<u64>,
    #[serde(with = "serde_human")]
    pub dead: Duration,
    /// The event log (`GET /v1/events`, its stream, the dashboard's live updates).
    #[serde(with = "serde_human")]
    pub events: Duration,
    /// Endpoints unseen this long, not configured and holding nothing, are forgotten.
    #[serde(with = "serde_human")]
    pub endpoints: Duration,
}

impl Default for RetentionSection {
    fn default() -> Self {
        let d = redial_engine::Retention::default();
        RetentionSection {
            completed: d.completed,
            completed_max: d.completed_max,
            dead: d.dead,
            events: d.events,
            endpoints: d.endpoints,
        }
    }
}

/// The queue callback deliveries run in (`[queues.callbacks]` sets its concurrency, policy and
/// signing secrets).
pub const CALLBACK_QUEUE: &str = "callbacks";

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueSection {
    pub concurrency: usize,
    /// Laid over the top-level `[policy]`.
    pub policy: PolicyOverride,
    /// Sign this queue's deliveries (Standard Webhooks), with each of these `whsec_` secrets
    /// (several during a rotation). An endpoint's own secrets come first.
    pub signing_secrets: Vec<String>,
    /// Attempts of each group (a job's `group`) in flight at most, across the cluster.
    pub group_concurrency: Option<u32>,
    /// Attempts of each group started per interval at most, across the cluster: "10/s".
    pub group_rate: Option<String>,
    /// Named groups' own limits and weights, over `group_concurrency` and `group_rate`.
    pub groups: BTreeMap<String, GroupSection>,
    /// The callback of the queue's jobs that name none (`url`, `on`, `headers`).
    pub callback: Option<redial_api::CallbackInput>,
    /// What a dead job does to its ordering key: "block" (the key waits until the job is
    /// replayed or dismissed) or "skip" (the next job of the key goes on).
    pub ordering_on_dead: redial_store::OnDead,
}

impl Default for QueueSection {
    fn default() -> Self {
        QueueSection {
            concurrency: redial_engine::QueueConfig::default().concurrency,
            policy: PolicyOverride::default(),
            signing_secrets: Vec::new(),
            group_concurrency: None,
            group_rate: None,
            groups: BTreeMap::new(),
            callback: None,
            ordering_on_dead: redial_store::OnDead::Block,
        }
    }
}

/// One named group of a queue (`[queues.NAME.groups.GROUP]`).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GroupSection {
    pub concurrency: Option<u32>,
    pub rate: Option<String>,
    /// Turns in the queue's round-robin for each turn of a group of weight 1 (1 to 100).
    pub weight: Option<u32>,
}

impl QueueSection {
    /// The queue's groups in the engine's terms; errors name the field under `at`.
    fn groups(&self, at: &str) -> Result<redial_engine::Groups, String> {
        let concurrency = |c: Option<u32>, field: &str| match c {
            Some(c) if c == 0 || c > 10_000 => Err(format!("{field} must be from 1 to 10000")),
            c => Ok(c),
        };
        let rate = |r: &Option<String>, field: &str| {
            r.as_deref()
                .map(redial_policy::endpoint::Rate::parse)
                .transpose()
                .map_err(|e| format!("{field}: {e}"))
        };
        let each = redial_engine::GroupLimits {
            concurrency: concurrency(self.group_concurrency, &format!("{at}.group_concurrency"))?,
            rate: rate(&self.group_rate, &format!("{at}.group_rate"))?,
            weight: 1,
        };
        let mut named = BTreeMap::new();
        for (name, g) in &self.groups {
            let here = format!("{at}.groups.{name}");
            if !redial_store::NewJob::valid_group(name) {
                return Err(format!(
                    "{here}: a group's name is 1 to 128 characters of plain text, not only spaces (no control characters, bidirectional overrides or line separators)"
                ));
            }
            let weight = match g.weight {
                Some(w) if w == 0 || w > 100 => {
                    return Err(format!("{here}.weight must be from 1 to 100"))
                }
                w => w.unwrap_or(1),
            };
            named.insert(
                name.clone(),
                redial_engine::GroupLimits {
                    concurrency: concurrency(g.concurrency, &format!("{here}.concurrency"))?
                        .or(each.concurrency),
                    rate: rate(&g.rate, &format!("{here}.rate"))?.or(each.rate),
                    weight,
                },
            );
        }
        Ok(redial_engine::Groups { each, named })
    }
}

impl FileConfig {
    /// Reads `path`; every problem is a usage error that names the file, and each problem its
    /// line when it has one (all the problems, not only the first).
    #[cfg(test)]
    pub fn load(path: &Path) -> Result<(FileConfig, Resolved)> {
        let parsed = FileConfig::read(path)?;
        match parsed.resolved {
            Some(resolved) if parsed.problems.is_empty() => Ok((parsed.config, resolved)),
            _ => Err(UsageError(describe_problems(
                &path.display().to_string(),
                &parsed.problems,
            ))
            .into()),
        }
    }

    /// Reads `path` as [`FileConfig::parse_all`] does; only a file that cannot be read is an
    /// error here.
    pub fn read(path: &Path) -> Result<Parsed> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("cannot read config file {}: {e}", path.display())))?;
        Ok(FileConfig::parse_all(&text))
    }

    /// Parses and checks a file's text: every problem found, in the order of the file's lines,
    /// and as much of the configuration as could be read. A syntax error stops the reading
    /// (nothing after it can be trusted: the defaults stand in); type errors are looked for
    /// key by key, each section's keys apart, and the rest of the file is read without the keys
    /// at fault; value errors are all collected.
    pub fn parse_all(text: &str) -> Parsed {
        let table: toml::Table = match toml::from_str(text) {
            Ok(t) => t,
            Err(e) => {
                return Parsed {
                    config: FileConfig::default(),
                    resolved: None,
                    problems: vec![Problem::of_toml(text, &e)],
                }
            }
        };
        let mut problems = Vec::new();
        let config: FileConfig = match toml::from_str(text) {
            Ok(c) => c,
            Err(whole) => {
                let (found, pruned) = type_problems(text, &table);
                let config = toml::Value::Table(pruned).try_into::<FileConfig>().ok();
                let Some(config) = config.filter(|_| !found.is_empty()) else {
                    return Parsed {
                        config: FileConfig::default(),
                        resolved: None,
                        problems: if found.is_empty() {
                            vec![Problem::of_toml(text, &whole)]
                        } else {
                            found
                        },
                    };
                };
                problems = found;
                config
            }
        };
        let resolved = match config.resolve_all() {
            Ok(resolved) => Some(resolved),
            Err(errors) => {
                problems.extend(errors.into_iter().map(|message| Problem {
                    line: locate(text, &message),
                    message,
                }));
                None
            }
        };
        problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
        Parsed {
            config,
            resolved: resolved.filter(|_| problems.is_empty()),
            problems,
        }
    }

    /// [`FileConfig::resolve_all`], its problems on one line each.
    pub fn resolve(&self) -> Result<Resolved, String> {
        self.resolve_all().map_err(|e| e.join("\n"))
    }

    /// Checks every value and computes, once, what the engine takes from the file: the queues
    /// with their effective policies, the endpoints' limits, the alert rules; or every problem.
    pub fn resolve_all(&self) -> Result<Resolved, Vec<String>> {
        let mut errors: Vec<String> = Vec::new();
        let queues = self.queues().unwrap_or_else(|e| {
            errors.extend(e);
            BTreeMap::new()
        });
        let (endpoint_defaults, endpoints) = self.endpoint_settings().unwrap_or_else(|e| {
            errors.extend(e);
            Default::default()
        });
        let mut signing = self.signing().unwrap_or_else(|e| {
            errors.extend(e);
            Default::default()
        });
        let credentials = auth::credentials(&self.endpoints, &self.credentials, &|k| {
            std::env::var(k).ok()
        })
        .unwrap_or_else(|e| {
            errors.extend(e);
            Default::default()
        });
        let notifications = self.notifications(&mut signing).unwrap_or_else(|e| {
            errors.extend(e);
            Vec::new()
        });
        for (origin, settings) in &endpoints {
            if let Some(o) = &settings.policy {
                if let Err(e) = self.policy.merged(o) {
                    errors.push(format!("endpoints.{origin:?}.policy.{e}"));
                }
            }
        }
        if self.engine.heartbeat >= self.engine.lease {
            errors.push("engine.heartbeat must be shorter than engine.lease".into());
        }
        for (name, d) in [
            ("call_timeout", self.postgres.call_timeout),
            ("ready_timeout", self.postgres.ready_timeout),
        ] {
            if d.is_zero() {
                errors.push(format!("postgres.{name} must be more than 0s"));
            }
        }
        if self.server.max_batch == 0 {
            errors.push("server.max_batch must be at least 1".into());
        }
        if self.server.max_connections == 0 {
            errors.push("server.max_connections must be at least 1".into());
        }
        if self.server.max_waiters == 0 {
            errors.push("server.max_waiters must be at least 1".into());
        }
        for (name, d) in [
            ("header_timeout", self.server.header_timeout),
            ("idle_timeout", self.server.idle_timeout),
            ("write_timeout", self.server.write_timeout),
            ("body_timeout", self.server.body_timeout),
        ] {
            if d.is_zero() {
                errors.push(format!("server.{name} must be more than 0s"));
            }
        }
        for origin in &self.server.allowed_origins {
            let ok = url::Url::parse(origin).is_ok_and(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.path() == "/"
                    && u.query().is_none()
                    && u.username().is_empty()
            });
            if !ok || origin.ends_with('/') {
                errors.push(format!(
                    "server.allowed_origins: {origin:?} is not an origin: write scheme://host[:port], such as \"https://ops.example.com\""
                ));
            }
        }
        let alerts = self.alerts.to_config().map_err(|e| errors.push(e));
        match alerts {
            Ok(alerts) if errors.is_empty() => Ok(Resolved {
                queues,
                endpoint_defaults,
                endpoints,
                alerts,
                signing,
                credentials,
                notifications,
            }),
            _ => Err(errors),
        }
    }

    /// The notification targets, checked; their signing secrets join `signing` as their URL's
    /// endpoint's.
    fn notifications(
        &self,
        signing: &mut redial_engine::signing::Signing,
    ) -> Result<Vec<redial_engine::notifications::NotificationTarget>, Vec<String>> {
        use redial_engine::notifications::{NotificationTarget, NotifyEvent, NotifyFormat};
        let mut out = Vec::new();
        let mut errors = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        for (i, n) in self.notifications.iter().enumerate() {
            let at = format!("notifications[{i}]");
            let name = n.name.clone().unwrap_or_else(|| format!("n{}", i + 1));
            if name.is_empty()
                || name.len() > 64
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                errors.push(format!("{at}.name: 1 to 64 letters, digits, - or _"));
            } else if !names.insert(name.clone()) {
                errors.push(format!("{at}.name: {name:?} names another target too"));
            }
            let origin = match url::Url::parse(&n.url) {
                Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                    u.origin().ascii_serialization()
                }
                _ => {
                    errors.push(format!(
                        "{at}.url: {:?} is not an http(s) URL, such as \"https://hooks.example.com/redial\"",
                        n.url
                    ));
                    continue;
                }
            };
            if n.events.is_empty() {
                errors.push(format!(
                    "{at}.events: name at least one of {}",
                    NotifyEvent::ALL.map(|e| e.as_str()).join(", ")
                ));
            }
            let mut events = Vec::new();
            for e in &n.events {
                match NotifyEvent::parse(e) {
                    Ok(e) => events.push(e),
                    Err(why) => errors.push(format!("{at}.events: {why}")),
                }
            }
            let format = match n.format.as_deref() {
                None | Some("standard") => NotifyFormat::Standard,
                Some("slack") => NotifyFormat::Slack,
                Some(other) => {
                    errors.push(format!(
                        "{at}.format: {other:?} is not one: \"standard\" or \"slack\""
                    ));
                    NotifyFormat::Standard
                }
            };
            if !n.signing_secrets.is_empty() {
                let parsed: Result<Vec<_>, _> = n
                    .signing_secrets
                    .iter()
                    .map(|s| redial_engine::signing::SigningSecret::parse(s))
                    .collect();
                match parsed {
                    Ok(secrets) => match signing.by_endpoint.get(&origin) {
                        Some(known) if *known != secrets => errors.push(format!(
                            "{at}.signing_secrets: the endpoint {origin:?} is signed with other secrets already (another target or its [endpoints] entry): give them the same"
                        )),
                        _ => {
                            signing.by_endpoint.insert(origin.clone(), secrets);
                        }
                    },
                    Err(e) => errors.push(format!("{at}.signing_secrets: {e}")),
                }
            }
            out.push(NotificationTarget {
                name,
                url: n.url.clone(),
                events,
                format,
                paused_longer_than: n.paused_longer_than.unwrap_or_default(),
            });
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }

    /// The signing secrets of queues and endpoints, checked.
    fn signing(&self) -> Result<redial_engine::signing::Signing, Vec<String>> {
        use redial_engine::signing::{Signing, SigningSecret};
        let parse = |list: &[String], at: &str| -> Result<Vec<SigningSecret>, String> {
            list.iter()
                .map(|s| SigningSecret::parse(s).map_err(|e| format!("{at}.signing_secrets: {e}")))
                .collect()
        };
        let mut signing = Signing::default();
        let mut errors = Vec::new();
        for (name, q) in &self.queues {
            if !q.signing_secrets.is_empty() {
                match parse(&q.signing_secrets, &format!("queues.{name}")) {
                    Ok(secrets) => {
                        signing.by_queue.insert(name.clone(), secrets);
                    }
                    Err(e) => errors.push(e),
                }
            }
        }
        for (origin, table) in &self.endpoints {
            let Some(v) = table.get("signing_secrets") else {
                continue;
            };
            let at = format!("endpoints.{origin:?}");
            let list: Result<Vec<String>, _> = v.clone().try_into();
            match list
                .map_err(|_| format!("{at}.signing_secrets: a list of \"whsec_...\" strings"))
                .and_then(|l| parse(&l, &at))
            {
                Ok(secrets) => {
                    signing.by_endpoint.insert(origin.clone(), secrets);
                }
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() {
            Ok(signing)
        } else {
            Err(errors)
        }
    }

    /// The endpoint defaults and each configured endpoint's limits and policy override.
    #[allow(clippy::type_complexity)]
    fn endpoint_settings(
        &self,
    ) -> Result<(EndpointConfig, BTreeMap<String, EndpointSettings>), Vec<String>> {
        let mut errors = Vec::new();
        let defaults: Option<EndpointConfig> = toml::Value::Table(self.endpoint_defaults.clone())
            .try_into()
            .map_err(|e| format!("endpoint_defaults: {}", one_line(&e)))
            .and_then(|d: EndpointConfig| {
                d.validate().map_err(|e| format!("endpoint_defaults.{e}"))?;
                Ok(d)
            })
            .map_err(|e| errors.push(e))
            .ok();
        let mut out = BTreeMap::new();
        for (origin, table) in &self.endpoints {
            match self.endpoint(origin, table) {
                Ok(settings) => {
                    out.insert(origin.clone(), settings);
                }
                Err(e) => errors.push(e),
            }
        }
        match defaults {
            Some(d) if errors.is_empty() => Ok((d, out)),
            _ => Err(errors),
        }
    }

    /// One configured endpoint's limits (over the defaults) and policy override.
    fn endpoint(&self, origin: &str, table: &toml::Table) -> Result<EndpointSettings, String> {
        let mut table = table.clone();
        table.remove("signing_secrets");
        // The endpoint's credentials (`auth.rs`).
        table.remove("auth");
        table.remove("allow_job_credentials");
        let policy = match table.remove("policy") {
            None => None,
            Some(v) => Some(
                v.try_into::<PolicyOverride>()
                    .map_err(|e| format!("endpoints.{origin:?}.policy: {}", one_line(&e)))?,
            ),
        };
        let mut merged = self.endpoint_defaults.clone();
        merge(&mut merged, table);
        let limits: EndpointConfig = toml::Value::Table(merged)
            .try_into()
            .map_err(|e| format!("endpoints.{origin:?}: {}", one_line(&e)))?;
        limits
            .validate()
            .map_err(|e| format!("endpoints.{origin:?}.{e}"))?;
        Ok(EndpointSettings { policy, limits })
    }

    /// The queues with their effective policies; `default` is added when the file has none.
    fn queues(&self) -> Result<BTreeMap<String, redial_engine::QueueConfig>, Vec<String>> {
        let mut out = BTreeMap::new();
        let mut errors = Vec::new();
        // A fault of the policy every queue starts from is told once, as its own.
        let base_ok = match self.policy.merged(&PolicyOverride::default()) {
            Ok(_) => true,
            Err(e) => {
                errors.push(format!("policy.{e}"));
                false
            }
        };
        for (name, q) in &self.queues {
            let one = || -> Result<redial_engine::QueueConfig, String> {
                if q.concurrency == 0 || q.concurrency > 10_000 {
                    return Err(format!("queues.{name}.concurrency must be from 1 to 10000"));
                }
                let policy = if base_ok {
                    self.policy
                        .merged(&q.policy)
                        .map_err(|e| format!("queues.{name}.policy.{e}"))?
                } else {
                    self.policy.clone()
                };
                let callback = match &q.callback {
                    Some(_) if name == CALLBACK_QUEUE => {
                        return Err(format!(
                            "queues.{name}.callback: the jobs of {CALLBACK_QUEUE:?} deliver callbacks and never have one of their own"
                        ))
                    }
                    Some(c) => Some(
                        redial_intake::callback_target(c.clone())
                            .map_err(|e| format!("queues.{name}.{e}"))?,
                    ),
                    None => None,
                };
                Ok(redial_engine::QueueConfig {
                    ordering_on_dead: q.ordering_on_dead,
                    callback,
                    concurrency: q.concurrency,
                    policy,
                    groups: q.groups(&format!("queues.{name}"))?,
                })
            };
            match one() {
                Ok(queue) => {
                    out.insert(name.clone(), queue);
                }
                Err(e) => errors.push(e),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        // The default queue and the callback deliveries' own are there whatever the file says.
        for name in ["default", CALLBACK_QUEUE] {
            out.entry(name.to_owned()).or_insert_with(|| {
                redial_engine::QueueConfig::new(
                    QueueSection::default().concurrency,
                    self.policy.clone(),
                )
            });
        }
        Ok(out)
    }
}

/// What the file says, in the engine's types: computed once, by [`FileConfig::resolve`].
#[derive(Debug)]
pub struct Resolved {
    pub queues: BTreeMap<String, redial_engine::QueueConfig>,
    pub endpoint_defaults: EndpointConfig,
    pub endpoints: BTreeMap<String, EndpointSettings>,
    pub alerts: redial_engine::alerts::AlertConfig,
    pub signing: redial_engine::signing::Signing,
    /// The endpoints' credentials (`[endpoints.*.auth]`).
    pub credentials: redial_engine::credentials::Credentials,
    pub notifications: Vec<redial_engine::notifications::NotificationTarget>,
}

/// A configuration file as read: as much of it as could be read, what it resolves to when it
/// has no problem, and every problem.
#[derive(Debug)]
pub struct Parsed {
    pub config: FileConfig,
    pub resolved: Option<Resolved>,
    pub problems: Vec<Problem>,
}

/// Lays `over` onto `base`, table by table.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

fn one_line(e: &dyn std::fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The default data folder: `$XDG_DATA_HOME/redial`, else `~/.local/share/redial`, else
/// `./redial-data`.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("redial");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(h).join(".local/share/redial");
    }
    PathBuf::from("redial-data")
}
