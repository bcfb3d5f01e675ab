//! What clients send, and its validation: every mistake becomes a 4xx with a precise code and a
//! message that says what to fix, before anything is stored.

// A job's and a schedule's intake (every field checked once, the queue's settings laid on) is
// `redial-intake`'s, shared with `redial config check`; what only the API reads is here.
pub use redial_intake::{
    check_queue, new_job, object_only, schedule_definition, BatchInput, CallbackInput,
    HeadersInput, Intake, JobInput, RequestInput, ScheduleInput, ENDPOINT_RULE, MAX_ENDPOINT_CHARS,
    MAX_TAG_CHARS, TAG_RULE,
};

use crate::{ApiError, AppState, ErrorCode};

impl AppState {
    /// What this server checks jobs and schedules against.
    pub fn intake(&self) -> Intake<'_> {
        Intake {
            engine: self.engine.config(),
            max_job_body_bytes: self.config.max_job_body_bytes,
            credentials: &self.config.credentials,
        }
    }
}
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use redial_policy::{parse_duration, Timestamp};
use redial_store::JobFilter;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use std::time::Duration;

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
            check_queue(&state.intake(), q)?;
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
