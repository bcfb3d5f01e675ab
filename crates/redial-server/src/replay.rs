//! Replays with changes: the patch a client sends with a replay, applied to a dead job and
//! checked as an enqueue is; what it changes, for people (redacted); its preview (a dry run); and
//! the bulk replay that applies it job by job.
//!
//! Owns what a patch may change and how a change is told. Does not own the replay itself: the
//! store's `job_replay_changed` writes it, and refuses a job replayed since it was read, so a
//! change is never applied to a job it was not worked out from.

use crate::input::{self, HeadersInput, JobInput, RequestInput};
use crate::view;
use crate::{ApiError, AppState, ErrorCode};
use redial_engine::redact;
use redial_policy::{PolicyOverride, Timestamp};
use redial_store::{HttpRequest, Job, JobBefore, JobChange, ReplayChangedParams};
use serde::Deserialize;
use std::collections::BTreeMap;

/// What a replay may change: every field optional; an empty patch changes nothing.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchInput {
    /// The whole URL.
    pub url: Option<String>,
    /// The start of the URL, where it starts so (other jobs are skipped).
    pub url_prefix: Option<PrefixInput>,
    pub headers: Option<HeaderPatch>,
    /// The body: a string as is, any other JSON value as JSON, `null` for none.
    #[serde(default, deserialize_with = "present")]
    pub body: Option<serde_json::Value>,
    pub timeout: Option<String>,
    #[serde(default, deserialize_with = "input::object_only")]
    pub policy: Option<PolicyOverride>,
    pub queue: Option<String>,
    pub endpoint: Option<String>,
    /// The credentials profile to send with: a name, or `null` for the endpoint's.
    #[serde(default, deserialize_with = "present")]
    pub credentials: Option<serde_json::Value>,
}

/// A field that is there, `null` included (`Some(Value::Null)`); absent, it is `None`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefixInput {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeaderPatch {
    /// Set, replacing every header of that name (compared without case).
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Removed, compared without case; before `set`.
    #[serde(default)]
    pub remove: Vec<String>,
}

/// Whether the replay keeps the job's idempotency key (the provider still drops a repeat) or
/// gives it a new one (the first request was wrong and must count as new).
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum KeyChoice {
    #[default]
    Keep,
    Renew,
}

/// A replay's changes: the patch and the key.
#[derive(Debug, Default)]
pub struct Changes {
    pub patch: PatchInput,
    pub key: KeyChoice,
}

impl Changes {
    /// Whether it asks for nothing: a plain replay.
    pub fn is_none(&self) -> bool {
        let p = &self.patch;
        self.key == KeyChoice::Keep
            && p.url.is_none()
            && p.url_prefix.is_none()
            && p.headers.is_none()
            && p.body.is_none()
            && p.timeout.is_none()
            && p.policy.is_none()
            && p.queue.is_none()
            && p.endpoint.is_none()
            && p.credentials.is_none()
    }

    /// The checks that need no job: a URL or a prefix, not both; a prefix that starts a URL.
    pub fn check(&self, state: &AppState) -> Result<(), ApiError> {
        let p = &self.patch;
        if p.credentials
            .as_ref()
            .is_some_and(|c| !(c.is_string() || c.is_null()))
        {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidField,
                "patch.credentials: a credentials profile's name, or null for the endpoint's",
            ));
        }
        if p.url.is_some() && p.url_prefix.is_some() {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidField,
                "patch: give url or url_prefix, not both",
            ));
        }
        if let Some(px) = &p.url_prefix {
            if px.from.is_empty() {
                return Err(ApiError::unprocessable(
                    ErrorCode::InvalidField,
                    "patch.url_prefix.from must not be empty: it says which jobs' URLs change",
                ));
            }
        }
        if let Some(q) = &p.queue {
            input::check_queue(&state.intake(), q)?;
        }
        Ok(())
    }
}

/// A replay's body for one job: `{"patch", "key", "dry_run"}`, each optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayInput {
    pub patch: Option<PatchInput>,
    pub key: Option<KeyChoice>,
    pub dry_run: Option<bool>,
}

impl ReplayInput {
    pub fn into_changes(self) -> (Changes, bool) {
        (
            Changes {
                patch: self.patch.unwrap_or_default(),
                key: self.key.unwrap_or_default(),
            },
            self.dry_run.unwrap_or(false),
        )
    }
}

/// What a patch makes of one job.
#[derive(Debug)]
pub enum Plan {
    /// Replayed with these changes (none: a plain replay).
    Change(Box<ReplayChangedParams>),
    /// The patch is not for this job: why.
    Skip(String),
}

/// Applies the changes to a dead job and checks the result as an enqueue is checked (URL,
/// headers, body size, timeout, queue, endpoint, policy). The error names the job.
pub fn plan(
    state: &AppState,
    job: &Job,
    changes: &Changes,
    now: Timestamp,
) -> Result<Plan, ApiError> {
    let p = &changes.patch;
    let url = match patched_url(p, &job.request.url) {
        Ok(url) => url,
        Err(skip) => return Ok(Plan::Skip(skip)),
    };
    let headers = patched_headers(p, &job.request.headers);
    let body = match &p.body {
        None => job.request.body.clone().map(serde_json::Value::String),
        Some(serde_json::Value::Null) => None,
        Some(v) => Some(v.clone()),
    };
    let queue = p.queue.clone().unwrap_or_else(|| job.queue.clone());
    // An endpoint that was the URL's origin follows the URL; one named by hand stays.
    let derived = url::Url::parse(&job.request.url)
        .is_ok_and(|u| u.origin().ascii_serialization() == job.endpoint);
    let endpoint = p
        .endpoint
        .clone()
        .or_else(|| (!derived).then(|| job.endpoint.clone()));
    let key = match changes.key {
        KeyChoice::Keep => job.idempotency_key.clone(),
        KeyChoice::Renew => Some(redial_engine::derived_idempotency_key(
            &queue,
            &format!("{}#replay-{}", job.id, job.replays + 1),
        )),
    };
    let input = JobInput {
        id: None,
        queue: Some(queue),
        request: RequestInput {
            method: job.request.method.clone(),
            url,
            headers: Some(HeadersInput::Pairs(headers)),
            body,
            timeout: p
                .timeout
                .clone()
                .or_else(|| job.request.timeout_ms.map(|ms| format!("{ms}ms"))),
            credentials: match &p.credentials {
                None => job.request.credentials.clone(),
                Some(serde_json::Value::String(name)) => Some(name.clone()),
                Some(_) => None,
            },
        },
        idempotency_key: key.clone(),
        run_at: None,
        deadline: None,
        priority: Some(job.priority),
        tags: Some(job.tags.clone()),
        endpoint,
        group: job.group.clone(),
        // A replay keeps the job's ordering key and its place in the key's line.
        ordering_key: None,
        policy: p.policy.clone().or_else(|| job.policy.clone()),
        callback: None,
    };
    let checked = input::new_job(&state.intake(), input, now)
        .map_err(|e| {
            ApiError::from(redial_intake::IntakeError {
                message: format!("job {}: {}", job.id, e.message),
                ..e
            })
        })?
        .into_job();
    let mut params = ReplayChangedParams {
        id: job.id.clone(),
        now,
        replays: job.replays,
        queue: checked.queue,
        endpoint: checked.endpoint,
        request: checked.request,
        // Kept means kept, even none.
        idempotency_key: key,
        policy: checked.policy,
        change: JobChange {
            at: now,
            replay: job.replays + 1,
            changed: Vec::new(),
            before: JobBefore::of(job),
        },
    };
    params.change.changed = changed(&params);
    Ok(Plan::Change(Box::new(params)))
}

/// The job's URL as the patch changes it (`url`, or `url_prefix` replaced); a job whose URL
/// does not start with the prefix is skipped, for the reason returned.
fn patched_url(p: &PatchInput, url: &str) -> Result<String, String> {
    match (&p.url, &p.url_prefix) {
        (Some(url), _) => Ok(url.clone()),
        (None, Some(px)) => match url.strip_prefix(px.from.as_str()) {
            Some(rest) => Ok(format!("{}{rest}", px.to)),
            None => Err(format!(
                "its URL does not start with {}",
                redact::url(&px.from)
            )),
        },
        (None, None) => Ok(url.to_owned()),
    }
}

/// The job's headers as the patch changes them: those removed or set go, those set come in.
fn patched_headers(p: &PatchInput, headers: &[(String, String)]) -> Vec<(String, String)> {
    let mut headers = headers.to_vec();
    if let Some(h) = &p.headers {
        headers.retain(|(n, _)| {
            !h.remove.iter().any(|r| r.eq_ignore_ascii_case(n))
                && !h.set.keys().any(|s| s.eq_ignore_ascii_case(n))
        });
        headers.extend(h.set.iter().map(|(n, v)| (n.clone(), v.clone())));
    }
    headers
}

/// One line per change, for people: URLs redacted, no header's value.
fn changed(p: &ReplayChangedParams) -> Vec<String> {
    let before = &p.change.before;
    let (a, b) = (&before.request, &p.request);
    let mut out = Vec::new();
    if a.url != b.url {
        out.push(format!(
            "url {} -> {}",
            redact::url(&a.url),
            redact::url(&b.url)
        ));
    }
    let names = |h: &[(String, String)]| -> Vec<String> {
        let mut n: Vec<String> = h.iter().map(|(n, _)| n.to_ascii_lowercase()).collect();
        n.sort();
        n.dedup();
        n
    };
    let values = |h: &[(String, String)], name: &str| -> Vec<String> {
        h.iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .collect()
    };
    let (was, now) = (names(&a.headers), names(&b.headers));
    for n in &was {
        if !now.contains(n) {
            out.push(format!("header {n} removed"));
        }
    }
    for n in &now {
        if !was.contains(n) || values(&a.headers, n) != values(&b.headers, n) {
            out.push(format!("header {n} set"));
        }
    }
    if a.body != b.body {
        out.push(match &b.body {
            Some(body) => format!("body replaced ({} bytes)", body.len()),
            None => "body removed".to_owned(),
        });
    }
    if a.timeout_ms != b.timeout_ms {
        let ms = |t: Option<u64>| t.map_or("the default".to_owned(), |t| format!("{t} ms"));
        out.push(format!(
            "timeout {} -> {}",
            ms(a.timeout_ms),
            ms(b.timeout_ms)
        ));
    }
    if a.credentials != b.credentials {
        out.push(match &b.credentials {
            Some(name) => format!("credentials profile {name}"),
            None => "credentials: the endpoint's".to_owned(),
        });
    }
    if before.policy != p.policy {
        out.push("policy replaced".to_owned());
    }
    if before.queue != p.queue {
        out.push(format!("queue {} -> {}", before.queue, p.queue));
    }
    if before.endpoint != p.endpoint {
        out.push(format!("endpoint {} -> {}", before.endpoint, p.endpoint));
    }
    if before.idempotency_key != p.idempotency_key {
        out.push("idempotency key renewed".to_owned());
    }
    out
}

/// A dry run's view of one job: what it was, what it would be, and what changes.
pub fn preview(p: &ReplayChangedParams) -> redial_api::ReplayPreviewItem {
    let b = &p.change.before;
    redial_api::ReplayPreviewItem {
        id: p.id.0.clone(),
        changed: p.change.changed.clone(),
        before: side(
            &b.queue,
            &b.endpoint,
            b.idempotency_key.as_deref(),
            &b.request,
        ),
        after: side(
            &p.queue,
            &p.endpoint,
            p.idempotency_key.as_deref(),
            &p.request,
        ),
    }
}

/// A job's request and routing, as a preview and a job's changes show them (secrets redacted).
pub fn side(
    queue: &str,
    endpoint: &str,
    key: Option<&str>,
    request: &HttpRequest,
) -> redial_api::JobSide {
    redial_api::JobSide {
        queue: queue.to_owned(),
        endpoint: endpoint.to_owned(),
        idempotency_key: key.map(str::to_owned),
        request: view::request(request),
    }
}

/// A change's `before`, as a view shows it: its body's size as kept, or as noted when the body
/// was not kept.
pub fn before_side(b: &redial_store::JobBefore) -> redial_api::JobSide {
    let mut side = side(
        &b.queue,
        &b.endpoint,
        b.idempotency_key.as_deref(),
        &b.request,
    );
    if let Some(n) = b.body_bytes {
        side.request.body_bytes = i64::try_from(n).unwrap_or(i64::MAX);
    }
    side
}
