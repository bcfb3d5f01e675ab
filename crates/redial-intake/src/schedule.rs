//! A schedule as clients and the configuration file write it (`redial_api::ScheduleInput`),
//! checked into its definition.

use crate::job::new_job;
use crate::within;
use crate::Intake;
use crate::IntakeError;
use redial_api::{ErrorCode, JobInput, JobInputRequest, JobTemplateInput, Missed, ScheduleInput};
use redial_engine::{JobTemplate, MissedRule, ScheduleRule};
use redial_policy::{parse_duration, Timestamp};
use std::time::Duration;

/// Reads a schedule as sent (`POST /v1/schedules`, `PUT /v1/schedules/{id}`, a `[[schedules]]`
/// table of the configuration file). Its job is read first, so that what is wrong with it says
/// so (422 `invalid_job`), and the fields each occurrence sets are refused with why; anything
/// else is 422 `invalid_field`.
pub fn schedule_input(value: serde_json::Value) -> Result<ScheduleInput, IntakeError> {
    if let Some(job) = value.get("job") {
        if !job.is_object() {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidJob,
                "job must be an object: the job each occurrence enqueues, such as {\"request\": {\"method\": \"POST\", \"url\": \"https://...\"}}",
            ));
        }
        for field in ["id", "idempotency_key", "run_at", "deadline"] {
            if job.get(field).is_some() {
                return Err(IntakeError::unprocessable(
                    ErrorCode::InvalidJob,
                    format!("job.{field} is set by each occurrence (its id is <schedule id>@<instant>, its key derived from it): leave it out"),
                ));
            }
        }
        if let Err(e) = serde_json::from_value::<JobTemplateInput>(job.clone()) {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidJob,
                format!("job: {e}"),
            ));
        }
    }
    serde_json::from_value(value)
        .map_err(|e| IntakeError::unprocessable(ErrorCode::InvalidField, e.to_string()))
}

/// The most missed occurrences `run_all` may run at once.
const MAX_MISSED_MAX: i64 = 1000;

/// Checks a schedule as sent and turns it into its definition; `id` is the path's id, when
/// there is one (a body's id must then match it).
pub fn schedule_definition(
    intake: &Intake,
    input: ScheduleInput,
    path_id: Option<&str>,
    source: &str,
    now: Timestamp,
) -> Result<(String, redial_engine::ScheduleDefinition), IntakeError> {
    let id = schedule_id(path_id, input.id)?;
    let rule = rule(input.cron, input.every, input.timezone, now)?;
    let missed = missed(input.missed, input.missed_max)?;
    let job = template(intake, input.job, now)?;
    Ok((
        id,
        redial_engine::ScheduleDefinition {
            rule,
            missed,
            job,
            source: source.to_owned(),
        },
    ))
}

/// The schedule's id: the path's, or the body's (which must match the path's when both are).
fn schedule_id(path_id: Option<&str>, body_id: Option<String>) -> Result<String, IntakeError> {
    let id = match (path_id, body_id) {
        (Some(p), Some(b)) if p != b => {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidId,
                format!(
                    "the body's id {b:?} is not the path's {p:?}: leave it out, or make them match"
                ),
            ))
        }
        (Some(p), _) => p.to_owned(),
        (None, Some(b)) => b,
        (None, None) => {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidId,
                "id is required: a name for the schedule, such as \"nightly-report\"",
            ))
        }
    };
    redial_engine::check_schedule_id(&id)
        .map_err(|e| IntakeError::unprocessable(ErrorCode::InvalidId, e))?;
    Ok(id)
}

/// When it fires: a cron expression in a time zone (one that can still match), or an interval
/// counted from the whole second.
fn rule(
    cron: Option<String>,
    every: Option<String>,
    timezone: Option<String>,
    now: Timestamp,
) -> Result<ScheduleRule, IntakeError> {
    Ok(match (cron, every) {
        (Some(_), Some(_)) | (None, None) => {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidSchedule,
                "give cron (such as \"0 9 * * 1-5\") or every (such as \"5m\"), not both",
            ))
        }
        (Some(expr), None) => {
            let timezone = timezone.unwrap_or_else(|| "UTC".to_owned());
            let rule = redial_policy::schedule::CronRule::parse(&expr, Some(&timezone))
                .map_err(|e| IntakeError::unprocessable(ErrorCode::InvalidSchedule, e))?;
            // One that matched once but cannot again (only times a daylight-saving change
            // skips, such as 02:30 on the last Sunday of March in Europe/Berlin) would be saved
            // and never fire.
            if rule.next_after(now).is_none() {
                return Err(IntakeError::unprocessable(
                    ErrorCode::InvalidSchedule,
                    format!("cron expression {expr:?} in {timezone} matches no time from now on (times a daylight-saving change skips do not occur): it would never fire"),
                ));
            }
            ScheduleRule::Cron { expr, timezone }
        }
        (None, Some(every)) => {
            if timezone.is_some() {
                return Err(IntakeError::unprocessable(
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
                    IntakeError::unprocessable(
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
    })
}

/// What happens to occurrences missed while Redial was down.
fn missed(missed: Option<Missed>, missed_max: Option<i64>) -> Result<MissedRule, IntakeError> {
    Ok(match (missed, missed_max) {
        (Some(Missed::RunAll), max) => MissedRule::RunAll {
            max: within(
                "missed_max",
                max.unwrap_or(10),
                1..=MAX_MISSED_MAX,
                ErrorCode::InvalidMissed,
            )?,
        },
        (_, Some(_)) => {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidMissed,
                "missed_max goes with missed = \"run_all\"",
            ))
        }
        (None | Some(Missed::RunOnce), None) => MissedRule::RunOnce,
        (Some(Missed::Skip), None) => MissedRule::Skip,
        (Some(Missed::Other), None) => {
            return Err(IntakeError::unprocessable(
                ErrorCode::InvalidMissed,
                "missed must be skip, run_once or run_all",
            ))
        }
    })
}

/// The job each occurrence enqueues: a job's fields less those each occurrence sets, checked as
/// a job is (its messages saying they are about the schedule's job).
fn template(
    intake: &Intake,
    job: JobTemplateInput,
    now: Timestamp,
) -> Result<JobTemplate, IntakeError> {
    let r = job.request;
    let job = JobInput {
        queue: job.queue,
        request: JobInputRequest {
            method: r.method,
            url: r.url,
            headers: r.headers,
            body: r.body,
            timeout: r.timeout,
            credentials: r.credentials,
        },
        priority: job.priority,
        tags: job.tags,
        endpoint: job.endpoint,
        group: job.group,
        ordering_key: job.ordering_key,
        policy: job.policy,
        callback: job.callback,
        ..JobInput::default()
    };
    if job
        .tags
        .as_ref()
        .is_some_and(|t| t.len() > redial_engine::MAX_TEMPLATE_TAGS)
    {
        return Err(IntakeError::unprocessable(
            ErrorCode::InvalidTags,
            format!(
                "job: at most {} tags (each occurrence adds schedule:<id>)",
                redial_engine::MAX_TEMPLATE_TAGS
            ),
        ));
    }
    // The job's own checks, their messages saying they are about the schedule's job.
    let job = new_job(intake, job, now)
        .map_err(|mut e| {
            e.message = format!("job: {}", e.message);
            e
        })?
        .into_job();
    Ok(JobTemplate {
        queue: job.queue,
        endpoint: job.endpoint,
        request: job.request,
        priority: job.priority,
        tags: job.tags,
        policy: job.policy,
        group: job.group,
        callback: job.callback,
        ordering_key: job.ordering.map(|o| o.key),
    })
}
