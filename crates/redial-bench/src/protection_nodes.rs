//! The `protection-nodes` workload (issue 12's last target): a flaky endpoint drained by Redial on
//! PostgreSQL, once by one node (A), then by two nodes of which one is killed mid-run (B, C, D:
//! see [`KILLS`]). Target: every job completes, and a two-node run drains within twice the
//! one-node run.
//!
//! Each node is an engine with its own connections, in its own tokio runtime (one worker thread).
//! Everything a node opens (its connections and their driver tasks, its HTTP client's) is opened
//! inside that runtime, so that `Runtime::shutdown_background` ends all of it at once, as a
//! process kill would: no graceful stop, no lease given back, its session's advisory lock freed by
//! the server. What the killed node held stays `running` until its leases expire and the survivor
//! rescues them.
//!
//! Owns the nodes, the run's PostgreSQL (a throwaway server unless one is given) and the figures.
//! Does not own the shape ([`crate::shapes::Shape::FlakyLate`]) or the policy, which is the
//! `protection` workload's ([`crate::protection::policy`]).
//!
//! Over 600 lines: a benchmark, not product code: its nodes, kills, runs and report.

use crate::protection::{executor, policy, CONCURRENCY};
use crate::shapes::{self, Shape, Shapes};
use crate::workloads::{Report, DATABASE_URL};
use anyhow::{Context, Result};
use redial_engine::{Clock, Engine, EngineConfig, QueueConfig, RunningEngine, SystemClock};
use redial_policy::Timestamp;
use redial_store::{HttpRequest, Job, JobFilter, JobPages, JobState, NewJob, Stats, Store};
use redial_store_postgres::PgStore;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const JOBS: usize = 2_000;

/// The shape: 20% of the jobs answer 500 once, then 200; 8% answer 200 after 1.5 s; the rest 200.
const SHAPE: Shape = Shape::FlakyLate {
    late: Duration::from_millis(1_500),
};

/// The nodes' lease, instead of the default 30 s, so that the killed node's jobs come back within
/// a short run. The heartbeat is a third of it, as in the defaults (10 s of 30 s). Run D keeps
/// the default, to measure what it costs.
const LEASE: Duration = Duration::from_secs(5);
const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// The two-node runs: node 1 is killed once this many jobs are completed or dead. A quarter is
/// issue 12's setup; but the fast jobs finish first, so a quarter is reached in a fraction of a
/// second and the lease expires while the survivor still has work of its own. Three quarters
/// puts the killed node's leases near the end, where their expiry adds to the drain.
const KILLS: [(&str, u64, Duration); 3] = [
    ("B", JOBS as u64 / 4, LEASE),
    ("C", JOBS as u64 * 3 / 4, LEASE),
    ("D", JOBS as u64 / 4, DEFAULT_LEASE),
];

/// A run that has not drained by then reports its counts as they are.
const CAP: Duration = Duration::from_secs(120);

/// How often the store's counts are read to tell when the run has drained.
const POLL: Duration = Duration::from_millis(50);

/// No job finishing for this long, with some unfinished: the evidence is printed once.
const STUCK: Duration = Duration::from_secs(15);

/// A throwaway PostgreSQL server (`scripts/throwaway-postgres`), stopped and removed on drop.
pub(crate) struct Throwaway {
    script: PathBuf,
    dir: String,
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        let _ = std::process::Command::new(&self.script)
            .arg("stop")
            .arg(&self.dir)
            .status();
    }
}

/// The server to run on: `--database-url`, else `DATABASE_URL`, else a throwaway server started
/// for this workload (fsync off, as for the tests: both runs pay the same).
pub(crate) fn database() -> Result<(String, Option<Throwaway>)> {
    if let Some(url) = DATABASE_URL.get() {
        return Ok((url.clone(), None));
    }
    if let Some(url) = std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        return Ok((url, None));
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/throwaway-postgres");
    // Blocks the thread of `block_on`, which runs nothing else meanwhile.
    let out = std::process::Command::new(&script)
        .arg("start")
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "starting a throwaway PostgreSQL failed (set DATABASE_URL to use a server of your own): {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let var = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("export {name}=")))
            .map(str::to_owned)
    };
    let dir = var("REDIAL_TEST_PGDATA")
        .context("scripts/throwaway-postgres printed no REDIAL_TEST_PGDATA")?;
    let server = Throwaway { script, dir };
    let url = var("DATABASE_URL").context("scripts/throwaway-postgres printed no DATABASE_URL")?;
    Ok((url, Some(server)))
}

/// One Redial node: an engine on its own connections, in its own runtime.
struct Node {
    worker_id: String,
    /// `None` once the node is gone. Dropping a runtime blocks, which an async context forbids;
    /// [`Drop`] ends it with `shutdown_background` instead, on every path.
    runtime: Option<tokio::runtime::Runtime>,
    running: Option<RunningEngine>,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Node {
    async fn start(worker_id: String, url: String, lease: Duration) -> Result<Node> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name(worker_id.clone())
            .enable_all()
            .build()?;
        let config = engine_config(worker_id.clone(), lease);
        // Connected and started inside the node's runtime: see the module's header.
        let started = runtime.spawn(async move {
            let store: Arc<dyn Store> = Arc::new(PgStore::connect(&url).await?);
            let engine = Engine::new(store, config, Arc::new(SystemClock), Arc::new(executor()?));
            anyhow::Ok(engine.start().await?)
        });
        let mut node = Node {
            worker_id,
            runtime: Some(runtime),
            running: None,
        };
        node.running = Some(started.await??);
        Ok(node)
    }

    fn engine(&self) -> &Engine {
        self.running
            .as_ref()
            .expect("a node's engine runs from its start to its stop")
            .engine()
    }

    /// Drops every task of the node at once, without waiting: no attempt is recorded, no lease
    /// given back.
    fn kill(self) {
        drop(self);
    }

    /// A graceful stop, then the runtime's end.
    async fn stop(mut self) {
        if let (Some(running), Some(runtime)) = (self.running.take(), &self.runtime) {
            let _ = runtime
                .spawn(running.shutdown(Duration::from_secs(5)))
                .await;
        }
    }
}

fn engine_config(worker_id: String, lease: Duration) -> EngineConfig {
    let mut config = EngineConfig {
        worker_id,
        lease,
        heartbeat: lease / 3,
        // As in the `protection` workload.
        poll_interval: Duration::from_millis(100),
        ..EngineConfig::default()
    };
    config.queues.clear();
    config
        .queues
        .insert("default".into(), QueueConfig::new(CONCURRENCY, policy()));
    config
}

fn new_job(k: usize, url: String, now: Timestamp) -> NewJob {
    let job = crate::workloads::job(format!("n{k}"), "default", &url, now);
    NewJob {
        ordering: None,
        idempotency_key: None,
        endpoint: "shape".into(),
        request: HttpRequest {
            method: "GET".into(),
            headers: vec![],
            body: None,
            ..job.request
        },
        ..job
    }
}

/// The shape routes on a loopback port of this process.
struct Receiver {
    base: String,
    shapes: Arc<Shapes>,
}

impl Receiver {
    async fn start() -> Result<Receiver> {
        let shapes = Arc::new(Shapes::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let app = shapes::routes(shapes.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Receiver { base, shapes })
    }
}

/// What happened around the kill, in seconds since the first enqueue.
#[derive(Debug)]
struct Kill {
    at: Duration,
    finished: u64,
    /// Jobs leased by the killed node at the kill (running, its name on the lease).
    held: usize,
    /// How long after the kill the last of those leases expired.
    last_expiry: Option<Duration>,
    /// When no job was leased by the killed node any more (all rescued).
    rescued: Option<Duration>,
}

#[derive(Debug, Default)]
struct Figures {
    drained: Option<Duration>,
    /// Jobs by state; dead ones by category (`dead unknown_exhausted`).
    jobs: BTreeMap<String, u64>,
    /// Requests that reached the receiver, by answer.
    answers: BTreeMap<&'static str, u64>,
    /// Attempts the store recorded (the sum of the jobs' `runs`).
    recorded: u64,
    /// Jobs whose lease expired at least once.
    stalled: u64,
    kill: Option<Kill>,
}

impl Figures {
    fn requests(&self) -> u64 {
        self.answers.values().sum()
    }

    fn outcome(&self) -> String {
        self.jobs
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn answers_text(&self) -> String {
        self.answers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn by_state(stats: &Stats) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for c in &stats.by_queue {
        let key = match (c.state, c.category) {
            (JobState::Dead, Some(category)) => format!("dead {}", category.as_str()),
            (state, _) => state.as_str().to_owned(),
        };
        *out.entry(key).or_default() += c.count;
    }
    out
}

fn finished(stats: &Stats) -> u64 {
    stats
        .by_queue
        .iter()
        .filter(|c| c.state.is_finished())
        .map(|c| c.count)
        .sum()
}

/// Every job the filter covers, page by page.
async fn list(store: &Arc<dyn Store>, filter: JobFilter) -> Result<Vec<Job>> {
    Ok(JobPages::new(&**store, filter, 500).all().await?)
}

async fn running_jobs(store: &Arc<dyn Store>) -> Result<Vec<Job>> {
    list(
        store,
        JobFilter {
            state: Some(JobState::Running),
            ..JobFilter::default()
        },
    )
    .await
}

/// Signed milliseconds from `now` to `t`.
fn ms_from(now: Timestamp, t: Timestamp) -> i64 {
    t.as_unix_millis() - now.as_unix_millis()
}

/// What a reader needs to tell a stuck run from a slow one: the unfinished jobs (a sample per
/// state) and each live node's attempts in flight and endpoint view (`GET /v1/endpoints`).
async fn evidence(store: &Arc<dyn Store>, live: &[Node], elapsed: Duration) -> Result<()> {
    let now = SystemClock.now();
    eprintln!(
        "protection-nodes: evidence at {:.1} s",
        elapsed.as_secs_f64()
    );
    for state in [
        JobState::Running,
        JobState::Ready,
        JobState::Scheduled,
        JobState::Deferred,
    ] {
        let jobs = list(
            store,
            JobFilter {
                state: Some(state),
                ..JobFilter::default()
            },
        )
        .await?;
        if jobs.is_empty() {
            continue;
        }
        eprintln!("  {} {}:", jobs.len(), state.as_str());
        for j in jobs.iter().take(10) {
            eprintln!(
                "    {} runs {} attempts {} stalls {} owner {:?} lease_until {:?} ms run_at {} ms: {}",
                j.id.0,
                j.runs,
                j.attempts,
                j.stalls,
                j.lease_owner,
                j.lease_until.map(|t| ms_from(now, t)),
                ms_from(now, j.run_at),
                j.last_reason.as_deref().unwrap_or("-"),
            );
        }
    }
    for node in live {
        let views = node.engine().endpoint_views(&[]);
        eprintln!(
            "  node {}: {} in flight; endpoints {}",
            node.worker_id,
            node.engine().in_flight(),
            serde_json::to_string(&views)?
        );
    }
    Ok(())
}

/// One run on a fresh schema: one node, or two of which node 1 is killed once `kill_at` jobs are
/// finished.
async fn run(
    rx: &Receiver,
    server: &str,
    label: &str,
    kill_at: Option<u64>,
    lease: Duration,
) -> Result<Figures> {
    let nodes = if kill_at.is_some() { 2 } else { 1 };
    let schema = crate::workloads::bench_schema(server).await?;
    let url = redial_store_postgres::testing::url_in_schema(server, &schema);
    // The benchmark's own connections: enqueue and watch, never a node's.
    let store: Arc<dyn Store> = Arc::new(PgStore::connect(&url).await?);
    let mut live = Vec::new();
    for i in 1..=nodes {
        live.push(Node::start(format!("{label}-node{i}"), url.clone(), lease).await?);
    }
    let run_name = format!("nodes-{label}");
    rx.shapes.begin(&run_name, SHAPE);
    let now = SystemClock.now();
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|k| new_job(k, format!("{}/shape/{run_name}/{k}", rx.base), now))
        .collect();
    let start = Instant::now();
    store.job_insert_batch(jobs).await?;
    let mut f = Figures::default();
    let mut killed: Option<String> = None;
    let mut last_finished = 0;
    let mut last_change = Instant::now();
    let mut next_progress = Duration::from_secs(1);
    let mut shown_stuck = false;
    loop {
        let stats = store.stats().await?;
        let done = finished(&stats);
        let elapsed = start.elapsed();
        if done >= JOBS as u64 {
            f.drained = Some(elapsed);
            break;
        }
        if done != last_finished {
            last_finished = done;
            last_change = Instant::now();
        }
        if killed.is_none() && kill_at.is_some_and(|k| done >= k) {
            let node = live.remove(0);
            let wall = SystemClock.now();
            let name = node.worker_id.clone();
            node.kill();
            let held: Vec<Job> = running_jobs(&store)
                .await?
                .into_iter()
                .filter(|j| j.lease_owner.as_deref() == Some(name.as_str()))
                .collect();
            eprintln!(
                "protection-nodes: killed {name} at {:.2} s, {done} jobs finished, {} leased by it",
                elapsed.as_secs_f64(),
                held.len()
            );
            f.kill = Some(Kill {
                at: elapsed,
                finished: done,
                held: held.len(),
                last_expiry: held
                    .iter()
                    .filter_map(|j| j.lease_until)
                    .max()
                    .map(|t| t.saturating_since(wall)),
                rescued: None,
            });
            killed = Some(name);
        }
        if let (Some(name), Some(kill)) = (&killed, &mut f.kill) {
            if kill.rescued.is_none()
                && !running_jobs(&store)
                    .await?
                    .iter()
                    .any(|j| j.lease_owner.as_deref() == Some(name.as_str()))
            {
                kill.rescued = Some(start.elapsed());
            }
        }
        if elapsed >= next_progress {
            next_progress += Duration::from_secs(1);
            let in_flight = live
                .iter()
                .map(|n| format!("{} {}", n.worker_id, n.engine().in_flight()))
                .collect::<Vec<_>>()
                .join(", ");
            eprintln!(
                "  {label} {:>5.1} s: {}; in flight: {in_flight}",
                elapsed.as_secs_f64(),
                by_state(&stats)
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        if !shown_stuck && last_change.elapsed() >= STUCK {
            shown_stuck = true;
            eprintln!(
                "protection-nodes: nothing finished for {} s",
                STUCK.as_secs()
            );
            evidence(&store, &live, elapsed).await?;
        }
        if elapsed >= CAP {
            eprintln!("protection-nodes: not drained within {} s", CAP.as_secs());
            evidence(&store, &live, elapsed).await?;
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    for node in &live {
        eprintln!(
            "  {label}: node {} at the end: {} in flight; endpoints {}",
            node.worker_id,
            node.engine().in_flight(),
            serde_json::to_string(&node.engine().endpoint_views(&[]))?
        );
    }
    for node in live {
        node.stop().await;
    }
    f.jobs = by_state(&store.stats().await?);
    f.answers = rx.shapes.answers(&run_name);
    let all = list(&store, JobFilter::default()).await?;
    f.recorded = all.iter().map(|j| u64::from(j.runs)).sum();
    f.stalled = all.iter().filter(|j| j.stalls > 0).count() as u64;
    Ok(f)
}

fn secs(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.2}", d.as_secs_f64()))
}

pub async fn protection_nodes(report: &mut Report<'_>) -> Result<()> {
    let (server, _throwaway) = database()?;
    let rx = Receiver::start().await?;
    eprintln!("protection-nodes: A, one node ({JOBS} jobs)");
    let a = run(&rx, &server, "A", None, LEASE).await?;
    let mut runs = vec![("A".to_owned(), "one node".to_owned(), a, LEASE)];
    for (label, at, lease) in KILLS {
        let name = format!(
            "two nodes, one killed at {at} finished, lease {} s",
            lease.as_secs()
        );
        eprintln!("protection-nodes: {label}, {name}");
        let f = run(&rx, &server, label, Some(at), lease).await?;
        runs.push((label.to_owned(), name, f, lease));
    }

    let mut table = String::from(
        "| run | drain (s) | requests/job | answers | requests not recorded | jobs stalled | jobs |\n| --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut notes = String::new();
    for (label, name, f, _) in &runs {
        let key = format!("protection-nodes, {label} ({name})");
        match f.drained {
            Some(d) => report(&format!("{key}: drain time"), d.as_secs_f64(), "s"),
            None => report(
                &format!("{key}: not drained within"),
                CAP.as_secs_f64(),
                "s",
            ),
        }
        report(
            &format!("{key}: requests per job"),
            f.requests() as f64 / JOBS as f64,
            "requests",
        );
        for (state, n) in &f.jobs {
            report(&format!("{key}: {state}"), *n as f64, "jobs");
        }
        report(
            &format!("{key}: requests not recorded"),
            f.requests().saturating_sub(f.recorded) as f64,
            "requests",
        );
        report(&format!("{key}: jobs stalled"), f.stalled as f64, "jobs");
        let _ = writeln!(
            table,
            "| {label}: {name} | {} | {:.3} | {} | {} | {} | {} |",
            secs(f.drained),
            f.requests() as f64 / JOBS as f64,
            f.answers_text(),
            f.requests().saturating_sub(f.recorded),
            f.stalled,
            f.outcome(),
        );
        if let Some(k) = &f.kill {
            report(&format!("{key}: node 1 killed at"), k.at.as_secs_f64(), "s");
            report(
                &format!("{key}: leased by node 1 at the kill"),
                k.held as f64,
                "jobs",
            );
            if let Some(e) = k.last_expiry {
                report(
                    &format!("{key}: its last lease expired after the kill"),
                    e.as_secs_f64(),
                    "s",
                );
            }
            if let Some(r) = k.rescued {
                report(
                    &format!("{key}: all its jobs rescued after the kill"),
                    r.saturating_sub(k.at).as_secs_f64(),
                    "s",
                );
            }
            let _ = writeln!(
                notes,
                "{label}: node 1 killed at {:.2} s ({} finished), {} jobs leased by it, its last lease expired {} s after the kill, all rescued {} s after the kill",
                k.at.as_secs_f64(),
                k.finished,
                k.held,
                secs(k.last_expiry),
                secs(k.rescued.map(|r| r.saturating_sub(k.at))),
            );
        }
    }
    let all_complete = runs
        .iter()
        .all(|(_, _, f, _)| f.jobs.get("completed").copied() == Some(JOBS as u64));
    let mut verdict = format!(
        "target all complete: {}\n",
        if all_complete { "met" } else { "not met" }
    );
    let a = runs[0].2.drained;
    for (label, _, f, lease) in &runs[1..] {
        let _ = write!(verdict, "target {label} <= 2x A: ");
        let (Some(da), Some(db)) = (a, f.drained) else {
            verdict.push_str("not met: a run did not drain\n");
            continue;
        };
        let ratio = db.as_secs_f64() / da.as_secs_f64();
        let less = db.saturating_sub(*lease).as_secs_f64() / da.as_secs_f64();
        report(
            &format!("protection-nodes: drain time {label}/A"),
            ratio,
            "x",
        );
        report(
            &format!("protection-nodes: drain time ({label} - lease)/A"),
            less,
            "x",
        );
        let met = |x: f64| if x <= 2.0 { "met" } else { "not met" };
        let _ = writeln!(
            verdict,
            "{ratio:.2}x: {}; less the {} s lease, ({label} - lease)/A {less:.2}x: {}",
            met(ratio),
            lease.as_secs(),
            met(less)
        );
    }
    eprintln!("\n{table}\n{notes}\n{verdict}");
    Ok(())
}
