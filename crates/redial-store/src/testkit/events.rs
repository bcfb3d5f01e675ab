//! The event log: every path that finishes or replays a job writes its event with the change;
//! endpoint events are appended; the log reads from a cursor, filtered, and forgets old events.

use super::{at, by_seq, get, lease, new_job, record};
use crate::{
    EventCursor, EventFrom, EventKind, EventListParams, EventPage, ExpireParams, JobId, JobState,
    NewEvent, RescueParams, Store, Transition,
};
use redial_policy::DeadCategory;
use std::sync::Arc;

fn everything() -> EventListParams {
    EventListParams {
        from: EventFrom::Start,
        queues: vec![],
        kinds: vec![],
        limit: 1000,
    }
}

/// The events `params` reads once `n` of them are there. On PostgreSQL an event shows once
/// every older transaction has ended (another test's, on the same server, may still run): read
/// again until they are all there, for a generous while.
async fn read_n(store: &Arc<dyn Store>, params: EventListParams, n: usize) -> EventPage {
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let page = list(store, params.clone()).await;
        if page.events.len() >= n || std::time::Instant::now() > give_up {
            return page;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// One read of the log.
async fn list(store: &Arc<dyn Store>, params: EventListParams) -> EventPage {
    store.event_list(params).await.expect("list events")
}

fn kinds_and_ids(page: &EventPage) -> Vec<(EventKind, String)> {
    page.events
        .iter()
        .map(|e| {
            let who = e.job_id.clone().or(e.endpoint.clone()).unwrap_or_default();
            (e.kind, who)
        })
        .collect()
}

pub async fn events_are_written_with_the_change(store: Arc<dyn Store>) {
    use EventKind::*;
    // An empty log: nothing from the start, and its end is where the first event will follow.
    let empty = list(&store, everything()).await;
    assert!(empty.events.is_empty() && !empty.more);

    // Completed and dead by recorded attempts; a lease, a retry and a deferral write nothing.
    for id in ["ok", "bad", "again", "later"] {
        store.job_insert(new_job(id, "q")).await.expect("insert");
    }
    let leased = lease(&store, "q", "w1", at(0), 10).await;
    assert_eq!(leased.len(), 4);
    let outcomes = [
        ("ok", Transition::Complete),
        (
            "bad",
            Transition::Dead {
                category: DeadCategory::Permanent,
            },
        ),
        ("again", Transition::Retry { at: at(100) }),
        ("later", Transition::Defer { until: at(100) }),
    ];
    for (id, t) in outcomes {
        let job = leased.iter().find(|j| j.id.0 == id).expect("leased");
        let mut p = record(id, "w1", 1, t);
        by_seq(&mut p, job);
        store.job_record_attempt(p).await.expect("record");
    }
    // Cancelled while waiting; dead by its deadline; dead by stalls; replayed.
    store
        .job_cancel(&JobId::from("again"), at(2))
        .await
        .expect("cancel");
    let mut late = new_job("late", "q2");
    late.deadline = Some(at(10));
    store.job_insert(late).await.expect("insert");
    store
        .job_expire_deadlines(ExpireParams {
            now: at(10),
            reasons: vec![],
        })
        .await
        .expect("expire");
    store
        .job_insert(new_job("stuck", "q3"))
        .await
        .expect("insert");
    lease(&store, "q3", "w1", at(20), 1).await;
    store
        .job_rescue_expired(RescueParams {
            now: at(60),
            max_stalls: 0,
            presence_grace: std::time::Duration::ZERO,
        })
        .await
        .expect("rescue");
    store
        .job_replay(&JobId::from("bad"), at(61))
        .await
        .expect("replay");
    // An endpoint's events, appended.
    store
        .event_append(vec![
            NewEvent {
                at: at(62),
                kind: EndpointPaused,
                endpoint: "api.example.com".into(),
                reason: Some("429 with Retry-After".into()),
                until: Some(at(90)),
            },
            NewEvent {
                at: at(90),
                kind: EndpointResumed,
                endpoint: "api.example.com".into(),
                reason: None,
                until: None,
            },
        ])
        .await
        .expect("append");

    let all = read_n(&store, everything(), 8).await;
    assert_eq!(
        kinds_and_ids(&all),
        vec![
            (JobCompleted, "ok".to_string()),
            (JobDead, "bad".into()),
            (JobCancelled, "again".into()),
            (JobDead, "late".into()),
            (JobDead, "stuck".into()),
            (JobReplayed, "bad".into()),
            (EndpointPaused, "api.example.com".into()),
            (EndpointResumed, "api.example.com".into()),
        ]
    );
    assert!(!all.more);
    let cursors: Vec<EventCursor> = all.events.iter().map(|e| e.cursor).collect();
    assert!(cursors.windows(2).all(|w| w[0] < w[1]), "{cursors:?}");
    assert_eq!(all.next, *cursors.last().expect("events"));
    // What each says.
    let e = |i: usize| &all.events[i];
    assert_eq!(e(0).queue.as_deref(), Some("q"));
    assert_eq!(e(0).at, at(1));
    assert_eq!(e(1).category.as_deref(), Some("permanent"));
    assert!(e(1).reason.is_some());
    assert_eq!(e(3).category.as_deref(), Some("deadline_exceeded"));
    assert_eq!(e(4).category.as_deref(), Some("unknown_exhausted"));
    assert_eq!(e(5).at, at(61));
    assert_eq!(e(6).until, Some(at(90)));
    assert_eq!(e(6).queue, None);
    // An event holds what it tells: the job's endpoint and reason as they were, also once the
    // job is gone.
    let (ok, _) = get(&store, "ok").await;
    assert_eq!(e(0).endpoint.as_deref(), Some(ok.endpoint.as_str()));
    assert_eq!(e(0).reason, ok.last_reason);
    assert!(e(0).reason.is_some());
    store
        .job_dismiss(&JobId::from("stuck"))
        .await
        .expect("dismiss");
    let gone = list(
        &store,
        EventListParams {
            from: EventFrom::After(e(3).cursor),
            limit: 1,
            ..everything()
        },
    )
    .await;
    assert_eq!(gone.events, vec![e(4).clone()]);

    // Read on from a cursor: the rest, once each, in the same order.
    let rest = list(
        &store,
        EventListParams {
            from: EventFrom::After(cursors[2]),
            ..everything()
        },
    )
    .await;
    assert_eq!(rest.events, all.events[3..].to_vec());
    // Pages: a limit stops the read at its last event, and `next` carries on from there.
    let mut from = EventFrom::Start;
    let mut paged = Vec::new();
    loop {
        let page = list(
            &store,
            EventListParams {
                from,
                limit: 3,
                ..everything()
            },
        )
        .await;
        paged.extend(page.events.iter().cloned());
        from = EventFrom::After(page.next);
        if !page.more {
            break;
        }
        assert!(paged.len() <= 8, "pages end");
    }
    assert_eq!(paged, all.events);

    // Filters: by queue (endpoint events have none), by kind; `next` moves past what they left.
    let q = list(
        &store,
        EventListParams {
            queues: vec!["q".into()],
            ..everything()
        },
    )
    .await;
    assert_eq!(
        kinds_and_ids(&q),
        vec![
            (JobCompleted, "ok".to_string()),
            (JobDead, "bad".into()),
            (JobCancelled, "again".into()),
            (JobReplayed, "bad".into()),
        ]
    );
    assert_eq!(q.next, all.next);
    let dead = list(
        &store,
        EventListParams {
            kinds: vec![JobDead, EndpointResumed],
            ..everything()
        },
    )
    .await;
    assert_eq!(
        kinds_and_ids(&dead),
        vec![
            (JobDead, "bad".to_string()),
            (JobDead, "late".into()),
            (JobDead, "stuck".into()),
            (EndpointResumed, "api.example.com".into()),
        ]
    );

    // From the end: nothing that was, and what comes next.
    let end = list(
        &store,
        EventListParams {
            from: EventFrom::End,
            ..everything()
        },
    )
    .await;
    assert!(end.events.is_empty());
    store
        .job_cancel(&JobId::from("later"), at(70))
        .await
        .expect("cancel");
    let after_end = read_n(
        &store,
        EventListParams {
            from: EventFrom::After(end.next),
            ..everything()
        },
        1,
    )
    .await;
    assert_eq!(
        kinds_and_ids(&after_end),
        vec![(JobCancelled, "later".to_string())]
    );

    // Cleanup deletes the old ones, oldest first, at most `limit` per call.
    assert_eq!(store.event_cleanup(at(62), 2).await.expect("cleanup"), 2);
    assert_eq!(store.event_cleanup(at(62), 100).await.expect("cleanup"), 4);
    assert_eq!(store.event_cleanup(at(62), 100).await.expect("cleanup"), 0);
    let kept = list(&store, everything()).await;
    assert_eq!(kept.events, {
        let mut v = all.events[6..].to_vec();
        v.extend(after_end.events.clone());
        v
    });
    // A cursor past what was deleted reads on as before.
    let again = list(
        &store,
        EventListParams {
            from: EventFrom::After(cursors[6]),
            ..everything()
        },
    )
    .await;
    assert_eq!(again.events, kept.events[1..].to_vec());

    // However old, the newest event stays, and the next one comes after it: a cursor handed
    // out never skips a newer event.
    let newest = kept.events.last().expect("kept").cursor;
    assert_eq!(
        store
            .event_cleanup(at(100_000), 100)
            .await
            .expect("cleanup"),
        kept.events.len() as u64 - 1
    );
    let left = list(&store, everything()).await;
    assert_eq!(left.events.len(), 1);
    assert_eq!(left.events[0].cursor, newest);
    store
        .event_append(vec![NewEvent {
            at: at(100_001),
            kind: EndpointPaused,
            endpoint: "api.example.com".into(),
            reason: None,
            until: None,
        }])
        .await
        .expect("append");
    let next = read_n(
        &store,
        EventListParams {
            from: EventFrom::After(newest),
            ..everything()
        },
        1,
    )
    .await;
    assert_eq!(next.events.len(), 1);
    assert!(next.events[0].cursor > newest);
}

/// Completions recorded together may be written as one row of the log (a store's choice): each
/// still reads as an event of its own, with a cursor of its own, whatever the page size, and a
/// read resumed from a cursor inside such a row takes the rest of it once.
pub async fn completions_written_together_read_one_by_one(store: Arc<dyn Store>) {
    const N: usize = 60;
    let jobs: Vec<_> = (0..N).map(|i| new_job(&format!("c{i:02}"), "q")).collect();
    store.job_insert_batch(jobs).await.expect("batch");
    let leased = lease(&store, "q", "w1", at(0), N as u32).await;
    assert_eq!(leased.len(), N);
    // At once, as the engine records, so that a store may put them in one write.
    let mut tasks = Vec::new();
    for job in leased {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut p = record(&job.id.0, "w1", 1, Transition::Complete);
            by_seq(&mut p, &job);
            store.job_record_attempt(p).await.expect("record")
        }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("task").state, JobState::Completed);
    }
    store
        .job_insert(new_job("late", "q"))
        .await
        .expect("insert");
    lease(&store, "q", "w1", at(0), 1).await;
    store
        .job_record_attempt(record(
            "late",
            "w1",
            1,
            Transition::Dead {
                category: DeadCategory::Permanent,
            },
        ))
        .await
        .expect("record");

    let all = read_n(&store, everything(), N + 1).await;
    assert_eq!(all.events.len(), N + 1);
    let mut ids: Vec<String> = all.events[..N]
        .iter()
        .map(|e| {
            assert_eq!(e.kind, EventKind::JobCompleted);
            assert_eq!(e.queue.as_deref(), Some("q"));
            assert_eq!(e.reason.as_deref(), Some("503 test; attempt 1"));
            e.job_id.clone().expect("a job")
        })
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), N, "each completion once");
    assert_eq!(all.events[N].job_id.as_deref(), Some("late"));
    let cursors: Vec<EventCursor> = all.events.iter().map(|e| e.cursor).collect();
    assert!(
        cursors.windows(2).all(|w| w[0] < w[1]),
        "cursors in order and distinct: {cursors:?}"
    );

    // Page by page, at every size: the same events in the same order, each once.
    for limit in [1, 7, 25] {
        let mut from = EventFrom::Start;
        let mut seen = Vec::new();
        for _ in 0..(N + 2) * 2 {
            let page = list(
                &store,
                EventListParams {
                    from,
                    limit,
                    ..everything()
                },
            )
            .await;
            seen.extend(page.events.iter().map(|e| e.cursor));
            from = EventFrom::After(page.next);
            if page.events.is_empty() && !page.more {
                break;
            }
        }
        assert_eq!(seen, cursors, "pages of {limit}");
    }
    // Resumed from inside: the rest, once; and a filter of kinds passes the row's over.
    let mid = cursors[N / 2];
    let rest = list(
        &store,
        EventListParams {
            from: EventFrom::After(mid),
            ..everything()
        },
    )
    .await;
    assert_eq!(
        rest.events.iter().map(|e| e.cursor).collect::<Vec<_>>(),
        cursors[N / 2 + 1..]
    );
    let dead = list(
        &store,
        EventListParams {
            kinds: vec![EventKind::JobDead],
            ..everything()
        },
    )
    .await;
    assert_eq!(
        kinds_and_ids(&dead),
        [(EventKind::JobDead, "late".to_owned())]
    );
}
