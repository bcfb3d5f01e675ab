//! Mutual TLS: a client certificate presented in the handshake, a private CA trusted, the
//! files read again when they change.

use super::Stamp;
use std::path::PathBuf;
use std::sync::Mutex;

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
