//! A job checked for what the engine needs before it stores one: the one check of its group's
//! and ordering key's names, made by [`EngineConfig::check`], which also lays the queue's
//! `ordering_on_dead` on a keyed job. The API's intake (`redial-intake`) checks every other
//! field and makes this one check through the same function, so a job from the API reaches
//! [`Engine::enqueue`](super::Engine::enqueue) as a [`Checked`] the engine takes as it is; a
//! program embedding the engine may hand it a plain `NewJob`, which the engine checks then.

use super::EngineConfig;
use redial_store::{HttpRequest, NewJob, OrderingKey, StoreError};

/// What makes a job unfit to store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobProblem {
    /// Its group's name is not one ([`NewJob::valid_group`]).
    Group,
    /// Its ordering key is not one ([`OrderingKey::valid`]).
    OrderingKey,
}

impl JobProblem {
    /// The rule the job broke, for people.
    pub fn rule(self) -> &'static str {
        match self {
            JobProblem::Group => "group must be 1 to 128 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators",
            JobProblem::OrderingKey => "ordering_key must be 1 to 256 characters of plain text, not only spaces: no control characters, bidirectional overrides or line separators",
        }
    }
}

/// A job [`EngineConfig::check`] passed: only it makes one.
#[derive(Clone, Debug)]
pub struct Checked(NewJob);

impl Checked {
    pub fn job(&self) -> &NewJob {
        &self.0
    }

    pub fn into_job(self) -> NewJob {
        self.0
    }

    /// Its request, to add to (a trace's `traceparent`): nothing checked is in it.
    pub fn request_mut(&mut self) -> &mut HttpRequest {
        &mut self.0.request
    }
}

impl EngineConfig {
    /// Checks `job`'s group and ordering key, and gives a keyed job its queue's
    /// `ordering_on_dead` (a queue not configured keeps what the job says).
    pub fn check(&self, mut job: NewJob) -> Result<Checked, JobProblem> {
        if job
            .group
            .as_deref()
            .is_some_and(|g| !NewJob::valid_group(g))
        {
            return Err(JobProblem::Group);
        }
        if job
            .ordering
            .as_ref()
            .is_some_and(|o| !OrderingKey::valid(&o.key))
        {
            return Err(JobProblem::OrderingKey);
        }
        if let (Some(o), Some(q)) = (job.ordering.as_mut(), self.queues.get(&job.queue)) {
            o.on_dead = q.ordering_on_dead;
        }
        Ok(Checked(job))
    }
}

/// What [`Engine::enqueue`](super::Engine::enqueue) takes: a [`Checked`] job as it is, a plain
/// `NewJob` checked there.
pub trait IntoChecked {
    fn into_checked(self, config: &EngineConfig) -> Result<Checked, StoreError>;
}

impl IntoChecked for Checked {
    fn into_checked(self, _: &EngineConfig) -> Result<Checked, StoreError> {
        Ok(self)
    }
}

impl IntoChecked for NewJob {
    fn into_checked(self, config: &EngineConfig) -> Result<Checked, StoreError> {
        let id = self.id.clone();
        config
            .check(self)
            .map_err(|p| StoreError::InvalidJob(format!("job {id}: {}", p.rule())))
    }
}
