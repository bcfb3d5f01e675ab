//! What happened on one attempt, as the policy sees it.
//!
//! Owns the vocabulary of outcomes: an HTTP response, a transport error told apart precisely, or
//! the typed result of a custom job handler. Does not own how they are produced (that is the
//! engine's executor) nor what they mean (that is `classify`).

use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The outcome of one attempt.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The server answered. A 2xx is a success; everything else is classified.
    Response(Response),
    /// No usable answer arrived.
    Transport(TransportError),
    /// A custom (non-HTTP) job handler returned a typed result.
    Handler(HandlerOutcome),
}

/// An HTTP response: the status and the headers. The body is not needed to decide and stays
/// with the engine's attempt record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Header names in any case, values as received; repeated names stay repeated.
    pub headers: Vec<(String, String)>,
}

impl Response {
    pub fn new(status: u16) -> Self {
        Response {
            status,
            headers: Vec::new(),
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The first value of `name`, compared without regard to ASCII case.
    pub fn header_value(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why no usable response arrived. Spelled in kebab-case on the command line and in JSON
/// (`read-timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransportError {
    /// The destination actively refused the TCP connection.
    ConnectionRefused,
    /// The connection was reset or closed before a response arrived.
    ConnectionReset,
    /// DNS answered that the name does not exist (NXDOMAIN).
    DnsNotFound,
    /// DNS failed in a way that may pass (SERVFAIL, timeout, no resolver).
    DnsTemporary,
    /// The TCP or TLS connection was not established in time.
    ConnectTimeout,
    /// The connection was up but the response did not come in time.
    ReadTimeout,
    /// The attempt's overall time limit ran out.
    Timeout,
    /// The TLS handshake or certificate check failed.
    Tls,
    /// The bytes received were not valid HTTP.
    MalformedResponse,
    /// The response ended before its declared length.
    TruncatedResponse,
    /// The server answered with a redirect, which Redial does not follow.
    RedirectNotFollowed,
    /// The response was larger than the configured bound.
    ResponseTooLarge,
    /// The request could not be built: bad URL, bad header, unsupported scheme.
    InvalidRequest,
    /// The destination resolved to an address the network policy refuses (private, loopback...).
    DestinationRefused,
}

impl TransportError {
    pub const ALL: [TransportError; 14] = [
        TransportError::ConnectionRefused,
        TransportError::ConnectionReset,
        TransportError::DnsNotFound,
        TransportError::DnsTemporary,
        TransportError::ConnectTimeout,
        TransportError::ReadTimeout,
        TransportError::Timeout,
        TransportError::Tls,
        TransportError::MalformedResponse,
        TransportError::TruncatedResponse,
        TransportError::RedirectNotFollowed,
        TransportError::ResponseTooLarge,
        TransportError::InvalidRequest,
        TransportError::DestinationRefused,
    ];

    /// The kebab-case name used on the command line, in JSON and in reasons.
    pub const fn as_str(self) -> &'static str {
        match self {
            TransportError::ConnectionRefused => "connection-refused",
            TransportError::ConnectionReset => "connection-reset",
            TransportError::DnsNotFound => "dns-not-found",
            TransportError::DnsTemporary => "dns-temporary",
            TransportError::ConnectTimeout => "connect-timeout",
            TransportError::ReadTimeout => "read-timeout",
            TransportError::Timeout => "timeout",
            TransportError::Tls => "tls",
            TransportError::MalformedResponse => "malformed-response",
            TransportError::TruncatedResponse => "truncated-response",
            TransportError::RedirectNotFollowed => "redirect-not-followed",
            TransportError::ResponseTooLarge => "response-too-large",
            TransportError::InvalidRequest => "invalid-request",
            TransportError::DestinationRefused => "destination-refused",
        }
    }
}

impl TransportError {
    /// A few words for reasons: `read timeout`, `DNS name not found`.
    pub const fn phrase(self) -> &'static str {
        match self {
            TransportError::ConnectionRefused => "connection refused",
            TransportError::ConnectionReset => "connection reset",
            TransportError::DnsNotFound => "DNS name not found",
            TransportError::DnsTemporary => "DNS temporary failure",
            TransportError::ConnectTimeout => "connect timeout",
            TransportError::ReadTimeout => "read timeout",
            TransportError::Timeout => "timeout",
            TransportError::Tls => "TLS failure",
            TransportError::MalformedResponse => "malformed response",
            TransportError::TruncatedResponse => "truncated response",
            TransportError::RedirectNotFollowed => "redirect not followed",
            TransportError::ResponseTooLarge => "response too large",
            TransportError::InvalidRequest => "invalid request",
            TransportError::DestinationRefused => {
                "destination refused by network policy (a loopback, private or other non-public \
                 address: --allow-private-networks or network.allow_private_networks allows it)"
            }
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a transport error name that does not exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownTransportError(pub String);

impl fmt::Display for UnknownTransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown error kind {:?}: use one of ", self.0)?;
        for (i, e) in TransportError::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(e.as_str())?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownTransportError {}

impl FromStr for TransportError {
    type Err = UnknownTransportError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TransportError::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| UnknownTransportError(s.to_owned()))
    }
}

/// What a custom job handler reports. The handler knows its own domain; the policy still applies
/// the ceilings, the deadline and the backoff.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandlerOutcome {
    Success,
    /// Worth retrying later.
    Transient {
        reason: String,
    },
    /// Retrying cannot help.
    Permanent {
        reason: String,
    },
    /// The handler cannot tell whether the work happened; retried cautiously.
    Unknown {
        reason: String,
    },
    /// Not a failure: come back at `until` (for example a quota that resets then). Costs a
    /// deferral, not an attempt.
    DeferUntil {
        until: Timestamp,
        reason: String,
    },
}
