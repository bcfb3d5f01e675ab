//! Leasing past a held endpoint's deep backlog, for stores that bound the rows one lease request
//! reads: each request reads a bounded number of the held endpoint's rows, and later requests
//! carry on from where the last one stopped, so other endpoints' jobs behind it are still
//! reached. The store given must read 4 skipped rows from the head and 16 further on, so that
//! the backlog can be small ([`lease_scan_suite!`](crate::lease_scan_suite)).

use super::*;
use std::sync::Mutex;

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

async fn insert(store: &Arc<dyn Store>, jobs: &[(String, &str, i32)]) {
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
}

fn params() -> LeaseAdmittedParams {
    LeaseAdmittedParams {
        queue: "q".into(),
        now: at(1),
        owner: "w".into(),
        lease_until: at(31),
        max: 10,
    }
}

/// Leases until something is taken; returns how many requests it took and what was taken.
async fn lease_until_taken(store: &Arc<dyn Store>, limit: usize) -> (usize, Vec<String>) {
    for call in 1..=limit {
        let asked = Arc::new(Mutex::new(0));
        let got = store
            .job_lease_admitted(
                params(),
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

pub async fn jobs_behind_a_deep_held_backlog_are_reached_over_a_few_leases(store: Arc<dyn Store>) {
    let mut jobs: Vec<(String, &str, i32)> = (0..100).map(|i| (format!("a{i}"), "A", 0)).collect();
    jobs.push(("b".into(), "B", 0));
    insert(&store, &jobs).await;
    // Each request reads 4 skipped rows at the head and 16 further on: "b", 101st in order,
    // is out of reach of the first request and reached within seven.
    let (calls, taken) = lease_until_taken(&store, 20).await;
    assert_eq!(taken, ["b"]);
    assert!((2..=7).contains(&calls), "took {calls} requests");
    // Once the end was reached, the next request starts over from the head.
    insert(&store, &[("c".into(), "C", 0)]).await;
    let (_, taken) = lease_until_taken(&store, 20).await;
    assert_eq!(taken, ["c"]);
}

pub async fn the_deep_read_carries_on_into_lower_priorities(store: Arc<dyn Store>) {
    let mut jobs: Vec<(String, &str, i32)> = (0..60).map(|i| (format!("a{i}"), "A", 5)).collect();
    jobs.push(("b".into(), "B", 0));
    insert(&store, &jobs).await;
    let (calls, taken) = lease_until_taken(&store, 20).await;
    assert_eq!(taken, ["b"]);
    assert!(calls >= 2, "out of reach of the first request");
}

pub async fn a_higher_priority_job_is_seen_at_the_head_at_once(store: Arc<dyn Store>) {
    let jobs: Vec<(String, &str, i32)> = (0..100).map(|i| (format!("a{i}"), "A", 0)).collect();
    insert(&store, &jobs).await;
    // A first request moves the deep read on; a new urgent job comes first in lease order.
    let asked = Arc::new(Mutex::new(0));
    let got = store
        .job_lease_admitted(params(), Box::new(HoldA { asked }))
        .await
        .expect("lease");
    assert!(got.taken.is_empty());
    insert(&store, &[("u".into(), "B", 9)]).await;
    let (calls, taken) = lease_until_taken(&store, 20).await;
    assert_eq!((calls, taken), (1, vec!["u".to_owned()]));
}

/// One `#[tokio::test]` per case of this module, each with a fresh store from `$make` (which
/// must set the read bounds to 4 and 16).
#[macro_export]
macro_rules! lease_scan_suite {
    ($make:expr) => {
        $crate::lease_scan_suite!(@cases $make;
            jobs_behind_a_deep_held_backlog_are_reached_over_a_few_leases,
            the_deep_read_carries_on_into_lower_priorities,
            a_higher_priority_job_is_seen_at_the_head_at_once);
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $case() {
                let store: std::sync::Arc<dyn $crate::Store> = $make.await;
                $crate::testkit::$case(store).await;
            }
        )*
    };
}
