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

mod mtls;
mod oauth2;

pub use mtls::{ClientCertificate, Mtls};
pub use oauth2::{ClientAuth, OAuth2, TokenFailure, TokenStatus};

use crate::clock::{Clock, SystemClock};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

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
