//! The types of Redial's HTTP API, shared by the server and the Rust client (`redial-client`):
//! the error codes ([`ErrorCode`], from which the OpenAPI document's enum and the other clients'
//! error types are checked) and every schema of the OpenAPI document ([`types`], generated from
//! it: `tests/types.rs` fails when they drift, and `REDIAL_BLESS=1` rewrites them).
//!
//! Serde only: no HTTP, no runtime.

pub mod types;

// The generated types, by name: written by `tests/types.rs` in redial-api.
pub use types::{
    Affected, Alert, AlertList, Attempt, BatchInput, BatchResult, BreakerState, CallbackInput,
    CallbackOn, CallbackView, CredentialsKind, DeadCategory, DeadGroup, DeadGroups,
    DeadLetterFilter, DeadPattern, DeadPatterns, Dismissed, Endpoint, EndpointBreakerHistory,
    EndpointCredentials, EndpointList, EndpointToken, Error, ErrorError, Event, EventPage,
    EventType, ExportCallback, ExportLine, ExportLineDead, ExportLineRequest, Forecast,
    ForecastFirstAtRisk, GroupLimits, HandPause, Health, Job, JobChange, JobInput, JobInputRequest,
    JobPage, JobSide, JobState, JobTemplateInput, JobTemplateInputRequest, KeyChoice, Missed,
    NotReady, Operation, OperationKind, OperationList, OperationState, OrderingKeyLine,
    OrderingKeys, OrderingOnDead, OutageReplay, PauseInput, Queue, QueueGroups, QueueGroupsGroups,
    QueueGroupsInline, QueueList, Ready, ReplayInput, ReplayPatch, ReplayPatchHeaders,
    ReplayPatchUrlPrefix, ReplayPreview, ReplayPreviewItem, RequestView, Schedule, ScheduleInput,
    ScheduleJob, ScheduleJobRequest, ScheduleList, ScheduleMissed, ScheduleRule, ScheduleRuleCron,
    ScheduleRuleEvery, ScheduleSource, Series, SeriesMinute, SeriesMinuteAttempts, Session, Stats,
    StatsEndpoints, StatsQueues, TokenFailure,
};
// End of the generated types.

/// The instant every date-time of the API is: RFC 3339 on the wire, milliseconds since the Unix
/// epoch here.
pub use redial_time::Timestamp;

/// An input's free-form field (a `serde_json::Value`) that is there, `null` included
/// (`Some(Value::Null)`: a replay's patch that clears the body); absent, the field's default,
/// `None`.
pub fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    <serde_json::Value as serde::Deserialize>::deserialize(d).map(Some)
}

/// An input's field that may be absent, null or a value (`Option<Option<T>>`: a replay's patch
/// leaves what is absent, clears what is null, sets what is given), written and read as such.
pub mod double_option {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// `Some(None)` as `null`, `Some(Some(v))` as `v` (`None` is skipped by the field).
    pub fn serialize<T: Serialize, S: Serializer>(
        v: &Option<Option<T>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match v {
            Some(inner) => inner.serialize(s),
            None => s.serialize_none(),
        }
    }

    /// Present (null or a value): `Some`; absent is the field's default, `None`.
    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(d).map(Some)
    }
}

/// The longest one `GET /v1/jobs/{id}?wait=` request may wait: the server refuses more
/// (`invalid_wait`), and the clients wait longer in several requests.
pub const MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

macro_rules! error_codes {
    ($($variant:ident = $code:literal: $doc:literal,)*) => {
        /// Every machine-readable code an error answer carries (`{"error": {"code", "message"}}`).
        /// Stable: clients match on them; a code this build does not know reads as
        /// [`ErrorCode::from_code`]'s `None`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $(#[doc = $doc] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in the order of the OpenAPI document's enum.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as the API writes it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }

            /// What the code means, for people.
            pub fn describe(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $doc,)*
                }
            }

            /// The code the API wrote, if this build knows it.
            pub fn from_code(code: &str) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    BackupInProgress = "backup_in_progress": "A backup is being made or sent on this node; one at a time: try again after Retry-After.",
    BadRequest = "bad_request": "The request is not valid HTTP or was refused before it reached a route.",
    BatchTooLarge = "batch_too_large": "A batch holds more jobs than one request may enqueue.",
    BodyTooLarge = "body_too_large": "The request's body is over the server's limit.",
    Busy = "busy": "The server is busy with long requests (bodies arriving, waits, streams); this call is refused at once: try again after Retry-After.",
    Conflict = "conflict": "A job with this id exists with a different request.",
    CrossSite = "cross_site": "A browser sent a changing request from another site.",
    EmptyBatch = "empty_batch": "A batch holds no job.",
    FilterRequired = "filter_required": "A bulk action names no filter: it would act on every job.",
    ForeignHost = "foreign_host": "The Host header names neither this server nor an allowed host.",
    HeadersTooLarge = "headers_too_large": "The request's head (its URL and headers) is over the server's limit.",
    Internal = "internal": "A server fault; the server log has the details.",
    InvalidBody = "invalid_body": "The body does not have the shape the route takes.",
    InvalidCallback = "invalid_callback": "The callback is not acceptable (its URL, events or headers; a job of the callback queue has none); the message says what to fix.",
    InvalidCategory = "invalid_category": "Not a dead-letter category.",
    InvalidCursor = "invalid_cursor": "Not a next_cursor value from a previous page.",
    InvalidDeadline = "invalid_deadline": "The deadline is not a valid time or duration.",
    InvalidEndpoint = "invalid_endpoint": "The endpoint is not valid.",
    InvalidEventKind = "invalid_event_kind": "Not a kind of event of the event log.",
    InvalidField = "invalid_field": "A field of the body has a wrong type or value.",
    InvalidGroup = "invalid_group": "The group name is not valid.",
    InvalidHeader = "invalid_header": "A request header of the job is not valid or not allowed.",
    InvalidId = "invalid_id": "The id is not valid.",
    InvalidIdempotencyKey = "invalid_idempotency_key": "The idempotency key is not valid.",
    InvalidJob = "invalid_job": "The job is not acceptable; the message says what to fix.",
    InvalidJson = "invalid_json": "The body is not valid JSON.",
    InvalidLimit = "invalid_limit": "The page limit is out of range.",
    InvalidMethod = "invalid_method": "The job's HTTP method is not valid.",
    InvalidMissed = "invalid_missed": "The schedule's rule for missed runs is not valid.",
    InvalidOrderingKey = "invalid_ordering_key": "The ordering key is not valid (1 to 256 characters of plain text, not only spaces).",
    InvalidParameter = "invalid_parameter": "A query parameter has a value the route does not take.",
    InvalidPattern = "invalid_pattern": "The reason pattern is not valid (one line of plain text, at most 1,000 characters), or is used where it cannot be (it filters dead letters).",
    InvalidPause = "invalid_pause": "The pause is not valid (its time or reason).",
    InvalidPolicy = "invalid_policy": "The retry policy is not valid.",
    InvalidRange = "invalid_range": "The time range is not valid.",
    InvalidReason = "invalid_reason": "The reason is not valid.",
    InvalidReasonText = "invalid_reason_text": "The reason text of a search is not valid (1 to 8 words in at most 1,000 characters), or is used where it cannot be (it searches dead letters).",
    InvalidSchedule = "invalid_schedule": "The schedule is not valid.",
    InvalidState = "invalid_state": "The job is not in a state that allows the action, or the state named is not one.",
    InvalidTags = "invalid_tags": "The tags are not valid.",
    InvalidTime = "invalid_time": "A time is not valid.",
    InvalidTimeout = "invalid_timeout": "The timeout is not valid.",
    InvalidUrl = "invalid_url": "The URL is not valid or is not allowed.",
    InvalidWait = "invalid_wait": "The wait is not a duration of at most 60 s.",
    JobBodyTooLarge = "job_body_too_large": "A job's request body is over the limit.",
    MethodNotAllowed = "method_not_allowed": "The route does not take that method; the Allow header lists those it takes.",
    NoRoute = "no_route": "No route has that path.",
    NotFound = "not_found": "No such job, endpoint or schedule.",
    NotSupported = "not_supported": "This server's store cannot do that.",
    ReadOnly = "read_only": "The token may read, not change.",
    RequestTimeout = "request_timeout": "The request did not arrive in time; the connection is closed.",
    ReservedQueue = "reserved_queue": "The queue carries Redial's own signed deliveries (callbacks, notifications); jobs cannot be put in it through the API.",
    ScheduleExists = "schedule_exists": "A schedule of that name exists.",
    StorageUnavailable = "storage_unavailable": "The store cannot serve now; nothing was done: try again after Retry-After.",
    TooLarge = "too_large": "The request is over a limit of the server's.",
    TooManyWaiters = "too_many_waiters": "As many requests wait for jobs as the server allows; try again after Retry-After.",
    Unauthorized = "unauthorized": "No token, or a wrong one.",
    UnknownParameter = "unknown_parameter": "A query parameter the route does not take.",
    UnknownQueue = "unknown_queue": "The queue is not configured.",
    UnsupportedMediaType = "unsupported_media_type": "The body's Content-Type is not JSON.",
    UriTooLong = "uri_too_long": "The request's URL is over the server's limit.",
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::ReplayPatch;

    /// A replay's patch tells a credentials profile removed (null, back to the endpoint's) from
    /// one left as it is (absent), both ways.
    #[test]
    fn a_patch_tells_null_from_absent() {
        let cleared = ReplayPatch {
            credentials: Some(None),
            ..ReplayPatch::default()
        };
        let named = ReplayPatch {
            credentials: Some(Some("partner".into())),
            ..ReplayPatch::default()
        };
        let cases = [
            (ReplayPatch::default(), "{}"),
            (cleared, r#"{"credentials":null}"#),
            (named, r#"{"credentials":"partner"}"#),
        ];
        for (patch, json) in cases {
            assert_eq!(serde_json::to_string(&patch).expect("writes"), json);
            let back: ReplayPatch = serde_json::from_str(json).expect("reads");
            assert_eq!(back, patch, "{json}");
        }
    }
}
