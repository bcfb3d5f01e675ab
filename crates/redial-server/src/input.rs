//! What clients send, and its validation: every mistake becomes a 4xx with a precise code and a
//! message that says what to fix, before anything is stored.

use crate::{ApiError, AppState, ErrorCode};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use redial_policy::{is_http_token, parse_duration, PolicyOverride, Timestamp};
use redial_store::{HttpRequest, JobFilter, JobId, NewJob, OrderingKey};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobInput {
    pub id: Option<String>,
    pub queue: Option<String>,
    pub request: RequestInput,
    pub idempotency_key: Option<String>,
    pub run_at: Option<Timestamp>,
    pub deadline: Option<Timestamp>,
    pub priority: Option<i32>,
    pub tags: Option<Vec<String>>,
    /// Groups the job with others under one endpoint; the URL's origin by default.
    pub endpoint: Option<String>,
    /// Who the job is for (a tenant, a customer): the queue leases round-robin across groups.
    pub group: Option<String>,
    /// The queue's jobs with the same ordering key start one at a time, in enqueue order.
    pub ordering_key: Option<String>,
    /// Overrides of the queue's policy for this job: an object (an array would be read field by
    /// field in order, `[1]` as `max_attempts = 1`).
    #[serde(default, deserialize_with = "object_only")]
    pub policy: Option<PolicyOverride>,
    /// Where to tell when the job finishes; the queue's callback when absent.
    pub callback: Option<CallbackInput>,
}

/// A job's or a queue's callback as clients and the configuration file write it.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallbackInput {
    pub url: String,
    /// completed, dead, cancelled; completed and dead when absent.
    pub on: Option<Vec<String>>,
    pub headers: Option<HeadersInput>,
}

impl CallbackInput {
    /// The callback checked: an http or https URL, one or more known events, headers as a
    /// job's may be (no `content-type`: a delivery is JSON). The message names the field.
    pub fn target(self) -> Result<redial_engine::CallbackTarget, String> {
        check_url("callback.url", &self.url)?;
        let on = match self.on {
            None => redial_store::CallbackEvent::DEFAULT.to_vec(),
            Some(list) if list.is_empty() => {
                return Err(
                    "callback.on must name at least one event: completed, dead or cancelled".into(),
                )
            }
            Some(list) => {
                let mut on = Vec::new();
                for e in list {
                    let event: redial_store::CallbackEvent =
                        e.parse().map_err(|m| format!("callback.on: {m}"))?;
                    if !on.contains(&event) {
                        on.push(event);
                    }
                }
                on
            }
        };
        let headers = headers_list(self.headers);
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
            url: self.url,
            on,
            headers,
        })
    }
}

fn headers_list(h: Option<HeadersInput>) -> Vec<(String, String)> {
    match h {
        None => Vec::new(),
        Some(HeadersInput::Map(m)) => m.into_iter().collect(),
        Some(HeadersInput::Pairs(p)) => p,
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

/// Reads a JSON object into `T`, and refuses any other JSON value (serde would read an array
/// into a struct by position).
pub(crate) fn object_only<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: DeserializeOwned,
{
    use serde::de::Error;
    let v = serde_json::Value::deserialize(d)?;
    match v {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::Object(_) => serde_json::from_value(v)
            .map(Some)
            .map_err(D::Error::custom),
        _ => Err(D::Error::custom(
            "policy must be an object, such as {\"max_attempts\": 3}",
        )),
    }
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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestInput {
    pub method: String,
    pub url: String,
    pub headers: Option<HeadersInput>,
    /// A string is sent as is; any other JSON value is sent as JSON.
    pub body: Option<serde_json::Value>,
    /// A duration with a unit: "10s".
    pub timeout: Option<String>,
}

/// Headers as an object (`{"Name": "value"}`) or as pairs (`[["Name", "value"]]`, which allows
/// repeats).
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum HeadersInput {
    Map(BTreeMap<String, String>),
    Pairs(Vec<(String, String)>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchInput {
    pub jobs: Vec<serde_json::Value>,
}

/// A dead-letter filter in a bulk action's body; every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterInput {
    pub queue: Option<String>,
    pub category: Option<String>,
    pub endpoint: Option<String>,
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
    /// A reason pattern (`GET /v1/dead-letters/patterns`): the dead letters whose reason has it.
    pub pattern: Option<String>,
    /// Says that a bulk action with no filter means every dead letter.
    pub all: Option<bool>,
    /// A replay's changes ([`crate::replay`]): not a filter.
    pub patch: Option<crate::replay::PatchInput>,
    pub key: Option<crate::replay::KeyChoice>,
    pub dry_run: Option<bool>,
    /// Whether the answer waits for the bulk action to finish (the default), or comes at once
    /// with its operation (202), to follow at `GET /v1/operations/{id}`.
    pub wait: Option<bool>,
}

impl FilterInput {
    /// Whether it names no criterion: a bulk action would reach every dead letter.
    pub fn is_empty(&self) -> bool {
        self.queue.is_none()
            && self.category.is_none()
            && self.endpoint.is_none()
            && self.since.is_none()
            && self.until.is_none()
            && self.pattern.is_none()
    }
}

/// A pause by hand: why, and until when (an instant, or a duration from now); with neither it
/// lasts until resumed. The body may be empty.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseInput {
    pub reason: Option<String>,
    pub until: Option<Timestamp>,
    #[serde(rename = "for")]
    pub for_: Option<String>,
}

impl PauseInput {
    /// Reads an optional body (empty or whitespace: no reason, no end).
    pub fn read(body: Result<Bytes, BytesRejection>) -> Result<PauseInput, ApiError> {
        match body {
            Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Ok(PauseInput::default()),
            other => parse_json(other),
        }
    }

    /// The reason and the end, checked against `now`.
    pub fn resolve(self, now: Timestamp) -> Result<(String, Option<Timestamp>), ApiError> {
        let reason = self.reason.unwrap_or_default();
        if reason.chars().count() > 500 {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidReason,
                "reason must be at most 500 characters",
            ));
        }
        if !redial_store::plain_text(&reason) {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidReason,
                "reason must be one line of plain text: no control characters (newlines, escapes, NUL), no bidirectional overrides or line separators",
            ));
        }
        let until = match (self.until, self.for_) {
            (Some(_), Some(_)) => {
                return Err(ApiError::unprocessable(
                    ErrorCode::InvalidPause,
                    "give until or for, not both",
                ))
            }
            (Some(u), None) if u <= now => {
                return Err(ApiError::unprocessable(
                    ErrorCode::InvalidPause,
                    format!("until {u} has passed: give a later instant, or leave it out to pause until resumed"),
                ))
            }
            (Some(u), None) => Some(u),
            (None, Some(f)) => {
                let d = parse_duration(&f)
                    .filter(|d| !d.is_zero() && *d <= Duration::from_secs(366 * 24 * 3600))
                    .ok_or_else(|| {
                        ApiError::unprocessable(
                            ErrorCode::InvalidPause,
                            format!("for {f:?} must be a duration from 1ms to 366d with a unit, such as \"30m\""),
                        )
                    })?;
                // To the whole second after: people read and type the end.
                let end = now.saturating_add(d).as_unix_millis();
                Some(Timestamp::from_unix_millis(end + (1000 - end.rem_euclid(1000)) % 1000))
            }
            (None, None) => None,
        };
        Ok((reason, until))
    }
}

/// Reads a JSON body, mapping each failure to its own code.
pub fn parse_json<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    parse_json_bytes(&body.map_err(body_error)?)
}

pub fn body_too_large() -> ApiError {
    ApiError::too_large(
        ErrorCode::BodyTooLarge,
        "the request body is over the server's limit: send fewer or smaller jobs",
    )
}

/// Why a request body could not be read, as the API says it.
pub fn body_error(r: BytesRejection) -> ApiError {
    if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
        body_too_large()
    } else {
        ApiError::bad_request(ErrorCode::InvalidBody, r.body_text())
    }
}

pub fn parse_json_bytes<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(json_error)
}

pub fn json_error(e: serde_json::Error) -> ApiError {
    use serde_json::error::Category;
    match e.classify() {
        Category::Syntax | Category::Eof | Category::Io => ApiError::bad_request(
            ErrorCode::InvalidJson,
            format!("the body is not valid JSON: {e}"),
        ),
        Category::Data => ApiError::unprocessable(ErrorCode::InvalidField, e.to_string()),
    }
}

/// A time range that starts after it ends: refused, so that a swapped pair is not read as "no
/// dead letters" (or a bulk action that did nothing).
pub fn check_range(since: Option<Timestamp>, until: Option<Timestamp>) -> Result<(), ApiError> {
    match (since, until) {
        (Some(s), Some(u)) if s > u => Err(ApiError::unprocessable(
            ErrorCode::InvalidRange,
            format!("since {s} is after until {u}: nothing could match (were they swapped?)"),
        )),
        _ => Ok(()),
    }
}

impl FilterInput {
    /// The filter, with its pattern (checked, not yet resolved: [`with_pattern`]).
    pub fn into_filter(self, state: &AppState) -> Result<(JobFilter, Option<String>), ApiError> {
        if let Some(q) = &self.queue {
            check_queue(state, q)?;
        }
        check_range(self.since, self.until)?;
        if let Some(p) = &self.pattern {
            check_pattern(p)?;
        }
        let filter = JobFilter {
            queue: self.queue,
            state: Some(redial_store::JobState::Dead),
            category: self
                .category
                .as_deref()
                .map(redial_store::parse_dead_category)
                .transpose()
                .map_err(|e| ApiError::unprocessable(ErrorCode::InvalidCategory, e))?,
            endpoint: self.endpoint,
            since: self.since,
            until: self.until,
            ..JobFilter::default()
        };
        Ok((filter, self.pattern))
    }
}

/// A reason pattern as a filter takes it: one line of plain text, at most 1,000 characters
/// (422 in a body).
pub fn check_pattern(pattern: &str) -> Result<(), ApiError> {
    match pattern_problem(pattern) {
        Some(why) => Err(ApiError::unprocessable(ErrorCode::InvalidPattern, why)),
        None => Ok(()),
    }
}

/// What is wrong with a reason pattern, if anything.
pub fn pattern_problem(pattern: &str) -> Option<&'static str> {
    (pattern.chars().count() > 1000 || !redial_store::plain_text(pattern)).then_some(
        "pattern must be one line of plain text of at most 1000 characters, as GET /v1/dead-letters/patterns gives it",
    )
}

/// A search's idempotency key: as an enqueue takes one (400 otherwise: it is a query).
pub fn search_key(k: String) -> Result<String, ApiError> {
    if k.is_empty() || k.len() > 255 || !k.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidIdempotencyKey,
            "idempotency_key must be 1 to 255 printable ASCII characters without spaces",
        ));
    }
    Ok(k)
}

/// A search's tag: as an enqueue takes one (400 otherwise: it is a query).
pub fn search_tag(t: String) -> Result<String, ApiError> {
    if !redial_store::plain_name(&t, MAX_TAG_CHARS) {
        return Err(ApiError::bad_request(ErrorCode::InvalidTags, TAG_RULE));
    }
    Ok(t)
}

/// A tag's length, in characters, and the rule for one (as for every name:
/// [`redial_store::plain_name`]).
const MAX_TAG_CHARS: usize = 100;
const TAG_RULE: &str = "a tag must be 1 to 100 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators";

/// The most words a search by reason text takes.
const MAX_SEARCH_WORDS: usize = 8;

/// The words of a search by reason text ([`redial_store::reason_words`]): 1 to 8 of them, from
/// at most 1,000 characters.
pub fn search_words(text: &str) -> Result<Vec<String>, ApiError> {
    let words = redial_store::reason_words(text);
    if text.chars().count() > 1000 || words.is_empty() || words.len() > MAX_SEARCH_WORDS {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidReasonText,
            "reason_text must hold 1 to 8 words (letters and digits; each matches the words of a reason that start with it) in at most 1000 characters",
        ));
    }
    Ok(words)
}

/// Brings the search indexes up to date (`Store::index_for_search`), before a search: what was
/// enqueued or died since the last maintenance tick is found too.
pub async fn index_for_search(state: &AppState) -> Result<(), ApiError> {
    const CHUNK: u32 = 1000;
    while state.engine.store().index_for_search(CHUNK).await? >= CHUNK {}
    Ok(())
}

/// The filter narrowed to the dead letters whose reason has `pattern`: the reasons, word for
/// word, that the filter's dead letters have with that pattern now (none: the filter matches
/// nothing). Dead letters that die later with a new reason of the pattern are not in it.
pub async fn with_pattern(
    state: &AppState,
    mut filter: JobFilter,
    pattern: Option<String>,
) -> Result<JobFilter, ApiError> {
    let Some(pattern) = pattern else {
        return Ok(filter);
    };
    let reasons = state
        .engine
        .store()
        .dead_letter_reasons(filter.clone())
        .await?;
    filter.reasons = Some(redial_store::reasons_with_pattern(&reasons, &pattern));
    Ok(filter)
}

pub fn check_queue(state: &AppState, queue: &str) -> Result<(), ApiError> {
    if state.engine.has_queue(queue) {
        return Ok(());
    }
    let known: Vec<&str> = state
        .engine
        .config()
        .queues
        .keys()
        .map(String::as_str)
        .collect();
    Err(ApiError::unprocessable(
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
fn check_not_reserved(state: &AppState, queue: &str) -> Result<(), ApiError> {
    let c = state.engine.config();
    if queue == c.callback_queue || queue == c.notification_queue {
        return Err(ApiError::unprocessable(
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

/// Turns a validated input into a job to insert: every field checked here, once, and the
/// queue's settings laid on (its policy's overrides checked, its `ordering_on_dead`, its
/// callback).
pub fn new_job(state: &AppState, input: JobInput, now: Timestamp) -> Result<NewJob, ApiError> {
    let queue = input.queue.unwrap_or_else(|| "default".to_owned());
    check_queue(state, &queue)?;
    check_not_reserved(state, &queue)?;
    let id = job_id(input.id)?;
    let (request, url) = request_of(state, input.request)?;
    let idempotency_key = match input.idempotency_key {
        Some(k) => idempotency_key(k)?,
        None => redial_engine::derived_idempotency_key(&queue, &id),
    };
    check_deadline(input.deadline, input.run_at, now)?;
    let tags = tags_of(input.tags.unwrap_or_default())?;
    let queue_config = &state.engine.config().queues[&queue];
    if let Some(p) = &input.policy {
        queue_config.policy.merged(p).map_err(|e| {
            ApiError::unprocessable(ErrorCode::InvalidPolicy, format!("policy.{e}"))
        })?;
    }
    let endpoint = match input.endpoint {
        Some(e) if redial_store::plain_name(&e, MAX_ENDPOINT_CHARS) => e,
        Some(_) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidEndpoint,
                ENDPOINT_RULE,
            ))
        }
        None => url.origin().ascii_serialization(),
    };
    let group = match input.group {
        Some(g) if NewJob::valid_group(&g) => Some(g),
        Some(_) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidGroup,
                "group must be 1 to 128 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators",
            ))
        }
        None => None,
    };
    let ordering = match input.ordering_key {
        Some(key) if OrderingKey::valid(&key) => Some(OrderingKey {
            key,
            on_dead: queue_config.ordering_on_dead,
        }),
        Some(_) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidOrderingKey,
                "ordering_key must be 1 to 256 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators",
            ))
        }
        None => None,
    };
    let callback = input
        .callback
        .map(CallbackInput::target)
        .transpose()
        .and_then(|t| state.engine.callback(&queue, t))
        .map_err(|m| ApiError::unprocessable(ErrorCode::InvalidCallback, m))?;
    Ok(NewJob {
        ordering,
        callback,
        id: JobId(id),
        queue,
        endpoint,
        request,
        idempotency_key: Some(idempotency_key),
        priority: input.priority.unwrap_or(0),
        run_at: input.run_at.map_or(now, |t| t.max(now)),
        deadline: input.deadline,
        tags,
        policy: input.policy,
        created_at: now,
        group,
    })
}

/// A job's id as given (letters, digits and `-_.:@`, not a notification's), or a new UUID.
fn job_id(given: Option<String>) -> Result<String, ApiError> {
    let Some(id) = given else {
        return Ok(uuid::Uuid::new_v4().to_string());
    };
    let valid = !id.is_empty()
        && id.len() <= 200
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(&b));
    if !valid {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidId,
            "id must be 1 to 200 characters of letters, digits and - _ . : @",
        ));
    }
    // A notification's id is its key and webhook-id: a job holding one first would suppress
    // the genuine delivery (one event, one job).
    if redial_engine::notifications::is_notification_id(&id) {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidId,
            "id is in the form of Redial's own notifications' ids (notify-<target>-<event>-<hash>-<ms>): choose another",
        ));
    }
    Ok(id)
}

/// The request a job sends, checked (method, URL, headers, body size, timeout), and its URL
/// parsed (the endpoint defaults to its origin).
fn request_of(state: &AppState, r: RequestInput) -> Result<(HttpRequest, url::Url), ApiError> {
    let upper = r.method.to_ascii_uppercase();
    if !is_http_token(&upper) {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidMethod,
            format!("{:?} is not an HTTP method", r.method),
        ));
    }
    let method = if STANDARD_METHODS.contains(&upper.as_str()) {
        upper
    } else if r.method == upper {
        r.method.clone()
    } else {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidMethod,
            format!(
                "{:?} is not a standard HTTP method ({}); methods are case-sensitive, so write a custom one in upper case, as the server expects it",
                r.method,
                STANDARD_METHODS.join(", ")
            ),
        ));
    };
    let url = check_url("request.url", &r.url)
        .map_err(|m| ApiError::unprocessable(ErrorCode::InvalidUrl, m))?;
    let mut headers = headers_list(r.headers);
    check_headers("request.headers", &headers)
        .map_err(|m| ApiError::unprocessable(ErrorCode::InvalidHeader, m))?;
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
        .is_some_and(|b| b.len() > state.config.max_job_body_bytes)
    {
        return Err(ApiError::too_large(
            ErrorCode::JobBodyTooLarge,
            format!(
                "request.body is over the limit of {} bytes",
                state.config.max_job_body_bytes
            ),
        ));
    }
    let timeout_ms = match r.timeout {
        None => None,
        Some(t) => {
            let d = parse_duration(&t)
                .filter(|d| *d >= Duration::from_millis(1) && *d <= Duration::from_secs(600))
                .ok_or_else(|| {
                    ApiError::unprocessable(
                        ErrorCode::InvalidTimeout,
                        format!("request.timeout {t:?} must be a duration from 1ms to 10m with a unit, such as \"10s\""),
                    )
                })?;
            Some(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        }
    };
    let request = HttpRequest {
        method,
        url: r.url,
        headers,
        body,
        timeout_ms,
    };
    Ok((request, url))
}

/// An idempotency key as given: printable ASCII, not one of Redial's own deliveries'.
fn idempotency_key(k: String) -> Result<String, ApiError> {
    if k.is_empty() || k.len() > 255 || !k.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidIdempotencyKey,
            "idempotency_key must be 1 to 255 printable ASCII characters without spaces",
        ));
    }
    if redial_engine::notifications::is_reserved_delivery_key(&k) {
        return Err(ApiError::unprocessable(
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
) -> Result<(), ApiError> {
    let Some(d) = deadline else { return Ok(()) };
    if d <= now {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidDeadline,
            format!("deadline {d} is already past"),
        ));
    }
    if let Some(run_at) = run_at.filter(|r| d <= *r) {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidDeadline,
            format!("deadline {d} is not after run_at {run_at}: the job could never run"),
        ));
    }
    Ok(())
}

/// At most 32 tags, each a plain name.
fn tags_of(tags: Vec<String>) -> Result<Vec<String>, ApiError> {
    if tags.len() > 32 {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidTags,
            "at most 32 tags",
        ));
    }
    if let Some(bad) = tags
        .iter()
        .find(|t| !redial_store::plain_name(t, MAX_TAG_CHARS))
    {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidTags,
            format!("tag {bad:?}: {TAG_RULE}"),
        ));
    }
    Ok(tags)
}

/// A schedule as clients send it (`POST /v1/schedules`, `PUT /v1/schedules/{id}`) and as the
/// configuration file's `[[schedules]]` tables give it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleInput {
    pub id: Option<String>,
    /// A cron expression: 5 fields, or 6 with seconds first.
    pub cron: Option<String>,
    /// The IANA time zone the cron expression reads the wall clock of; UTC by default.
    pub timezone: Option<String>,
    /// An interval instead of a cron expression: "5m".
    pub every: Option<String>,
    /// What happens to occurrences missed while Redial was down: skip, run_once (the default) or
    /// run_all.
    pub missed: Option<String>,
    /// With `run_all`: the most missed occurrences run (the latest); 10 by default.
    pub missed_max: Option<u32>,
    /// The job each occurrence enqueues: a job's fields, less id, idempotency_key, run_at and
    /// deadline.
    pub job: serde_json::Value,
}

/// The most missed occurrences `run_all` may run at once.
const MAX_MISSED_MAX: u32 = 1000;

/// Checks a schedule as sent and turns it into its definition; `id` is the path's id, when
/// there is one (a body's id must then match it).
pub fn schedule_definition(
    state: &AppState,
    input: ScheduleInput,
    path_id: Option<&str>,
    source: &str,
    now: Timestamp,
) -> Result<(String, redial_engine::ScheduleDefinition), ApiError> {
    use redial_engine::{JobTemplate, MissedRule, ScheduleRule};
    let id = match (path_id, input.id) {
        (Some(p), Some(b)) if p != b => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidId,
                format!(
                    "the body's id {b:?} is not the path's {p:?}: leave it out, or make them match"
                ),
            ))
        }
        (Some(p), _) => p.to_owned(),
        (None, Some(b)) => b,
        (None, None) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidId,
                "id is required: a name for the schedule, such as \"nightly-report\"",
            ))
        }
    };
    redial_engine::check_schedule_id(&id)
        .map_err(|e| ApiError::unprocessable(ErrorCode::InvalidId, e))?;
    let rule = match (input.cron, input.every) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidSchedule,
                "give cron (such as \"0 9 * * 1-5\") or every (such as \"5m\"), not both",
            ))
        }
        (Some(expr), None) => {
            let timezone = input.timezone.unwrap_or_else(|| "UTC".to_owned());
            let rule = redial_policy::schedule::CronRule::parse(&expr, Some(&timezone))
                .map_err(|e| ApiError::unprocessable(ErrorCode::InvalidSchedule, e))?;
            // One that matched once but cannot again (only times a daylight-saving change
            // skips, such as 02:30 on the last Sunday of March in Europe/Berlin) would be saved
            // and never fire.
            if rule.next_after(now).is_none() {
                return Err(ApiError::unprocessable(
                    ErrorCode::InvalidSchedule,
                    format!("cron expression {expr:?} in {timezone} matches no time from now on (times a daylight-saving change skips do not occur): it would never fire"),
                ));
            }
            ScheduleRule::Cron { expr, timezone }
        }
        (None, Some(every)) => {
            if input.timezone.is_some() {
                return Err(ApiError::unprocessable(
                    ErrorCode::InvalidSchedule,
                    "timezone goes with cron: an interval counts real time",
                ));
            }
            let interval = parse_duration(&every)
                .filter(|d| {
                    *d >= redial_policy::schedule::MIN_INTERVAL
                        && *d <= Duration::from_secs(366 * 24 * 3600)
                        && d.subsec_nanos() == 0
                })
                .ok_or_else(|| {
                    ApiError::unprocessable(
                        ErrorCode::InvalidSchedule,
                        format!("every {every:?} must be a whole number of seconds from 1s to 366d, with a unit, such as \"5m\" or \"90s\""),
                    )
                })?;
            // Counted from the whole second: occurrences (and their job ids) fall on seconds.
            ScheduleRule::Every {
                interval,
                anchor: Timestamp::from_unix_millis(now.as_unix_millis().div_euclid(1000) * 1000),
            }
        }
    };
    let missed = match (input.missed.as_deref(), input.missed_max) {
        (Some("run_all"), max) => {
            let max = max.unwrap_or(10);
            if !(1..=MAX_MISSED_MAX).contains(&max) {
                return Err(ApiError::unprocessable(
                    ErrorCode::InvalidMissed,
                    format!("missed_max must be from 1 to {MAX_MISSED_MAX}"),
                ));
            }
            MissedRule::RunAll { max }
        }
        (_, Some(_)) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidMissed,
                "missed_max goes with missed = \"run_all\"",
            ))
        }
        (None | Some("run_once"), None) => MissedRule::RunOnce,
        (Some("skip"), None) => MissedRule::Skip,
        (Some(other), None) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidMissed,
                format!("missed {other:?} must be skip, run_once or run_all"),
            ))
        }
    };
    if !input.job.is_object() {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidJob,
            "job must be an object: the job each occurrence enqueues, such as {\"request\": {\"method\": \"POST\", \"url\": \"https://...\"}}",
        ));
    }
    for field in ["id", "idempotency_key", "run_at", "deadline"] {
        if input.job.get(field).is_some() {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidJob,
                format!("job.{field} is set by each occurrence (its id is <schedule id>@<instant>, its key derived from it): leave it out"),
            ));
        }
    }
    let job: JobInput = serde_json::from_value(input.job)
        .map_err(|e| ApiError::unprocessable(ErrorCode::InvalidJob, format!("job: {e}")))?;
    if job
        .tags
        .as_ref()
        .is_some_and(|t| t.len() > redial_engine::MAX_TEMPLATE_TAGS)
    {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidTags,
            format!(
                "job: at most {} tags (each occurrence adds schedule:<id>)",
                redial_engine::MAX_TEMPLATE_TAGS
            ),
        ));
    }
    // The job's own checks, their messages saying they are about the schedule's job.
    let job = new_job(state, job, now).map_err(|mut e| {
        e.message = format!("job: {}", e.message);
        e
    })?;
    Ok((
        id,
        redial_engine::ScheduleDefinition {
            rule,
            missed,
            job: JobTemplate {
                queue: job.queue,
                endpoint: job.endpoint,
                request: job.request,
                priority: job.priority,
                tags: job.tags,
                policy: job.policy,
                group: job.group,
                callback: job.callback,
                ordering_key: job.ordering.map(|o| o.key),
            },
            source: source.to_owned(),
        },
    ))
}
