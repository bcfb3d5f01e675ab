//! Reading: listing with filters and pages, counts, recent dead letters, retention.

use super::{at, ids, lease, make_dead, new_job, record};
use crate::{
    CleanupParams, DeadCount, JobFilter, JobId, JobListParams, JobState, QueueSince, Store,
    Transition,
};
use redial_policy::DeadCategory;
use std::sync::Arc;

pub async fn list_filters_and_pages(store: Arc<dyn Store>) {
    let mut jobs = Vec::new();
    for i in 0..25 {
        let mut j = new_job(
            &format!("l{i:02}"),
            if i % 5 == 0 { "other" } else { "default" },
        );
        if i % 2 == 0 {
            j.endpoint = "https://b.example.com".into();
        }
        jobs.push(j);
    }
    store.job_insert_batch(jobs).await.expect("batch");
    let mut seen = Vec::new();
    let queue = JobFilter {
        queue: Some("default".into()),
        ..JobFilter::default()
    };
    let mut pages = crate::JobPages::new(&*store, queue, 7);
    while let Some(jobs) = pages.next().await.expect("list") {
        assert!(jobs.len() <= 7);
        seen.extend(ids(&jobs));
    }
    assert_eq!(seen.len(), 20);
    let mut sorted = seen.clone();
    sorted.sort();
    assert_eq!(seen, sorted, "oldest first");
    let page = store
        .job_list(JobListParams {
            filter: JobFilter {
                endpoint: Some("https://b.example.com".into()),
                state: Some(JobState::Ready),
                ..JobFilter::default()
            },
            after: None,
            limit: 100,
        })
        .await
        .expect("list");
    assert_eq!(page.jobs.len(), 13);
    assert_eq!(page.next, None);
}

pub async fn stats_counts(store: Arc<dyn Store>) {
    make_dead(&store, "s1", "default", DeadCategory::Permanent).await;
    store
        .job_insert(new_job("s2", "default"))
        .await
        .expect("insert");
    store
        .job_insert(new_job("s3", "default"))
        .await
        .expect("insert");
    store
        .job_insert(new_job("s4", "other"))
        .await
        .expect("insert");
    let stats = store.stats().await.expect("stats");
    let count = |q: &str, s: JobState| {
        stats
            .by_queue
            .iter()
            .filter(|c| c.queue == q && c.state == s)
            .map(|c| c.count)
            .sum::<u64>()
    };
    assert_eq!(count("default", JobState::Ready), 2);
    assert_eq!(count("default", JobState::Dead), 1);
    assert_eq!(count("other", JobState::Ready), 1);
    assert!(stats.by_queue.iter().any(|c| c.state == JobState::Dead
        && c.category == Some(DeadCategory::Permanent)
        && c.count == 1));
    let endpoint_total: u64 = stats.by_endpoint.iter().map(|c| c.count).sum();
    assert_eq!(endpoint_total, 4);
}

pub async fn cleanup_respects_retention(store: Arc<dyn Store>) {
    make_dead(&store, "old-dead", "default", DeadCategory::Permanent).await; // finished at(1)
    store
        .job_insert(new_job("done", "default"))
        .await
        .expect("insert");
    lease(&store, "default", "w1", at(0), 10).await;
    store
        .job_record_attempt(record("done", "w1", 1, Transition::Complete))
        .await
        .expect("record");
    store
        .job_insert(new_job("waiting", "default"))
        .await
        .expect("insert");
    // Completed jobs older than at(2) go, dead ones only before at(0): the dead job stays.
    let n = store
        .job_cleanup(CleanupParams {
            completed_before: at(2),
            dead_before: at(0),
            completed_keep: None,
            limit: 100,
        })
        .await
        .expect("cleanup");
    assert_eq!(n, 1);
    assert!(store
        .job_get(&JobId::from("done"))
        .await
        .expect("get")
        .is_none());
    assert!(store
        .job_get(&JobId::from("old-dead"))
        .await
        .expect("get")
        .is_some());
    assert!(store
        .job_get(&JobId::from("waiting"))
        .await
        .expect("get")
        .is_some());
    let n = store
        .job_cleanup(CleanupParams {
            completed_before: at(2),
            dead_before: at(2),
            completed_keep: None,
            limit: 100,
        })
        .await
        .expect("cleanup");
    assert_eq!(n, 1);
    assert!(
        store
            .job_get(&JobId::from("waiting"))
            .await
            .expect("get")
            .is_some(),
        "unfinished jobs never go"
    );

    // A count bound deletes the oldest finished jobs beyond it, whatever their age.
    for i in 0..5 {
        let id = format!("k{i}");
        store
            .job_insert(new_job(&id, "keep"))
            .await
            .expect("insert");
        lease(&store, "keep", "w1", at(0), 1).await;
        let mut p = record(&id, "w1", 1, Transition::Complete);
        p.now = at(10 + i);
        store.job_record_attempt(p).await.expect("record");
    }
    let n = store
        .job_cleanup(CleanupParams {
            completed_before: at(0),
            dead_before: at(0),
            completed_keep: Some(2),
            limit: 100,
        })
        .await
        .expect("cleanup");
    assert_eq!(n, 3);
    for (id, kept) in [("k0", false), ("k2", false), ("k3", true), ("k4", true)] {
        let found = store
            .job_get(&JobId::from(id))
            .await
            .expect("get")
            .is_some();
        assert_eq!(found, kept, "{id}");
    }
}

pub async fn recent_dead_letters_and_oldest_deferred(store: Arc<dyn Store>) {
    // Dead at at(1) (make_dead's record time).
    make_dead(&store, "p1", "default", DeadCategory::Permanent).await;
    make_dead(&store, "p2", "default", DeadCategory::Permanent).await;
    make_dead(&store, "t1", "other", DeadCategory::TransientExhausted).await;
    let mut got = store.dead_letters_since(at(1)).await.expect("since");
    got.sort_by(|a, b| a.queue.cmp(&b.queue));
    assert_eq!(
        got,
        vec![
            DeadCount {
                queue: "default".into(),
                category: DeadCategory::Permanent,
                count: 2
            },
            DeadCount {
                queue: "other".into(),
                category: DeadCategory::TransientExhausted,
                count: 1
            },
        ]
    );
    assert!(store
        .dead_letters_since(at(2))
        .await
        .expect("since")
        .is_empty());
    // A replayed job is no dead letter any more.
    store
        .job_replay(&JobId::from("t1"), at(3))
        .await
        .expect("replay");
    assert_eq!(
        store.dead_letters_since(at(0)).await.expect("since").len(),
        1
    );

    // Deferred jobs: the queue's oldest deferral is the earliest `updated_at` among them.
    for (id, defer_at) in [("d1", 5), ("d2", 7)] {
        store.job_insert(new_job(id, "q")).await.expect("insert");
        lease(&store, "q", "w", at(0), 1).await;
        let mut p = record(id, "w", 1, Transition::Defer { until: at(100) });
        p.now = at(defer_at);
        store.job_record_attempt(p).await.expect("defer");
    }
    let stats = store.stats().await.expect("stats");
    assert_eq!(
        stats.oldest_deferred,
        vec![QueueSince {
            queue: "q".into(),
            since: at(5)
        }]
    );
}
