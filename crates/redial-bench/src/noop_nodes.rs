//! The `noop-nodes` workload: no-op jobs drained by one, two, then three Redial nodes sharing one
//! PostgreSQL database, each run in a fresh schema. Reports the total rate, what each node did,
//! and the contention between them: jobs a node's lease chose and another node took first
//! (`FOR UPDATE SKIP LOCKED` passed them over), and jobs per second of the PostgreSQL server's
//! CPU when the server runs on this machine (what a bigger server would scale by).
//!
//! Each node is an engine with its own `PgStore` (16 connections, as the one-node `noop`
//! workload's) in its own tokio runtime with one worker thread, as in `protection-nodes`. On one
//! machine the nodes and the PostgreSQL server share the cores: more nodes add no cores.

use crate::protection_nodes::database;
use crate::workloads::{insert_backlog, Report};
use anyhow::Result;
use async_trait::async_trait;
use redial_engine::{
    AttemptOutput, Engine, EngineConfig, Handler, QueueConfig, RunningEngine, SystemClock,
};
use redial_policy::{HandlerOutcome, Outcome, Policy};
use redial_store::Store;
use redial_store_postgres::PgStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
struct Count(AtomicU64);

#[async_trait]
impl Handler for Count {
    async fn run(&self, _: &redial_store::Job) -> AttemptOutput {
        self.0.fetch_add(1, Ordering::Relaxed);
        AttemptOutput::from_outcome(Outcome::Handler(HandlerOutcome::Success))
    }
}

struct Node {
    runtime: Option<tokio::runtime::Runtime>,
    running: Option<RunningEngine>,
    store: Arc<PgStore>,
    done: Arc<Count>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(r) = self.runtime.take() {
            r.shutdown_background();
        }
    }
}

async fn start(
    worker: String,
    config: redial_store_postgres::DbConfig,
    concurrency: usize,
) -> Result<Node> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(worker.clone())
        .enable_all()
        .build()?;
    let done = Arc::new(Count::default());
    let handler = done.clone();
    let started = runtime.spawn(async move {
        let store = Arc::new(PgStore::connect_with(config, 16).await?);
        let mut engine_config = EngineConfig {
            worker_id: worker,
            poll_interval: Duration::from_millis(200),
            ..EngineConfig::default()
        };
        engine_config.queues.clear();
        engine_config.queues.insert(
            "default".into(),
            QueueConfig::new(concurrency, Policy::default()),
        );
        let dyn_store: Arc<dyn Store> = store.clone();
        let engine = Engine::new(dyn_store, engine_config, Arc::new(SystemClock), handler);
        anyhow::Ok((store, engine.start().await?))
    });
    let (store, running) = started.await??;
    Ok(Node {
        runtime: Some(runtime),
        running: Some(running),
        store,
        done,
    })
}

pub async fn noop_nodes(jobs: usize, concurrency: usize, report: &mut Report<'_>) -> Result<()> {
    let (url, _server) = database()?;
    for n in 1..=3usize {
        let config = crate::workloads::bench_config(&url).await?;
        let loader: Arc<dyn Store> = Arc::new(PgStore::connect_with(config.clone(), 2).await?);
        insert_backlog(&loader, jobs, "default", "http://127.0.0.1:9/", "n").await?;
        let began = Instant::now();
        let server_before = crate::workloads::postgres_cpu_ns();
        let mut nodes = Vec::new();
        for i in 0..n {
            nodes.push(start(format!("node-{i}"), config.clone(), concurrency).await?);
        }
        let total = |nodes: &[Node]| -> u64 {
            nodes.iter().map(|x| x.done.0.load(Ordering::Relaxed)).sum()
        };
        while total(&nodes) < jobs as u64 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            anyhow::ensure!(
                began.elapsed() < Duration::from_secs(600),
                "{n} nodes: {} of {jobs} jobs ran in 600 s",
                total(&nodes)
            );
        }
        let secs = began.elapsed().as_secs_f64();
        report(
            &format!("no-op, {n} node(s) on PostgreSQL: total"),
            jobs as f64 / secs,
            "jobs/s",
        );
        // What predicts a bigger server: jobs per second of the server's CPU (all its
        // processes on this machine), whatever the cores the nodes took from it here.
        if let (Some(a), Some(b)) = (server_before, crate::workloads::postgres_cpu_ns()) {
            let cpu_secs = b.saturating_sub(a) as f64 / 1e9;
            if cpu_secs > 0.0 {
                report(
                    &format!("no-op, {n} node(s): jobs per PostgreSQL CPU-second"),
                    jobs as f64 / cpu_secs,
                    "jobs",
                );
            }
        }
        let mut misses = 0;
        for (i, node) in nodes.iter().enumerate() {
            report(
                &format!("no-op, {n} node(s): node {i} ran"),
                node.done.0.load(Ordering::Relaxed) as f64,
                "jobs",
            );
            misses += node.store.lease_misses();
        }
        report(
            &format!("no-op, {n} node(s): chosen, then taken by another node"),
            misses as f64,
            "jobs",
        );
        for mut node in nodes {
            if let (Some(running), Some(rt)) = (node.running.take(), &node.runtime) {
                let _ = rt.spawn(running.shutdown(Duration::from_secs(5))).await;
            }
        }
    }
    Ok(())
}
