//! Dead letters by filter: bulk replay (with changes, or a dry run first) and dismiss, the
//! operations they start and their progress, and export.

use super::ApiResult;
use crate::replay;
use crate::replay::{Changes, Plan};
use crate::{input, view, ApiError, AppState, ErrorCode};
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use redial_engine::BulkKind;
use redial_store::{JobFilter, JobListParams, JobPages, StoreError};

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
    let mut input: redial_api::DeadLetterFilter = input::parse_optional(body)?;
    let wait = input.wait.take().unwrap_or(true);
    let (changes, dry_run) = Changes::of(redial_api::ReplayInput {
        patch: input.patch.take(),
        key: input.key.take(),
        dry_run: input.dry_run.take(),
    })?;
    // One empty request (a stray click, a page the user opened) must not reach every dead
    // letter: that takes saying so.
    if input::filter_is_empty(&input) && input.all != Some(true) {
        return Err(ApiError::unprocessable(
            ErrorCode::FilterRequired,
            "a bulk action with no filter would act on every dead letter: send {\"all\": true} to mean that, or filter by queue, category, endpoint, since, until or pattern",
        ));
    }
    changes.check(state)?;
    let (filter, pattern) = input::filter_of(input, state)?;
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
    Ok(match bulk_answer(state, kind, filter, wait).await? {
        BulkAnswer::Started(op) => (StatusCode::ACCEPTED, Json(op)).into_response(),
        BulkAnswer::Done(done) => Json(redial_api::Affected {
            affected: done.affected,
            operation: Some(done.operation),
            state: Some(redial_api::OperationState::parse(&done.state)),
            matched: None,
            skipped: None,
        })
        .into_response(),
    })
}

/// What a bulk operation answers: the operation when it is not waited for, or what it did.
pub(super) enum BulkAnswer {
    Started(redial_api::Operation),
    Done(BulkDone),
}

/// A bulk operation waited for: the jobs it acted on, its id, its end state.
pub(super) struct BulkDone {
    pub affected: i64,
    pub operation: String,
    pub state: String,
}

/// [`bulk_operation`]'s answer, before it is sent.
pub(super) async fn bulk_answer(
    state: &AppState,
    kind: BulkKind,
    filter: JobFilter,
    wait: bool,
) -> Result<BulkAnswer, ApiError> {
    let op = state.engine.bulk_start(kind, filter).await?;
    if !wait {
        return Ok(BulkAnswer::Started(view::operation(&op)));
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
    Ok(BulkAnswer::Done(BulkDone {
        affected: count(op.done),
        operation: op.id,
        state: op.state.as_str().to_owned(),
    }))
}

/// A count as the document types it.
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
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
        return Ok(Json(redial_api::ReplayPreview {
            dry_run: true,
            matched: count(matched),
            affected: count(matched - skipped),
            skipped: count(skipped),
            preview: items,
        })
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
    Ok(Json(redial_api::Affected {
        affected: count(affected),
        matched: Some(count(matched)),
        skipped: Some(count(skipped)),
        operation: None,
        state: None,
    })
    .into_response())
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
    let input: redial_api::DeadLetterFilter = input::parse_optional(body)?;
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
    let (filter, pattern) = input::filter_of(input, &state)?;
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
fn export_line(
    job: &redial_store::Job,
    attempts: &[redial_store::Attempt],
) -> redial_api::ExportLine {
    let pairs = |h: &[(String, String)]| -> Vec<Vec<String>> {
        h.iter().map(|(n, v)| vec![n.clone(), v.clone()]).collect()
    };
    redial_api::ExportLine {
        id: job.id.0.clone(),
        queue: job.queue.clone(),
        endpoint: job.endpoint.clone(),
        request: redial_api::ExportLineRequest {
            method: job.request.method.clone(),
            url: job.request.url.clone(),
            headers: pairs(&job.request.headers),
            body: job.request.body.clone(),
            timeout: job.request.timeout_ms.map(|ms| format!("{ms}ms")),
            credentials: job.request.credentials.clone(),
        },
        idempotency_key: job.idempotency_key.clone(),
        priority: i64::from(job.priority),
        tags: job.tags.clone(),
        group: job.group.clone(),
        policy: job
            .policy
            .as_ref()
            .and_then(|p| serde_json::to_value(p).ok())
            .unwrap_or_default(),
        callback: job.callback.as_ref().map(|c| redial_api::ExportCallback {
            url: c.url.clone(),
            on: c
                .on
                .iter()
                .map(|e| redial_api::CallbackOn::parse(e.as_str()))
                .collect(),
            headers: pairs(&c.headers),
        }),
        dead: redial_api::ExportLineDead {
            category: job
                .category
                .map(|c| redial_api::DeadCategory::parse(c.as_str())),
            reason: job.last_reason.clone(),
            created_at: job.created_at,
            finished_at: job.finished_at,
            deadline: job.deadline,
            replays: i64::from(job.replays),
            runs: i64::from(job.runs),
            attempts: attempts.iter().map(view::attempt).collect(),
        },
    }
}

/// This node's bulk operations, newest first.
pub(super) async fn operations(State(state): State<AppState>) -> ApiResult {
    Ok(Json(redial_api::OperationList {
        operations: state
            .engine
            .operations()
            .iter()
            .map(view::operation)
            .collect(),
    })
    .into_response())
}

pub(super) async fn operation(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult {
    let op = state
        .engine
        .operation(&id)
        .ok_or_else(|| no_operation(&id))?;
    Ok(Json(view::operation(&op)).into_response())
}

/// Stops a running operation before its next chunk; the chunk under way commits.
pub(super) async fn operation_cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult {
    match state.engine.operation_cancel(&id) {
        Ok(op) => Ok(Json(view::operation(&op)).into_response()),
        Err(redial_engine::CancelError::NotFound) => Err(no_operation(&id)),
        Err(redial_engine::CancelError::Finished(s)) => Err(ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::InvalidState,
            format!(
                "operation {id} has finished ({}): nothing to cancel",
                s.as_str()
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
