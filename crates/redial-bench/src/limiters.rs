//! The `limiters` workload (issue 54): the limiter matrix on the wall clock. Each cell of
//! [`redial_limiters::matrix::wall_clock_grid`] is run through real engines (their defaults, 32
//! at once) against the test receiver answering with that limiter over loopback, and through
//! `redial simulate`'s model beside it; the table gives drain / ideal, refused / jobs, the
//! forecast taken 2 s after the enqueue, the simulated figures, whether the model agrees, and
//! the goals the cell misses.
//!
//! One node on SQLite, or (`--nodes 3`) three nodes on one PostgreSQL database (a fresh schema a
//! cell; a throwaway server unless `--database-url` or `DATABASE_URL` names one), all in this
//! process, each engine on its own connections. `REDIAL_MATRIX_ONLY` runs the cells whose name
//! contains it (or one of its `|`-separated parts).
//!
//! Owns the runs and the table; the cells and goals are `redial-limiters`'s, the limiter's
//! answers the receiver's, the model `redial_simulate`'s.

use crate::protection::{executor, finished};
use crate::protection_nodes::database;
use crate::workloads::Report;
use anyhow::Result;
use redial_engine::{Clock, Engine, EngineConfig, RunningEngine, SystemClock};
use redial_limiters::matrix::{self, Cell, Outcome};
use redial_policy::endpoint::EndpointConfig;
use redial_policy::{Method, Policy};
use redial_simulate::{Arrival, EndpointModel};
use redial_store::{HttpRequest, JobState, NewJob, Store};
use redial_store_postgres::PgStore;
use redial_test_receiver::{Behaviour, Receiver};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The queue's concurrency: `EngineConfig::default()`'s, which `redial serve` runs.
fn concurrency() -> usize {
    EngineConfig::default()
        .queues
        .get("default")
        .map_or(32, |q| q.concurrency)
}

/// What the engines did with one cell, and the forecast 2 s in.
struct Measured {
    outcome: Outcome,
    /// The forecast's drain from the enqueue (2 s plus what it said was left), and what held
    /// the endpoint in its words.
    forecast: Option<(f64, String)>,
}

/// The stores of a run: one SQLite file, or `nodes` connections to one fresh schema.
async fn stores(nodes: usize, server: Option<&str>) -> Result<(Vec<Arc<dyn Store>>, Holder)> {
    match server {
        None => {
            let dir = tempfile::tempdir()?;
            let store: Arc<dyn Store> = Arc::new(redial_store_sqlite::SqliteStore::open(
                &dir.path().join("redial.db"),
            )?);
            Ok((vec![store], Holder(Some(dir))))
        }
        Some(server) => {
            let schema = crate::workloads::bench_schema(server).await?;
            let url = redial_store_postgres::testing::url_in_schema(server, &schema);
            let mut out: Vec<Arc<dyn Store>> = Vec::new();
            for _ in 0..nodes {
                out.push(Arc::new(PgStore::connect(&url).await?));
            }
            Ok((out, Holder(None)))
        }
    }
}

/// Keeps a SQLite file's directory while its run lasts.
struct Holder(#[allow(dead_code)] Option<tempfile::TempDir>);

fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// One cell through `nodes` engines.
async fn run_engines(cell: &Cell, nodes: usize, server: Option<&str>) -> Result<Measured> {
    let rx = Receiver::start().await;
    let epoch_ms = unix_ms();
    let limiter = cell.limiter;
    rx.behave("/limited", Behaviour::Limiter { limiter, epoch_ms });
    let url = rx.url("/limited");
    let endpoint = format!("http://{}", rx.addr());
    let (stores, _dir) = stores(nodes, server).await?;
    let now = SystemClock.now();
    let jobs: Vec<NewJob> = (0..cell.jobs)
        .map(|k| {
            let job = crate::workloads::job(format!("l{k}"), "default", &url, now);
            NewJob {
                endpoint: endpoint.clone(),
                request: HttpRequest {
                    method: "GET".into(),
                    headers: vec![],
                    body: None,
                    ..job.request
                },
                ..job
            }
        })
        .collect();
    let ideal = Duration::from_millis(matrix::ideal_ms(cell));
    let cap = (ideal * 4).clamp(Duration::from_secs(60), Duration::from_secs(240));
    let start = Instant::now();
    stores[0].job_insert_batch(jobs).await?;
    let mut running: Vec<RunningEngine> = Vec::new();
    let mut engines: Vec<Engine> = Vec::new();
    for (i, store) in stores.iter().enumerate() {
        let config = EngineConfig {
            worker_id: format!("limiters-node{i}"),
            ..EngineConfig::default()
        };
        let e = Engine::new(
            store.clone(),
            config,
            Arc::new(SystemClock),
            Arc::new(executor()?),
        );
        engines.push(e.clone());
        running.push(e.start().await?);
    }
    let mut forecast = None;
    let mut ended = 0;
    while start.elapsed() < cap {
        ended = finished(&stores[0]).await?;
        if ended >= cell.jobs {
            break;
        }
        if forecast.is_none() && start.elapsed() >= Duration::from_secs(2) {
            let at = start.elapsed().as_secs_f64();
            let f = engines[0].endpoint_forecast(&endpoint).await?;
            forecast = Some(match f.drain_seconds {
                Some(left) => (at + left, f.limited_by),
                None => (f64::NAN, f.limited_by),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let drain = start.elapsed();
    for r in running {
        r.shutdown(Duration::from_secs(5)).await;
    }
    let received = rx.received("/limited");
    let refused = received
        .iter()
        .filter(|r| matches!(r.status, 429 | 503 | 403))
        .count() as u64;
    let mut dead = 0;
    for c in stores[0].stats().await?.by_queue {
        if c.state == JobState::Dead {
            dead += c.count;
        }
    }
    Ok(Measured {
        outcome: Outcome {
            drain_ms: u64::try_from(drain.as_millis()).unwrap_or(u64::MAX),
            refused,
            dead,
            left: cell.jobs.saturating_sub(ended),
        },
        forecast,
    })
}

/// The model's figures for the cell: the same limiter, the defaults, 1 ms a request.
fn simulated(cell: &Cell) -> Option<Outcome> {
    let m = EndpointModel {
        name: "api".into(),
        queue: "default".into(),
        jobs: cell.jobs,
        arrival: Arrival::AtOnce,
        method: Method::Get,
        idempotency_key: true,
        deadline: None,
        latency: (Duration::from_millis(1), Duration::from_millis(1)),
        timeout: Duration::from_secs(30),
        limit: Some(cell.limiter),
        outages: vec![],
        failures: vec![],
        history: None,
    };
    let workload = redial_simulate::Workload {
        seed: Some(7),
        endpoints: vec![m],
    };
    let setup = redial_simulate::Setup {
        endpoints: vec![(EndpointConfig::default(), Policy::default())],
        concurrency: BTreeMap::from([("default".to_owned(), concurrency())]),
    };
    let t = redial_simulate::simulate(&workload, &setup, 1).pop()?;
    Some(Outcome {
        drain_ms: u64::try_from(t.drain?.as_millis()).unwrap_or(u64::MAX),
        refused: t.refused,
        dead: t.dead.values().sum(),
        left: t.left,
    })
}

/// The `limiters` workload on `nodes` nodes (1: SQLite; more: PostgreSQL).
pub async fn limiters(nodes: usize, report: &mut Report<'_>) -> Result<()> {
    let (server, _throwaway) = if nodes > 1 {
        let (url, t) = database()?;
        (Some(url), t)
    } else {
        (None, None)
    };
    let only = std::env::var("REDIAL_MATRIX_ONLY").unwrap_or_default();
    let on = if nodes > 1 {
        format!("{nodes} nodes on PostgreSQL")
    } else {
        "one node on SQLite".to_owned()
    };
    println!("\nThe limiter matrix on the wall clock, {on}:\n");
    println!("| cell | drain (x ideal) | refused (of jobs) | forecast at 2 s | simulated: drain, refused | model agrees | goals |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let (mut met, mut agreed, mut all) = (0, 0, 0);
    for cell in matrix::wall_clock_grid()
        .iter()
        .filter(|c| only.split('|').any(|o| c.name.contains(o)))
    {
        let m = run_engines(cell, nodes, server.as_deref()).await?;
        let sim = simulated(cell);
        let ideal = (matrix::ideal_ms(cell) as f64 / 1000.0).max(0.001);
        let drain = m.outcome.drain_ms as f64 / 1000.0;
        let misses = matrix::misses(cell, &m.outcome);
        let agrees = sim.is_some_and(|s| matrix::agree(&s, &m.outcome));
        let key = format!("limiters, {on}, {}", cell.name);
        report(&format!("{key}: drain / ideal"), drain / ideal, "x");
        report(
            &format!("{key}: refused"),
            m.outcome.refused as f64,
            "requests",
        );
        println!(
            "| {} | {drain:.1} s ({:.2}x) | {} ({:.1}%) | {} | {} | {} | {} |",
            cell.name,
            drain / ideal,
            m.outcome.refused,
            100.0 * m.outcome.refused as f64 / cell.jobs as f64,
            m.forecast.map_or("-".to_owned(), |(total, why)| {
                if total.is_nan() {
                    format!("none ({why})")
                } else {
                    format!("{total:.1} s ({why})")
                }
            }),
            sim.map_or("did not drain".to_owned(), |s| format!(
                "{:.1} s, {}",
                s.drain_ms as f64 / 1000.0,
                s.refused
            )),
            if agrees { "yes" } else { "no" },
            if misses.is_empty() {
                "met".to_owned()
            } else {
                misses.join("; ")
            },
        );
        all += 1;
        met += usize::from(misses.is_empty());
        agreed += usize::from(agrees);
    }
    println!("\n{met} of {all} cells meet their goals; the model agrees in {agreed}");
    report(
        &format!("limiters, {on}: cells meeting their goals"),
        met as f64,
        "cells",
    );
    report(
        &format!("limiters, {on}: cells the model agrees in"),
        agreed as f64,
        "cells",
    );
    Ok(())
}
