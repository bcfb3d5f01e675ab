//! The API's answers about jobs, attempts and events, built as `redial_api`'s types (generated
//! from the OpenAPI document, so a field the document adds or changes fails to compile here
//! until it is filled). Secrets in request headers and URLs are redacted here.

use redial_engine::redact;
use redial_store::{Attempt, Callback, CallbackEvent, HttpRequest, Job, JobChange};

/// A count as the document types it.
fn count(n: impl Into<i64>) -> i64 {
    n.into()
}

/// Header pairs as the document types them (`[name, value]` arrays).
fn pairs(headers: Vec<(String, String)>) -> Vec<Vec<String>> {
    headers.into_iter().map(|(n, v)| vec![n, v]).collect()
}

/// Milliseconds as the document types them.
fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A request as the API shows it: secrets in its URL and headers redacted, its body's size only.
pub fn request(r: &HttpRequest) -> redial_api::RequestView {
    redial_api::RequestView {
        method: r.method.clone(),
        url: redact::url(&r.url),
        headers: pairs(redact::headers(&r.headers, usize::MAX)),
        body_bytes: r
            .body
            .as_ref()
            .map_or(0, |b| i64::try_from(b.len()).unwrap_or(i64::MAX)),
        timeout_ms: r.timeout_ms.map(millis),
        credentials: r.credentials.clone(),
    }
}

/// One attempt of a job's log, as `GET /v1/jobs/{id}` shows it.
pub fn attempt(a: &Attempt) -> redial_api::Attempt {
    redial_api::Attempt {
        number: count(a.number),
        started_at: a.started_at,
        duration_ms: millis(a.duration_ms),
        status: a.status.map(i64::from),
        error: a.error.clone(),
        error_detail: a.error_detail.clone(),
        category: a.category.as_str().to_owned(),
        decision: a.decision.as_str().to_owned(),
        dead_category: a
            .dead_category
            .map(|c| redial_api::DeadCategory::parse(c.as_str())),
        delay_ms: a.delay_ms.map(millis),
        server_wait_ms: a.server_wait_ms.map(millis),
        server_wait_source: a.server_wait_source.clone(),
        reason: a.reason.clone(),
        held: a.held.clone(),
        response_headers: pairs(a.response_headers.clone()),
        response_body: a.response_body.clone(),
        response_body_base64: a.response_body_base64.then_some(true),
        response_body_truncated: a.response_body_truncated.then_some(true),
        worker: a.worker.clone(),
    }
}

/// A job's changes as its view shows them (secrets redacted), oldest first.
pub fn changes(list: &[JobChange]) -> Vec<redial_api::JobChange> {
    list.iter()
        .map(|c| redial_api::JobChange {
            at: c.at,
            replay: count(c.replay),
            changed: c.changed.clone(),
            before: crate::replay::before_side(&c.before),
        })
        .collect()
}

/// A job as every answer about it shows it; the attempt log, changes and `deduplicated` only
/// where the route adds them.
pub fn job(j: &Job) -> redial_api::Job {
    redial_api::Job {
        id: j.id.0.clone(),
        queue: j.queue.clone(),
        endpoint: j.endpoint.clone(),
        state: redial_api::JobState::parse(j.state.as_str()),
        category: j
            .category
            .map(|c| redial_api::DeadCategory::parse(c.as_str())),
        attempts: count(j.attempts),
        unknown_attempts: count(j.unknown_attempts),
        deferrals: count(j.deferrals),
        stalls: count(j.stalls),
        replays: count(j.replays),
        runs: count(j.runs),
        priority: count(j.priority),
        run_at: j.run_at,
        deadline: j.deadline,
        created_at: j.created_at,
        updated_at: j.updated_at,
        finished_at: j.finished_at,
        idempotency_key: j.idempotency_key.clone(),
        tags: j.tags.clone(),
        group: j.group.clone(),
        ordering_key: j.ordering.as_ref().map(|o| o.key.clone()),
        last_reason: j.last_reason.clone(),
        cancel_requested: j.cancel_requested,
        request: request(&j.request),
        callback: j.callback.as_ref().map(callback),
        callback_delivery: j.callback.as_ref().and_then(|c| {
            let event = CallbackEvent::of(j.state).filter(|e| c.on.contains(e))?;
            Some(Callback::delivery_id(j, event, j.replays).0)
        }),
        callback_for: Callback::delivered_for(&j.id).map(|(id, _)| id.0),
        deduplicated: None,
        attempt_log: None,
        changes: None,
        original_request: None,
    }
}

/// Where a job tells when it finishes, secrets in its URL and headers redacted.
fn callback(c: &Callback) -> redial_api::CallbackView {
    redial_api::CallbackView {
        url: redact::url(&c.url),
        on: c
            .on
            .iter()
            .map(|e| redial_api::CallbackOn::parse(e.as_str()))
            .collect(),
        headers: pairs(redact::headers(&c.headers, usize::MAX)),
        queue: c.queue.clone(),
    }
}

/// An event of the event log, as `GET /v1/events` and its stream show it.
pub fn event(e: &redial_store::Event) -> redial_api::Event {
    redial_api::Event {
        id: e.cursor.to_string(),
        r#type: redial_api::EventType::parse(e.kind.as_str()),
        at: e.at,
        queue: e.queue.clone(),
        job_id: e.job_id.clone(),
        endpoint: e.endpoint.clone(),
        category: e.category.clone(),
        reason: e.reason.clone(),
        until: e.until,
    }
}

/// A bulk operation as `GET /v1/operations/{id}` shows it.
pub fn operation(o: &redial_engine::OperationView) -> redial_api::Operation {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    redial_api::Operation {
        id: o.id.clone(),
        kind: redial_api::OperationKind::parse(o.kind.as_str()),
        state: redial_api::OperationState::parse(o.state.as_str()),
        total: count(o.total),
        done: count(o.done),
        chunks: count(o.chunks),
        started_at: o.started_at,
        finished_at: o.finished_at,
        error: o.error.clone(),
    }
}

/// The job counts by queue, state and dead-letter category, and by endpoint and state.
pub fn stats(s: &redial_store::Stats) -> redial_api::Stats {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    redial_api::Stats {
        queues: s
            .by_queue
            .iter()
            .map(|q| redial_api::StatsQueues {
                queue: q.queue.clone(),
                state: redial_api::JobState::parse(q.state.as_str()),
                category: q
                    .category
                    .map(|c| redial_api::DeadCategory::parse(c.as_str())),
                count: count(q.count),
            })
            .collect(),
        endpoints: s
            .by_endpoint
            .iter()
            .map(|e| redial_api::StatsEndpoints {
                endpoint: e.endpoint.clone(),
                state: redial_api::JobState::parse(e.state.as_str()),
                count: count(e.count),
            })
            .collect(),
    }
}

/// An alert rule's state on this node.
pub fn alert(a: &redial_engine::alerts::AlertStatus) -> redial_api::Alert {
    redial_api::Alert {
        name: a.name.clone(),
        rule: a.rule.clone(),
        firing: a.firing,
        since: a.since,
        value: Some(a.value),
        threshold: Some(a.threshold),
        evaluated_at: a.evaluated_at,
        summary: a.summary.clone(),
    }
}

/// One minute of this node's last hour, for the dashboard's charts.
pub fn minute(p: &redial_engine::series::Point) -> redial_api::SeriesMinute {
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let attempts = |category: &str| count(p.attempts.get(category).copied().unwrap_or(0));
    redial_api::SeriesMinute {
        at: p.at,
        attempts: redial_api::SeriesMinuteAttempts {
            success: attempts("success"),
            defer: attempts("defer"),
            transient: attempts("transient"),
            permanent: attempts("permanent"),
            unknown: attempts("unknown"),
        },
        completed: count(p.completed),
        dead: count(p.dead),
        p50_ms: p.p50_ms.map(count),
        p99_ms: p.p99_ms.map(count),
    }
}

/// What the forecast says of an endpoint's waiting jobs.
pub fn forecast(f: &redial_policy::endpoint::Forecast) -> redial_api::Forecast {
    let wide = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    redial_api::Forecast {
        waiting: wide(f.waiting),
        starts_at: f.starts_at,
        jobs_per_second: f.jobs_per_second,
        limited_by: f.limited_by.clone(),
        drains_at: f.drains_at,
        drain_seconds: f.drain_seconds,
        with_deadline: wide(f.with_deadline),
        deadline_at_risk: wide(f.deadline_at_risk),
        first_at_risk: f.first_at_risk.map(|r| redial_api::ForecastFirstAtRisk {
            deadline: r.deadline,
            forecast_start: r.forecast_start,
        }),
    }
}

/// A pause by hand, as endpoints and queues show it.
pub fn hand_pause(p: &redial_policy::endpoint::HandPause) -> redial_api::HandPause {
    redial_api::HandPause {
        since: p.since,
        until: p.until,
        reason: p.reason.clone(),
    }
}

/// What one group of a queue may use.
fn group_limits(l: &redial_engine::GroupLimits) -> redial_api::GroupLimits {
    redial_api::GroupLimits {
        concurrency: l.concurrency.map(i64::from),
        rate: l.rate.as_ref().map(ToString::to_string),
        weight: i64::from(l.weight),
    }
}

/// A configured queue: its concurrency, pause, groups' limits and what a dead job does to its
/// ordering key.
pub fn queue(q: &redial_engine::QueueView) -> redial_api::Queue {
    redial_api::Queue {
        name: q.name.clone(),
        concurrency: i64::try_from(q.concurrency).unwrap_or(i64::MAX),
        paused_by_hand: q.paused_by_hand.as_ref().map(hand_pause),
        groups: redial_api::QueueGroupsInline {
            each: group_limits(&q.groups.each),
            named: serde_json::Value::Object(
                q.groups
                    .named
                    .iter()
                    .map(|(name, l)| {
                        (
                            name.clone(),
                            serde_json::to_value(group_limits(l)).unwrap_or_default(),
                        )
                    })
                    .collect(),
            ),
        },
        ordering_on_dead: redial_api::OrderingOnDead::parse(q.ordering_on_dead.as_str()),
    }
}

/// A queue's groups with work, most waiting first.
pub fn queue_groups(g: &redial_engine::QueueGroups) -> redial_api::QueueGroups {
    let wide = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    redial_api::QueueGroups {
        queue: g.queue.clone(),
        total: wide(g.total),
        groups: g
            .groups
            .iter()
            .map(|v| redial_api::QueueGroupsGroups {
                group: v.group.clone(),
                waiting: wide(v.waiting),
                running: wide(v.running),
                in_flight_here: i64::from(v.in_flight_here),
                limits: group_limits(&v.limits),
                forecast: forecast(&v.forecast),
            })
            .collect(),
    }
}

/// A schedule as the API shows it: its rule, what it does about missed occurrences, and the job
/// each occurrence enqueues, secrets in the request's URL and headers (and its callback's)
/// redacted as a job's view redacts them.
pub fn schedule(s: &redial_engine::ScheduleView) -> redial_api::Schedule {
    use redial_engine::{MissedRule, ScheduleRule};
    let d = &s.definition;
    let job = &d.job;
    let (policy, max) = match d.missed {
        MissedRule::Skip => ("skip", None),
        MissedRule::RunOnce => ("run_once", None),
        MissedRule::RunAll { max } => ("run_all", Some(i64::from(max))),
    };
    redial_api::Schedule {
        id: s.id.clone(),
        rule: match &d.rule {
            ScheduleRule::Cron { expr, timezone } => redial_api::ScheduleRule {
                cron: Some(redial_api::ScheduleRuleCron {
                    expr: expr.clone(),
                    timezone: timezone.clone(),
                }),
                every: None,
            },
            ScheduleRule::Every { interval, anchor } => redial_api::ScheduleRule {
                cron: None,
                every: Some(redial_api::ScheduleRuleEvery {
                    interval: redial_policy::Human(*interval).to_string(),
                    anchor: *anchor,
                }),
            },
        },
        missed: redial_api::ScheduleMissed {
            policy: redial_api::Missed::parse(policy),
            max,
        },
        job: redial_api::ScheduleJob {
            queue: job.queue.clone(),
            endpoint: job.endpoint.clone(),
            request: redial_api::ScheduleJobRequest {
                method: job.request.method.clone(),
                url: redact::url(&job.request.url),
                headers: pairs(redact::headers(&job.request.headers, usize::MAX)),
                body: job.request.body.clone(),
                timeout_ms: job.request.timeout_ms.map(millis),
                credentials: job.request.credentials.clone(),
            },
            priority: i64::from(job.priority),
            tags: job.tags.clone(),
            policy: job
                .policy
                .as_ref()
                .and_then(|p| serde_json::to_value(p).ok()),
            group: job.group.clone(),
            ordering_key: job.ordering_key.clone(),
            callback: job.callback.as_ref().map(callback),
        },
        source: redial_api::ScheduleSource::parse(&d.source),
        paused: s.paused,
        next_at: s.next_at,
        last_occurrence: s.last_occurrence,
        last_fired_at: s.last_fired_at,
        created_at: s.created_at,
        updated_at: s.updated_at,
    }
}

#[cfg(test)]
mod tests {
    /// Every value the domain has is one the API's types know: none is written as `other`.
    #[test]
    fn every_domain_value_is_one_the_api_names() {
        use redial_engine::{BulkKind, OperationState};
        use redial_store::{CallbackEvent, EventKind, JobState, OnDead};
        for s in JobState::ALL {
            assert_ne!(
                redial_api::JobState::parse(s.as_str()),
                redial_api::JobState::Other
            );
        }
        for c in redial_policy::DeadCategory::ALL {
            let api = redial_api::DeadCategory::parse(c.as_str());
            assert_ne!(api, redial_api::DeadCategory::Other, "{c}");
        }
        for e in CallbackEvent::ALL {
            assert_ne!(
                redial_api::CallbackOn::parse(e.as_str()),
                redial_api::CallbackOn::Other
            );
        }
        for k in EventKind::ALL {
            assert_ne!(
                redial_api::EventType::parse(k.as_str()),
                redial_api::EventType::Other
            );
        }
        for k in [BulkKind::Replay, BulkKind::Dismiss] {
            let api = redial_api::OperationKind::parse(k.as_str());
            assert_ne!(api, redial_api::OperationKind::Other);
        }
        for s in [
            OperationState::Running,
            OperationState::Done,
            OperationState::Cancelled,
            OperationState::Failed,
        ] {
            let api = redial_api::OperationState::parse(s.as_str());
            assert_ne!(api, redial_api::OperationState::Other);
        }
        for o in [OnDead::Block, OnDead::Skip] {
            let api = redial_api::OrderingOnDead::parse(o.as_str());
            assert_ne!(api, redial_api::OrderingOnDead::Other);
        }
        let open = redial_policy::endpoint::BreakerState::Open {
            until: redial_policy::Timestamp::from_unix_secs(1),
        };
        for b in [redial_policy::endpoint::BreakerState::Closed, open] {
            let api = redial_api::BreakerState::parse(b.name());
            assert_ne!(api, redial_api::BreakerState::Other);
        }
        for kind in [
            "bearer",
            "basic",
            "header",
            "oauth2_client_credentials",
            "mtls",
        ] {
            let api = redial_api::CredentialsKind::parse(kind);
            assert_ne!(api, redial_api::CredentialsKind::Other);
        }
        // And what this build does not know reads as `other`, not as an error.
        let job: redial_api::JobState = serde_json::from_str("\"parked\"").expect("read");
        assert_eq!(job, redial_api::JobState::Other);
    }
}
