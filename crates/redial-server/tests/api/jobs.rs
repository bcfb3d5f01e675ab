//! Jobs through the API: enqueue, deduplication, validation, batches, listing, actions, views.

use super::*;

#[tokio::test]
async fn enqueue_fills_defaults() {
    let api = api();
    let (status, j) = api
        .post(
            "/v1/jobs",
            json!({ "request": { "method": "get", "url": "https://api.example.com:8443/x?y=1" } }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{j}");
    assert_eq!(j["state"], "ready");
    assert_eq!(j["queue"], "default");
    assert_eq!(j["endpoint"], "https://api.example.com:8443");
    assert_eq!(j["request"]["method"], "GET");
    assert_eq!(j["deduplicated"], false);
    assert_eq!(j["attempts"], 0);
    assert!(j["id"].as_str().expect("id").len() >= 32, "a generated id");
    assert_eq!(
        j["idempotency_key"].as_str().expect("key").len(),
        36,
        "a derived UUIDv5 key"
    );

    let (_, a) = api.post("/v1/jobs", job("same-id")).await;
    let (_, b) = api.post("/v1/jobs", job("same-id")).await;
    assert_eq!(
        a["idempotency_key"], b["idempotency_key"],
        "derived keys are deterministic"
    );
    let (status, j) = api.post("/v1/jobs", json!({ "id": "later", "request": { "method": "POST", "url": "https://a.example/" }, "run_at": "2030-01-01T00:00:00Z", "priority": 5, "tags": ["x"] })).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        (j["state"].as_str(), j["run_at"].as_str()),
        (Some("scheduled"), Some("2030-01-01T00:00:00Z"))
    );
    let (_, shown) = api.get("/v1/jobs/same-id").await;
    assert_eq!(shown["attempt_log"], json!([]));
    assert_eq!(
        shown["request"]["headers"],
        json!([["content-type", "application/json"]])
    );
}

#[tokio::test]
async fn same_id_is_deduplicated_and_a_different_request_conflicts() {
    let api = api();
    assert_eq!(
        api.post("/v1/jobs", job("pay-1")).await.0,
        StatusCode::CREATED
    );
    let (status, j) = api.post("/v1/jobs", job("pay-1")).await;
    assert_eq!((status, &j["deduplicated"]), (StatusCode::OK, &json!(true)));
    let mut different = job("pay-1");
    different["request"]["body"] = json!({"amount": 999});
    let (status, e) = api.post("/v1/jobs", different).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("conflict"))
    );
    assert_eq!(api.total_jobs().await, 1);
}

#[tokio::test]
async fn bad_input_gets_a_precise_4xx_and_nothing_is_stored() {
    let api = api();
    let big_body = "x".repeat(2000);
    let huge = "y".repeat(70 * 1024);
    let cases: Vec<(String, StatusCode, &str)> = vec![
        ("{not json".into(), StatusCode::BAD_REQUEST, "invalid_json"),
        ("".into(), StatusCode::BAD_REQUEST, "invalid_json"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "colour": 1}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"queue": "default"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "not a url"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_url"),
        (json!({"request": {"method": "GET", "url": "ftp://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_url"),
        (json!({"request": {"method": "GE T", "url": "https://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_method"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"bad name": "1"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"x-a": "1\r\nInjected: yes"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "timeout": "10"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_timeout"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "timeout": "1h"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_timeout"),
        (json!({"queue": "nope", "request": {"method": "GET", "url": "https://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "unknown_queue"),
        (json!({"id": "a/b", "request": {"method": "GET", "url": "https://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_id"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "deadline": "2020-01-01T00:00:00Z"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_deadline"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "run_at": "tomorrow"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "idempotency_key": "has space"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_idempotency_key"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "policy": {"max_attempts": 0}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_policy"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "policy": {"max_atempts": 3}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "POST", "url": "https://a.example/", "body": big_body}}).to_string(), StatusCode::PAYLOAD_TOO_LARGE, "job_body_too_large"),
        // Accepted nonsense before (issue 13, item 8).
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "policy": [1]}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "run_at": "2030-01-02T00:00:00Z", "deadline": "2030-01-01T00:00:00Z"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_deadline"),
        (json!({"request": {"method": "GET", "url": format!("https://a.example/{}", "u".repeat(10_000))}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_url"),
        (json!({"request": {"method": "GET", "url": "http://127.0.0.1:0/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_url"),
        (json!({"request": {"method": "POST", "url": "https://a.example/", "headers": {"Content-Length": "0"}, "body": "x"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "POST", "url": "https://a.example/", "headers": [["transfer-encoding", "chunked"]]}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"Host": "other.example"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"Proxy-Authorization": "x"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"Connection": "close"}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_header"),
        (json!({"request": {"method": "str", "url": "https://a.example/"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_method"),
        (json!({"request": {"method": "POST", "url": "https://a.example/", "body": huge}}).to_string(), StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": ""}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "g".repeat(129)}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "a\nb"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": " "}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "acme\u{202e}gpj.exe"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": "a\u{2028}b"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_group"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "group": 7}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        // Read through the API's generated types, then checked into the domain's (issue 57).
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "priority": 3_000_000_000_i64}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "priority": 1.5}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": "x-a: 1"}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "headers": {"x-a": 1}}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/", "colour": 1}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "callback": {"url": "https://b.example/", "on": ["done"]}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_callback"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "callback": {"url": "https://b.example/", "colour": 1}}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
        (json!({"request": {"method": "GET", "url": "https://a.example/"}, "policy": "fast"}).to_string(), StatusCode::UNPROCESSABLE_ENTITY, "invalid_field"),
    ];
    for (body, status, code) in cases {
        let (got, e) = api.call("POST", "/v1/jobs", Some(&body), None).await;
        assert_eq!(
            (got, e["error"]["code"].as_str()),
            (status, Some(code)),
            "{}: {e}",
            &body[..body.len().min(120)]
        );
        assert!(!e["error"]["message"].as_str().expect("message").is_empty());
    }
    assert_eq!(api.total_jobs().await, 0, "nothing half-stored");
    // A null policy, headers or body is none, as absent is.
    let (status, _) = api
        .post(
            "/v1/jobs",
            json!({"request": {"method": "GET", "url": "https://a.example/", "headers": null, "body": null}, "policy": null}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn batches_are_atomic_and_bounded() {
    let api = api();
    api.post("/v1/jobs", job("b0")).await;
    let mut conflicting = job("b0");
    conflicting["request"]["url"] = json!("https://api.example.com/other");
    let (status, e) = api
        .post(
            "/v1/jobs/batch",
            json!({ "jobs": [job("b1"), conflicting] }),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("conflict"))
    );
    assert!(e["error"]["message"]
        .as_str()
        .expect("message")
        .starts_with("jobs[1]"));
    assert_eq!(api.total_jobs().await, 1);

    let (status, e) = api
        .post(
            "/v1/jobs/batch",
            json!({ "jobs": [job("b1"), {"request": {"method": "GET", "url": "nope"}}] }),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_url"))
    );
    assert!(e["error"]["message"]
        .as_str()
        .expect("message")
        .starts_with("jobs[1]"));
    // A job the API's types cannot read is named too.
    let mut unknown = job("b1");
    unknown["colour"] = json!("blue");
    let (status, e) = api
        .post("/v1/jobs/batch", json!({ "jobs": [job("b1"), unknown] }))
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_field"))
    );
    let message = e["error"]["message"].as_str().expect("message");
    assert!(
        message.starts_with("jobs[1]: unknown field `colour`"),
        "{message}"
    );
    let (status, e) = api
        .post(
            "/v1/jobs/batch",
            json!({ "jobs": [job("1"), job("2"), job("3"), job("4")] }),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, Some("batch_too_large"))
    );
    let (status, e) = api.post("/v1/jobs/batch", json!({ "jobs": [] })).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("empty_batch"))
    );
    assert_eq!(api.total_jobs().await, 1);

    let (status, out) = api
        .post(
            "/v1/jobs/batch",
            json!({ "jobs": [job("b1"), job("b0"), job("b2")] }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        (out["inserted"].as_u64(), out["deduplicated"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(api.total_jobs().await, 3);
}

#[tokio::test]
async fn listing_filters_and_pages() {
    let api = api();
    for i in 0..7 {
        api.post("/v1/jobs", job(&format!("l{i}"))).await;
    }
    let mut seen = Vec::new();
    let mut path = "/v1/jobs?queue=default&state=ready&limit=3".to_owned();
    loop {
        let (status, page) = api.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for j in page["jobs"].as_array().expect("jobs") {
            seen.push(j["id"].as_str().expect("id").to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/jobs?queue=default&state=ready&limit=3&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, ["l0", "l1", "l2", "l3", "l4", "l5", "l6"]);
    let (_, page) = api.get("/v1/jobs?state=dead").await;
    assert_eq!(page["jobs"], json!([]));
    for (path, code) in [
        ("/v1/jobs?state=zombie", "invalid_state"),
        ("/v1/jobs?category=bad", "invalid_category"),
        ("/v1/jobs?limit=0", "invalid_limit"),
        ("/v1/jobs?cursor=abc", "invalid_cursor"),
        ("/v1/jobs?colour=red", "unknown_parameter"),
    ] {
        let (status, e) = api.get(path).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{path}"
        );
    }
    let (status, e) = api.get("/v1/jobs?queue=nope").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("unknown_queue"))
    );
}

#[tokio::test]
async fn actions_on_the_wrong_state_or_a_missing_job_are_refused() {
    let api = api();
    api.post("/v1/jobs", job("alive")).await;
    let (status, e) = api.post("/v1/jobs/alive/replay", json!(null)).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("invalid_state"))
    );
    assert_eq!(
        e["error"]["message"],
        "job alive is ready: cannot replay it"
    );
    let (status, _) = api.post("/v1/jobs/alive/dismiss", json!(null)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, e) = api.post("/v1/jobs/ghost/replay", json!(null)).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    assert_eq!(api.get("/v1/jobs/ghost").await.0, StatusCode::NOT_FOUND);
    let (status, j) = api.post("/v1/jobs/alive/cancel", json!(null)).await;
    assert_eq!(
        (status, j["state"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );
    let (status, _) = api.post("/v1/jobs/alive/cancel", json!(null)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    // No filter: refused unless it says "all" (issue 13).
    for body in [None, Some("{}")] {
        let (status, e) = api
            .call("POST", "/v1/dead-letters/replay", body, None)
            .await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("filter_required")),
            "{body:?}"
        );
    }
    // since after until: nothing could match, refused rather than answered with nothing.
    let (status, e) = api
        .post(
            "/v1/dead-letters/replay",
            json!({"since": "2026-12-02T00:00:00Z", "until": "2026-12-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_range"))
    );
    let (status, e) = api
        .get("/v1/dead-letters/groups?since=2026-12-02T00:00:00Z&until=2026-12-01T00:00:00Z")
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_range"))
    );
    let (status, e) = api
        .post("/v1/dead-letters/dismiss", json!({"all": false}))
        .await;
    assert_eq!(
        e["error"]["code"].as_str(),
        Some("filter_required"),
        "{status}"
    );
    let (status, out) = api
        .post("/v1/dead-letters/replay", json!({"all": true}))
        .await;
    assert_eq!(
        (status, out["affected"].as_u64()),
        (StatusCode::OK, Some(0))
    );
    let (status, e) = api
        .post("/v1/dead-letters/dismiss", json!({"category": "sad"}))
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_category"))
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("deadline_exceeded")),
        "names the categories: {e}"
    );
    for (body, says) in [
        (
            json!({"all": true, "key": "rotate"}),
            "key must be keep or renew",
        ),
        (
            json!({"all": true, "patch": {"headers": {"set": {"x-a": 1}}}}),
            "patch.headers.set",
        ),
        (
            json!({"all": true, "patch": {"policy": [1]}}),
            "patch.policy",
        ),
        (
            json!({"all": true, "patch": {"colour": 1}}),
            "unknown field `colour`",
        ),
        (
            json!({"all": true, "patch": {"credentials": 7}}),
            "invalid type",
        ),
    ] {
        let (status, e) = api.post("/v1/dead-letters/replay", body.clone()).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_field")),
            "{body}"
        );
        let message = e["error"]["message"].as_str().expect("message");
        assert!(message.contains(says), "{body}: {message}");
    }
    let (status, e) = api.get("/v2/nothing").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("no_route"))
    );
}

/// A reason pattern filters dead letters only, is one line of plain text of at most 1,000
/// characters, and is no parameter of the patterns themselves; one that matches nothing acts on
/// nothing (it is a filter, so no `all` is needed).
#[tokio::test]
async fn reason_patterns_are_checked() {
    let api = api();
    let (status, e) = api.get("/v1/jobs?state=ready&pattern=x").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_pattern"))
    );
    let (status, page) = api.get("/v1/jobs?pattern=x").await;
    assert_eq!(
        (status, page["jobs"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(0))
    );
    let long = "x".repeat(1001);
    for path in [
        format!("/v1/jobs?pattern={long}"),
        format!("/v1/dead-letters/groups?pattern={long}"),
        "/v1/dead-letters/groups?pattern=a%0Ab".to_owned(),
    ] {
        let (status, e) = api.get(&path).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_pattern")),
            "{path}"
        );
    }
    let (status, e) = api
        .post("/v1/dead-letters/replay", json!({"pattern": "a\u{202e}b"}))
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_pattern"))
    );
    let (status, out) = api
        .post(
            "/v1/dead-letters/dismiss",
            json!({"pattern": "no such <n>"}),
        )
        .await;
    assert_eq!(
        (status, out["affected"].as_u64()),
        (StatusCode::OK, Some(0))
    );
    let (status, e) = api.get("/v1/dead-letters/patterns?pattern=x").await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unknown_parameter"))
    );
    for limit in ["0", "501", "x"] {
        let (status, e) = api
            .get(&format!("/v1/dead-letters/patterns?limit={limit}"))
            .await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("invalid_limit")),
            "{limit}"
        );
    }
    let (status, p) = api.get("/v1/dead-letters/patterns?limit=500").await;
    assert_eq!(
        (
            status,
            p["patterns"].as_array().map(Vec::len),
            p["count"].as_u64(),
            p["total"].as_u64()
        ),
        (StatusCode::OK, Some(0), Some(0), Some(0))
    );
}

/// Bulk actions are operations: started at once with `wait: false` (202), followed and listed,
/// refused a cancel once finished; waited for, they answer how many and how they ended.
#[tokio::test]
async fn bulk_actions_are_operations() {
    let api = api();
    let (status, op) = api
        .post(
            "/v1/dead-letters/replay",
            json!({"all": true, "wait": false}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{op}");
    assert_eq!(
        (op["kind"].as_str(), op["total"].as_u64()),
        (Some("replay"), Some(0))
    );
    let id = op["id"].as_str().expect("an id").to_owned();
    // Followed until it ends; the bound only stops a broken test from hanging.
    let mut state = String::new();
    let give_up = tokio::time::Instant::now() + std::time::Duration::from_secs(300);
    while tokio::time::Instant::now() < give_up {
        let (status, now) = api.get(&format!("/v1/operations/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        state = now["state"].as_str().unwrap_or("").to_owned();
        if state != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(state, "done");
    let (_, list) = api.get("/v1/operations").await;
    assert_eq!(list["operations"][0]["id"], id.as_str());
    let (status, e) = api
        .post(&format!("/v1/operations/{id}/cancel"), json!(null))
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("invalid_state"))
    );
    let (status, e) = api.post("/v1/operations/op-none/cancel", json!(null)).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found"))
    );
    assert_eq!(
        api.get("/v1/operations/op-none").await.0,
        StatusCode::NOT_FOUND
    );
    let (status, out) = api
        .post("/v1/dead-letters/dismiss", json!({"all": true}))
        .await;
    assert_eq!(
        (status, out["affected"].as_u64(), out["state"].as_str()),
        (StatusCode::OK, Some(0), Some("done"))
    );
    assert!(out["operation"].is_string());
    let (status, e) = api
        .post(
            "/v1/dead-letters/replay",
            json!({"all": true, "wait": false, "patch": {"url": "https://example.com/"}}),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid_field"))
    );
}

#[tokio::test]
async fn secrets_are_redacted_in_job_views() {
    let api = api();
    let (_, j) = api
        .post(
            "/v1/jobs",
            json!({ "id": "s", "request": { "method": "POST", "url": "https://api.example.com/v1?api_key=abc&page=2",
                    "headers": {"Authorization": "Bearer sk_live_123", "X-Trace": "t1"}, "body": "secret payload" } }),
        )
        .await;
    let text = j.to_string();
    assert!(
        !text.contains("sk_live_123") && !text.contains("abc") && !text.contains("secret payload"),
        "{text}"
    );
    assert_eq!(
        j["request"]["url"],
        "https://api.example.com/v1?api_key=%5Bredacted%5D&page=2"
    );
    assert_eq!(j["request"]["body_bytes"], 14);
}
