//! The `protection` workload (issue 12's targets): Redial, with its default endpoint protection,
//! beside a plain retry loop ([`crate::plain`]), one after the other against the same receiver
//! shapes ([`crate::shapes`]), with the same per-job policy, concurrency and HTTP executor.
//!
//! Per shape and system it reports the drain time (first enqueue to every job completed or dead),
//! requests per job, non-2xx requests, and jobs completed, dead by category, or left at the cap.
//! Every run has a hard cap: a run that has not drained by then reports its counts as they are.
//!
//! Over 600 lines: a benchmark, not product code: its cases, runs and report.

use crate::plain::{self, PlainRun};
use crate::shapes::{self, Says, Shape, Shapes};
use crate::workloads::{http_get, receiver_app, store_in, Report};
use anyhow::Result;
use redial_engine::http::{HttpConfig, HttpExecutor};
use redial_engine::{Clock, Engine, EngineConfig, QueueConfig, SystemClock};
use redial_policy::{Backoff, Policy, Timestamp};
use redial_store::{HttpRequest, JobState, NewJob, Store};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Workers in the plain loop and the queue's concurrency in Redial (as in the `retry` workload).
pub(crate) const CONCURRENCY: usize = 32;

/// The transient backoff's base on both sides, instead of the default 2 s, to keep runs short.
/// Everything else in the policy is the default.
pub(crate) const TRANSIENT_BASE: Duration = Duration::from_millis(200);

/// How one shape is run and judged.
#[derive(Debug)]
struct Case {
    name: &'static str,
    /// `None`: the receiver's `/limited` route (10 per 100 ms window, 429 + `Retry-After`).
    shape: Option<Shape>,
    jobs: usize,
    timeout: Duration,
    cap: Duration,
    target: &'static str,
}

fn cases() -> Vec<Case> {
    let long = Duration::from_secs(10);
    vec![
        Case {
            name: "flaky",
            shape: Some(Shape::Flaky),
            jobs: 300,
            timeout: long,
            cap: Duration::from_secs(60),
            target: "all complete; drain <= 1.5x plain",
        },
        Case {
            name: "mixed",
            shape: Some(Shape::Mixed),
            jobs: 1000,
            timeout: long,
            cap: Duration::from_secs(60),
            target: "400s dead permanent, 1 request each; rest complete; drain <= 1.5x plain",
        },
        Case {
            name: "hard down 60 s",
            shape: Some(Shape::Down {
                down: Duration::from_secs(60),
            }),
            jobs: 1000,
            timeout: long,
            cap: Duration::from_secs(150),
            target: "Redial requests per job <= 1.2",
        },
        Case {
            name: "outage 20 s with Retry-After",
            shape: Some(Shape::Outage {
                down: Duration::from_secs(20),
            }),
            jobs: 1000,
            timeout: long,
            cap: Duration::from_secs(80),
            target: "Redial 0 dead; non-2xx <= 10% of jobs",
        },
        Case {
            name: "rate limit 100/s, no quota headers",
            shape: None,
            jobs: 1000,
            timeout: long,
            cap: Duration::from_secs(60),
            target: "429s <= 5% of jobs",
        },
        Case {
            name: "every request times out (200 ms)",
            shape: Some(Shape::Slow {
                delay: Duration::from_secs(1),
            }),
            jobs: 300,
            timeout: Duration::from_millis(200),
            cap: Duration::from_secs(90),
            target: "Redial holds: few requests per job",
        },
    ]
}

/// Issue 30's limiters that say little: 1,000 jobs at once (600 against the token bucket), the
/// default policy but for the transient base (a bare 429's deferral backoff starts at 5 s).
fn silent_cases() -> Vec<Case> {
    let leaky = |per_second, burst| Shape::LeakyBucket {
        per_second,
        burst,
        halves_at: None,
    };
    let case = |name, shape: Shape, jobs: usize, cap_s, target| Case {
        name,
        shape: Some(shape),
        jobs,
        timeout: Duration::from_secs(10),
        cap: Duration::from_secs(cap_s),
        target,
    };
    let fixed = |limit, says| Shape::FixedWindow {
        limit,
        window: Duration::from_secs(1),
        says,
    };
    let bare = "429s <= 10% of jobs; drain <= 1.25x jobs/rate; 0 dead";
    vec![
        case(
            "leaky bucket 20/s, bare 429s",
            leaky(20, 5),
            1000,
            200,
            bare,
        ),
        case(
            "leaky bucket 50/s, bare 429s",
            leaky(50, 10),
            1000,
            120,
            bare,
        ),
        case(
            "leaky bucket 200/s, bare 429s",
            leaky(200, 20),
            1000,
            60,
            bare,
        ),
        case(
            "fixed windows 20/s, bare 429s",
            fixed(20, Says::Nothing),
            1000,
            200,
            bare,
        ),
        case(
            "fixed windows 50/s, bare 429s",
            fixed(50, Says::Nothing),
            1000,
            120,
            bare,
        ),
        case(
            "fixed windows 200/s, bare 429s",
            fixed(200, Says::Nothing),
            1000,
            60,
            bare,
        ),
        case(
            "leaky bucket 50/s halving at 10 s, bare 429s",
            Shape::LeakyBucket {
                per_second: 50,
                burst: 10,
                halves_at: Some(Duration::from_secs(10)),
            },
            1000,
            150,
            "429s <= 10% of jobs; 0 dead (ideal 30 s: 500 at 50/s, 500 at 25/s)",
        ),
        case(
            "token bucket 50/s burst 50, Retry-After",
            Shape::TokenBucket {
                per_second: 50,
                burst: 50,
            },
            600,
            60,
            "429s <= 5% of jobs",
        ),
        // Limiters that say more, beside the bare ones: no worse than before the pace.
        case(
            "leaky bucket 50/s, Retry-After",
            Shape::TokenBucket {
                per_second: 50,
                burst: 10,
            },
            1000,
            120,
            "429s <= 10% of jobs; drain <= 1.25x jobs/rate; 0 dead",
        ),
        case(
            "fixed windows 50/s, Retry-After",
            fixed(50, Says::RetryAfter),
            1000,
            120,
            "429s <= 10% of jobs; drain <= 1.25x jobs/rate; 0 dead",
        ),
        case(
            "fixed windows 50/s, quota headers",
            fixed(50, Says::Quota),
            1000,
            120,
            "429s <= 10% of jobs; drain <= 1.25x jobs/rate; 0 dead",
        ),
    ]
}

/// One system's figures for one shape.
#[derive(Debug, Default)]
struct Figures {
    drained: Option<Duration>,
    completed: u64,
    dead: BTreeMap<String, u64>,
    unfinished: u64,
    /// Requests that reached the receiver, by answer (`200`, `500`, `reset`, ...).
    answers: BTreeMap<String, u64>,
}

impl Figures {
    fn requests(&self) -> u64 {
        self.answers.values().sum()
    }

    fn non_2xx(&self) -> u64 {
        self.requests() - self.answers.get("200").copied().unwrap_or(0)
    }

    fn dead_total(&self) -> u64 {
        self.dead.values().sum()
    }

    fn outcome(&self) -> String {
        let mut s = format!("{} completed", self.completed);
        for (category, n) in &self.dead {
            let _ = write!(s, ", {n} dead {category}");
        }
        if self.unfinished > 0 {
            let _ = write!(s, ", {} unfinished", self.unfinished);
        }
        s
    }
}

pub(crate) fn policy() -> Policy {
    let d = Policy::default();
    Policy {
        transient: Backoff {
            base: TRANSIENT_BASE,
            ..d.transient
        },
        ..d
    }
}

fn new_job(k: usize, url: String, timeout: Duration, now: Timestamp) -> NewJob {
    let job = crate::workloads::job(format!("p{k}"), "default", &url, now);
    NewJob {
        ordering: None,
        // One endpoint for the whole run, whichever listener a job's URL names.
        endpoint: "shape".into(),
        request: HttpRequest {
            timeout_ms: Some(timeout.as_millis() as u64),
            credentials: None,
            ..job.request
        },
        ..job
    }
}

/// The receiver of this workload: the benchmark receiver with the shape routes, and the reset
/// listener. Always in this process (`--receiver-base` is not used): the shapes' clocks start
/// with each run.
struct Receiver {
    base: String,
    raw_base: String,
    shapes: Arc<Shapes>,
}

impl Receiver {
    async fn start() -> Result<Receiver> {
        let shapes = Arc::new(Shapes::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let base = format!("http://{}", listener.local_addr()?);
        let app = receiver_app().merge(shapes::routes(shapes.clone()));
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let raw_base = shapes::serve_raw(shapes.clone()).await?;
        Ok(Receiver {
            base,
            raw_base,
            shapes,
        })
    }

    /// Starts the run's clock and gives each job's URL.
    async fn begin(&self, case: &Case, run: &str) -> Result<Vec<String>> {
        match case.shape {
            Some(shape) => {
                self.shapes.begin(run, shape);
                Ok((0..case.jobs)
                    .map(|k| {
                        let base = if shape.uses_reset_listener(k) {
                            &self.raw_base
                        } else {
                            &self.base
                        };
                        format!("{base}/shape/{run}/{k}")
                    })
                    .collect())
            }
            None => {
                http_get(&format!("{}/reset", self.base)).await?;
                Ok(vec![format!("{}/limited", self.base); case.jobs])
            }
        }
    }

    async fn answers(&self, case: &Case, run: &str) -> Result<BTreeMap<String, u64>> {
        match case.shape {
            Some(_) => Ok(self
                .shapes
                .answers(run)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect()),
            None => {
                let counts: BTreeMap<String, u64> =
                    serde_json::from_str(&http_get(&format!("{}/stats", self.base)).await?)?;
                Ok(counts)
            }
        }
    }
}

pub(crate) fn executor() -> Result<HttpExecutor> {
    Ok(HttpExecutor::new(HttpConfig {
        allow_private_networks: true,
        ..HttpConfig::default()
    })?)
}

async fn run_redial(case: &Case, rx: &Receiver) -> Result<Figures> {
    let run = format!("{}-redial", slug(case.name));
    let dir = tempfile::tempdir()?;
    let store = store_in(&dir).await?;
    let mut config = EngineConfig {
        poll_interval: Duration::from_millis(100),
        ..EngineConfig::default()
    };
    // REDIAL_BENCH_PROTECTION=off: every endpoint protection off, to tell what protection
    // costs from what the durable queue costs beside the plain loop.
    if std::env::var("REDIAL_BENCH_PROTECTION").is_ok_and(|v| v == "off") {
        let d = &mut config.endpoint_defaults;
        d.first_contact_ramp = false;
        d.probe_first = false;
        d.learn_pace = false;
        d.learn_from_headers = false;
        d.retry_budget.enabled = false;
        d.breaker.enabled = false;
    }
    config.queues.clear();
    config
        .queues
        .insert("default".into(), QueueConfig::new(CONCURRENCY, policy()));
    let e = Engine::new(
        store.clone(),
        config,
        Arc::new(SystemClock),
        Arc::new(executor()?),
    );
    let urls = rx.begin(case, &run).await?;
    let now = SystemClock.now();
    let jobs: Vec<NewJob> = urls
        .into_iter()
        .enumerate()
        .map(|(k, url)| new_job(k, url, case.timeout, now))
        .collect();
    let n = jobs.len() as u64;
    let start = Instant::now();
    store.job_insert_batch(jobs).await?;
    let running = e.start().await?;
    let mut drained = None;
    loop {
        if finished(&store).await? >= n {
            drained = Some(start.elapsed());
            break;
        }
        if start.elapsed() >= case.cap {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.shutdown(Duration::from_secs(5)).await;
    let mut f = Figures {
        drained,
        answers: rx.answers(case, &run).await?,
        ..Figures::default()
    };
    for c in store.stats().await?.by_queue {
        match c.state {
            JobState::Completed => f.completed += c.count,
            JobState::Dead => {
                let category = c.category.map_or("unknown category", |c| c.as_str());
                *f.dead.entry(category.to_owned()).or_default() += c.count;
            }
            JobState::Cancelled => *f.dead.entry("cancelled".into()).or_default() += c.count,
            _ => f.unfinished += c.count,
        }
    }
    Ok(f)
}

/// Jobs completed, dead or cancelled, by the store's counts.
pub(crate) async fn finished(store: &Arc<dyn Store>) -> Result<u64> {
    Ok(store
        .stats()
        .await?
        .by_queue
        .iter()
        .filter(|c| c.state.is_finished())
        .map(|c| c.count)
        .sum())
}

async fn run_plain(case: &Case, rx: &Receiver) -> Result<Figures> {
    let run = format!("{}-plain", slug(case.name));
    let urls = rx.begin(case, &run).await?;
    let now = SystemClock.now();
    let jobs = urls
        .into_iter()
        .enumerate()
        .map(|(k, url)| new_job(k, url, case.timeout, now))
        .collect();
    let PlainRun {
        drained,
        completed,
        dead,
        unfinished,
    } = plain::run(jobs, executor()?, policy(), CONCURRENCY, case.cap).await;
    Ok(Figures {
        drained,
        completed,
        dead: dead.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        unfinished,
        answers: rx.answers(case, &run).await?,
    })
}

fn slug(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Whether Redial met the case's target, as far as the figures can tell.
fn verdict(case: &Case, r: &Figures, p: &Figures) -> String {
    let n = case.jobs as f64;
    let ratio = match (r.drained, p.drained) {
        (Some(a), Some(b)) => Some(a.as_secs_f64() / b.as_secs_f64()),
        _ => None,
    };
    let met = match case.name {
        "flaky" => r.completed == case.jobs as u64 && ratio.is_some_and(|x| x <= 1.5),
        "mixed" => {
            let permanent = (0..case.jobs).filter(|k| k % 5 == 3).count() as u64;
            r.dead.get("permanent").copied() == Some(permanent)
                && r.answers.get("400").copied() == Some(permanent)
                && r.completed == case.jobs as u64 - permanent
                && ratio.is_some_and(|x| x <= 1.5)
        }
        "hard down 60 s" => {
            // The target's "requests per job" can be read two ways: give both.
            let all = r.requests() as f64 / n;
            let failed = r.non_2xx() as f64 / n;
            let met = |x: f64| if x <= 1.2 { "met" } else { "not met" };
            return format!(
                "all requests per job {all:.2}: {}; failed requests per job {failed:.2}: {}",
                met(all),
                met(failed)
            );
        }
        "outage 20 s with Retry-After" => r.dead_total() == 0 && r.non_2xx() as f64 <= 0.1 * n,
        "rate limit 100/s, no quota headers" => {
            r.answers.get("429").copied().unwrap_or(0) as f64 <= 0.05 * n
        }
        "token bucket 50/s burst 50, Retry-After" => {
            r.answers.get("429").copied().unwrap_or(0) as f64 <= 0.05 * n
        }
        name if name.ends_with("bare 429s")
            || name == "leaky bucket 50/s, Retry-After"
            || name.starts_with("fixed windows 50/s,") =>
        {
            let refused = r.answers.get("429").copied().unwrap_or(0) as f64;
            let ideal = match case.shape {
                Some(Shape::LeakyBucket {
                    per_second,
                    halves_at: Some(_),
                    ..
                }) => n / 2.0 / f64::from(per_second) + n / 2.0 / f64::from(per_second / 2),
                shape => n / shape.and_then(Shape::limit_rate).unwrap_or(1.0),
            };
            let drain = r.drained.map(|d| d.as_secs_f64() / ideal);
            return format!(
                "429s {:.1}% of jobs, drain {} the ideal {ideal:.1} s, {} dead: {}",
                refused * 100.0 / n,
                drain.map_or("not drained".into(), |x| format!("{x:.2}x")),
                r.dead_total(),
                if refused <= 0.1 * n && drain.is_some_and(|x| x <= 1.25) && r.dead_total() == 0 {
                    "met"
                } else {
                    "not met"
                }
            );
        }
        _ => return "no numeric target".into(),
    };
    if met { "met" } else { "not met" }.into()
}

pub async fn protection(report: &mut Report<'_>) -> Result<()> {
    run_cases(report, cases(), "protection").await
}

/// The `silent-limiters` workload: [`silent_cases`], Redial beside the plain loop, and the
/// per-second answers of Redial's run against the leaky bucket of 50/s.
pub async fn silent_limiters(report: &mut Report<'_>) -> Result<()> {
    run_cases(report, silent_cases(), "silent limiters").await
}

async fn run_cases(report: &mut Report<'_>, cases: Vec<Case>, workload: &str) -> Result<()> {
    let rx = Receiver::start().await?;
    let mut traces = String::new();
    let mut table = String::from(
        "| shape | system | drain (s) | requests/job | non-2xx (answers by kind) | outcome |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    let mut verdicts = String::new();
    // REDIAL_BENCH_CASES=flaky,mixed runs only the cases whose names start so (a quick look at
    // the sub-second ones, several times over).
    let only: Vec<String> = std::env::var("REDIAL_BENCH_CASES")
        .map(|v| v.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    for case in cases {
        if !only.is_empty() && !only.iter().any(|o| case.name.starts_with(o.as_str())) {
            continue;
        }
        eprintln!("{workload}: {} ({} jobs), Redial", case.name, case.jobs);
        let r = run_redial(&case, &rx).await?;
        if case.shape.is_some_and(|s| s.limit_rate().is_some()) {
            let run = format!("{}-redial", slug(case.name));
            let per_second = rx
                .shapes
                .per_second(&run)
                .iter()
                .map(|(s, (ok, refused))| format!("{s}: {ok}/{refused}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                traces,
                "{}, Redial, per second (2xx/429): {per_second}",
                case.name
            );
        }
        eprintln!("{workload}: {} ({} jobs), plain loop", case.name, case.jobs);
        let p = run_plain(&case, &rx).await?;
        for (system, f) in [("Redial", &r), ("plain", &p)] {
            let name = format!("{workload}, {}: {system}", case.name);
            match f.drained {
                Some(d) => report(&format!("{name}: drain time"), d.as_secs_f64(), "s"),
                None => report(
                    &format!("{name}: not drained within"),
                    case.cap.as_secs_f64(),
                    "s",
                ),
            }
            report(
                &format!("{name}: requests per job"),
                f.requests() as f64 / case.jobs as f64,
                "requests",
            );
            report(
                &format!("{name}: non-2xx requests"),
                f.non_2xx() as f64,
                "requests",
            );
            report(&format!("{name}: completed"), f.completed as f64, "jobs");
            for (category, count) in &f.dead {
                report(&format!("{name}: dead {category}"), *count as f64, "jobs");
            }
            if f.unfinished > 0 {
                report(&format!("{name}: unfinished"), f.unfinished as f64, "jobs");
            }
            let drain = f.drained.map_or_else(
                || format!("not drained in {} s", case.cap.as_secs()),
                |d| format!("{:.2}", d.as_secs_f64()),
            );
            let answers = f
                .answers
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                table,
                "| {} | {system} | {drain} | {:.2} | {} ({answers}) | {} |",
                case.name,
                f.requests() as f64 / case.jobs as f64,
                f.non_2xx(),
                f.outcome(),
            );
        }
        if let (Some(a), Some(b)) = (r.drained, p.drained) {
            report(
                &format!("{workload}, {}: drain time Redial/plain", case.name),
                a.as_secs_f64() / b.as_secs_f64(),
                "x",
            );
        }
        if p.requests() > 0 {
            report(
                &format!("{workload}, {}: requests Redial/plain", case.name),
                r.requests() as f64 / p.requests() as f64,
                "x",
            );
        }
        let _ = writeln!(
            verdicts,
            "{}: target {}: {}",
            case.name,
            case.target,
            verdict(&case, &r, &p)
        );
    }
    eprintln!("\n{table}\n{verdicts}\n{traces}");
    Ok(())
}
