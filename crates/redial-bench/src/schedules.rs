//! The `schedules` workload: what checking for due occurrences costs with many schedules. Saves
//! `count` schedules (every minute, all falling at the same instants), then times a check when
//! none is due (the common case, every second on every node), and the checks that enqueue one
//! occurrence of each when all fall due at once. The clock is a manual one: the schedules fall
//! due when the workload says, not after a minute of waiting.

use crate::workloads::{store_in, Report};
use anyhow::Result;
use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{
    Engine, EngineConfig, JobTemplate, ManualClock, MissedRule, ScheduleDefinition, ScheduleRule,
};
use redial_policy::Timestamp;
use redial_store::HttpRequest;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub async fn schedules(count: usize, report: &mut Report<'_>) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    let t0 = Timestamp::from_unix_secs(1_795_996_800);
    let clock = Arc::new(ManualClock::new(t0));
    let engine = Engine::new(
        store,
        EngineConfig {
            schedules: false,
            ..EngineConfig::default()
        },
        clock.clone(),
        Arc::new(HttpExecutor::new(HttpConfig::default())?),
    );
    let definition = ScheduleDefinition {
        rule: ScheduleRule::Every {
            interval: Duration::from_secs(60),
            anchor: t0,
        },
        missed: MissedRule::RunOnce,
        job: JobTemplate {
            ordering_key: None,
            callback: None,
            queue: "default".into(),
            endpoint: "bench".into(),
            request: HttpRequest {
                method: "POST".into(),
                url: "http://127.0.0.1:9/".into(),
                headers: vec![],
                body: Some("{}".into()),
                timeout_ms: None,
                credentials: None,
            },
            priority: 0,
            tags: vec![],
            policy: None,
            group: None,
        },
        source: "api".into(),
    };
    let start = Instant::now();
    for i in 0..count {
        engine
            .schedule_save(&format!("s{i:06}"), definition.clone(), false)
            .await?;
    }
    report(
        &format!("schedules: saving {count}, one at a time"),
        count as f64 / start.elapsed().as_secs_f64(),
        "per s",
    );
    let checks = 200;
    let start = Instant::now();
    for _ in 0..checks {
        let c = engine.schedules_check().await?;
        anyhow::ensure!(c.due == 0, "none should be due yet");
    }
    report(
        &format!("schedules: a due check, none due of {count}"),
        start.elapsed().as_secs_f64() * 1e6 / f64::from(checks),
        "us",
    );
    clock.advance(Duration::from_secs(60));
    let start = Instant::now();
    let mut enqueued = 0;
    while enqueued < count {
        let c = engine.schedules_check().await?;
        anyhow::ensure!(c.due > 0, "every schedule should be due");
        enqueued += c.enqueued;
    }
    let took = start.elapsed().as_secs_f64();
    report(
        &format!("schedules: all {count} due at once, checks until enqueued"),
        took * 1e3,
        "ms",
    );
    report(
        "schedules: occurrences enqueued when all are due",
        count as f64 / took,
        "per s",
    );
    Ok(())
}
