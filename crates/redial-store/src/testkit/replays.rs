//! Replays with changes: the change applied once, and a job's history of changes kept bounded.

use super::{at, get, lease, make_dead, record};
use crate::{
    Job, JobBefore, JobChange, JobId, JobState, ReplayChangedParams, Store, StoreError, Transition,
};
use redial_policy::DeadCategory;
use std::sync::Arc;

/// A job's history stays bounded however often it is replayed with changes (issue 55: 40 replays
/// of about 1 MiB bodies left a 40.9 MB history on one job, read whole by its view): only the
/// first change keeps its `before` body (the request as enqueued), the others its size; past
/// `MAX_CHANGES_KEPT`, the oldest after the first go, and a line says which.
pub async fn replay_history_is_bounded(store: Arc<dyn Store>) {
    use crate::rules::MAX_CHANGES_KEPT;
    make_dead(&store, "h1", "default", DeadCategory::Permanent).await;
    let original = get(&store, "h1").await.0.request.body.clone();
    let big = "b".repeat(100_000);
    let replays = 30u32;
    for n in 0..replays {
        let (job, _) = get(&store, "h1").await;
        let mut request = job.request.clone();
        request.body = Some(format!("{big}{n}"));
        let t = 100 + 10 * i64::from(n);
        store
            .job_replay_changed(ReplayChangedParams {
                id: JobId::from("h1"),
                now: at(t),
                replays: n,
                queue: "default".into(),
                endpoint: job.endpoint.clone(),
                request,
                idempotency_key: job.idempotency_key.clone(),
                policy: None,
                change: JobChange {
                    at: at(t),
                    replay: n + 1,
                    changed: vec![format!("body {n}")],
                    before: JobBefore::of(&job),
                },
            })
            .await
            .expect("replayed with changes");
        let leased = lease(&store, "default", "w-h", at(t + 1), 10).await;
        let job = leased.iter().find(|j| j.id.0 == "h1").expect("leased");
        store
            .job_record_attempt(record(
                "h1",
                "w-h",
                job.runs + 1,
                Transition::Dead {
                    category: DeadCategory::Permanent,
                },
            ))
            .await
            .expect("dead again");
    }
    let changes = store
        .job_changes(&JobId::from("h1"))
        .await
        .expect("changes");
    assert_eq!(changes.len(), MAX_CHANGES_KEPT);
    assert_eq!(changes[0].replay, 1);
    assert_eq!(
        changes[0].before.request.body, original,
        "the request as enqueued"
    );
    assert_eq!(changes.last().map(|c| c.replay), Some(replays));
    for c in &changes[1..] {
        assert_eq!(c.before.request.body, None, "replay {}", c.replay);
        // The body before this replay: the one the replay before it set, `big` and a number.
        let set_by = c.replay - 2;
        let size = 100_000 + set_by.to_string().len() as u64;
        assert_eq!(c.before.body_bytes, Some(size), "replay {}", c.replay);
    }
    // Replay 1 and the last 19 are kept: 2 to 11 went.
    let last_gone = replays as usize - MAX_CHANGES_KEPT + 1;
    assert_eq!(
        changes[1].changed[0],
        format!(
            "the changes of replays 2 to {last_gone} are not kept (a job keeps its first change and its last {})",
            MAX_CHANGES_KEPT - 1
        )
    );
    let bytes = serde_json::to_string(&changes).expect("JSON").len();
    assert!(bytes < 64 * 1024, "{bytes} bytes of history");
}

/// A replay with changes sets the job's request and routing, keeps its attempts, and records what
/// changed with the job as it was; it takes a dead job only, and only the one its changes were
/// worked out from (a replay in between makes it `Changed`). The kept counts follow the job to
/// its new queue and endpoint.
pub async fn replay_with_changes(store: Arc<dyn Store>) {
    make_dead(&store, "c1", "default", DeadCategory::Permanent).await;
    let (job, attempts) = get(&store, "c1").await;
    assert_eq!(attempts.len(), 1);
    let change = |at_s: i64, replay: u32, job: &Job, what: &str| JobChange {
        at: at(at_s),
        replay,
        changed: vec![what.to_owned()],
        before: JobBefore::of(job),
    };
    let mut request = job.request.clone();
    request.url = "https://new.example.com/v2/charges".into();
    request.headers.push(("x-api-version".into(), "2".into()));
    let params = ReplayChangedParams {
        id: JobId::from("c1"),
        now: at(60),
        replays: 0,
        queue: "other".into(),
        endpoint: "https://new.example.com".into(),
        request: request.clone(),
        idempotency_key: Some("renewed-1".into()),
        policy: None,
        change: change(60, 1, &job, "url moved"),
    };
    let replayed = store
        .job_replay_changed(params.clone())
        .await
        .expect("replay with changes");
    assert_eq!(
        (
            replayed.state,
            replayed.replays,
            replayed.queue.as_str(),
            replayed.endpoint.as_str(),
            replayed.idempotency_key.as_deref(),
            replayed.run_at,
        ),
        (
            JobState::Ready,
            1,
            "other",
            "https://new.example.com",
            Some("renewed-1"),
            at(60)
        )
    );
    let (now, attempts) = get(&store, "c1").await;
    assert_eq!(now.request, request);
    assert_eq!(attempts.len(), 1, "the attempts stay");
    let changes = store
        .job_changes(&JobId::from("c1"))
        .await
        .expect("changes");
    assert_eq!(changes, vec![params.change.clone()]);
    assert_eq!(
        changes[0].before.request.url,
        "https://api.example.com/v1/charges"
    );

    // Not dead: refused, nothing written.
    let again = store.job_replay_changed(params.clone()).await;
    assert!(
        matches!(again, Err(StoreError::InvalidState { .. })),
        "{again:?}"
    );
    // Dead again in its new queue: changes worked out before the last replay are refused.
    let leased = lease(&store, "other", "w-dead", at(70), 10).await;
    assert_eq!(leased.len(), 1);
    store
        .job_record_attempt(record(
            "c1",
            "w-dead",
            2,
            Transition::Dead {
                category: DeadCategory::Permanent,
            },
        ))
        .await
        .expect("record dead");
    let stale = store.job_replay_changed(params.clone()).await;
    assert!(matches!(stale, Err(StoreError::Changed(_))), "{stale:?}");
    let (dead, _) = get(&store, "c1").await;
    let second = ReplayChangedParams {
        replays: 1,
        now: at(80),
        queue: "default".into(),
        change: change(80, 2, &dead, "queue moved back"),
        ..params
    };
    store
        .job_replay_changed(second.clone())
        .await
        .expect("the second replay with changes");
    let changes = store
        .job_changes(&JobId::from("c1"))
        .await
        .expect("changes");
    assert_eq!(changes.len(), 2);
    assert_eq!(changes[1].before.queue, "other");
    assert_eq!(get(&store, "c1").await.0.queue, "default");
    assert!(store
        .job_changes(&JobId::from("nobody"))
        .await
        .expect("changes")
        .is_empty());
    let missing = store
        .job_replay_changed(ReplayChangedParams {
            id: JobId::from("nobody"),
            ..second
        })
        .await;
    assert!(
        matches!(missing, Err(StoreError::NotFound(_))),
        "{missing:?}"
    );
}
