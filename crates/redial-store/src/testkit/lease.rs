//! Leasing: order and queues, never twice, candidates past held endpoints, admission asked in
//! lease order, leasing by id.

use super::{at, get, ids, lease, new_job, record};
use crate::{
    Admit, Candidate, CandidateParams, JobState, LeaseAdmittedParams, LeaseIdsParams, Store,
    Transition, Verdict,
};
use std::sync::Arc;

pub async fn lease_order_and_queues(store: Arc<dyn Store>) {
    let mut jobs = Vec::new();
    for (id, prio, run_at) in [
        ("low-early", 0, -10),
        ("high", 5, 0),
        ("low-late", 0, -5),
        ("future", 9, 100),
    ] {
        let mut j = new_job(id, "q");
        j.priority = prio;
        j.run_at = at(run_at);
        jobs.push(j);
    }
    jobs.push(new_job("elsewhere", "other"));
    store.job_insert_batch(jobs).await.expect("batch");
    let got = lease(&store, "q", "w1", at(0), 2).await;
    assert_eq!(ids(&got), ["high", "low-early"]);
    assert!(got
        .iter()
        .all(|j| j.state == JobState::Running && j.lease_owner.as_deref() == Some("w1")));
    assert_eq!(
        ids(&lease(&store, "q", "w2", at(0), 10).await),
        ["low-late"]
    );
    assert!(lease(&store, "q", "w3", at(0), 10).await.is_empty());
    assert_eq!(
        ids(&lease(&store, "other", "w3", at(0), 10).await),
        ["elsewhere"]
    );
}

pub async fn lease_never_hands_a_job_out_twice(store: Arc<dyn Store>) {
    let jobs: Vec<_> = (0..200)
        .map(|i| new_job(&format!("j{i:03}"), "default"))
        .collect();
    store.job_insert_batch(jobs).await.expect("batch");
    let mut tasks = Vec::new();
    for w in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = lease(&store, "default", &format!("w{w}"), at(0), 7).await;
                if got.is_empty() {
                    return mine;
                }
                mine.extend(ids(&got));
            }
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("task"));
    }
    all.sort();
    let before = all.len();
    all.dedup();
    assert_eq!(before, all.len(), "a job was leased twice");
    assert_eq!(all.len(), 200);
}

pub async fn candidates_leave_out_held_endpoints(store: Arc<dyn Store>) {
    let mut jobs = Vec::new();
    for (id, endpoint, attempts_before) in [
        ("a1", "A", 0),
        ("a2", "A", 1),
        ("b1", "B", 0),
        ("b2", "B", 2),
        ("c1", "C", 0),
    ] {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        jobs.push((j, attempts_before));
    }
    for (j, _) in &jobs {
        store.job_insert(j.clone()).await.expect("insert");
    }
    // Give a2 and b2 a failed attempt each, so that they are retries.
    for (j, failures) in &jobs {
        if *failures > 0 {
            let seq = get(&store, &j.id.0).await.0.seq;
            let leased = store
                .job_lease_ids(LeaseIdsParams {
                    seqs: vec![seq],
                    owner: "w".into(),
                    now: at(0),
                    lease_until: at(30),
                })
                .await
                .expect("lease");
            assert_eq!(leased.len(), 1);
            let mut p = record(&j.id.0, "w", 1, Transition::Retry { at: at(0) });
            p.attempts = *failures;
            store.job_record_attempt(p).await.expect("record");
        }
    }
    let cands = |exclude: &[&str], exclude_retries: &[&str], exclude_firsts: &[&str]| {
        let params = CandidateParams {
            queue: "q".into(),
            now: at(1),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
            exclude_retries: exclude_retries.iter().map(|s| s.to_string()).collect(),
            exclude_firsts: exclude_firsts.iter().map(|s| s.to_string()).collect(),
            limit: 100,
        };
        let store = store.clone();
        async move { store.job_candidates(params).await.expect("candidates") }
    };
    let all = cands(&[], &[], &[]).await;
    assert_eq!(
        all.iter().map(|c| c.id.0.as_str()).collect::<Vec<_>>(),
        ["a1", "a2", "b1", "b2", "c1"]
    );
    assert_eq!(
        all.iter().map(|c| c.is_retry).collect::<Vec<_>>(),
        [false, true, false, true, false]
    );
    let some = cands(&["A"], &["B"], &[]).await;
    assert_eq!(
        some.iter().map(|c| c.id.0.as_str()).collect::<Vec<_>>(),
        ["b1", "c1"]
    );
    let retries_of_a = cands(&[], &[], &["A", "C"]).await;
    assert_eq!(
        retries_of_a
            .iter()
            .map(|c| c.id.0.as_str())
            .collect::<Vec<_>>(),
        ["a2", "b1", "b2"]
    );
    let params = CandidateParams {
        queue: "q".into(),
        now: at(1),
        exclude: vec![],
        exclude_retries: vec![],
        exclude_firsts: vec![],
        limit: 2,
    };
    assert_eq!(
        store
            .job_candidates(params)
            .await
            .expect("candidates")
            .len(),
        2
    );
    // Candidates are only read: nothing changed.
    assert_eq!(get(&store, "a1").await.0.state, JobState::Ready);
}

/// Admission by a script, keeping what it was asked.
struct Scripted {
    asked: Arc<std::sync::Mutex<Vec<String>>>,
    handed_back: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Admit for Scripted {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        self.asked.lock().expect("lock").push(c.id.0.clone());
        match (c.endpoint.as_str(), c.is_retry) {
            ("A", _) => Verdict::HoldEndpoint,
            ("B", true) => Verdict::Fail,
            ("C", true) => Verdict::HoldRetries,
            _ => Verdict::Take,
        }
    }

    fn not_leased(&mut self, c: &Candidate) {
        self.handed_back.lock().expect("lock").push(c.id.0.clone());
    }
}

/// Inserts jobs of queue "q" as (id, endpoint, retry): a retry has one failed attempt and is
/// due at once.
async fn insert_on_endpoints(store: &Arc<dyn Store>, jobs: &[(&str, &str, bool)]) {
    for &(id, endpoint, retry) in jobs {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        let seq = store.job_insert(j).await.expect("insert").job().seq;
        if retry {
            let leased = store
                .job_lease_ids(LeaseIdsParams {
                    seqs: vec![seq],
                    owner: "w0".into(),
                    now: at(0),
                    lease_until: at(30),
                })
                .await
                .expect("lease");
            assert_eq!(leased.len(), 1);
            let p = record(id, "w0", 1, Transition::Retry { at: at(0) });
            store.job_record_attempt(p).await.expect("record");
        }
    }
}

pub async fn lease_admitted_asks_admission_in_lease_order(store: Arc<dyn Store>) {
    insert_on_endpoints(
        &store,
        &[
            ("a1", "A", false),
            ("a2", "A", false),
            ("b1", "B", false),
            ("b2", "B", true),
            ("c1", "C", false),
            ("c2", "C", true),
            ("d1", "D", false),
            ("d2", "D", false),
        ],
    )
    .await;
    let lease = |max: usize| {
        let store = store.clone();
        async move {
            let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
            let handed_back = Arc::new(std::sync::Mutex::new(Vec::new()));
            let admit = Box::new(Scripted {
                asked: asked.clone(),
                handed_back: handed_back.clone(),
            });
            let params = LeaseAdmittedParams {
                queue: "q".into(),
                now: at(1),
                owner: "w".into(),
                lease_until: at(31),
                max,
            };
            let got = store
                .job_lease_admitted(params, admit)
                .await
                .expect("lease admitted");
            assert!(handed_back.lock().expect("lock").is_empty());
            let asked = asked.lock().expect("lock").clone();
            (ids(&got.taken), ids(&got.failed), asked)
        }
    };
    // A held endpoint is asked once; a retry to fail is leased without counting; at `max`, no
    // more candidates are asked.
    let (taken, failed, asked) = lease(2).await;
    assert_eq!(taken, ["b1", "c1"]);
    assert_eq!(failed, ["b2"]);
    assert_eq!(asked, ["a1", "b1", "b2", "c1"]);
    for id in ["b1", "b2", "c1"] {
        let job = get(&store, id).await.0;
        assert_eq!(job.state, JobState::Running, "{id}");
        assert_eq!(job.lease_owner.as_deref(), Some("w"), "{id}");
    }
    // Held retries leave the endpoint's first attempts free to go.
    let (taken, failed, asked) = lease(10).await;
    assert_eq!(taken, ["d1", "d2"]);
    assert!(failed.is_empty());
    assert_eq!(asked, ["a1", "c2", "d1", "d2"]);
    // What is left is held.
    let (taken, failed, asked) = lease(10).await;
    assert!(taken.is_empty() && failed.is_empty());
    assert_eq!(asked, ["a1", "c2"]);
    assert_eq!(get(&store, "a1").await.0.state, JobState::Ready);
    // Nothing to take, nothing asked.
    let (taken, _, asked) = lease(0).await;
    assert!(taken.is_empty() && asked.is_empty());
}

/// Admission that holds endpoint E's first attempts (E is suspect) and takes everything else.
struct HoldsFirstsOfE {
    asked: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Admit for HoldsFirstsOfE {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        self.asked.lock().expect("lock").push(c.id.0.clone());
        match (c.endpoint.as_str(), c.is_retry) {
            ("E", false) => Verdict::HoldFirsts,
            _ => Verdict::Take,
        }
    }

    fn not_leased(&mut self, _c: &Candidate) {}
}

/// Held first attempts are passed over, and the endpoint's retries behind them are reached in
/// the same lease (they tell whether a suspect endpoint is down or flaky).
pub async fn lease_admitted_holds_first_attempts_takes_retries(store: Arc<dyn Store>) {
    insert_on_endpoints(
        &store,
        &[
            ("e1", "E", false),
            ("e2", "E", false),
            ("f1", "F", false),
            ("e3", "E", true),
            ("e4", "E", false),
            ("e5", "E", true),
        ],
    )
    .await;
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let got = store
        .job_lease_admitted(
            LeaseAdmittedParams {
                queue: "q".into(),
                now: at(1),
                owner: "w".into(),
                lease_until: at(31),
                max: 10,
            },
            Box::new(HoldsFirstsOfE {
                asked: asked.clone(),
            }),
        )
        .await
        .expect("lease admitted");
    let mut taken = ids(&got.taken);
    taken.sort();
    assert_eq!(taken, ["e3", "e5", "f1"]);
    // E's first attempts were asked about once, then passed over.
    let asked = asked.lock().expect("lock").clone();
    assert_eq!(asked.iter().filter(|id| id.starts_with("e1")).count(), 1);
    assert!(
        !asked.iter().any(|id| id == "e2" || id == "e4"),
        "{asked:?}"
    );
    for id in ["e1", "e2", "e4"] {
        assert_eq!(get(&store, id).await.0.state, JobState::Ready, "{id}");
    }
}

pub async fn lease_ids_takes_only_runnable_jobs(store: Arc<dyn Store>) {
    let r1 = store.job_insert(new_job("r1", "q")).await.expect("insert");
    let mut later = new_job("r2", "q");
    later.run_at = at(60);
    let r2 = store.job_insert(later).await.expect("insert");
    let missing = r1.job().seq.max(r2.job().seq) + 1000;
    let wanted = vec![r1.job().seq, r2.job().seq, missing];
    let params = |owner: &str| LeaseIdsParams {
        seqs: wanted.clone(),
        owner: owner.into(),
        now: at(0),
        lease_until: at(30),
    };
    let got = store.job_lease_ids(params("w1")).await.expect("lease");
    assert_eq!(ids(&got), ["r1"]);
    assert_eq!(got[0].lease_owner.as_deref(), Some("w1"));
    assert!(
        store
            .job_lease_ids(params("w2"))
            .await
            .expect("lease")
            .is_empty(),
        "never leased twice"
    );
}
