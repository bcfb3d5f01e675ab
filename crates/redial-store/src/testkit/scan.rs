//! Leasing past a held endpoint's deep backlog, for stores that bound the rows one lease request
//! reads: each request reads a bounded number of the held endpoint's rows, and later requests
//! carry on from where the last one stopped, so other endpoints' jobs behind it are still
//! reached. The store given must read 4 skipped rows from the head and 16 further on, so that
//! the backlog can be small ([`lease_scan_suite!`](crate::lease_scan_suite)).

use super::{at, new_job};
use crate::{Admit, Candidate, LeaseAdmittedParams, Store, Verdict};
use redial_policy::Timestamp;
use std::sync::Arc;
use std::sync::Mutex;

/// Holds one endpoint, takes everything else, and counts what it was asked.
struct Hold {
    endpoint: &'static str,
    asked: Arc<Mutex<usize>>,
}

impl Hold {
    fn a(asked: Arc<Mutex<usize>>) -> Box<Hold> {
        Box::new(Hold {
            endpoint: "A",
            asked,
        })
    }
}

impl Admit for Hold {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        *self.asked.lock().expect("lock") += 1;
        if c.endpoint == self.endpoint {
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
            .job_lease_admitted(params(), Hold::a(asked.clone()))
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
        .job_lease_admitted(params(), Hold::a(asked))
        .await
        .expect("lease");
    assert!(got.taken.is_empty());
    insert(&store, &[("u".into(), "B", 9)]).await;
    let (calls, taken) = lease_until_taken(&store, 20).await;
    assert_eq!((calls, taken), (1, vec!["u".to_owned()]));
}

/// Takes every job it is asked about.
struct TakeAll;

impl Admit for TakeAll {
    fn admit(&mut self, _: &Candidate) -> Verdict {
        Verdict::Take
    }

    fn not_leased(&mut self, _: &Candidate) {}
}

/// One lease of up to `max` jobs of queue "q" at `now`, taking all; the ids taken, in order.
async fn lease_all(store: &Arc<dyn Store>, now: Timestamp, max: usize) -> Vec<String> {
    let p = LeaseAdmittedParams {
        now,
        max,
        ..params()
    };
    let got = store
        .job_lease_admitted(p, Box::new(TakeAll))
        .await
        .expect("lease");
    got.taken.iter().map(|j| j.id.0.clone()).collect()
}

/// Forty jobs "a00".."a39" of endpoint "B" at priority 0, two leases of ten taken (a deep queue
/// being drained), then "late" enqueued to run 10 s before the others: before the head of the
/// queue in lease order.
async fn drained_twice_then_late(store: &Arc<dyn Store>) {
    let jobs: Vec<(String, &str, i32)> = (0..40).map(|i| (format!("a{i:02}"), "B", 0)).collect();
    insert(store, &jobs).await;
    for k in 0..2 {
        let want: Vec<String> = (k * 10..k * 10 + 10).map(|i| format!("a{i:02}")).collect();
        assert_eq!(lease_all(store, at(1), 10).await, want);
    }
    let mut late = new_job("late", "q");
    late.endpoint = "B".into();
    late.run_at = at(-10);
    store.job_insert_batch(vec![late]).await.expect("insert");
}

/// A store may start a read from the head where a recent one began, so as not to step over what
/// leased jobs left behind: a job that comes due before that place waits no longer than until
/// a lease finds fewer jobs than it wants (the queue runs short), and no longer than a second.
pub async fn a_job_due_behind_the_head_is_leased_once_the_queue_runs_short(store: Arc<dyn Store>) {
    drained_twice_then_late(&store).await;
    let mut taken = Vec::new();
    for _ in 0..5 {
        let got = lease_all(&store, at(1), 10).await;
        let short = got.len() < 10;
        taken.extend(got);
        if short {
            break;
        }
    }
    assert!(taken.contains(&"late".to_owned()), "taken: {taken:?}");
    assert_eq!(taken.len(), 21, "every job once: {taken:?}");
}

pub async fn a_job_due_behind_the_head_is_leased_first_a_second_on(store: Arc<dyn Store>) {
    drained_twice_then_late(&store).await;
    let got = lease_all(&store, at(2), 10).await;
    assert_eq!(
        got.first().map(String::as_str),
        Some("late"),
        "taken: {got:?}"
    );
}

/// A lease that comes up short says whether it looked at everything: the engine goes idle on
/// its word. While the jobs at the head are held, one due before them (another endpoint's) is
/// taken, or the lease that did not take it asks to be followed at once.
pub async fn a_job_due_behind_a_held_head_is_taken_or_the_lease_says_more(store: Arc<dyn Store>) {
    drained_twice_then_late(&store).await;
    let mut late = new_job("late-c", "q");
    late.endpoint = "C".into();
    late.run_at = at(-10);
    store.job_insert_batch(vec![late]).await.expect("insert");
    for _ in 0..2 {
        let got = store
            .job_lease_admitted(
                params(),
                Box::new(Hold {
                    endpoint: "B",
                    asked: Arc::default(),
                }),
            )
            .await
            .expect("lease");
        let taken: Vec<&str> = got.taken.iter().map(|j| j.id.0.as_str()).collect();
        if taken.contains(&"late-c") {
            return;
        }
        assert!(
            got.more,
            "a lease that left a due job behind must ask to be followed (took {taken:?})"
        );
    }
    panic!("late-c not taken in two leases");
}

pub async fn a_higher_priority_job_comes_first_while_a_queue_drains(store: Arc<dyn Store>) {
    drained_twice_then_late(&store).await;
    insert(&store, &[("u".into(), "B", 9)]).await;
    let got = lease_all(&store, at(1), 10).await;
    assert_eq!(got.first().map(String::as_str), Some("u"), "taken: {got:?}");
}

pub async fn a_drained_level_gives_way_to_the_one_below(store: Arc<dyn Store>) {
    // The lower level enqueued first: its jobs come first by sequence, last by priority.
    let mut jobs: Vec<(String, &str, i32)> =
        (0..15).map(|i| (format!("l{i:02}"), "B", 0)).collect();
    jobs.extend((0..15).map(|i| (format!("h{i:02}"), "B", 5)));
    insert(&store, &jobs).await;
    let first = lease_all(&store, at(1), 10).await;
    let second = lease_all(&store, at(1), 10).await;
    let want: Vec<String> = (0..10).map(|i| format!("h{i:02}")).collect();
    assert_eq!(first, want);
    let want: Vec<String> = (10..15)
        .map(|i| format!("h{i:02}"))
        .chain((0..5).map(|i| format!("l{i:02}")))
        .collect();
    assert_eq!(second, want);
}

/// One `#[tokio::test]` per case of this module, each with a fresh store from `$make` (which
/// must set the read bounds to 4 and 16).
#[macro_export]
macro_rules! lease_scan_suite {
    ($make:expr) => {
        $crate::lease_scan_suite!(@cases $make;
            jobs_behind_a_deep_held_backlog_are_reached_over_a_few_leases,
            the_deep_read_carries_on_into_lower_priorities,
            a_higher_priority_job_is_seen_at_the_head_at_once,
            a_job_due_behind_the_head_is_leased_once_the_queue_runs_short,
            a_job_due_behind_the_head_is_leased_first_a_second_on,
            a_higher_priority_job_comes_first_while_a_queue_drains,
            a_drained_level_gives_way_to_the_one_below,
            a_job_due_behind_a_held_head_is_taken_or_the_lease_says_more);
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
