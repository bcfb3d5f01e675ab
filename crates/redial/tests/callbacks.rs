//! Completion callbacks (issue 33), end to end on both stores: the real binary, receivers on
//! loopback, the Standard Webhooks reference library (`standardwebhooks` on PyPI, first on PATH
//! through `./scripts/test`'s virtual environment) checking the signatures.
//!
//! - A job that fails once then succeeds makes exactly one logical callback (its repeats share
//!   one `webhook-id`), signed, with the final response.
//! - A callback receiver that fails for a while gets the callback later; one that answers 400
//!   puts the delivery in the dead letters (permanent), not the job.
//! - `redial serve` killed with SIGKILL at random points of 2,000 jobs with callbacks, restarted
//!   each time: every finished job's callback arrives, none for a job that has not finished,
//!   none under two `webhook-id`s.

use redial_test_receiver::{Received, Receiver, Reply};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

mod common;
use common::{eventually, reference_verifies, Db, Place, Server};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

/// Fast retries for the test queues and the callback queue, which signs its deliveries.
fn config() -> String {
    format!(
        "[policy.transient]\nbase = \"10ms\"\ncap = \"40ms\"\n\n\
         [queues.callbacks]\nsigning_secrets = [\"{SECRET}\"]\n"
    )
}

fn client(server: &Server) -> redial_client::Client {
    redial_client::Client::builder(&server.url)
        .build()
        .expect("client")
}

fn header<'a>(r: &'a Received, name: &str) -> &'a str {
    r.headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map_or("", |(_, v)| v.as_str())
}

async fn enqueue(c: &redial_client::Client, job: Value) -> Value {
    let answer = c.enqueue_batch(&[job]).await.expect("enqueue the job");
    serde_json::to_value(&answer).expect("JSON")["jobs"][0].clone()
}

async fn job(c: &redial_client::Client, id: &str) -> Value {
    serde_json::to_value(c.job(id).await.expect("the job")).expect("JSON")
}

/// Waits until the job `id` is in `state`, and returns it.
async fn job_in(c: &redial_client::Client, id: &str, state: &str) -> Value {
    eventually(&format!("job {id} is {state}"), || async {
        let j = job(c, id).await;
        (j["state"] == state).then_some(j)
    })
    .await
}

async fn one_callback_signed_with_the_response(db: Db) {
    let rx = Receiver::start().await;
    rx.script(
        "/charge",
        vec![
            Reply::status(503),
            Reply::status(201)
                .header("content-type", "application/json")
                .header("set-cookie", "session=secret")
                .body(r#"{"charge":"ch_1"}"#),
        ],
    );
    // The callback's first delivery fails too: its repeat carries the same webhook-id.
    rx.script("/done", vec![Reply::status(500), Reply::status(204)]);
    let place = Place::new(db).await;
    let server = place.serve(&config());
    let c = client(&server);
    enqueue(
        &c,
        json!({
            "id": "charge-1",
            "request": {"method": "POST", "url": rx.url("/charge"), "body": {"amount": 100}},
            "tags": ["billing"],
            "callback": {"url": rx.url("/done"), "headers": {"authorization": "Bearer app-secret"}}
        }),
    )
    .await;
    let done = job_in(&c, "charge-1", "completed").await;
    let delivery = done["callback_delivery"]
        .as_str()
        .expect("the delivery's id")
        .to_owned();
    assert_eq!(done["callback"]["headers"][0][1], "[redacted]", "{done}");
    let d = job_in(&c, &delivery, "completed").await;
    assert_eq!(d["callback_for"], "charge-1");
    assert_eq!(d["queue"], "callbacks");

    let got = rx.received("/done");
    assert_eq!(got.len(), 2, "one failed delivery, one that arrived");
    let ids: BTreeSet<&str> = got.iter().map(|r| header(r, "webhook-id")).collect();
    assert_eq!(
        ids,
        BTreeSet::from([delivery.as_str()]),
        "one logical callback"
    );
    for r in &got {
        reference_verifies(SECRET, &r.headers, &r.body)
            .unwrap_or_else(|e| panic!("the reference library refused it: {e}"));
        assert_eq!(header(r, "authorization"), "Bearer app-secret");
        assert_eq!(header(r, "content-type"), "application/json");
    }
    let body: Value = serde_json::from_str(&got[1].body).expect("a JSON body");
    assert_eq!(body["type"], "job.completed");
    let data = &body["data"];
    assert_eq!(data["id"], "charge-1");
    assert_eq!(data["queue"], "default");
    assert_eq!(data["tags"], json!(["billing"]));
    assert_eq!(data["state"], "completed");
    assert_eq!(data["runs"], 2);
    assert_eq!(data["response"]["status"], 201);
    assert_eq!(data["response"]["body"], r#"{"charge":"ch_1"}"#);
    assert_eq!(data["response"]["body_encoding"], "text");
    assert_eq!(data["response"]["content_type"], "application/json");
    assert_eq!(data["response"]["truncated"], false);
    assert!(
        data["response"]["headers"].get("set-cookie").is_none(),
        "secrets stay out: {body}"
    );
    assert_eq!(
        data["idempotency_key"], done["idempotency_key"],
        "the job's own key"
    );
}

async fn a_late_receiver_and_a_refusing_one(db: Db) {
    let rx = Receiver::start().await;
    rx.script("/ok", vec![Reply::status(200)]);
    // Down for a while (five failures), then up.
    let mut down = vec![Reply::status(503); 5];
    down.push(Reply::status(200));
    rx.script("/late", down);
    rx.script("/refuse", vec![Reply::status(400)]);
    let place = Place::new(db).await;
    let server = place.serve(&config());
    let c = client(&server);
    for (id, hook) in [("late", "/late"), ("refused", "/refuse")] {
        enqueue(
            &c,
            json!({
                "id": id,
                "request": {"method": "POST", "url": rx.url("/ok")},
                "callback": {"url": rx.url(hook), "on": ["completed"]}
            }),
        )
        .await;
    }
    let late = job_in(&c, "late", "completed").await;
    let delivery = late["callback_delivery"].as_str().expect("a delivery");
    let d = job_in(&c, delivery, "completed").await;
    assert_eq!(d["runs"], 6, "five failures, then the delivery: {d}");
    let got = rx.received("/late");
    assert_eq!(got.len(), 6);
    assert!(got.iter().all(|r| header(r, "webhook-id") == delivery));

    let refused = job_in(&c, "refused", "completed").await;
    let delivery = refused["callback_delivery"].as_str().expect("a delivery");
    let d = job_in(&c, delivery, "dead").await;
    assert_eq!(d["category"], "permanent");
    assert_eq!(rx.received("/refuse").len(), 1, "a 400 is not retried");
    // The job itself stays completed: the failure is the callback's.
    assert_eq!(job(&c, "refused").await["state"], "completed");
}

/// The callback deliveries received, by the job they tell of: the webhook-ids each came under.
fn callbacks_by_job(received: &[Received]) -> BTreeMap<String, BTreeSet<String>> {
    let mut by = BTreeMap::<String, BTreeSet<String>>::new();
    for r in received {
        let body: Value = serde_json::from_str(&r.body).expect("a JSON body");
        let id = body["data"]["id"]
            .as_str()
            .expect("the job's id")
            .to_owned();
        by.entry(id)
            .or_default()
            .insert(header(r, "webhook-id").to_owned());
    }
    by
}

/// The ids of the finished jobs of the default queue, read from the API.
async fn finished_jobs(c: &redial_client::Client) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for state in ["completed", "dead", "cancelled"] {
        let mut after: Option<String> = None;
        loop {
            let q = redial_client::JobsQuery {
                queue: Some("default".into()),
                state: Some(state.into()),
                limit: Some(500),
                cursor: after.clone(),
                ..Default::default()
            };
            let page = serde_json::to_value(c.jobs(&q).await.expect("list")).expect("JSON");
            for j in page["jobs"].as_array().expect("jobs") {
                out.insert(j["id"].as_str().expect("id").to_owned());
            }
            match page["next_cursor"].as_str() {
                Some(next) => after = Some(next.to_owned()),
                None => break,
            }
        }
    }
    out
}

/// A small deterministic generator for the kill points.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

async fn sigkill_loses_and_invents_no_callback(db: Db) {
    const JOBS: usize = 2_000;
    const KILLS: usize = 6;
    let rx = Receiver::start().await;
    rx.script("/work", vec![Reply::status(200)]);
    rx.script("/cb", vec![Reply::status(204)]);
    let place = Place::new(db).await;
    let mut server = place.serve(&config());
    let c = client(&server);
    for chunk in 0..JOBS / 500 {
        let batch: Vec<Value> = (0..500)
            .map(|i| {
                json!({
                    "id": format!("j{}", chunk * 500 + i),
                    "request": {"method": "POST", "url": rx.url("/work")},
                    "callback": {"url": rx.url("/cb")}
                })
            })
            .collect();
        c.enqueue_batch(&batch).await.expect("enqueue");
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (std::process::id() as u64);
    for kill in 0..KILLS {
        // Kill once a random share of the work is done (not at a wall-clock instant).
        let goal = (kill + 1) * JOBS / (KILLS + 2) + (next(&mut seed) % 200) as usize;
        eventually(
            &format!("{goal} requests sent before kill {kill}"),
            || async { rx.count("/work") >= goal },
        )
        .await;
        server.kill9();
        // Nothing is sent while the server is down: whatever callback arrived is for a job
        // that had finished.
        let told = callbacks_by_job(&rx.received("/cb"));
        server = place.serve(&config());
        let c = client(&server);
        let finished = finished_jobs(&c).await;
        for (id, ids) in &told {
            assert!(
                finished.contains(id),
                "a callback for {id}, which has not finished"
            );
            assert_eq!(ids.len(), 1, "{id}'s callback came under {ids:?}");
        }
    }
    let c = client(&server);
    eventually("every job finished and told", || async {
        let stats = serde_json::to_value(c.stats().await.expect("stats")).expect("JSON");
        let waiting: u64 = stats["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .filter(|q| {
                !matches!(
                    q["state"].as_str(),
                    Some("completed" | "dead" | "cancelled")
                )
            })
            .map(|q| q["count"].as_u64().unwrap_or(0))
            .sum();
        waiting == 0 && callbacks_by_job(&rx.received("/cb")).len() == JOBS
    })
    .await;
    let finished = finished_jobs(&c).await;
    assert_eq!(finished.len(), JOBS);
    let told = callbacks_by_job(&rx.received("/cb"));
    assert_eq!(
        told.keys().cloned().collect::<BTreeSet<_>>(),
        finished,
        "every finished job told, and only those"
    );
    for (id, ids) in &told {
        assert_eq!(ids.len(), 1, "{id}'s callback came under {ids:?}");
    }
    drop(server);
}

#[tokio::test(flavor = "multi_thread")]
async fn one_callback_signed_with_the_response_sqlite() {
    one_callback_signed_with_the_response(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn one_callback_signed_with_the_response_postgres() {
    one_callback_signed_with_the_response(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_late_receiver_and_a_refusing_one_sqlite() {
    a_late_receiver_and_a_refusing_one(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_late_receiver_and_a_refusing_one_postgres() {
    a_late_receiver_and_a_refusing_one(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_loses_and_invents_no_callback_sqlite() {
    sigkill_loses_and_invents_no_callback(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_loses_and_invents_no_callback_postgres() {
    sigkill_loses_and_invents_no_callback(Db::Postgres).await;
}
