//! One exchange with the server: the bearer token, JSON bodies, the per-call timeout, retries of
//! connection errors, 429 and 503 (after `Retry-After` when given, else a jittered backoff from
//! 200 ms to 5 s), as the TypeScript and Python clients do, and error answers read into
//! [`Error::Api`].

use crate::Error;
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use std::time::Duration;

const BASE_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

#[derive(Clone, Debug)]
pub(crate) struct Transport {
    pub http: reqwest::Client,
    pub base: url::Url,
    pub token: Option<String>,
    pub timeout: Duration,
    pub max_retries: u32,
}

/// A call: its method, path segments (each percent-encoded), query and JSON body.
#[derive(Debug)]
pub(crate) struct Call {
    pub method: Method,
    pub path: Vec<String>,
    pub query: Vec<(&'static str, String)>,
    pub body: Option<String>,
}

impl Call {
    pub fn new(method: Method, path: &[&str]) -> Self {
        Call {
            method,
            path: path.iter().map(|s| (*s).to_owned()).collect(),
            query: Vec::new(),
            body: None,
        }
    }

    pub fn query(mut self, key: &'static str, value: Option<impl ToString>) -> Self {
        if let Some(v) = value {
            self.query.push((key, v.to_string()));
        }
        self
    }

    pub fn json(mut self, body: &impl serde::Serialize) -> Result<Self, Error> {
        let text = serde_json::to_string(body)
            .map_err(|e| Error::Invalid(format!("the request body cannot be encoded: {e}")))?;
        self.body = Some(text);
        Ok(self)
    }
}

impl Transport {
    pub fn url(&self, call: &Call) -> url::Url {
        let mut url = self.base.clone();
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty();
            segments.extend(&call.path);
        }
        if !call.query.is_empty() {
            url.query_pairs_mut().extend_pairs(&call.query);
        }
        url
    }

    /// Sends `call`, retrying what is safe to retry; the response of a 2xx answer.
    pub async fn send(
        &self,
        call: &Call,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, Error> {
        let url = self.url(call);
        let mut attempt = 0;
        loop {
            let retries_left = attempt < self.max_retries;
            let mut req = self
                .http
                .request(call.method.clone(), url.clone())
                .header("accept", "application/json");
            if let Some(timeout) = timeout.or(Some(self.timeout)).filter(|t| !t.is_zero()) {
                req = req.timeout(timeout);
            }
            if let Some(t) = &self.token {
                req = req.bearer_auth(t);
            }
            if let Some(b) = &call.body {
                req = req
                    .header("content-type", "application/json")
                    .body(b.clone());
            }
            let resp = match req.send().await {
                Ok(resp) => resp,
                Err(_) if retries_left => {
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                    continue;
                }
                Err(e) if e.is_timeout() => {
                    return Err(Error::Timeout {
                        url: self.base.to_string(),
                        timeout: timeout.unwrap_or(self.timeout),
                    })
                }
                Err(e) => {
                    return Err(Error::Connection {
                        url: self.base.to_string(),
                        detail: describe(&e),
                    })
                }
            };
            let status = resp.status();
            if status.is_success() {
                return Ok(resp);
            }
            let retry_after = retry_after(&resp);
            if matches!(
                status,
                StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
            ) && retries_left
            {
                tokio::time::sleep(retry_after.unwrap_or_else(|| backoff(attempt))).await;
                attempt += 1;
                continue;
            }
            return Err(api_error(resp, retry_after).await);
        }
    }

    /// Sends `call` and reads its JSON answer as `T`.
    pub async fn json<T: DeserializeOwned>(&self, call: Call) -> Result<T, Error> {
        self.json_within(call, None).await
    }

    /// [`Transport::json`], with its own timeout for the call (`None`: the client's).
    pub async fn json_within<T: DeserializeOwned>(
        &self,
        call: Call,
        timeout: Option<Duration>,
    ) -> Result<T, Error> {
        let resp = self.send(&call, timeout).await?;
        let what = format!("{} /{}", call.method, call.path.join("/"));
        let bytes = resp.bytes().await.map_err(|e| Error::Decode {
            what: what.clone(),
            detail: describe(&e),
        })?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
            what,
            detail: e.to_string(),
        })
    }
}

/// A reqwest error with its causes, which say what actually went wrong (refused, DNS...).
fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn retry_after(resp: &reqwest::Response) -> Option<Duration> {
    let value = resp.headers().get("retry-after")?.to_str().ok()?.trim();
    value.parse::<u64>().ok().map(Duration::from_secs)
}

async fn api_error(resp: reqwest::Response, retry_after: Option<Duration>) -> Error {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let body: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let code = body["error"]["code"].as_str().unwrap_or("error").to_owned();
    let message = match body["error"]["message"].as_str() {
        Some(m) => m.to_owned(),
        None if text.is_empty() => format!("HTTP {status}"),
        None => text,
    };
    Error::Api {
        status,
        code,
        message,
        retry_after,
    }
}

/// Full jitter between half the ceiling and the ceiling, the ceiling doubling from 200 ms to 5 s.
fn backoff(attempt: u32) -> Duration {
    let ceiling = BASE_BACKOFF
        .saturating_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
        .min(MAX_BACKOFF);
    let half = ceiling / 2;
    half + half.mul_f64(jitter())
}

/// A number in [0, 1) that differs between calls and processes: enough to spread retries.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}
