//! `redial simulate`: what a configuration (its retry policies, endpoint limits and queues'
//! concurrency) would do to a workload, before it goes live. The workload is a model
//! ([`workload`]); the simulation runs it through the real policy core on virtual time
//! ([`sim`]); the figures are per endpoint and in total, for people (a table) or as JSON, and
//! with `--compare` for two configurations side by side on the same workload and seed.

mod history;
mod plot;
mod workload;

use crate::config::{describe_problems, FileConfig, Resolved};
use crate::UsageError;
use anyhow::Result;
use redial_policy::endpoint::EndpointConfig;
use redial_policy::{Human, Policy};
use redial_simulate::{self as sim, Setup, Tally};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use workload::Workload;

#[derive(Debug, clap::Args)]
#[command(after_help = WORKLOAD_HELP)]
pub struct Args {
    /// The workload: a TOML file with one [[endpoint]] table per endpoint (see below).
    #[arg(long, value_name = "FILE", required_unless_present = "from_store")]
    workload: Option<PathBuf>,
    /// Replay history instead: the jobs a store holds that were created in the last --since, as
    /// they arrived, each endpoint answering as its attempt log says it did at each moment.
    /// SOURCE is a SQLite file (such as a `redial backup` copy), a data folder no `redial serve`
    /// holds, or a postgres:// URL. Without SOURCE, the store `redial serve` would use:
    /// REDIAL_DATABASE_URL, else REDIAL_DATA_DIR, else the default data folder.
    #[arg(
        long,
        value_name = "SOURCE",
        num_args = 0..=1,
        default_missing_value = "",
        conflicts_with = "workload"
    )]
    from_store: Option<String>,
    /// With --from-store: how far back to read (jobs created since then).
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = since, requires = "from_store")]
    since: Duration,
    /// The Redial configuration to simulate (the file `redial serve --config` reads: its policy,
    /// queues and endpoints); without it, the defaults.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// A second configuration, simulated on the same workload and seed, shown beside the first.
    #[arg(long, value_name = "FILE")]
    compare: Option<PathBuf>,
    /// Seeds the workload's draws (latencies, which jobs fail) and the retries' jitter; default:
    /// the workload's `seed`, else a random one (printed, to run again alike).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the figures as JSON.
    #[arg(long)]
    json: bool,
    /// Also draw the requests a second and the jobs not yet ended over time, as SVG, to FILE.
    #[arg(long, value_name = "FILE")]
    plot: Option<PathBuf>,
}

const WORKLOAD_HELP: &str = "\
Workload file (TOML), one [[endpoint]] table per endpoint:
  name = \"api.example.com\"      the endpoint's name, as [endpoints.\"<name>\"] in the configuration
  jobs = 10000                  how many jobs go to it
  queue = \"default\"             the queue they are in (its concurrency comes from the configuration)
  arrival = { rate = \"50/s\" }   or { burst = 500, every = \"1m\" }; none: all at once
  method = \"POST\"               idempotency_key = true (the default)
  latency = \"50ms\"              latency_max = \"200ms\" (uniform between); timeout = \"30s\"
  deadline = \"1h\"               from enqueue
  limit = { kind = \"token_bucket\", rate = \"100/s\", burst = 100, wait = \"seconds\", quota = \"none\" }
        or { kind = \"fixed_window\", limit = 100, window = \"1s\", ... }
        or { kind = \"sliding_log\", limit = 100, window = \"1s\", ... } (a moving window)
        or { kind = \"sliding_counter\", limit = 100, window = \"1s\", ... } (the last window
        weighted by how much of it the moving window covers)
        or { kind = \"concurrency\", limit = 5, hold = \"100ms\", ... } (at most 5 in flight,
        each answered 100 ms after it arrives, on top of latency; one more is refused)
        wait: how a refusal says when to come back: \"none\" (the default), \"seconds\"
        (Retry-After rounded up), \"truncated\", \"decimal\" (to the ms) or \"millis\"
        (retry-after-ms, as OpenAI's)
        quota: the quota on every answer: \"none\" (the default), \"x-ratelimit\" (reset in
        seconds), \"github\" (reset in epoch seconds), \"openai\" (-requests, Go durations),
        \"draft6\" (ratelimit-*), \"ietf\" (RateLimit and RateLimit-Policy)
        status = 503 refuses as nginx does, 403 as GitHub's primary limit (429 by default)
        halved = { from = \"10s\", until = \"20s\" }: the rate halves for a while
        The older retry_after, quota_headers and whole_seconds = true still speak as the kind
        is usually met: a token bucket in whole seconds, a fixed window as OpenAI's (whole
        seconds: express-rate-limit's), a sliding log as OpenAI's (flask-limiter's)
  [[endpoint.outage]]  from = \"1m\", until = \"5m\", answer = \"503\" (retry_after = \"30s\"),
                       or \"connection_refused\", \"connection_reset\", \"timeout\", or a status
  [[endpoint.failure]] answer = \"500\", ratio = 0.02, repeat = \"once\" or \"always\",
                       commit = true (the work was done, then the answer failed)
A top-level seed = 7 fixes the draws.";

/// A configuration's name for people, and what the simulation takes from it.
struct Candidate {
    name: String,
    setup: Setup,
}

fn candidate(path: Option<&Path>, workload: &Workload) -> Result<Candidate> {
    let (name, parsed) = match path {
        Some(p) => (p.display().to_string(), FileConfig::read(p)?),
        None => ("defaults".to_owned(), FileConfig::parse_all("")),
    };
    let resolved: Resolved = match parsed.resolved {
        Some(r) if parsed.problems.is_empty() => r,
        _ => return Err(UsageError(describe_problems(&name, &parsed.problems)).into()),
    };
    let mut endpoints = Vec::with_capacity(workload.endpoints.len());
    for e in &workload.endpoints {
        let queue = resolved.queues.get(&e.queue);
        if queue.is_none() && path.is_some() {
            return Err(UsageError(format!(
                "{name} has no queue \"{}\" (endpoint {} of the workload is in it)",
                e.queue, e.name
            ))
            .into());
        }
        let base = queue.map_or_else(Policy::default, |q| q.policy.clone());
        let settings = resolved.endpoints.get(&e.name);
        let cfg: EndpointConfig =
            settings.map_or_else(|| resolved.endpoint_defaults.clone(), |s| s.limits.clone());
        let policy = match settings.and_then(|s| s.policy.as_ref()) {
            Some(over) => base
                .merged(over)
                .map_err(|err| UsageError(format!("{name}: endpoint {}: policy: {err}", e.name)))?,
            None => base,
        };
        endpoints.push((cfg, policy));
    }
    let concurrency = resolved
        .queues
        .iter()
        .map(|(q, c)| (q.clone(), c.concurrency))
        .collect();
    Ok(Candidate {
        name,
        setup: Setup {
            endpoints,
            concurrency,
        },
    })
}

/// The figures of one run, per endpoint and in total.
struct Run {
    name: String,
    tallies: Vec<Tally>,
    total: Tally,
    took: Duration,
}

fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn total_of(tallies: &[Tally]) -> Tally {
    let mut t = Tally::default();
    for x in tallies {
        t.jobs += x.jobs;
        t.requests += x.requests;
        t.refused += x.refused;
        t.completed += x.completed;
        t.left += x.left;
        t.duplicates += x.duplicates;
        for (k, v) in &x.dead {
            *t.dead.entry(k).or_default() += v;
        }
        t.drain = match (t.drain, x.drain) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        t.completion_ms.extend(&x.completion_ms);
        if t.per_second.len() < x.per_second.len() {
            t.per_second.resize(x.per_second.len(), 0);
        }
        for (i, n) in x.per_second.iter().enumerate() {
            t.per_second[i] += n;
        }
        if t.backlog.len() < x.backlog.len() {
            t.backlog.resize(x.backlog.len(), 0);
        }
        for (i, n) in x.backlog.iter().enumerate() {
            t.backlog[i] += n;
        }
    }
    t.completion_ms.sort_unstable();
    t
}

fn figures(t: &Tally) -> Value {
    json!({
        "jobs": t.jobs,
        "drain_ms": if t.left == 0 { t.drain.map(|d| d.as_millis() as u64) } else { None },
        "requests": t.requests,
        "refused": t.refused,
        "completed": t.completed,
        "dead": t.dead,
        "left": t.left,
        "duplicates": t.duplicates,
        "completion_ms": {
            "p50": percentile(&t.completion_ms, 0.5),
            "p99": percentile(&t.completion_ms, 0.99),
            "max": t.completion_ms.last(),
        },
        "peak_requests_per_second": t.per_second.iter().max().copied().unwrap_or(0),
    })
}

fn human_ms(ms: Option<u64>) -> String {
    ms.map_or_else(
        || "-".to_owned(),
        |m| Human(Duration::from_millis(m)).to_string(),
    )
}

/// The rows of one endpoint's (or the total's) figures; a row for each dead-letter category in
/// `categories` (those of every run shown), 0 where this run has none.
fn rows(t: &Tally, categories: &[&str]) -> Vec<(String, String)> {
    let mut r = vec![
        ("jobs".to_owned(), t.jobs.to_string()),
        (
            "drain time".to_owned(),
            if t.left > 0 {
                format!("not drained ({} left)", t.left)
            } else {
                human_ms(t.drain.map(|d| d.as_millis() as u64))
            },
        ),
        ("requests sent".to_owned(), t.requests.to_string()),
        ("refused (429, 503)".to_owned(), t.refused.to_string()),
        ("completed".to_owned(), t.completed.to_string()),
        (
            "done twice (duplicates)".to_owned(),
            t.duplicates.to_string(),
        ),
    ];
    let dead: u64 = t.dead.values().sum();
    r.push(("dead".to_owned(), dead.to_string()));
    for k in categories {
        let v = t.dead.get(k).copied().unwrap_or(0);
        r.push((format!("  {k}"), v.to_string()));
    }
    r.push((
        "to completion p50 / p99 / max".to_owned(),
        format!(
            "{} / {} / {}",
            human_ms(percentile(&t.completion_ms, 0.5)),
            human_ms(percentile(&t.completion_ms, 0.99)),
            human_ms(t.completion_ms.last().copied())
        ),
    ));
    r.push((
        "peak requests a second".to_owned(),
        t.per_second.iter().max().copied().unwrap_or(0).to_string(),
    ));
    r
}

/// One section of the table: a title row naming the runs, then each figure, a column a run.
fn section(out: &mut String, title: &str, runs: &[Run], pick: &dyn Fn(&Run) -> &Tally) {
    const WIDTH: usize = 34;
    let mut categories: Vec<&str> = runs
        .iter()
        .flat_map(|r| pick(r).dead.keys().copied())
        .collect();
    categories.sort_unstable();
    categories.dedup();
    let columns: Vec<Vec<(String, String)>> =
        runs.iter().map(|r| rows(pick(r), &categories)).collect();
    let widest_value = columns.iter().flatten().map(|(_, v)| v.len()).max();
    let col = runs
        .iter()
        .map(|r| r.name.len())
        .chain(widest_value)
        .max()
        .unwrap_or(0)
        + 3;
    out.push_str(&format!("{title:<WIDTH$}"));
    for r in runs {
        out.push_str(&format!("{:<col$}", r.name));
    }
    trim_end(out);
    out.push('\n');
    for (row, (label, _)) in columns[0].iter().enumerate() {
        out.push_str(&format!("  {label:<w$}", w = WIDTH - 2));
        for c in &columns {
            out.push_str(&format!("{:<col$}", c[row].1));
        }
        trim_end(out);
        out.push('\n');
    }
    out.push('\n');
}

/// Drops the spaces that padded the line's last column.
fn trim_end(out: &mut String) {
    out.truncate(out.trim_end_matches(' ').len());
}

fn table(workload: &Workload, runs: &[Run], seed: u64) -> String {
    let mut out = String::new();
    for (i, e) in workload.endpoints.iter().enumerate() {
        section(&mut out, &format!("endpoint {}", e.name), runs, &|r| {
            &r.tallies[i]
        });
    }
    if workload.endpoints.len() > 1 {
        section(&mut out, "total", runs, &|r| &r.total);
    }
    let took: Vec<String> = runs
        .iter()
        .map(|r| format!("{} ms", r.took.as_millis()))
        .collect();
    out.push_str(&format!(
        "seed {seed}; simulated in {}\n",
        took.join(" and ")
    ));
    out
}

fn since(text: &str) -> Result<Duration, String> {
    redial_policy::parse_duration(text)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{text:?} is not a duration longer than zero, such as 24h or 90m"))
}

pub fn run(args: Args) -> Result<()> {
    let workload = match (&args.workload, &args.from_store) {
        (Some(path), _) => workload::read(path)?,
        (None, Some(source)) => {
            let now = redial_engine::Clock::now(&redial_engine::SystemClock);
            history::read(&history::source(source), args.since, now)?
        }
        (None, None) => unreachable!("clap requires one of --workload and --from-store"),
    };
    let seed = args
        .seed
        .or(workload.seed)
        .unwrap_or_else(redial_engine::random_u64);
    let mut candidates = vec![candidate(args.policy.as_deref(), &workload)?];
    if let Some(other) = &args.compare {
        candidates.push(candidate(Some(other), &workload)?);
    }
    let runs: Vec<Run> = candidates
        .into_iter()
        .map(|c| {
            let started = Instant::now();
            let tallies = sim::simulate(&workload, &c.setup, seed);
            let took = started.elapsed();
            let total = total_of(&tallies);
            Run {
                name: c.name,
                tallies,
                total,
                took,
            }
        })
        .collect();
    if let Some(path) = &args.plot {
        let series: Vec<plot::Series> = runs
            .iter()
            .map(|r| plot::Series {
                name: &r.name,
                per_second: r.total.per_second.iter().map(|n| u64::from(*n)).collect(),
                backlog: r.total.backlog.clone(),
            })
            .collect();
        std::fs::write(path, plot::svg(&series))
            .map_err(|e| UsageError(format!("cannot write the plot to {}: {e}", path.display())))?;
    }
    if args.json {
        let out = json!({
            "seed": seed,
            "runs": runs.iter().map(|r| json!({
                "policy": r.name,
                "endpoints": workload.endpoints.iter().zip(&r.tallies).map(|(e, t)| {
                    let mut f = figures(t);
                    f["name"] = json!(e.name);
                    f
                }).collect::<Vec<_>>(),
                "total": figures(&r.total),
                "simulated_in_ms": r.took.as_millis() as u64,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", table(&workload, &runs, seed));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
