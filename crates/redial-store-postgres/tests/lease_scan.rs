//! Leasing past a held endpoint's deep backlog: each request reads a bounded number of its rows,
//! and later requests carry on from where the last one stopped, so other endpoints' jobs behind
//! it are still reached. A real PostgreSQL server (`DATABASE_URL`, a schema per test), with small
//! read bounds so the backlog can be small.

use redial_store::testkit::{at, new_job};
use redial_store::*;
use redial_store_postgres::PgStore;
use std::sync::{Arc, Mutex};

/// Holds endpoint "A", takes everything else, and counts what it was asked.
struct HoldA {
    asked: Arc<Mutex<usize>>,
}

impl Admit for HoldA {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        *self.asked.lock().expect("lock") += 1;
        if c.endpoint == "A" {
            Verdict::HoldEndpoint
        } else {
            Verdict::Take
        }
    }

    fn not_leased(&mut self, _: &Candidate) {}
}

async fn store_with(jobs: &[(&str, &str, i32)]) -> PgStore {
    let url = std::env::var("DATABASE_URL").expect(
        "DATABASE_URL is not set: run ./scripts/test (it starts a throwaway PostgreSQL) or point DATABASE_URL at a server",
    );
    let config = redial_store_postgres::testing::fresh_schema(&url)
        .await
        .expect("a schema for this test");
    let store = PgStore::connect_with(config, 2)
        .await
        .expect("connect store");
    store.set_lease_scan(4, 16);
    let batch = jobs
        .iter()
        .map(|(id, endpoint, priority)| {
            let mut j = new_job(id, "q");
            j.endpoint = (*endpoint).into();
            j.priority = *priority;
            j
        })
        .collect();
    store.job_insert_batch(batch).await.expect("insert");
    store
}

/// Leases until something is taken; returns how many requests it took and what was taken.
async fn lease_until_taken(store: &PgStore, limit: usize) -> (usize, Vec<String>) {
    for call in 1..=limit {
        let asked = Arc::new(Mutex::new(0));
        let got = store
            .job_lease_admitted(
                LeaseAdmittedParams {
                    queue: "q".into(),
                    now: at(1),
                    owner: "w".into(),
                    lease_until: at(31),
                    max: 10,
                },
                Box::new(HoldA {
                    asked: asked.clone(),
                }),
            )
            .await
            .expect("lease");
        assert_eq!(
            *asked.lock().expect("lock"),
            1 + got.taken.len(),
            "a held endpoint is asked once"
        );
        if !got.taken.is_empty() {
            return (call, got.taken.iter().map(|j| j.id.0.clone()).collect());
        }
    }
    panic!("nothing taken in {limit} requests");
}

#[tokio::test]
async fn jobs_behind_a_deep_held_backlog_are_reached_over_a_few_leases() {
    let mut jobs: Vec<(String, &str, i32)> = (0..100).map(|i| (format!("a{i}"), "A", 0)).collect();
    jobs.push(("b".into(), "B", 0));
    let jobs: Vec<(&str, &str, i32)> = jobs.iter().map(|(i, e, p)| (i.as_str(), *e, *p)).collect();
    let store = store_with(&jobs).await;
    // Each request reads 4 skipped rows at the head and 16 further on: "b", 101st in order,
    // is out of reach of the first request and reached within seven.
    let (calls, taken) = lease_until_taken(&store, 20).await;
    assert_eq!(taken, ["b"]);
    assert!((2..=7).contains(&calls), "took {calls} requests");
    // Once the end was reached, the next request starts over from the head.
    let mut c = new_job("c", "q");
    c.endpoint = "C".into();
    store.job_insert(c).await.expect("insert");
    let (_, taken) = lease_until_taken(&store, 20).await;
    assert_eq!(taken, ["c"]);
}

#[tokio::test]
async fn the_deep_read_carries_on_into_lower_priorities() {
    let mut jobs: Vec<(String, &str, i32)> = (0..60).map(|i| (format!("a{i}"), "A", 5)).collect();
    jobs.push(("b".into(), "B", 0));
    let jobs: Vec<(&str, &str, i32)> = jobs.iter().map(|(i, e, p)| (i.as_str(), *e, *p)).collect();
    let store = store_with(&jobs).await;
    let (calls, taken) = lease_until_taken(&store, 20).await;
    assert_eq!(taken, ["b"]);
    assert!(calls >= 2, "out of reach of the first request");
}

#[tokio::test]
async fn a_higher_priority_job_is_seen_at_the_head_at_once() {
    let jobs: Vec<(String, &str, i32)> = (0..100).map(|i| (format!("a{i}"), "A", 0)).collect();
    let jobs: Vec<(&str, &str, i32)> = jobs.iter().map(|(i, e, p)| (i.as_str(), *e, *p)).collect();
    let store = store_with(&jobs).await;
    // A first request moves the deep read on; a new urgent job comes first in lease order.
    let asked = Arc::new(Mutex::new(0));
    let params = LeaseAdmittedParams {
        queue: "q".into(),
        now: at(1),
        owner: "w".into(),
        lease_until: at(31),
        max: 10,
    };
    let got = store
        .job_lease_admitted(params, Box::new(HoldA { asked }))
        .await
        .expect("lease");
    assert!(got.taken.is_empty());
    let mut urgent = new_job("u", "q");
    urgent.endpoint = "B".into();
    urgent.priority = 9;
    store.job_insert(urgent).await.expect("insert");
    let (calls, taken) = lease_until_taken(&store, 20).await;
    assert_eq!((calls, taken), (1, vec!["u".to_owned()]));
}
