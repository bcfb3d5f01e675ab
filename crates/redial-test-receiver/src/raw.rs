//! Servers an HTTP framework cannot be: a raw TCP one that misbehaves (reset, garbage, hang)
//! and an HTTPS one that requires a client certificate.

use crate::lock;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What a raw TCP server does with each connection.
#[derive(Clone, Copy, Debug)]
pub enum Misbehaviour {
    /// Reads the request, then resets the connection (RST) without answering.
    Reset,
    /// Answers bytes that are not HTTP.
    Garbage,
    /// Answers a status line and headers promising a body it never finishes.
    Truncated,
    /// Reads the request and never answers.
    Hang,
}

/// A raw TCP server that misbehaves on every connection, on 127.0.0.1 at a free port.
#[derive(Debug)]
pub struct RawServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawServer {
    pub async fn start(how: Misbehaviour) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    let _ = sock.read(&mut buf).await;
                    match how {
                        Misbehaviour::Reset => {
                            // A zero linger makes the close an RST; with zero it does not block.
                            #[allow(deprecated)]
                            let _ = sock.set_linger(Some(Duration::ZERO));
                            drop(sock);
                        }
                        Misbehaviour::Garbage => {
                            let _ = sock
                                .write_all(b"SMTP READY\r\n\r\nthis is not http\r\n")
                                .await;
                            let _ = sock.shutdown().await;
                        }
                        Misbehaviour::Truncated => {
                            let _ = sock
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\npartial")
                                .await;
                            let _ = sock.shutdown().await;
                        }
                        Misbehaviour::Hang => {
                            tokio::time::sleep(Duration::from_secs(3600)).await;
                        }
                    }
                });
            }
        });
        RawServer { addr, task }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// An HTTPS server on `127.0.0.1:0` that requires a client certificate signed by a CA it is
/// given (mutual TLS, as banks and B2B partners run): a client with one gets `200 ok` to any
/// request (one request a connection), a client without one, or with one another CA signed, is
/// refused in the handshake. Its own certificate is the one given (for `localhost`).
#[derive(Debug)]
pub struct TlsServer {
    addr: SocketAddr,
    accepted: Arc<std::sync::atomic::AtomicUsize>,
    /// Each answered request's head (its request line and headers), in order.
    heads: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsServer {
    /// Serves with `cert` and `key` (PEM files), requiring client certificates `client_ca`
    /// signed.
    pub async fn start(
        cert: &std::path::Path,
        key: &std::path::Path,
        client_ca: &std::path::Path,
    ) -> TlsServer {
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(client_ca).expect("client CA file") {
            roots
                .add(c.expect("a client CA certificate"))
                .expect("a usable CA");
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .expect("client verifier");
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .expect("server certificate file")
            .map(|c| c.expect("a server certificate"))
            .collect();
        let key = PrivateKeyDer::from_pem_file(key).expect("server key");
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .expect("server config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = accepted.clone();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = heads.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let counted = counted.clone();
                let kept = kept.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(sock).await else {
                        return;
                    };
                    // The request's head, then the answer; the body (if any) is not read.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    lock(&kept).push(String::from_utf8_lossy(&head).into_owned());
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let _ = tls
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        TlsServer {
            addr,
            accepted,
            heads,
            task,
        }
    }

    /// `https://localhost:PORT{path}` (the name its certificate holds).
    pub fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.addr.port())
    }

    /// Requests answered (each over a handshake that presented an accepted certificate).
    pub fn answered(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The heads of the requests answered (request line and headers, as sent), in order.
    pub fn heads(&self) -> Vec<String> {
        lock(&self.heads).clone()
    }
}
