//! A workload model for `redial simulate`, read from TOML: for each endpoint, the jobs that go to
//! it (how many, when they arrive, their method and key) and how the endpoint answers (its rate
//! limit and what it says when it refuses, its outages, the failures some jobs meet, its
//! latency). Every value is checked here, with the field it came from, so the simulation itself
//! never meets a bad one.

use anyhow::Result;
use redial_policy::endpoint::Rate;
use redial_policy::{parse_duration, Method};
pub use redial_simulate::{
    Answer, Arrival, EndpointModel, Failure, Limit, LimitKind, Outage, QuotaStyle, Wait, Workload,
};
use serde::Deserialize;
use std::time::Duration;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    /// The seed of the workload's own draws and the policy's jitter (`--seed` overrides it).
    seed: Option<u64>,
    #[serde(rename = "endpoint", default)]
    endpoints: Vec<EndpointFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EndpointFile {
    name: String,
    #[serde(default = "default_queue")]
    queue: String,
    jobs: u64,
    #[serde(default)]
    arrival: ArrivalFile,
    #[serde(default = "default_method")]
    method: String,
    #[serde(default = "yes")]
    idempotency_key: bool,
    /// From enqueue.
    deadline: Option<String>,
    #[serde(default = "default_latency")]
    latency: String,
    latency_max: Option<String>,
    #[serde(default = "default_timeout")]
    timeout: String,
    limit: Option<LimitFile>,
    #[serde(default, rename = "outage")]
    outages: Vec<OutageFile>,
    #[serde(default, rename = "failure")]
    failures: Vec<FailureFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArrivalFile {
    /// Jobs a period ("50/s"); none: all at once.
    rate: Option<String>,
    /// Jobs that arrive together, every `every`.
    burst: Option<u64>,
    every: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitFile {
    kind: String,
    rate: Option<String>,
    burst: Option<u32>,
    limit: Option<u32>,
    window: Option<String>,
    /// A concurrency limit's service time: how long it takes to answer a request it lets in.
    hold: Option<String>,
    #[serde(default)]
    retry_after: bool,
    #[serde(default)]
    quota_headers: bool,
    /// The status a refusal answers: 429 (the default), 503 or 403.
    status: Option<u16>,
    /// A fixed window's Retry-After in whole seconds, rounded up.
    #[serde(default)]
    whole_seconds: bool,
    /// How a refusal says when to come back; overrides `retry_after` and `whole_seconds`.
    wait: Option<String>,
    /// How every answer reports the quota; overrides `quota_headers` and `whole_seconds`.
    quota: Option<String>,
    /// The rate halves from `from` until `until`.
    halved: Option<HalvedFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HalvedFile {
    from: String,
    until: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutageFile {
    from: String,
    until: String,
    #[serde(default = "default_outage_answer")]
    answer: String,
    retry_after: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FailureFile {
    answer: String,
    ratio: f64,
    #[serde(default = "default_repeat")]
    repeat: String,
    /// The endpoint did the work before it failed (commit-then-fail).
    #[serde(default)]
    commit: bool,
}

fn default_queue() -> String {
    "default".into()
}
fn default_method() -> String {
    "POST".into()
}
fn yes() -> bool {
    true
}
fn default_latency() -> String {
    "50ms".into()
}
fn default_timeout() -> String {
    "30s".into()
}
fn default_outage_answer() -> String {
    "503".into()
}
fn default_repeat() -> String {
    "always".into()
}

fn duration(value: &str, field: &str) -> Result<Duration> {
    parse_duration(value).ok_or_else(|| {
        usage(format!(
            "{field}: \"{value}\" is not a duration with a unit, such as \"500ms\", \"30s\", \"5m\" or \"1h\""
        ))
    })
}

fn usage(message: String) -> anyhow::Error {
    crate::UsageError(message).into()
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An endpoint's limiter: its kind, how it speaks (`wait` and `quota`, or the older booleans,
/// which speak as the limiter each kind is usually met as), its refusal status and halving.
fn limit(l: LimitFile, at: &str) -> Result<Limit> {
    let kind = limit_kind(&l, at)?;
    if l.hold.is_some() && !matches!(kind, LimitKind::Concurrency { .. }) {
        return Err(usage(format!(
            "{at}: limit.hold goes with kind = \"concurrency\" only"
        )));
    }
    let status = match l.status {
        None => 429,
        Some(s @ (429 | 503 | 403)) => s,
        Some(other) => {
            return Err(usage(format!(
                "{at}: limit.status {other} is not one a limiter refuses with: 429, 503 or 403"
            )))
        }
    };
    let wait = limit_wait(&l, &kind, at)?;
    let quota = limit_quota(&l, &kind, at)?;
    let mut out = Limit::new(kind).speaking(wait, quota).refusing_with(status);
    if let Some(h) = l.halved {
        let from = duration(&h.from, &format!("{at}: limit.halved.from"))?;
        let until = duration(&h.until, &format!("{at}: limit.halved.until"))?;
        if until <= from {
            return Err(usage(format!(
                "{at}: limit.halved: until must be after from"
            )));
        }
        out = out.halved_between(ms(from), ms(until));
    }
    Ok(out)
}

/// The limiter's kind and its numbers.
fn limit_kind(l: &LimitFile, at: &str) -> Result<LimitKind> {
    Ok(match l.kind.as_str() {
        "token_bucket" => {
            let rate = l.rate.as_deref().ok_or_else(|| {
                usage(format!("{at}: limit: a token bucket needs a rate (\"100/s\")"))
            })?;
            let rate = Rate::parse(rate).map_err(|m| usage(format!("{at}: limit.rate: {m}")))?;
            LimitKind::TokenBucket {
                count: rate.count,
                per_ms: ms(rate.per).max(1),
                burst: l.burst.unwrap_or(rate.count).max(1),
            }
        }
        "fixed_window" | "sliding_log" | "sliding_counter" => {
            let limit = l.limit.filter(|n| *n > 0).ok_or_else(|| {
                let kind = l.kind.replace('_', " ");
                usage(format!("{at}: limit: a {kind} needs a limit of at least 1"))
            })?;
            let window = duration(
                l.window.as_deref().unwrap_or("1s"),
                &format!("{at}: limit.window"),
            )?;
            if window < Duration::from_millis(10) {
                return Err(usage(format!("{at}: limit.window must be 10ms or more")));
            }
            let window_ms = ms(window);
            match l.kind.as_str() {
                "sliding_log" => LimitKind::SlidingLog { limit, window_ms },
                "sliding_counter" => LimitKind::SlidingCounter { limit, window_ms },
                _ => LimitKind::FixedWindow { limit, window_ms },
            }
        }
        "concurrency" => {
            let limit = l.limit.filter(|n| *n > 0).ok_or_else(|| {
                usage(format!(
                    "{at}: limit: a concurrency limit needs a limit of at least 1 (requests in flight)"
                ))
            })?;
            let hold = l.hold.as_deref().ok_or_else(|| {
                usage(format!(
                    "{at}: limit: a concurrency limit needs hold, how long it takes to answer (\"100ms\")"
                ))
            })?;
            let hold = duration(hold, &format!("{at}: limit.hold"))?;
            if hold < Duration::from_millis(1) {
                return Err(usage(format!("{at}: limit.hold must be 1ms or more")));
            }
            LimitKind::Concurrency {
                limit,
                hold_ms: ms(hold),
            }
        }
        other => {
            return Err(usage(format!(
                "{at}: limit.kind \"{other}\" is not one: \"token_bucket\", \"fixed_window\", \"sliding_log\", \"sliding_counter\" or \"concurrency\""
            )))
        }
    })
}

/// How a refusal says when to come back: `wait`, or the older `retry_after`, which speaks as
/// the limiter each kind is usually met as.
fn limit_wait(l: &LimitFile, kind: &LimitKind, at: &str) -> Result<Wait> {
    let whole = l.whole_seconds;
    let window_kind = !matches!(kind, LimitKind::TokenBucket { .. });
    let log = matches!(kind, LimitKind::SlidingLog { .. });
    Ok(match l.wait.as_deref() {
        Some(_) if l.retry_after => {
            return Err(usage(format!(
                "{at}: limit: wait and retry_after both say how a refusal speaks: keep wait"
            )))
        }
        Some("none" | "bare") => Wait::Bare,
        Some("seconds") => Wait::Seconds,
        Some("truncated") => Wait::Truncated,
        Some("decimal") => Wait::Decimal,
        Some("millis") => Wait::Millis,
        Some(other) => {
            return Err(usage(format!(
                "{at}: limit.wait \"{other}\" is not one: \"none\", \"seconds\" (Retry-After rounded up), \"truncated\", \"decimal\" or \"millis\" (retry-after-ms)"
            )))
        }
        None if !l.retry_after => Wait::Bare,
        None if !window_kind || whole && !log => Wait::Seconds,
        None if whole => Wait::Truncated,
        None => Wait::Decimal,
    })
}

/// How the quota is reported: `quota`, or the older `quota_headers`, as `limit_wait` does.
fn limit_quota(l: &LimitFile, kind: &LimitKind, at: &str) -> Result<QuotaStyle> {
    let whole = l.whole_seconds;
    let window_kind = !matches!(kind, LimitKind::TokenBucket { .. });
    let log = matches!(kind, LimitKind::SlidingLog { .. });
    Ok(match l.quota.as_deref() {
        Some(_) if l.quota_headers => {
            return Err(usage(format!(
                "{at}: limit: quota and quota_headers both say how the quota is reported: keep quota"
            )))
        }
        Some("none") => QuotaStyle::None,
        Some("x-ratelimit") => QuotaStyle::XRateLimitSeconds,
        Some("github") => QuotaStyle::GitHub,
        Some("openai") => QuotaStyle::OpenAi,
        Some("draft6") => QuotaStyle::Draft6,
        Some("ietf") => QuotaStyle::Ietf,
        Some(other) => {
            return Err(usage(format!(
                "{at}: limit.quota \"{other}\" is not one: \"none\", \"x-ratelimit\", \"github\", \"openai\", \"draft6\" or \"ietf\""
            )))
        }
        None if !l.quota_headers => QuotaStyle::None,
        None if !window_kind => QuotaStyle::XRateLimitSeconds,
        None if whole && log => QuotaStyle::GitHub,
        None if whole => QuotaStyle::Draft6,
        None => QuotaStyle::OpenAi,
    })
}

fn answer(value: &str, retry_after: Option<Duration>, field: &str) -> Result<Answer> {
    Ok(match value {
        "connection_refused" => Answer::ConnectionRefused,
        "connection_reset" | "reset" => Answer::ConnectionReset,
        "timeout" => Answer::Timeout,
        status => {
            let code: u16 = status.parse().ok().filter(|c| (400..600).contains(c)).ok_or_else(|| {
                usage(format!(
                    "{field}: \"{status}\" is not an answer: a status from 400 to 599, \"connection_refused\", \"connection_reset\" or \"timeout\""
                ))
            })?;
            match (code, retry_after) {
                (503, Some(wait)) => Answer::Unavailable(wait),
                (_, Some(_)) => {
                    return Err(usage(format!("{field}: retry_after goes with a 503 only")))
                }
                _ => Answer::Status(code),
            }
        }
    })
}

/// Reads and checks a workload file.
pub fn read(path: &std::path::Path) -> Result<Workload> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read workload file {}: {e}", path.display())))?;
    parse(&text).map_err(|e| usage(format!("workload file {}: {e}", path.display())))
}

/// Checks a workload given as TOML text.
pub fn parse(text: &str) -> Result<Workload> {
    let file: File = toml::from_str(text).map_err(|e| usage(e.to_string()))?;
    if file.endpoints.is_empty() {
        return Err(usage(
            "no endpoint: add at least one [[endpoint]] with a name and a number of jobs".into(),
        ));
    }
    let mut endpoints = Vec::with_capacity(file.endpoints.len());
    for (i, e) in file.endpoints.into_iter().enumerate() {
        let model = endpoint_model(i, e, &endpoints)?;
        endpoints.push(model);
    }
    Ok(Workload {
        seed: file.seed,
        endpoints,
    })
}

/// The `i`-th `[[endpoint]]` table, checked (its name not one of `before`'s).
fn endpoint_model(i: usize, e: EndpointFile, before: &[EndpointModel]) -> Result<EndpointModel> {
    let at = format!("endpoint {} ({})", i + 1, e.name);
    if e.name.trim().is_empty() {
        return Err(usage(format!("endpoint {}: name is empty", i + 1)));
    }
    if before.iter().any(|o| o.name == e.name) {
        return Err(usage(format!("{at}: a second endpoint of this name")));
    }
    if e.jobs == 0 || e.jobs > 10_000_000 {
        return Err(usage(format!("{at}: jobs must be 1 to 10,000,000")));
    }
    let arrival = arrival(e.arrival, &at)?;
    let method = Method::from_name(&e.method.to_ascii_uppercase());
    let latency = duration(&e.latency, &format!("{at}: latency"))?;
    let latency_max = match &e.latency_max {
        Some(v) => duration(v, &format!("{at}: latency_max"))?,
        None => latency,
    };
    if latency_max < latency {
        return Err(usage(format!("{at}: latency_max is below latency")));
    }
    let timeout = duration(&e.timeout, &format!("{at}: timeout"))?;
    if timeout.is_zero() {
        return Err(usage(format!("{at}: timeout must be above zero")));
    }
    let limit = match e.limit {
        None => None,
        Some(l) => Some(limit(l, &at)?),
    };
    let outages = outages(e.outages, &at)?;
    let failures = failures(e.failures, &at)?;
    let deadline = match &e.deadline {
        Some(v) => Some(duration(v, &format!("{at}: deadline"))?),
        None => None,
    };
    Ok(EndpointModel {
        name: e.name,
        queue: e.queue,
        jobs: e.jobs,
        arrival,
        method,
        idempotency_key: e.idempotency_key,
        deadline,
        latency: (latency, latency_max),
        timeout,
        limit,
        outages,
        failures,
        history: None,
    })
}

/// How the endpoint's jobs arrive: all at once, at a rate, or in bursts.
fn arrival(arrival: ArrivalFile, at: &str) -> Result<Arrival> {
    Ok(match (arrival.rate, arrival.burst, arrival.every) {
            (None, None, None) => Arrival::AtOnce,
            (Some(rate), None, None) => {
                let rate = Rate::parse(&rate)
                    .map_err(|m| usage(format!("{at}: arrival.rate: {m}")))?;
                Arrival::Rate(rate.interval())
            }
            (None, Some(size), Some(every)) if size > 0 => Arrival::Bursts {
                size,
                every: duration(&every, &format!("{at}: arrival.every"))?,
            },
            _ => {
                return Err(usage(format!(
                    "{at}: arrival is either a rate (rate = \"50/s\") or bursts (burst = 100, every = \"1m\"), or nothing for all at once"
                )))
            }
        })
}

/// The endpoint's outages: from, until, and what it answers meanwhile.
fn outages(given: Vec<OutageFile>, at: &str) -> Result<Vec<Outage>> {
    let mut outages = Vec::new();
    for (k, o) in given.into_iter().enumerate() {
        let here = format!("{at}: outage {}", k + 1);
        let from = duration(&o.from, &format!("{here}: from"))?;
        let until = duration(&o.until, &format!("{here}: until"))?;
        if until <= from {
            return Err(usage(format!("{here}: until must be after from")));
        }
        let wait = match &o.retry_after {
            Some(v) => Some(duration(v, &format!("{here}: retry_after"))?),
            None => None,
        };
        outages.push(Outage {
            from,
            until,
            answer: answer(&o.answer, wait, &format!("{here}: answer"))?,
        });
    }
    Ok(outages)
}

/// The endpoint's failures: which share of jobs fail, how, and whether the work was done.
fn failures(given: Vec<FailureFile>, at: &str) -> Result<Vec<Failure>> {
    let mut failures = Vec::new();
    for (k, f) in given.into_iter().enumerate() {
        let here = format!("{at}: failure {}", k + 1);
        if !(f.ratio > 0.0 && f.ratio <= 1.0) {
            return Err(usage(format!(
                "{here}: ratio must be above 0 and at most 1"
            )));
        }
        let always = match f.repeat.as_str() {
            "always" => true,
            "once" => false,
            other => {
                return Err(usage(format!(
                    "{here}: repeat \"{other}\" is not one: \"once\" or \"always\""
                )))
            }
        };
        let failed = answer(&f.answer, None, &format!("{here}: answer"))?;
        if f.commit && matches!(failed, Answer::ConnectionRefused) {
            return Err(usage(format!(
                "{here}: commit: a refused connection reached nothing to do the work"
            )));
        }
        failures.push(Failure {
            answer: failed,
            ratio: f.ratio,
            always,
            commit: f.commit,
        });
    }
    if failures.iter().map(|f| f.ratio).sum::<f64>() > 1.0 + 1e-9 {
        return Err(usage(format!(
            "{at}: the failures' ratios add up to more than 1"
        )));
    }
    Ok(failures)
}
