//! What a TLS failure's reason says: the certificate presented (or that none was, when the
//! server asked for one), and why a server closed a connection before the request went out.
//!
//! Under TLS 1.3 a server checks the client's certificate after the client has finished its
//! half of the handshake: the HTTP client holds a connection it thinks is ready, the server's
//! refusal (an alert: `CertificateRequired`, `UnknownCA`, `BadCertificate`) arrives on it, and
//! the pool drops it as "connection was not ready", the alert's words lost. That is a refused
//! certificate, not a reset, and the person reading the attempt needs to know which. So, only
//! then, one handshake of our own with the same certificate and CA, no request sent, reads what
//! the server answers: its alert, or nothing (the closed connection was something else).

use crate::credentials::{EndpointCredentials, Mtls};
use crate::handler::AttemptOutput;
use crate::net::is_public;
use redial_policy::{Outcome, TransportError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// Explains `out`, an attempt at `url` (of `endpoint`) sent with `credentials`: a connection
/// closed before the request went out is asked again ([`refusal`]), and is a `tls` error when
/// the server's alert answers; a `tls` error's reason names the certificate presented, or says
/// that none was when the server asked for one (`CertificateRequired`). A refused server
/// certificate needs no note.
pub(crate) async fn explain(
    out: &mut AttemptOutput,
    url: &url::Url,
    credentials: Option<&EndpointCredentials>,
    endpoint: &str,
    allow_private: bool,
    limit: Duration,
) {
    let not_ready = out
        .error_detail
        .as_deref()
        .is_some_and(|d| d.contains("connection was not ready"));
    if out.outcome == Outcome::Transport(TransportError::ConnectionReset) && not_ready {
        let tls = credentials.and_then(|c| c.tls());
        if let Some(alert) = refusal(url, tls, allow_private, limit).await {
            let detail = out.error_detail.take().unwrap_or_default();
            out.outcome = Outcome::Transport(TransportError::Tls);
            out.error_detail = Some(format!(
                "{detail}; the server closed the connection after the TLS handshake, and a second handshake, without a request, was refused: {alert}"
            ));
        }
    }
    if out.outcome != Outcome::Transport(TransportError::Tls) {
        return;
    }
    let detail = out.error_detail.take().unwrap_or_default();
    let presented = match credentials.and_then(|c| c.client_certificate()) {
        Some(c) => Some(format!(
            "the client certificate presented: {}",
            c.cert_file.display()
        )),
        None if detail.contains("CertificateRequired") => Some(format!(
            "no client certificate presented: {endpoint} has none configured"
        )),
        None => None,
    };
    out.error_detail = Some(match presented {
        Some(p) => format!("{detail} ({p})"),
        None => detail,
    });
}

/// The alert (or refused handshake) `url`'s server answers a handshake with, presenting the
/// client certificate and trusting the CA of `tls`, within `limit`. None when the server took
/// the handshake and said nothing, or could not be asked (not HTTPS, refused by the network
/// policy, unreachable, files that do not load).
pub(crate) async fn refusal(
    url: &url::Url,
    tls: Option<&Mtls>,
    allow_private: bool,
    limit: Duration,
) -> Option<String> {
    if url.scheme() != "https" {
        return None;
    }
    let host = url.host_str()?.trim_matches(['[', ']']).to_owned();
    let port = url.port_or_known_default()?;
    let config = Arc::new(client_config(tls).ok()?);
    let name = ServerName::try_from(host.clone()).ok()?;
    let asked = async {
        let addr: SocketAddr = tokio::net::lookup_host((host.as_str(), port))
            .await
            .ok()?
            .find(|a| allow_private || is_public(a.ip()))?;
        let tcp = tokio::net::TcpStream::connect(addr).await.ok()?;
        let mut stream = match tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
        {
            Ok(s) => s,
            // Refused within the handshake (TLS 1.2, or the server's own certificate).
            Err(e) if e.kind() != std::io::ErrorKind::UnexpectedEof => return Some(e.to_string()),
            Err(_) => return None,
        };
        // Nothing is sent: a server that took the handshake waits for a request; one that
        // refused it says so and closes.
        let mut byte = [0u8; 1];
        match stream.read(&mut byte).await {
            Err(e) if e.to_string().contains("alert") => Some(e.to_string()),
            _ => None,
        }
    };
    tokio::time::timeout(limit, asked).await.ok().flatten()
}

/// The public roots and the endpoint's CA, presenting its certificate if it has one.
fn client_config(tls: Option<&Mtls>) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(ca) = tls.and_then(|t| t.ca_file.as_ref()) {
        for c in CertificateDer::pem_file_iter(ca).map_err(|e| e.to_string())? {
            roots
                .add(c.map_err(|e| e.to_string())?)
                .map_err(|e| e.to_string())?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    match tls.and_then(|t| t.certificate.as_ref()) {
        None => Ok(builder.with_no_client_auth()),
        Some(c) => {
            let chain = CertificateDer::pem_file_iter(&c.cert_file)
                .map_err(|e| e.to_string())?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let key = PrivateKeyDer::from_pem_file(&c.key_file).map_err(|e| e.to_string())?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| e.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::refusal;
    use crate::credentials::Mtls;
    use std::time::Duration;

    /// The probe against a real TLS server that requires a client certificate (files made by
    /// `scripts/test-certs`): the alert for none and for one another CA signed; nothing for the
    /// right one (the server then waits for a request, so that case ends at the limit).
    #[tokio::test]
    async fn a_refused_certificate_is_told_by_the_servers_alert() {
        let certs = tempfile::tempdir().expect("dir");
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-certs");
        let made = std::process::Command::new(script)
            .arg(certs.path())
            .status()
            .expect("run scripts/test-certs (needs openssl)");
        assert!(made.success(), "scripts/test-certs failed");
        let at = |name: &str| certs.path().join(name);
        let server = redial_test_receiver::TlsServer::start(
            &at("server.crt"),
            &at("server.key"),
            &at("ca.crt"),
        )
        .await;
        let url = url::Url::parse(&server.url("/pay")).expect("url");
        let generous = Duration::from_secs(60);

        let none = Mtls::trusting(at("ca.crt")).expect("loads");
        let said = refusal(&url, Some(&none), true, generous).await;
        assert!(
            said.as_deref()
                .is_some_and(|s| s.contains("CertificateRequired")),
            "{said:?}"
        );
        let wrong = Mtls::new(
            at("other-client.crt"),
            at("other-client.key"),
            Some(at("ca.crt")),
        )
        .expect("loads");
        let said = refusal(&url, Some(&wrong), true, generous).await;
        assert!(
            said.as_deref().is_some_and(|s| s.contains("alert")),
            "{said:?}"
        );
        // The network policy holds for the probe too: loopback is not asked.
        assert_eq!(refusal(&url, Some(&none), false, generous).await, None);

        let right =
            Mtls::new(at("client.crt"), at("client.key"), Some(at("ca.crt"))).expect("loads");
        let short = Duration::from_millis(300);
        assert_eq!(refusal(&url, Some(&right), true, short).await, None);
        assert_eq!(server.answered(), 0, "the probe sends no request");
    }
}
