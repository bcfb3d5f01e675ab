//! Endpoints, queues and schedules; the document and the shape of every error.

use super::*;

#[tokio::test]
async fn a_queues_groups_are_shown_and_bad_requests_for_them_refused() {
    let api = api();
    let body = json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "tenant-1", "run_at": "2999-01-01T00:00:00Z"}).to_string();
    let (status, job) = api.call("POST", "/v1/jobs", Some(&body), None).await;
    assert_eq!(status, StatusCode::CREATED, "{job}");
    assert_eq!(job["group"], "tenant-1");
    let (status, groups) = api
        .call("GET", "/v1/queues/default/groups", None, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{groups}");
    assert_eq!(groups["total"], 1);
    assert_eq!(groups["groups"][0]["group"], "tenant-1");
    assert_eq!(groups["groups"][0]["waiting"], 1);
    for (path, status, code) in [
        ("/v1/queues/nope/groups", StatusCode::NOT_FOUND, "not_found"),
        (
            "/v1/queues/default/groups?limit=0",
            StatusCode::BAD_REQUEST,
            "invalid_limit",
        ),
        (
            "/v1/queues/default/groups?limit=x",
            StatusCode::BAD_REQUEST,
            "invalid_limit",
        ),
        (
            "/v1/queues/default/groups?colour=1",
            StatusCode::BAD_REQUEST,
            "unknown_parameter",
        ),
    ] {
        let (got, e) = api.call("GET", path, None, None).await;
        assert_eq!(
            (got, e["error"]["code"].as_str()),
            (status, Some(code)),
            "{path}: {e}"
        );
    }
}

#[tokio::test]
async fn a_queues_ordering_keys_are_listed_in_pages_and_bad_requests_refused() {
    let api = api();
    for (id, key) in [
        ("a1", "acct-a"),
        ("a2", "acct-a"),
        ("a3", "acct-a"),
        ("b1", "acct-b"),
        ("c1", "acct-c"),
    ] {
        let body = json!({"id": id, "request": {"method": "POST", "url": "https://a.example/"}, "ordering_key": key, "run_at": "2999-01-01T00:00:00Z"}).to_string();
        let (status, job) = api.call("POST", "/v1/jobs", Some(&body), None).await;
        assert_eq!(status, StatusCode::CREATED, "{job}");
        assert_eq!(job["ordering_key"], key);
    }
    let (status, all) = api
        .call("GET", "/v1/queues/default/ordering-keys", None, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(all["ordering_on_dead"], "block");
    let keys = all["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 3, "{all}");
    let a = keys.iter().find(|k| k["key"] == "acct-a").expect("acct-a");
    assert_eq!(a["head"]["id"], "a1");
    assert_eq!(a["behind"], 2);
    assert_eq!(a["blocked"], false);
    assert!(
        a["why"].as_str().unwrap_or("").contains("a1 is scheduled"),
        "{all}"
    );
    // Pages carry on from the last key of the page before, in the listing's own order.
    let (_, page) = api
        .call(
            "GET",
            "/v1/queues/default/ordering-keys?limit=2",
            None,
            None,
        )
        .await;
    assert_eq!(page["keys"][0], keys[0], "{page}");
    assert_eq!(page["keys"][1], keys[1], "{page}");
    assert_eq!(page["next_cursor"], keys[1]["key"]);
    let next = format!(
        "/v1/queues/default/ordering-keys?cursor={}",
        page["next_cursor"].as_str().expect("a cursor")
    );
    let (_, rest) = api.call("GET", &next, None, None).await;
    assert_eq!(rest["keys"], json!([keys[2]]), "{rest}");
    assert_eq!(rest["next_cursor"], Value::Null);
    let (_, blocked) = api
        .call(
            "GET",
            "/v1/queues/default/ordering-keys?blocked=true",
            None,
            None,
        )
        .await;
    assert_eq!(blocked["keys"], json!([]), "{blocked}");
    for (path, status, code) in [
        (
            "/v1/queues/nope/ordering-keys",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/v1/queues/default/ordering-keys?blocked=yes",
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "/v1/queues/default/ordering-keys?limit=501",
            StatusCode::BAD_REQUEST,
            "invalid_limit",
        ),
        (
            "/v1/queues/default/ordering-keys?colour=1",
            StatusCode::BAD_REQUEST,
            "unknown_parameter",
        ),
    ] {
        let (got, e) = api.call("GET", path, None, None).await;
        assert_eq!(
            (got, e["error"]["code"].as_str()),
            (status, Some(code)),
            "{path}: {e}"
        );
    }
    for bad in [
        json!(""),
        json!(" "),
        json!("a\nb"),
        json!("k".repeat(257)),
        json!("x\u{202e}y"),
    ] {
        let body = json!({"request": {"method": "POST", "url": "https://a.example/"}, "ordering_key": bad}).to_string();
        let (status, e) = api.call("POST", "/v1/jobs", Some(&body), None).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("invalid_ordering_key")
            ),
            "{bad}: {e}"
        );
    }
}

#[tokio::test]
async fn the_openapi_document_covers_every_route() {
    let api = api();
    let (status, doc) = api.get("/v1/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    let served: Value = serde_json::from_str(OPENAPI).expect("valid JSON");
    assert_eq!(doc, served);
    let paths = doc["paths"].as_object().expect("paths");
    for (method, path) in [
        ("post", "/v1/jobs"),
        ("get", "/v1/jobs"),
        ("post", "/v1/jobs/batch"),
        ("get", "/v1/jobs/{id}"),
        ("post", "/v1/jobs/{id}/replay"),
        ("post", "/v1/jobs/{id}/dismiss"),
        ("post", "/v1/jobs/{id}/cancel"),
        ("post", "/v1/dead-letters/replay"),
        ("post", "/v1/dead-letters/dismiss"),
        ("get", "/v1/dead-letters/groups"),
        ("get", "/v1/dead-letters/patterns"),
        ("post", "/v1/dead-letters/export"),
        ("get", "/v1/operations"),
        ("get", "/v1/operations/{id}"),
        ("post", "/v1/operations/{id}/cancel"),
        ("get", "/v1/session"),
        ("get", "/v1/stats"),
        ("get", "/v1/endpoints"),
        ("get", "/v1/endpoints/{name}"),
        ("post", "/v1/endpoints/{name}/pause"),
        ("post", "/v1/endpoints/{name}/resume"),
        ("post", "/v1/endpoints/{name}/reset-breaker"),
        ("post", "/v1/endpoints/{name}/replay-outage"),
        ("get", "/v1/queues"),
        ("get", "/v1/queues/{name}/ordering-keys"),
        ("post", "/v1/queues/{name}/pause"),
        ("post", "/v1/queues/{name}/resume"),
        ("get", "/v1/schedules"),
        ("post", "/v1/schedules"),
        ("get", "/v1/schedules/{id}"),
        ("put", "/v1/schedules/{id}"),
        ("delete", "/v1/schedules/{id}"),
        ("post", "/v1/schedules/{id}/pause"),
        ("post", "/v1/schedules/{id}/resume"),
        ("get", "/v1/openapi.json"),
        ("post", "/v1/backup"),
        ("get", "/v1/alerts"),
        ("get", "/v1/series"),
        ("get", "/metrics"),
        ("get", "/healthz"),
        ("get", "/readyz"),
    ] {
        assert!(
            paths.get(path).and_then(|p| p.get(method)).is_some(),
            "{method} {path} is documented"
        );
        // And the route exists: anything but the fallback's no_route.
        let concrete = path.replace("{id}", "x").replace("{name}", "x");
        let (_, body) = api
            .call(&method.to_uppercase(), &concrete, Some("{}"), None)
            .await;
        assert_ne!(
            body["error"]["code"], "no_route",
            "{method} {path} is routed"
        );
    }
}

#[tokio::test]
async fn endpoints_show_their_backlog_and_state() {
    let api = api();
    api.post("/v1/jobs", job("e1")).await;
    api.post("/v1/jobs", job("e2")).await;
    let (status, out) = api.get("/v1/endpoints").await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let list = out["endpoints"].as_array().expect("endpoints");
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "https://api.example.com");
    assert_eq!(
        (list[0]["held"].as_u64(), list[0]["breaker"].as_str()),
        (Some(2), Some("closed"))
    );
    assert!(list[0].get("forecast").is_none(), "the list has none");
    let (status, one) = api.get("/v1/endpoints/https%3A%2F%2Fapi.example.com").await;
    assert_eq!(
        (status, &one["name"]),
        (StatusCode::OK, &json!("https://api.example.com"))
    );
    // Its forecast: two waiting, nothing timed and no limit, so no pace; no deadline.
    let f = &one["forecast"];
    assert_eq!(
        (&f["waiting"], &f["jobs_per_second"], &f["drains_at"]),
        (&json!(2), &json!(null), &json!(null)),
        "{f}"
    );
    assert_eq!(
        (&f["with_deadline"], &f["deadline_at_risk"]),
        (&json!(0), &json!(0))
    );
    let (status, e) = api.get("/v1/endpoints/nope").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
}

#[tokio::test]
async fn endpoints_and_queues_pause_and_resume_by_hand() {
    let api = api();
    api.post("/v1/jobs", job("p1")).await;
    let path = "/v1/endpoints/https%3A%2F%2Fapi.example.com";
    let (status, v) = api
        .post(
            &format!("{path}/pause"),
            json!({ "reason": "provider maintenance", "for": "30m" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["paused_by_hand"]["reason"], "provider maintenance");
    assert_eq!(v["paused_by_hand"]["since"], "2026-11-30T00:00:00Z");
    assert_eq!(v["paused_by_hand"]["until"], "2026-11-30T00:30:00Z");
    let holding = v["holding"].as_str().expect("holding");
    assert!(holding.starts_with("paused by hand"), "{holding}");
    // An empty body pauses until resumed.
    let (status, v) = api.call("POST", &format!("{path}/pause"), None, None).await;
    assert_eq!(
        (status, &v["paused_by_hand"]["until"]),
        (StatusCode::OK, &Value::Null)
    );
    let (status, v) = api.post(&format!("{path}/resume"), json!({})).await;
    assert_eq!(
        (status, &v["paused_by_hand"]),
        (StatusCode::OK, &Value::Null)
    );
    assert_eq!(v["holding"], Value::Null);
    let (status, v) = api.post(&format!("{path}/reset-breaker"), json!({})).await;
    assert_eq!(
        (status, v["breaker"].as_str()),
        (StatusCode::OK, Some("closed"))
    );
    // Issue 36: a control on a name never seen answered 200 and made a record that outlived
    // restarts (a name of %00 too). Now an unknown endpoint is 404 and nothing is written;
    // the request may ask to create it, to pause an endpoint ahead of its first job.
    let new = "/v1/endpoints/https%3A%2F%2Fnew.example.com";
    for action in ["pause", "resume", "reset-breaker"] {
        let (status, e) = api.post(&format!("{new}/{action}"), json!({})).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::NOT_FOUND, Some("not_found")),
            "{action}: {e}"
        );
        assert!(
            e["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("?create=true")),
            "{e}"
        );
    }
    let (status, _) = api.get(new).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing was created");
    let (status, v) = api
        .post(&format!("{new}/pause?create=true"), json!({}))
        .await;
    assert_eq!(
        (status, &v["name"]),
        (StatusCode::OK, &json!("https://new.example.com"))
    );
    assert!(v["paused_by_hand"].is_object(), "{v}");
    let (status, v) = api.get(new).await;
    assert_eq!(
        (status, v["paused_by_hand"].is_object()),
        (StatusCode::OK, true)
    );
    // Created, it is known: its controls need no flag.
    let (status, _) = api.post(&format!("{new}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    for (query, code) in [
        ("create=yes", "invalid_parameter"),
        ("make=true", "unknown_parameter"),
    ] {
        let (status, e) = api.post(&format!("{new}/pause?{query}"), json!({})).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{query}: {e}"
        );
    }
    // A control character is no endpoint's name, created or not.
    let (status, e) = api
        .post("/v1/endpoints/%00/pause?create=true", json!({}))
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_endpoint")),
        "{e}"
    );

    for (body, code) in [
        (json!({ "for": "0s" }), "invalid_pause"),
        (json!({ "for": "soon" }), "invalid_pause"),
        (json!({ "until": "2026-11-29T00:00:00Z" }), "invalid_pause"),
        (
            json!({ "for": "1m", "until": "2027-01-01T00:00:00Z" }),
            "invalid_pause",
        ),
        (json!({ "reason": "x".repeat(501) }), "invalid_reason"),
        // Control characters an operator's terminal would act on (issue 31).
        (
            json!({ "reason": "\u{1b}]52;c;ZWNobw==\u{7}" }),
            "invalid_reason",
        ),
        (json!({ "reason": "two\nlines" }), "invalid_reason"),
        (json!({ "reason": "nul\u{0}" }), "invalid_reason"),
        (json!({ "reason": "\u{202e}txt.exe" }), "invalid_reason"),
        (json!({ "forever": true }), "invalid_body"),
    ] {
        let (status, e) = api.post(&format!("{path}/pause"), body.clone()).await;
        assert!(status.is_client_error(), "{body}: {status} {e}");
        if code != "invalid_body" {
            assert_eq!(e["error"]["code"], code, "{body}: {e}");
        }
    }

    let (status, q) = api.get("/v1/queues").await;
    assert_eq!(status, StatusCode::OK);
    // The default queue and the callback deliveries' own, by name.
    let names: Vec<&Value> = q["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| &q["name"])
        .collect();
    assert_eq!(names, [&json!("callbacks"), &json!("default")]);
    assert_eq!(q["queues"][1]["paused_by_hand"], Value::Null);
    let (status, q) = api
        .post("/v1/queues/default/pause", json!({ "reason": "deploy" }))
        .await;
    assert_eq!(
        (status, &q["paused_by_hand"]["reason"]),
        (StatusCode::OK, &json!("deploy"))
    );
    let (_, q) = api.get("/v1/queues").await;
    assert_eq!(q["queues"][1]["paused_by_hand"]["reason"], "deploy");
    let (status, q) = api.post("/v1/queues/default/resume", json!({})).await;
    assert_eq!(
        (status, &q["paused_by_hand"]),
        (StatusCode::OK, &Value::Null)
    );
    let (status, e) = api.post("/v1/queues/nope/pause", json!({})).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("unknown_queue"))
    );
}

/// Every error answer has the documented shape, including those the router and the extractors
/// make (issue 13): a method a route does not take, a path that is not UTF-8, an unknown route.
#[tokio::test]
async fn router_and_extractor_errors_have_the_documented_shape() {
    let api = api();
    for (method, path, status, code) in [
        (
            "PUT",
            "/v1/jobs",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "DELETE",
            "/v1/stats",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            "GET",
            "/v1/jobs/%ff%fe",
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        ("GET", "/v1/nothing-here", StatusCode::NOT_FOUND, "no_route"),
    ] {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::empty())
            .expect("request");
        let resp = api.app.clone().oneshot(req).await.expect("response");
        assert_eq!(resp.status(), status, "{method} {path}");
        let json = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        assert!(json, "{method} {path}: not JSON");
        if status == StatusCode::METHOD_NOT_ALLOWED {
            assert!(resp.headers().contains_key("allow"), "{method} {path}");
        }
        let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .expect("body");
        let v: Value = serde_json::from_slice(&bytes).expect("a JSON body");
        assert_eq!(
            v["error"]["code"].as_str(),
            Some(code),
            "{method} {path}: {v}"
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{method} {path}: {v}"
        );
    }
}

/// A schedule's job shows what a job's view shows: secrets in its URL's query, its headers and
/// its callback's headers redacted, in every answer (created, read, listed).
#[tokio::test]
async fn schedules_show_their_jobs_secrets_redacted() {
    let a = api();
    let body = json!({
        "id": "with-secrets",
        "every": "1h",
        "job": {
            "request": { "method": "POST", "url": "https://api.example.com/x?token=url-secret-1",
                         "headers": { "Authorization": "Bearer header-secret-2" } },
            "callback": { "url": "https://app.example.com/done",
                          "headers": { "Authorization": "Bearer callback-secret-3" } }
        }
    });
    let (s, created) = a.post("/v1/schedules", body).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    let (_, read) = a.get("/v1/schedules/with-secrets").await;
    let (_, list) = a.get("/v1/schedules").await;
    for answer in [&created, &read, &list] {
        let text = answer.to_string();
        for secret in ["url-secret-1", "header-secret-2", "callback-secret-3"] {
            assert!(!text.contains(secret), "{secret} shown: {text}");
        }
    }
    assert_eq!(
        read["job"]["request"]["headers"],
        json!([["Authorization", "[redacted]"]]),
        "{read}"
    );
    assert_eq!(
        read["job"]["callback"]["url"],
        "https://app.example.com/done"
    );
}

/// Schedules: created, read, listed, replaced, paused, resumed and deleted; each mistake is a
/// 4xx with its own code.
#[tokio::test]
async fn schedules_round_trip_and_refuse_mistakes() {
    let a = api();
    let body = json!({
        "id": "nightly",
        "cron": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "job": { "request": { "method": "POST", "url": "https://api.example.com/report" }, "tags": ["r"] }
    });
    let (s, created) = a.post("/v1/schedules", body.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    // 2026-11-30T00:00:00Z is 01:00 in Berlin: 03:00 Berlin is 02:00Z.
    assert_eq!(created["next_at"], "2026-11-30T02:00:00Z");
    assert_eq!(created["rule"]["cron"]["timezone"], "Europe/Berlin");
    assert_eq!(created["missed"]["policy"], "run_once");
    assert_eq!(created["job"]["endpoint"], "https://api.example.com");
    assert_eq!(created["source"], "api");
    let (s, again) = a.post("/v1/schedules", body).await;
    assert_eq!(
        (s, again["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("schedule_exists"))
    );
    // PUT replaces (200) or creates (201).
    let every = json!({ "every": "5m", "missed": "run_all", "missed_max": 3,
        "job": { "request": { "method": "GET", "url": "https://api.example.com/ping" } } });
    let (s, replaced) = a
        .call(
            "PUT",
            "/v1/schedules/nightly",
            Some(&every.to_string()),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{replaced}");
    assert_eq!(replaced["rule"]["every"]["interval"], "5m");
    assert_eq!(replaced["next_at"], "2026-11-30T00:05:00Z");
    assert_eq!(replaced["missed"], json!({"policy": "run_all", "max": 3}));
    let (s, _) = a
        .call("PUT", "/v1/schedules/ping", Some(&every.to_string()), None)
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, list) = a.get("/v1/schedules").await;
    let ids: Vec<&str> = list["schedules"]
        .as_array()
        .expect("list")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["nightly", "ping"]);
    let (s, paused) = a.post("/v1/schedules/ping/pause", json!(null)).await;
    assert_eq!((s, &paused["paused"]), (StatusCode::OK, &json!(true)));
    let (s, resumed) = a.post("/v1/schedules/ping/resume", json!(null)).await;
    assert_eq!((s, &resumed["paused"]), (StatusCode::OK, &json!(false)));
    let (s, _) = a.call("DELETE", "/v1/schedules/ping", None, None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, gone) = a.get("/v1/schedules/ping").await;
    assert_eq!(
        (s, gone["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );

    let refused = |body: Value, code: &'static str| {
        let a = &a;
        async move {
            let (s, out) = a.post("/v1/schedules", body.clone()).await;
            assert_eq!(
                (s, out["error"]["code"].as_str()),
                (StatusCode::UNPROCESSABLE_ENTITY, Some(code)),
                "{body} -> {out}"
            );
            out["error"]["message"]
                .as_str()
                .expect("message")
                .to_owned()
        }
    };
    let req = json!({ "request": { "method": "POST", "url": "https://api.example.com/x" } });
    refused(json!({ "cron": "* * * * *", "job": req }), "invalid_id").await;
    refused(
        json!({ "id": "a b", "cron": "* * * * *", "job": req }),
        "invalid_id",
    )
    .await;
    refused(json!({ "id": "x", "job": req }), "invalid_schedule").await;
    refused(
        json!({ "id": "x", "cron": "* * * * *", "every": "1m", "job": req }),
        "invalid_schedule",
    )
    .await;
    let m = refused(
        json!({ "id": "x", "cron": "0 9 * *", "job": req }),
        "invalid_schedule",
    )
    .await;
    assert!(m.contains("give 5"), "{m}");
    let m = refused(
        json!({ "id": "x", "cron": "0 9 * * *", "timezone": "Mars/Base", "job": req }),
        "invalid_schedule",
    )
    .await;
    assert!(m.contains("IANA"), "{m}");
    refused(
        json!({ "id": "x", "every": "0s", "job": req }),
        "invalid_schedule",
    )
    .await;
    // Accepted before, meaningless (issue 31): a cron that matches only times a daylight-saving
    // change skips (02:xx on the last Sunday of March in Berlin), units out of order, a step
    // no range takes twice.
    let m = refused(
        json!({ "id": "x", "cron": "* * 2 * 3 0L", "timezone": "Europe/Berlin", "job": req }),
        "invalid_schedule",
    )
    .await;
    assert!(m.contains("never fire"), "{m}");
    refused(
        json!({ "id": "x", "every": "1s1m", "job": req }),
        "invalid_schedule",
    )
    .await;
    let m = refused(
        json!({ "id": "x", "cron": "0-59/100 * * * *", "job": req }),
        "invalid_schedule",
    )
    .await;
    assert!(m.contains("one value only"), "{m}");
    refused(
        json!({ "id": "x", "every": "1m", "timezone": "UTC", "job": req }),
        "invalid_schedule",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "missed": "sometimes", "job": req }),
        "invalid_missed",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "missed_max": 3, "job": req }),
        "invalid_missed",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "missed": "run_all", "missed_max": 0, "job": req }),
        "invalid_missed",
    )
    .await;
    let m = refused(
        json!({ "id": "x", "every": "1m", "job": { "id": "j", "request": req["request"] } }),
        "invalid_job",
    )
    .await;
    assert!(m.contains("job.id"), "{m}");
    refused(
        json!({ "id": "x", "every": "1m", "job": "nope" }),
        "invalid_job",
    )
    .await;
    let m = refused(
        json!({ "id": "x", "every": "1m", "job": { "colour": 1, "request": req["request"] } }),
        "invalid_job",
    )
    .await;
    assert!(m.starts_with("job: unknown field `colour`"), "{m}");
    refused(
        json!({ "id": "x", "every": "1m", "missed": "run_all", "missed_max": 5_000_000_000_i64, "job": req }),
        "invalid_missed",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "colour": 1, "job": req }),
        "invalid_field",
    )
    .await;
    refused(
        json!({ "id": "x", "every": "1m", "job": { "queue": "nope", "request": req["request"] } }),
        "unknown_queue",
    )
    .await;
    refused(json!({ "id": "x", "every": "1m", "job": { "request": { "method": "POST", "url": "ftp://x" } } }), "invalid_url").await;
    let (s, out) = a
        .call(
            "PUT",
            "/v1/schedules/a",
            Some(&json!({ "id": "b", "every": "1m", "job": req }).to_string()),
            None,
        )
        .await;
    assert_eq!(
        (s, out["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_id"))
    );
}

/// Issue 36: `GET /v1/endpoints` and `GET /v1/schedules` answered every one at once (4 MB and
/// 4.6 MB at 6,000 endpoints and 10,000 schedules). Both are pages now, by name and by id,
/// followed by `next_cursor` as jobs are.
#[tokio::test]
async fn endpoints_and_schedules_come_in_pages() {
    let a = api();
    for (i, host) in ["e", "a", "d", "b", "c"].iter().enumerate() {
        let job = json!({ "id": format!("j{i}"), "request": { "method": "POST", "url": format!("https://{host}.example.com/x") } });
        let (s, v) = a.post("/v1/jobs", job).await;
        assert!(s.is_success(), "{v}");
        let schedule = json!({ "id": format!("s-{host}"), "every": "1h", "job": { "request": { "method": "POST", "url": "https://a.example.com/r" } } });
        let (s, v) = a.post("/v1/schedules", schedule).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
    }
    for (route, key, field) in [
        ("/v1/endpoints", "endpoints", "name"),
        ("/v1/schedules", "schedules", "id"),
    ] {
        let mut seen = Vec::new();
        let mut pages = 0;
        let mut cursor: Option<String> = None;
        loop {
            let path = match &cursor {
                Some(c) => format!("{route}?limit=2&cursor={}", urlencode(c)),
                None => format!("{route}?limit=2"),
            };
            let (s, v) = a.get(&path).await;
            assert_eq!(s, StatusCode::OK, "{v}");
            let items = v[key].as_array().expect("a list");
            assert!(items.len() <= 2, "{v}");
            seen.extend(
                items
                    .iter()
                    .map(|i| i[field].as_str().expect("named").to_owned()),
            );
            pages += 1;
            match v["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => break,
            }
        }
        let mut sorted = seen.clone();
        sorted.sort();
        assert_eq!(seen, sorted, "{route}: in order");
        assert_eq!(seen.len(), 5, "{route}: each once: {seen:?}");
        assert_eq!(pages, 3, "{route}");
        // Without a limit, a page of 100: all five, and no next page.
        let (_, v) = a.get(route).await;
        assert_eq!(v[key].as_array().map(Vec::len), Some(5));
        assert_eq!(v["next_cursor"], Value::Null);
        for (query, code) in [
            ("limit=0", "invalid_limit"),
            ("limit=501", "invalid_limit"),
            ("page=2", "unknown_parameter"),
        ] {
            let (s, e) = a.get(&format!("{route}?{query}")).await;
            assert_eq!(
                (s, e["error"]["code"].as_str()),
                (StatusCode::BAD_REQUEST, Some(code)),
                "{route}?{query}: {e}"
            );
        }
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Issue 36: "replay what died since the outage began" is one call; an endpoint with no outage
/// on record, or unknown, says so.
#[tokio::test]
async fn replay_outage_needs_an_outage_on_record() {
    let a = api();
    a.post("/v1/jobs", job("r1")).await;
    let path = "/v1/endpoints/https%3A%2F%2Fapi.example.com/replay-outage";
    let (s, e) = a.post(path, json!({})).await;
    assert_eq!(
        (s, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_state")),
        "{e}"
    );
    let (s, e) = a
        .post(
            "/v1/endpoints/https%3A%2F%2Fnever.example.com/replay-outage",
            json!({}),
        )
        .await;
    assert_eq!(
        (s, e["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found")),
        "{e}"
    );
    let (s, v) = a.get("/v1/endpoints/https%3A%2F%2Fapi.example.com").await;
    assert_eq!(s, StatusCode::OK);
    for field in ["quarantined_since", "failing_since", "outage_began"] {
        assert_eq!(v[field], Value::Null, "{field}: {v}");
    }
}
