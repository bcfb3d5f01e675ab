//! What the store keeps for endpoints: held jobs' deadlines, saved state, shared holds, backlog.

use super::{at, get, lease, new_job, record};
use crate::{
    Control, ControlKind, EndpointBacklog, EndpointRecord, ExpireParams, JobState,
    RetriesNowParams, SharedHold, Store, Transition,
};
use redial_policy::DeadCategory;
use std::sync::Arc;

pub async fn deadlines_expire_for_held_jobs(store: Arc<dyn Store>) {
    for (id, endpoint, deadline) in [
        ("e1", "A", Some(10)),
        ("e2", "B", Some(10)),
        ("e3", "A", Some(100)),
        ("e4", "A", None),
    ] {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        j.deadline = deadline.map(at);
        store.job_insert(j).await.expect("insert");
    }
    let n = store
        .job_expire_deadlines(ExpireParams {
            now: at(10),
            reasons: vec![("A".into(), "circuit open until later".into())],
        })
        .await
        .expect("expire");
    assert_eq!(n, 2);
    let (e1, _) = get(&store, "e1").await;
    assert_eq!(
        (e1.state, e1.category),
        (JobState::Dead, Some(DeadCategory::DeadlineExceeded))
    );
    assert_eq!(
        e1.last_reason.as_deref(),
        Some("deadline passed while held by its endpoint: circuit open until later")
    );
    let (e2, _) = get(&store, "e2").await;
    assert_eq!(
        e2.last_reason.as_deref(),
        Some("deadline passed before the job could run")
    );
    assert_eq!(get(&store, "e3").await.0.state, JobState::Ready);
    assert_eq!(get(&store, "e4").await.0.state, JobState::Ready);
}

pub async fn endpoint_state_round_trips(store: Arc<dyn Store>) {
    assert!(store.endpoint_load().await.expect("load").is_empty());
    let rec = |name: &str, state: &str, t| EndpointRecord {
        name: name.into(),
        state: state.into(),
        updated_at: at(t),
    };
    store
        .endpoint_save(vec![rec("A", "{\"a\":1}", 1), rec("B", "{}", 1)])
        .await
        .expect("save");
    store
        .endpoint_save(vec![rec("A", "{\"a\":2}", 2)])
        .await
        .expect("save");
    assert_eq!(
        store.endpoint_load().await.expect("load"),
        vec![rec("A", "{\"a\":2}", 2), rec("B", "{}", 1)]
    );
}

pub async fn shared_holds_only_lengthen(store: Arc<dyn Store>) {
    assert!(store
        .endpoint_holds_load(at(0))
        .await
        .expect("load")
        .is_empty());
    let hold = |e: &str, pause: Option<i64>, breaker: Option<i64>, why: &str| SharedHold {
        endpoint: e.into(),
        paused_until: pause.map(at),
        pause_reason: pause.map(|_| format!("pause {why}")),
        breaker_until: breaker.map(at),
        breaker_reason: breaker.map(|_| format!("breaker {why}")),
        paced_until: None,
    };
    store
        .endpoint_holds_share(vec![
            hold("A", Some(30), None, "1"),
            hold("B", None, Some(10), "1"),
        ])
        .await
        .expect("share");
    // A shorter pause does not shorten the stored one; a longer breaker lengthens it.
    store
        .endpoint_holds_share(vec![
            hold("A", Some(20), None, "2"),
            hold("B", None, Some(40), "2"),
        ])
        .await
        .expect("share");
    let mut got = store.endpoint_holds_load(at(0)).await.expect("load");
    got.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    assert_eq!(
        got,
        vec![
            hold("A", Some(30), None, "1"),
            hold("B", None, Some(40), "2")
        ]
    );
    // Holds that ended are not loaded; a hold that half ended keeps its other half.
    store
        .endpoint_holds_share(vec![hold("B", Some(5), None, "3")])
        .await
        .expect("share");
    let mut got = store.endpoint_holds_load(at(35)).await.expect("load");
    got.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    assert_eq!(got, vec![hold("B", None, Some(40), "2")]);
    // A learned pace: kept alone (no pause, no breaker), only lengthens, not loaded once ended.
    let paced = |until: i64| SharedHold {
        paced_until: Some(at(until)),
        ..hold("C", None, None, "")
    };
    store
        .endpoint_holds_share(vec![paced(50), hold("B", Some(45), None, "4")])
        .await
        .expect("share");
    store
        .endpoint_holds_share(vec![paced(48)])
        .await
        .expect("share");
    let mut got = store.endpoint_holds_load(at(41)).await.expect("load");
    got.sort_by(|a, b| a.endpoint.cmp(&b.endpoint));
    assert_eq!(got, vec![hold("B", Some(45), None, "4"), paced(50)]);
    assert!(store
        .endpoint_holds_load(at(50))
        .await
        .expect("load")
        .is_empty());
}

pub async fn endpoint_deadlines_in_start_order(store: Arc<dyn Store>) {
    // A: due jobs by priority then time, then the later ones by time, across queues; B's and a
    // running job are not counted.
    for (id, queue, endpoint, priority, run_at, deadline) in [
        ("d1", "q", "A", 0, 0, None),
        ("d2", "q", "A", 0, 5, Some(100)),
        ("d3", "r", "A", 9, 8, Some(90)),
        ("d4", "q", "A", 0, 60, Some(70)),
        ("d5", "q", "A", 9, 50, None),
        ("d6", "q", "B", 0, 0, Some(10)),
        ("d7", "q", "A", 0, 1, Some(5)),
    ] {
        let mut j = new_job(id, queue);
        j.endpoint = endpoint.into();
        j.priority = priority;
        j.run_at = at(run_at);
        j.deadline = deadline.map(at);
        store.job_insert(j).await.expect("insert");
    }
    lease(&store, "q", "w", at(1), 1).await; // d1 runs
    let got = store
        .endpoint_deadlines("A", at(10), 10)
        .await
        .expect("deadlines");
    let w = |ahead, run_at, deadline| redial_policy::endpoint::WaitingDeadline {
        ahead,
        run_at: at(run_at),
        deadline: at(deadline),
    };
    // Order: d3 (due, priority 9), d7 (due at 1), d2 (due at 5), d5 (at 50), d4 (at 60).
    assert_eq!(
        got,
        vec![w(0, 8, 90), w(1, 1, 5), w(2, 5, 100), w(4, 60, 70)]
    );
    let first = store
        .endpoint_deadlines("A", at(10), 2)
        .await
        .expect("deadlines");
    assert_eq!(first, got[..2]);
    assert!(store
        .endpoint_deadlines("C", at(10), 10)
        .await
        .expect("deadlines")
        .is_empty());
    // An endpoint whose waiting jobs have no deadline has none.
    let mut j = new_job("e1", "q");
    j.endpoint = "E".into();
    store.job_insert(j).await.expect("insert");
    assert!(store
        .endpoint_deadlines("E", at(10), 10)
        .await
        .expect("deadlines")
        .is_empty());
}

pub async fn group_deadlines_in_start_order(store: Arc<dyn Store>) {
    // Group g of queue q, across endpoints; another group's, another queue's and an ungrouped
    // job are not counted.
    for (id, queue, group, run_at, deadline) in [
        ("g1", "q", Some("g"), 0, None),
        ("g2", "q", Some("g"), 5, Some(100)),
        ("g3", "q", Some("h"), 1, Some(10)),
        ("g4", "r", Some("g"), 1, Some(10)),
        ("g5", "q", None, 1, Some(10)),
        ("g6", "q", Some("g"), 60, Some(70)),
    ] {
        let mut j = new_job(id, queue);
        j.endpoint = if id == "g6" { "B".into() } else { "A".into() };
        j.group = group.map(str::to_owned);
        j.run_at = at(run_at);
        j.deadline = deadline.map(at);
        store.job_insert(j).await.expect("insert");
    }
    let got = store
        .group_deadlines("q", "g", at(10), 10)
        .await
        .expect("deadlines");
    let w = |ahead, run_at, deadline| redial_policy::endpoint::WaitingDeadline {
        ahead,
        run_at: at(run_at),
        deadline: at(deadline),
    };
    assert_eq!(got, vec![w(1, 5, 100), w(2, 60, 70)]);
    assert!(store
        .group_deadlines("q", "none", at(10), 10)
        .await
        .expect("deadlines")
        .is_empty());
}

pub async fn endpoint_backlog_counts(store: Arc<dyn Store>) {
    for (id, endpoint, run_at) in [
        ("k1", "A", 0),
        ("k2", "A", 0),
        ("k3", "A", 50),
        ("k4", "B", 0),
    ] {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        j.run_at = at(run_at);
        store.job_insert(j).await.expect("insert");
    }
    lease(&store, "q", "w", at(0), 1).await; // k1 runs: not waiting
    let one = store
        .endpoint_backlog_of("A", at(1))
        .await
        .expect("backlog");
    assert_eq!((one.due, one.later), (1, 1));
    let none = store
        .endpoint_backlog_of("C", at(1))
        .await
        .expect("backlog");
    assert_eq!((none.endpoint.as_str(), none.due, none.later), ("C", 0, 0));
    let backlog = store.endpoint_backlog(at(1)).await.expect("backlog");
    assert_eq!(
        backlog,
        vec![
            EndpointBacklog {
                endpoint: "A".into(),
                due: 1,
                later: 1
            },
            EndpointBacklog {
                endpoint: "B".into(),
                due: 1,
                later: 0
            },
        ]
    );
}

pub async fn controls_round_trip_and_clear_shared_holds(store: Arc<dyn Store>) {
    assert!(store.controls_load().await.expect("load").is_empty());
    let mut queue = Control::new(ControlKind::Queue, "emails");
    queue.pause = Some(redial_policy::endpoint::HandPause {
        since: at(1),
        until: None,
        reason: "migrating the mail provider".into(),
    });
    let mut endpoint = Control::new(ControlKind::Endpoint, "emails");
    endpoint.pause = Some(redial_policy::endpoint::HandPause {
        since: at(2),
        until: Some(at(60)),
        reason: String::new(),
    });
    store.control_save(queue.clone()).await.expect("save");
    store.control_save(endpoint.clone()).await.expect("save");
    // One read by kind and name.
    assert_eq!(
        store
            .control_get(ControlKind::Endpoint, "emails")
            .await
            .expect("get"),
        Some(endpoint.clone())
    );
    assert_eq!(
        store
            .control_get(ControlKind::Endpoint, "other")
            .await
            .expect("get"),
        None
    );
    // A queue and an endpoint of one name are two controls.
    assert_eq!(
        store.controls_load().await.expect("load"),
        vec![endpoint.clone(), queue.clone()]
    );
    // Saving replaces: the pause lifted, a resume and a reset recorded.
    endpoint.pause = None;
    endpoint.resumed_at = Some(at(3));
    endpoint.breaker_reset_at = Some(at(4));
    store.control_save(endpoint.clone()).await.expect("save");
    assert_eq!(
        store.controls_load().await.expect("load"),
        vec![endpoint, queue.clone()]
    );

    let hold = SharedHold {
        endpoint: "A".into(),
        paused_until: Some(at(30)),
        pause_reason: Some("429".into()),
        breaker_until: Some(at(40)),
        breaker_reason: Some("retries failed".into()),
        paced_until: None,
    };
    store
        .endpoint_holds_share(vec![hold.clone()])
        .await
        .expect("share");
    store
        .endpoint_holds_clear("A", true, false)
        .await
        .expect("clear");
    let got = store.endpoint_holds_load(at(0)).await.expect("load");
    assert_eq!(
        got,
        vec![SharedHold {
            paused_until: None,
            pause_reason: None,
            ..hold.clone()
        }]
    );
    store
        .endpoint_holds_clear("A", false, true)
        .await
        .expect("clear");
    assert!(store
        .endpoint_holds_load(at(0))
        .await
        .expect("load")
        .is_empty());
    // A cleared hold can be shared again.
    store
        .endpoint_holds_share(vec![hold.clone()])
        .await
        .expect("share");
    assert_eq!(
        store.endpoint_holds_load(at(0)).await.expect("load"),
        vec![hold.clone()]
    );

    // Forgotten: its saved state, its shared holds and its controls; the queue of the same
    // name keeps its own, and another endpoint keeps everything.
    store
        .endpoint_save(vec![
            EndpointRecord {
                name: "emails".into(),
                state: "{}".into(),
                updated_at: at(5),
            },
            EndpointRecord {
                name: "kept".into(),
                state: "{}".into(),
                updated_at: at(5),
            },
        ])
        .await
        .expect("save");
    store
        .endpoint_holds_share(vec![SharedHold {
            endpoint: "emails".into(),
            ..hold.clone()
        }])
        .await
        .expect("share");
    assert!(store.endpoint_saved("emails").await.expect("saved"));
    assert!(!store.endpoint_saved("never").await.expect("saved"));
    store
        .endpoint_forget(vec!["emails".into(), "A".into()])
        .await
        .expect("forget");
    assert!(!store.endpoint_saved("emails").await.expect("saved"));
    let names: Vec<String> = store
        .endpoint_load()
        .await
        .expect("load")
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(names, ["kept"]);
    assert!(store
        .endpoint_holds_load(at(0))
        .await
        .expect("load")
        .is_empty());
    assert_eq!(store.controls_load().await.expect("load"), vec![queue]);
}

/// An outage ended: the endpoint's retries scheduled during it are due now; a delayed first
/// attempt, a retry scheduled before the outage, a deferral and another endpoint's retry keep
/// their times.
pub async fn retries_due_when_an_outage_ends(store: Arc<dyn Store>) {
    for (id, endpoint, run_at) in [
        ("during", "A", 0),
        ("before", "A", 0),
        ("deferred", "A", 0),
        ("delayed", "A", 500),
        ("other", "B", 0),
    ] {
        let mut j = new_job(id, "q");
        j.endpoint = endpoint.into();
        j.run_at = at(run_at);
        store.job_insert(j).await.expect("insert");
    }
    lease(&store, "q", "w", at(0), 10).await;
    for (id, failed_at, transition) in [
        ("before", 5, Transition::Retry { at: at(400) }),
        ("during", 20, Transition::Retry { at: at(300) }),
        ("other", 20, Transition::Retry { at: at(300) }),
        ("deferred", 20, Transition::Defer { until: at(300) }),
    ] {
        let mut p = record(id, "w", 1, transition);
        p.now = at(failed_at);
        store.job_record_attempt(p).await.expect("record");
    }
    let n = store
        .endpoint_retries_now(RetriesNowParams {
            endpoint: "A".into(),
            since: at(10),
            now: at(100),
        })
        .await
        .expect("retries now");
    assert_eq!(n, 1);
    let mut times = vec![];
    for id in ["during", "before", "deferred", "delayed", "other"] {
        let job = get(&store, id).await.0;
        times.push((id, job.state, job.run_at));
    }
    assert_eq!(
        times,
        [
            ("during", JobState::Scheduled, at(100)),
            ("before", JobState::Scheduled, at(400)),
            ("deferred", JobState::Deferred, at(300)),
            ("delayed", JobState::Scheduled, at(500)),
            ("other", JobState::Scheduled, at(300)),
        ]
    );
    // Due now: the next lease takes it.
    let leased = lease(&store, "q", "w", at(100), 10).await;
    assert_eq!(
        leased.iter().map(|j| j.id.0.as_str()).collect::<Vec<_>>(),
        ["during"]
    );
}
