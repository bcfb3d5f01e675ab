//! The decision: given an outcome, the job's counters, the policy, `now` and a jitter source,
//! what happens to the job next.
//!
//! Owns the ceilings (attempts, unknown attempts, deferrals, deadline), the choice between a
//! server-given wait and backoff (and, for an unknown outcome, which backoff: see `repeat`), and
//! the one-line human reason. Does not own storage or time:
//! the caller applies the decision and passes `now` in.
//!
//! Order of classification for a response: policy rules (first match) -> provider hints
//! (`x-should-retry`, `Stripe-Should-Retry`, when trusted; never on a 2xx) -> the built-in table
//! (docs/api.md, "How outcomes are classified"). Transport errors: rules with `error` -> the table.
//! Handler results are taken as given.
//!
//! Then, by category:
//! - success -> `Complete`.
//! - permanent -> `Dead(permanent)`.
//! - defer -> if `deferrals >= max_deferrals`, `Dead(deferral_exhausted)`; else wait for the
//!   server-given instant plus up to `server_wait_jitter`, or without one the `deferral` backoff.
//! - transient -> this is failure number `failures + 1`; at `max_attempts` it is
//!   `Dead(transient_exhausted)`; else the server-given wait, or the `transient` backoff.
//! - unknown -> the same, and dead (`unknown_exhausted`) also when the unknown count reaches
//!   `max_unknown_attempts`; else the server-given wait, or a backoff chosen by whether a repeat is
//!   safe (RFC 9110 section 9.2.2, `repeat.rs`): the `transient` backoff for an idempotent method
//!   (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) or a request with an idempotency key, the `unknown`
//!   backoff otherwise (POST, PATCH or another method without a key) and for every request when
//!   `safe_repeat_transient_backoff` is false. The reason names the rule;
//!   `Decision::unknown_backoff` carries it for `redial explain`.
//! - finally, a next run after the effective deadline -> `Dead(deadline_exceeded)`.
//!
//! Backoff exponents count the job's failures (transient and unknown together); the deferral
//! backoff counts deferrals.
//!
//! Over 600 lines: the decision and its table, whose arms read together; the property tests check
//! it whole.

use crate::classify::{classify, status_phrase, Basis, Category, Classification};
use crate::duration::Human;
use crate::jitter::Jitter;
use crate::outcome::{HandlerOutcome, Outcome};
use crate::policy::Policy;
use crate::repeat::{Method, UnknownBackoff};
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use std::fmt::{self, Write};
use std::time::Duration;

/// What the policy needs to know about the job besides the outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobCounters {
    /// Failed attempts before this one (transient and unknown). Deferrals are not failures.
    pub failures: u32,
    /// Of those, the unknown ones.
    pub unknown_failures: u32,
    /// Deferrals before this one.
    pub deferrals: u32,
    /// When the job was first enqueued; `max_age` counts from here.
    pub enqueued_at: Timestamp,
    /// The job's own deadline, if it has one.
    pub deadline: Option<Timestamp>,
    /// Whether the request carried an idempotency key.
    pub has_idempotency_key: bool,
    /// The request's method: with the key, whether an unknown outcome is safe to repeat.
    pub method: Method,
    /// The delay chosen after the previous attempt; decorrelated jitter grows from it.
    pub last_delay: Option<Duration>,
}

impl JobCounters {
    /// A job enqueued at `enqueued_at` that has not run yet: a POST without an idempotency key,
    /// the cautious assumption.
    pub fn new(enqueued_at: Timestamp) -> Self {
        JobCounters {
            failures: 0,
            unknown_failures: 0,
            deferrals: 0,
            enqueued_at,
            deadline: None,
            has_idempotency_key: false,
            method: Method::Post,
            last_delay: None,
        }
    }

    /// The counters after `decision` is applied: a retry or a dead-end failure counts an attempt
    /// (and an unknown one if it was unknown), a deferral counts a deferral and nothing else.
    pub fn after(&self, decision: &Decision) -> JobCounters {
        let mut next = *self;
        let category = decision.classification.category;
        let failed = matches!(category, Category::Transient | Category::Unknown)
            && matches!(decision.action, Action::Retry { .. } | Action::Dead(_));
        if failed {
            next.failures = next.failures.saturating_add(1);
            if category == Category::Unknown {
                next.unknown_failures = next.unknown_failures.saturating_add(1);
            }
        }
        match decision.action {
            Action::Defer { delay, .. } => {
                next.deferrals = next.deferrals.saturating_add(1);
                next.last_delay = Some(delay);
            }
            Action::Retry { delay, .. } => next.last_delay = Some(delay),
            Action::Complete | Action::Dead(_) => {}
        }
        next
    }
}

/// Why a job is dead: the dead-letter categories.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadCategory {
    /// Retrying cannot help (a 400, a 404, a DNS name that does not exist...).
    Permanent,
    /// Transient failures reached `max_attempts`.
    TransientExhausted,
    /// Unknown failures reached `max_unknown_attempts` (or the last of `max_attempts` was unknown).
    UnknownExhausted,
    /// Deferrals reached `max_deferrals`.
    DeferralExhausted,
    /// The next try would land after the deadline (or the deadline passed while the job was
    /// held by its endpoint's limits).
    DeadlineExceeded,
    /// The endpoint's retry budget was spent and its policy fails such retries instead of
    /// holding them. Set by the engine, never by `decide`.
    BudgetExhausted,
}

impl DeadCategory {
    pub const ALL: [DeadCategory; 6] = [
        DeadCategory::Permanent,
        DeadCategory::TransientExhausted,
        DeadCategory::UnknownExhausted,
        DeadCategory::DeferralExhausted,
        DeadCategory::DeadlineExceeded,
        DeadCategory::BudgetExhausted,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DeadCategory::Permanent => "permanent",
            DeadCategory::TransientExhausted => "transient_exhausted",
            DeadCategory::UnknownExhausted => "unknown_exhausted",
            DeadCategory::DeferralExhausted => "deferral_exhausted",
            DeadCategory::DeadlineExceeded => "deadline_exceeded",
            DeadCategory::BudgetExhausted => "budget_exhausted",
        }
    }
}

impl fmt::Display for DeadCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Complete,
    /// Run again at `at`; counts an attempt.
    Retry {
        at: Timestamp,
        delay: Duration,
    },
    /// Run again at `until`; counts a deferral, not an attempt.
    Defer {
        until: Timestamp,
        delay: Duration,
    },
    /// Stop; the job goes to the dead letters under this category.
    Dead(DeadCategory),
}

impl Action {
    /// `complete`, `retry`, `defer` or `dead`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Action::Complete => "complete",
            Action::Retry { .. } => "retry",
            Action::Defer { .. } => "defer",
            Action::Dead(_) => "dead",
        }
    }

    /// The delay before the next run, for retries and deferrals.
    pub const fn delay(&self) -> Option<Duration> {
        match self {
            Action::Retry { delay, .. } | Action::Defer { delay, .. } => Some(*delay),
            Action::Complete | Action::Dead(_) => None,
        }
    }

    /// When the job runs next, for retries and deferrals.
    pub const fn next_run(&self) -> Option<Timestamp> {
        match self {
            Action::Retry { at, .. } => Some(*at),
            Action::Defer { until, .. } => Some(*until),
            Action::Complete | Action::Dead(_) => None,
        }
    }
}

/// The decision, with what led to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    pub action: Action,
    pub classification: Classification,
    /// One line fit for a dashboard: `429 rate limited; Retry-After 30s; deferral 3 of 20`.
    pub reason: String,
    /// For an unknown outcome whose delay came from a backoff (not a server-given wait): which
    /// backoff and why. The reason says the same in words.
    pub unknown_backoff: Option<UnknownBackoff>,
}

impl Decision {
    /// A deferral that came without a server-given wait (a bare 429), brought forward to
    /// `release` when that is sooner: the endpoint's pace, learned from such refusals, lets the
    /// job go then, so it waits for the endpoint's pace rather than its own deferral backoff.
    pub fn defer_at_pace(&mut self, release: Timestamp, now: Timestamp) {
        if self.classification.server_wait.is_none() {
            self.defer_sooner(
                release,
                now,
                "released sooner, in {}, at the endpoint's pace learned from bare refusals",
            );
        }
    }

    /// A deferral brought forward to `release` when that is sooner, the reason saying why
    /// (`why`, with `{}` for the delay).
    fn defer_sooner(&mut self, release: Timestamp, now: Timestamp, why: &str) {
        if let Action::Defer { until, .. } = self.action {
            if release < until {
                let delay = release.saturating_since(now);
                self.action = Action::Defer {
                    until: release,
                    delay,
                };
                self.reason.push_str("; ");
                self.reason
                    .push_str(&why.replace("{}", &Human(delay).to_string()));
            }
        }
    }

    /// A failed probe of an endpoint that is down (`why`: "down", "quarantined"): the job is
    /// held until `until` (the next probe) instead of retried after its backoff or failed for
    /// good, and (the caller's part) it costs no attempt. A dead end that is not the endpoint's
    /// doing (a deadline, the job's age, a permanent error) stays. Returns whether it was held.
    pub fn hold_until_next_probe(&mut self, until: Timestamp, now: Timestamp, why: &str) -> bool {
        let failed = matches!(
            self.classification.category,
            Category::Transient | Category::Unknown
        );
        let held = failed
            && matches!(
                self.action,
                Action::Retry { .. }
                    | Action::Dead(DeadCategory::TransientExhausted)
                    | Action::Dead(DeadCategory::UnknownExhausted)
                    | Action::Dead(DeadCategory::BudgetExhausted)
            );
        if held {
            let delay = until.saturating_since(now);
            self.action = Action::Retry { at: until, delay };
            let _ = write!(
                self.reason,
                "; held, not failed: the endpoint is {why} (this was its probe), the next probe goes in {}",
                Human(delay)
            );
        }
        held
    }

    /// A deferral whose server-given wait was a `Retry-After` in whole seconds, from an endpoint
    /// found (or being asked) to round its waits up (`endpoint/rounded.rs`): it ends at
    /// `release`, the endpoint's next place at its pace, when that is sooner. The one exception
    /// to "no next run before a server-given instant": that instant was rounded up.
    pub fn released_at_pace(&mut self, release: Timestamp, now: Timestamp) {
        self.defer_sooner(
            release,
            now,
            "its whole seconds taken as rounded up: released sooner, in {}, at the endpoint's pace",
        );
    }

    /// A bare 503 that its endpoint took as a limiter's refusal (it answers others, and its 503s
    /// follow its pace: `endpoint/unavailable.rs`): not a failure, but a deferral to `release`
    /// (the endpoint's next place at its pace, or the retry's own time if sooner), which spends
    /// no attempt, within `max_deferrals` and the deadline as any deferral.
    pub fn refused_at_pace(
        &mut self,
        release: Timestamp,
        counters: &JobCounters,
        policy: &Policy,
        now: Timestamp,
    ) {
        if self.classification.category != Category::Transient {
            return;
        }
        let until = match self.action {
            Action::Retry { at, .. } => release.min(at).max(now),
            Action::Dead(DeadCategory::TransientExhausted | DeadCategory::BudgetExhausted) => {
                release.max(now)
            }
            _ => return,
        };
        let ends = [
            counters.deadline,
            policy
                .max_age
                .map(|age| counters.enqueued_at.saturating_add(age)),
        ];
        if ends.into_iter().flatten().any(|end| until > end) {
            return;
        }
        let deferral = counters.deferrals.saturating_add(1);
        self.classification.category = Category::Defer;
        self.unknown_backoff = None;
        self.reason = "503 Service Unavailable, bare, while the endpoint answers others: a limiter's refusal, not a failure".into();
        if counters.deferrals >= policy.max_deferrals {
            let _ = write!(
                self.reason,
                "; deferral {deferral} over the limit of {}",
                policy.max_deferrals
            );
            self.action = Action::Dead(DeadCategory::DeferralExhausted);
            return;
        }
        let delay = until.saturating_since(now);
        let _ = write!(
            self.reason,
            "; released in {} at the endpoint's pace learned from bare refusals; deferral {deferral} of {}",
            Human(delay),
            policy.max_deferrals
        );
        self.action = Action::Defer { until, delay };
    }

    /// A failed probe of an endpoint that is down (`why`) by a job at its first attempt: the
    /// failure counts, and the retry goes no sooner than `next_probe`. Returns whether it was a
    /// retry.
    pub fn retry_at_next_probe(
        &mut self,
        next_probe: Timestamp,
        now: Timestamp,
        why: &str,
    ) -> bool {
        let Action::Retry { at, .. } = self.action else {
            return false;
        };
        if at < next_probe {
            let delay = next_probe.saturating_since(now);
            self.action = Action::Retry {
                at: next_probe,
                delay,
            };
            let _ = write!(
                self.reason,
                "; the endpoint is {why} (this was its probe): retried at the next probe, in {}",
                Human(delay)
            );
        }
        true
    }

    /// Whether this is a retry that may be sent at once: a transient failure, or an unknown
    /// outcome of a request safe to repeat (an idempotent method or an idempotency key).
    pub fn is_safe_retry(&self) -> bool {
        matches!(self.action, Action::Retry { .. })
            && match self.classification.category {
                Category::Transient => true,
                Category::Unknown => self.unknown_backoff.is_some_and(UnknownBackoff::is_safe),
                _ => false,
            }
    }

    /// A retry sent at once instead of after its backoff, because its endpoint just became
    /// suspect: its answer tells whether the endpoint is flaky or down, which the held first
    /// attempts wait on. Only a retry [`Decision::is_safe_retry`] moves.
    pub fn retry_at_once(&mut self, now: Timestamp) {
        if !self.is_safe_retry() {
            return;
        }
        if let Action::Retry { at, .. } = self.action {
            if now < at {
                self.action = Action::Retry {
                    at: now,
                    delay: Duration::ZERO,
                };
                self.reason.push_str(
                    "; sent at once instead, as a probe: first attempts to this endpoint are held after failures in a row, and this retry tells whether it is flaky or down",
                );
            }
        }
    }

    /// The category to show: the dead-letter category for a dead job, the outcome's otherwise.
    pub fn category_str(&self) -> &'static str {
        match self.action {
            Action::Dead(c) => c.as_str(),
            _ => self.classification.category.as_str(),
        }
    }
}

/// Decides what happens after one attempt. Pure: same inputs, same decision.
pub fn decide(
    outcome: &Outcome,
    job: &JobCounters,
    policy: &Policy,
    now: Timestamp,
    jitter: &mut dyn Jitter,
) -> Decision {
    let classification = classify(outcome, job.has_idempotency_key, policy, now);
    let mut reason = String::with_capacity(96);
    describe_outcome(&mut reason, outcome, &classification);
    let mut unknown_backoff = None;
    let action = act(
        &classification,
        job,
        policy,
        now,
        jitter,
        &mut reason,
        &mut unknown_backoff,
    );
    Decision {
        action,
        classification,
        reason,
        unknown_backoff,
    }
}

/// Over 100 lines on purpose: the decision table: an arm per category and per limit reached, read
/// as a table.
fn act(
    c: &Classification,
    job: &JobCounters,
    policy: &Policy,
    now: Timestamp,
    jitter: &mut dyn Jitter,
    reason: &mut String,
    unknown_backoff: &mut Option<UnknownBackoff>,
) -> Action {
    // Writing to a String cannot fail, so the results of write! below are ignored.
    let (failure_no, unknown_no) = (job.failures + 1, job.unknown_failures + 1);
    let delay = match c.category {
        Category::Success => return Action::Complete,
        Category::Permanent => {
            reason.push_str("; permanent, not retried");
            return Action::Dead(DeadCategory::Permanent);
        }
        Category::Defer => {
            let deferral_no = job.deferrals.saturating_add(1);
            if job.deferrals >= policy.max_deferrals {
                let _ = write!(
                    reason,
                    "; deferral {deferral_no} over the limit of {}",
                    policy.max_deferrals
                );
                return Action::Dead(DeadCategory::DeferralExhausted);
            }
            let delay = wait_or_backoff(
                c,
                &policy.deferral,
                deferral_no,
                job,
                policy,
                jitter,
                reason,
            );
            let _ = write!(
                reason,
                "; deferral {deferral_no} of {}",
                policy.max_deferrals
            );
            delay
        }
        Category::Transient => {
            let _ = write!(reason, "; attempt {failure_no} of {}", policy.max_attempts);
            if failure_no >= policy.max_attempts {
                reason.push_str(", retries exhausted");
                return Action::Dead(DeadCategory::TransientExhausted);
            }
            wait_or_backoff(
                c,
                &policy.transient,
                failure_no,
                job,
                policy,
                jitter,
                reason,
            )
        }
        Category::Unknown => {
            let _ = write!(
                reason,
                "; attempt {failure_no} of {}, unknown outcome {unknown_no} of {}",
                policy.max_attempts, policy.max_unknown_attempts
            );
            if unknown_no >= policy.max_unknown_attempts || failure_no >= policy.max_attempts {
                reason.push_str(", retries exhausted");
                return Action::Dead(DeadCategory::UnknownExhausted);
            }
            // A repeat that is safe need not wait as long; it still counted above.
            let rule = UnknownBackoff::choose(job.method, job.has_idempotency_key, policy);
            if c.server_wait.is_none() {
                let _ = write!(reason, "; {rule}");
                *unknown_backoff = Some(rule);
            }
            wait_or_backoff(
                c,
                rule.backoff(policy),
                failure_no,
                job,
                policy,
                jitter,
                reason,
            )
        }
    };

    let at = now.saturating_add(delay);
    let age_limit = policy.max_age.map(|a| job.enqueued_at.saturating_add(a));
    let deadline = match (job.deadline, age_limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    if let Some(deadline) = deadline {
        if at > deadline {
            let _ = write!(
                reason,
                "; next try at {at} would pass the deadline {deadline}"
            );
            return Action::Dead(DeadCategory::DeadlineExceeded);
        }
    }
    if c.category == Category::Defer {
        Action::Defer { until: at, delay }
    } else {
        Action::Retry { at, delay }
    }
}

/// The delay before the next run: the server-given wait plus a jitter that only pushes later, or,
/// without one, the category's backoff for the `n`-th occurrence.
fn wait_or_backoff(
    c: &Classification,
    backoff: &crate::backoff::Backoff,
    n: u32,
    job: &JobCounters,
    policy: &Policy,
    jitter: &mut dyn Jitter,
    reason: &mut String,
) -> Duration {
    if let Some(w) = c.server_wait {
        let _ = write!(reason, "; {} {}", w.source, Human(w.requested));
        if w.clamped {
            let _ = write!(reason, " clamped to {}", Human(w.delay));
        }
        let extra = policy
            .server_wait_jitter
            .mul_f64(crate::jitter::unit(jitter));
        w.delay.saturating_add(extra)
    } else {
        let delay = backoff.delay(n, job.last_delay, jitter);
        let _ = write!(
            reason,
            "; {} backoff {}",
            backoff.strategy.as_str(),
            Human(delay)
        );
        delay
    }
}

/// The head of the reason: what happened and, when it was not the built-in table, who said so.
fn describe_outcome(out: &mut String, outcome: &Outcome, c: &Classification) {
    match outcome {
        Outcome::Response(r) => {
            let _ = write!(out, "{} {}", r.status, status_phrase(r.status));
        }
        Outcome::Transport(e) => out.push_str(e.phrase()),
        Outcome::Handler(h) => match h {
            HandlerOutcome::Success => out.push_str("handler succeeded"),
            HandlerOutcome::Transient { reason }
            | HandlerOutcome::Permanent { reason }
            | HandlerOutcome::Unknown { reason }
            | HandlerOutcome::DeferUntil { reason, .. } => {
                let _ = write!(out, "handler: {}", one_line(reason));
            }
        },
    }
    match c.basis {
        Basis::Default | Basis::Handler => {}
        Basis::Rule(i) => {
            let _ = write!(out, " (policy rule {}: {})", i + 1, c.category);
        }
        Basis::Hint(header, retry) => {
            let _ = write!(out, " ({header}: {retry})");
        }
    }
}

/// A handler's message cut to one line of bounded length, so a reason stays one line.
fn one_line(s: &str) -> &str {
    let line = s.lines().next().unwrap_or("");
    match line.char_indices().nth(200) {
        Some((i, _)) => &line[..i],
        None => line,
    }
}
