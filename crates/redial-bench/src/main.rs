//! `redial-bench`: measures Redial's throughput, latency, backlog scaling and retry behaviour, and its
//! endpoint protection beside a plain retry loop; prints a table and writes JSON. A benchmark, not a
//! test: it asserts nothing.
//!
//! Run: `cargo run --release -p redial-bench -- --help`. The peer comparison script in
//! `bench/compare/` runs it beside BullMQ.

/// mimalloc instead of the system allocator: the storage thread frees what the runtime's threads
/// allocated (requests) and the other way round (rows), and glibc's allocator takes a lock of the
/// other thread's arena for each such free. Measured with `redial-bench --only noop`: the storage
/// thread's CPU time per job fell ~6%.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod account;
mod backup;
mod callbacks;
mod events;
mod groups;
mod limiters;
mod noop_nodes;
mod ordering;
mod plain;
mod protection;
mod protection_nodes;
mod schedules;
mod search;
mod shapes;
mod waiters;
mod workloads;

use anyhow::Result;
use clap::Parser;
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "redial-bench", about = "Redial's benchmark suite")]
struct Args {
    /// Workloads to run: enqueue, noop, http, latency, backlog, instrumentation, retry (comma separated), or all;
    /// `store` (the storage path alone, phase by phase), `protection` (endpoint protection
    /// beside a plain retry loop, about ten minutes), `silent-limiters` (1,000 jobs against
    /// limiters that answer bare 429s, and a token bucket with Retry-After, beside the plain
    /// loop, about ten minutes) and `protection-nodes` (a flaky endpoint on
    /// PostgreSQL, one node, then two with one killed; a throwaway server unless `--database-url`
    /// or `DATABASE_URL` names one) and `noop-nodes` (no-op jobs drained by one, two, then three
    /// nodes on one PostgreSQL database, the same server choice) and `schedules` (due checks
    /// with `--schedules` schedules) and `groups` (no-op without groups, in one, in 10,000, in
    /// `--rounds` alternated rounds; one lease beside a `--big-backlog` group) and `ordering`
    /// (enqueue and no-op without keys and over `--jobs`/10 keys, `--rounds` alternated rounds,
    /// with the store's CPU per job and SQLite's bytes written per job; 10,000 jobs over 1,000 keys
    /// alone and beside a key of `--hot-key` jobs; one lease beside that key) and `backup` (an
    /// online backup of a SQLite file of `--big-backlog` jobs, idle and while they drain) and
    /// `waiters` (HTTP dispatch without and with 1,000 requests waiting for jobs, `--rounds`
    /// alternated rounds) and `callbacks` (HTTP dispatch without callbacks and with one on every
    /// job, delivered, `--rounds` alternated rounds) and `events` (no-op with the job-event
    /// triggers dropped and as shipped, `--rounds` alternated rounds; the fast path's
    /// completions are logged without the triggers since issue 56, so on a no-op the two sides
    /// now differ little) and `account` (where a
    /// no-op job's cost goes: CPU, rows, WAL, per job) and `search-cost` (enqueue and no-op with
    /// derived keys, with and without tags) and `search` (searches by key, tag and reason words
    /// at `--big-backlog` jobs) and `limiters` (issue 54's limiter matrix on the wall clock
    /// beside the simulator, `--nodes` nodes, about twenty minutes) run only when named.
    #[arg(long, default_value = "all", value_delimiter = ',')]
    only: Vec<String>,
    /// Jobs for the throughput workloads (HTTP dispatch sends at most 50,000).
    #[arg(long, default_value_t = 50_000)]
    jobs: usize,
    /// Concurrency of the worker (the peer's worker runs at the same).
    #[arg(long, default_value_t = 100)]
    concurrency: usize,
    /// Ready jobs in the large backlog case.
    #[arg(long, default_value_t = 1_000_000)]
    big_backlog: usize,
    /// Base URL of the benchmark receiver (`--serve-receiver` in another process); started in
    /// this process when absent.
    #[arg(long)]
    receiver_base: Option<String>,
    /// Alternated rounds of the `groups` workload's no-op runs, of `waiters` and of `callbacks`.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Jobs of the hot key in the `ordering` workload (0: skip the hot key's part).
    #[arg(long, default_value_t = 100_000)]
    hot_key: usize,
    /// Schedules in the `schedules` workload.
    #[arg(long, default_value_t = 10_000)]
    schedules: usize,
    /// Nodes of the `limiters` workload: 1 on SQLite, or more on one PostgreSQL database (the
    /// server chosen as for `protection-nodes`).
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Where to write the JSON results.
    #[arg(long, default_value = "bench-results.json")]
    out: PathBuf,
    /// Serve a fast receiver on this port instead of benchmarking (for running it as a separate
    /// process).
    #[arg(long)]
    serve_receiver: Option<u16>,
    /// Benchmark the PostgreSQL store on this server (each workload in a fresh schema, dropped
    /// when the benchmark ends) instead of the embedded SQLite store.
    #[arg(long, env = "REDIAL_BENCH_DATABASE_URL", value_name = "URL")]
    database_url: Option<String>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async move {
        if let Some(port) = args.serve_receiver {
            return workloads::serve_receiver(port).await;
        }
        if let Some(url) = args.database_url.clone() {
            let _ = workloads::DATABASE_URL.set(url);
        }
        let all = args.only.iter().any(|w| w == "all");
        let wants = |w: &str| all || args.only.iter().any(|x| x == w);
        let mut results = serde_json::Map::new();
        println!("{:<52} {:>14} {:>10}", "workload", "value", "unit");
        let mut report = |name: &str, value: f64, unit: &str| {
            println!("{name:<52} {value:>14.1} {unit:>10}");
            results.insert(
                name.to_owned(),
                serde_json::json!({ "value": value, "unit": unit }),
            );
        };
        if args.only.iter().any(|w| w == "account") {
            account::account(args.jobs, args.concurrency, &mut report).await?;
        }
        if args.only.iter().any(|w| w == "search-cost") {
            search::cost(args.jobs, args.concurrency, &mut report).await?;
        }
        if args.only.iter().any(|w| w == "search") {
            search::lookups(args.big_backlog, &mut report).await?;
        }
        if wants("enqueue") {
            workloads::enqueue(args.jobs, &mut report).await?;
        }
        if args.only.iter().any(|w| w == "store") {
            workloads::store_phases(args.jobs, &mut report).await?;
        }
        if wants("noop") {
            workloads::noop(args.jobs, args.concurrency, &mut report).await?;
        }
        if wants("http") {
            workloads::http(
                args.jobs.min(50_000),
                args.concurrency,
                args.receiver_base.clone(),
                &mut report,
            )
            .await?;
        }
        if wants("latency") {
            workloads::latency(&mut report).await?;
        }
        if wants("backlog") {
            workloads::backlog(args.big_backlog, args.concurrency, &mut report).await?;
        }
        if wants("instrumentation") {
            workloads::instrumentation(
                args.jobs,
                args.concurrency,
                args.receiver_base.clone(),
                &mut report,
            )
            .await?;
        }
        if wants("retry") {
            workloads::retry(args.receiver_base.clone(), &mut report).await?;
        }
        if args.only.iter().any(|w| w == "protection") {
            protection::protection(&mut report).await?;
        }
        if args.only.iter().any(|w| w == "silent-limiters") {
            protection::silent_limiters(&mut report).await?;
        }
        if args.only.iter().any(|w| w == "noop-nodes") {
            noop_nodes::noop_nodes(args.jobs, args.concurrency, &mut report).await?;
        }
        if args.only.iter().any(|w| w == "groups") {
            groups::groups(
                args.jobs,
                args.concurrency,
                args.big_backlog,
                args.rounds,
                &mut report,
            )
            .await?;
        }
        if args.only.iter().any(|w| w == "ordering") {
            ordering::ordering(
                args.jobs,
                args.concurrency,
                args.hot_key,
                args.rounds,
                &mut report,
            )
            .await?;
        }
        if args.only.iter().any(|w| w == "schedules") {
            schedules::schedules(args.schedules, &mut report).await?;
        }
        if args.only.iter().any(|w| w == "backup") {
            backup::backup(args.big_backlog, args.concurrency, &mut report).await?;
        }
        if args.only.iter().any(|w| w == "waiters") {
            waiters::waiters(
                args.jobs.min(50_000),
                args.concurrency,
                args.rounds,
                &mut report,
            )
            .await?;
        }
        if args.only.iter().any(|w| w == "callbacks") {
            callbacks::callbacks(
                args.jobs.min(50_000),
                args.concurrency,
                args.rounds,
                &mut report,
            )
            .await?;
        }
        if args.only.iter().any(|w| w == "events") {
            events::events(args.jobs, args.concurrency, args.rounds, &mut report).await?;
        }
        if args.only.iter().any(|w| w == "limiters") {
            limiters::limiters(args.nodes.max(1), &mut report).await?;
        }
        if args.only.iter().any(|w| w == "protection-nodes") {
            protection_nodes::protection_nodes(&mut report).await?;
        }
        std::fs::write(&args.out, serde_json::to_string_pretty(&results)?)?;
        eprintln!("results written to {}", args.out.display());
        Ok(())
    });
    // The schemas the workloads made on a PostgreSQL server go, whether they ran through or
    // failed.
    runtime.block_on(workloads::drop_schemas());
    outcome
}
