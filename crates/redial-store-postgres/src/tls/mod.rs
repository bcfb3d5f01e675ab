//! How the store reaches PostgreSQL: the connection settings of a URL, with TLS as libpq does it.
//!
//! `sslmode` is `disable`, `prefer` (the default, as in libpq: TLS when the server offers it,
//! without checking its certificate), `require` (TLS, the certificate not checked unless a root
//! certificate is given, which makes it `verify-ca`, as libpq does), `verify-ca` (the certificate
//! signed by `sslrootcert`) or `verify-full` (that, and the host name is one the certificate
//! holds). `sslrootcert` is a PEM file of CA certificates, or `system` for the bundled Mozilla
//! roots (managed databases whose certificates a public CA signed); without it, verify modes use
//! `~/.postgresql/root.crt`. `sslcert` and `sslkey` are the client certificate and its key (PEM),
//! for servers that authenticate by certificate; without them, `~/.postgresql/postgresql.crt` and
//! `.key` when both exist. Each is read from the URL's query (or a `key=value` string) and from
//! `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`, `PGSSLKEY`; the URL wins.
//!
//! Where the URL sets none, a connection attempt gives up after 5 s (`connect_timeout`), and a
//! connection is closed once its data goes unacknowledged for 15 s (`tcp_user_timeout`) or its
//! idle peer stops answering keepalives (`keepalives_idle`, 15 s).
//!
//! Owns the parsing of those settings, the rustls client configuration, and what a failed TLS
//! connection is told as. Does not own the other connection settings (tokio-postgres parses
//! them) nor when to connect.
//!
//! Over 600 lines: each of libpq's connection and TLS rules it follows, in one place, with libpq's
//! wording.

use std::fmt;
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// The settings this module reads, as URL keys.
const KEYS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// What TLS a connection uses, and how much of the server's certificate it checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Result<SslMode, String> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's `allow` tries without TLS first; nothing here needs it.
            other => {
                return Err(format!(
                    "sslmode={other} is not one of disable, prefer, require, verify-ca, verify-full"
                ))
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// A database URL's connection settings, TLS included. Cheap to clone.
#[derive(Clone)]
pub struct DbConfig {
    pg: tokio_postgres::Config,
    mode: SslMode,
    /// The root certificates' file, for messages (`system` for the bundled roots).
    root: Option<String>,
    tls: MakeRustls,
    /// How long a store call waits for the database (a connection, then its answer).
    call_timeout: std::time::Duration,
    /// How long the readiness check waits.
    ready_timeout: std::time::Duration,
}

impl fmt::Debug for DbConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // tokio-postgres's Config shows the password: never print it.
        f.debug_struct("DbConfig")
            .field("hosts", &self.pg.get_hosts())
            .field("dbname", &self.pg.get_dbname())
            .field("user", &self.pg.get_user())
            .field("sslmode", &self.mode)
            .field("sslrootcert", &self.root)
            .finish_non_exhaustive()
    }
}

impl DbConfig {
    /// Reads `url` (`postgres://user:password@host:port/dbname?sslmode=...`, or `key=value`
    /// pairs), the TLS settings missing from it taken from the `PGSSL*` environment variables.
    pub fn parse(url: &str) -> Result<DbConfig, String> {
        DbConfig::parse_with(url, &|name| std::env::var(name).ok())
    }

    /// As [`DbConfig::parse`], the environment read through `env`.
    pub fn parse_with(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<DbConfig, String> {
        let (rest, ssl) = split_ssl_settings(url)?;
        let mut pg: tokio_postgres::Config = rest
            .parse()
            .map_err(|e| format!("invalid database URL: {e}"))?;
        // Bounds on a server that does not answer, where the URL sets none: a connection
        // attempt gives up after 5 s, and a connection whose data goes unacknowledged for 15 s
        // (a partition) or whose idle peer stops answering keepalives is closed.
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(std::time::Duration::from_secs(5));
        }
        if pg.get_tcp_user_timeout().is_none() {
            pg.tcp_user_timeout(std::time::Duration::from_secs(15));
        }
        if !rest.contains("keepalives_idle") {
            pg.keepalives_idle(std::time::Duration::from_secs(15));
        }
        let get = |key: &str| {
            ssl.iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .or_else(|| env(&format!("PG{}", key.to_ascii_uppercase())))
                .filter(|v| !v.is_empty())
        };
        let mode = get("sslmode").map_or(Ok(SslMode::Prefer), |m| SslMode::parse(&m))?;
        let home = env("HOME").map(PathBuf::from);
        let settings = Settings {
            mode,
            root: get("sslrootcert"),
            cert: get("sslcert").map(PathBuf::from),
            key: get("sslkey").map(PathBuf::from),
            home,
        };
        DbConfig::with_settings(pg, settings)
    }

    fn with_settings(mut pg: tokio_postgres::Config, s: Settings) -> Result<DbConfig, String> {
        pg.ssl_mode(match s.mode {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
        });
        if s.mode == SslMode::Disable {
            return Ok(DbConfig {
                pg,
                mode: s.mode,
                root: None,
                tls: MakeRustls { config: None },
                call_timeout: crate::OP_TIMEOUT,
                ready_timeout: crate::PING_TIMEOUT,
            });
        }
        let (config, root) = client_config(&s)?;
        Ok(DbConfig {
            pg,
            mode: s.mode,
            root,
            tls: MakeRustls {
                config: Some(Arc::new(config)),
            },
            call_timeout: crate::OP_TIMEOUT,
            ready_timeout: crate::PING_TIMEOUT,
        })
    }

    /// How long each store call waits for the database (a free connection, then its answer)
    /// before it answers unavailable, and how long the readiness check waits ([`crate::OP_TIMEOUT`]
    /// and [`crate::PING_TIMEOUT`] unless set). Both must be longer than zero.
    pub fn set_timeouts(
        &mut self,
        call: std::time::Duration,
        ready: std::time::Duration,
    ) -> Result<(), String> {
        if call.is_zero() || ready.is_zero() {
            return Err(
                "the database's call and readiness timeouts must be longer than zero".into(),
            );
        }
        self.call_timeout = call;
        self.ready_timeout = ready;
        Ok(())
    }

    /// The bound on each store call ([`DbConfig::set_timeouts`]).
    pub fn call_timeout(&self) -> std::time::Duration {
        self.call_timeout
    }

    /// The bound on the readiness check ([`DbConfig::set_timeouts`]).
    pub fn ready_timeout(&self) -> std::time::Duration {
        self.ready_timeout
    }

    /// The settings tokio-postgres reads (user, host, options...), to change before connecting.
    pub fn pg_mut(&mut self) -> &mut tokio_postgres::Config {
        &mut self.pg
    }

    /// The TLS mode.
    pub fn ssl_mode(&self) -> SslMode {
        self.mode
    }

    /// Opens one connection; its driver is the caller's to run. A failure says what to change.
    pub async fn connect(
        &self,
    ) -> Result<
        (
            tokio_postgres::Client,
            tokio_postgres::Connection<
                tokio_postgres::Socket,
                RustlsStream<tokio_postgres::Socket>,
            >,
        ),
        String,
    > {
        self.pg
            .connect(self.tls.clone())
            .await
            .map_err(|e| self.describe_connect_error(&e))
    }

    /// What a failed connection is told as: TLS failures name the setting to change; the
    /// others as the server or the socket said them.
    pub fn describe_connect_error(&self, e: &tokio_postgres::Error) -> String {
        let mode = self.mode.name();
        let root = self.root.as_deref().unwrap_or("~/.postgresql/root.crt");
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = source {
            let text = err.to_string();
            if text.contains("server does not support TLS") {
                return format!(
                    "the server does not accept TLS and sslmode={mode}: enable ssl on the server, \
                     or set sslmode=prefer (or disable) to connect without TLS"
                );
            }
            if let Some(tls) = err.downcast_ref::<rustls::Error>() {
                return describe_tls(tls, mode, root, self.host_names());
            }
            if let Some(tls) = err
                .downcast_ref::<io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                return describe_tls(tls, mode, root, self.host_names());
            }
            source = err.source();
        }
        crate::describe(e)
    }

    fn host_names(&self) -> String {
        self.pg
            .get_hosts()
            .iter()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl From<tokio_postgres::Config> for DbConfig {
    /// A configuration built in code: its own `sslmode` (tokio-postgres knows disable, prefer
    /// and require), the server's certificate not checked.
    fn from(pg: tokio_postgres::Config) -> DbConfig {
        let mode = match pg.get_ssl_mode() {
            PgSslMode::Disable => SslMode::Disable,
            PgSslMode::Require => SslMode::Require,
            _ => SslMode::Prefer,
        };
        let settings = Settings {
            mode,
            root: None,
            cert: None,
            key: None,
            home: None,
        };
        DbConfig::with_settings(pg, settings).expect("no file to read: cannot fail")
    }
}

fn describe_tls(e: &rustls::Error, mode: &str, root: &str, hosts: String) -> String {
    match e {
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => format!(
            "the host name ({hosts}) does not match the server's certificate (sslmode={mode}): \
             connect by a name the certificate holds, or set sslmode=verify-ca to check only \
             who signed it"
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer | CertificateError::BadSignature,
        ) => format!(
            "the server's certificate is not signed by sslrootcert ({root}) (sslmode={mode}): set \
             sslrootcert to the CA certificate that signed it"
        ),
        rustls::Error::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        ) => format!("the server's certificate has expired (sslmode={mode})"),
        rustls::Error::AlertReceived(alert) => format!(
            "the server refused the TLS connection ({alert:?}): if it asks for a client \
             certificate, set sslcert and sslkey to one its CA signed"
        ),
        other => format!("TLS with the server failed (sslmode={mode}): {other}"),
    }
}

/// The TLS settings, from wherever they came.
struct Settings {
    mode: SslMode,
    root: Option<String>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    home: Option<PathBuf>,
}

/// Removes the TLS settings from a URL's query (or from `key=value` pairs), returning the rest
/// and the settings, in order.
fn split_ssl_settings(url: &str) -> Result<(String, Vec<(String, String)>), String> {
    let mut found = Vec::new();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), found));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let key = percent_decode(k)?;
            if KEYS.contains(&key.as_str()) {
                found.push((key, percent_decode(v)?));
            } else {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, found));
    }
    // key=value pairs, values perhaps in single quotes with backslash escapes.
    let mut kept = Vec::new();
    let mut chars = url.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            break;
        }
        let mut raw = String::new();
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            raw.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'=') {
            raw.push('=');
            chars.next();
            while chars.peek().is_some_and(|c| c.is_whitespace()) {
                chars.next();
            }
            if chars.peek() == Some(&'\'') {
                raw.push('\'');
                chars.next();
                loop {
                    match chars.next() {
                        None => return Err("unterminated quoted value in the database URL".into()),
                        Some('\'') => {
                            raw.push('\'');
                            break;
                        }
                        Some('\\') => {
                            let c = chars.next().ok_or("a backslash ends the database URL")?;
                            raw.push('\\');
                            raw.push(c);
                            value.push(c);
                        }
                        Some(c) => {
                            raw.push(c);
                            value.push(c);
                        }
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c.is_whitespace() {
                        break;
                    }
                    raw.push(c);
                    value.push(c);
                    chars.next();
                }
            }
        }
        if KEYS.contains(&key.as_str()) {
            found.push((key, value));
        } else {
            kept.push(raw);
        }
    }
    Ok((kept.join(" "), found))
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "a bad percent escape in the database URL's query".to_owned())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the database URL's query is not UTF-8".to_owned())
}

/// The rustls configuration for the settings, and the root certificates' name for messages.
fn client_config(s: &Settings) -> Result<(ClientConfig, Option<String>), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let default_root = s.home.as_ref().map(|h| h.join(".postgresql/root.crt"));
    // libpq: `require` with a root certificate checks it as `verify-ca` does.
    let root = match (&s.root, s.mode) {
        (Some(r), _) => Some(r.clone()),
        (None, SslMode::VerifyCa | SslMode::VerifyFull | SslMode::Require) => default_root
            .as_ref()
            .filter(|p| p.exists())
            .map(|p| p.display().to_string()),
        (None, _) => None,
    };
    let check = match (s.mode, &root) {
        (SslMode::VerifyFull, _) => Check::Full,
        (SslMode::VerifyCa, _) | (SslMode::Require, Some(_)) => Check::Ca,
        _ => Check::Nothing,
    };
    let webpki = match check {
        Check::Nothing => None,
        Check::Ca | Check::Full => {
            let Some(root) = &root else {
                return Err(format!(
                    "sslmode={} checks the server's certificate but no CA is given: set \
                     sslrootcert to the CA certificate's file (or sslrootcert=system for the \
                     public CAs); ~/.postgresql/root.crt does not exist",
                    s.mode.name()
                ));
            };
            let roots = root_store(root)?;
            Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("sslrootcert ({root}): {e}"))?,
            )
        }
    };
    let verifier = Verifier {
        check,
        webpki,
        provider: provider.clone(),
    };
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let client = client_identity(s)?;
    let config = match client {
        Some((certs, key)) => builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("sslcert and sslkey do not make a client certificate: {e}"))?,
        None => builder.with_no_client_auth(),
    };
    Ok((config, root))
}

fn root_store(root: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if root == "system" {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    }
    let certs = read_certs(Path::new(root), "sslrootcert")?;
    let (_, ignored) = roots.add_parsable_certificates(certs);
    if roots.is_empty() {
        return Err(format!(
            "sslrootcert ({root}) holds no CA certificate rustls can use ({ignored} ignored)"
        ));
    }
    Ok(roots)
}

fn read_certs(path: &Path, setting: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let what = |e: &dyn fmt::Display| format!("{setting} ({}): {e}", path.display());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| what(&e))?
        .collect::<Result<_, _>>()
        .map_err(|e| what(&e))?;
    if certs.is_empty() {
        return Err(what(&"no PEM certificate in the file"));
    }
    Ok(certs)
}

/// The client certificate and key: both given, or libpq's default files when both exist.
fn client_identity(
    s: &Settings,
) -> Result<Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>, String> {
    let defaults = s.home.as_ref().map(|h| {
        (
            h.join(".postgresql/postgresql.crt"),
            h.join(".postgresql/postgresql.key"),
        )
    });
    let (cert, key) = match (&s.cert, &s.key) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        (Some(_), None) => {
            return Err("sslcert is set but sslkey is not: set both, or neither".into());
        }
        (None, Some(_)) => {
            return Err("sslkey is set but sslcert is not: set both, or neither".into());
        }
        (None, None) => match defaults {
            Some((c, k)) if c.exists() && k.exists() => (c, k),
            _ => return Ok(None),
        },
    };
    let certs = read_certs(&cert, "sslcert")?;
    let key = PrivateKeyDer::from_pem_file(&key)
        .map_err(|e| format!("sslkey ({}): {e}", key.display()))?;
    Ok(Some((certs, key)))
}

#[derive(Clone, Copy, Debug)]
enum Check {
    /// `prefer`, `require` without a root certificate: encrypted, the certificate unchecked.
    Nothing,
    /// Signed by the root certificates, whatever names it holds.
    Ca,
    /// Signed by them, and holds the host name.
    Full,
}

#[derive(Debug)]
struct Verifier {
    check: Check,
    webpki: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        // The chain is checked before the name: a name error means the chain was good.
        match (
            self.check,
            webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now),
        ) {
            (
                Check::Ca,
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )),
            ) => Ok(ServerCertVerified::assertion()),
            (_, r) => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Makes TLS connections for tokio-postgres; `None` when TLS is off.
#[derive(Clone)]
struct MakeRustls {
    config: Option<Arc<ClientConfig>>,
}

impl<S> MakeTlsConnect<S> for MakeRustls
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, io::Error> {
        // Asked for every TCP host, TLS or not: a name TLS cannot take fails only if TLS is used.
        Ok(RustlsConnect {
            config: self.config.clone(),
            name: ServerName::try_from(domain.to_owned()).ok(),
            domain: domain.to_owned(),
        })
    }
}

#[derive(Debug)]
pub struct RustlsConnect {
    config: Option<Arc<ClientConfig>>,
    name: Option<ServerName<'static>>,
    domain: String,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<RustlsStream<S>>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let config = self.config.ok_or_else(|| io::Error::other("TLS is off"))?;
            let name = self.name.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{}: not a host name TLS can check", self.domain),
                )
            })?;
            let tls = tokio_rustls::TlsConnector::from(config)
                .connect(name, stream)
                .await?;
            Ok(RustlsStream(tls))
        })
    }
}

/// A TLS connection to the server.
pub struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S> fmt::Debug for RustlsStream<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RustlsStream")
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM then goes without channel binding (channel_binding=prefer, the default).
        ChannelBinding::none()
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
