//! Endpoint credentials (issue 58) against real HTTP on loopback: an OAuth2 token server and an
//! API that takes only the tokens it issued, both on the test's manual clock, and receivers that
//! show what a request carried. The secrets never reach the job, its attempts or the database.

mod support;

use redial_engine::credentials::{
    Auth, ClientAuth, Credentials, EndpointCredentials, OAuth2, Secret,
};
use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{Clock, ManualClock};
use redial_store::{JobId, JobState, Store};
use redial_test_receiver::{Behaviour, Receiver, Reply};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use support::virtual_time::{count, manual_clock, post_job, quick_policy, setup, STEP};
use support::{receiver_on, TestEngine};

/// The engine of these tests, its HTTP executor adding `auth` to requests for `rx`'s origin.
async fn engine_with(clock: Arc<ManualClock>, rx: &Receiver, auth: Auth) -> TestEngine {
    let credentials = EndpointCredentials {
        tls: None,
        auth,
        allow_job_credentials: false,
    };
    engine_for(clock, &rx.url("/"), credentials).await
}

/// The engine of these tests, its HTTP executor giving `credentials` to requests for `url`'s
/// origin.
async fn engine_for(
    clock: Arc<ManualClock>,
    url: &str,
    credentials: EndpointCredentials,
) -> TestEngine {
    let credentials = Credentials {
        by_endpoint: BTreeMap::from([(origin(url), Arc::new(credentials))]),
        profiles: BTreeMap::new(),
        clock: clock.clone(),
    };
    engine_with_all(clock, credentials).await
}

fn origin(url: &str) -> String {
    url::Url::parse(url)
        .expect("url")
        .origin()
        .ascii_serialization()
}

/// The engine of these tests, its HTTP executor with every credential given.
async fn engine_with_all(clock: Arc<ManualClock>, credentials: Credentials) -> TestEngine {
    let executor = HttpExecutor::new(HttpConfig {
        allow_private_networks: true,
        credentials,
        ..HttpConfig::default()
    })
    .expect("http client");
    setup(clock, 32, quick_policy())
        .executor(Arc::new(executor))
        .start()
        .await
}

/// `rx` as an OAuth2 token server (`/token`, tokens living `lifetime` on its clock) and an API
/// (`/api`) that takes only the tokens it issued.
fn token_server(rx: &Receiver, lifetime: Duration) {
    rx.behave("/token", Behaviour::TokenServer { lifetime });
    rx.behave("/api", Behaviour::RequiresToken);
}

fn oauth2(rx: &Receiver, secret: &str) -> Auth {
    Auth::OAuth2(Box::new(OAuth2::new(
        rx.url("/token"),
        "client-1".into(),
        Secret::literal(secret),
        vec!["charges:write".into()],
        None,
        ClientAuth::ClientSecretBasic,
    )))
}

/// The database's bytes (the file and its WAL), to search for a secret.
fn database_bytes(s: &TestEngine) -> Vec<u8> {
    let mut all = Vec::new();
    for name in ["redial.db", "redial.db-wal"] {
        if let Ok(b) = std::fs::read(s.dir.path().join(name)) {
            all.extend(b);
        }
    }
    all
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// 1,000 jobs in four waves, the clock moved past the token's life between waves: every job
/// completes, the token is fetched once a wave (before it expires, so no request is refused),
/// and the client secret and tokens are nowhere in the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_jobs_across_three_token_expiries_all_complete() {
    let clock = manual_clock();
    let rx = receiver_on(&clock).await;
    token_server(&rx, Duration::from_secs(60));
    let s = engine_with(clock.clone(), &rx, oauth2(&rx, "s3cret-client-value")).await;
    for wave in 0..4 {
        s.enqueue_posts((0..250).map(|i| (format!("w{wave}-{i}"), rx.url("/api"), None)))
            .await;
        let want = 250 * (wave + 1);
        let c = s
            .run_until("the wave completed", STEP, |c| {
                count(c, "completed") == want
            })
            .await;
        assert_eq!(c.len(), 1, "nothing dead or waiting: {c:?}");
        // Past the token's life (60 s): the next wave needs a new one.
        clock.advance(Duration::from_secs(70));
    }
    let refused = rx
        .received("/api")
        .iter()
        .filter(|r| r.status == 401)
        .count();
    assert!(refused <= 3, "at most one 401 per expiry: {refused}");
    let fetched = rx.received("/token");
    assert_eq!(fetched.len(), 4, "one token per wave");
    let first = &fetched[0];
    assert!(
        first
            .header("authorization")
            .is_some_and(|a| a.starts_with("Basic ")),
        "client_secret_basic"
    );
    assert!(first.body.contains("grant_type=client_credentials"));
    assert!(first.body.contains("scope=charges%3Awrite"));
    let (job, attempts) = s
        .store
        .job_get(&JobId::from("w3-0"))
        .await
        .expect("get")
        .expect("kept");
    assert_eq!((job.state, attempts.len()), (JobState::Completed, 1));
    assert!(job.request.headers.is_empty(), "nothing added to the job");
    let bytes = database_bytes(&s);
    assert!(
        !contains(&bytes, "s3cret-client-value"),
        "no client secret stored"
    );
    assert!(!contains(&bytes, "tok-1"), "no token stored");
    s.stop().await;
}

/// A token the API stops taking before its time (revoked) is replaced once: the 401 costs no
/// attempt and the job completes; a 401 to a token fetched for that very attempt is the API's
/// answer, permanent as before, and is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_fetches_a_new_token_once_and_a_401_to_a_new_token_is_permanent() {
    let clock = manual_clock();
    let rx = receiver_on(&clock).await;
    token_server(&rx, Duration::from_secs(3600));
    let s = engine_with(clock.clone(), &rx, oauth2(&rx, "client-secret")).await;
    s.enqueue_posts([("first".to_owned(), rx.url("/api"), None)])
        .await;
    s.run_until("first completed", STEP, |c| count(c, "completed") == 1)
        .await;
    rx.revoke_tokens();
    s.enqueue_posts([("second".to_owned(), rx.url("/api"), None)])
        .await;
    s.run_until("second completed", STEP, |c| count(c, "completed") == 2)
        .await;
    let statuses: Vec<u16> = rx.received("/api").iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 401, 200], "one refusal, one retry");
    assert_eq!(rx.received("/token").len(), 2);
    let (job, attempts) = s
        .store
        .job_get(&JobId::from("second"))
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(
        (job.attempts, attempts.len()),
        (0, 1),
        "the 401 cost no attempt"
    );

    // An API that refuses every token: the new token's 401 stands, once.
    rx.script("/refuses", vec![Reply::status(401)]);
    rx.revoke_tokens();
    s.enqueue_posts([("third".to_owned(), rx.url("/refuses"), None)])
        .await;
    let c = s
        .run_until("third dead", STEP, |c| count(c, "dead:permanent") == 1)
        .await;
    assert_eq!(count(&c, "completed"), 2, "{c:?}");
    assert_eq!(
        rx.received("/refuses").len(),
        2,
        "the old token's 401, then the new one's"
    );
    s.stop().await;
}

/// The token endpoint's 429 defers the job (no attempt spent) until its Retry-After; its outage
/// (503s) opens its own breaker (not asked again for a second, doubling to a minute) and, seen
/// by the API's endpoint as 503s, the endpoint's: the 50 jobs are held, none dead after nine
/// minutes, and the token server is asked about once a minute, not once a job; every job
/// completes once tokens come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoints_refusals_hold_the_jobs_instead_of_killing_them() {
    let clock = manual_clock();
    let rx = receiver_on(&clock).await;
    rx.script(
        "/token",
        vec![
            Reply::status(429).header("retry-after", "5"),
            Reply::status(503),
        ],
    );
    rx.behave("/api", Behaviour::RequiresToken);
    let s = engine_with(clock.clone(), &rx, oauth2(&rx, "client-secret")).await;
    s.enqueue_posts([("j".to_owned(), rx.url("/api"), None)])
        .await;
    s.settle().await;
    let (job, attempts) = s
        .store
        .job_get(&JobId::from("j"))
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(
        job.state,
        JobState::Deferred,
        "deferred by the token endpoint's 429"
    );
    assert_eq!(job.attempts, 0);
    let reason = attempts[0].error_detail.clone().unwrap_or_default();
    assert!(
        reason.contains("no access token") && reason.contains("HTTP 429"),
        "{reason}"
    );
    assert!(rx.received("/api").is_empty(), "nothing sent to the API");
    // Then an outage of the token server, with more jobs waiting: the endpoint's protection
    // takes it as the API's own outage (its breaker opens and holds the jobs).
    s.enqueue_posts((0..49).map(|i| (format!("k{i}"), rx.url("/api"), None)))
        .await;
    let c = s
        .try_run_until(Duration::from_secs(1), 600, |c| count(c, "completed") == 50)
        .await
        .expect_err("no token yet");
    let asked = rx.received("/token").len();
    println!(
        "ten minutes of the token server down: {c:?}, {asked} token requests, at T0 + {:?}",
        clock.now().saturating_since(support::T0)
    );
    assert!(c.keys().all(|k| !k.starts_with("dead")), "{c:?}");
    // 5 s (its 429's Retry-After), then 2, 4 ... 32 s, then a minute each: about 16 in ten
    // minutes (139 before the token endpoint had a breaker of its own).
    assert!(
        asked <= 20,
        "the token endpoint's breaker bounds its requests: {asked}"
    );
    rx.behave(
        "/token",
        Behaviour::TokenServer {
            lifetime: Duration::from_secs(3600),
        },
    );
    let c = s
        .run_until("completed", Duration::from_secs(1), |c| {
            count(c, "completed") == 50
        })
        .await;
    assert_eq!(c.len(), 1, "{c:?}");
    s.stop().await;
}

/// A bearer token from a file, a header of the endpoint's naming, HTTP basic: each request
/// carries it, the job does not, and a file that changes is read again (rotation).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_credentials_are_added_and_a_rotated_file_is_read_again() {
    let clock = manual_clock();
    let rx = receiver_on(&clock).await;
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("token");
    std::fs::write(&file, "first-token\n").expect("write");
    let auth = Auth::Bearer {
        token: Secret::file(&file).expect("readable"),
    };
    let s = engine_with(clock.clone(), &rx, auth).await;
    s.enqueue_posts([("a".to_owned(), rx.url("/bearer"), None)])
        .await;
    s.run_until("a", STEP, |c| count(c, "completed") == 1).await;
    // A rotation: the new content (and a new size, whatever the file system's time stamps).
    std::fs::write(&file, "the-second-token\n").expect("rotate");
    s.enqueue_posts([("b".to_owned(), rx.url("/bearer"), None)])
        .await;
    s.run_until("b", STEP, |c| count(c, "completed") == 2).await;
    let seen: Vec<String> = rx
        .received("/bearer")
        .iter()
        .map(|r| r.header("authorization").unwrap_or_default().to_owned())
        .collect();
    assert_eq!(seen, ["Bearer first-token", "Bearer the-second-token"]);
    let bytes = database_bytes(&s);
    assert!(!contains(&bytes, "first-token") && !contains(&bytes, "the-second-token"));
    s.stop().await;

    for (auth, header, want) in [
        (
            Auth::Header {
                name: "X-Api-Key".into(),
                value: Secret::literal("key-123"),
            },
            "x-api-key",
            "key-123",
        ),
        (
            Auth::Basic {
                username: "user".into(),
                password: Secret::literal("pass"),
            },
            "authorization",
            "Basic dXNlcjpwYXNz",
        ),
    ] {
        let clock = manual_clock();
        let rx = receiver_on(&clock).await;
        let s = engine_with(clock, &rx, auth).await;
        s.enqueue_posts([("c".to_owned(), rx.url("/p"), None)])
            .await;
        s.run_until("c", STEP, |c| count(c, "completed") == 1).await;
        assert_eq!(rx.received("/p")[0].header(header), Some(want));
        s.stop().await;
    }
}

/// Certificates made for this test by `scripts/test-certs` (openssl): a CA, a server
/// certificate for localhost, a client certificate the CA signed, and one another CA signed.
fn test_certs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-certs");
    let made = std::process::Command::new(script)
        .arg(dir.path())
        .status()
        .expect("run scripts/test-certs (needs openssl)");
    assert!(made.success(), "scripts/test-certs failed");
    dir
}

/// Enqueues job `id` to `server` and runs it once: the server refuses the handshake, so the job
/// is retried (not dead), its attempt is a `tls` error, and nothing was answered. The attempt's
/// reason.
async fn refused_in_handshake(
    s: &TestEngine,
    server: &redial_test_receiver::TlsServer,
    id: &str,
) -> String {
    s.enqueue_posts([(id.to_owned(), server.url("/pay"), None)])
        .await;
    s.settle().await;
    let (job, attempts) = s
        .store
        .job_get(&JobId::from(id))
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(job.state, JobState::Scheduled, "retried, not dead");
    assert_eq!(
        attempts[0].error.as_deref(),
        Some("tls"),
        "{:?}",
        attempts[0]
    );
    assert_eq!(server.answered(), 0);
    attempts[0].error_detail.clone().unwrap_or_default()
}

/// A server that requires a client certificate: refused in the handshake with one another CA
/// signed, and with none (a TLS transport error whose reason says which, retried as an unknown
/// outcome), then, the certificate and key files replaced while the job waits (a rotation, no
/// restart), accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_is_presented_and_a_rotated_one_is_used() {
    use redial_engine::credentials::Mtls;
    let certs = test_certs();
    let at = |name: &str| certs.path().join(name);
    let server =
        redial_test_receiver::TlsServer::start(&at("server.crt"), &at("server.key"), &at("ca.crt"))
            .await;
    // The files the endpoint reads, holding the wrong certificate first.
    let files = tempfile::tempdir().expect("dir");
    let (cert, key) = (
        files.path().join("client.crt"),
        files.path().join("client.key"),
    );
    std::fs::copy(at("other-client.crt"), &cert).expect("copy");
    std::fs::copy(at("other-client.key"), &key).expect("copy");
    let auth = Auth::Mtls(Box::new(
        Mtls::new(cert.clone(), key.clone(), Some(at("ca.crt"))).expect("the files load"),
    ));
    let credentials = EndpointCredentials {
        tls: None,
        auth,
        allow_job_credentials: false,
    };
    let s = engine_for(manual_clock(), &server.url("/"), credentials).await;
    let detail = refused_in_handshake(&s, &server, "m").await;
    assert!(
        detail.to_ascii_lowercase().contains("certificate"),
        "{detail}"
    );
    s.stop().await;

    // None at all: the server's CA trusted (`ca_file` alone), a bearer token, no certificate.
    // The server requires one: a TLS failure whose reason says none was presented.
    let none = EndpointCredentials {
        auth: Auth::Bearer {
            token: Secret::literal("no-certificate"),
        },
        tls: Some(Box::new(
            Mtls::trusting(at("ca.crt")).expect("the CA loads"),
        )),
        allow_job_credentials: false,
    };
    let s = engine_for(manual_clock(), &server.url("/"), none).await;
    let detail = refused_in_handshake(&s, &server, "n").await;
    println!("no certificate: {detail}");
    assert!(
        detail.contains("no client certificate presented"),
        "{detail}"
    );
    s.stop().await;

    // The wrong one again, then the rotation: the right certificate and key in the same files.
    let s = engine_for(
        manual_clock(),
        &server.url("/"),
        EndpointCredentials {
            tls: None,
            auth: Auth::Mtls(Box::new(
                Mtls::new(cert.clone(), key.clone(), Some(at("ca.crt"))).expect("the files load"),
            )),
            allow_job_credentials: false,
        },
    )
    .await;
    s.enqueue_posts([("m".to_owned(), server.url("/pay"), None)])
        .await;
    s.settle().await;
    std::fs::copy(at("client.crt"), &cert).expect("rotate");
    std::fs::copy(at("client.key"), &key).expect("rotate");
    let c = s
        .run_until("completed", STEP, |c| count(c, "completed") == 1)
        .await;
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(server.answered(), 1);
    s.stop().await;

    // A client certificate besides a header (mutual TLS and a key, as open banking asks): both
    // go.
    let both = EndpointCredentials {
        auth: Auth::Header {
            name: "X-Api-Key".into(),
            value: Secret::literal("key-with-tls"),
        },
        tls: Some(Box::new(
            Mtls::new(cert.clone(), key.clone(), Some(at("ca.crt"))).expect("the files load"),
        )),
        allow_job_credentials: false,
    };
    let s = engine_for(manual_clock(), &server.url("/"), both).await;
    s.enqueue_posts([("both".to_owned(), server.url("/pay"), None)])
        .await;
    s.run_until("completed", STEP, |c| count(c, "completed") == 1)
        .await;
    let head = server
        .heads()
        .pop()
        .expect("a request")
        .to_ascii_lowercase();
    assert!(head.contains("x-api-key: key-with-tls"), "{head}");
    s.stop().await;
}

/// A job that names a credentials profile is sent with it instead of its endpoint's: two
/// tenants' keys at one API. A job naming a profile the configuration no longer has fails, as a
/// request that cannot be built, with a reason that names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_names_a_profile_is_sent_with_it() {
    let clock = manual_clock();
    let rx = receiver_on(&clock).await;
    let bearer = |t: &str| {
        Arc::new(EndpointCredentials {
            auth: Auth::Bearer {
                token: Secret::literal(t),
            },
            tls: None,
            allow_job_credentials: false,
        })
    };
    let credentials = Credentials {
        by_endpoint: BTreeMap::from([(origin(&rx.url("/")), bearer("endpoint-key"))]),
        profiles: BTreeMap::from([("tenant-b".to_owned(), bearer("tenant-b-key"))]),
        clock: clock.clone(),
    };
    let s = engine_with_all(clock.clone(), credentials).await;
    let now = clock.now();
    let named = |id: &str, profile: &str| {
        let mut job = post_job(id.into(), rx.url(&format!("/{id}")), None, now);
        job.request.credentials = Some(profile.into());
        job
    };
    s.store
        .job_insert_batch(vec![
            post_job("plain".into(), rx.url("/plain"), None, now),
            named("b", "tenant-b"),
            named("gone", "tenant-c"),
        ])
        .await
        .expect("insert");
    s.engine.wake_all();
    s.run_until("two completed, one dead", STEP, |c| {
        count(c, "completed") == 2 && c.keys().any(|k| k.starts_with("dead"))
    })
    .await;
    let auth = |path: &str| {
        rx.received(path)
            .first()
            .and_then(|r| r.header("authorization").map(str::to_owned))
    };
    assert_eq!(auth("/plain").as_deref(), Some("Bearer endpoint-key"));
    assert_eq!(auth("/b").as_deref(), Some("Bearer tenant-b-key"));
    assert!(
        rx.received("/gone").is_empty(),
        "nothing sent without its credentials"
    );
    let (job, attempts) = s
        .store
        .job_get(&JobId::from("gone"))
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(job.state, JobState::Dead);
    let detail = attempts[0].error_detail.clone().unwrap_or_default();
    assert!(
        detail.contains("the credentials profile \"tenant-c\" is not in the configuration")
            && detail.contains("it defines tenant-b"),
        "{detail}"
    );
    s.stop().await;
}
