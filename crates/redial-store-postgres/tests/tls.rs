//! TLS to PostgreSQL against real servers: certificates made by this test (`scripts/test-certs`,
//! openssl), a throwaway server with `ssl = on` and one without (`scripts/throwaway-postgres`),
//! each connection asked whether it is encrypted (`pg_stat_ssl`). Every `sslmode`, a wrong CA,
//! a host name the certificate does not hold, a client certificate that `pg_hba.conf` requires,
//! the `PGSSL*` variables, and jobs run through the store over verify-full.

use redial_policy::Timestamp;
use redial_store::testkit::new_job;
use redial_store::Store;
use redial_store_postgres::{DbConfig, PgStore};
use std::path::{Path, PathBuf};
use std::process::Command;

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts")
}

/// A throwaway server, stopped and removed when dropped.
struct Server {
    data: String,
    port: u16,
}

impl Server {
    fn start(tls: Option<&Path>) -> Server {
        let mut cmd = Command::new(scripts().join("throwaway-postgres"));
        cmd.arg("start");
        if let Some(certs) = tls {
            cmd.arg("--tls").arg(certs);
        }
        let out = cmd.output().expect("run scripts/throwaway-postgres");
        assert!(
            out.status.success(),
            "throwaway-postgres: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .unwrap_or_else(|| panic!("{name} in {text}"))
                .to_owned()
        };
        let url = value("DATABASE_URL");
        let port = url
            .rsplit_once(':')
            .and_then(|(_, rest)| rest.split('/').next())
            .and_then(|p| p.parse().ok())
            .expect("a port");
        Server {
            data: value("REDIAL_TEST_PGDATA"),
            port,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(scripts().join("throwaway-postgres"))
            .arg("stop")
            .arg(&self.data)
            .status();
    }
}

/// Connects with `url` (the environment read through `env`); says whether the connection is
/// encrypted, or why it failed.
async fn encrypted_with(url: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    let config = DbConfig::parse_with(url, env)?;
    let (client, connection) = config.connect().await?;
    let driver = tokio::spawn(connection);
    let ssl: bool = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    drop(client);
    let _ = driver.await;
    Ok(ssl)
}

async fn encrypted(url: &str) -> Result<bool, String> {
    encrypted_with(url, &|_| None).await
}

fn refused(r: Result<bool, String>, says: &str) -> String {
    match r {
        Ok(ssl) => panic!("connected (ssl {ssl}); expected a refusal saying {says:?}"),
        Err(e) => {
            eprintln!("refused: {e}");
            assert!(e.contains(says), "{e:?} does not say {says:?}");
            e
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sslmode_against_servers_with_and_without_tls() {
    let certs = tempfile::tempdir().expect("a folder");
    let made = Command::new(scripts().join("test-certs"))
        .arg(certs.path())
        .status()
        .expect("run scripts/test-certs");
    assert!(made.success(), "scripts/test-certs failed");
    let file = |name: &str| certs.path().join(name).display().to_string();
    let (ca, other_ca) = (file("ca.crt"), file("other-ca.crt"));
    let tls = Server::start(Some(certs.path()));
    let plain = Server::start(None);
    let at = |host: &str, server: &Server, query: &str| {
        format!(
            "postgres://redial:hunter2@{host}:{}/postgres?{query}",
            server.port
        )
    };

    // verify-full: the right CA and a name the certificate holds.
    let full = at(
        "localhost",
        &tls,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    assert_eq!(encrypted(&full).await, Ok(true));
    // A CA that did not sign the server's certificate.
    let e = refused(
        encrypted(&at(
            "localhost",
            &tls,
            &format!("sslmode=verify-full&sslrootcert={other_ca}"),
        ))
        .await,
        "not signed by sslrootcert",
    );
    assert!(e.contains(&other_ca), "{e}");
    // 127.0.0.1 is not a name the certificate holds: refused under verify-full, accepted under
    // verify-ca (and under require with a root certificate, which libpq checks as verify-ca).
    let e = refused(
        encrypted(&at(
            "127.0.0.1",
            &tls,
            &format!("sslmode=verify-full&sslrootcert={ca}"),
        ))
        .await,
        "does not match the server's certificate",
    );
    assert!(e.contains("sslmode=verify-ca"), "names the setting: {e}");
    assert!(!e.contains("hunter2"), "the password shows: {e}");
    let ca_only = at(
        "127.0.0.1",
        &tls,
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    );
    assert_eq!(encrypted(&ca_only).await, Ok(true));
    let require_ca = at(
        "127.0.0.1",
        &tls,
        &format!("sslmode=require&sslrootcert={ca}"),
    );
    assert_eq!(encrypted(&require_ca).await, Ok(true));
    refused(
        encrypted(&at(
            "localhost",
            &tls,
            &format!("sslmode=require&sslrootcert={other_ca}"),
        ))
        .await,
        "not signed by sslrootcert",
    );

    // require, prefer and disable, against each server.
    assert_eq!(
        encrypted(&at("127.0.0.1", &tls, "sslmode=require")).await,
        Ok(true)
    );
    let e = refused(
        encrypted(&at("127.0.0.1", &plain, "sslmode=require")).await,
        "the server does not accept TLS and sslmode=require",
    );
    assert!(!e.contains("hunter2"), "{e}");
    assert_eq!(
        encrypted(&at("127.0.0.1", &tls, "")).await,
        Ok(true),
        "prefer"
    );
    assert_eq!(
        encrypted(&at("127.0.0.1", &plain, "")).await,
        Ok(false),
        "prefer, the server without TLS"
    );
    assert_eq!(
        encrypted(&at("127.0.0.1", &tls, "sslmode=disable")).await,
        Ok(false)
    );

    // The environment's settings, and the URL winning over them.
    let env = |name: &str| match name {
        "PGSSLMODE" => Some("verify-full".to_owned()),
        "PGSSLROOTCERT" => Some(file("ca.crt")),
        _ => None,
    };
    assert_eq!(
        encrypted_with(&at("localhost", &tls, ""), &env).await,
        Ok(true)
    );
    refused(
        encrypted_with(&at("127.0.0.1", &tls, ""), &env).await,
        "does not match",
    );
    assert_eq!(
        encrypted_with(&at("127.0.0.1", &tls, "sslmode=verify-ca"), &env).await,
        Ok(true)
    );

    // A client certificate, which pg_hba.conf requires of the user certuser.
    assert_eq!(
        encrypted(&at("127.0.0.1", &tls, "")).await,
        Ok(true),
        "the superuser connects"
    );
    {
        let config = DbConfig::parse(&at("127.0.0.1", &tls, "sslmode=require")).expect("parses");
        let (client, connection) = config.connect().await.expect("connect");
        let driver = tokio::spawn(connection);
        client
            .batch_execute("CREATE ROLE certuser LOGIN SUPERUSER")
            .await
            .expect("a role for the client certificate");
        drop(client);
        let _ = driver.await;
    }
    let as_certuser = |query: &str| {
        format!(
            "postgres://certuser@localhost:{}/postgres?sslrootcert={ca}&{query}",
            tls.port
        )
    };
    let with_cert = format!(
        "sslmode=verify-full&sslcert={}&sslkey={}",
        file("client.crt"),
        file("client.key")
    );
    assert_eq!(encrypted(&as_certuser(&with_cert)).await, Ok(true));
    refused(
        encrypted(&as_certuser("sslmode=verify-full")).await,
        "certificate",
    );

    // Jobs run through the store over verify-full.
    let store = PgStore::connect(&full).await.expect("the store connects");
    let id = format!("tls-{}", std::process::id());
    store
        .job_insert(new_job(&id, "q"))
        .await
        .expect("insert over TLS");
    let now = Timestamp::from_unix_millis(4_000_000_000_000);
    let leased = store
        .job_lease_available(redial_store::LeaseParams {
            queue: "q".into(),
            limit: 10,
            owner: "w".into(),
            now,
            lease_until: now.saturating_add(std::time::Duration::from_secs(30)),
        })
        .await
        .expect("lease over TLS");
    assert_eq!(leased.len(), 1);
}
