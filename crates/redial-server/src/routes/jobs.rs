//! Jobs: enqueue (one, a batch), show, list, replay, dismiss, cancel; dead letters by group and
//! by pattern; the session. Dead letters by filter (bulk actions, export) are `bulk.rs`'s.

use super::{caller_trace, conflict, job_response, join_trace, ApiResult};
use crate::replay;
use crate::replay::{Changes, Plan};
use crate::{auth, input, view, ApiError, AppState, ErrorCode};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use redial_store::{InsertOutcome, JobFilter, JobId, JobListParams};
use std::collections::HashMap;

pub(super) async fn enqueue(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let input: redial_api::JobInput = input::parse_json(body)?;
    let now = state.engine.clock().now();
    let mut job = input::new_job(&state.intake(), input, now)?;
    join_trace(&mut job, caller_trace(&headers).as_deref());
    match state.engine.enqueue(job).await? {
        InsertOutcome::Inserted(j) => Ok(job_response(StatusCode::CREATED, &j, Some(false))),
        InsertOutcome::Duplicate(j) => Ok(job_response(StatusCode::OK, &j, Some(true))),
        InsertOutcome::Conflict(j) => Err(conflict(&j.id)),
    }
}

pub(super) async fn enqueue_batch(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let trace = caller_trace(&headers);
    let batch = input::parse_batch(body)?;
    if batch.jobs.is_empty() {
        return Err(ApiError::unprocessable(
            ErrorCode::EmptyBatch,
            "jobs is empty: send at least one job",
        ));
    }
    if batch.jobs.len() > state.config.max_batch {
        return Err(ApiError::too_large(
            ErrorCode::BatchTooLarge,
            format!(
                "{} jobs is over the batch limit of {}: split the batch",
                batch.jobs.len(),
                state.config.max_batch
            ),
        ));
    }
    let now = state.engine.clock().now();
    let mut jobs = Vec::with_capacity(batch.jobs.len());
    for (i, one) in batch.jobs.into_iter().enumerate() {
        let mut job = input::new_job(&state.intake(), one, now).map_err(|e| {
            let mut e = ApiError::from(e);
            e.message = format!("jobs[{i}]: {}", e.message);
            e
        })?;
        join_trace(&mut job, trace.as_deref());
        jobs.push(job);
    }
    let outcomes = state.engine.enqueue_batch(jobs).await?;
    if let Some((i, o)) = outcomes
        .iter()
        .enumerate()
        .find(|(_, o)| matches!(o, InsertOutcome::Conflict(_)))
    {
        let mut e = conflict(&o.job().id);
        e.message = format!("jobs[{i}]: {}; nothing in the batch was stored", e.message);
        return Err(e);
    }
    let inserted = outcomes
        .iter()
        .filter(|o| matches!(o, InsertOutcome::Inserted(_)))
        .count();
    let views: Vec<_> = outcomes
        .iter()
        .map(|o| {
            let mut v = view::job(o.job());
            v.deduplicated = Some(matches!(o, InsertOutcome::Duplicate(_)));
            v
        })
        .collect();
    let status = if inserted > 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let answer = redial_api::BatchResult {
        inserted: i64::try_from(inserted).unwrap_or(i64::MAX),
        deduplicated: i64::try_from(views.len() - inserted).unwrap_or(i64::MAX),
        jobs: views,
    };
    Ok((status, Json(answer)).into_response())
}

/// One job with its attempts. With `wait` (a duration, at most 60 s), the answer comes once the
/// job is completed, dead or cancelled, or when the wait ends with the job as it stands then.
pub(super) async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let mut wait = None;
    for (k, v) in q {
        match k.as_str() {
            "wait" => {
                let d = redial_policy::parse_duration(&v)
                    .filter(|d| *d <= redial_api::MAX_WAIT)
                    .ok_or_else(|| {
                        ApiError::bad_request(
                            ErrorCode::InvalidWait,
                            format!("wait {v:?} is not a duration of at most 60 s, such as 30s"),
                        )
                    })?;
                wait = Some(d);
            }
            other => {
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!("unknown query parameter {other:?}: this route takes wait"),
                ))
            }
        }
    }
    let id = JobId(id);
    let got = match wait {
        Some(wait) => state
            .engine
            .wait_finished(&id, wait, state.config.max_waiters)
            .await
            .map_err(|e| match e {
                redial_engine::WaitError::Busy(n) => ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    ErrorCode::TooManyWaiters,
                    format!("{n} requests already wait for jobs on this server (server.max_waiters): try again after Retry-After, or ask without wait"),
                ),
                redial_engine::WaitError::Store(e) => e.into(),
            })?,
        None => state.engine.store().job_get(&id).await?,
    };
    let (job, attempts) = got.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("job {id} not found"),
        )
    })?;
    // Only a replayed job may have changes: the others cost no read.
    let changes = if job.replays > 0 {
        state.engine.store().job_changes(&job.id).await?
    } else {
        Vec::new()
    };
    let mut v = view::job(&job);
    v.attempt_log = Some(attempts.iter().map(view::attempt).collect());
    if !changes.is_empty() {
        v.original_request = changes.first().map(|c| view::request(&c.before.request));
        v.changes = Some(view::changes(&changes));
    }
    Ok(Json(v).into_response())
}

/// A dead-letter filter from a query string (queue, category, endpoint, since, until, and
/// pattern where `pattern` is true), with the pattern checked but not resolved; `limit` too where
/// `limit` is given (its default).
struct DeadQuery {
    filter: JobFilter,
    pattern: Option<String>,
    limit: Option<u32>,
}

fn dead_query(
    state: &AppState,
    q: HashMap<String, String>,
    pattern: bool,
    limit: Option<u32>,
) -> Result<DeadQuery, ApiError> {
    let mut out = DeadQuery {
        filter: JobFilter::default(),
        pattern: None,
        limit,
    };
    for (k, v) in q {
        match k.as_str() {
            "queue" => {
                input::check_queue(&state.intake(), &v)?;
                out.filter.queue = Some(v);
            }
            "category" => {
                out.filter.category = Some(
                    redial_store::parse_dead_category(&v)
                        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidCategory, e))?,
                )
            }
            "endpoint" => out.filter.endpoint = Some(v),
            "since" | "until" => {
                let t = redial_policy::Timestamp::parse_rfc3339(&v).ok_or_else(|| {
                    ApiError::bad_request(
                        ErrorCode::InvalidTime,
                        format!("{k} must be an RFC 3339 instant such as 2026-12-01T10:00:00Z"),
                    )
                })?;
                if k == "since" {
                    out.filter.since = Some(t);
                } else {
                    out.filter.until = Some(t);
                }
            }
            "pattern" if pattern => {
                if let Some(why) = input::pattern_problem(&v) {
                    return Err(ApiError::bad_request(ErrorCode::InvalidPattern, why));
                }
                out.pattern = Some(v);
            }
            "limit" if limit.is_some() => out.limit = Some(page_limit(&v)?),
            other => {
                let mut names = vec!["queue", "category", "endpoint", "since", "until"];
                names.extend(pattern.then_some("pattern"));
                names.extend(limit.map(|_| "limit"));
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!(
                        "unknown query parameter {other:?}: use {}",
                        names.join(", ")
                    ),
                ));
            }
        }
    }
    input::check_range(out.filter.since, out.filter.until)?;
    Ok(out)
}

/// A page limit from a query string: 1 to 500.
pub(super) fn page_limit(v: &str) -> Result<u32, ApiError> {
    v.parse::<u32>()
        .ok()
        .filter(|n| (1..=500).contains(n))
        .ok_or_else(|| {
            ApiError::bad_request(
                ErrorCode::InvalidLimit,
                "limit must be a number from 1 to 500",
            )
        })
}

/// Dead letters grouped by queue, category and endpoint (each group is what a bulk action with
/// that filter acts on), largest first.
pub(super) async fn dead_letter_groups(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let DeadQuery {
        filter, pattern, ..
    } = dead_query(&state, q, true, None)?;
    let filter = input::with_pattern(&state, filter, pattern).await?;
    let groups = state.engine.store().dead_letter_groups(filter).await?;
    let total: u64 = groups.iter().map(|g| g.count).sum();
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    Ok(Json(redial_api::DeadGroups {
        total: count(total),
        groups: groups
            .into_iter()
            .map(|g| redial_api::DeadGroup {
                queue: g.queue,
                category: redial_api::DeadCategory::parse(g.category.as_str()),
                endpoint: g.endpoint,
                count: count(g.count),
                first: g.first,
                last: g.last,
                reason: g.reason,
            })
            .collect(),
    })
    .into_response())
}

/// Dead letters grouped by the pattern of their reason (one cause, whatever the numbers, ids and
/// times in its text), largest first: the first `limit` patterns, and how many there are.
pub(super) async fn dead_letter_patterns(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let DeadQuery { filter, limit, .. } = dead_query(&state, q, false, Some(100))?;
    let reasons = state.engine.store().dead_letter_reasons(filter).await?;
    let mut patterns = redial_store::dead_patterns(&reasons);
    let total: u64 = patterns.iter().map(|p| p.count).sum();
    let found = patterns.len();
    patterns.truncate(limit.unwrap_or(100) as usize);
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let answer = redial_api::DeadPatterns {
        count: count(found as u64),
        total: count(total),
        patterns: patterns
            .into_iter()
            .map(|p| redial_api::DeadPattern {
                pattern: p.pattern,
                count: count(p.count),
                first: p.first,
                last: p.last,
                example: p.example,
                reasons: count(p.reasons),
            })
            .collect(),
    };
    Ok(Json(answer).into_response())
}

/// What the caller may do: whether it may only look (the read-only token, or a browser when the
/// dashboard is read-only).
pub(super) async fn session(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let read_only = auth::looks_only(&state, &headers);
    Json(redial_api::Session {
        read_only,
        token_required: state.config.token.is_some(),
    })
    .into_response()
}

pub(super) async fn list(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let mut filter = JobFilter::default();
    let mut pattern = None;
    let mut after = None;
    let mut limit = 50u32;
    for (k, v) in q {
        match k.as_str() {
            "queue" => {
                input::check_queue(&state.intake(), &v)?;
                filter.queue = Some(v);
            }
            "state" => {
                filter.state = Some(v.parse().map_err(|e: String| ApiError::bad_request(ErrorCode::InvalidState, e))?)
            }
            "category" => {
                filter.category = Some(
                    redial_store::parse_dead_category(&v).map_err(|e| ApiError::bad_request(ErrorCode::InvalidCategory, e))?,
                )
            }
            "endpoint" => filter.endpoint = Some(v),
            "pattern" => {
                if let Some(why) = input::pattern_problem(&v) {
                    return Err(ApiError::bad_request(ErrorCode::InvalidPattern, why));
                }
                pattern = Some(v);
            }
            "idempotency_key" => filter.idempotency_key = Some(input::search_key(v)?),
            "tag" => filter.tag = Some(input::search_tag(v)?),
            "reason_text" => filter.reason_words = input::search_words(&v)?,
            "cursor" => {
                after = Some(v.parse::<i64>().map_err(|_| {
                    ApiError::bad_request(ErrorCode::InvalidCursor, "cursor must be a next_cursor value from a previous page")
                })?)
            }
            "limit" => limit = page_limit(&v)?,
            other => {
                return Err(ApiError::bad_request(
                    ErrorCode::UnknownParameter,
                    format!("unknown query parameter {other:?}: use queue, state, category, endpoint, pattern, idempotency_key, tag, reason_text, cursor, limit"),
                ))
            }
        }
    }
    if pattern.is_some() {
        // A pattern is of dead letters' reasons.
        dead_only(&mut filter, ErrorCode::InvalidPattern, "pattern filters")?;
    }
    if !filter.reason_words.is_empty() {
        dead_only(
            &mut filter,
            ErrorCode::InvalidReasonText,
            "reason_text searches",
        )?;
    }
    if filter.idempotency_key.is_some() || filter.tag.is_some() || !filter.reason_words.is_empty() {
        input::index_for_search(&state).await?;
    }
    let filter = input::with_pattern(&state, filter, pattern).await?;
    let page = state
        .engine
        .store()
        .job_list(JobListParams {
            filter,
            after,
            limit,
        })
        .await?;
    let jobs: Vec<_> = page.jobs.iter().map(view::job).collect();
    Ok(Json(redial_api::JobPage {
        jobs,
        next_cursor: page.next.map(|n| n.to_string()),
    })
    .into_response())
}

/// Narrows `filter` to dead letters, for a parameter (`what`: "pattern filters") that only dead
/// letters have: any other state asked for is refused with `code`.
fn dead_only(filter: &mut JobFilter, code: ErrorCode, what: &str) -> Result<(), ApiError> {
    match filter.state {
        None => filter.state = Some(redial_store::JobState::Dead),
        Some(redial_store::JobState::Dead) => {}
        Some(other) => {
            return Err(ApiError::bad_request(
                code,
                format!(
                    "{what} dead letters: use it with state=dead or without a state, not state={}",
                    other.as_str()
                ),
            ))
        }
    }
    Ok(())
}

/// A dead job back to ready: as it was, or with changes (`{"patch", "key"}`), or only a
/// preview of them (`"dry_run": true`).
pub(super) async fn replay(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    // No body, an empty one or `null`: a plain replay, as before replays took changes.
    let input: redial_api::ReplayInput = match body {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) || b.trim_ascii() == b"null" => {
            redial_api::ReplayInput::default()
        }
        other => input::parse_json(other)?,
    };
    let (changes, dry_run) = Changes::of(input)?;
    let id = JobId(id);
    if changes.is_none() && !dry_run {
        let job = state.engine.replay(&id).await?;
        return Ok(job_response(StatusCode::OK, &job, None));
    }
    changes.check(&state)?;
    let (job, _) = state
        .engine
        .store()
        .job_get(&id)
        .await?
        .ok_or_else(|| redial_store::StoreError::NotFound(id.clone()))?;
    redial_store::may_replay(&job)?;
    let now = state.engine.clock().now();
    let params = match replay::plan(&state, &job, &changes, now)? {
        Plan::Change(p) => p,
        Plan::Skip(why) => {
            return Err(ApiError::unprocessable(
                ErrorCode::InvalidUrl,
                format!("job {id}: the patch is not for it: {why}"),
            ))
        }
    };
    if dry_run {
        let item = replay::preview(&params);
        return Ok(Json(redial_api::ReplayPreview {
            dry_run: true,
            matched: 1,
            affected: 1,
            skipped: 0,
            preview: vec![item],
        })
        .into_response());
    }
    let job = if params.change.changed.is_empty() {
        state.engine.replay(&id).await?
    } else {
        state.engine.replay_changed(*params).await?
    };
    Ok(job_response(StatusCode::OK, &job, None))
}

pub(super) async fn dismiss(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let id = JobId(id);
    state.engine.store().job_dismiss(&id).await?;
    // A dismissed dead head frees its ordering key: the next job may go.
    state.engine.wake_all();
    Ok(Json(redial_api::Dismissed {
        id: id.0,
        dismissed: true,
    })
    .into_response())
}

pub(super) async fn cancel(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let job = state.engine.cancel(&JobId(id)).await?;
    Ok(job_response(StatusCode::OK, &job, None))
}
