//! A job and a schedule as clients send them (`redial_api`'s input types, generated from the
//! OpenAPI document) and their intake: [`new_job`] checks every field once and lays the queue's
//! settings on, into the job the engine stores; [`schedule_definition`] does the same for a
//! schedule and its template. The API (`redial-server`) reads its requests into those types and
//! answers their errors; `redial config check` checks the file's schedules with the same code,
//! with no database, engine or HTTP server.

mod job;
mod schedule;

pub use job::{callback_target, new_job};
pub use schedule::{schedule_definition, schedule_input};

use redial_api::ErrorCode;
use redial_engine::EngineConfig;
use redial_policy::{is_http_token, PolicyOverride};
use serde::Deserialize;

/// Why an input is refused: the API's error code and a message that says what to fix. The API
/// answers it as 422 (`Unprocessable`) or 413 (`TooLarge`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IntakeError {
    pub kind: IntakeErrorKind,
    pub code: ErrorCode,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntakeErrorKind {
    /// A field's value is not acceptable (422).
    Unprocessable,
    /// The job's body is over the limit (413).
    TooLarge,
}

impl IntakeError {
    pub fn unprocessable(code: ErrorCode, message: impl Into<String>) -> Self {
        IntakeError {
            kind: IntakeErrorKind::Unprocessable,
            code,
            message: message.into(),
        }
    }

    pub fn too_large(code: ErrorCode, message: impl Into<String>) -> Self {
        IntakeError {
            kind: IntakeErrorKind::TooLarge,
            code,
            message: message.into(),
        }
    }
}

/// What checking a job or a schedule needs to know: the engine's configuration (queues,
/// policies, callbacks) and the largest body a job may carry. No database and no running
/// engine: `redial config check` builds one from the configuration alone.
#[derive(Clone, Copy, Debug)]
pub struct Intake<'a> {
    pub engine: &'a EngineConfig,
    pub max_job_body_bytes: usize,
    /// The endpoints' credentials: a job may not bring its own `Authorization` to one that has
    /// some, unless it allows it.
    pub credentials: &'a redial_engine::credentials::Credentials,
}

/// Headers as an input gives them: an object (`{"Name": "value"}`) or pairs (`[["Name",
/// "value"]]`, which allows repeats); `null` or absent, none. The message names `field`.
pub fn headers_of(
    field: &str,
    h: Option<serde_json::Value>,
) -> Result<Vec<(String, String)>, String> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Headers {
        Map(std::collections::BTreeMap<String, String>),
        Pairs(Vec<(String, String)>),
    }
    match h {
        None | Some(serde_json::Value::Null) => Ok(Vec::new()),
        Some(v) => match serde_json::from_value(v) {
            Ok(Headers::Map(m)) => Ok(m.into_iter().collect()),
            Ok(Headers::Pairs(p)) => Ok(p),
            Err(_) => Err(format!(
                "{field} must be an object of names to string values, or a list of [name, value] pairs"
            )),
        },
    }
}

/// A policy's overrides as an input gives them: an object (an array would be read field by
/// field in order, `[1]` as `max_attempts = 1`, so it is refused); `null` or absent, none. The
/// error (422 `invalid_field`) names `field`.
pub fn policy_of(
    field: &str,
    p: Option<serde_json::Value>,
) -> Result<Option<PolicyOverride>, IntakeError> {
    match p {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v @ serde_json::Value::Object(_)) => {
            serde_json::from_value(v).map(Some).map_err(|e| {
                IntakeError::unprocessable(ErrorCode::InvalidField, format!("{field}: {e}"))
            })
        }
        Some(_) => Err(IntakeError::unprocessable(
            ErrorCode::InvalidField,
            format!("{field} must be an object, such as {{\"max_attempts\": 3}}"),
        )),
    }
}

/// An integer of an input that the domain holds in a narrower type, within `range`; the error
/// (422 `code`) names `field` and the range.
pub fn within<T>(
    field: &str,
    value: i64,
    range: std::ops::RangeInclusive<i64>,
    code: ErrorCode,
) -> Result<T, IntakeError>
where
    T: TryFrom<i64>,
{
    match T::try_from(value) {
        Ok(v) if range.contains(&value) => Ok(v),
        _ => Err(IntakeError::unprocessable(
            code,
            format!("{field} must be from {} to {}", range.start(), range.end()),
        )),
    }
}

/// A URL a job may send to: at most [`MAX_URL_BYTES`], http or https with a host and a port
/// other than 0. The message names `field`.
fn check_url(field: &str, raw: &str) -> Result<url::Url, String> {
    if raw.len() > MAX_URL_BYTES {
        return Err(format!("{field} is over {MAX_URL_BYTES} bytes"));
    }
    let url =
        url::Url::parse(raw).map_err(|e| format!("{field} {raw:?} is not a valid URL: {e}"))?;
    if url.port() == Some(0) {
        return Err(format!(
            "{field} {raw:?} has port 0, which nothing can be reached on"
        ));
    }
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "{field} {raw:?} must be an http or https URL with a host"
        ));
    }
    Ok(url)
}

/// Headers a job may send: at most 100, valid names, no framing or hop-by-hop header, values
/// without control characters of at most 8192 bytes. The message names `field`.
fn check_headers(field: &str, headers: &[(String, String)]) -> Result<(), String> {
    if headers.len() > 100 {
        return Err(format!("{field}: at most 100 headers"));
    }
    for (name, value) in headers {
        if !is_http_token(name) {
            return Err(format!("{field}: {name:?} is not a valid header name"));
        }
        if is_reserved_header(name) {
            return Err(format!("{field}: {name:?} is set by the HTTP client (framing and hop-by-hop headers: Content-Length, Transfer-Encoding, Host, Connection, TE, Trailer, Upgrade, Keep-Alive, Proxy-*); leave it out"));
        }
        if value.len() > 8192 || value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(format!(
                "{field}: the value of header {name:?} has control characters or is over 8192 bytes"
            ));
        }
    }
    Ok(())
}

/// The longest request URL a job may have.
const MAX_URL_BYTES: usize = 8192;

/// The methods whose names are standard (RFC 9110 section 9): accepted in any case and sent in
/// upper case. Other methods are case-sensitive, so they must be written as sent.
const STANDARD_METHODS: &[&str] = &[
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT",
];

/// Headers the HTTP client sets itself: framing (a job's own `Content-Length` would cut or
/// stall its body) and hop-by-hop ones, which belong to one connection.
fn is_reserved_header(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "content-length"
            | "transfer-encoding"
            | "host"
            | "connection"
            | "te"
            | "upgrade"
            | "keep-alive"
            | "trailer"
    ) || n.starts_with("proxy-")
}

/// A tag's length, in characters, and the rule for one (as for every name:
/// [`redial_store::plain_name`]).
pub const MAX_TAG_CHARS: usize = 100;
pub const TAG_RULE: &str = "a tag must be 1 to 100 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators";

pub fn check_queue(intake: &Intake, queue: &str) -> Result<(), IntakeError> {
    if intake.engine.has_queue(queue) {
        return Ok(());
    }
    let known: Vec<&str> = intake.engine.queues.keys().map(String::as_str).collect();
    Err(IntakeError::unprocessable(
        ErrorCode::UnknownQueue,
        format!(
            "queue {queue:?} is not configured: use one of {}",
            known.join(", ")
        ),
    ))
}

/// Refuses Redial's own queues (callbacks and notifications) to jobs from clients: their
/// deliveries are signed with the queue's secret under a `webhook-id` Redial derives, so a job
/// put there by a token holder (enqueued, scheduled, or replayed or patched into it) would be a
/// forged delivery that receivers trust, and could take the genuine one's `webhook-id`.
pub fn check_not_reserved(intake: &Intake, queue: &str) -> Result<(), IntakeError> {
    let c = intake.engine;
    if queue == c.callback_queue || queue == c.notification_queue {
        return Err(IntakeError::unprocessable(
            ErrorCode::ReservedQueue,
            format!(
                "queue {queue:?} carries Redial's own signed deliveries: jobs cannot be enqueued, scheduled, replayed or patched into it (a dead delivery may be replayed as it was)"
            ),
        ));
    }
    Ok(())
}

/// An endpoint name's length, in characters, and the rule for one, at enqueue and in every
/// control alike ([`redial_store::plain_name`]).
pub const MAX_ENDPOINT_CHARS: usize = 200;
pub const ENDPOINT_RULE: &str = "endpoint must be 1 to 200 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators (names are URL origins such as https://api.example.com, percent-encoded in the path)";

/// The configuration file's `[[schedules]]`, each checked as `POST /v1/schedules` checks one;
/// or every problem found (`schedules[i]: why`). Writes nothing.
pub fn config_schedules(
    intake: &Intake,
    tables: Vec<serde_json::Value>,
    now: redial_policy::Timestamp,
) -> Result<Vec<(String, redial_engine::ScheduleDefinition)>, Vec<String>> {
    let mut defined: Vec<(String, redial_engine::ScheduleDefinition)> = Vec::new();
    let mut problems = Vec::new();
    for (i, table) in tables.into_iter().enumerate() {
        let input = match schedule_input(table) {
            Ok(input) => input,
            Err(e) => {
                problems.push(format!("schedules[{i}]: {}", e.message));
                continue;
            }
        };
        match schedule_definition(intake, input, None, "config", now) {
            Ok((id, _)) if defined.iter().any(|(d, _)| d == &id) => {
                problems.push(format!("schedules[{i}]: id {id:?} is given twice"));
            }
            Ok(one) => defined.push(one),
            Err(e) => problems.push(format!("schedules[{i}]: {}", e.message)),
        }
    }
    if problems.is_empty() {
        Ok(defined)
    } else {
        Err(problems)
    }
}
