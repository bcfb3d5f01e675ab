//! The behaviour suite every [`Store`] backend must pass: storage behaviour is defined here, once.
//!
//! A backend's tests call [`store_suite!`](crate::store_suite) with an async constructor of a fresh,
//! empty store; the macro expands to one `#[tokio::test]` per case, so a failure names its case.
//! Extend this suite whenever store behaviour changes. The cases live by area (inserting,
//! leasing, recording, dead letters, reads, endpoints); the helpers they share are here.

mod callbacks;
mod dead_letters;
mod endpoints;
mod events;
mod groups;
mod insert;
mod lease;
mod ordering;
mod reads;
mod record;
mod replays;
mod scan;
mod schedules;
mod search;

pub use callbacks::{
    a_delivery_can_go_in_leased_to_its_recorder, callbacks_are_written_with_the_state_change,
    callbacks_of_cancels_replays_and_maintenance, deliveries_owed_by_completions_recorded_at_once,
};
pub use dead_letters::{
    bulk_actions_in_chunks, bulk_dead_letter_actions, cancel_jobs, dead_letter_groups_for_triage,
    dead_letters_by_reason_pattern, dismiss_dead_job, replay_dead_job,
};
pub use endpoints::{
    controls_round_trip_and_clear_shared_holds, deadlines_expire_for_held_jobs,
    endpoint_backlog_counts, endpoint_deadlines_in_start_order, endpoint_state_round_trips,
    group_deadlines_in_start_order, retries_due_when_an_outage_ends, shared_holds_only_lengthen,
};
pub use events::{
    completions_written_together_read_one_by_one, events_are_written_with_the_change,
};
pub use groups::{
    a_held_group_is_passed_over, a_ten_job_group_goes_in_the_first_lease_behind_a_big_one,
    grouped_jobs_wait_for_their_time, groups_are_counted, groups_take_turns,
    groups_with_nothing_due_take_no_turn, insert_group, lease_groups,
    one_job_leases_rotate_across_groups, weights_share_a_lease, GroupAdmit,
};
pub use insert::{
    batch_is_atomic, insert_and_get, insert_duplicate_and_conflict, insert_future_job_is_scheduled,
};
pub use lease::{
    candidates_leave_out_held_endpoints, lease_admitted_asks_admission_in_lease_order,
    lease_admitted_holds_first_attempts_takes_retries, lease_ids_takes_only_runnable_jobs,
    lease_never_hands_a_job_out_twice, lease_order_and_queues,
};
pub use ordering::{
    a_head_replayed_into_another_queue_changes_lines, a_replayed_job_takes_its_place_in_its_line,
    cancels_dismissals_and_rescues_keep_the_line, keys_combine_with_groups_and_lines_come_in_pages,
    ordering_holds_for_any_interleaving, ordering_keys_run_one_at_a_time_in_order,
};
pub use reads::{
    cleanup_respects_retention, list_filters_and_pages, recent_dead_letters_and_oldest_deferred,
    stats_counts,
};
pub use record::{
    heartbeat_and_release, promote_and_next_run_at, record_attempt_transitions,
    record_requires_the_lease, rescue_expired_leases,
    the_attempt_that_ends_a_job_stays_in_its_timeline,
};
pub use replays::{replay_history_is_bounded, replay_with_changes};
pub use scan::{
    a_drained_level_gives_way_to_the_one_below,
    a_higher_priority_job_comes_first_while_a_queue_drains,
    a_higher_priority_job_is_seen_at_the_head_at_once,
    a_job_due_behind_a_held_head_is_taken_or_the_lease_says_more,
    a_job_due_behind_the_head_is_leased_first_a_second_on,
    a_job_due_behind_the_head_is_leased_once_the_queue_runs_short,
    jobs_behind_a_deep_held_backlog_are_reached_over_a_few_leases,
    the_deep_read_carries_on_into_lower_priorities,
};
pub use schedules::{schedules_due_and_advance_once, schedules_round_trip};
pub use search::search_by_key_tag_and_reason_text;

use crate::{
    Attempt, AttemptCategory, HttpRequest, Job, JobId, LeaseParams, NewJob, RecordAttemptParams,
    ReleaseParams, Store, Transition,
};
use redial_policy::{DeadCategory, Timestamp};
use std::sync::Arc;

/// Expands to one `#[tokio::test]` per behaviour case, each with a fresh store from `$make`, an
/// async expression evaluating to `Arc<dyn Store>`.
#[macro_export]
macro_rules! store_suite {
    ($make:expr) => {
        $crate::store_suite!(@cases $make;
            insert_and_get, insert_future_job_is_scheduled, insert_duplicate_and_conflict,
            batch_is_atomic, lease_order_and_queues, lease_never_hands_a_job_out_twice,
            record_attempt_transitions, the_attempt_that_ends_a_job_stays_in_its_timeline,
            record_requires_the_lease, heartbeat_and_release,
            rescue_expired_leases, promote_and_next_run_at, replay_dead_job, dismiss_dead_job,
            cancel_jobs, bulk_dead_letter_actions, list_filters_and_pages, stats_counts,
            cleanup_respects_retention, candidates_leave_out_held_endpoints, lease_ids_takes_only_runnable_jobs,
            lease_admitted_asks_admission_in_lease_order, lease_admitted_holds_first_attempts_takes_retries,
            deadlines_expire_for_held_jobs, endpoint_state_round_trips, endpoint_backlog_counts, endpoint_deadlines_in_start_order, group_deadlines_in_start_order, retries_due_when_an_outage_ends,
            shared_holds_only_lengthen, recent_dead_letters_and_oldest_deferred,
            dead_letter_groups_for_triage, dead_letters_by_reason_pattern, replay_with_changes, replay_history_is_bounded, bulk_actions_in_chunks, controls_round_trip_and_clear_shared_holds,
            schedules_round_trip, schedules_due_and_advance_once, groups_take_turns,
            one_job_leases_rotate_across_groups, a_held_group_is_passed_over, weights_share_a_lease,
            grouped_jobs_wait_for_their_time, groups_are_counted,
            groups_with_nothing_due_take_no_turn, callbacks_are_written_with_the_state_change,
            callbacks_of_cancels_replays_and_maintenance, a_delivery_can_go_in_leased_to_its_recorder,
            deliveries_owed_by_completions_recorded_at_once,
            events_are_written_with_the_change, completions_written_together_read_one_by_one, search_by_key_tag_and_reason_text,
            ordering_keys_run_one_at_a_time_in_order, a_replayed_job_takes_its_place_in_its_line,
            cancels_dismissals_and_rescues_keep_the_line,
            keys_combine_with_groups_and_lines_come_in_pages, ordering_holds_for_any_interleaving,
            a_head_replayed_into_another_queue_changes_lines);
    };
    (@cases $make:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let store: std::sync::Arc<dyn $crate::Store> = $make.await;
                $crate::testkit::$case(store.clone()).await;
                // Whatever the case did, the counts a store keeps match its jobs.
                store.counts_check().await.expect("kept counts match the jobs");
            }
        )*
    };
}

/// 2026-11-30T00:00:00Z, the suite's "now".
pub const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

pub fn at(secs: i64) -> Timestamp {
    Timestamp::from_unix_millis(T0.as_unix_millis() + secs * 1000)
}

/// A job for the suite: a POST to an example endpoint, created at `T0`.
pub fn new_job(id: &str, queue: &str) -> NewJob {
    NewJob {
        ordering: None,
        callback: None,
        id: JobId::from(id),
        queue: queue.to_owned(),
        endpoint: "https://api.example.com".to_owned(),
        request: HttpRequest {
            method: "POST".into(),
            url: "https://api.example.com/v1/charges".into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some("{\"amount\":100}".into()),
            timeout_ms: Some(5000),
            credentials: None,
        },
        idempotency_key: Some(format!("key-{id}")),
        priority: 0,
        run_at: T0,
        deadline: None,
        tags: vec!["suite".into()],
        policy: None,
        created_at: T0,
        group: None,
    }
}

fn attempt(number: u32, status: u16, decision: &str) -> Attempt {
    Attempt {
        response_body_base64: false,
        response_body_truncated: false,
        number,
        started_at: T0,
        duration_ms: 12,
        status: Some(status),
        error: None,
        error_detail: None,
        category: AttemptCategory::Transient,
        decision: serde_json::from_value(serde_json::Value::from(decision)).expect("a decision"),
        dead_category: None,
        delay_ms: Some(1000),
        server_wait_ms: None,
        server_wait_source: None,
        reason: format!("{status} test; attempt {number}"),
        held: None,
        response_headers: vec![("content-type".into(), "text/plain".into())],
        response_body: Some("oops".into()),
        worker: "w1".into(),
    }
}

/// Makes `p` find its job by seq, as the engine records (with the job's queue and endpoint).
fn by_seq(p: &mut RecordAttemptParams, job: &Job) {
    p.seq = Some(job.seq);
    p.queue = job.queue.clone();
    p.endpoint = job.endpoint.clone();
    p.ordered = job.ordering.is_some();
}

/// An attempt of job `id` by `owner` that decides `transition` (recorded at `at(1)`).
pub fn record(id: &str, owner: &str, number: u32, transition: Transition) -> RecordAttemptParams {
    let decision = match transition {
        Transition::Complete => "complete",
        Transition::Retry { .. } => "retry",
        Transition::Defer { .. } => "defer",
        Transition::Dead { .. } => "dead",
    };
    RecordAttemptParams {
        callback: None,
        callback_leased_until: None,
        id: JobId::from(id),
        seq: None,
        queue: String::new(),
        endpoint: String::new(),
        owner: owner.into(),
        now: at(1),
        attempt: attempt(number, 503, decision),
        transition,
        attempts: number,
        unknown_attempts: 0,
        deferrals: 0,
        last_delay_ms: Some(1000),
        ordered: false,
    }
}

async fn lease(
    store: &Arc<dyn Store>,
    queue: &str,
    owner: &str,
    now: Timestamp,
    limit: u32,
) -> Vec<Job> {
    store
        .job_lease_available(LeaseParams {
            queue: queue.into(),
            limit,
            owner: owner.into(),
            now,
            lease_until: Timestamp::from_unix_millis(now.as_unix_millis() + 30_000),
        })
        .await
        .expect("lease succeeds")
}

fn ids(jobs: &[Job]) -> Vec<String> {
    jobs.iter().map(|j| j.id.0.clone()).collect()
}

async fn get(store: &Arc<dyn Store>, id: &str) -> (Job, Vec<Attempt>) {
    store
        .job_get(&JobId::from(id))
        .await
        .expect("get succeeds")
        .expect("job exists")
}

/// Inserts a job and drives it to dead through one failed attempt.
async fn make_dead(store: &Arc<dyn Store>, id: &str, queue: &str, category: DeadCategory) {
    make_dead_because(store, id, queue, category, None).await;
}

/// [`make_dead`], with the attempt's reason when given (the job's last reason then).
async fn make_dead_because(
    store: &Arc<dyn Store>,
    id: &str,
    queue: &str,
    category: DeadCategory,
    reason: Option<&str>,
) {
    let mut j = new_job(id, queue);
    j.created_at = T0;
    store.job_insert(j).await.expect("insert");
    let leased = lease(store, queue, "w-dead", at(0), 100).await;
    assert!(leased.iter().any(|j| j.id.0 == id), "job {id} leased");
    for other in leased.iter().filter(|j| j.id.0 != id) {
        store
            .job_release(ReleaseParams {
                owner: "w-dead".into(),
                ids: vec![other.id.clone()],
                now: at(0),
            })
            .await
            .expect("release");
    }
    let mut p = record(id, "w-dead", 1, Transition::Dead { category });
    if let Some(reason) = reason {
        p.attempt.reason = reason.to_owned();
    }
    store.job_record_attempt(p).await.expect("record dead");
}
