//! Jobs: enqueue (one, a batch), show, list, replay, dismiss, cancel; dead letters by filter
//! and by group; the session.

use super::{caller_trace, conflict, job_response, join_trace, ApiResult};
use crate::input::{BatchInput, FilterInput, JobInput};
use crate::replay;
use crate::replay::{Changes, Plan, ReplayInput};
use crate::{auth, input, view, ApiError, AppState, ErrorCode};
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use redial_engine::BulkKind;
use redial_store::JobPages;
use redial_store::{InsertOutcome, JobFilter, JobId, JobListParams, StoreError};
use serde_json::json;
use std::collections::HashMap;

pub(super) async fn enqueue(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let input: JobInput = input::parse_json(body)?;
    let now = state.engine.clock().now();
    let mut job = input::new_job(&state, input, now)?;
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
    let batch: BatchInput = input::parse_json(body)?;
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
    for (i, value) in batch.jobs.into_iter().enumerate() {
        let parsed = serde_json::from_value::<JobInput>(value).map_err(input::json_error);
        let mut job = parsed
            .and_then(|j| input::new_job(&state, j, now))
            .map_err(|mut e| {
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
    Ok((
        status,
        Json(
            json!({ "inserted": inserted, "deduplicated": views.len() - inserted, "jobs": views }),
        ),
    )
        .into_response())
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
    v.attempt_log = Some(&attempts);
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
                input::check_queue(state, &v)?;
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
    Ok(Json(json!({ "groups": groups, "total": total })).into_response())
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
    let count = patterns.len();
    patterns.truncate(limit.unwrap_or(100) as usize);
    Ok(Json(json!({ "patterns": patterns, "count": count, "total": total })).into_response())
}

/// What the caller may do: whether it may only look (the read-only token, or a browser when the
/// dashboard is read-only).
pub(super) async fn session(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let read_only = auth::looks_only(&state, &headers);
    Json(json!({
        "read_only": read_only,
        "token_required": state.config.token.is_some(),
    }))
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
                input::check_queue(&state, &v)?;
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
    Ok(
        Json(json!({ "jobs": jobs, "next_cursor": page.next.map(|n| n.to_string()) }))
            .into_response(),
    )
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
    let input: ReplayInput = match body {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) || b.trim_ascii() == b"null" => {
            ReplayInput::default()
        }
        other => input::parse_json(other)?,
    };
    let (changes, dry_run) = input.into_changes();
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
        return Ok(Json(json!({
            "dry_run": true, "matched": 1, "affected": 1, "skipped": 0, "preview": [item],
        }))
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
    Ok(Json(json!({ "id": id, "dismissed": true })).into_response())
}

pub(super) async fn cancel(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let job = state.engine.cancel(&JobId(id)).await?;
    Ok(job_response(StatusCode::OK, &job, None))
}

/// A bulk action as asked: its filter, the changes (and whether it is a dry run) a replay
/// carries, and whether the answer waits for it to finish.
pub(super) struct Bulk {
    filter: JobFilter,
    changes: Changes,
    dry_run: bool,
    wait: bool,
}

pub(super) async fn bulk_filter(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Bulk, ApiError> {
    let mut input: FilterInput = match body {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => FilterInput::default(),
        other => input::parse_json(other)?,
    };
    let wait = input.wait.take().unwrap_or(true);
    let extras = ReplayInput {
        patch: input.patch.take(),
        key: input.key.take(),
        dry_run: input.dry_run.take(),
    };
    let (changes, dry_run) = extras.into_changes();
    // One empty request (a stray click, a page the user opened) must not reach every dead
    // letter: that takes saying so.
    if input.is_empty() && input.all != Some(true) {
        return Err(ApiError::unprocessable(
            ErrorCode::FilterRequired,
            "a bulk action with no filter would act on every dead letter: send {\"all\": true} to mean that, or filter by queue, category, endpoint, since, until or pattern",
        ));
    }
    changes.check(state)?;
    let (filter, pattern) = input.into_filter(state)?;
    let filter = input::with_pattern(state, filter, pattern).await?;
    Ok(Bulk {
        filter,
        changes,
        dry_run,
        wait,
    })
}

pub(super) async fn bulk_replay(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let b = bulk_filter(&state, body).await?;
    if b.changes.is_none() && !b.dry_run {
        return bulk_operation(&state, BulkKind::Replay, b.filter, b.wait).await;
    }
    if !b.wait {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            "wait: false is for a replay without changes or a dismiss (a replay with changes answers when it is done)",
        ));
    }
    replay_changed_all(&state, b.filter, &b.changes, b.dry_run).await
}

/// A bulk replay or dismiss as an operation, a chunk at a time: answered once it is done
/// (`affected`, and the operation's id and end state), or at once with the operation (202).
async fn bulk_operation(
    state: &AppState,
    kind: BulkKind,
    filter: JobFilter,
    wait: bool,
) -> ApiResult {
    let (status, v) = bulk_answer(state, kind, filter, wait).await?;
    Ok((status, Json(v)).into_response())
}

/// [`bulk_operation`]'s answer, before it is sent.
pub(super) async fn bulk_answer(
    state: &AppState,
    kind: BulkKind,
    filter: JobFilter,
    wait: bool,
) -> Result<(StatusCode, serde_json::Value), ApiError> {
    let op = state.engine.bulk_start(kind, filter).await?;
    if !wait {
        let v = serde_json::to_value(&op)
            .map_err(|e| ApiError::internal("encoding an operation", e))?;
        return Ok((StatusCode::ACCEPTED, v));
    }
    let op = state.engine.operation_wait(&op.id).await.unwrap_or(op);
    if op.state == redial_engine::OperationState::Failed {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::StorageUnavailable,
            format!(
                "the store failed after {} of {} dead letters (each was acted on or left as it was; the server log says why): run the same request again for the rest",
                op.done, op.total
            ),
        ));
    }
    Ok((
        StatusCode::OK,
        json!({ "affected": op.done, "operation": op.id, "state": op.state }),
    ))
}

/// The dead letters a page of the bulk replay with changes reads at a time.
const CHANGE_PAGE: u32 = 500;
/// The jobs a dry run shows.
const PREVIEWS: usize = 5;

/// A bulk replay with changes, job by job, each its own transaction. First every matching job's
/// change is worked out and checked: if any would not pass as an enqueue, nothing is replayed
/// and the answer names it. A dry run stops there and shows the first few. Then each job is
/// worked out again and replayed, unless it changed in between (it is counted as skipped, as
/// are the jobs the patch is not for). A failure midway leaves each job replayed or untouched,
/// and running the same request again replays the rest.
async fn replay_changed_all(
    state: &AppState,
    filter: JobFilter,
    changes: &Changes,
    dry_run: bool,
) -> ApiResult {
    let now = state.engine.clock().now();
    let store = state.engine.store();
    let mut matched = 0u64;
    let mut skipped = 0u64;
    let mut previews = Vec::new();
    let mut pages = JobPages::new(&**store, filter.clone(), CHANGE_PAGE);
    while let Some(jobs) = pages.next().await? {
        for job in &jobs {
            matched += 1;
            match replay::plan(state, job, changes, now)? {
                Plan::Skip(_) => skipped += 1,
                Plan::Change(p) if previews.len() < PREVIEWS => previews.push(p),
                Plan::Change(_) => {}
            }
        }
    }
    if dry_run {
        let items: Vec<_> = previews.iter().map(|p| replay::preview(p)).collect();
        return Ok(Json(json!({
            "dry_run": true, "matched": matched, "affected": matched - skipped,
            "skipped": skipped, "preview": items,
        }))
        .into_response());
    }
    let (mut affected, mut skipped, mut matched) = (0u64, 0u64, 0u64);
    let mut pages = JobPages::new(&**store, filter, CHANGE_PAGE);
    while let Some(jobs) = pages.next().await? {
        for job in &jobs {
            matched += 1;
            let params = match replay::plan(state, job, changes, now) {
                Ok(Plan::Change(p)) => p,
                // Not for this job, or no longer passing since the check (it changed).
                Ok(Plan::Skip(_)) | Err(_) => {
                    skipped += 1;
                    continue;
                }
            };
            let done = if params.change.changed.is_empty() {
                state.engine.replay(&job.id).await
            } else {
                state.engine.replay_changed(*params).await
            };
            match done {
                Ok(_) => affected += 1,
                Err(redial_store::StoreError::Changed(_))
                | Err(redial_store::StoreError::InvalidState { .. })
                | Err(redial_store::StoreError::NotFound(_)) => skipped += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(
        Json(json!({ "affected": affected, "matched": matched, "skipped": skipped }))
            .into_response(),
    )
}

pub(super) async fn bulk_dismiss(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let b = bulk_filter(&state, body).await?;
    if !b.changes.is_none() || b.dry_run {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            "a dismiss takes a filter only: patch, key and dry_run are a replay's",
        ));
    }
    bulk_operation(&state, BulkKind::Dismiss, b.filter, b.wait).await
}

/// Every dead letter the filter matches (an empty body: every one), one JSON object a line:
/// the job as `POST /v1/jobs` takes it, with its request as sent (secrets included: this is a
/// POST, so a read-only token cannot), and under `dead` what became of it (category, reason,
/// times, counts and attempts). `redial enqueue --file` takes the lines back.
pub(super) async fn export(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let input: FilterInput = match body {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => FilterInput::default(),
        other => input::parse_json(other)?,
    };
    if input.patch.is_some()
        || input.key.is_some()
        || input.dry_run.is_some()
        || input.wait.is_some()
    {
        return Err(ApiError::unprocessable(
            ErrorCode::InvalidField,
            "an export takes a filter only: patch, key, dry_run and wait are a bulk action's",
        ));
    }
    let (filter, pattern) = input.into_filter(&state)?;
    let filter = input::with_pattern(&state, filter, pattern).await?;
    let store = state.engine.store().clone();
    let lines = futures_util::stream::unfold(Some(None), move |after: Option<Option<i64>>| {
        let store = store.clone();
        let filter = filter.clone();
        async move {
            let after = after?;
            let failed = |e: StoreError| {
                tracing::error!(error = %e, "export stopped");
                Some((Err(std::io::Error::other("the store failed")), None))
            };
            let page = match store
                .job_list(JobListParams {
                    filter,
                    after,
                    limit: EXPORT_PAGE,
                })
                .await
            {
                Ok(page) => page,
                Err(e) => return failed(e),
            };
            let mut out = Vec::new();
            for job in &page.jobs {
                let attempts = match store.job_get(&job.id).await {
                    Ok(Some((_, attempts))) => attempts,
                    // Replayed or dismissed since the page was read.
                    Ok(None) => continue,
                    Err(e) => return failed(e),
                };
                if let Err(e) = serde_json::to_writer(&mut out, &export_line(job, &attempts)) {
                    return failed(StoreError::Backend(e.to_string()));
                }
                out.push(b'\n');
            }
            Some((Ok(Bytes::from(out)), page.next.map(Some)))
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .header(header::CACHE_CONTROL, "no-store")
        .body(Body::from_stream(lines))
        .map_err(|e| ApiError::internal("building the export", e))
}

/// Dead letters an export reads at a time.
const EXPORT_PAGE: u32 = 200;

/// One exported dead letter: the job as an enqueue takes it, and what became of it.
fn export_line(job: &redial_store::Job, attempts: &[redial_store::Attempt]) -> serde_json::Value {
    json!({
        "id": job.id.0,
        "queue": job.queue,
        "endpoint": job.endpoint,
        "request": {
            "method": job.request.method,
            "url": job.request.url,
            "headers": job.request.headers,
            "body": job.request.body,
            "timeout": job.request.timeout_ms.map(|ms| format!("{ms}ms")),
        },
        "idempotency_key": job.idempotency_key,
        "priority": job.priority,
        "tags": job.tags,
        "group": job.group,
        "policy": job.policy,
        "callback": job.callback.as_ref().map(|c| json!({ "url": c.url, "on": c.on, "headers": c.headers })),
        "dead": {
            "category": job.category,
            "reason": job.last_reason,
            "created_at": job.created_at,
            "finished_at": job.finished_at,
            "deadline": job.deadline,
            "replays": job.replays,
            "runs": job.runs,
            "attempts": attempts,
        },
    })
}

/// This node's bulk operations, newest first./// This node's bulk operations, newest first.
pub(super) async fn operations(State(state): State<AppState>) -> ApiResult {
    Ok(Json(json!({ "operations": state.engine.operations() })).into_response())
}

pub(super) async fn operation(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let op = state
        .engine
        .operation(&id)
        .ok_or_else(|| no_operation(&id))?;
    Ok(Json(op).into_response())
}

/// Stops a running operation before its next chunk; the chunk under way commits.
pub(super) async fn operation_cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult {
    match state.engine.operation_cancel(&id) {
        Ok(op) => Ok(Json(op).into_response()),
        Err(redial_engine::CancelError::NotFound) => Err(no_operation(&id)),
        Err(redial_engine::CancelError::Finished(s)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::InvalidState,
            format!(
                "operation {id} has finished ({}): nothing to cancel",
                json!(s).as_str().unwrap_or("finished")
            ),
        )),
    }
}

fn no_operation(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        ErrorCode::NotFound,
        format!("operation {id} not found on this node (operations live in the process that runs them; a restart forgets them)"),
    )
}
