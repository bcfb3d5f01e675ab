//! Embedding Redial's engine in your own program, with your own job handler.
//!
//! Run: `cargo run -p redial-engine --example embed`
//!
//! The handler below "sends an email" through a pretend provider. It reports what happened as a
//! typed outcome; the engine applies the policy (backoff, ceilings, deferrals, dead letters) and
//! records every attempt in an embedded SQLite file, exactly as for HTTP jobs.

use async_trait::async_trait;
use redial_engine::{AttemptOutput, Engine, EngineConfig, Handler, QueueConfig, SystemClock};
use redial_policy::{Backoff, HandlerOutcome, Outcome, Policy, Strategy, Timestamp};
use redial_store::{HttpRequest, Job, JobId, JobState, NewJob, Store};
use redial_store_sqlite::SqliteStore;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A pretend email provider: the first call for each message fails transiently, a quota makes
/// one message wait, and an invalid address is refused for good.
#[derive(Debug, Default)]
struct Mailer {
    calls: AtomicU32,
}

#[async_trait]
impl Handler for Mailer {
    async fn run(&self, job: &Job) -> AttemptOutput {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        // Jobs carry their payload in the request fields; a custom handler may use them freely.
        let to = job.request.url.trim_start_matches("mailto:");
        let outcome = if !to.contains('@') {
            HandlerOutcome::Permanent {
                reason: format!("{to:?} is not an email address"),
            }
        } else if job.runs == 0 && call.is_multiple_of(2) {
            HandlerOutcome::Transient {
                reason: "provider timed out".into(),
            }
        } else if to.starts_with("vip") && job.deferrals == 0 {
            let until = Timestamp::from_unix_millis(now_ms() + 300);
            HandlerOutcome::DeferUntil {
                until,
                reason: "hourly quota spent".into(),
            }
        } else {
            HandlerOutcome::Success
        };
        AttemptOutput::from_outcome(Outcome::Handler(outcome))
    }
}

fn now_ms() -> i64 {
    use redial_engine::Clock;
    SystemClock.now().as_unix_millis()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("mail.db"))?);

    // A quick policy for the demo: retries after ~100 ms instead of seconds.
    let quick = Backoff {
        strategy: Strategy::FullJitter,
        base: Duration::from_millis(100),
        factor: 2.0,
        cap: Duration::from_secs(1),
    };
    let policy = Policy {
        transient: quick,
        unknown: quick,
        ..Policy::default()
    };
    let mut config = EngineConfig::default();
    config
        .queues
        .insert("emails".into(), QueueConfig::new(4, policy));

    let http = redial_engine::http::HttpExecutor::new(Default::default())?;
    let engine = Engine::new(store.clone(), config, Arc::new(SystemClock), Arc::new(http))
        .with_handler("emails", Arc::new(Mailer::default()));
    let running = engine.start().await?;

    let now = Timestamp::from_unix_millis(now_ms());
    for (id, to) in [
        ("welcome-1", "ada@example.com"),
        ("vip-2", "vip@example.com"),
        ("typo-3", "bob-at-example"),
    ] {
        // Stored durably, and the queue woken.
        engine
            .enqueue(NewJob {
                ordering: None,
                callback: None,
                id: JobId::from(id),
                queue: "emails".into(),
                endpoint: "mailer".into(),
                request: HttpRequest {
                    method: "SEND".into(),
                    url: format!("mailto:{to}"),
                    headers: vec![],
                    body: Some("Hello!".into()),
                    timeout_ms: Some(5_000),
                    credentials: None,
                },
                idempotency_key: Some(format!("email-{id}")),
                priority: 0,
                run_at: now,
                deadline: None,
                tags: vec!["demo".into()],
                policy: None,
                created_at: now,
                group: None,
            })
            .await?;
    }

    // Wait for every job to finish, then print what happened and why.
    for id in ["welcome-1", "vip-2", "typo-3"] {
        loop {
            let (job, attempts) = store
                .job_get(&JobId::from(id))
                .await?
                .ok_or("job vanished")?;
            if job.state.is_finished() {
                let category = job.category.map_or(String::new(), |c| format!(" ({c})"));
                println!("{id}: {}{category}", job.state);
                for a in attempts {
                    println!("  attempt {}: {}", a.number, a.reason);
                }
                assert!(matches!(job.state, JobState::Completed | JobState::Dead));
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    running.shutdown(Duration::from_secs(5)).await;
    Ok(())
}
