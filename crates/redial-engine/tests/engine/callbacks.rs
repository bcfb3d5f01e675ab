//! Callback deliveries: one whose queue and endpoint have room starts from the finish that
//! made it (inserted leased to the worker, no lease of its own, no wait for its queue's loop);
//! one whose endpoint or queue is paused waits in its queue and goes once the pause ends.

use super::*;
use redial_engine::CallbackTarget;
use redial_store::{CallbackEvent, JobFilter, JobListParams, CALLBACK_TAG};

impl TestEngine {
    /// A job of `default` to `url` whose completion is told to `hook`.
    async fn enqueue_told(&self, id: &str, url: &str, hook: &str) {
        let target = CallbackTarget {
            url: hook.into(),
            on: CallbackEvent::DEFAULT.to_vec(),
            headers: vec![],
        };
        let callback = self
            .engine
            .callback("default", Some(target))
            .expect("a valid callback");
        let job = NewJob {
            ordering: None,
            callback,
            ..self.new_job(id, "default", "POST", url, None)
        };
        let out = self.engine.enqueue(job).await.expect("enqueue");
        assert!(matches!(out, InsertOutcome::Inserted(_)));
    }

    /// The callback queue's jobs (the deliveries), oldest first.
    async fn deliveries(&self) -> Vec<Job> {
        let page = self
            .store
            .job_list(JobListParams {
                filter: JobFilter {
                    queue: Some("callbacks".into()),
                    ..JobFilter::default()
                },
                after: None,
                limit: 100,
            })
            .await
            .expect("list");
        page.jobs
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_starts_from_the_finish_that_made_it() {
    let receiver = Receiver::start().await;
    let t = harness().start().await;
    // Every queue's first lease done first: the callback queue's, still out when the job's
    // attempt ended (a loaded machine, one failed run in a fresh clone), leased again on that
    // attempt's word, holding its free slots while the finish looked for one.
    t.settle().await;
    t.enqueue_told("a", &receiver.url("/charge"), &receiver.url("/hook"))
        .await;
    t.wait_for("a", "completed", |j| j.state == JobState::Completed)
        .await;
    t.settle().await;
    let d = t.deliveries().await;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(
        (d[0].state, d[0].runs, d[0].stalls, d[0].tags.as_slice()),
        (
            JobState::Completed,
            1,
            0,
            [CALLBACK_TAG.to_owned()].as_slice()
        )
    );
    assert_eq!(receiver.count("/hook"), 1);
    assert_eq!(
        t.store.leased_jobs("callbacks"),
        0,
        "the delivery went out without a lease of its own"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_held_by_a_pause_waits_in_its_queue() {
    let receiver = Receiver::start().await;
    let t = harness().start().await;
    let hook = receiver.url("/hook");
    let origin = format!("http://{}", receiver.addr());

    // Its endpoint paused by hand: the delivery goes in ready, and waits.
    t.engine
        .pause(ControlKind::Endpoint, &origin, None, "test".into())
        .await
        .expect("pause");
    t.enqueue_told("a", &receiver.url("/charge"), &hook).await;
    t.wait_for("a", "completed", |j| j.state == JobState::Completed)
        .await;
    t.settle().await;
    let d = t.deliveries().await;
    assert_eq!(
        d.iter().map(|d| d.state).collect::<Vec<_>>(),
        [JobState::Ready]
    );
    assert_eq!(receiver.count("/hook"), 0);
    t.engine
        .resume(ControlKind::Endpoint, &origin)
        .await
        .expect("resume");
    t.settle().await;
    assert_eq!(t.deliveries().await[0].state, JobState::Completed);
    assert_eq!(receiver.count("/hook"), 1);
    assert_eq!(t.store.leased_jobs("callbacks"), 1, "leased by its queue");

    // Its queue paused by hand: the same.
    t.engine
        .pause(ControlKind::Queue, "callbacks", None, "test".into())
        .await
        .expect("pause");
    t.enqueue_told("b", &receiver.url("/charge"), &hook).await;
    t.wait_for("b", "completed", |j| j.state == JobState::Completed)
        .await;
    t.settle().await;
    assert_eq!(receiver.count("/hook"), 1);
    t.engine
        .resume(ControlKind::Queue, "callbacks")
        .await
        .expect("resume");
    t.settle().await;
    let states: Vec<JobState> = t.deliveries().await.iter().map(|d| d.state).collect();
    assert_eq!(states, [JobState::Completed, JobState::Completed]);
    assert_eq!(receiver.count("/hook"), 2);
    assert_eq!(t.store.leased_jobs("callbacks"), 2);
    t.stop().await;
}
