//! Completion callbacks: what a job asks to be told (its [`Callback`]), and the delivery a
//! finished job's callback becomes, a job of its own ([`Callback::delivery`]).
//!
//! A delivery is inserted in the same transaction as the state change that causes it (the
//! stores call [`Callback::delivery`] there, or insert the one the engine built for the
//! attempt's expected outcome), so a crash can neither lose it nor invent it. Its id is derived
//! from the job (its id and its row's `seq`, so that a job deleted and enqueued again under the
//! same id is another job), the event and the job's run (its replay count): inserting it twice
//! finds a duplicate, and a job replayed and finished again makes a new one. The id holds a `~`,
//! which no id given through the API may, so it never meets a client's job.

use super::attempt::Attempt;
use super::{HttpRequest, Job, JobId, JobState, NewJob};
use redial_policy::{DeadCategory, Timestamp};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// What a job asks to be told when it finishes, resolved at enqueue (the queue's default
/// applied, the delivery's queue and endpoint fixed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Callback {
    /// Where the delivery is POSTed.
    pub url: String,
    /// The events that make a delivery.
    pub on: Vec<CallbackEvent>,
    /// Headers the delivery carries besides its own (`content-type`, the signature's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// The queue the delivery runs in.
    pub queue: String,
    /// The delivery's endpoint: the URL's origin.
    pub endpoint: String,
}

/// A finished job's event that a callback may be for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallbackEvent {
    Completed,
    Dead,
    Cancelled,
}

impl CallbackEvent {
    pub const ALL: [CallbackEvent; 3] = [
        CallbackEvent::Completed,
        CallbackEvent::Dead,
        CallbackEvent::Cancelled,
    ];

    /// What a callback is for when it does not say: completed and dead.
    pub const DEFAULT: [CallbackEvent; 2] = [CallbackEvent::Completed, CallbackEvent::Dead];

    pub const fn as_str(self) -> &'static str {
        match self {
            CallbackEvent::Completed => "completed",
            CallbackEvent::Dead => "dead",
            CallbackEvent::Cancelled => "cancelled",
        }
    }

    /// The event of a finished state; none for the others.
    pub const fn of(state: JobState) -> Option<CallbackEvent> {
        match state {
            JobState::Completed => Some(CallbackEvent::Completed),
            JobState::Dead => Some(CallbackEvent::Dead),
            JobState::Cancelled => Some(CallbackEvent::Cancelled),
            _ => None,
        }
    }
}

impl FromStr for CallbackEvent {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CallbackEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                format!("unknown callback event {s:?}: use completed, dead or cancelled")
            })
    }
}

/// The tag every delivery carries, so that they can be listed.
pub const CALLBACK_TAG: &str = "callback";

impl Callback {
    /// The id of the delivery of `event` for `job` in its run `run` (its replay count):
    /// `callback~<event>~<seq>.<run>~<id>`. It is also the delivery's idempotency key, and so
    /// its `webhook-id` when signed: the same on every attempt of the delivery.
    pub fn delivery_id(job: &Job, event: CallbackEvent, run: u32) -> JobId {
        JobId(format!(
            "callback~{}~{}.{run}~{}",
            event.as_str(),
            job.seq,
            job.id.0
        ))
    }

    /// The job id and event a delivery's id names, if it is one.
    pub fn delivered_for(id: &JobId) -> Option<(JobId, CallbackEvent)> {
        let rest = id.0.strip_prefix("callback~")?;
        let (event, rest) = rest.split_once('~')?;
        let (_, job) = rest.split_once('~')?;
        Some((JobId(job.to_owned()), event.parse().ok()?))
    }

    /// The delivery that `job`, as it now stands, owes: none unless it finished in one of its
    /// callback's events. `last` is its last attempt (its response goes in the body), `now` when
    /// the delivery is made. A delivery never has a callback of its own, and a job of the
    /// delivery queue never makes one (no loops).
    pub fn delivery(job: &Job, last: Option<&Attempt>, now: Timestamp) -> Option<NewJob> {
        Callback::delivery_of(job, Finish::of(job), last, now)
    }

    /// The delivery `job` owes once it stands as `finish` says (the engine's expected outcome of
    /// an attempt, before it is recorded), without a copy of the job.
    pub(crate) fn delivery_of(
        job: &Job,
        finish: Finish<'_>,
        last: Option<&Attempt>,
        now: Timestamp,
    ) -> Option<NewJob> {
        let cb = job.callback.as_ref()?;
        let event = CallbackEvent::of(finish.state)?;
        if !cb.on.contains(&event) || job.queue == cb.queue {
            return None;
        }
        let id = Callback::delivery_id(job, event, job.replays);
        let body = Body {
            data: Data {
                attempts: finish.attempts,
                category: finish.category.map(|c| c.as_str()),
                created_at: job.created_at,
                deferrals: finish.deferrals,
                endpoint: &job.endpoint,
                error: last.and_then(|a| a.error.as_deref()),
                finished_at: finish.finished_at,
                group: job.group.as_deref(),
                id: &job.id.0,
                idempotency_key: job.idempotency_key.as_deref(),
                queue: &job.queue,
                reason: finish.reason,
                replays: job.replays,
                response: last.and_then(Response::of),
                runs: finish.runs,
                stalls: job.stalls,
                state: finish.state,
                tags: &job.tags,
                unknown_attempts: finish.unknown_attempts,
            },
            timestamp: finish.finished_at.unwrap_or(now),
            kind: event.kind(),
        };
        let body =
            serde_json::to_string(&body).expect("a delivery's body is plain data: it serialises");
        let mut headers = cb.headers.clone();
        headers.push(("content-type".to_owned(), "application/json".to_owned()));
        Some(NewJob {
            ordering: None,
            idempotency_key: Some(id.0.clone()),
            id,
            queue: cb.queue.clone(),
            endpoint: cb.endpoint.clone(),
            request: HttpRequest {
                method: "POST".to_owned(),
                url: cb.url.clone(),
                headers,
                body: Some(body),
                timeout_ms: None,
                credentials: None,
            },
            priority: 0,
            run_at: now,
            deadline: None,
            tags: vec![CALLBACK_TAG.to_owned()],
            policy: None,
            created_at: now,
            group: None,
            callback: None,
        })
    }
}

impl CallbackEvent {
    /// The delivery body's `type`.
    const fn kind(self) -> &'static str {
        match self {
            CallbackEvent::Completed => "job.completed",
            CallbackEvent::Dead => "job.dead",
            CallbackEvent::Cancelled => "job.cancelled",
        }
    }
}

/// What a finish changes of a job, as a delivery's body tells it: the job as stored
/// ([`Finish::of`]) or as an attempt about to be recorded will leave it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Finish<'a> {
    pub(crate) state: JobState,
    pub(crate) category: Option<DeadCategory>,
    pub(crate) finished_at: Option<Timestamp>,
    pub(crate) reason: Option<&'a str>,
    pub(crate) attempts: u32,
    pub(crate) unknown_attempts: u32,
    pub(crate) deferrals: u32,
    pub(crate) runs: u32,
}

impl<'a> Finish<'a> {
    pub(crate) fn of(job: &'a Job) -> Self {
        Finish {
            state: job.state,
            category: job.category,
            finished_at: job.finished_at,
            reason: job.last_reason.as_deref(),
            attempts: job.attempts,
            unknown_attempts: job.unknown_attempts,
            deferrals: job.deferrals,
            runs: job.runs,
        }
    }
}

/// A delivery's body. Serialised from borrowed fields (building a `serde_json::Value` first
/// cost as much as the rest of making the delivery); the fields are in alphabetical order, as
/// the `Value` map wrote them.
#[derive(Serialize)]
struct Body<'a> {
    data: Data<'a>,
    timestamp: Timestamp,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct Data<'a> {
    attempts: u32,
    category: Option<&'static str>,
    created_at: Timestamp,
    deferrals: u32,
    endpoint: &'a str,
    error: Option<&'a str>,
    finished_at: Option<Timestamp>,
    group: Option<&'a str>,
    id: &'a str,
    idempotency_key: Option<&'a str>,
    queue: &'a str,
    reason: Option<&'a str>,
    replays: u32,
    response: Option<Response<'a>>,
    runs: u32,
    stalls: u32,
    state: JobState,
    tags: &'a [String],
    unknown_attempts: u32,
}

/// The response an attempt got, as a delivery's body shows it: status, the headers that are
/// not secrets, the kept body (text, or base64 for other bytes), its content type, and whether
/// it was cut.
#[derive(Serialize)]
struct Response<'a> {
    body: Option<&'a str>,
    body_encoding: &'static str,
    content_type: Option<&'a str>,
    headers: std::collections::BTreeMap<&'a str, &'a str>,
    status: u16,
    truncated: bool,
}

impl<'a> Response<'a> {
    fn of(a: &'a Attempt) -> Option<Self> {
        let status = a.status?;
        // By name, the last of a repeated name kept, as a JSON object keeps one.
        let headers = a
            .response_headers
            .iter()
            .filter(|(_, v)| v != REDACTED)
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        let content_type = a
            .response_headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.as_str());
        Some(Response {
            body: a.response_body.as_deref(),
            body_encoding: if a.response_body_base64 {
                "base64"
            } else {
                "text"
            },
            content_type,
            headers,
            status,
            truncated: a.response_body_truncated,
        })
    }
}

/// What a redacted header value reads (the engine's redaction writes it).
pub const REDACTED: &str = "[redacted]";
