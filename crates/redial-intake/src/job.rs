//! A job as clients send it (`POST /v1/jobs`, a batch's items, a schedule's template:
//! `redial_api::JobInput`) and its intake: [`new_job`] checks every field once and lays on the
//! queue's settings.

use crate::Intake;
use crate::IntakeError;
use crate::{
    check_headers, check_not_reserved, check_queue, check_url, headers_of, policy_of, within,
    ENDPOINT_RULE, MAX_ENDPOINT_CHARS, MAX_TAG_CHARS, STANDARD_METHODS, TAG_RULE,
};
use redial_api::{CallbackInput, CallbackOn, ErrorCode, JobInput, JobInputRequest};
use redial_engine::{Checked, JobProblem};
use redial_policy::{is_http_token, parse_duration, Timestamp};
use redial_store::{HttpRequest, JobId, NewJob, OrderingKey};
use std::time::Duration;

/// A job's or a queue's callback as clients and the configuration file write it, checked: an
/// http or https URL, one or more known events, headers as a job's may be (no `content-type`: a
/// delivery is JSON). The message names the field.
pub fn callback_target(c: CallbackInput) -> Result<redial_engine::CallbackTarget, String> {
    check_url("callback.url", &c.url)?;
    let on = match c.on {
        None => redial_store::CallbackEvent::DEFAULT.to_vec(),
        Some(list) if list.is_empty() => {
            return Err(
                "callback.on must name at least one event: completed, dead or cancelled".into(),
            )
        }
        Some(list) => {
            let mut on = Vec::new();
            for e in list {
                if e == CallbackOn::Other {
                    return Err(
                        "callback.on: an event this server does not know: use completed, dead or cancelled"
                            .into(),
                    );
                }
                let event: redial_store::CallbackEvent = e
                    .as_str()
                    .parse()
                    .map_err(|m| format!("callback.on: {m}"))?;
                if !on.contains(&event) {
                    on.push(event);
                }
            }
            on
        }
    };
    let headers = headers_of("callback.headers", c.headers)?;
    check_headers("callback.headers", &headers)?;
    if let Some((name, _)) = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
    {
        return Err(format!(
            "callback.headers: {name:?} is set by Redial (a delivery is application/json); leave it out"
        ));
    }
    Ok(redial_engine::CallbackTarget {
        url: c.url,
        on,
        headers,
    })
}

/// Turns a validated input into a job to insert: every field checked here, once, and the
/// queue's settings laid on (its policy's overrides checked, its `ordering_on_dead`, its
/// callback); the group's and the ordering key's names through the engine's own check
/// ([`redial_engine::EngineConfig::check`]), so the engine takes the job as it is.
pub fn new_job(intake: &Intake, input: JobInput, now: Timestamp) -> Result<Checked, IntakeError> {
    let queue = input.queue.unwrap_or_else(|| "default".to_owned());
    check_queue(intake, &queue)?;
    check_not_reserved(intake, &queue)?;
    let id = job_id(input.id)?;
    let (request, url) = request_of(intake, input.request)?;
    let idempotency_key = match input.idempotency_key {
        Some(k) => idempotency_key(k)?,
        None => redial_engine::derived_idempotency_key(&queue, &id),
    };
    check_deadline(input.deadline, input.run_at, now)?;
    let tags = tags_of(input.tags.unwrap_or_default())?;
    let priority: i32 = match input.priority {
        Some(p) => within(
            "priority",
            p,
            i64::from(i32::MIN)..=i64::from(i32::MAX),
            ErrorCode::InvalidField,
        )?,
        None => 0,
    };
    let policy = policy_of("policy", input.policy)?;
    let queue_config = &intake.engine.queues[&queue];
    if let Some(p) = &policy {
        queue_config.policy.merged(p).map_err(|e| {
            IntakeError::unprocessable(ErrorCode::InvalidPolicy, format!("policy.{e}"))
        })?;
    }
    let endpoint = match input.endpoint {
        Some(e) if redial_store::plain_name(&e, MAX_ENDPOINT_CHARS) => e,
        Some(_) => {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidEndpoint,
                ENDPOINT_RULE,
            ))
        }
        None => url.origin().ascii_serialization(),
    };
    // An endpoint with credentials of its own adds them when the request is sent: a job that
    // brings an Authorization header too is two sources of truth, unless the endpoint allows it.
    if let Some(why) = intake.credentials.refuse_job_headers(
        &endpoint,
        request.credentials.as_deref(),
        &request.headers,
    ) {
        return Err(IntakeError::unprocessable(ErrorCode::InvalidHeader, why));
    }
    let group = input.group;
    // The group's and the key's names are the engine's one check (`EngineConfig::check`, below).
    let ordering = input.ordering_key.map(|key| OrderingKey {
        key,
        on_dead: queue_config.ordering_on_dead,
    });
    let callback = input
        .callback
        .map(callback_target)
        .transpose()
        .and_then(|t| intake.engine.callback(&queue, t))
        .map_err(|m| IntakeError::unprocessable(ErrorCode::InvalidCallback, m))?;
    let job = NewJob {
        ordering,
        callback,
        id: JobId(id),
        queue,
        endpoint,
        request,
        idempotency_key: Some(idempotency_key),
        priority,
        run_at: input.run_at.map_or(now, |t| t.max(now)),
        deadline: input.deadline,
        tags,
        policy,
        created_at: now,
        group,
    };
    intake.engine.check(job).map_err(|p| {
        let code = match p {
            JobProblem::Group => ErrorCode::InvalidGroup,
            JobProblem::OrderingKey => ErrorCode::InvalidOrderingKey,
        };
        IntakeError::unprocessable(code, p.rule())
    })
}

/// A job's id as given (letters, digits and `-_.:@`, not a notification's), or a new UUID.
fn job_id(given: Option<String>) -> Result<String, IntakeError> {
    let Some(id) = given else {
        return Ok(uuid::Uuid::new_v4().to_string());
    };
    let valid = !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(&b));
    if !valid {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidId,
            "id must be 1 to 200 characters of letters, digits and - _ . : @",
        ));
    }
    // A notification's id is its key and webhook-id: a job holding one first would suppress
    // the genuine delivery (one event, one job).
    if redial_engine::notifications::is_notification_id(&id) {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidId,
            "id is in the form of Redial's own notifications' ids (notify-<target>-<event>-<hash>-<ms>): choose another",
        ));
    }
    Ok(id)
}

/// The request a job sends, checked (method, URL, headers, body size, timeout), and its URL
/// parsed (the endpoint defaults to its origin).
fn request_of(intake: &Intake, r: JobInputRequest) -> Result<(HttpRequest, url::Url), IntakeError> {
    let upper = r.method.to_ascii_uppercase();
    if !is_http_token(&upper) {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidMethod,
            format!("{:?} is not an HTTP method", r.method),
        ));
    }
    let method = if STANDARD_METHODS.contains(&upper.as_str()) {
        upper
    } else if r.method == upper {
        r.method.clone()
    } else {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidMethod,
            format!(
                "{:?} is not a standard HTTP method ({}); methods are case-sensitive, so write a custom one in upper case, as the server expects it",
                r.method,
                STANDARD_METHODS.join(", ")
            ),
        ));
    };
    let url = check_url("request.url", &r.url)
        .map_err(|m| IntakeError::unprocessable(ErrorCode::InvalidUrl, m))?;
    let mut headers = headers_of("request.headers", r.headers)
        .map_err(|m| IntakeError::unprocessable(ErrorCode::InvalidField, m))?;
    check_headers("request.headers", &headers)
        .map_err(|m| IntakeError::unprocessable(ErrorCode::InvalidHeader, m))?;
    let body = match r.body {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) => Some(s),
        Some(v) => {
            if !headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            {
                headers.push(("content-type".into(), "application/json".into()));
            }
            Some(v.to_string())
        }
    };
    if body
        .as_ref()
        .is_some_and(|b| b.len() > intake.max_job_body_bytes)
    {
        return Err(IntakeError::too_large(
            ErrorCode::JobBodyTooLarge,
            format!(
                "request.body is over the limit of {} bytes",
                intake.max_job_body_bytes
            ),
        ));
    }
    let timeout_ms = match r.timeout {
        None => None,
        Some(t) => {
            let d = parse_duration(&t)
                .filter(|d| *d >= Duration::from_millis(1) && *d <= Duration::from_secs(600))
                .ok_or_else(|| {
                    IntakeError::unprocessable(
                        ErrorCode::InvalidTimeout,
                        format!("request.timeout {t:?} must be a duration from 1ms to 10m with a unit, such as \"10s\""),
                    )
                })?;
            Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        }
    };
    let credentials = credentials_of(intake, r.credentials)?;
    let request = HttpRequest {
        method,
        url: r.url,
        headers,
        body,
        timeout_ms,
        credentials,
    };
    Ok((request, url))
}

/// The credentials profile a job names, checked against the configuration now, so that a typo
/// is a 422 and not a job that fails when it is sent.
fn credentials_of(intake: &Intake, name: Option<String>) -> Result<Option<String>, IntakeError> {
    Ok(match name {
        None => None,
        Some(name) if !redial_engine::credentials::profile_name_ok(&name) => {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidField,
                format!(
                    "request.credentials {name:?} must be the name of a credentials profile: 1 to {} letters, digits, '-', '_' or '.'",
                    redial_engine::credentials::MAX_PROFILE_CHARS
                ),
            ))
        }
        Some(name) => {
            intake
                .credentials
                .for_request("", Some(&name))
                .map_err(|e| {
                    IntakeError::unprocessable(ErrorCode::InvalidField, format!("request.credentials: {e}"))
                })?;
            Some(name)
        }
    })
}

/// An idempotency key as given: printable ASCII, not one of Redial's own deliveries'.
fn idempotency_key(k: String) -> Result<String, IntakeError> {
    if k.is_empty() || k.len() > 255 || !k.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidIdempotencyKey,
            "idempotency_key must be 1 to 255 printable ASCII characters without spaces",
        ));
    }
    if redial_engine::notifications::is_reserved_delivery_key(&k) {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidIdempotencyKey,
            "idempotency_key is in the form of Redial's own deliveries' keys (callback~..., notify-<target>-<event>-...): choose another",
        ));
    }
    Ok(k)
}

/// A deadline must be ahead, and after the job's `run_at`.
fn check_deadline(
    deadline: Option<Timestamp>,
    run_at: Option<Timestamp>,
    now: Timestamp,
) -> Result<(), IntakeError> {
    let Some(d) = deadline else { return Ok(()) };
    if d <= now {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidDeadline,
            format!("deadline {d} is already past"),
        ));
    }
    if let Some(run_at) = run_at.filter(|r| d <= *r) {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidDeadline,
            format!("deadline {d} is not after run_at {run_at}: the job could never run"),
        ));
    }
    Ok(())
}

/// At most 32 tags, each a plain name.
fn tags_of(tags: Vec<String>) -> Result<Vec<String>, IntakeError> {
    if tags.len() > 32 {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidTags,
            "at most 32 tags",
        ));
    }
    if let Some(bad) = tags
        .iter()
        .find(|t| !redial_store::plain_name(t, MAX_TAG_CHARS))
    {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidTags,
            format!("tag {bad:?}: {TAG_RULE}"),
        ));
    }
    Ok(tags)
}
