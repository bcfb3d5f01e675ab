//! What a call can end with besides its answer: the API's refusal (its status, code and message),
//! no answer at all, or an answer that is not what the API documents.

use redial_api::ErrorCode;
use std::time::Duration;

/// A call's failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server answered with an error status.
    #[error("server answered {status} {code}: {message}")]
    Api {
        status: u16,
        /// The body's `error.code`, as written (a newer server's code reads too).
        code: String,
        message: String,
        /// How long the server asked to wait (`Retry-After`), when it said.
        retry_after: Option<Duration>,
    },
    /// No answer arrived within the call's timeout, after the configured retries.
    #[error("no answer from {url} within {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    /// The server could not be reached (refused, reset, DNS, TLS), after the configured retries.
    #[error("cannot reach the server at {url}: {detail}")]
    Connection { url: String, detail: String },
    /// A 2xx answer that is not the documented JSON.
    #[error("the answer to {what} is not what the API documents: {detail}")]
    Decode { what: String, detail: String },
    /// The client was given something it cannot use (a base URL that is not http(s), say).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// The API's code, when the server answered with one this build knows.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Api { code, .. } => ErrorCode::from_code(code),
            _ => None,
        }
    }

    /// The HTTP status, when the server answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }
}
