//! Acting on jobs: replay, dismiss, cancel, and the bulk dead-letter actions.

use super::{at, by_seq, get, lease, make_dead, make_dead_because, new_job, record};
use crate::{
    dead_patterns, reasons_with_pattern, JobFilter, JobId, JobListParams, JobState, Recorded,
    Store, StoreError, Transition,
};
use redial_policy::DeadCategory;
use std::sync::Arc;

pub async fn replay_dead_job(store: Arc<dyn Store>) {
    make_dead(&store, "dead1", "default", DeadCategory::TransientExhausted).await;
    store
        .job_insert(new_job("alive", "default"))
        .await
        .expect("insert");
    let job = store
        .job_replay(&JobId::from("dead1"), at(100))
        .await
        .expect("replay");
    assert_eq!(
        (
            job.state,
            job.category,
            job.attempts,
            job.deferrals,
            job.replays
        ),
        (JobState::Ready, None, 0, 0, 1)
    );
    assert_eq!(job.idempotency_key.as_deref(), Some("key-dead1"));
    assert_eq!(job.run_at, at(100));
    assert_eq!(get(&store, "dead1").await.1.len(), 1, "history kept");
    let err = store
        .job_replay(&JobId::from("alive"), at(100))
        .await
        .expect_err("not dead");
    assert!(
        matches!(
            err,
            StoreError::InvalidState {
                state: JobState::Ready,
                ..
            }
        ),
        "{err:?}"
    );
    let err = store
        .job_replay(&JobId::from("ghost"), at(100))
        .await
        .expect_err("missing");
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
}

pub async fn dismiss_dead_job(store: Arc<dyn Store>) {
    make_dead(&store, "dead2", "default", DeadCategory::Permanent).await;
    store
        .job_insert(new_job("alive", "default"))
        .await
        .expect("insert");
    store
        .job_dismiss(&JobId::from("dead2"))
        .await
        .expect("dismiss");
    assert!(store
        .job_get(&JobId::from("dead2"))
        .await
        .expect("get")
        .is_none());
    let err = store
        .job_dismiss(&JobId::from("alive"))
        .await
        .expect_err("not dead");
    assert!(matches!(err, StoreError::InvalidState { .. }), "{err:?}");
    let err = store
        .job_dismiss(&JobId::from("dead2"))
        .await
        .expect_err("gone");
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
}

pub async fn cancel_jobs(store: Arc<dyn Store>) {
    store
        .job_insert(new_job("c1", "default"))
        .await
        .expect("insert");
    let job = store
        .job_cancel(&JobId::from("c1"), at(1))
        .await
        .expect("cancel");
    assert_eq!(
        (job.state, job.finished_at),
        (JobState::Cancelled, Some(at(1)))
    );
    assert!(lease(&store, "default", "w1", at(2), 10).await.is_empty());
    let err = store
        .job_cancel(&JobId::from("c1"), at(3))
        .await
        .expect_err("finished");
    assert!(
        matches!(
            err,
            StoreError::InvalidState {
                state: JobState::Cancelled,
                ..
            }
        ),
        "{err:?}"
    );

    // A running job is marked; its attempt's retry then ends it cancelled.
    store
        .job_insert(new_job("c2", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 10).await;
    let job = store
        .job_cancel(&JobId::from("c2"), at(1))
        .await
        .expect("cancel");
    assert_eq!((job.state, job.cancel_requested), (JobState::Running, true));
    // By seq, as the engine records: the cancel waiting is seen all the same.
    let mut p = record("c2", "w1", 1, Transition::Retry { at: at(10) });
    by_seq(&mut p, &job);
    let state = store.job_record_attempt(p).await.expect("record");
    assert_eq!(state, Recorded::left(JobState::Cancelled));
    assert_eq!(get(&store, "c2").await.0.state, JobState::Cancelled);
    assert_eq!(
        get(&store, "c2").await.1.len(),
        1,
        "the attempt is still recorded"
    );

    // ...but a completion still completes.
    store
        .job_insert(new_job("c3", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 10).await;
    store
        .job_cancel(&JobId::from("c3"), at(1))
        .await
        .expect("cancel");
    let state = store
        .job_record_attempt(record("c3", "w1", 1, Transition::Complete))
        .await
        .expect("record");
    assert_eq!(state, Recorded::left(JobState::Completed));
    assert_eq!(get(&store, "c3").await.0.state, JobState::Completed);
}

pub async fn bulk_dead_letter_actions(store: Arc<dyn Store>) {
    make_dead(&store, "p1", "default", DeadCategory::Permanent).await;
    make_dead(&store, "p2", "default", DeadCategory::Permanent).await;
    make_dead(&store, "t1", "default", DeadCategory::TransientExhausted).await;
    make_dead(&store, "o1", "other", DeadCategory::Permanent).await;
    store
        .job_insert(new_job("alive", "default"))
        .await
        .expect("insert");
    let filter = JobFilter {
        queue: Some("default".into()),
        category: Some(DeadCategory::Permanent),
        ..JobFilter::default()
    };
    // They died at T0 + 1 ms: none since 2 ms, both since 1 ms.
    let died_since = |ms| JobFilter {
        finished_since: Some(at(ms)),
        ..filter.clone()
    };
    assert_eq!(
        store
            .dead_letter_replay(died_since(2), at(50))
            .await
            .expect("replay"),
        0
    );
    assert_eq!(
        store
            .job_list(JobListParams {
                filter: died_since(1),
                after: None,
                limit: 10,
            })
            .await
            .expect("list")
            .jobs
            .len(),
        2
    );
    assert_eq!(
        store
            .dead_letter_replay(filter.clone(), at(50))
            .await
            .expect("replay"),
        2
    );
    assert_eq!(get(&store, "p1").await.0.state, JobState::Ready);
    assert_eq!(get(&store, "t1").await.0.state, JobState::Dead);
    assert_eq!(
        store
            .dead_letter_replay(filter, at(50))
            .await
            .expect("replay"),
        0
    );
    // Time range: created before T0 matches nothing.
    let none = JobFilter {
        until: Some(at(0)),
        ..JobFilter::default()
    };
    assert_eq!(store.dead_letter_dismiss(none).await.expect("dismiss"), 0);
    assert_eq!(
        store
            .dead_letter_dismiss(JobFilter::default())
            .await
            .expect("dismiss"),
        2
    );
    assert!(store
        .job_get(&JobId::from("o1"))
        .await
        .expect("get")
        .is_none());
    assert!(store
        .job_get(&JobId::from("alive"))
        .await
        .expect("get")
        .is_some());
}

/// Triage: dead letters grouped by queue, category and endpoint, largest first, with when the
/// first and last went dead and a reason; a filter narrows the groups; live jobs are not counted.
pub async fn dead_letter_groups_for_triage(store: Arc<dyn Store>) {
    for id in ["p1", "p2", "p3"] {
        make_dead(&store, id, "q1", DeadCategory::Permanent).await;
    }
    make_dead(&store, "t1", "q1", DeadCategory::TransientExhausted).await;
    make_dead(&store, "o1", "q2", DeadCategory::Permanent).await;
    store
        .job_insert(new_job("live", "q1"))
        .await
        .expect("insert");
    let groups = store
        .dead_letter_groups(JobFilter::default())
        .await
        .expect("groups");
    let seen: Vec<(&str, DeadCategory, u64)> = groups
        .iter()
        .map(|g| (g.queue.as_str(), g.category, g.count))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("q1", DeadCategory::Permanent, 3),
            ("q1", DeadCategory::TransientExhausted, 1),
            ("q2", DeadCategory::Permanent, 1),
        ]
    );
    let g = &groups[0];
    assert_eq!(g.endpoint, "https://api.example.com");
    assert!(g.first <= g.last);
    assert!(g.reason.as_deref().is_some_and(|r| !r.is_empty()));
    let permanent = store
        .dead_letter_groups(JobFilter {
            category: Some(DeadCategory::Permanent),
            ..JobFilter::default()
        })
        .await
        .expect("groups");
    assert_eq!(permanent.len(), 2);
    let q2 = store
        .dead_letter_groups(JobFilter {
            queue: Some("q2".into()),
            ..JobFilter::default()
        })
        .await
        .expect("groups");
    assert_eq!(q2.len(), 1);
    assert_eq!(q2[0].count, 1);
}

/// Dead letters by reason: each reason word for word with its count (a filter narrows them), the
/// patterns they make, and a pattern's reasons as a filter for groups, listings and the bulk
/// actions; an empty list of reasons matches nothing. Reasons with quotes and backslashes pass
/// through each store's list parameter intact.
pub async fn dead_letters_by_reason_pattern(store: Arc<dyn Store>) {
    let odd = r#"handler: customer "a\b" 'c' [1,2] is locked"#;
    for (id, queue, reason) in [
        ("t1", "q1", "timeout after 30012 ms"),
        ("t2", "q1", "timeout after 30544 ms"),
        ("t3", "q2", "timeout after 30544 ms"),
        ("n1", "q1", "404 not found; permanent, not retried"),
        ("o1", "q1", odd),
    ] {
        make_dead_because(&store, id, queue, DeadCategory::Permanent, Some(reason)).await;
    }
    store
        .job_insert(new_job("live", "q1"))
        .await
        .expect("insert");
    let mut reasons = store
        .dead_letter_reasons(JobFilter::default())
        .await
        .expect("reasons");
    reasons.sort_by(|a, b| a.reason.cmp(&b.reason));
    let seen: Vec<(&str, u64)> = reasons
        .iter()
        .map(|r| (r.reason.as_str(), r.count))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("404 not found; permanent, not retried", 1),
            (odd, 1),
            ("timeout after 30012 ms", 1),
            ("timeout after 30544 ms", 2),
        ]
    );
    assert!(reasons.iter().all(|r| r.first <= r.last));
    let q2 = store
        .dead_letter_reasons(JobFilter {
            queue: Some("q2".into()),
            ..JobFilter::default()
        })
        .await
        .expect("reasons");
    assert_eq!(q2.len(), 1);
    assert_eq!(
        (q2[0].reason.as_str(), q2[0].count),
        ("timeout after 30544 ms", 1)
    );

    let patterns = dead_patterns(&reasons);
    let seen: Vec<(&str, u64, u64)> = patterns
        .iter()
        .map(|p| (p.pattern.as_str(), p.count, p.reasons))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("timeout after <n> ms", 3, 2),
            ("404 not found; permanent, not retried", 1, 1),
            (
                "handler: customer \"<value>\" 'c' [<n>,<n>] is locked",
                1,
                1
            ),
        ]
    );

    let timeouts = JobFilter {
        reasons: Some(reasons_with_pattern(&reasons, "timeout after <n> ms")),
        ..JobFilter::default()
    };
    let groups = store
        .dead_letter_groups(timeouts.clone())
        .await
        .expect("groups");
    let seen: Vec<(&str, u64)> = groups.iter().map(|g| (g.queue.as_str(), g.count)).collect();
    assert_eq!(seen, vec![("q1", 2), ("q2", 1)]);
    let page = store
        .job_list(JobListParams {
            filter: JobFilter {
                state: Some(JobState::Dead),
                queue: Some("q1".into()),
                ..timeouts.clone()
            },
            after: None,
            limit: 10,
        })
        .await
        .expect("list");
    let ids: Vec<&str> = page.jobs.iter().map(|j| j.id.0.as_str()).collect();
    assert_eq!(ids, vec!["t1", "t2"]);

    let nothing = JobFilter {
        reasons: Some(Vec::new()),
        ..JobFilter::default()
    };
    assert_eq!(
        store
            .dead_letter_dismiss(nothing.clone())
            .await
            .expect("dismiss"),
        0
    );
    assert_eq!(
        store
            .dead_letter_replay(nothing, at(50))
            .await
            .expect("replay"),
        0
    );
    assert!(store
        .dead_letter_groups(JobFilter {
            reasons: Some(Vec::new()),
            ..JobFilter::default()
        })
        .await
        .expect("groups")
        .is_empty());

    let one = JobFilter {
        reasons: Some(vec!["timeout after 30544 ms".into()]),
        ..JobFilter::default()
    };
    assert_eq!(
        store.dead_letter_replay(one, at(50)).await.expect("replay"),
        2
    );
    assert_eq!(get(&store, "t2").await.0.state, JobState::Ready);
    assert_eq!(get(&store, "t1").await.0.state, JobState::Dead);
    let quoted = JobFilter {
        reasons: Some(vec![odd.to_owned()]),
        ..JobFilter::default()
    };
    assert_eq!(store.dead_letter_dismiss(quoted).await.expect("dismiss"), 1);
    assert_eq!(
        store.dead_letter_dismiss(timeouts).await.expect("dismiss"),
        1
    );
    let left = store
        .dead_letter_reasons(JobFilter::default())
        .await
        .expect("reasons");
    let seen: Vec<(&str, u64)> = left.iter().map(|r| (r.reason.as_str(), r.count)).collect();
    assert_eq!(seen, vec![("404 not found; permanent, not retried", 1)]);
}

/// A bulk action in chunks: each chunk's end is the `limit`-th matching dead letter in `seq`
/// order after the last chunk's; acting on the range between (the filter's `after_seq` and
/// `upto_seq`) takes exactly those, whatever else is dead or alive around them.
pub async fn bulk_actions_in_chunks(store: Arc<dyn Store>) {
    for i in 0..5 {
        make_dead(&store, &format!("a{i}"), "default", DeadCategory::Permanent).await;
        make_dead(&store, &format!("b{i}"), "other", DeadCategory::Permanent).await;
    }
    store
        .job_insert(new_job("alive", "default"))
        .await
        .expect("insert");
    let only = JobFilter {
        queue: Some("default".into()),
        ..JobFilter::default()
    };
    let mut after = None;
    let mut chunks = Vec::new();
    while let Some(end) = store
        .dead_letter_chunk_end(
            JobFilter {
                after_seq: after,
                ..only.clone()
            },
            2,
        )
        .await
        .expect("chunk end")
    {
        let chunk = JobFilter {
            after_seq: after,
            upto_seq: Some(end),
            ..only.clone()
        };
        chunks.push(
            store
                .dead_letter_replay(chunk, at(50))
                .await
                .expect("replay a chunk"),
        );
        after = Some(end);
    }
    assert_eq!(chunks, vec![2, 2, 1]);
    for i in 0..5 {
        assert_eq!(get(&store, &format!("a{i}")).await.0.state, JobState::Ready);
        assert_eq!(get(&store, &format!("b{i}")).await.0.state, JobState::Dead);
    }
    // The groups and a dismiss take the range too.
    let (first, _) = get(&store, "b1").await;
    let range = JobFilter {
        upto_seq: Some(first.seq),
        ..JobFilter::default()
    };
    let groups = store
        .dead_letter_groups(range.clone())
        .await
        .expect("groups");
    assert_eq!(groups.iter().map(|g| g.count).sum::<u64>(), 2);
    assert_eq!(store.dead_letter_dismiss(range).await.expect("dismiss"), 2);
    assert_eq!(
        store
            .dead_letter_chunk_end(JobFilter::default(), 100)
            .await
            .expect("chunk end"),
        Some(get(&store, "b4").await.0.seq)
    );
    assert_eq!(
        store
            .dead_letter_chunk_end(
                JobFilter {
                    queue: Some("default".into()),
                    ..JobFilter::default()
                },
                100
            )
            .await
            .expect("chunk end"),
        None
    );
}
