//! Ordering keys through the binary: a receiver that limits its rate (429 with Retry-After)
//! sees each key's jobs one at a time and in enqueue order; a dead head blocks its key, is
//! listed as blocked, and the key goes on once it is replayed.

use super::*;
use redial_test_receiver::Behaviour;

/// What the receiver saw of each key, in arrival order: (job number, status).
fn by_key(rx: &Receiver, path: &str) -> std::collections::BTreeMap<String, Vec<(u64, u16)>> {
    let mut seen: std::collections::BTreeMap<String, Vec<(u64, u16)>> = Default::default();
    for r in rx.received(path) {
        let body: Value = serde_json::from_str(&r.body).expect("a JSON body");
        let key = body["k"].as_str().expect("a key").to_owned();
        seen.entry(key)
            .or_default()
            .push((body["n"].as_u64().expect("a number"), r.status));
    }
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn each_keys_jobs_reach_a_rate_limited_receiver_one_at_a_time_in_order() {
    let rx = Receiver::start().await;
    rx.behave(
        "/orders",
        // Quota headers would let Redial keep under the limit: only the 429s speak.
        Behaviour::RateLimitedQuietly {
            limit: 8,
            window: Duration::from_millis(500),
        },
    );
    let (dir, data) = temp();
    let config = dir.path().join("redial.toml");
    std::fs::write(&config, "[queues.default]\nconcurrency = 16\n").expect("write config");
    let s = start(&data, &["--config", config.to_str().expect("utf-8")], &[]);
    // Five keys of eight jobs each, enqueued interleaved and with priorities that would reorder
    // them, and ten jobs without a key.
    let mut jobs = Vec::new();
    for n in 0..8u64 {
        for k in 0..5 {
            jobs.push(json_job(
                &rx.url("/orders"),
                &format!("k{k}"),
                n,
                Some(&format!("k{k}")),
                (n * 7 % 5) as i64,
            ));
        }
        if n < 5 {
            jobs.push(json_job(&rx.url("/orders"), "free", n, None, 0));
            jobs.push(json_job(&rx.url("/orders"), "free", n + 5, None, 0));
        }
    }
    let file = dir.path().join("jobs.json");
    std::fs::write(&file, Value::Array(jobs).to_string()).expect("write jobs");
    let out = cli(
        &s.url,
        &["enqueue", "--file", file.to_str().expect("utf-8")],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    eventually("every job answered 200", || async {
        rx.received("/orders")
            .iter()
            .filter(|r| r.status == 200)
            .count()
            == 50
    })
    .await;
    let seen = by_key(&rx, "/orders");
    let refused: usize = seen.values().flatten().filter(|(_, s)| *s == 429).count();
    assert!(refused > 0, "the receiver refused some: {seen:?}");
    for k in 0..5 {
        let line = &seen[&format!("k{k}")];
        // Numbers never go back, and each job's last request is its 200: job n+1 was sent only
        // after job n succeeded, whatever the 429s did in between.
        assert!(line.windows(2).all(|w| w[0].0 <= w[1].0), "k{k}: {line:?}");
        let mut done = Vec::new();
        for (i, (n, status)) in line.iter().enumerate() {
            let last_of_n = line.get(i + 1).is_none_or(|next| next.0 != *n);
            assert_eq!(*status == 200, last_of_n, "k{k}: {line:?}");
            if last_of_n {
                done.push(*n);
            }
        }
        assert_eq!(done, (0..8).collect::<Vec<_>>(), "k{k}");
    }
    let keys = cli(&s.url, &["queues", "ordering-keys", "default"], None);
    assert_eq!(keys.code, 0, "{}", keys.stderr);
    assert_eq!(
        keys.json["keys"],
        serde_json::json!([]),
        "every line is done"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dead_head_blocks_its_key_until_it_is_replayed() {
    let rx = Receiver::start().await;
    rx.script("/ledger", vec![Reply::status(400), Reply::status(200)]);
    let (_dir, data) = temp();
    let s = start(&data, &[], &[]);
    for (id, n) in [("d0", 0u64), ("d1", 1), ("d2", 2)] {
        let body = serde_json::json!({ "k": "acct", "n": n }).to_string();
        let out = cli(
            &s.url,
            &[
                "enqueue",
                "--url",
                &rx.url("/ledger"),
                "--id",
                id,
                "--ordering-key",
                "acct",
                "--body",
                &body,
            ],
            None,
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert_eq!(out.json["ordering_key"], "acct");
    }
    wait_for(&s.url, "d0", "dead", |j| j["state"] == "dead");
    let blocked = cli(
        &s.url,
        &["queues", "ordering-keys", "default", "--blocked"],
        None,
    );
    assert_eq!(blocked.code, 0, "{}", blocked.stderr);
    assert_eq!(blocked.json["keys"][0]["key"], "acct", "{}", blocked.json);
    assert_eq!(blocked.json["keys"][0]["head"]["id"], "d0");
    assert_eq!(blocked.json["keys"][0]["behind"], 2);
    let text = cli_text(
        &s.url,
        &["queues", "ordering-keys", "default", "--blocked"],
        None,
    );
    assert!(
        text.stdout.contains("blocked: its head d0 is dead"),
        "{}",
        text.stdout
    );
    let shown = cli_text(&s.url, &["jobs", "show", "d1"], None);
    assert!(shown.stdout.contains("order key acct"), "{}", shown.stdout);
    assert_eq!(show(&s.url, "d1")["state"], "ready");
    assert_eq!(
        rx.count("/ledger"),
        1,
        "nothing behind the dead head was sent"
    );
    let replayed = cli(&s.url, &["jobs", "replay", "d0"], None);
    assert_eq!(replayed.code, 0, "{}", replayed.stderr);
    wait_for(&s.url, "d2", "completed", |j| j["state"] == "completed");
    let order: Vec<(u64, u16)> = by_key(&rx, "/ledger").remove("acct").unwrap_or_default();
    assert_eq!(order, [(0, 400), (0, 200), (1, 200), (2, 200)]);
}

fn json_job(url: &str, key_in_body: &str, n: u64, key: Option<&str>, priority: i64) -> Value {
    let mut job = serde_json::json!({
        "request": {
            "method": "POST",
            "url": url,
            "body": serde_json::json!({ "k": key_in_body, "n": n }).to_string(),
        },
        "priority": priority,
    });
    if let Some(k) = key {
        job["ordering_key"] = Value::from(k);
    }
    job
}
