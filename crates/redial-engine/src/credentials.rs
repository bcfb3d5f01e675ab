//! Endpoint credentials (issue 58): what a request to an endpoint carries that its job does
//! not. They belong to the endpoint (`[endpoints."https://api.example.com".auth]`), are added
//! when a request is sent, and are never stored: not in the job, its attempts, the database, an
//! export, a log line or an answer of the API.
//!
//! Kinds: a bearer token, HTTP basic, a header of the user's naming, and OAuth2 client
//! credentials (RFC 6749 section 4.4), whose access token is fetched when first needed, kept in
//! memory, fetched again before it expires (from `expires_in`) and once more when a request that
//! carried it is answered 401. Each node keeps its own token: nothing about it is shared through
//! the store. The token endpoint has a breaker of its own (`Gate`): after a failure it is not
//! asked again for a while (a second, doubling with each failure in a row up to a minute, or its
//! `Retry-After` when longer), so the requests waiting for a token do not each ask in turn.
//!
//! Secrets come from an environment variable (read when the configuration is loaded), a file
//! (read again whenever it changes, so a rotated secret is used without a restart; the last
//! good value stays in use while the file cannot be read), or the configuration itself (only
//! when it says `insecure_literal = true`).

use crate::clock::{Clock, SystemClock};
use redial_policy::Timestamp;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Where a secret is read from. Never shown: its `Debug` names the source only.
#[derive(Clone)]
pub enum SecretSource {
    /// An environment variable, as read when the configuration was loaded.
    Env { name: String, value: Arc<str> },
    /// A file, read again whenever its size or modification time changes.
    File(PathBuf),
    /// Written in the configuration.
    Literal(Arc<str>),
}

impl std::fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretSource::Env { name, .. } => write!(f, "Env({name})"),
            SecretSource::File(p) => write!(f, "File({})", p.display()),
            SecretSource::Literal(_) => f.write_str("Literal(redacted)"),
        }
    }
}

/// A file's size and modification time, as last read.
type Stamp = (u64, Option<SystemTime>);

/// A secret value and where it comes from.
pub struct Secret {
    source: SecretSource,
    /// A file's last good value, and its stamp then.
    file: Mutex<Option<(Stamp, Arc<str>)>>,
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({})", self.describe())
    }
}

impl Secret {
    /// The value of environment variable `name`, read now: it must be set and not empty.
    pub fn env(name: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Secret, String> {
        match lookup(name) {
            Some(v) if !v.trim().is_empty() => Ok(Secret::of(SecretSource::Env {
                name: name.to_owned(),
                value: v.trim().into(),
            })),
            Some(_) => Err(format!("the environment variable {name} is empty")),
            None => Err(format!("the environment variable {name} is not set")),
        }
    }

    /// The content of the file at `path` (surrounding white space trimmed), read now to check
    /// it, and again whenever it changes.
    pub fn file(path: impl Into<PathBuf>) -> Result<Secret, String> {
        let secret = Secret::of(SecretSource::File(path.into()));
        secret.read()?;
        Ok(secret)
    }

    /// A value written in the configuration.
    pub fn literal(value: &str) -> Secret {
        Secret::of(SecretSource::Literal(value.trim().into()))
    }

    fn of(source: SecretSource) -> Secret {
        Secret {
            source,
            file: Mutex::new(None),
        }
    }

    /// Where the value comes from, for people: `env STRIPE_KEY`, `file /run/secrets/key`,
    /// `literal`. Never the value.
    pub fn describe(&self) -> String {
        match &self.source {
            SecretSource::Env { name, .. } => format!("env {name}"),
            SecretSource::File(p) => format!("file {}", p.display()),
            SecretSource::Literal(_) => "literal".into(),
        }
    }

    /// The value now. A file is read again when its size or modification time changed; while
    /// it cannot be read (a rotation in progress), its last good value stands.
    pub fn read(&self) -> Result<Arc<str>, String> {
        let path = match &self.source {
            SecretSource::Env { value, .. } | SecretSource::Literal(value) => {
                return Ok(value.clone())
            }
            SecretSource::File(path) => path,
        };
        let mut cached = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let stamp = std::fs::metadata(path).map(|m| (m.len(), m.modified().ok()));
        if let (Ok(stamp), Some((was, value))) = (&stamp, cached.as_ref()) {
            if stamp == was {
                return Ok(value.clone());
            }
        }
        let fresh = stamp.and_then(|stamp| {
            std::fs::read_to_string(path).map(|text| (stamp, text.trim().to_owned()))
        });
        match fresh {
            Ok((stamp, text)) if !text.is_empty() => {
                let value: Arc<str> = text.into();
                *cached = Some((stamp, value.clone()));
                Ok(value)
            }
            Ok(_) if cached.is_some() => {
                Ok(cached.as_ref().map(|c| c.1.clone()).unwrap_or_default())
            }
            Ok(_) => Err(format!("the secret file {} is empty", path.display())),
            Err(_) if cached.is_some() => {
                Ok(cached.as_ref().map(|c| c.1.clone()).unwrap_or_default())
            }
            Err(e) => Err(format!(
                "the secret file {} cannot be read: {e}",
                path.display()
            )),
        }
    }
}

/// How an OAuth2 client proves who it is to the token endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// HTTP basic with the client id and secret (RFC 6749 section 2.3.1, the default).
    ClientSecretBasic,
    /// The client id and secret in the form body.
    ClientSecretPost,
}

/// An access token as the token endpoint gave it.
#[derive(Clone, Debug)]
struct Token {
    value: Arc<str>,
    fetched_at: Timestamp,
    /// None when the answer gave no `expires_in`: used until a request with it is answered 401.
    expires_at: Option<Timestamp>,
}

impl Token {
    /// When to fetch the next one: a tenth of its life before it ends (at most a minute before).
    fn refresh_at(&self) -> Option<Timestamp> {
        let end = self.expires_at?;
        let life = end.as_unix_millis() - self.fetched_at.as_unix_millis();
        Some(Timestamp::from_unix_millis(
            end.as_unix_millis() - (life / 10).min(60_000),
        ))
    }
}

/// What people are shown about an OAuth2 endpoint's token: never the token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenStatus {
    /// Until when the token in hand is valid (None: no token, or its life was not given).
    pub valid_until: Option<Timestamp>,
    /// Whether a token is in hand.
    pub held: bool,
    /// The last failure to get one: when, and why.
    pub last_failure: Option<(Timestamp, String)>,
    /// Tokens fetched since the start.
    pub fetched: u64,
    /// Until when the token endpoint is not asked again, after `failures` in a row.
    pub held_until: Option<Timestamp>,
    /// Failures to get a token in a row (0 once one came).
    pub failures: u32,
}

/// The token endpoint's breaker: closed until a fetch fails, then open (no request goes to the
/// token endpoint) for a second, twice as long after each failure in a row, at most
/// [`GATE_MAX`], or as long as its `Retry-After` asks when that is longer (up to
/// [`GATE_MAX_ASKED`]). A token that comes closes it. While it is open, every request that
/// needs a token is answered with the last failure and the time left, at once: the requests
/// queued behind one failed fetch do not each make their own.
#[derive(Clone, Debug, Default)]
struct Gate {
    failures: u32,
    until: Option<Timestamp>,
    last: Option<TokenFailure>,
}

/// The longest the token endpoint's breaker stays open on its own.
const GATE_MAX: Duration = Duration::from_secs(60);
/// The longest wait a token endpoint's `Retry-After` is honoured for.
const GATE_MAX_ASKED: Duration = Duration::from_secs(3600);

impl Gate {
    /// The failure to answer with while open at `now`, carrying the wait left.
    fn holding(&self, now: Timestamp) -> Option<TokenFailure> {
        let until = self.until.filter(|u| now < *u)?;
        let last = self.last.as_ref()?;
        // Whole seconds, rounded up: Retry-After's unit.
        let left = (until.as_unix_millis() - now.as_unix_millis() + 999) / 1000;
        Some(TokenFailure {
            status: last.status,
            retry_after: Some(left.to_string()),
            reason: format!(
                "{} (not asked again for {left}s, after {} failure{} in a row)",
                last.reason,
                self.failures,
                if self.failures == 1 { "" } else { "s" }
            ),
        })
    }

    /// A fetch failed at `now`: open for the next period.
    fn failed(&mut self, failure: &TokenFailure, now: Timestamp) {
        self.failures = self.failures.saturating_add(1);
        let doubling = Duration::from_secs(1)
            .saturating_mul(1u32 << (self.failures - 1).min(16))
            .min(GATE_MAX);
        let asked = failure
            .retry_after
            .as_deref()
            .and_then(|v| redial_policy::server_wait([("retry-after", v)], now, GATE_MAX_ASKED))
            .map_or(Duration::ZERO, |w| w.delay);
        let open = doubling.max(asked);
        self.until = Some(Timestamp::from_unix_millis(
            now.as_unix_millis()
                .saturating_add(i64::try_from(open.as_millis()).unwrap_or(i64::MAX)),
        ));
        self.last = Some(failure.clone());
    }
}

/// OAuth2 client credentials for one endpoint.
#[derive(Debug)]
pub struct OAuth2 {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: Secret,
    pub scopes: Vec<String>,
    pub audience: Option<String>,
    pub client_auth: ClientAuth,
    /// The token in hand; held while one is fetched, so that requests needing a token at once
    /// wait for one fetch instead of each making their own.
    token: tokio::sync::Mutex<Option<Token>>,
    status: Mutex<TokenStatus>,
    /// The token endpoint's breaker; changed only under `token`'s lock.
    gate: Mutex<Gate>,
}

/// A lock whose holder cannot leave its value half changed: taken even after a panic.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why no token could be had: what the token endpoint said, or that it could not be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenFailure {
    /// Its HTTP status, when it answered.
    pub status: Option<u16>,
    /// Its `Retry-After`, as given.
    pub retry_after: Option<String>,
    pub reason: String,
}

impl OAuth2 {
    pub fn new(
        token_url: String,
        client_id: String,
        client_secret: Secret,
        scopes: Vec<String>,
        audience: Option<String>,
        client_auth: ClientAuth,
    ) -> OAuth2 {
        OAuth2 {
            token_url,
            client_id,
            client_secret,
            scopes,
            audience,
            client_auth,
            token: tokio::sync::Mutex::new(None),
            status: Mutex::new(TokenStatus::default()),
            gate: Mutex::new(Gate::default()),
        }
    }

    /// What people may see about the token.
    pub fn status(&self) -> TokenStatus {
        lock(&self.status).clone()
    }

    /// A token valid at `now`: the one in hand, or a new one. `stale`: a token a request was
    /// just refused with (401); it is not given again.
    pub(crate) async fn token(
        &self,
        client: &reqwest::Client,
        now: Timestamp,
        stale: Option<&str>,
    ) -> Result<Arc<str>, TokenFailure> {
        let mut held = self.token.lock().await;
        if let Some(t) = held.as_ref() {
            let fresh = t.refresh_at().is_none_or(|at| now < at);
            if fresh && stale != Some(&*t.value) {
                return Ok(t.value.clone());
            }
        }
        let holding = lock(&self.gate).holding(now);
        let asked = holding.is_none();
        let fetched = match holding {
            Some(failure) => Err(failure),
            None => {
                let fetched = self.fetch(client, now).await;
                let mut gate = lock(&self.gate);
                match &fetched {
                    Ok(_) => *gate = Gate::default(),
                    Err(f) => gate.failed(f, now),
                }
                fetched
            }
        };
        let gate = lock(&self.gate).clone();
        let mut status = lock(&self.status);
        status.held_until = gate.until.filter(|u| now < *u);
        status.failures = gate.failures;
        match fetched {
            Ok(token) => {
                status.valid_until = token.expires_at;
                status.held = true;
                status.fetched += 1;
                let value = token.value.clone();
                *held = Some(token);
                Ok(value)
            }
            Err(failure) => {
                if asked {
                    status.last_failure = Some((now, failure.reason.clone()));
                }
                // A token refused by the API is not used again; one merely due for refresh
                // still is until it ends.
                let usable = held.as_ref().filter(|t| {
                    stale != Some(&*t.value) && t.expires_at.is_none_or(|end| now < end)
                });
                match usable {
                    Some(t) => Ok(t.value.clone()),
                    None => {
                        *held = None;
                        status.held = false;
                        status.valid_until = None;
                        Err(failure)
                    }
                }
            }
        }
    }

    async fn fetch(&self, client: &reqwest::Client, now: Timestamp) -> Result<Token, TokenFailure> {
        let failure =
            |status: Option<u16>, retry_after: Option<String>, reason: String| TokenFailure {
                status,
                retry_after,
                reason: format!("the token endpoint {}: {reason}", self.token_url),
            };
        let secret = self
            .client_secret
            .read()
            .map_err(|e| failure(None, None, format!("the client secret: {e}")))?;
        let mut form: Vec<(&str, &str)> = vec![("grant_type", "client_credentials")];
        let scope = self.scopes.join(" ");
        if !scope.is_empty() {
            form.push(("scope", &scope));
        }
        if let Some(a) = &self.audience {
            form.push(("audience", a));
        }
        let mut request = client
            .post(&self.token_url)
            .header("accept", "application/json")
            .timeout(Duration::from_secs(30));
        match self.client_auth {
            ClientAuth::ClientSecretBasic => {
                // RFC 6749 section 2.3.1: each part form-encoded before the basic scheme.
                let enc = |s: &str| {
                    url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>()
                };
                request = request.basic_auth(enc(&self.client_id), Some(enc(&secret)));
            }
            ClientAuth::ClientSecretPost => {
                form.push(("client_id", &self.client_id));
                form.push(("client_secret", &secret));
            }
        }
        let response = request
            .form(&form)
            .send()
            .await
            .map_err(|e| failure(None, None, crate::http::redacted_reason(&e)))?;
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = response
            .bytes()
            .await
            .map_err(|e| failure(Some(status), None, crate::http::redacted_reason(&e)))?;
        if !(200..300).contains(&status) {
            // The error's code and description (RFC 6749 section 5.2), never the body as is.
            let said = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| {
                    let code = v.get("error")?.as_str()?.to_owned();
                    Some(match v.get("error_description").and_then(|d| d.as_str()) {
                        Some(d) => {
                            format!(" ({code}: {})", d.chars().take(200).collect::<String>())
                        }
                        None => format!(" ({code})"),
                    })
                })
                .unwrap_or_default();
            return Err(failure(
                Some(status),
                retry_after,
                format!("HTTP {status}{said}"),
            ));
        }
        token_from(&body, now).map_err(|reason| failure(Some(status), None, reason))
    }
}

/// The token in a token endpoint's 2xx answer (RFC 6749 section 5.1): its `access_token`, a
/// `token_type` of Bearer if it says one, and its life from `expires_in` (seconds, as a
/// number or a string), counted from `now`.
fn token_from(body: &[u8], now: Timestamp) -> Result<Token, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| "the answer is not JSON".to_owned())?;
    let value = v
        .get("access_token")
        .and_then(|t| t.as_str())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| "the answer has no access_token".to_owned())?;
    if let Some(kind) = v.get("token_type").and_then(|t| t.as_str()) {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(format!("the token is of type {kind:?}, not Bearer"));
        }
    }
    let expires_in = match v.get("expires_in") {
        Some(serde_json::Value::Number(n)) => n.as_f64(),
        Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|s| s.is_finite() && *s > 0.0);
    Ok(Token {
        value: value.into(),
        fetched_at: now,
        expires_at: expires_in.map(|s| {
            Timestamp::from_unix_millis(now.as_unix_millis().saturating_add((s * 1000.0) as i64))
        }),
    })
}

/// A client certificate (with its chain) and its private key, PEM files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCertificate {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// TLS of an endpoint's own: mutual TLS, a client certificate presented in the handshake with
/// the endpoint, and optionally a CA to trust for the endpoint's own certificate (partners often
/// run a private one); or that CA alone. The files are read again when they change (a rotated
/// certificate is used without a restart); while a changed file does not load (half written),
/// the last good client stays.
#[derive(Debug)]
pub struct Mtls {
    /// None: only `ca_file` (a private CA trusted, no certificate presented).
    pub certificate: Option<ClientCertificate>,
    pub ca_file: Option<PathBuf>,
    /// The HTTP client holding the identity, and the files' stamps it was built from.
    client: Mutex<Option<(Vec<Option<Stamp>>, reqwest::Client)>>,
}

impl Mtls {
    /// Checks that the files load (a certificate and its key; a CA), now.
    pub fn new(
        cert_file: PathBuf,
        key_file: PathBuf,
        ca_file: Option<PathBuf>,
    ) -> Result<Mtls, String> {
        Mtls::checked(
            Some(ClientCertificate {
                cert_file,
                key_file,
            }),
            ca_file,
        )
    }

    /// A CA trusted for the endpoint's certificate, and no client certificate. Checks that it
    /// loads, now.
    pub fn trusting(ca_file: PathBuf) -> Result<Mtls, String> {
        Mtls::checked(None, Some(ca_file))
    }

    fn checked(
        certificate: Option<ClientCertificate>,
        ca_file: Option<PathBuf>,
    ) -> Result<Mtls, String> {
        let m = Mtls {
            certificate,
            ca_file,
            client: Mutex::new(None),
        };
        m.load()?;
        Ok(m)
    }

    fn files(&self) -> Vec<&PathBuf> {
        let mut f = Vec::new();
        if let Some(c) = &self.certificate {
            f.extend([&c.cert_file, &c.key_file]);
        }
        f.extend(&self.ca_file);
        f
    }

    fn stamps(&self) -> Vec<Option<Stamp>> {
        self.files()
            .iter()
            .map(|p| {
                std::fs::metadata(p)
                    .ok()
                    .map(|m| (m.len(), m.modified().ok()))
            })
            .collect()
    }

    /// The identity and the extra root, from the files as they are now.
    fn load(&self) -> Result<(Option<reqwest::Identity>, Option<reqwest::Certificate>), String> {
        let read = |p: &PathBuf, what: &str| {
            std::fs::read(p).map_err(|e| format!("the {what} {} cannot be read: {e}", p.display()))
        };
        let identity = match &self.certificate {
            None => None,
            Some(c) => {
                let mut pem = read(&c.cert_file, "certificate file")?;
                pem.push(b'\n');
                pem.extend(read(&c.key_file, "key file")?);
                Some(reqwest::Identity::from_pem(&pem).map_err(|e| {
                    format!(
                        "the certificate {} and key {} do not load: {e}",
                        c.cert_file.display(),
                        c.key_file.display()
                    )
                })?)
            }
        };
        let root = match &self.ca_file {
            None => None,
            Some(p) => Some(
                reqwest::Certificate::from_pem(&read(p, "CA file")?)
                    .map_err(|e| format!("the CA file {} does not load: {e}", p.display()))?,
            ),
        };
        Ok((identity, root))
    }

    /// The client to send with: built from `base` with the identity, again when a file changed.
    pub(crate) fn client(
        &self,
        base: impl Fn() -> reqwest::ClientBuilder,
    ) -> Result<reqwest::Client, String> {
        let mut held = self.client.lock().unwrap_or_else(|p| p.into_inner());
        let stamps = self.stamps();
        if let Some((was, client)) = held.as_ref() {
            if *was == stamps {
                return Ok(client.clone());
            }
        }
        let built = self.load().and_then(|(identity, root)| {
            let mut b = base();
            if let Some(i) = identity {
                b = b.identity(i);
            }
            if let Some(r) = root {
                b = b.add_root_certificate(r);
            }
            b.build()
                .map_err(|e| format!("the TLS client does not build: {e}"))
        });
        match (built, held.as_ref()) {
            (Ok(client), _) => {
                *held = Some((stamps, client.clone()));
                Ok(client)
            }
            // A rotation half done: the last good client until the files load.
            (Err(_), Some((_, client))) => Ok(client.clone()),
            (Err(e), None) => Err(e),
        }
    }
}

/// What a request to an endpoint is given.
#[derive(Debug)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Bearer { token: Secret },
    /// `Authorization: Basic` with these.
    Basic { username: String, password: Secret },
    /// A header of the user's naming (`X-Api-Key`).
    Header { name: String, value: Secret },
    /// OAuth2 client credentials: a bearer token the endpoint's token server issues.
    OAuth2(Box<OAuth2>),
    /// A client certificate for the TLS connection (the job's headers are sent as they are).
    Mtls(Box<Mtls>),
}

impl Auth {
    /// The kind's name, as the configuration spells it.
    pub fn kind(&self) -> &'static str {
        match self {
            Auth::Bearer { .. } => "bearer",
            Auth::Basic { .. } => "basic",
            Auth::Header { .. } => "header",
            Auth::OAuth2(_) => "oauth2_client_credentials",
            Auth::Mtls(_) => "mtls",
        }
    }
}

/// One endpoint's credentials.
#[derive(Debug)]
pub struct EndpointCredentials {
    pub auth: Auth,
    /// A client certificate presented besides `auth` (`cert_file` and `key_file` given with
    /// another kind: mutual TLS and a token, as open banking asks), or a CA alone (`ca_file`:
    /// the endpoint's certificate is from a private CA).
    pub tls: Option<Box<Mtls>>,
    /// Jobs may carry an `Authorization` header of their own too (refused otherwise: two
    /// sources of truth).
    pub allow_job_credentials: bool,
}

impl EndpointCredentials {
    /// The TLS settings of the endpoint's own (a client certificate, a CA, or both), if any:
    /// its requests then go through a client of their own.
    pub fn tls(&self) -> Option<&Mtls> {
        match &self.auth {
            Auth::Mtls(m) => Some(m),
            _ => self.tls.as_deref(),
        }
    }

    /// The client certificate the endpoint's connections present, if any.
    pub fn client_certificate(&self) -> Option<&ClientCertificate> {
        self.tls()?.certificate.as_ref()
    }
}

/// Every endpoint's credentials, by endpoint (its origin, as jobs name it), the profiles jobs
/// may name instead (`[credentials.NAME]`), and the clock that tells a token's age.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub by_endpoint: BTreeMap<String, Arc<EndpointCredentials>>,
    /// Named credentials a job chooses with its request's `credentials`, in place of its
    /// endpoint's (another account at the same API, a tenant's own key).
    pub profiles: BTreeMap<String, Arc<EndpointCredentials>>,
    pub clock: Arc<dyn Clock>,
}

impl Default for Credentials {
    fn default() -> Self {
        Credentials {
            by_endpoint: BTreeMap::new(),
            profiles: BTreeMap::new(),
            clock: Arc::new(SystemClock),
        }
    }
}

/// The longest name of a credentials profile.
pub const MAX_PROFILE_CHARS: usize = 64;

/// Whether `name` may name a credentials profile: 1 to 64 ASCII letters, digits, `-`, `_`, `.`.
pub fn profile_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_PROFILE_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl Credentials {
    /// The credentials of `endpoint`, if it has some.
    pub fn of(&self, endpoint: &str) -> Option<&Arc<EndpointCredentials>> {
        self.by_endpoint.get(endpoint)
    }

    /// The credentials a request is sent with: the profile it names, or its endpoint's. Err
    /// when it names a profile the configuration does not have.
    pub fn for_request(
        &self,
        endpoint: &str,
        profile: Option<&str>,
    ) -> Result<Option<&Arc<EndpointCredentials>>, String> {
        match profile {
            None => Ok(self.of(endpoint)),
            Some(name) => self.profiles.get(name).map(Some).ok_or_else(|| {
                let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
                format!(
                    "the credentials profile {name:?} is not in the configuration ([credentials.{name}]); {}",
                    if known.is_empty() {
                        "it defines none".to_owned()
                    } else {
                        format!("it defines {}", known.join(", "))
                    }
                )
            }),
        }
    }

    /// Why a job for `endpoint` (sent with `profile`, if it names one) carrying `headers` is
    /// refused: the credentials it is sent with are not a client certificate alone and the job
    /// brings an `Authorization` header of its own, which they do not allow.
    pub fn refuse_job_headers(
        &self,
        endpoint: &str,
        profile: Option<&str>,
        headers: &[(String, String)],
    ) -> Option<String> {
        let c = self.for_request(endpoint, profile).ok()??;
        if matches!(c.auth, Auth::Mtls(_)) {
            // A certificate does not compete with a header.
            return None;
        }
        let carries = headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("authorization"));
        let whose = match profile {
            Some(name) => format!("the credentials profile {name:?}"),
            None => format!("the endpoint {endpoint}"),
        };
        (carries && !c.allow_job_credentials).then(|| {
            format!(
                "{whose} has credentials of its own ({}), and this job carries an Authorization header too: two sources of truth. Drop the header (the credentials are added when the request is sent), or set allow_job_credentials = true on {}",
                c.auth.kind(),
                if profile.is_some() { "the profile" } else { "the endpoint" }
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timestamp = Timestamp::from_unix_millis(1_000_000);

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_millis(T.as_unix_millis() + ms)
    }

    #[test]
    fn the_token_endpoints_breaker_doubles_to_a_minute_and_honours_retry_after() {
        let down = TokenFailure {
            status: Some(503),
            retry_after: None,
            reason: "the token endpoint x: HTTP 503".into(),
        };
        let mut gate = Gate::default();
        assert_eq!(gate.holding(T), None, "closed until a failure");
        let mut now = T;
        let mut opens = Vec::new();
        for _ in 0..8 {
            gate.failed(&down, now);
            let until = gate.until.expect("open");
            opens.push((until.as_unix_millis() - now.as_unix_millis()) / 1000);
            now = until;
        }
        assert_eq!(opens, [1, 2, 4, 8, 16, 32, 60, 60]);
        // While open: the last failure, the whole seconds left, the streak.
        let mut gate = Gate::default();
        gate.failed(&down, T);
        gate.failed(&down, at(1_000));
        let held = gate.holding(at(1_500)).expect("open for 2 s from 1 s");
        assert_eq!(held.status, Some(503));
        assert_eq!(held.retry_after.as_deref(), Some("2"));
        assert!(
            held.reason
                .ends_with("(not asked again for 2s, after 2 failures in a row)"),
            "{}",
            held.reason
        );
        assert_eq!(gate.holding(at(3_000)), None, "closed at its end");
        // A Retry-After longer than the doubling is honoured; a shorter one is not.
        let limited = TokenFailure {
            status: Some(429),
            retry_after: Some("30".into()),
            ..down.clone()
        };
        let mut gate = Gate::default();
        gate.failed(&limited, T);
        assert_eq!(gate.until, Some(at(30_000)));
        let held = gate.holding(T).expect("open");
        assert_eq!(
            (held.status, held.retry_after.as_deref()),
            (Some(429), Some("30")),
            "a 429 keeps deferring, with the time left"
        );
    }

    #[test]
    fn a_token_answer_is_read_as_the_rfc_writes_it() {
        let t = token_from(
            br#"{"access_token":"a","token_type":"bearer","expires_in":"60"}"#,
            T,
        )
        .expect("a token");
        assert_eq!(&*t.value, "a");
        assert_eq!(t.expires_at, Some(Timestamp::from_unix_millis(1_060_000)));
        // A tenth of its life before it ends: 6 s before.
        assert_eq!(t.refresh_at(), Some(Timestamp::from_unix_millis(1_054_000)));
        let long = token_from(br#"{"access_token":"a","expires_in":36000}"#, T).expect("a token");
        // At most a minute before.
        assert_eq!(
            long.refresh_at(),
            Some(Timestamp::from_unix_millis(1_000_000 + 36_000_000 - 60_000))
        );
        let forever = token_from(br#"{"access_token":"a"}"#, T).expect("a token");
        assert_eq!((forever.expires_at, forever.refresh_at()), (None, None));
        for (body, says) in [
            (
                &br#"{"access_token":"a","token_type":"mac"}"#[..],
                "not Bearer",
            ),
            (br#"{"token_type":"bearer"}"#, "no access_token"),
            (br#"<html>"#, "not JSON"),
        ] {
            let e = token_from(body, T).expect_err("refused");
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_secret_file_is_read_again_when_it_changes_and_kept_while_it_is_gone() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("s");
        std::fs::write(&path, " first \n").expect("write");
        let s = Secret::file(&path).expect("readable");
        assert_eq!(&*s.read().expect("read"), "first");
        std::fs::write(&path, "the second\n").expect("rotate");
        assert_eq!(&*s.read().expect("read"), "the second");
        std::fs::remove_file(&path).expect("remove");
        assert_eq!(&*s.read().expect("the last good value"), "the second");
        assert!(format!("{s:?}").contains("file"), "no value in Debug");
        assert!(!format!("{:?}", Secret::literal("hidden")).contains("hidden"));
        assert!(Secret::env("NOPE", |_| None).is_err());
        assert!(Secret::env("EMPTY", |_| Some(" ".into())).is_err());
    }
}
