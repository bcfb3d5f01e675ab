//! Recurring schedules: their definition as kept, the engine's calls that save, list, pause and
//! delete them, and the check that turns due occurrences into ordinary jobs.
//!
//! Owns the definition document (the store keeps it opaque), the occurrence job's id and key, and
//! the loop. Does not own when occurrences fall nor the missed-run rule (the policy core's
//! `schedule` module), nor the validation of what clients send (the API's).
//!
//! An occurrence's job id is `<schedule id>@<occurrence instant, UTC>`, so the occurrence runs
//! once however many nodes check, and however often a check is repeated after a crash: a second
//! insert of the same id is a duplicate and changes nothing.
//!
//! Over 600 lines: the definition as kept, the handle's calls and the due check, with the tests of
//! their rules inline.

use super::{Engine, Inner};
use redial_policy::schedule::{fire, CronRule, EveryRule, Missed, Recurrence};
use redial_policy::PolicyOverride;
use redial_policy::{Human, Timestamp};
use redial_store::{HttpRequest, ScheduleAdvance, ScheduleRecord};
use redial_store::{InsertOutcome, JobId, NewJob, StoreError};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// How often the scheduler looks for due occurrences (besides when a schedule is saved or
/// resumed, and right after a check that found a full batch due).
const SCHEDULE_TICK: Duration = Duration::from_secs(1);

/// Due schedules handled per check; more are handled by the next check, at once.
const DUE_PER_CHECK: usize = 500;

/// The namespace of derived idempotency keys: UUIDv5(namespace, "<queue>/<job id>").
const KEY_NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6b0e_4d1c_9a57_4f43_8f0c_52d1_a7e3_9c21);

/// The idempotency key of a job that names none: derived from its queue and id, so every
/// attempt, and a second insert of the same job, carries the same one.
pub fn derived_idempotency_key(queue: &str, id: &str) -> String {
    uuid::Uuid::new_v5(&KEY_NAMESPACE, format!("{queue}/{id}").as_bytes()).to_string()
}

/// When a schedule's occurrences fall, as written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleRule {
    /// A cron expression (5 fields, or 6 with seconds first) in an IANA time zone.
    Cron { expr: String, timezone: String },
    /// Every `interval` of real time from `anchor` (the first occurrence is one interval after).
    Every {
        #[serde(with = "redial_policy::serde_human")]
        interval: Duration,
        anchor: Timestamp,
    },
}

impl ScheduleRule {
    /// The rule ready to compute with, or why it cannot be.
    pub fn recurrence(&self) -> Result<Recurrence, String> {
        match self {
            ScheduleRule::Cron { expr, timezone } => {
                CronRule::parse(expr, Some(timezone)).map(|c| Recurrence::Cron(Box::new(c)))
            }
            ScheduleRule::Every { interval, anchor } => {
                if *interval < redial_policy::schedule::MIN_INTERVAL {
                    return Err(format!(
                        "every {} is shorter than the shortest interval, 1s",
                        Human(*interval)
                    ));
                }
                Ok(Recurrence::Every(EveryRule {
                    interval: *interval,
                    anchor: *anchor,
                }))
            }
        }
    }
}

/// What happens to occurrences missed while no scheduler ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "policy")]
pub enum MissedRule {
    Skip,
    RunOnce,
    RunAll { max: u32 },
}

impl MissedRule {
    fn policy(self) -> Missed {
        match self {
            MissedRule::Skip => Missed::Skip,
            MissedRule::RunOnce => Missed::RunOnce,
            MissedRule::RunAll { max } => Missed::RunAll { max },
        }
    }
}

/// The job each occurrence enqueues: a job's fields, less those each occurrence sets (its id,
/// idempotency key and run time).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobTemplate {
    pub queue: String,
    pub endpoint: String,
    pub request: HttpRequest,
    pub priority: i32,
    pub tags: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyOverride>,
    /// The group each occurrence's job belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// What each occurrence's job tells when it finishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub callback: Option<redial_store::Callback>,
    /// The ordering key of each occurrence's job: occurrences start one at a time, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
}

/// A schedule as defined by the API or the configuration file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScheduleDefinition {
    pub rule: ScheduleRule,
    pub missed: MissedRule,
    pub job: JobTemplate,
    /// "api", or "config" for one defined in the configuration file (kept in step with it at
    /// each start).
    pub source: String,
}

/// A schedule as the API and the CLI show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScheduleView {
    pub id: String,
    #[serde(flatten)]
    pub definition: ScheduleDefinition,
    pub paused: bool,
    pub next_at: Option<Timestamp>,
    pub last_occurrence: Option<Timestamp>,
    pub last_fired_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Why a schedule call failed.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error("schedule {0:?} not found")]
    NotFound(String),
    #[error("schedule {0:?} exists: delete it first, or replace it with PUT /v1/schedules/{0}")]
    Exists(String),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one check did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScheduleCheck {
    /// Due schedules read.
    pub due: usize,
    /// Occurrence jobs inserted (duplicates of ones another node or an earlier check inserted
    /// are not counted).
    pub enqueued: usize,
    /// Missed occurrences dropped by their schedule's policy.
    pub dropped: u64,
    /// Due schedules moved on (the others were left for a node that can run them).
    pub advanced: usize,
}

/// A schedule id: 1 to 90 characters of letters, digits and `- _ . :`, not only dots, so that an
/// occurrence's job id (`<id>@<instant>`) and its tag (`schedule:<id>`) are valid, and the id can
/// be written in a URL path.
pub fn check_schedule_id(id: &str) -> Result<(), String> {
    let valid = !id.is_empty()
        && id.len() <= 90
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        && !id.bytes().all(|b| b == b'.');
    if valid {
        Ok(())
    } else {
        Err(
            "schedule id must be 1 to 90 characters of letters, digits and - _ . : (not only dots)"
                .into(),
        )
    }
}

/// The most tags a schedule's job may carry: each occurrence adds `schedule:<id>`, and a job
/// carries 32 at most.
pub const MAX_TEMPLATE_TAGS: usize = 31;

fn view(r: ScheduleRecord) -> Result<ScheduleView, StoreError> {
    let definition = serde_json::from_str(&r.definition).map_err(|e| {
        StoreError::Backend(format!(
            "schedule {:?} has a definition this Redial cannot read: {e}",
            r.id
        ))
    })?;
    Ok(ScheduleView {
        id: r.id,
        definition,
        paused: r.paused,
        next_at: r.next_at,
        last_occurrence: r.last_occurrence,
        last_fired_at: r.last_fired_at,
        created_at: r.created_at,
        updated_at: r.updated_at,
    })
}

impl Engine {
    /// Saves a schedule: a new one (`replace` false: an existing id is an error), or a new
    /// definition for the one of this id. Its next occurrence is the first after now; a replaced
    /// schedule keeps its pause.
    pub async fn schedule_save(
        &self,
        id: &str,
        definition: ScheduleDefinition,
        replace: bool,
    ) -> Result<ScheduleView, ScheduleError> {
        check_schedule_id(id).map_err(ScheduleError::Invalid)?;
        if !self.has_queue(&definition.job.queue) {
            return Err(ScheduleError::Invalid(format!(
                "queue {:?} is not configured",
                definition.job.queue
            )));
        }
        let rule = definition
            .rule
            .recurrence()
            .map_err(ScheduleError::Invalid)?;
        if definition.job.tags.len() > MAX_TEMPLATE_TAGS {
            return Err(ScheduleError::Invalid(format!(
                "a schedule's job has at most {MAX_TEMPLATE_TAGS} tags: each occurrence adds schedule:<id>"
            )));
        }
        let store = &self.inner.store;
        let existing = store.schedule_get(id).await?;
        if existing.is_some() && !replace {
            return Err(ScheduleError::Exists(id.to_owned()));
        }
        let now = self.inner.clock.now();
        // A new schedule is not paused; saving over one keeps its pause (the store does not
        // change it).
        let record = ScheduleRecord {
            id: id.to_owned(),
            definition: serde_json::to_string(&definition)
                .map_err(|e| ScheduleError::Invalid(e.to_string()))?,
            paused: false,
            next_at: rule.next_after(now),
            last_occurrence: None,
            last_fired_at: None,
            created_at: now,
            updated_at: now,
        };
        store.schedule_save(record).await?;
        self.inner.schedules_changed.notify_one();
        self.schedule(id).await
    }

    /// The schedule of this id.
    pub async fn schedule(&self, id: &str) -> Result<ScheduleView, ScheduleError> {
        match self.inner.store.schedule_get(id).await? {
            Some(r) => Ok(view(r)?),
            None => Err(ScheduleError::NotFound(id.to_owned())),
        }
    }

    /// Every schedule this node can read, by id (one it cannot, written by a newer Redial, is
    /// left out and logged).
    pub async fn schedules(&self) -> Result<Vec<ScheduleView>, ScheduleError> {
        Ok(readable(self.inner.store.schedule_list().await?))
    }

    /// A page of schedules by id: at most `limit` after `after`, and the id to give as `after`
    /// for the next page when there may be one.
    pub async fn schedules_page(
        &self,
        after: Option<String>,
        limit: u32,
    ) -> Result<(Vec<ScheduleView>, Option<String>), ScheduleError> {
        let mut records = self
            .inner
            .store
            .schedule_page(after, limit.saturating_add(1))
            .await?;
        let more = records.len() > limit as usize;
        records.truncate(limit as usize);
        let next = more.then(|| records.last().map(|r| r.id.clone())).flatten();
        let views = readable(records);
        Ok((views, next))
    }

    /// Deletes a schedule; the jobs it enqueued stay.
    pub async fn schedule_delete(&self, id: &str) -> Result<(), ScheduleError> {
        if self.inner.store.schedule_delete(id).await? {
            Ok(())
        } else {
            Err(ScheduleError::NotFound(id.to_owned()))
        }
    }

    /// Pauses a schedule (no occurrence is enqueued while paused) or resumes it (from the first
    /// occurrence after now: those that fell while paused are not run). Resuming one that is not
    /// paused changes nothing.
    pub async fn schedule_set_paused(
        &self,
        id: &str,
        paused: bool,
    ) -> Result<ScheduleView, ScheduleError> {
        let current = self.schedule(id).await?;
        if !paused && !current.paused {
            return Ok(current);
        }
        let now = self.inner.clock.now();
        // A pause leaves the next occurrence as it is (the store ignores this one).
        let next_at = if paused {
            None
        } else {
            current
                .definition
                .rule
                .recurrence()
                .map_err(ScheduleError::Invalid)?
                .next_after(now)
        };
        if !self
            .inner
            .store
            .schedule_set_paused(id, paused, next_at, now)
            .await?
        {
            return Err(ScheduleError::NotFound(id.to_owned()));
        }
        self.inner.schedules_changed.notify_one();
        self.schedule(id).await
    }

    /// Makes the schedules defined in the configuration file the ones marked as coming from
    /// it: saves each (a changed definition replaces the kept one, an unchanged one keeps its
    /// next occurrence, an interval keeps the anchor it was first saved with), and deletes
    /// those no longer in the file.
    pub async fn schedules_from_config(
        &self,
        mut defined: Vec<(String, ScheduleDefinition)>,
    ) -> Result<(), ScheduleError> {
        let kept = self.schedules().await?;
        for (id, definition) in &mut defined {
            let kept_one = kept.iter().find(|k| &k.id == id);
            // An interval counts from when the schedule was first saved: an unchanged one keeps
            // its anchor across restarts instead of starting over.
            if let (
                ScheduleRule::Every { anchor, .. },
                Some(ScheduleRule::Every {
                    anchor: kept_anchor,
                    ..
                }),
            ) = (&mut definition.rule, kept_one.map(|k| &k.definition.rule))
            {
                *anchor = *kept_anchor;
            }
            let same = kept_one.is_some_and(|k| &k.definition == definition);
            if !same {
                self.schedule_save(id, definition.clone(), true).await?;
                tracing::info!(schedule = %id, "schedule saved from the configuration file");
            }
        }
        for k in kept {
            if k.definition.source == "config" && !defined.iter().any(|(id, _)| *id == k.id) {
                self.schedule_delete(&k.id).await?;
                tracing::info!(schedule = %k.id, "schedule deleted: no longer in the configuration file");
            }
        }
        Ok(())
    }

    /// Enqueues the due occurrences of every due schedule, by each one's missed-run policy, and
    /// moves each on to its next occurrence. Safe on several nodes at once. A schedule this node
    /// cannot run (its definition unreadable, written by a newer Redial; its queue not
    /// configured here) is left for a node that can, and logged once a minute.
    ///
    /// Over 100 lines on purpose: each due schedule through its missed-run rule to its jobs in one
    /// pass (read, enqueue, move on), with each reason a node leaves a schedule to another.
    pub async fn schedules_check(&self) -> Result<ScheduleCheck, StoreError> {
        let inner = &self.inner;
        let now = inner.clock.now();
        let due = inner.store.schedules_due(now, DUE_PER_CHECK).await?;
        let mut check = ScheduleCheck {
            due: due.len(),
            ..ScheduleCheck::default()
        };
        // Which occurrences run, schedule by schedule; then their jobs go in, in batches; then
        // every schedule moves on (after its jobs are in: a check repeated after a crash between
        // the two inserts duplicates, which change nothing).
        let mut jobs = Vec::new();
        let mut advances = Vec::new();
        for record in due {
            let Some(due_at) = record.next_at else {
                continue;
            };
            let id = record.id.clone();
            let parsed = serde_json::from_str::<ScheduleDefinition>(&record.definition)
                .map_err(|e| format!("its definition cannot be read by this Redial: {e}"))
                .and_then(|d| d.rule.recurrence().map(|r| (d, r)))
                .and_then(|(d, r)| {
                    if self.has_queue(&d.job.queue) {
                        Ok((d, r))
                    } else {
                        Err(format!(
                            "its queue {:?} is not configured on this node",
                            d.job.queue
                        ))
                    }
                });
            let (definition, rule) = match parsed {
                Ok(x) => x,
                Err(why) => {
                    self.schedule_skipped(&id, &why);
                    continue;
                }
            };
            let firing = fire(&rule, due_at, now, definition.missed.policy());
            if firing.dropped > 0 {
                check.dropped += firing.dropped;
                tracing::warn!(
                    schedule = %id,
                    dropped = firing.dropped,
                    policy = definition.missed.policy().name(),
                    "missed occurrences were not run"
                );
            }
            if firing.next.is_none() {
                tracing::warn!(schedule = %id, "schedule has no further occurrence (its rule matches no later date); it stays, with none next");
            }
            for &occurrence in &firing.run {
                let mut job = occurrence_job(&id, &definition.job, occurrence, now);
                inner.config.order(&mut job);
                jobs.push(job);
            }
            advances.push(ScheduleAdvance {
                id,
                due: due_at,
                read_at: record.updated_at,
                next_at: firing.next,
                last_occurrence: firing.run.last().copied(),
                now,
            });
        }
        check.advanced = advances.len();
        let mut woken = std::collections::BTreeSet::new();
        for chunk in jobs.chunks(INSERT_BATCH) {
            let outcomes = inner.store.job_insert_batch(chunk.to_vec()).await?;
            let conflicted = outcomes
                .iter()
                .any(|o| matches!(o, InsertOutcome::Conflict(_)));
            let outcomes = if conflicted {
                // The batch wrote nothing: one by one, so the others still go in.
                let mut one_by_one = Vec::with_capacity(chunk.len());
                for job in chunk {
                    one_by_one.push(inner.store.job_insert(job.clone()).await?);
                }
                one_by_one
            } else {
                outcomes
            };
            for outcome in outcomes {
                let job = outcome.job();
                match outcome {
                    InsertOutcome::Inserted(_) => {
                        check.enqueued += 1;
                        woken.insert(job.queue.clone());
                        tracing::info!(job_id = %job.id, queue = %job.queue, "schedule enqueued an occurrence");
                    }
                    InsertOutcome::Duplicate(_) => {}
                    InsertOutcome::Conflict(_) => {
                        tracing::warn!(job_id = %job.id, "an occurrence's job id is taken by a different job; the occurrence is not run");
                    }
                }
            }
        }
        // What went in is counted and woken even if moving a schedule on fails below.
        for queue in woken {
            self.wake(&queue);
        }
        let metrics = &inner.metrics;
        let occurrences = &crate::metrics::SCHEDULE_OCCURRENCES;
        if check.enqueued > 0 {
            metrics.add(
                occurrences,
                &[("outcome", "enqueued")],
                check.enqueued as u64,
            );
        }
        if check.dropped > 0 {
            metrics.add(occurrences, &[("outcome", "dropped")], check.dropped);
        }
        // Concurrently: SQLite's storage thread commits them in one group, PostgreSQL spreads
        // them over the pool's connections.
        let moved = futures_util::future::join_all(
            advances
                .into_iter()
                .map(|a| inner.store.schedule_advance(a)),
        )
        .await;
        for m in moved {
            m?;
        }
        Ok(check)
    }

    /// Logs that this node leaves a due schedule for another, at most once a minute for each.
    fn schedule_skipped(&self, id: &str, why: &str) {
        let mut logged = self
            .inner
            .schedules_skipped
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        if logged
            .get(id)
            .is_some_and(|at| now.duration_since(*at) < Duration::from_secs(60))
        {
            return;
        }
        logged.insert(id.to_owned(), now);
        tracing::error!(schedule = %id, "this node cannot run the schedule ({why}); it is left for a node that can");
    }
}

/// Occurrence jobs inserted per batch.
const INSERT_BATCH: usize = 500;

/// The job of one occurrence.
fn occurrence_job(
    schedule: &str,
    template: &JobTemplate,
    occurrence: Timestamp,
    now: Timestamp,
) -> NewJob {
    let id = format!("{schedule}@{occurrence}");
    let mut tags = template.tags.clone();
    tags.push(format!("schedule:{schedule}"));
    NewJob {
        // The queue's `ordering_on_dead` is laid on by the caller (`EngineConfig::order`).
        ordering: template
            .ordering_key
            .clone()
            .map(|key| redial_store::OrderingKey {
                key,
                on_dead: redial_store::OnDead::Block,
            }),
        callback: template.callback.clone(),
        idempotency_key: Some(derived_idempotency_key(&template.queue, &id)),
        id: JobId(id),
        queue: template.queue.clone(),
        endpoint: template.endpoint.clone(),
        request: template.request.clone(),
        priority: template.priority,
        // Due now (the occurrence has come); in lease order by when it fell.
        run_at: occurrence.min(now),
        deadline: None,
        tags,
        policy: template.policy.clone(),
        created_at: now,
        group: template.group.clone(),
    }
}

/// Checks for due occurrences every second, at once when a schedule is saved or resumed, and
/// again at once after a check that found as many due as it takes (more are waiting).
pub(super) async fn schedule_loop(inner: Arc<Inner>, engine: Engine) {
    loop {
        match engine.schedules_check().await {
            Ok(c) if c.due == DUE_PER_CHECK && c.advanced > 0 => {
                if inner.shutdown.is_triggered() {
                    return;
                }
                continue;
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "checking schedules failed; will retry"),
        }
        tokio::select! {
            _ = tokio::time::sleep(SCHEDULE_TICK) => {}
            _ = inner.schedules_changed.notified() => {}
            _ = inner.shutdown.wait() => return,
        }
    }
}

/// The views of the schedules this node can read; one it cannot (written by a newer Redial) is
/// left out and logged.
fn readable(records: Vec<ScheduleRecord>) -> Vec<ScheduleView> {
    records
        .into_iter()
        .filter_map(|r| match view(r) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::error!(error = %e, "a schedule is left out of the list");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A template's callback reaches every occurrence's job, and survives the schedule's
    /// stored JSON.
    #[test]
    fn occurrences_carry_the_templates_callback() {
        let now = Timestamp::from_unix_millis(1_795_996_800_000);
        let template = JobTemplate {
            ordering_key: Some("nightly".into()),
            queue: "default".into(),
            endpoint: "https://api.example.com".into(),
            request: redial_store::HttpRequest {
                method: "POST".into(),
                url: "https://api.example.com/report".into(),
                headers: Vec::new(),
                body: None,
                timeout_ms: None,
                credentials: None,
            },
            priority: 0,
            tags: Vec::new(),
            policy: None,
            group: None,
            callback: Some(redial_store::Callback {
                url: "https://app.example.com/hooks".into(),
                on: vec![redial_store::CallbackEvent::Dead],
                headers: Vec::new(),
                queue: "callbacks".into(),
                endpoint: "https://app.example.com".into(),
            }),
        };
        let stored: JobTemplate =
            serde_json::from_str(&serde_json::to_string(&template).expect("JSON"))
                .expect("read back");
        assert_eq!(stored, template);
        let job = occurrence_job("nightly", &stored, now, now);
        assert_eq!(job.callback, template.callback);
        assert_eq!(job.ordering.map(|o| o.key).as_deref(), Some("nightly"));
    }
}
