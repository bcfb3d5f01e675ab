//! The Rust client of Redial's HTTP API, for programs that call a remote Redial (a Rust program
//! that runs Redial in-process uses `redial-engine` instead). Async, on reqwest. Every route of
//! the API is a method ([`ROUTES`] lists them, and a test checks the list against the OpenAPI
//! document); requests and answers are the API's types ([`redial_api`], generated from the same
//! document as the TypeScript client's); a refusal is an [`Error::Api`] with the API's code.
//! Connection errors, 429 and 503 are retried (after `Retry-After` when the server says), as the
//! TypeScript and Python clients do.
//!
//! ```no_run
//! # async fn run() -> Result<(), redial_client::Error> {
//! use redial_client::{Client, JobInput, JobInputRequest};
//! let client = Client::builder("http://127.0.0.1:8080").token("secret").build()?;
//! let job = client
//!     .enqueue(&JobInput {
//!         request: JobInputRequest {
//!             method: "POST".into(),
//!             url: "https://api.example.com/hook".into(),
//!             ..Default::default()
//!         },
//!         ..Default::default()
//!     })
//!     .await?;
//! println!("{} is {}", job.id, job.state);
//! # Ok(()) }
//! ```

// The README's two-minute start, compiled as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

mod error;
mod routes;
mod transport;

pub use error::Error;
// Every type of the API, as `redial_api` exports them.
pub use redial_api::{double_option, ErrorCode, Timestamp, MAX_WAIT};
// The generated types, by name: written by `tests/types.rs` in redial-api.
pub use redial_api::{
    Affected, Alert, AlertList, Attempt, BatchInput, BatchResult, BreakerState, CallbackInput,
    CallbackOn, CallbackView, CredentialsKind, DeadCategory, DeadGroup, DeadGroups,
    DeadLetterFilter, DeadPattern, DeadPatterns, Dismissed, Endpoint, EndpointBreakerHistory,
    EndpointCredentials, EndpointList, EndpointToken, ErrorError, Event, EventPage, EventType,
    ExportCallback, ExportLine, ExportLineDead, ExportLineRequest, Forecast, ForecastFirstAtRisk,
    GroupLimits, HandPause, Health, Job, JobChange, JobInput, JobInputRequest, JobPage, JobSide,
    JobState, JobTemplateInput, JobTemplateInputRequest, KeyChoice, Missed, NotReady, Operation,
    OperationKind, OperationList, OperationState, OrderingKeyLine, OrderingKeys, OrderingOnDead,
    OutageReplay, PauseInput, Queue, QueueGroups, QueueGroupsGroups, QueueGroupsInline, QueueList,
    Ready, ReplayInput, ReplayPatch, ReplayPatchHeaders, ReplayPatchUrlPrefix, ReplayPreview,
    ReplayPreviewItem, RequestView, Schedule, ScheduleInput, ScheduleJob, ScheduleJobRequest,
    ScheduleList, ScheduleMissed, ScheduleRule, ScheduleRuleCron, ScheduleRuleEvery,
    ScheduleSource, Series, SeriesMinute, SeriesMinuteAttempts, Session, Stats, StatsEndpoints,
    StatsQueues, TokenFailure,
};
// End of the generated types.
pub use routes::{is_finished, DeadGroupsQuery, EventsQuery, JobsQuery, PageQuery, ROUTES};

use std::time::Duration;
use transport::Transport;

/// A client of one Redial server. Cheap to clone: clones share their connections.
#[derive(Clone, Debug)]
pub struct Client {
    transport: Transport,
}

/// How to build a [`Client`]: the server's base URL, a token, a per-call timeout (30 s by
/// default) and how many times to retry what is safe to retry (3 by default).
#[derive(Debug)]
pub struct ClientBuilder {
    base: String,
    token: Option<String>,
    timeout: Duration,
    max_retries: u32,
}

impl ClientBuilder {
    /// The bearer token the server asks for (none by default).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into()).filter(|t: &String| !t.is_empty());
        self
    }

    /// The longest one call may take, retries apart (30 s by default; zero for none).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Retries of connection errors, 429 and 503 per call (3 by default; 0 for none).
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    pub fn build(self) -> Result<Client, Error> {
        let base = base_url(&self.base)?;
        // A call's whole time is bounded per call (`timeout`); a backup's, which has none, by
        // how long one wait for more of it may take.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(600))
            .no_proxy()
            .build()
            .map_err(|e| Error::Invalid(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client {
            transport: Transport {
                http,
                base,
                token: self.token,
                timeout: self.timeout,
                max_retries: self.max_retries,
            },
        })
    }
}

impl Client {
    /// A client of the server at `base` (`http://host:port`; without a scheme, `http://`).
    pub fn builder(base: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            base: base.into(),
            token: None,
            timeout: Duration::from_secs(30),
            max_retries: 3,
        }
    }

    /// A client of the server `REDIAL_SERVER` names (`http://127.0.0.1:8080` when unset), with
    /// the token in `REDIAL_TOKEN` (if any), as the CLI and the other clients read them.
    pub fn from_env() -> Result<Client, Error> {
        let base = std::env::var("REDIAL_SERVER")
            .ok()
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| "http://127.0.0.1:8080".to_owned());
        let mut builder = Client::builder(base);
        if let Ok(token) = std::env::var("REDIAL_TOKEN") {
            builder = builder.token(token);
        }
        builder.build()
    }

    /// The server's base URL, as the client uses it.
    pub fn base(&self) -> &str {
        self.transport.base.as_str().trim_end_matches('/')
    }
}

/// The base URL from what a person typed: `localhost:8080` means `http://localhost:8080`.
fn base_url(given: &str) -> Result<url::Url, Error> {
    let given = given.trim().trim_end_matches('/');
    let base = if given.contains("://") {
        given.to_owned()
    } else {
        format!("http://{given}")
    };
    match url::Url::parse(&base) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(u),
        Ok(u) => Err(Error::Invalid(format!(
            "{given:?} is not an http:// or https:// address of a server (scheme {:?})",
            u.scheme()
        ))),
        Err(e) => Err(Error::Invalid(format!(
            "{given:?} is not an address such as http://127.0.0.1:8080: {e}"
        ))),
    }
}
