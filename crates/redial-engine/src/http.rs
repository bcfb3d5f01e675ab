//! The built-in handler: send the job's HTTP request and report the outcome precisely.
//!
//! Connection pooling (one client per engine), a per-job timeout, no redirects (a 3xx is an
//! outcome), response bodies read up to a bound, the idempotency key on every attempt, and
//! destinations checked against the network policy after resolution.

use crate::credentials::{Auth, EndpointCredentials, OAuth2, TokenFailure};
use crate::handler::{AttemptOutput, Handler};
use crate::net::{is_public, GuardedResolver, ResolveError};
use async_trait::async_trait;
use redial_policy::{Outcome, Response, TransportError};
use redial_store::Job;
use std::error::Error as StdError;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

/// How the HTTP executor behaves.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// Call loopback, private, link-local... addresses. Off by default; tests turn it on.
    pub allow_private_networks: bool,
    /// The time limit of an attempt when the job gives none.
    pub default_timeout: Duration,
    pub connect_timeout: Duration,
    /// How much of a response body is read and kept.
    pub max_body_bytes: usize,
    /// The header that carries the idempotency key.
    pub idempotency_header: String,
    /// The methods that get the idempotency key (upper case). POST and PATCH by default: the
    /// others are idempotent by definition.
    pub idempotency_methods: Vec<String>,
    pub user_agent: String,
    /// Which deliveries carry Standard Webhooks signatures, with which secrets.
    pub signing: crate::signing::Signing,
    /// What requests to each endpoint carry that their jobs do not (`credentials.rs`).
    pub credentials: crate::credentials::Credentials,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            allow_private_networks: false,
            default_timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_body_bytes: 4096,
            idempotency_header: "Idempotency-Key".into(),
            idempotency_methods: vec!["POST".into(), "PATCH".into()],
            user_agent: concat!("redial/", env!("CARGO_PKG_VERSION")).into(),
            signing: crate::signing::Signing::default(),
            credentials: crate::credentials::Credentials::default(),
        }
    }
}

/// The HTTP client as every request is sent: no redirects, no proxy, the network policy
/// checked after resolution.
fn client_builder(config: &HttpConfig) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(config.connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .user_agent(config.user_agent.clone())
        .dns_resolver(Arc::new(GuardedResolver {
            allow_private: config.allow_private_networks,
        }))
}

/// The HTTP executor. Cheap to clone; clones share the connection pool.
#[derive(Clone, Debug)]
pub struct HttpExecutor {
    client: reqwest::Client,
    config: Arc<HttpConfig>,
}

impl HttpExecutor {
    pub fn new(config: HttpConfig) -> Result<Self, reqwest::Error> {
        let client = client_builder(&config).build()?;
        Ok(HttpExecutor {
            client,
            config: Arc::new(config),
        })
    }

    /// The client for `job`: an endpoint with a client certificate has one of its own
    /// (`credentials::Mtls`), every other shares the executor's pool.
    fn client_for(
        &self,
        credentials: Option<&EndpointCredentials>,
    ) -> Result<reqwest::Client, String> {
        match credentials.and_then(|c| c.tls()) {
            Some(m) => m.client(|| client_builder(&self.config)),
            None => Ok(self.client.clone()),
        }
    }

    /// Whether requests with `method` get the job's idempotency key.
    fn wants_key(&self, method: &str) -> bool {
        self.config
            .idempotency_methods
            .iter()
            .any(|m| m.eq_ignore_ascii_case(method))
    }

    /// Whether the job's own headers already carry the idempotency header.
    fn has_key_header(&self, job: &Job) -> bool {
        job.request
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case(&self.config.idempotency_header))
    }

    fn refused(detail: String) -> AttemptOutput {
        AttemptOutput {
            error_detail: Some(detail),
            ..AttemptOutput::from_outcome(Outcome::Transport(TransportError::InvalidRequest))
        }
    }
}

#[async_trait]
impl Handler for HttpExecutor {
    /// The key goes out with the methods configured for it (POST and PATCH by default), or the
    /// job set the header itself. A key that is never sent makes nothing safe to repeat.
    fn carries_idempotency_key(&self, job: &Job) -> bool {
        self.has_key_header(job)
            || (job.idempotency_key.is_some() && self.wants_key(&job.request.method))
    }

    async fn run(&self, job: &Job) -> AttemptOutput {
        let req = &job.request;
        let Ok(method) = reqwest::Method::from_bytes(req.method.as_bytes()) else {
            return Self::refused(format!("invalid method {:?}", req.method));
        };
        let url = match url::Url::parse(&req.url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => u,
            Ok(u) => return Self::refused(format!("unsupported scheme {:?}", u.scheme())),
            Err(e) => return Self::refused(format!("invalid URL: {e}")),
        };
        // IP literals skip the resolver, so they are checked here.
        if let Some(ip) = url
            .host_str()
            .and_then(|h| h.trim_matches(['[', ']']).parse::<IpAddr>().ok())
        {
            if !self.config.allow_private_networks && !is_public(ip) {
                return AttemptOutput {
                    error_detail: Some(format!(
                        "destination {ip} is not a public address; allow private networks to call it"
                    )),
                    ..AttemptOutput::from_outcome(Outcome::Transport(TransportError::DestinationRefused))
                };
            }
        }
        let credentials = match self
            .config
            .credentials
            .for_request(&job.endpoint, req.credentials.as_deref())
        {
            Ok(c) => c,
            Err(e) => return Self::refused(e),
        };
        let client = match self.client_for(credentials.map(|c| &**c)) {
            Ok(c) => c,
            Err(e) => return Self::refused(format!("the credentials of {}: {e}", job.endpoint)),
        };
        let mut builder = client.request(method.clone(), url.clone()).timeout(
            req.timeout_ms
                .map_or(self.config.default_timeout, Duration::from_millis),
        );
        let has_key_header = self.has_key_header(job);
        let signing = self.config.signing.secrets(&job.queue, &job.endpoint);
        for (name, value) in &req.headers {
            // A signed delivery's webhook-* headers are the signature's own.
            if signing.is_some()
                && SIGNATURE_HEADERS
                    .iter()
                    .any(|h| name.eq_ignore_ascii_case(h))
            {
                continue;
            }
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(secrets) = signing {
            let id = job.idempotency_key.as_deref().unwrap_or(job.id.0.as_str());
            let timestamp = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
            let body = req.body.as_deref().unwrap_or("").as_bytes();
            builder = builder
                .header("webhook-id", id)
                .header("webhook-timestamp", timestamp.to_string())
                .header(
                    "webhook-signature",
                    crate::signing::signature(secrets, id, timestamp, body),
                );
        }
        if let Some(key) = &job.idempotency_key {
            if self.wants_key(&req.method) && !has_key_header {
                builder = builder.header(self.config.idempotency_header.as_str(), key.as_str());
            }
        }
        if let Some(body) = &req.body {
            builder = builder.body(body.clone());
        }
        // The endpoint's header credentials, unless the job carries its own Authorization and
        // the endpoint allows that (intake refuses such a job otherwise).
        let header_auth = credentials
            .filter(|c| !(c.allow_job_credentials && carries_authorization(&req.headers)))
            .map(|c| &c.auth);
        let request = match builder.build() {
            Ok(r) => r,
            Err(e) => return Self::refused(format!("invalid request: {}", redacted_chain(&e))),
        };
        let mut out = self
            .send_as(&client, request, header_auth, &job.endpoint)
            .await;
        // A TLS failure's reason says what the server refused (`tls_failure.rs`).
        let limit = self.config.connect_timeout.min(Duration::from_secs(5));
        let allow = self.config.allow_private_networks;
        let creds = credentials.map(|c| &**c);
        crate::tls_failure::explain(&mut out, &url, creds, &job.endpoint, allow, limit).await;
        out
    }
}

impl HttpExecutor {
    /// Sends `request` with the endpoint's credentials (`auth`: none, or those the job does not
    /// bring itself) on `client` (the endpoint's own for a client certificate).
    async fn send_as(
        &self,
        client: &reqwest::Client,
        mut request: reqwest::Request,
        auth: Option<&Auth>,
        endpoint: &str,
    ) -> AttemptOutput {
        match auth {
            Some(Auth::OAuth2(o)) => self.send_with_token(client, o, request).await,
            Some(Auth::Mtls(_)) | None => self.send(client, request).await,
            Some(auth) => {
                if let Err(e) = set_static_auth(&mut request, auth) {
                    return Self::refused(format!("the credentials of {endpoint}: {e}"));
                }
                self.send(client, request).await
            }
        }
    }
}

/// Whether a request's headers carry `Authorization`.
fn carries_authorization(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
}

/// A sensitive header value (kept out of `Debug` output).
fn sensitive(v: &str) -> Result<reqwest::header::HeaderValue, String> {
    let mut v = reqwest::header::HeaderValue::from_str(v)
        .map_err(|_| "the secret is not a valid header value".to_owned())?;
    v.set_sensitive(true);
    Ok(v)
}

/// Sets a bearer token, basic or a header of the endpoint's on `request`, replacing every
/// header of that name the job carried.
fn set_static_auth(request: &mut reqwest::Request, auth: &Auth) -> Result<(), String> {
    use base64::Engine as _;
    let (name, value) = match auth {
        Auth::Bearer { token } => (
            reqwest::header::AUTHORIZATION,
            format!("Bearer {}", token.read()?),
        ),
        Auth::Basic { username, password } => {
            let pair = format!("{username}:{}", password.read()?);
            (
                reqwest::header::AUTHORIZATION,
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                ),
            )
        }
        Auth::Header { name, value } => (
            reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{name:?} is not a header name"))?,
            value.read()?.to_string(),
        ),
        Auth::OAuth2(_) | Auth::Mtls(_) => return Ok(()),
    };
    request.headers_mut().insert(name, sensitive(&value)?);
    Ok(())
}

/// Sets `request`'s bearer token (replacing any).
fn set_bearer(request: &mut reqwest::Request, token: &str) -> Result<(), String> {
    let v = sensitive(&format!("Bearer {token}"))
        .map_err(|_| "the access token is not a valid header value".to_owned())?;
    request
        .headers_mut()
        .insert(reqwest::header::AUTHORIZATION, v);
    Ok(())
}

impl HttpExecutor {
    /// Sends `request` and reads its answer.
    async fn send(&self, client: &reqwest::Client, request: reqwest::Request) -> AttemptOutput {
        match client.execute(request).await {
            Ok(response) => self.read_response(response).await,
            Err(e) => transport_failure(&e),
        }
    }

    /// Sends `request` with the endpoint's OAuth2 token: fetched (or fetched again) as needed,
    /// and once more when the API answers 401 to a token that was not new to this attempt; the
    /// second answer is the attempt's. No token to be had answers as the token endpoint did
    /// (see [`token_failure`]): nothing went to the API.
    async fn send_with_token(
        &self,
        client: &reqwest::Client,
        o: &OAuth2,
        request: reqwest::Request,
    ) -> AttemptOutput {
        let clock = &self.config.credentials.clock;
        let retry = request.try_clone();
        let mut request = request;
        let before = o.status().fetched;
        let token = match o.token(client, clock.now(), None).await {
            Ok(t) => t,
            Err(f) => return token_failure(&f),
        };
        // Fetched for this attempt (by it, or by another while it waited): a 401 to it is the
        // API's answer, not a sign of a stale token.
        let new = o.status().fetched != before;
        if let Err(e) = set_bearer(&mut request, &token) {
            return Self::refused(e);
        }
        let response = match client.execute(request).await {
            Ok(r) => r,
            Err(e) => return transport_failure(&e),
        };
        let (401, false, Some(mut again)) = (response.status().as_u16(), new, retry) else {
            return self.read_response(response).await;
        };
        drop(response);
        let fresh = match o.token(client, clock.now(), Some(&token)).await {
            Ok(t) => t,
            Err(f) => return token_failure(&f),
        };
        if let Err(e) = set_bearer(&mut again, &fresh) {
            return Self::refused(e);
        }
        match client.execute(again).await {
            Ok(r) => self.read_response(r).await,
            Err(e) => transport_failure(&e),
        }
    }
}

/// An attempt that could not get a token: nothing was sent to the API. A 429 from the token
/// endpoint answers as a 429 with its `Retry-After` (the job is deferred, no attempt counted,
/// the endpoint held until then); anything else as a 503 with its `Retry-After` if it gave one
/// (transient: retried with the endpoint's protection, its breaker counting it), so that an
/// outage of the token server holds the jobs instead of killing them. The reason says which.
fn token_failure(f: &TokenFailure) -> AttemptOutput {
    let status = if f.status == Some(429) { 429 } else { 503 };
    let mut response = Response::new(status);
    if let Some(r) = &f.retry_after {
        response = response.header("retry-after", r);
    }
    AttemptOutput {
        response_headers: response.headers.clone(),
        error_detail: Some(format!(
            "no access token, so nothing was sent to the API: {}",
            f.reason
        )),
        ..AttemptOutput::from_outcome(Outcome::Response(response))
    }
}

/// The headers a signed delivery carries (Standard Webhooks).
const SIGNATURE_HEADERS: [&str; 3] = ["webhook-id", "webhook-timestamp", "webhook-signature"];

impl HttpExecutor {
    /// The response's status and headers, and its body up to the bound. A body that breaks off
    /// makes the outcome a transport failure: the request may have taken effect.
    async fn read_response(&self, mut response: reqwest::Response) -> AttemptOutput {
        let status = response.status().as_u16();
        let headers: Vec<(String, String)> = response
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        // Read up to the bound, then stop: the rest of a large body is not needed to decide.
        let mut body = Vec::new();
        let mut body_error = None;
        while body.len() < self.config.max_body_bytes {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) => break,
                Err(e) => {
                    body_error = Some(e);
                    break;
                }
            }
        }
        // Cut: more arrived than the bound, or the response said it was longer.
        let declared = response.content_length().unwrap_or(0);
        let truncated =
            body.len() > self.config.max_body_bytes || declared > self.config.max_body_bytes as u64;
        body.truncate(self.config.max_body_bytes);
        let (body_text, base64) = body_excerpt(body, truncated);
        if let Some(e) = body_error {
            // The status line arrived but the body broke off: the request may have taken effect.
            let mut out = transport_failure(&e);
            if matches!(
                out.outcome,
                Outcome::Transport(TransportError::ConnectionReset)
            ) {
                out.outcome = Outcome::Transport(TransportError::TruncatedResponse);
            }
            out.response_headers = headers;
            out.response_body = body_text;
            out.response_body_base64 = base64;
            out.response_body_truncated = truncated;
            return out;
        }
        AttemptOutput {
            outcome: Outcome::Response(Response {
                status,
                headers: headers.clone(),
            }),
            response_headers: headers,
            response_body: body_text,
            response_body_base64: base64,
            response_body_truncated: truncated,
            error_detail: None,
        }
    }
}

/// A kept body as the attempt stores it: its text when it is UTF-8 (a body cut inside a
/// character keeps the whole characters before it), else its bytes in base64 (`true`).
fn body_excerpt(body: Vec<u8>, truncated: bool) -> (Option<String>, bool) {
    use base64::Engine as _;
    if body.is_empty() {
        return (None, false);
    }
    match String::from_utf8(body) {
        Ok(text) => (Some(text), false),
        Err(e) => {
            let cut_inside_a_char = truncated && e.utf8_error().error_len().is_none();
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            if cut_inside_a_char {
                bytes.truncate(valid);
                let text = String::from_utf8(bytes).unwrap_or_default();
                return ((!text.is_empty()).then_some(text), false);
            }
            (
                Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
                true,
            )
        }
    }
}

/// Tells transport errors apart by walking the error's sources.
fn transport_failure(e: &reqwest::Error) -> AttemptOutput {
    let detail = redacted_chain(e);
    let kind = classify_error(e);
    AttemptOutput {
        error_detail: Some(detail),
        ..AttemptOutput::from_outcome(Outcome::Transport(kind))
    }
}

fn classify_error(e: &reqwest::Error) -> TransportError {
    let mut source: Option<&(dyn StdError + 'static)> = Some(e);
    let mut io_kind = None;
    let mut hyper_kind = None;
    while let Some(s) = source {
        if let Some(r) = s.downcast_ref::<ResolveError>() {
            return match r {
                ResolveError::NotFound(_) => TransportError::DnsNotFound,
                ResolveError::Temporary(..) => TransportError::DnsTemporary,
                ResolveError::Refused(..) => TransportError::DestinationRefused,
            };
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            io_kind.get_or_insert(io.kind());
        }
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_parse() || h.is_parse_status() {
                hyper_kind.get_or_insert(TransportError::MalformedResponse);
            } else if h.is_incomplete_message() {
                hyper_kind.get_or_insert(TransportError::TruncatedResponse);
            }
        }
        source = s.source();
    }
    let mut text = chain(e);
    if let Some(u) = e.url() {
        // A URL's own words (a path `/certificates`) say nothing of the error.
        text = text.replace(u.as_str(), "");
    }
    let text = text.to_ascii_lowercase();
    // A handshake the server refused (its alert: an unknown CA, a certificate it requires or
    // refuses) arrives as a closed connection: the TLS layer's words tell it apart.
    if text.contains("received fatal alert") || text.contains("invalid peer certificate") {
        return TransportError::Tls;
    }
    if e.is_timeout() {
        return if e.is_connect() {
            TransportError::ConnectTimeout
        } else {
            TransportError::Timeout
        };
    }
    if let Some(k) = hyper_kind {
        return k;
    }
    use std::io::ErrorKind as K;
    match io_kind {
        Some(K::ConnectionRefused) => return TransportError::ConnectionRefused,
        Some(K::ConnectionReset | K::ConnectionAborted | K::BrokenPipe | K::UnexpectedEof) => {
            return TransportError::ConnectionReset
        }
        Some(K::TimedOut) => {
            return if e.is_connect() {
                TransportError::ConnectTimeout
            } else {
                TransportError::ReadTimeout
            }
        }
        _ => {}
    }
    if text.contains("certificate") || text.contains("tls") || text.contains("handshake") {
        return TransportError::Tls;
    }
    if e.is_redirect() {
        return TransportError::RedirectNotFollowed;
    }
    if e.is_builder() {
        return TransportError::InvalidRequest;
    }
    // Failed before a connection was made: nothing was sent, safe to retry.
    if e.is_connect() {
        return TransportError::ConnectionRefused;
    }
    TransportError::ConnectionReset
}

/// [`redacted_chain`], for the token fetch.
pub(crate) fn redacted_reason(e: &reqwest::Error) -> String {
    redacted_chain(e)
}

/// An error and its sources, one line.
/// The error's words, with the URL the HTTP client puts in them redacted (a secret in its
/// query string must not reach the attempt record).
fn redacted_chain(e: &reqwest::Error) -> String {
    let detail = chain(e);
    match e.url() {
        Some(u) => detail.replace(u.as_str(), &crate::redact::url(u.as_str())),
        None => detail,
    }
}

fn chain(e: &dyn StdError) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let msg = inner.to_string();
        if !s.contains(&msg) {
            s.push_str(": ");
            s.push_str(&msg);
        }
        source = inner.source();
    }
    s
}
