//! The workloads. Each builds what it needs (a fresh SQLite file in a temporary folder, an engine,
//! a receiver), measures, and reports through `report(name, value, unit)`.
//!
//! Over 800 lines: one function per workload, side by side so that they measure alike.
//!
//! Over 600 lines: benchmarks, not product code: one function per workload.

use anyhow::{Context, Result};
use async_trait::async_trait;
use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{
    AttemptOutput, Clock, Engine, EngineConfig, Handler, QueueConfig, SystemClock,
};
use redial_policy::{HandlerOutcome, Outcome, Policy, Timestamp};
use redial_store::{HttpRequest, JobId, JobState, NewJob, Store};
use redial_store_postgres::PgStore;
use redial_store_sqlite::SqliteStore;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

pub type Report<'a> = dyn FnMut(&str, f64, &str) + 'a;

/// The PostgreSQL server to benchmark against instead of SQLite (`--database-url`).
pub static DATABASE_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The connection settings of the schema `store_in` made last (PostgreSQL).
pub(crate) static LAST_SCHEMA: std::sync::Mutex<Option<redial_store_postgres::DbConfig>> =
    std::sync::Mutex::new(None);

/// The schemas the benchmark made, each with its server's URL: dropped when it ends
/// ([`drop_schemas`]), so that a run leaves the server's database as it found it.
static SCHEMAS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());

/// A fresh, empty schema on the server at `url`, for one workload; returns its name.
pub(crate) async fn bench_schema(url: &str) -> Result<String> {
    let schema = redial_store_postgres::testing::create_schema(url)
        .await
        .map_err(|e| anyhow::anyhow!("creating a schema: {e}"))?;
    if let Ok(mut made) = SCHEMAS.lock() {
        made.push((url.to_owned(), schema.clone()));
    }
    Ok(schema)
}

/// Connection settings that work in a [`bench_schema`].
pub(crate) async fn bench_config(url: &str) -> Result<redial_store_postgres::DbConfig> {
    let schema = bench_schema(url).await?;
    let mut config = redial_store_postgres::DbConfig::parse(url).map_err(|e| anyhow::anyhow!(e))?;
    config.pg_mut().options(format!("-c search_path={schema}"));
    Ok(config)
}

/// Drops every schema [`bench_schema`] made. A server that is gone (one a workload started
/// and stopped) is passed over; a drop that fails is said on stderr.
pub async fn drop_schemas() {
    let made = SCHEMAS
        .lock()
        .map(|mut m| std::mem::take(&mut *m))
        .unwrap_or_default();
    for (url, schema) in made {
        let Ok(config) = redial_store_postgres::DbConfig::parse(&url) else {
            continue;
        };
        let Ok((client, connection)) = config.connect().await else {
            continue;
        };
        let driver = tokio::spawn(connection);
        if let Err(e) = client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
        {
            eprintln!("could not drop the benchmark's schema {schema}: {e}");
        }
        drop(client);
        let _ = driver.await;
    }
}

/// A fresh store: a SQLite file in `dir`, or an empty schema on the PostgreSQL server.
pub(crate) async fn store_in(dir: &tempfile::TempDir) -> Result<Arc<dyn Store>> {
    match DATABASE_URL.get() {
        Some(url) => {
            let config = bench_config(url).await?;
            if let Ok(mut last) = LAST_SCHEMA.lock() {
                *last = Some(config.clone());
            }
            // As many connections as the engine's busiest moments use.
            Ok(Arc::new(PgStore::connect_with(config, 16).await?))
        }
        None => Ok(Arc::new(SqliteStore::open(&dir.path().join("redial.db"))?)),
    }
}

pub(crate) fn job(id: String, queue: &str, url: &str, now: Timestamp) -> NewJob {
    NewJob {
        ordering: None,
        callback: None,
        idempotency_key: Some(id.clone()),
        id: JobId(id),
        queue: queue.into(),
        endpoint: "bench".into(),
        request: HttpRequest {
            method: "POST".into(),
            url: url.into(),
            headers: vec![("content-type".into(), "application/json".into())],
            body: Some("{\"n\":1}".into()),
            timeout_ms: Some(10_000),
            credentials: None,
        },
        priority: 0,
        run_at: now,
        deadline: None,
        tags: vec![],
        policy: None,
        created_at: now,
        group: None,
    }
}

pub(crate) async fn insert_backlog(
    store: &Arc<dyn Store>,
    n: usize,
    queue: &str,
    url: &str,
    prefix: &str,
) -> Result<()> {
    let now = SystemClock.now();
    let mut i = 0;
    while i < n {
        let batch: Vec<_> = (i..(i + 5000).min(n))
            .map(|k| job(format!("{prefix}{k}"), queue, url, now))
            .collect();
        i += batch.len();
        store.job_insert_batch(batch).await?;
    }
    Ok(())
}

/// A handler that does nothing and succeeds; optionally tells when it started each job.
#[derive(Debug, Default)]
pub(crate) struct Noop {
    started: Option<mpsc::UnboundedSender<(String, Instant)>>,
    pub(crate) calls: AtomicU64,
}

#[async_trait]
impl Handler for Noop {
    async fn run(&self, job: &redial_store::Job) -> AttemptOutput {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if let Some(tx) = &self.started {
            let _ = tx.send((job.id.0.clone(), Instant::now()));
        }
        AttemptOutput::from_outcome(Outcome::Handler(HandlerOutcome::Success))
    }
}

/// Wraps a handler and counts the attempts it finished, so that a workload can wait without
/// asking the store (whose counts cost a scan) over and over.
#[derive(Debug)]
struct Counting<H> {
    inner: H,
    calls: AtomicU64,
}

#[async_trait]
impl<H: Handler> Handler for Counting<H> {
    async fn run(&self, job: &redial_store::Job) -> AttemptOutput {
        let out = self.inner.run(job).await;
        self.calls.fetch_add(1, Ordering::Relaxed);
        out
    }
}

pub(crate) fn engine(
    store: Arc<dyn Store>,
    queues: &[(&str, usize)],
    handler: Arc<dyn Handler>,
) -> Engine {
    engine_with(store, queues, handler, EngineConfig::default())
}

fn engine_with(
    store: Arc<dyn Store>,
    queues: &[(&str, usize)],
    handler: Arc<dyn Handler>,
    base: EngineConfig,
) -> Engine {
    let mut config = EngineConfig {
        poll_interval: Duration::from_millis(200),
        ..base
    };
    config.queues.clear();
    for (q, c) in queues {
        config
            .queues
            .insert((*q).into(), QueueConfig::new(*c, Policy::default()));
    }
    let mut e = Engine::new(store, config, Arc::new(SystemClock), handler.clone());
    for (q, _) in queues {
        e = e.with_handler(q, handler.clone());
    }
    e
}

async fn completed(store: &Arc<dyn Store>, queue: &str) -> Result<u64> {
    Ok(store
        .stats()
        .await?
        .by_queue
        .iter()
        .filter(|c| c.queue == queue && c.state == JobState::Completed)
        .map(|c| c.count)
        .sum())
}

/// Waits until `n` jobs of the queue are finished; an error if any did not complete (a broken
/// setup should fail the run, not hang it or flatter it).
pub(crate) async fn wait_completed(store: &Arc<dyn Store>, queue: &str, n: u64) -> Result<()> {
    loop {
        let stats = store.stats().await?;
        let finished: u64 = stats
            .by_queue
            .iter()
            .filter(|c| c.queue == queue && c.state.is_finished())
            .map(|c| c.count)
            .sum();
        if finished >= n {
            let done = completed(store, queue).await?;
            anyhow::ensure!(
                done >= n,
                "only {done} of {n} jobs completed: check the receiver"
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the handler has been called `n` times and every attempt's result is durable (the
/// engine holds no attempt): the end of a timed run. Counting finished jobs in the store would
/// scan them all, inside the timing; [`wait_completed`] checks them after it.
pub(crate) async fn wait_recorded(
    running: &redial_engine::RunningEngine,
    calls: &AtomicU64,
    n: u64,
) {
    while calls.load(Ordering::Relaxed) < n || running.engine().in_flight() > 0 {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

pub async fn enqueue(jobs: usize, report: &mut Report<'_>) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    let now = SystemClock.now();
    let start = Instant::now();
    let mut i = 0;
    while i < jobs {
        let batch: Vec<_> = (i..(i + 1000).min(jobs))
            .map(|k| job(format!("e{k}"), "default", "http://127.0.0.1:9/", now))
            .collect();
        i += batch.len();
        store.job_insert_batch(batch).await?;
    }
    report(
        "enqueue, batches of 1000 (durable)",
        jobs as f64 / start.elapsed().as_secs_f64(),
        "jobs/s",
    );
    let singles = 2000.min(jobs);
    let start = Instant::now();
    for k in 0..singles {
        store
            .job_insert(job(format!("s{k}"), "default", "http://127.0.0.1:9/", now))
            .await?;
    }
    report(
        "enqueue, one at a time (durable)",
        singles as f64 / start.elapsed().as_secs_f64(),
        "jobs/s",
    );
    Ok(())
}

pub async fn noop(jobs: usize, concurrency: usize, report: &mut Report<'_>) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    insert_backlog(&store, jobs, "default", "http://127.0.0.1:9/", "n").await?;
    let (rate, writer_us, server_us) = noop_run_accounted(store, jobs, concurrency).await?;
    report(
        &format!("no-op jobs, concurrency {concurrency} (full path)"),
        rate,
        "jobs/s",
    );
    if let Some(us) = writer_us {
        // Less noisy than the rate on a shared machine: what the one writer spent per job.
        report("no-op: SQLite storage thread CPU per job", us, "us");
    } else if let Some(us) = server_us {
        // The key `bench/compare/pgpeers.js` reports its peers' under.
        report("no-op: PostgreSQL server CPU per job", us, "us");
    }
    Ok(())
}

/// Runs the no-op engine over `store`'s backlog of `jobs`; returns jobs per second and, on
/// SQLite, the storage thread's CPU per job (us).
pub(crate) async fn noop_run(
    store: Arc<dyn Store>,
    jobs: usize,
    concurrency: usize,
) -> Result<(f64, Option<f64>)> {
    noop_run_accounted(store, jobs, concurrency)
        .await
        .map(|(rate, writer, _)| (rate, writer))
}

/// [`noop_run`], and on PostgreSQL the CPU the server processes on this machine spent per job
/// (us), from before the engine starts until every job's completion is written.
pub(crate) async fn noop_run_accounted(
    store: Arc<dyn Store>,
    jobs: usize,
    concurrency: usize,
) -> Result<(f64, Option<f64>, Option<f64>)> {
    let noop = Arc::new(Noop::default());
    let e = engine(store.clone(), &[("default", concurrency)], noop.clone());
    let writer_before = thread_cpu_ns("redial-sqlite");
    let server_before = writer_before.is_none().then(postgres_cpu_ns).flatten();
    let start = Instant::now();
    let running = e.start().await?;
    // Counting calls costs nothing; the store is asked only for the last few completions.
    wait_recorded(&running, &noop.calls, jobs as u64).await;
    let rate = jobs as f64 / start.elapsed().as_secs_f64();
    let writer_after = thread_cpu_ns("redial-sqlite");
    wait_completed(&store, "default", jobs as u64).await?;
    let server_after = server_before.and(postgres_cpu_ns());
    running.shutdown(Duration::from_secs(5)).await;
    let per_job = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1000.0 / jobs as f64),
        _ => None,
    };
    Ok((
        rate,
        per_job(writer_before, writer_after),
        per_job(server_before, server_after),
    ))
}

/// CPU time so far of this process's thread named `name` (Linux: `/proc/self/task/*/schedstat`);
/// `None` elsewhere, or when no thread has that name (the PostgreSQL store has none).
pub(crate) fn thread_cpu_ns(name: &str) -> Option<u64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            return stat.split_whitespace().next()?.parse().ok();
        }
    }
    None
}

/// Bytes written so far (`write` and its kin, `/proc/self/task/*/io`'s `wchar`) by this
/// process's threads named `name` (Linux; names are cut at 15 characters); `None` elsewhere.
pub(crate) fn thread_wchar(name: &str) -> Option<u64> {
    let mut sum = None;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let io = std::fs::read_to_string(task.path().join("io")).ok()?;
        let wchar = io
            .lines()
            .find_map(|l| l.strip_prefix("wchar: "))
            .and_then(|v| v.trim().parse::<u64>().ok())?;
        sum = Some(sum.unwrap_or(0) + wchar);
    }
    sum
}

/// CPU time so far of all this process's threads (Linux); `None` elsewhere.
pub(crate) fn process_cpu_ns() -> Option<u64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut sum = 0;
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        sum += stat
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(sum)
}

/// CPU time so far of this machine's PostgreSQL server processes (Linux: every process named
/// `postgres`, its own time and its ended children's; clock ticks, so only longer runs read
/// true); `None` when there are none. What a job costs the database, when it runs here.
pub(crate) fn postgres_cpu_ns() -> Option<u64> {
    let tick_ns = 1_000_000_000 / 100; // USER_HZ is 100 on Linux
    let mut sum = 0;
    let mut found = false;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ... utime stime cutime cstime: fields 14 to 17.
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        if !head.ends_with("(postgres") {
            continue;
        }
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = f
            .get(11..15)
            .into_iter()
            .flatten()
            .filter_map(|v| v.parse::<u64>().ok())
            .sum();
        sum += ticks * tick_ns;
        found = true;
    }
    found.then_some(sum)
}

/// What instrumentation costs on the full no-op path: metrics off (the baseline), metrics on
/// with OTLP off (the default), and OTLP on, exporting to a local receiver.
pub async fn instrumentation(
    jobs: usize,
    concurrency: usize,
    base: Option<String>,
    report: &mut Report<'_>,
) -> Result<()> {
    let base = match base {
        Some(b) => b,
        None => local_receiver().await?,
    };
    let otlp = redial_engine::otel::OtlpConfig {
        endpoint: format!("{base}/v1/traces"),
        headers: vec![],
        service_name: "redial-bench".into(),
        resource: vec![],
        export_interval: Duration::from_millis(200),
        max_queue: 65_536,
        timeout: Duration::from_secs(10),
        sampler: redial_engine::otel::Sampler::default(),
    };
    let mut rates = Vec::new();
    // The sampled run goes before the every-job run: what the collector (in this process unless
    // `--receiver-base` names another) kept from that one slowed whatever ran after it.
    for (name, metrics, traced, ratio) in [
        ("metrics off, OTLP off (baseline)", false, false, 1.0),
        ("metrics on, OTLP off (default)", true, false, 1.0),
        ("metrics on, OTLP on, 10% of jobs sampled", true, true, 0.1),
        (
            "metrics on, OTLP on, every job (local collector)",
            true,
            true,
            1.0,
        ),
    ] {
        let dir = tempfile::tempdir()?;
        let store = store_in(&dir).await?;
        insert_backlog(&store, jobs, "default", "http://127.0.0.1:9/", "i").await?;
        let noop = Arc::new(Noop::default());
        let tracer = traced.then(|| {
            let mut c = otlp.clone();
            c.sampler.ratio = ratio;
            Arc::new(redial_engine::otel::Tracer::start(c))
        });
        let config = EngineConfig {
            count_metrics: metrics,
            tracer: tracer.clone(),
            ..EngineConfig::default()
        };
        let e = engine_with(
            store.clone(),
            &[("default", concurrency)],
            noop.clone(),
            config,
        );
        let start = Instant::now();
        let running = e.start().await?;
        wait_recorded(&running, &noop.calls, jobs as u64).await;
        let rate = jobs as f64 / start.elapsed().as_secs_f64();
        wait_completed(&store, "default", jobs as u64).await?;
        running.shutdown(Duration::from_secs(5)).await;
        report(&format!("no-op jobs/s, {name}"), rate, "jobs/s");
        if let Some(t) = tracer {
            report("spans dropped (queue full)", t.dropped() as f64, "spans");
            // Let the exporter finish before the next run, which it would slow down.
            t.flush(Duration::from_secs(60)).await;
        }
        rates.push(rate);
    }
    report(
        "instrumentation cost, OTLP off: throughput vs baseline",
        rates[1] / rates[0],
        "x",
    );
    report(
        "instrumentation cost, OTLP on, 10% sampled: throughput vs baseline",
        rates[2] / rates[0],
        "x",
    );
    report(
        "instrumentation cost, OTLP on: throughput vs baseline",
        rates[3] / rates[0],
        "x",
    );
    Ok(())
}

/// The benchmark receiver: `/hook` answers 200 at once; `/limited` allows 10 requests per 100 ms
/// window and answers 429 with `Retry-After` beyond (no quota headers: the hard case); `/outage`
/// answers 503 for 2 s after `/reset`, then 200; `/reset` restarts both clocks and the counts;
/// `/stats` gives the counts by status since the last reset.
#[derive(Debug)]
struct ReceiverState {
    since: Instant,
    window: u64,
    used: u32,
    counts: std::collections::BTreeMap<u16, u64>,
}

pub(crate) fn receiver_app() -> axum::Router {
    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::{any, get};
    type Shared = Arc<std::sync::Mutex<ReceiverState>>;
    let state: Shared = Arc::new(std::sync::Mutex::new(ReceiverState {
        since: Instant::now(),
        window: 0,
        used: 0,
        counts: Default::default(),
    }));
    fn lock(s: &Shared) -> std::sync::MutexGuard<'_, ReceiverState> {
        s.lock().unwrap_or_else(|p| p.into_inner())
    }
    async fn limited(State(s): State<Shared>) -> axum::response::Response {
        let mut st = lock(&s);
        let elapsed = st.since.elapsed();
        let window = (elapsed.as_millis() / 100) as u64;
        if window != st.window {
            st.window = window;
            st.used = 0;
        }
        if st.used < 10 {
            st.used += 1;
            *st.counts.entry(200).or_default() += 1;
            return "ok".into_response();
        }
        *st.counts.entry(429).or_default() += 1;
        let reset = Duration::from_millis((window + 1) * 100).saturating_sub(elapsed);
        (
            StatusCode::TOO_MANY_REQUESTS,
            [(
                "retry-after",
                format!("{:.3}", reset.as_secs_f64().max(0.001)),
            )],
            "slow down",
        )
            .into_response()
    }
    async fn outage(State(s): State<Shared>) -> axum::response::Response {
        let mut st = lock(&s);
        let status = if st.since.elapsed() < Duration::from_secs(2) {
            503
        } else {
            200
        };
        *st.counts.entry(status).or_default() += 1;
        (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), "").into_response()
    }
    async fn reset(State(s): State<Shared>) -> &'static str {
        let mut st = lock(&s);
        *st = ReceiverState {
            since: Instant::now(),
            window: 0,
            used: 0,
            counts: Default::default(),
        };
        "reset"
    }
    async fn stats(State(s): State<Shared>) -> axum::Json<serde_json::Value> {
        let st = lock(&s);
        axum::Json(serde_json::json!(st
            .counts
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<std::collections::BTreeMap<_, _>>()))
    }
    axum::Router::new()
        .route("/hook", any(|| async { "ok" }))
        .route("/v1/traces", any(|| async { "{}" }))
        .route("/limited", any(limited))
        .route("/outage", any(outage))
        .route("/reset", get(reset))
        .route("/stats", get(stats))
        .with_state(state)
}

pub async fn serve_receiver(port: u16) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .context("binding the receiver")?;
    eprintln!("receiver on http://{}", listener.local_addr()?);
    axum::serve(listener, receiver_app()).await?;
    Ok(())
}

/// Starts the receiver in this process on a free port; returns its base URL.
pub(crate) async fn local_receiver() -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, receiver_app()).await;
    });
    Ok(base)
}

pub async fn http(
    jobs: usize,
    concurrency: usize,
    base: Option<String>,
    report: &mut Report<'_>,
) -> Result<()> {
    let rate = http_rate(jobs, concurrency, base, 0, false).await?;
    report(
        &format!("HTTP dispatch to a loopback receiver, concurrency {concurrency}"),
        rate,
        "jobs/s",
    );
    Ok(())
}

/// The HTTP dispatch workload's rate, with `waiters` requests waiting meanwhile (in process,
/// through `Engine::wait_finished`) for jobs that do not finish during the run: what waiting
/// requests cost dispatch (`--only waiters`). Prints on stderr the CPU each job took, of the
/// SQLite storage thread, of the whole process (the receiver in it too, when it is) and of the
/// PostgreSQL server when it runs on this machine.
pub(crate) async fn http_rate(
    jobs: usize,
    concurrency: usize,
    base: Option<String>,
    waiters: usize,
    callbacks: bool,
) -> Result<f64> {
    let base = match base {
        Some(b) => b,
        None => local_receiver().await?,
    };
    let url = format!("{base}/hook");
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    if callbacks {
        // Each job with a callback to the same receiver, delivered in the callback queue.
        let now = SystemClock.now();
        let callback = redial_store::Callback {
            url: url.clone(),
            on: redial_store::CallbackEvent::DEFAULT.to_vec(),
            headers: Vec::new(),
            queue: "callbacks".into(),
            endpoint: "bench-callbacks".into(),
        };
        for start in (0..jobs).step_by(5000) {
            let batch: Vec<_> = (start..(start + 5000).min(jobs))
                .map(|k| NewJob {
                    ordering: None,
                    callback: Some(callback.clone()),
                    ..job(format!("h{k}"), "default", &url, now)
                })
                .collect();
            store.job_insert_batch(batch).await?;
        }
    } else {
        insert_backlog(&store, jobs, "default", &url, "h").await?;
    }
    // Jobs for the waiters: due in a day, so they do not finish during the run.
    let later = SystemClock
        .now()
        .saturating_add(Duration::from_secs(86_400));
    for k in 0..waiters {
        store
            .job_insert(job(format!("waited{k}"), "default", &url, later))
            .await?;
    }
    let http = HttpExecutor::new(HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    })?;
    let mut config = EngineConfig {
        poll_interval: Duration::from_millis(200),
        ..EngineConfig::default()
    };
    config.queues.insert(
        "default".into(),
        QueueConfig::new(concurrency, Policy::default()),
    );
    if callbacks {
        // The callback queue runs as many deliveries at once as the jobs' queue runs jobs.
        config.queues.insert(
            "callbacks".into(),
            QueueConfig::new(concurrency, Policy::default()),
        );
    }
    let counting = Arc::new(Counting {
        inner: http,
        calls: AtomicU64::new(0),
    });
    let e = Engine::new(
        store.clone(),
        config,
        Arc::new(SystemClock),
        counting.clone(),
    );
    let running = e.start().await?;
    let mut waiting = Vec::new();
    for k in 0..waiters {
        let e = e.clone();
        waiting.push(tokio::spawn(async move {
            let id = JobId(format!("waited{k}"));
            loop {
                let _ = e
                    .wait_finished(&id, Duration::from_secs(60), usize::MAX)
                    .await;
            }
        }));
    }
    let start = Instant::now();
    let writer_before = thread_cpu_ns("redial-sqlite");
    let process_before = process_cpu_ns();
    let postgres_before = postgres_cpu_ns();
    // With callbacks, a job is done once its callback is delivered too.
    let sends = if callbacks { 2 * jobs } else { jobs };
    wait_recorded(&running, &counting.calls, sends as u64).await;
    let rate = jobs as f64 / start.elapsed().as_secs_f64();
    let per_job = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.1}", b.saturating_sub(a) as f64 / 1000.0 / jobs as f64),
        _ => "-".to_owned(),
    };
    eprintln!(
        "  CPU per job: storage thread {} us, process {} us, PostgreSQL server {} us",
        per_job(writer_before, thread_cpu_ns("redial-sqlite")),
        per_job(process_before, process_cpu_ns()),
        per_job(postgres_before, postgres_cpu_ns()),
    );
    for w in &waiting {
        w.abort();
    }
    wait_completed(&store, "default", jobs as u64).await?;
    if callbacks {
        wait_completed(&store, "callbacks", jobs as u64).await?;
    }
    running.shutdown(Duration::from_secs(5)).await;
    Ok(rate)
}

/// Runs `run(false)` and `run(true)` in `rounds` alternated rounds, each first in every other
/// round (each prints its pair, as
/// `round N: <a> <without>, <b> <with>`), and reports each side's median, as `labels[0]` and
/// `labels[1]`, and the median of the rounds' ratios (with / without), as `labels[2]`.
pub(crate) async fn side_by_side<F, Fut>(
    rounds: usize,
    words: [&str; 2],
    labels: [&str; 3],
    mut run: F,
    report: &mut Report<'_>,
) -> Result<()>
where
    F: FnMut(bool) -> Fut,
    Fut: std::future::Future<Output = Result<f64>>,
{
    let (mut without, mut with, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds.max(1) {
        // Each side goes first in every other round, so that whatever the order of a pair
        // does (a warmer cache, a grown heap) does not count for one side only. (An A/A run,
        // `--only events` with the same triggers made again on one side, measured no
        // difference: 1.0x.)
        let (a, b) = if round % 2 == 0 {
            let a = run(false).await?;
            (a, run(true).await?)
        } else {
            let b = run(true).await?;
            (run(false).await?, b)
        };
        eprintln!(
            "round {}: {a:.0} jobs/s {}, {b:.0} {}",
            round + 1,
            words[0],
            words[1]
        );
        without.push(a);
        with.push(b);
        ratios.push(b / a);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    report(labels[0], median(&mut without), "jobs/s");
    report(labels[1], median(&mut with), "jobs/s");
    report(labels[2], median(&mut ratios), "x");
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

pub async fn latency(report: &mut Report<'_>) -> Result<()> {
    for under_load in [false, true] {
        let dir = tempfile::tempdir()?;
        let store = store_in(&dir).await?;
        if under_load {
            insert_backlog(&store, 50_000, "load", "http://127.0.0.1:9/", "l").await?;
        }
        let (tx, mut rx) = mpsc::unbounded_channel();
        let handler = Arc::new(Noop {
            started: Some(tx),
            calls: AtomicU64::new(0),
        });
        let queues: &[(&str, usize)] = if under_load {
            &[("default", 10), ("load", 100)]
        } else {
            &[("default", 10)]
        };
        let e = engine(store.clone(), queues, handler);
        let running = e.start().await?;
        let mut samples = Vec::new();
        let now = SystemClock.now();
        for k in 0..500 {
            let id = format!("lat{k}");
            store
                .job_insert(job(id.clone(), "default", "http://127.0.0.1:9/", now))
                .await?;
            let acked = Instant::now();
            e.wake("default");
            loop {
                let (got, at) = rx.recv().await.context("handler channel closed")?;
                if got == id {
                    samples.push(at.duration_since(acked).as_secs_f64() * 1000.0);
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        running.shutdown(Duration::from_secs(5)).await;
        samples.sort_by(f64::total_cmp);
        let label = if under_load {
            "under load (no-op backlog draining)"
        } else {
            "idle"
        };
        report(
            &format!("enqueue to first attempt p50, {label}"),
            percentile(&samples, 0.5),
            "ms",
        );
        report(
            &format!("enqueue to first attempt p99, {label}"),
            percentile(&samples, 0.99),
            "ms",
        );
    }
    Ok(())
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
            })
        })
        .map_or(0, |kb| kb * 1024)
}

fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|it| {
            it.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

pub async fn backlog(big: usize, concurrency: usize, report: &mut Report<'_>) -> Result<()> {
    let measure = 10_000usize;
    for size in [measure, big] {
        let dir = tempfile::tempdir()?;
        let store = store_in(&dir).await?;
        let rss_before = rss_bytes();
        insert_backlog(&store, size, "default", "http://127.0.0.1:9/", "b").await?;
        let disk = dir_bytes(dir.path());
        let noop = Arc::new(Noop::default());
        let e = engine(store.clone(), &[("default", concurrency)], noop.clone());
        let start = Instant::now();
        let running = e.start().await?;
        while noop.calls.load(Ordering::Relaxed) < measure as u64 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let rate = measure as f64 / start.elapsed().as_secs_f64();
        // With the big backlog, also the rate once warm: the first jobs pay for a cold page cache
        // and for checkpointing what the bulk insert just wrote.
        let warm = if size == big && size >= 4 * measure {
            let start = Instant::now();
            while noop.calls.load(Ordering::Relaxed) < 4 * measure as u64 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Some(3.0 * measure as f64 / start.elapsed().as_secs_f64())
        } else {
            None
        };
        running.shutdown(Duration::from_secs(5)).await;
        report(
            &format!("no-op throughput with {size} ready jobs"),
            rate,
            "jobs/s",
        );
        if let Some(warm) = warm {
            report(
                &format!("no-op throughput with {size} ready jobs, jobs 10k-40k (warm)"),
                warm,
                "jobs/s",
            );
        }
        // On PostgreSQL the data lives in the server's folder, not here: no disk figure.
        if size == big && DATABASE_URL.get().is_none() {
            report(
                &format!("disk per queued job ({size} jobs)"),
                disk as f64 / size as f64,
                "bytes",
            );
            report(
                &format!("resident memory growth with {size} queued jobs"),
                rss_bytes().saturating_sub(rss_before) as f64 / (1024.0 * 1024.0),
                "MiB",
            );
            report(
                "resident memory, whole process",
                rss_bytes() as f64 / (1024.0 * 1024.0),
                "MiB",
            );
        }
    }
    Ok(())
}

pub async fn retry(base: Option<String>, report: &mut Report<'_>) -> Result<()> {
    let base = match base {
        Some(b) => b,
        None => local_receiver().await?,
    };
    let jobs = 1000usize;
    for (name, path, allowed_rate) in [
        ("rate limit 100/s", "/limited", 100.0),
        ("2 s outage", "/outage", f64::INFINITY),
    ] {
        let dir = tempfile::tempdir()?;
        let store = store_in(&dir).await?;
        insert_backlog(&store, jobs, "default", &format!("{base}{path}"), "r").await?;
        let http = HttpExecutor::new(HttpConfig {
            allow_private_networks: true,
            ..HttpConfig::default()
        })?;
        let mut config = EngineConfig {
            poll_interval: Duration::from_millis(100),
            ..EngineConfig::default()
        };
        config
            .queues
            .insert("default".into(), QueueConfig::new(32, Policy::default()));
        let e = Engine::new(store.clone(), config, Arc::new(SystemClock), Arc::new(http));
        http_get(&format!("{base}/reset")).await?;
        let start = Instant::now();
        let running = e.start().await?;
        loop {
            let s = store.stats().await?;
            let finished: u64 = s
                .by_queue
                .iter()
                .filter(|c| c.state.is_finished())
                .map(|c| c.count)
                .sum();
            if finished >= jobs as u64 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let elapsed = start.elapsed().as_secs_f64();
        running.shutdown(Duration::from_secs(5)).await;
        let counts: serde_json::Value =
            serde_json::from_str(&http_get(&format!("{base}/stats")).await?)?;
        let wasted = counts["429"].as_u64().unwrap_or(0) + counts["503"].as_u64().unwrap_or(0);
        let dead: u64 = store
            .stats()
            .await?
            .by_queue
            .iter()
            .filter(|c| c.state == JobState::Dead)
            .map(|c| c.count)
            .sum();
        report(
            &format!("{name}: wasted requests (429/503) for {jobs} jobs"),
            wasted as f64,
            "requests",
        );
        report(&format!("{name}: dead-lettered"), dead as f64, "jobs");
        report(&format!("{name}: drain time"), elapsed, "s");
        if allowed_rate.is_finite() {
            report(
                &format!("{name}: drain time / ideal (jobs / allowed rate)"),
                elapsed / (jobs as f64 / allowed_rate),
                "x",
            );
        }
    }
    Ok(())
}

/// A bare HTTP GET over a TCP socket (no client library needed for two control calls).
pub(crate) async fn http_get(url: &str) -> Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rest = url.strip_prefix("http://").context("an http:// URL")?;
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut sock = tokio::net::TcpStream::connect(host).await?;
    sock.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut buf = String::new();
    sock.read_to_string(&mut buf).await?;
    Ok(buf
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned()))
}

/// The storage path alone, phase by phase, to see where a job's cost goes: candidates, lease,
/// record (100 concurrent recorders, as the engine has).
pub async fn store_phases(jobs: usize, report: &mut Report<'_>) -> Result<()> {
    use redial_store::{Attempt, CandidateParams, LeaseIdsParams, RecordAttemptParams, Transition};
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    insert_backlog(&store, jobs, "default", "http://127.0.0.1:9/", "p").await?;
    let now = SystemClock.now();
    let later = Timestamp::from_unix_millis(now.as_unix_millis() + 60_000);
    let mut leased = Vec::with_capacity(jobs);
    let (mut t_cand, mut t_lease) = (Duration::ZERO, Duration::ZERO);
    while leased.len() < jobs {
        let t = Instant::now();
        let c = store
            .job_candidates(CandidateParams {
                queue: "default".into(),
                now,
                exclude: vec![],
                exclude_retries: vec![],
                exclude_firsts: vec![],
                limit: 208,
            })
            .await?;
        t_cand += t.elapsed();
        if c.is_empty() {
            break;
        }
        let t = Instant::now();
        let seqs = c.into_iter().take(100).map(|c| c.seq).collect();
        let got = store
            .job_lease_ids(LeaseIdsParams {
                seqs,
                owner: "w".into(),
                now,
                lease_until: later,
            })
            .await?;
        t_lease += t.elapsed();
        leased.extend(got);
    }
    report(
        "store: candidates, per job (100 per read)",
        t_cand.as_secs_f64() * 1e6 / jobs as f64,
        "us",
    );
    report(
        "store: lease by ids, per job (100 per call)",
        t_lease.as_secs_f64() * 1e6 / jobs as f64,
        "us",
    );
    let t = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let chunks: Vec<Vec<redial_store::Job>> = leased
        .chunks(leased.len().div_ceil(100).max(1))
        .map(|c| c.to_vec())
        .collect();
    for chunk in chunks {
        let store = store.clone();
        tasks.spawn(async move {
            for job in chunk {
                let attempt = Attempt {
                    duration_ms: 1,
                    ..Attempt::new(
                        job.runs + 1,
                        now,
                        redial_store::AttemptCategory::Success,
                        redial_store::AttemptDecision::Complete,
                        "handler succeeded".into(),
                        "w".into(),
                    )
                };
                let p =
                    RecordAttemptParams::of(&job, "w".into(), now, attempt, Transition::Complete);
                store.job_record_attempt(p).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    report(
        "store: record attempt, per job (100 concurrent)",
        t.elapsed().as_secs_f64() * 1e6 / leased.len() as f64,
        "us",
    );
    Ok(())
}
