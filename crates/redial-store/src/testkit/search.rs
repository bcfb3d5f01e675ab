//! Search: jobs by idempotency key and by tag, dead letters by the words of their reason.

use super::{at, get, ids, lease, make_dead_because, new_job, record, T0};
use crate::{
    reason_words, CleanupParams, InsertOutcome, JobBefore, JobChange, JobFilter, JobId,
    JobListParams, JobState, NewJob, ReplayChangedParams, Store, Transition,
};
use redial_policy::DeadCategory;
use std::sync::Arc;

async fn found(store: &Arc<dyn Store>, filter: JobFilter) -> Vec<String> {
    let page = store
        .job_list(JobListParams {
            filter,
            after: None,
            limit: 100,
        })
        .await
        .expect("list");
    ids(&page.jobs)
}

/// Brings the search indexes up to date, as a search's caller does first.
async fn caught_up(store: &Arc<dyn Store>) {
    while store.index_for_search(1000).await.expect("index") >= 1000 {}
}

fn words(text: &str) -> JobFilter {
    JobFilter {
        state: Some(JobState::Dead),
        reason_words: reason_words(text),
        ..JobFilter::default()
    }
}

/// Once the indexes are up to date, a key or a tag finds the jobs that carry it, exactly
/// (inserted one at a time or in a batch, a duplicate insert adding nothing, across the
/// index's buckets and blocks, one of a block's jobs deleted); a renewed key finds the job and
/// the old one no longer does. Dead letters are found by the words their reason starts, all of them, once the index
/// is brought up to date: a replayed job is no longer found, one dead again is found by its new
/// reason only, a dismissed one not at all.
pub async fn search_by_key_tag_and_reason_text(store: Arc<dyn Store>) {
    let mut a = new_job("a", "default");
    a.tags = vec!["order:1".into(), "vip".into(), "vip".into()];
    store.job_insert(a.clone()).await.expect("insert");
    let mut b = new_job("b", "default");
    b.tags = vec!["order:1".into()];
    let mut c = new_job("c", "other");
    c.tags = vec!["order:2".into()];
    c.idempotency_key = Some("Key With Case".into());
    store
        .job_insert_batch(vec![b, c, a.clone()])
        .await
        .expect("batch");
    let again = store.job_insert(a.clone()).await.expect("insert again");
    assert!(matches!(again, InsertOutcome::Duplicate(_)), "{again:?}");
    caught_up(&store).await;
    let tag = |t: &str| JobFilter {
        tag: Some(t.into()),
        ..JobFilter::default()
    };
    let key = |k: &str| JobFilter {
        idempotency_key: Some(k.into()),
        ..JobFilter::default()
    };
    assert_eq!(found(&store, tag("order:1")).await, ["a", "b"]);
    assert_eq!(found(&store, tag("vip")).await, ["a"]);
    assert_eq!(found(&store, tag("order")).await, Vec::<String>::new());
    assert_eq!(found(&store, key("key-b")).await, ["b"]);
    assert_eq!(found(&store, key("Key With Case")).await, ["c"]);
    assert_eq!(
        found(&store, key("key with case")).await,
        Vec::<String>::new()
    );
    assert_eq!(found(&store, key("suite")).await, Vec::<String>::new());
    let both = JobFilter {
        tag: Some("order:1".into()),
        queue: Some("default".into()),
        idempotency_key: Some("key-a".into()),
        ..JobFilter::default()
    };
    assert_eq!(found(&store, both).await, ["a"]);
    // Across the index's buckets (1,024 jobs each): every one is read.
    let many: Vec<NewJob> = (0..2100)
        .map(|i| {
            let mut j = new_job(&format!("m{i:04}"), "many");
            j.tags = if i % 700 == 0 {
                vec!["spread".into()]
            } else {
                vec![]
            };
            j
        })
        .collect();
    store.job_insert_batch(many).await.expect("batch");
    caught_up(&store).await;
    assert_eq!(
        found(&store, tag("spread")).await,
        ["m0000", "m0700", "m1400"]
    );
    assert_eq!(found(&store, key("key-m2099")).await, ["m2099"]);
    assert_eq!(found(&store, key("key-a")).await, ["a"]);
    // One of them deleted: the others are still found, it is not.
    store
        .job_cancel(&JobId::from("m0700"), at(1))
        .await
        .expect("cancel");
    let deleted = store
        .job_cleanup(CleanupParams {
            completed_before: at(2),
            dead_before: T0,
            completed_keep: None,
            limit: 1000,
        })
        .await
        .expect("cleanup");
    assert_eq!(deleted, 1);
    caught_up(&store).await;
    assert_eq!(found(&store, tag("spread")).await, ["m0000", "m1400"]);
    assert_eq!(found(&store, key("key-m0699")).await, ["m0699"]);
    assert_eq!(found(&store, key("key-m0700")).await, Vec::<String>::new());
    assert_eq!(found(&store, key("key-m2099")).await, ["m2099"]);

    for (id, reason) in [
        ("d1", "timeout after 30012 ms"),
        ("d2", "404 Not Found; permanent, not retried"),
        ("d3", "TLS certificate expired (\"api.example.com\")"),
    ] {
        make_dead_because(&store, id, "dead", DeadCategory::Permanent, Some(reason)).await;
    }
    // Dying only notes the job: the words are written when the index is brought up to date.
    assert_eq!(found(&store, words("timeout")).await, Vec::<String>::new());
    assert_eq!(store.index_for_search(2).await.expect("index"), 2);
    assert_eq!(store.index_for_search(100).await.expect("index"), 1);
    assert_eq!(store.index_for_search(100).await.expect("index"), 0);
    assert_eq!(found(&store, words("timeout")).await, ["d1"]);
    assert_eq!(
        found(&store, words("TIME")).await,
        ["d1"],
        "a word's start, any case"
    );
    assert_eq!(found(&store, words("30012")).await, ["d1"]);
    assert_eq!(found(&store, words("not found")).await, ["d2"]);
    assert_eq!(
        found(&store, words("found 404")).await,
        ["d2"],
        "in any order"
    );
    assert_eq!(
        found(&store, words("404 certificate")).await,
        Vec::<String>::new()
    );
    assert_eq!(found(&store, words("api.example")).await, ["d3"]);
    assert_eq!(found(&store, words("imeout")).await, Vec::<String>::new());
    let dead_tagged = JobFilter {
        tag: Some("suite".into()),
        reason_words: reason_words("expired"),
        ..JobFilter::default()
    };
    let groups = store.dead_letter_groups(dead_tagged).await.expect("groups");
    assert_eq!(groups.iter().map(|g| g.count).sum::<u64>(), 1);

    // Replayed: no longer dead, so no longer found.
    store
        .job_replay(&JobId::from("d1"), at(10))
        .await
        .expect("replay");
    assert_eq!(store.index_for_search(100).await.expect("index"), 0);
    assert_eq!(found(&store, words("timeout")).await, Vec::<String>::new());
    // Dead again, for another reason: found by that one only.
    let leased = lease(&store, "dead", "w2", at(10), 10).await;
    assert_eq!(ids(&leased), ["d1"]);
    let mut p = record(
        "d1",
        "w2",
        2,
        Transition::Dead {
            category: DeadCategory::TransientExhausted,
        },
    );
    p.attempt.reason = "500 internal server error".into();
    store.job_record_attempt(p).await.expect("dead again");
    assert_eq!(store.index_for_search(100).await.expect("index"), 1);
    assert_eq!(found(&store, words("timeout")).await, Vec::<String>::new());
    assert_eq!(found(&store, words("internal server")).await, ["d1"]);
    // Dismissed: gone, its words with it.
    store
        .job_dismiss(&JobId::from("d2"))
        .await
        .expect("dismiss");
    assert_eq!(found(&store, words("found")).await, Vec::<String>::new());

    // A renewed key finds the job; the old one does not.
    let (job, _) = get(&store, "d3").await;
    let params = ReplayChangedParams {
        id: JobId::from("d3"),
        now: at(20),
        replays: job.replays,
        queue: job.queue.clone(),
        endpoint: job.endpoint.clone(),
        request: job.request.clone(),
        idempotency_key: Some("renewed-d3".into()),
        policy: None,
        change: JobChange {
            at: at(20),
            replay: job.replays + 1,
            changed: vec!["key renewed".into()],
            before: JobBefore::of(&job),
        },
    };
    store
        .job_replay_changed(params)
        .await
        .expect("replay with a new key");
    caught_up(&store).await;
    assert_eq!(found(&store, key("renewed-d3")).await, ["d3"]);
    assert_eq!(found(&store, key("key-d3")).await, Vec::<String>::new());
}
