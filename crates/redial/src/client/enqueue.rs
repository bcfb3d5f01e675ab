//! `redial enqueue`: one job from flags, or many from a JSON or NDJSON file, sent in batches.

use super::{print_json, ApiFailure, Conn, Server};
use crate::cli_args;
use crate::human::{self, say, OutputArgs};
use crate::UsageError;
use anyhow::{anyhow, Context, Result};
use redial_client::{JobInput, JobInputRequest};
use redial_policy::Timestamp;
use serde_json::{json, Value};
use std::io::{BufRead, Read};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  redial enqueue --url https://api.example.com/hook --body '{\"a\":1}'\n  \
                        redial enqueue --file jobs.ndjson\n  cat jobs.json | redial enqueue --file -"
)]
pub struct EnqueueArgs {
    #[command(flatten)]
    conn: Conn,
    /// Jobs as JSON (one object or an array) or NDJSON (one job per line), from a file or `-` for
    /// standard input. Each job has the API's shape: {"request": {"method", "url", ...}, ...}.
    #[arg(long, short = 'f', conflicts_with_all = ["url", "id", "body", "body_file"])]
    file: Option<PathBuf>,
    /// The URL to call.
    #[arg(long, required_unless_present = "file")]
    url: Option<String>,
    /// The HTTP method.
    #[arg(long, short = 'X', default_value = "POST")]
    method: String,
    /// A request header, 'Name: value'; repeat for more.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = cli_args::header)]
    headers: Vec<(String, String)>,
    /// The request body, sent as is.
    #[arg(long, short = 'd', conflicts_with = "body_file")]
    body: Option<String>,
    /// Read the request body from a file.
    #[arg(long, value_name = "FILE")]
    body_file: Option<PathBuf>,
    /// The job's id (for deduplication); generated when absent.
    #[arg(long)]
    id: Option<String>,
    /// The queue (configured on the server); `default` when absent.
    #[arg(long)]
    queue: Option<String>,
    /// Sent unchanged with every attempt (Idempotency-Key); derived from the queue and the id
    /// when absent.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Run no earlier than this (RFC 3339).
    #[arg(long, value_parser = cli_args::instant)]
    run_at: Option<Timestamp>,
    /// Give up after this instant (RFC 3339).
    #[arg(long, value_parser = cli_args::instant)]
    deadline: Option<Timestamp>,
    /// Higher runs first within its queue (default 0).
    #[arg(long)]
    priority: Option<i32>,
    /// A tag; repeat for more.
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Who the job is for (a tenant, a customer): the queue takes turns across groups.
    #[arg(long)]
    group: Option<String>,
    /// The queue's jobs with the same ordering key start one at a time, in enqueue order.
    #[arg(long)]
    ordering_key: Option<String>,
    /// Time limit of each attempt, with a unit: 10s.
    #[arg(long, value_parser = cli_args::duration)]
    timeout: Option<Duration>,
    /// Send it with this credentials profile of the server's configuration
    /// ([credentials.NAME]) instead of its endpoint's.
    #[arg(long, value_name = "NAME")]
    credentials: Option<String>,
    /// With --file: give each job a new id (dead letters exported from another Redial, taken as
    /// new jobs; their idempotency keys stay).
    #[arg(long, requires = "file")]
    new_ids: bool,
    /// With --file: a job whose id is here already as a dead letter (an export taken back) is
    /// replayed, as it was.
    #[arg(long, requires = "file", conflicts_with = "new_ids")]
    replay_existing: bool,
    /// Jobs per batch request when reading a file.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    batch_size: u32,
    #[command(flatten)]
    out: OutputArgs,
}

impl EnqueueArgs {
    /// The job the flags describe.
    fn job(&self) -> Result<JobInput> {
        let body = match (&self.body, &self.body_file) {
            (Some(b), _) => Some(b.clone()),
            (None, Some(f)) => Some(std::fs::read_to_string(f).map_err(|e| {
                UsageError(format!("cannot read --body-file {}: {e}", f.display()))
            })?),
            (None, None) => None,
        };
        Ok(JobInput {
            request: JobInputRequest {
                method: self.method.clone(),
                url: self.url.clone().unwrap_or_default(),
                headers: (!self.headers.is_empty()).then(|| json!(self.headers)),
                body: body.map(Value::from),
                timeout: self.timeout.map(|t| format!("{}ms", t.as_millis())),
                credentials: self.credentials.clone(),
            },
            id: self.id.clone(),
            queue: self.queue.clone(),
            idempotency_key: self.idempotency_key.clone(),
            run_at: self.run_at,
            deadline: self.deadline,
            priority: self.priority.map(i64::from),
            tags: (!self.tags.is_empty()).then(|| self.tags.clone()),
            group: self.group.clone(),
            ordering_key: self.ordering_key.clone(),
            ..JobInput::default()
        })
    }
}

pub async fn enqueue(args: EnqueueArgs) -> Result<()> {
    let server = args.conn.connect()?;
    if let Some(path) = &args.file {
        let how = FileImport {
            batch_size: args.batch_size as usize,
            new_ids: args.new_ids,
            replay_existing: args.replay_existing,
        };
        return enqueue_file(&server, path, &how, &args.out).await;
    }
    let job = args.job()?;
    let out = server.ask(server.client.enqueue(&job)).await?;
    if args.out.json() {
        return print_json(&out);
    }
    let what = if out.deduplicated == Some(true) {
        "was already there with the same request"
    } else {
        "enqueued"
    };
    say!(
        "job {} {what}: {}, queue {}, runs at {}",
        out.id,
        out.state,
        out.queue,
        out.run_at
    );
    Ok(())
}

/// How a file's jobs are taken.
struct FileImport {
    batch_size: usize,
    new_ids: bool,
    replay_existing: bool,
}

/// Reads jobs from JSON or NDJSON and sends them in batches, with progress on a terminal. The
/// jobs go as they were read (an exported dead letter's `dead` dropped, and its `id` with
/// `--new-ids`): the server checks them, and its refusal names the job.
async fn enqueue_file(
    server: &Server,
    path: &PathBuf,
    how: &FileImport,
    output: &OutputArgs,
) -> Result<()> {
    let batch_size = how.batch_size;
    let (jobs, unit) = read_jobs(path, how)?;
    let source = if path.as_os_str() == "-" {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    };
    // More than one batch: say how far it got, as it goes.
    let mut progress = (jobs.len() > batch_size).then(|| human::Progress::new("jobs", jobs.len()));
    let (mut inserted, mut deduplicated, mut replayed) = (0u64, 0u64, 0u64);
    for (n, chunk) in jobs.chunks(batch_size).enumerate() {
        let values: Vec<&Value> = chunk.iter().map(|(_, v)| v).collect();
        let out = server
            .ask(server.client.enqueue_batch(&values))
            .await
            .map_err(|e| batch_failed(e, chunk, n * batch_size, &source, unit))?;
        inserted += u64::try_from(out.inserted).unwrap_or(0);
        deduplicated += u64::try_from(out.deduplicated).unwrap_or(0);
        if how.replay_existing {
            for job in out.jobs.iter().filter(|j| {
                j.deduplicated == Some(true) && j.state == redial_client::JobState::Dead
            }) {
                server.ask(server.client.replay(&job.id)).await?;
                replayed += 1;
            }
        }
        if let Some(p) = progress.as_mut() {
            p.update(n * batch_size + chunk.len());
        }
    }
    if let Some(p) = &progress {
        p.finish();
    }
    if output.json() {
        return print_json(&json!({
            "inserted": inserted, "deduplicated": deduplicated, "replayed": replayed,
            "total": jobs.len(),
        }));
    }
    say!(
        "{} jobs from {source}: {} enqueued, {} already there{}",
        human::thousands(jobs.len() as u64),
        human::thousands(inserted),
        human::thousands(deduplicated),
        if how.replay_existing {
            format!(
                " ({} of them dead letters, replayed)",
                human::thousands(replayed)
            )
        } else {
            String::new()
        }
    );
    Ok(())
}

/// The jobs of a file (or standard input, `-`), each with where it was, and what to call that
/// place (line, item): their `dead` fields dropped, and their ids with `--new-ids`.
fn read_jobs(path: &PathBuf, how: &FileImport) -> Result<(Vec<(usize, Value)>, &'static str)> {
    let text = if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("reading jobs from standard input")?;
        s
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?
    };
    let (mut jobs, unit) = parse_jobs(&text)?;
    for (_, job) in &mut jobs {
        if let Value::Object(fields) = job {
            fields.remove("dead");
            if how.new_ids {
                fields.remove("id");
            }
        }
    }
    if jobs.is_empty() {
        return Err(UsageError("no jobs in the input".into()).into());
    }
    Ok((jobs, unit))
}

/// What a batch's failure says, for people: the line the job the API names came from, and
/// what was stored before it (`stored` jobs: nothing of this batch).
fn batch_failed(
    e: anyhow::Error,
    chunk: &[(usize, Value)],
    stored: usize,
    source: &str,
    unit: &str,
) -> anyhow::Error {
    let (first, last) = (chunk[0].0, chunk[chunk.len() - 1].0);
    let before = if stored == 0 {
        String::new()
    } else {
        format!("; the {stored} jobs before them were")
    };
    // The API names a job by its index in the batch: say which line it came from.
    let failure = e.downcast_ref::<ApiFailure>();
    match failure.and_then(|f| batch_index(&f.message)) {
        Some((i, rest)) if i < chunk.len() => anyhow!(
            "{source}, {unit} {}: {rest} (server answered {}); nothing from {unit}s {first} to {last} was stored{before}",
            chunk[i].0,
            failure.map_or(0, |f| f.status),
        ),
        _ => e.context(format!(
            "{source}: nothing from {unit}s {first} to {last} was stored{before}"
        )),
    }
}

/// One JSON object, a JSON array of objects, or NDJSON (one object per line; blank lines
/// skipped). Each job comes with where it was: its line (NDJSON, one object) or its place in the
/// array, and the word for that place.
fn parse_jobs(text: &str) -> Result<(Vec<(usize, Value)>, &'static str)> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') {
        let jobs: Vec<Value> = serde_json::from_str(trimmed)
            .map_err(|e| UsageError(format!("the input is not a JSON array of jobs: {e}")))?;
        return Ok((
            jobs.into_iter()
                .enumerate()
                .map(|(i, v)| (i + 1, v))
                .collect(),
            "job",
        ));
    }
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(trimmed) {
        let line = text.len() - trimmed.len();
        return Ok((vec![(text[..line].lines().count() + 1, v)], "line"));
    }
    let mut jobs = Vec::new();
    for (i, line) in text.as_bytes().lines().enumerate() {
        let line = line.context("reading the input")?;
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| UsageError(format!("line {}: not a JSON job: {e}", i + 1)))?;
        jobs.push((i + 1, v));
    }
    Ok((jobs, "line"))
}

/// `jobs[3]: request.url is ...` -> (3, `request.url is ...`).
fn batch_index(message: &str) -> Option<(usize, &str)> {
    let rest = message.strip_prefix("jobs[")?;
    let (i, rest) = rest.split_once(']')?;
    let rest = rest.trim_start_matches(':').trim_start();
    let rest = rest
        .strip_suffix("; nothing in the batch was stored")
        .unwrap_or(rest);
    Some((i.parse().ok()?, rest))
}
