//! `[endpoints."https://api.example.com".auth]` and `[credentials.NAME]`: an endpoint's
//! credentials, and the profiles jobs may name, as the file writes them (a header's secret,
//! OAuth2 client credentials, or a client certificate), checked into what the HTTP executor adds
//! to each request (`redial_engine::credentials`).
//! Secrets come from `secret_env` or `secret_file` (`client_secret_env`, `client_secret_file` for
//! OAuth2); a secret written in the file is refused unless `insecure_literal = true`.

use redial_engine::credentials::{
    Auth, ClientAuth, Credentials, EndpointCredentials, Mtls, OAuth2, Secret,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The kinds, as the file spells them.
const KINDS: &str = "\"bearer\", \"basic\", \"header\", \"oauth2_client_credentials\" or \"mtls\"";

/// One endpoint's `auth` table as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthFile {
    pub kind: String,
    pub secret_env: Option<String>,
    pub secret_file: Option<String>,
    pub secret: Option<String>,
    #[serde(default)]
    pub insecure_literal: bool,
    pub username: Option<String>,
    pub header: Option<String>,
    pub token_url: Option<String>,
    pub client_id: Option<String>,
    pub client_secret_env: Option<String>,
    pub client_secret_file: Option<String>,
    pub client_secret: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
    pub audience: Option<String>,
    pub client_auth: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub ca_file: Option<String>,
}

/// A secret from one of its three sources, `prefix` naming the fields (`secret`,
/// `client_secret`).
fn secret(
    prefix: &str,
    env: &Option<String>,
    file: &Option<String>,
    literal: &Option<String>,
    insecure_literal: bool,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Secret, String> {
    match (env, file, literal) {
        (Some(name), None, None) => Secret::env(name, lookup).map_err(|e| format!("{prefix}_env: {e}")),
        (None, Some(path), None) => Secret::file(path).map_err(|e| format!("{prefix}_file: {e}")),
        (None, None, Some(_)) if !insecure_literal => Err(format!(
            "{prefix}: a secret written in the configuration file ends up in backups, repositories and screenshots; use {prefix}_env or {prefix}_file, or say insecure_literal = true"
        )),
        (None, None, Some(v)) if v.trim().is_empty() => Err(format!("{prefix} is empty")),
        (None, None, Some(v)) => Ok(Secret::literal(v)),
        (None, None, None) => Err(format!(
            "needs its secret: {prefix}_env (an environment variable's name) or {prefix}_file (a file's path)"
        )),
        _ => Err(format!(
            "give one of {prefix}_env, {prefix}_file and {prefix}, not several"
        )),
    }
}

/// The fields a kind does not take, when given.
fn unused(a: &AuthFile, kind: &str) -> Option<String> {
    let given = [
        ("username", a.username.is_some(), ["basic"].as_slice()),
        ("header", a.header.is_some(), &["header"]),
        (
            "token_url",
            a.token_url.is_some(),
            &["oauth2_client_credentials"],
        ),
        (
            "client_id",
            a.client_id.is_some(),
            &["oauth2_client_credentials"],
        ),
        (
            "client_secret_env",
            a.client_secret_env.is_some(),
            &["oauth2_client_credentials"],
        ),
        (
            "client_secret_file",
            a.client_secret_file.is_some(),
            &["oauth2_client_credentials"],
        ),
        (
            "client_secret",
            a.client_secret.is_some(),
            &["oauth2_client_credentials"],
        ),
        (
            "scopes",
            !a.scopes.is_empty(),
            &["oauth2_client_credentials"],
        ),
        (
            "audience",
            a.audience.is_some(),
            &["oauth2_client_credentials"],
        ),
        (
            "client_auth",
            a.client_auth.is_some(),
            &["oauth2_client_credentials"],
        ),
        (
            "secret_env",
            a.secret_env.is_some(),
            &["bearer", "basic", "header"],
        ),
        (
            "secret_file",
            a.secret_file.is_some(),
            &["bearer", "basic", "header"],
        ),
        ("secret", a.secret.is_some(), &["bearer", "basic", "header"]),
    ];
    given
        .iter()
        .find(|(_, set, kinds)| *set && !kinds.contains(&kind))
        .map(|(name, _, _)| format!("{name} is not used by kind = {kind:?}"))
}

impl AuthFile {
    /// The credentials it describes, or what is wrong (one problem, its field named).
    pub fn resolve(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Auth, String> {
        let kind = self.kind.as_str();
        if !matches!(
            kind,
            "bearer" | "basic" | "header" | "oauth2_client_credentials" | "mtls"
        ) {
            return Err(format!("kind {kind:?} is not one of {KINDS}"));
        }
        if let Some(e) = unused(self, kind) {
            return Err(e);
        }
        let own = |prefix| {
            secret(
                prefix,
                &self.secret_env,
                &self.secret_file,
                &self.secret,
                self.insecure_literal,
                lookup,
            )
        };
        match kind {
            "bearer" => Ok(Auth::Bearer {
                token: own("secret")?,
            }),
            "basic" => {
                let username = self
                    .username
                    .clone()
                    .filter(|u| !u.is_empty() && !u.contains(':'))
                    .ok_or("kind = \"basic\" needs a username (without ':')")?;
                Ok(Auth::Basic {
                    username,
                    password: own("secret")?,
                })
            }
            "header" => {
                let name = self
                    .header
                    .clone()
                    .filter(|h| redial_policy::is_http_token(h))
                    .ok_or(
                        "kind = \"header\" needs header, a header's name (such as \"X-Api-Key\")",
                    )?;
                Ok(Auth::Header {
                    name,
                    value: own("secret")?,
                })
            }
            "oauth2_client_credentials" => self.oauth2(lookup).map(|o| Auth::OAuth2(Box::new(o))),
            "mtls" => {
                let certificate = self.cert_file.is_some() || self.key_file.is_some();
                let Some(m) = certificate.then(|| self.tls()).transpose()?.flatten() else {
                    return Err(
                        "kind = \"mtls\" needs cert_file and key_file (PEM files: the client certificate, with its chain, and its private key)"
                            .into(),
                    );
                };
                Ok(Auth::Mtls(m))
            }
            other => Err(format!("kind {other:?} is not one of {KINDS}")),
        }
    }

    /// The client certificate, when `cert_file` is given (with `key_file`; `ca_file` beside
    /// them): mutual TLS alone (`kind = "mtls"`) or besides another kind; or `ca_file` alone
    /// beside another kind (a private CA for the endpoint's certificate).
    pub fn tls(&self) -> Result<Option<Box<Mtls>>, String> {
        match (&self.cert_file, &self.key_file) {
            (None, None) => match &self.ca_file {
                // The endpoint's certificate is from a private CA; no client certificate.
                Some(ca) => Mtls::trusting(ca.into()).map(|m| Some(Box::new(m))),
                None => Ok(None),
            },
            (Some(cert), Some(key)) => Mtls::new(
                cert.into(),
                key.into(),
                self.ca_file.as_ref().map(Into::into),
            )
            .map(|m| Some(Box::new(m))),
            _ => Err("cert_file and key_file go together (the client certificate, with its chain, and its private key)".into()),
        }
    }

    fn oauth2(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<OAuth2, String> {
        let token_url = self
            .token_url
            .clone()
            .ok_or("kind = \"oauth2_client_credentials\" needs token_url")?;
        match url::Url::parse(&token_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
            _ => return Err(format!("token_url {token_url:?} is not an http(s) URL")),
        }
        let client_id = self
            .client_id
            .clone()
            .filter(|c| !c.is_empty())
            .ok_or("kind = \"oauth2_client_credentials\" needs client_id")?;
        let client_secret = secret(
            "client_secret",
            &self.client_secret_env,
            &self.client_secret_file,
            &self.client_secret,
            self.insecure_literal,
            lookup,
        )?;
        let client_auth = match self.client_auth.as_deref() {
            None | Some("client_secret_basic") => ClientAuth::ClientSecretBasic,
            Some("client_secret_post") => ClientAuth::ClientSecretPost,
            Some(other) => {
                return Err(format!(
                    "client_auth {other:?} is not \"client_secret_basic\" or \"client_secret_post\""
                ))
            }
        };
        if let Some(s) = self.scopes.iter().find(|s| s.is_empty() || s.contains(' ')) {
            return Err(format!("scopes: {s:?} is not a scope (one word each)"));
        }
        Ok(OAuth2::new(
            token_url,
            client_id,
            client_secret,
            self.scopes.clone(),
            self.audience.clone(),
            client_auth,
        ))
    }
}

/// Every endpoint's credentials from the `[endpoints]` tables (their `auth` and
/// `allow_job_credentials`), and the `[credentials.NAME]` profiles jobs may name; or every
/// problem.
pub fn credentials(
    endpoints: &BTreeMap<String, toml::Table>,
    profiles: &BTreeMap<String, toml::Table>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Credentials, Vec<String>> {
    let mut out = Credentials::default();
    let mut errors = Vec::new();
    for (origin, table) in endpoints {
        let at = format!("endpoints.{origin:?}");
        let allow = match allow_job_credentials(table) {
            Ok(a) => a,
            Err(e) => {
                errors.push(format!("{at}.{e}"));
                continue;
            }
        };
        let Some(auth) = table.get("auth") else {
            if allow {
                errors.push(format!(
                    "{at}.allow_job_credentials: the endpoint has no auth table, so jobs carry its credentials already"
                ));
            }
            continue;
        };
        match endpoint_credentials(auth.clone(), allow, lookup) {
            Ok(c) => {
                out.by_endpoint.insert(origin.clone(), Arc::new(c));
            }
            Err(e) => errors.push(format!("{at}.auth: {e}")),
        }
    }
    for (name, table) in profiles {
        let at = format!("credentials.{name:?}");
        if !redial_engine::credentials::profile_name_ok(name) {
            errors.push(format!(
                "{at}: a profile's name is 1 to {} letters, digits, '-', '_' or '.' (jobs name it in request.credentials)",
                redial_engine::credentials::MAX_PROFILE_CHARS
            ));
            continue;
        }
        let allow = match allow_job_credentials(table) {
            Ok(a) => a,
            Err(e) => {
                errors.push(format!("{at}.{e}"));
                continue;
            }
        };
        let mut auth = table.clone();
        auth.remove("allow_job_credentials");
        match endpoint_credentials(toml::Value::Table(auth), allow, lookup) {
            Ok(c) => {
                out.profiles.insert(name.clone(), Arc::new(c));
            }
            Err(e) => errors.push(format!("{at}: {e}")),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// A table's `allow_job_credentials` (false when absent).
fn allow_job_credentials(table: &toml::Table) -> Result<bool, String> {
    match table.get("allow_job_credentials") {
        None => Ok(false),
        Some(toml::Value::Boolean(b)) => Ok(*b),
        Some(_) => Err("allow_job_credentials: true or false".into()),
    }
}

/// One `auth` table (or profile) checked into what the executor adds.
fn endpoint_credentials(
    auth: toml::Value,
    allow_job_credentials: bool,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<EndpointCredentials, String> {
    let a: AuthFile = auth
        .try_into()
        .map_err(|e: toml::de::Error| super::one_line(&e))?;
    let auth = a.resolve(lookup)?;
    // A client certificate besides another kind; kind = "mtls" holds its own.
    let tls = match auth {
        Auth::Mtls(_) => None,
        _ => a.tls()?,
    };
    Ok(EndpointCredentials {
        auth,
        tls,
        allow_job_credentials,
    })
}
