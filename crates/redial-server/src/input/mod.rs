//! What clients send, and its validation: every mistake becomes a 4xx with a precise code and a
//! message that says what to fix, before anything is stored.

// A job's and a schedule's intake (every field checked once, the queue's settings laid on) is
// `redial-intake`'s, shared with `redial config check`; what only the API reads is here. Every
// body is read into `redial_api`'s input types (generated from the OpenAPI document, refusing
// unknown fields) and checked into the domain's values by these functions.
pub use redial_intake::{
    check_queue, new_job, policy_of, schedule_definition, schedule_input, Intake, ENDPOINT_RULE,
    MAX_ENDPOINT_CHARS, MAX_TAG_CHARS, TAG_RULE,
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
use redial_api::{BatchInput, DeadCategory, DeadLetterFilter, JobInput, PauseInput, ScheduleInput};
use redial_policy::{parse_duration, Timestamp};
use redial_store::JobFilter;
use serde::de::DeserializeOwned;
use std::time::Duration;

/// Whether a dead-letter filter names no criterion: a bulk action would reach every dead letter.
pub fn filter_is_empty(f: &DeadLetterFilter) -> bool {
    f.queue.is_none()
        && f.category.is_none()
        && f.endpoint.is_none()
        && f.since.is_none()
        && f.until.is_none()
        && f.pattern.is_none()
}

/// An optional body (empty or whitespace: the input's default), else JSON read as `T`.
pub fn parse_optional<T: DeserializeOwned + Default>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, ApiError> {
    match body {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Ok(T::default()),
        other => parse_json(other),
    }
}

/// A batch as sent: what is wrong with one of its jobs names it (`jobs[3]: ...`).
pub fn parse_batch(body: Result<Bytes, BytesRejection>) -> Result<BatchInput, ApiError> {
    let bytes = body.map_err(body_error)?;
    match serde_json::from_slice::<BatchInput>(&bytes) {
        Ok(batch) => Ok(batch),
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            // Which job it was: read again as JSON, each job on its own.
            let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(json_error)?;
            let jobs = value.get("jobs").and_then(serde_json::Value::as_array);
            for (i, job) in jobs.into_iter().flatten().enumerate() {
                if let Err(e) = serde_json::from_value::<JobInput>(job.clone()) {
                    let mut e = json_error(e);
                    e.message = format!("jobs[{i}]: {}", e.message);
                    return Err(e);
                }
            }
            Err(json_error(e))
        }
        Err(e) => Err(json_error(e)),
    }
}

/// A schedule as sent ([`schedule_input`]: what is wrong with its job says so).
pub fn parse_schedule(body: Result<Bytes, BytesRejection>) -> Result<ScheduleInput, ApiError> {
    let value: serde_json::Value = parse_json(body)?;
    Ok(schedule_input(value)?)
}

/// A pause by hand's reason and end (an instant, or a duration from `now`), checked; with
/// neither it lasts until resumed.
pub fn pause_of(
    input: PauseInput,
    now: Timestamp,
) -> Result<(String, Option<Timestamp>), ApiError> {
    let reason = input.reason.unwrap_or_default();
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
    let until = match (input.until, input.r#for) {
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

/// A dead-letter filter as a bulk action or an export takes it, with its pattern (checked, not
/// yet resolved: [`with_pattern`]). Its other fields (a replay's) are the caller's.
pub fn filter_of(
    f: DeadLetterFilter,
    state: &AppState,
) -> Result<(JobFilter, Option<String>), ApiError> {
    if let Some(q) = &f.queue {
        check_queue(&state.intake(), q)?;
    }
    check_range(f.since, f.until)?;
    if let Some(p) = &f.pattern {
        check_pattern(p)?;
    }
    let category = match f.category {
        None => None,
        Some(DeadCategory::Other) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidCategory,
                format!(
                    "category is not one this server knows: use one of {}",
                    DeadCategory::ALL
                        .iter()
                        .map(|c| c.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ))
        }
        Some(c) => Some(
            redial_store::parse_dead_category(c.as_str())
                .map_err(|e| ApiError::unprocessable(ErrorCode::InvalidCategory, e))?,
        ),
    };
    let filter = JobFilter {
        queue: f.queue,
        state: Some(redial_store::JobState::Dead),
        category,
        endpoint: f.endpoint,
        since: f.since,
        until: f.until,
        ..JobFilter::default()
    };
    Ok((filter, f.pattern))
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
