//! What recording an attempt writes, written once for every store: the plan a transition makes
//! of the job as stored ([`RecordPlan`]), whether the recorder still holds the job
//! ([`RecordAttemptParams::recording`]), and the callback delivery a finish owes.

use crate::types::Finish;
use crate::{
    Attempt, Callback, Job, JobState, NewJob, RecordAttemptParams, StoreError, StoreResult,
    Transition,
};
use redial_policy::{DeadCategory, Timestamp};

/// What recording an attempt writes to the job, worked out from the job as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordPlan {
    pub state: JobState,
    pub category: Option<DeadCategory>,
    pub run_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    pub reason: String,
    /// The attempt's number in the job's log.
    pub number: u32,
}

impl RecordAttemptParams {
    /// The record of `attempt` on `job` (as leased) by `owner`, with the job's counters as
    /// they stand and no callback delivery: a caller whose decision moved the counters sets
    /// them, and [`RecordAttemptParams::with_delivery`] adds what the job owes.
    pub fn of(
        job: &Job,
        owner: String,
        now: Timestamp,
        attempt: Attempt,
        transition: Transition,
    ) -> Self {
        RecordAttemptParams {
            id: job.id.clone(),
            seq: Some(job.seq),
            queue: job.queue.clone(),
            endpoint: job.endpoint.clone(),
            owner,
            now,
            attempt,
            transition,
            attempts: job.attempts,
            unknown_attempts: job.unknown_attempts,
            deferrals: job.deferrals,
            last_delay_ms: job.last_delay_ms,
            callback: None,
            callback_leased_until: None,
            ordered: job.ordering.is_some(),
        }
    }

    /// What the transition writes to a job still as leased (no cancel waiting): its state, dead
    /// category, new `run_at` (`None` keeps the job's) and `finished_at`. The stores' one-statement
    /// paths apply it; [`RecordAttemptParams::plan`] covers every case from the stored job.
    pub fn as_leased(
        &self,
    ) -> (
        JobState,
        Option<DeadCategory>,
        Option<Timestamp>,
        Option<Timestamp>,
    ) {
        match self.transition {
            Transition::Complete => (JobState::Completed, None, None, Some(self.now)),
            Transition::Retry { at } => (JobState::Scheduled, None, Some(at), None),
            Transition::Defer { until } => (JobState::Deferred, None, Some(until), None),
            Transition::Dead { category } => (JobState::Dead, Some(category), None, Some(self.now)),
        }
    }

    /// The callback delivery `job` (as read before the attempt is recorded) owes once `plan`
    /// is applied to it; none when it has no callback or does not finish.
    pub fn delivery(&self, job: &Job, plan: &RecordPlan) -> Option<NewJob> {
        job.callback.as_ref()?;
        let finish = Finish {
            state: plan.state,
            category: plan.category,
            finished_at: plan.finished_at,
            reason: Some(&plan.reason),
            attempts: self.attempts,
            unknown_attempts: self.unknown_attempts,
            deferrals: self.deferrals,
            runs: plan.number,
        };
        Callback::delivery_of(job, finish, Some(&self.attempt), self.now)
    }

    /// These parameters with the delivery `job` (as leased) owes if the attempt leaves it as
    /// leased expects ([`RecordAttemptParams::callback`]).
    pub fn with_delivery(mut self, job: &Job) -> Self {
        if job.callback.is_some() {
            self.callback = self.delivery(job, &self.plan(job));
        }
        self
    }

    /// The job's next state: the transition's, except that a job whose cancellation was
    /// requested while it ran ends cancelled unless the attempt completed it or made it dead.
    pub fn plan(&self, job: &Job) -> RecordPlan {
        let now = self.now;
        let (mut state, mut category, mut run_at, mut finished_at) = match self.transition {
            Transition::Complete => (JobState::Completed, None, job.run_at, Some(now)),
            Transition::Retry { at } => (JobState::Scheduled, None, at, None),
            Transition::Defer { until } => (JobState::Deferred, None, until, None),
            Transition::Dead { category } => {
                (JobState::Dead, Some(category), job.run_at, Some(now))
            }
        };
        let mut reason = self.attempt.reason.clone();
        if job.cancel_requested && !state.is_finished() {
            (state, category, run_at, finished_at) =
                (JobState::Cancelled, None, job.run_at, Some(now));
            reason.push_str("; cancelled while running");
        }
        RecordPlan {
            state,
            category,
            run_at,
            finished_at,
            reason,
            number: job.runs + 1,
        }
    }

    /// The checks and computations every store makes from the job as stored: the lease is still
    /// the recorder's (`LeaseLost` otherwise: the job was rescued or cancelled, and this late
    /// result must not be applied), the plan, and the attempt's JSON (`data`, as serialised by
    /// the caller), renumbered when the job's log has grown meanwhile.
    pub fn recording(&self, job: &Job, data: String) -> StoreResult<Recording> {
        if job.state != JobState::Running || job.lease_owner.as_deref() != Some(self.owner.as_str())
        {
            return Err(StoreError::LeaseLost(self.id.clone()));
        }
        let plan = self.plan(job);
        let data = if self.attempt.number == plan.number {
            data
        } else {
            let mut attempt = self.attempt.clone();
            attempt.number = plan.number;
            attempt
                .to_stored()
                .map_err(|e| StoreError::Backend(format!("cannot encode the attempt: {e}")))?
        };
        Ok(Recording {
            delivery: self.delivery(job, &plan),
            plan,
            data,
            last_delay_ms: self.last_delay_ms.map(|v| v.min(i64::MAX as u64) as i64),
        })
    }
}

/// What recording an attempt writes, once it is known that the recorder still holds the job.
#[derive(Debug)]
pub struct Recording {
    pub plan: RecordPlan,
    /// The attempt as stored (JSON), numbered as the job's log needs.
    pub data: String,
    /// `last_delay_ms` as the column holds it.
    pub last_delay_ms: Option<i64>,
    /// The callback delivery the job owes once the plan is applied: inserted in the same
    /// transaction.
    pub delivery: Option<crate::NewJob>,
}
