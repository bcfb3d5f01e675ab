//! Who may do what: tokens, a read-only dashboard, a hostile page, answers never sniffed.

use super::*;

#[tokio::test]
async fn a_token_guards_the_v1_routes() {
    let api = api_with(ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    });
    let body = job("t").to_string();
    let (status, e) = api.call("POST", "/v1/jobs", Some(&body), None).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    assert_eq!(
        api.call("POST", "/v1/jobs", Some(&body), Some("wrong"))
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        api.call("GET", "/v1/stats", None, None).await.0,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        api.call("POST", "/v1/jobs", Some(&body), Some("s3cret"))
            .await
            .0,
        StatusCode::CREATED
    );
    assert_eq!(
        api.call("GET", "/healthz", None, None).await.0,
        StatusCode::OK
    );
    // Ready once the database file's integrity check (begun at open, in the background) passed.
    let mut tries = 0;
    while api.call("GET", "/readyz", None, None).await.0 != StatusCode::OK {
        tries += 1;
        assert!(tries < 3000, "never ready");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The scheme is case-insensitive (RFC 9110); other schemes are not a bearer token.
    for (authorization, status) in [
        ("bearer s3cret", StatusCode::OK),
        ("BEARER s3cret", StatusCode::OK),
        ("Bearer  s3cret ", StatusCode::OK),
        ("Basic s3cret", StatusCode::UNAUTHORIZED),
        ("Bearers3cret", StatusCode::UNAUTHORIZED),
        ("s3cret", StatusCode::UNAUTHORIZED),
    ] {
        let req = Request::builder()
            .method("GET")
            .uri("/v1/stats")
            .header("authorization", authorization)
            .body(Body::empty())
            .expect("request");
        let resp = api.app.clone().oneshot(req).await.expect("response");
        assert_eq!(resp.status(), status, "{authorization:?}");
    }
}

/// Every JSON answer, a success or an error, tells a browser not to guess its type and no cache
/// to keep it (issue 31).
#[tokio::test]
async fn json_answers_are_never_sniffed_nor_cached() {
    let api = api();
    let mut json_answers = 0;
    for (method, uri) in [
        ("GET", "/v1/stats"),
        ("GET", "/v1/jobs/nope"),
        ("POST", "/v1/jobs"),
        ("GET", "/healthz"),
    ] {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .expect("request");
        let resp = api.app.clone().oneshot(req).await.expect("response");
        let h = resp.headers();
        if h["content-type"]
            .to_str()
            .unwrap_or("")
            .starts_with("application/json")
        {
            assert_eq!(h["x-content-type-options"], "nosniff", "{method} {uri}");
            assert_eq!(h["cache-control"], "no-store", "{method} {uri}");
            json_answers += 1;
        }
    }
    assert!(json_answers >= 3, "the stats, the 404 and the 422 are JSON");
}

#[tokio::test]
async fn a_read_only_dashboard_refuses_what_a_browser_sends_and_lets_programs_act() {
    let api = api_with(ServerConfig {
        token: Some("secret".into()),
        ui_read_only: true,
        ..ServerConfig::default()
    });
    let browser = [
        ("sec-fetch-mode", "cors"),
        ("sec-fetch-site", "same-origin"),
    ];
    let body = job("b1").to_string();
    let (status, e) = api
        .call_with("POST", "/v1/jobs", Some(&body), Some("secret"), &browser)
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("read_only"))
    );
    // Without the token the answer is still 401: nothing is said before authentication.
    let (status, _) = api
        .call_with("POST", "/v1/jobs", Some(&body), None, &browser)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, s) = api
        .call_with("GET", "/v1/session", None, Some("secret"), &browser)
        .await;
    assert_eq!((status, &s["read_only"]), (StatusCode::OK, &json!(true)));
    // A program with the token acts, and its session says so.
    let (status, _) = api
        .call("POST", "/v1/jobs", Some(&body), Some("secret"))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, s) = api.call("GET", "/v1/session", None, Some("secret")).await;
    assert_eq!(s["read_only"], json!(false));
}

/// What a web page in the user's browser could send to a tokenless API on loopback is refused
/// (issue 13): a Host rebound to 127.0.0.1, a cross-site request, a body that is not JSON.
#[tokio::test]
async fn a_hostile_page_cannot_drive_the_loopback_api() {
    let api = api_with(ServerConfig {
        check_host: true,
        allowed_hosts: vec!["redial.internal".into()],
        ..ServerConfig::default()
    });
    let body = job("page").to_string();
    type Case<'a> = (Vec<(&'a str, &'a str)>, StatusCode, Option<&'a str>);
    let cases: Vec<Case> = vec![
        (
            vec![("host", "rebind.attacker.example:8080")],
            StatusCode::FORBIDDEN,
            Some("foreign_host"),
        ),
        (
            vec![
                ("host", "localhost:8080"),
                ("origin", "http://attacker.example"),
            ],
            StatusCode::FORBIDDEN,
            Some("cross_site"),
        ),
        (
            vec![("host", "localhost:8080"), ("sec-fetch-site", "cross-site")],
            StatusCode::FORBIDDEN,
            Some("cross_site"),
        ),
        (
            vec![("host", "localhost:8080"), ("sec-fetch-site", "same-site")],
            StatusCode::FORBIDDEN,
            Some("cross_site"),
        ),
        (
            vec![("host", "localhost:8080"), ("content-type", "text/plain")],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("unsupported_media_type"),
        ),
        (
            vec![
                ("host", "127.0.0.1:8080"),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Some("unsupported_media_type"),
        ),
        // What a program (or a same-origin page) sends goes through.
        (vec![("host", "localhost:8080")], StatusCode::CREATED, None),
        (
            vec![
                ("host", "127.0.0.1:8080"),
                ("origin", "http://127.0.0.1:8080"),
            ],
            StatusCode::OK,
            None,
        ),
        (
            vec![("host", "[::1]:8080"), ("sec-fetch-site", "same-origin")],
            StatusCode::OK,
            None,
        ),
        (
            vec![("host", "redial.internal"), ("sec-fetch-site", "none")],
            StatusCode::OK,
            None,
        ),
    ];
    for (headers, status, code) in cases {
        let mut req = Request::builder().method("POST").uri("/v1/jobs");
        let mut has_type = false;
        for (n, v) in &headers {
            has_type |= *n == "content-type";
            req = req.header(*n, *v);
        }
        if !has_type {
            req = req.header("content-type", "application/json");
        }
        let req = req.body(Body::from(body.clone())).expect("request");
        let resp = api.app.clone().oneshot(req).await.expect("response");
        let got = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        assert_eq!(got, status, "{headers:?}: {v}");
        if let Some(code) = code {
            assert_eq!(v["error"]["code"].as_str(), Some(code), "{headers:?}");
        }
    }
    assert_eq!(
        api.total_jobs().await,
        1,
        "only the program's request made a job"
    );
}

/// A job that brings its own `Authorization` to an endpoint with credentials of its own is
/// refused (two sources of truth), unless the endpoint allows it; other endpoints' jobs and the
/// same endpoint's jobs without the header are taken.
#[tokio::test]
async fn a_jobs_own_authorization_for_an_endpoint_with_credentials_is_refused() {
    use redial_engine::credentials::{Auth, Credentials, EndpointCredentials, Secret};
    let mut credentials = Credentials::default();
    for (origin, allow) in [
        ("https://api.example.com", false),
        ("https://open.example.com", true),
    ] {
        credentials.by_endpoint.insert(
            origin.into(),
            Arc::new(EndpointCredentials {
                tls: None,
                auth: Auth::Bearer {
                    token: Secret::literal("endpoint-token"),
                },
                allow_job_credentials: allow,
            }),
        );
    }
    let api = api_with(ServerConfig {
        credentials,
        ..ServerConfig::default()
    });
    let with_header = |id: &str, url: &str| {
        json!({
            "id": id,
            "request": {
                "method": "POST",
                "url": url,
                "headers": {"Authorization": "Bearer the-jobs-own"},
            }
        })
    };
    let (status, body) = api
        .post(
            "/v1/jobs",
            with_header("a", "https://api.example.com/v1/charges"),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "invalid_header", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("allow_job_credentials") && !message.contains("endpoint-token"),
        "{message}"
    );
    for (id, url) in [
        ("b", "https://open.example.com/v1/x"),
        ("c", "https://other.example.com/v1/x"),
    ] {
        let (status, body) = api.post("/v1/jobs", with_header(id, url)).await;
        assert_eq!(status, StatusCode::CREATED, "{id}: {body}");
    }
    let mut plain = with_header("d", "https://api.example.com/v1/charges");
    plain["request"]["headers"] = json!({});
    let (status, body) = api.post("/v1/jobs", plain).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}
