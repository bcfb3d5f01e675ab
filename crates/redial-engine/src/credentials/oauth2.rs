//! OAuth2 client credentials (RFC 6749 section 4.4): the access token fetched when first
//! needed, kept in memory, fetched again before it expires and once more after a 401; and the
//! token endpoint's own breaker (`Gate`).

use super::Secret;
use redial_policy::Timestamp;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
}
