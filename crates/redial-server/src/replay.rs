//! Replays with changes: the patch a client sends with a replay, applied to a dead job and
//! checked as an enqueue is; what it changes, for people (redacted); its preview (a dry run); and
//! the bulk replay that applies it job by job.
//!
//! Owns what a patch may change and how a change is told. Does not own the replay itself: the
//! store's `job_replay_changed` writes it, and refuses a job replayed since it was read, so a
//! change is never applied to a job it was not worked out from.

use crate::input;
use crate::view;
use crate::{ApiError, AppState, ErrorCode};
use redial_api::{JobInput, JobInputRequest, KeyChoice, ReplayInput, ReplayPatch};
use redial_engine::redact;
use redial_policy::Timestamp;
use redial_store::{HttpRequest, Job, JobBefore, JobChange, ReplayChangedParams};
use std::collections::BTreeMap;

/// A replay's changes: the patch (`redial_api::ReplayPatch`, every field optional; an empty
/// patch changes nothing) and whether the replay keeps the job's idempotency key (the provider
/// still drops a repeat) or gives it a new one (the first request was wrong and must count as
/// new).
#[derive(Debug, Default)]
pub struct Changes {
    pub patch: ReplayPatch,
    pub key: KeyChoice,
    /// The headers the patch sets (`patch.headers.set`), read by [`Changes::of`].
    set: BTreeMap<String, String>,
}

impl Changes {
    /// A replay's body for one job (`{"patch", "key", "dry_run"}`, each optional): its changes,
    /// and whether it is a dry run. Refuses an unknown key choice, and headers to set that are
    /// not an object of strings.
    pub fn of(input: ReplayInput) -> Result<(Changes, bool), ApiError> {
        let key = input.key.unwrap_or(KeyChoice::Keep);
        if key == KeyChoice::Other {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidField,
                "key must be keep or renew",
            ));
        }
        let mut patch = input.patch.unwrap_or_default();
        // A null policy leaves the job's, as an absent one does (only the body's null clears).
        if patch.policy == Some(serde_json::Value::Null) {
            patch.policy = None;
        }
        let set = match patch.headers.as_ref().and_then(|h| h.set.clone()) {
            None => BTreeMap::new(),
            Some(set) => serde_json::from_value(set).map_err(|_| {
                ApiError::unprocessable(
                    ErrorCode::InvalidField,
                    "patch.headers.set must be an object of header names to string values",
                )
            })?,
        };
        let dry_run = input.dry_run.unwrap_or(false);
        Ok((Changes { patch, key, set }, dry_run))
    }

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

    /// The checks that need no job: a URL or a prefix, not both; a prefix that starts a URL; a
    /// known queue; a policy that is an object.
    pub fn check(&self, state: &AppState) -> Result<(), ApiError> {
        let p = &self.patch;
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
        // An object, or a 422 before any job is looked at.
        input::policy_of("patch.policy", p.policy.clone())?;
        Ok(())
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
    let headers = patched_headers(changes, &job.request.headers);
    let body = match &p.body {
        None => job.request.body.clone().map(serde_json::Value::String),
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
        KeyChoice::Renew => Some(redial_engine::derived_idempotency_key(
            &queue,
            &format!("{}#replay-{}", job.id, job.replays + 1),
        )),
        // `Other` is refused by `Changes::check`.
        KeyChoice::Keep | KeyChoice::Other => job.idempotency_key.clone(),
    };
    // The job as it would be enqueued, checked as an enqueue is.
    let input = JobInput {
        queue: Some(queue),
        request: JobInputRequest {
            method: job.request.method.clone(),
            url,
            headers: Some(serde_json::json!(headers)),
            body,
            timeout: p
                .timeout
                .clone()
                .or_else(|| job.request.timeout_ms.map(|ms| format!("{ms}ms"))),
            credentials: match &p.credentials {
                None => job.request.credentials.clone(),
                Some(name) => name.clone(),
            },
        },
        idempotency_key: key.clone(),
        priority: Some(i64::from(job.priority)),
        tags: Some(job.tags.clone()),
        endpoint,
        group: job.group.clone(),
        // A replay keeps the job's ordering key and its place in the key's line.
        ordering_key: None,
        policy: match &p.policy {
            Some(policy) => Some(policy.clone()),
            None => job
                .policy
                .as_ref()
                .map(|o| serde_json::to_value(o).expect("a policy override is JSON")),
        },
        ..JobInput::default()
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
fn patched_url(p: &ReplayPatch, url: &str) -> Result<String, String> {
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
fn patched_headers(changes: &Changes, headers: &[(String, String)]) -> Vec<(String, String)> {
    let mut headers = headers.to_vec();
    if let Some(h) = &changes.patch.headers {
        let remove = h.remove.as_deref().unwrap_or_default();
        let set = &changes.set;
        headers.retain(|(n, _)| {
            !remove.iter().any(|r| r.eq_ignore_ascii_case(n))
                && !set.keys().any(|s| s.eq_ignore_ascii_case(n))
        });
        headers.extend(set.iter().map(|(n, v)| (n.clone(), v.clone())));
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

#[cfg(test)]
mod tests {
    use super::Changes;
    use redial_api::{KeyChoice, ReplayInput};

    fn changes(body: &str) -> Result<(Changes, bool), crate::ApiError> {
        Changes::of(serde_json::from_str::<ReplayInput>(body).expect("a replay's body"))
    }

    /// A patch's null body clears it (a change); a null policy leaves the job's, as absent does.
    #[test]
    fn a_patch_reads_null_as_the_api_says() {
        let (c, dry_run) = changes(r#"{"patch": {"body": null}, "dry_run": true}"#).expect("valid");
        assert_eq!(c.patch.body, Some(serde_json::Value::Null));
        assert!(!c.is_none() && dry_run);
        let (c, _) = changes(r#"{"patch": {"policy": null}}"#).expect("valid");
        assert_eq!(c.patch.policy, None);
        assert!(c.is_none(), "a plain replay");
        let (c, _) = changes(r#"{"patch": {"credentials": null}}"#).expect("valid");
        assert_eq!(c.patch.credentials, Some(None), "back to the endpoint's");
        assert!(!c.is_none());
    }

    /// What the generated types read but the domain refuses: an unknown key choice, headers to
    /// set that are not strings.
    #[test]
    fn a_patch_the_domain_cannot_take_is_refused() {
        let e = changes(r#"{"key": "rotate"}"#).expect_err("unknown key");
        assert!(e.message.contains("keep or renew"), "{}", e.message);
        let e = changes(r#"{"patch": {"headers": {"set": {"x-a": 1}}}}"#).expect_err("a number");
        assert!(e.message.contains("patch.headers.set"), "{}", e.message);
        let (c, _) = changes(r#"{"key": "renew"}"#).expect("valid");
        assert_eq!(c.key, KeyChoice::Renew);
    }
}
