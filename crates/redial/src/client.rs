//! The subcommands that talk to a running server: enqueue, jobs, dead-letters, stats.

use crate::cli_args;
use crate::human::{self, say, say_part, OutputArgs};
use crate::UsageError;
use anyhow::{anyhow, Context, Result};
use redial_policy::Timestamp;
use serde_json::{json, Map, Value};
use std::io::{BufRead, IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

/// Where the server is, and how to authenticate.
#[derive(Debug, clap::Args)]
pub struct Conn {
    /// The server's base URL.
    #[arg(
        long,
        env = "REDIAL_SERVER",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub(crate) server: String,
    /// Bearer token. Prefer the environment variable: flags show in `ps`.
    #[arg(long, env = "REDIAL_TOKEN", hide_env_values = true, global = true)]
    pub(crate) token: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    fn new(conn: &Conn) -> Result<Client> {
        let base = server_base(&conn.server)?;
        Ok(Client {
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .no_proxy()
                .build()
                .context("building the HTTP client")?,
            base,
            token: conn.token.clone().filter(|t| !t.is_empty()),
        })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.with_context(|| {
            format!(
                "cannot reach the server at {}: is `redial serve` running there? (--server or REDIAL_SERVER says where)",
                self.base
            )
        })?;
        let status = resp.status();
        let text = resp.text().await.context("reading the server's answer")?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if status.is_success() {
            return Ok(value);
        }
        Err(self.failure(status, &value))
    }

    /// A POST whose successful answer is not JSON (a backup): the response, to read as it comes,
    /// with no bound on how long the whole takes (only on each wait for more).
    pub(crate) async fn post_streamed(conn: &Conn, path: &str) -> Result<reqwest::Response> {
        let client = Client::new(conn)?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(600))
            .no_proxy()
            .build()
            .context("building the HTTP client")?;
        let mut req = http.post(format!("{}{path}", client.base));
        if let Some(t) = &client.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.with_context(|| {
            format!(
                "cannot reach the server at {}: is `redial serve` running there? (--server or REDIAL_SERVER says where)",
                client.base
            )
        })?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = resp.text().await.context("reading the server's answer")?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        Err(client.failure(status, &value))
    }

    /// The error a non-2xx answer means, as the CLI says it.
    fn failure(&self, status: reqwest::StatusCode, value: &Value) -> anyhow::Error {
        let code = value["error"]["code"].as_str().unwrap_or("error");
        let message = value["error"]["message"]
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        // What the API says to programs ("send a header") is not what a person at the CLI does.
        let message = match (status.as_u16(), &self.token) {
            (401, None) => {
                "the server needs a token: set REDIAL_TOKEN to the server's token (or pass --token)"
                    .to_owned()
            }
            (401, Some(_)) => {
                "the server refused the token in REDIAL_TOKEN (or --token): it is not the server's token"
                    .to_owned()
            }
            _ => message,
        };
        anyhow!(ApiFailure {
            status: status.as_u16(),
            code: code.to_owned(),
            message,
        })
    }
}

/// An error answer of the API, as the CLI says it.
#[derive(Debug)]
struct ApiFailure {
    status: u16,
    code: String,
    message: String,
}

impl std::fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "server answered {} {}: {}",
            self.status, self.code, self.message
        )
    }
}

impl std::error::Error for ApiFailure {}

/// The server's base URL from `--server` or `REDIAL_SERVER`: `localhost:8080` (no scheme) means
/// `http://localhost:8080`.
fn server_base(given: &str) -> Result<String> {
    let given = given.trim().trim_end_matches('/');
    let base = if given.contains("://") {
        given.to_owned()
    } else {
        format!("http://{given}")
    };
    match url::Url::parse(&base) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(base),
        Ok(u) => Err(UsageError(format!(
            "--server (or REDIAL_SERVER) {given:?} is not an http:// or https:// address of a server (scheme {:?})",
            u.scheme()
        ))
        .into()),
        Err(e) => Err(UsageError(format!(
            "--server (or REDIAL_SERVER) {given:?} is not an address such as http://127.0.0.1:8080: {e}"
        ))
        .into()),
    }
}

fn print_json(v: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(v).context("encoding JSON")?;
    std::println!("{}", human::printable_json(&text));
    Ok(())
}

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
    /// Time limit of each attempt, with a unit: 10s.
    #[arg(long, value_parser = cli_args::duration)]
    timeout: Option<Duration>,
    /// Jobs per batch request when reading a file.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    batch_size: u32,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn enqueue(args: EnqueueArgs) -> Result<()> {
    let client = Client::new(&args.conn)?;
    if let Some(path) = &args.file {
        return enqueue_file(&client, path, args.batch_size as usize, &args.out).await;
    }
    let mut request = Map::new();
    request.insert("method".into(), json!(args.method));
    request.insert("url".into(), json!(args.url));
    if !args.headers.is_empty() {
        request.insert("headers".into(), json!(args.headers));
    }
    let body = match (&args.body, &args.body_file) {
        (Some(b), _) => Some(b.clone()),
        (None, Some(f)) => Some(
            std::fs::read_to_string(f)
                .map_err(|e| UsageError(format!("cannot read --body-file {}: {e}", f.display())))?,
        ),
        (None, None) => None,
    };
    if let Some(b) = body {
        request.insert("body".into(), json!(b));
    }
    if let Some(t) = args.timeout {
        request.insert("timeout".into(), json!(format!("{}ms", t.as_millis())));
    }
    let mut job = Map::new();
    job.insert("request".into(), Value::Object(request));
    let mut set = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            job.insert(k.into(), v);
        }
    };
    set("id", args.id.map(Value::from));
    set("queue", args.queue.map(Value::from));
    set("idempotency_key", args.idempotency_key.map(Value::from));
    set("run_at", args.run_at.map(|t| json!(t.to_string())));
    set("deadline", args.deadline.map(|t| json!(t.to_string())));
    set("priority", args.priority.map(Value::from));
    set("tags", (!args.tags.is_empty()).then(|| json!(args.tags)));
    set("group", args.group.map(Value::from));
    let out = client
        .call(reqwest::Method::POST, "/v1/jobs", Some(&Value::Object(job)))
        .await?;
    if args.out.json() {
        return print_json(&out);
    }
    let what = if out["deduplicated"] == true {
        "was already there with the same request"
    } else {
        "enqueued"
    };
    say!(
        "job {} {what}: {}, queue {}, runs at {}",
        human::s(&out, "id"),
        human::s(&out, "state"),
        human::s(&out, "queue"),
        human::s(&out, "run_at")
    );
    Ok(())
}

/// Reads jobs from JSON or NDJSON and sends them in batches, with progress on a terminal.
async fn enqueue_file(
    client: &Client,
    path: &PathBuf,
    batch_size: usize,
    output: &OutputArgs,
) -> Result<()> {
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
    let (jobs, unit) = parse_jobs(&text)?;
    if jobs.is_empty() {
        return Err(UsageError("no jobs in the input".into()).into());
    }
    let source = if path.as_os_str() == "-" {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    };
    // More than one batch: say how far it got, as it goes.
    let mut progress = (jobs.len() > batch_size).then(|| human::Progress::new("jobs", jobs.len()));
    let (mut inserted, mut deduplicated) = (0u64, 0u64);
    for (n, chunk) in jobs.chunks(batch_size).enumerate() {
        let values: Vec<&Value> = chunk.iter().map(|(_, v)| v).collect();
        let out = client
            .call(
                reqwest::Method::POST,
                "/v1/jobs/batch",
                Some(&json!({ "jobs": values })),
            )
            .await
            .map_err(|e| {
                let (first, last) = (chunk[0].0, chunk[chunk.len() - 1].0);
                let stored = n * batch_size;
                let before = if stored == 0 {
                    String::new()
                } else {
                    format!("; the {stored} jobs before them were")
                };
                // The API names a job by its index in the batch: say which line it came from.
                match e.downcast_ref::<ApiFailure>().and_then(|f| batch_index(&f.message)) {
                    Some((i, rest)) if i < chunk.len() => anyhow!(
                        "{source}, {unit} {}: {rest} (server answered {}); nothing from {unit}s {first} to {last} was stored{before}",
                        chunk[i].0,
                        e.downcast_ref::<ApiFailure>().map_or(0, |f| f.status),
                    ),
                    _ => e.context(format!(
                        "{source}: nothing from {unit}s {first} to {last} was stored{before}"
                    )),
                }
            })?;
        inserted += out["inserted"].as_u64().unwrap_or(0);
        deduplicated += out["deduplicated"].as_u64().unwrap_or(0);
        if let Some(p) = progress.as_mut() {
            p.update(n * batch_size + chunk.len());
        }
    }
    if let Some(p) = &progress {
        p.finish();
    }
    if output.json() {
        return print_json(
            &json!({ "inserted": inserted, "deduplicated": deduplicated, "total": jobs.len() }),
        );
    }
    say!(
        "{} jobs from {source}: {} enqueued, {} already there",
        human::thousands(jobs.len() as u64),
        human::thousands(inserted),
        human::thousands(deduplicated)
    );
    Ok(())
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

#[derive(Debug, clap::Subcommand)]
pub enum JobsCommand {
    /// List jobs, oldest first.
    List(ListArgs),
    /// Show a job with its attempt log.
    Show(IdArgs),
    /// Replay a dead job: back to ready, counters reset, same idempotency key.
    Replay(IdArgs),
    /// Dismiss a dead job: it and its attempts are deleted.
    Dismiss(IdArgs),
    /// Cancel a job that has not finished.
    Cancel(IdArgs),
}

#[derive(Debug, clap::Args)]
pub struct IdArgs {
    #[command(flatten)]
    conn: Conn,
    /// The job's id.
    id: String,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    conn: Conn,
    /// Only jobs of this queue.
    #[arg(long)]
    queue: Option<String>,
    /// scheduled, ready, running, deferred, completed, dead or cancelled.
    #[arg(long)]
    state: Option<String>,
    /// A dead-letter category: permanent, transient_exhausted, unknown_exhausted,
    /// deferral_exhausted, deadline_exceeded or budget_exhausted.
    #[arg(long)]
    category: Option<String>,
    /// Only jobs of this endpoint (a URL origin such as https://api.example.com).
    #[arg(long)]
    endpoint: Option<String>,
    /// Jobs to show at most.
    #[arg(long, default_value_t = 50)]
    limit: u32,
    #[command(flatten)]
    out: OutputArgs,
}

fn path_id(id: &str) -> String {
    url::form_urlencoded::byte_serialize(id.as_bytes()).collect()
}

pub async fn jobs(cmd: JobsCommand) -> Result<()> {
    match cmd {
        JobsCommand::List(a) => list(a).await,
        JobsCommand::Show(a) => {
            let out = Client::new(&a.conn)?
                .call(
                    reqwest::Method::GET,
                    &format!("/v1/jobs/{}", path_id(&a.id)),
                    None,
                )
                .await?;
            if a.out.json() {
                return print_json(&out);
            }
            say_part!("{}", human::job(&out));
            Ok(())
        }
        JobsCommand::Replay(a) => action(&a, "replay").await,
        JobsCommand::Dismiss(a) => action(&a, "dismiss").await,
        JobsCommand::Cancel(a) => action(&a, "cancel").await,
    }
}

async fn action(a: &IdArgs, verb: &str) -> Result<()> {
    let out = Client::new(&a.conn)?
        .call(
            reqwest::Method::POST,
            &format!("/v1/jobs/{}/{verb}", path_id(&a.id)),
            None,
        )
        .await?;
    if a.out.json() {
        return print_json(&out);
    }
    match verb {
        "dismiss" => say!("job {} dismissed (deleted with its attempts)", a.id),
        "replay" => say!(
            "job {} replayed: {}, runs again from {} with the same idempotency key",
            a.id,
            human::s(&out, "state"),
            human::s(&out, "run_at")
        ),
        _ if out["cancel_requested"] == true && out["state"] == "running" => say!(
            "job {}: cancel requested; it ends cancelled when its running attempt returns (unless that attempt completes it)",
            a.id
        ),
        _ => say!("job {} {}", a.id, human::s(&out, "state")),
    }
    Ok(())
}

async fn list(a: ListArgs) -> Result<()> {
    let client = Client::new(&a.conn)?;
    let mut query: Vec<(&str, String)> = Vec::new();
    for (k, v) in [
        ("queue", &a.queue),
        ("state", &a.state),
        ("category", &a.category),
        ("endpoint", &a.endpoint),
    ] {
        if let Some(v) = v {
            query.push((k, v.clone()));
        }
    }
    let mut jobs = Vec::new();
    let mut cursor: Option<String> = None;
    while jobs.len() < a.limit as usize {
        let page_size = (a.limit as usize - jobs.len()).min(500);
        let mut q = query.clone();
        q.push(("limit", page_size.to_string()));
        if let Some(c) = &cursor {
            q.push(("cursor", c.clone()));
        }
        let qs: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(q)
            .finish();
        let page = client
            .call(reqwest::Method::GET, &format!("/v1/jobs?{qs}"), None)
            .await?;
        jobs.extend(page["jobs"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    if a.out.json() {
        return print_json(&Value::Array(jobs));
    }
    if jobs.is_empty() {
        say!("no job matches");
        return Ok(());
    }
    say!("{}", human::jobs(&jobs));
    Ok(())
}

#[derive(Debug, clap::Subcommand)]
pub enum DeadLettersCommand {
    /// Replay every dead job matching the filter.
    Replay(FilterArgs),
    /// Dismiss (delete) every dead job matching the filter.
    Dismiss(FilterArgs),
}

#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    #[command(flatten)]
    conn: Conn,
    /// Only dead jobs of this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only this dead-letter category: permanent, transient_exhausted, unknown_exhausted,
    /// deferral_exhausted, deadline_exceeded or budget_exhausted.
    #[arg(long)]
    category: Option<String>,
    /// Only dead jobs of this endpoint (a URL origin such as https://api.example.com).
    #[arg(long)]
    endpoint: Option<String>,
    /// Created at or after (RFC 3339).
    #[arg(long, value_parser = cli_args::instant)]
    since: Option<Timestamp>,
    /// Created before (RFC 3339).
    #[arg(long, value_parser = cli_args::instant)]
    until: Option<Timestamp>,
    /// Act on every dead letter (needed when no filter is given).
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn dead_letters(cmd: DeadLettersCommand) -> Result<()> {
    let (a, verb) = match cmd {
        DeadLettersCommand::Replay(a) => (a, "replay"),
        DeadLettersCommand::Dismiss(a) => (a, "dismiss"),
    };
    let mut filter = Map::new();
    for (k, v) in [
        ("queue", &a.queue),
        ("category", &a.category),
        ("endpoint", &a.endpoint),
    ] {
        if let Some(v) = v {
            filter.insert(k.into(), json!(v));
        }
    }
    for (k, v) in [("since", a.since), ("until", a.until)] {
        if let Some(t) = v {
            filter.insert(k.into(), json!(t.to_string()));
        }
    }
    if filter.is_empty() && !a.all {
        return Err(UsageError(format!(
            "no filter: give --queue, --category, --endpoint, --since or --until, or --all to {verb} every dead letter"
        ))
        .into());
    }
    if a.all {
        filter.insert("all".into(), json!(true));
    }
    let client = Client::new(&a.conn)?;
    // On a terminal, say how many first: a bulk action over many jobs takes a moment.
    let started = std::time::Instant::now();
    let terminal = std::io::stderr().is_terminal() && !a.out.json();
    if terminal {
        let qs: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(
                filter
                    .iter()
                    .filter(|(k, _)| *k != "all")
                    .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?))),
            )
            .finish();
        if let Ok(groups) = client
            .call(
                reqwest::Method::GET,
                &format!("/v1/dead-letters/groups?{qs}"),
                None,
            )
            .await
        {
            let n = groups["total"].as_u64().unwrap_or(0);
            let doing = if verb == "replay" {
                "replaying"
            } else {
                "dismissing"
            };
            eprint!("{doing} {} dead jobs...", human::thousands(n));
        }
    }
    let out = client
        .call(
            reqwest::Method::POST,
            &format!("/v1/dead-letters/{verb}"),
            Some(&Value::Object(filter)),
        )
        .await;
    if terminal {
        eprintln!(" done in {:.1} s", started.elapsed().as_secs_f64());
    }
    let out = out?;
    if a.out.json() {
        return print_json(&out);
    }
    let done = if verb == "replay" {
        "replayed (back to ready, same idempotency keys)"
    } else {
        "dismissed"
    };
    say!("{} dead jobs {done}", human::s(&out, "affected"));
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn stats(a: StatsArgs) -> Result<()> {
    let out = Client::new(&a.conn)?
        .call(reqwest::Method::GET, "/v1/stats", None)
        .await?;
    if a.out.json() {
        return print_json(&out);
    }
    say!(
        "{:<16} {:<10} {:<20} {:>8}",
        "QUEUE",
        "STATE",
        "CATEGORY",
        "COUNT"
    );
    for c in out["queues"].as_array().into_iter().flatten() {
        say!(
            "{:<16} {:<10} {:<20} {:>8}",
            c["queue"].as_str().unwrap_or("-"),
            c["state"].as_str().unwrap_or("-"),
            c["category"].as_str().unwrap_or("-"),
            c["count"].to_string()
        );
    }
    say!();
    say!("{:<40} {:<10} {:>8}", "ENDPOINT", "STATE", "COUNT");
    for c in out["endpoints"].as_array().into_iter().flatten() {
        say!(
            "{:<40} {:<10} {:>8}",
            c["endpoint"].as_str().unwrap_or("-"),
            c["state"].as_str().unwrap_or("-"),
            c["count"].to_string()
        );
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EndpointsArgs {
    #[command(subcommand)]
    command: Option<EndpointsCommand>,
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum EndpointsCommand {
    /// One endpoint in full: pause, limits in force, budget, breaker and its history.
    Show(EndpointShowArgs),
    /// Hold every job of an endpoint, on every node, until resumed (or for a while).
    Pause(PauseArgs),
    /// Lift a hand pause, and end a pause the endpoint's answers set (a server-given wait).
    Resume(TargetArgs),
    /// Close the endpoint's circuit breaker now, with an empty window.
    #[command(name = "reset-breaker")]
    ResetBreaker(TargetArgs),
}

/// What a pause by hand applies to, why, and for how long.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("end").multiple(false))]
pub struct PauseArgs {
    #[command(flatten)]
    conn: Conn,
    /// The endpoint's name (a URL origin such as https://api.example.com) or the queue's.
    name: String,
    /// Why, for the people who see it held.
    #[arg(long)]
    reason: Option<String>,
    /// End the pause after this long, with a unit: 30m. Without --for or --until, it lasts
    /// until resumed.
    #[arg(long = "for", value_name = "DURATION", group = "end")]
    for_: Option<String>,
    /// End the pause at this instant (RFC 3339).
    #[arg(long, value_parser = cli_args::instant, group = "end")]
    until: Option<Timestamp>,
    #[command(flatten)]
    out: OutputArgs,
}

/// An endpoint or a queue to act on.
#[derive(Debug, clap::Args)]
pub struct TargetArgs {
    #[command(flatten)]
    conn: Conn,
    /// The endpoint's name (a URL origin such as https://api.example.com) or the queue's.
    name: String,
    #[command(flatten)]
    out: OutputArgs,
}

impl PauseArgs {
    fn body(&self) -> Value {
        let mut body = Map::new();
        if let Some(r) = &self.reason {
            body.insert("reason".into(), json!(r));
        }
        if let Some(f) = &self.for_ {
            body.insert("for".into(), json!(f));
        }
        if let Some(u) = self.until {
            body.insert("until".into(), json!(u.to_string()));
        }
        Value::Object(body)
    }
}

/// Says what a hand pause or resume left in force, in one line.
fn print_paused(kind: &str, name: &str, out: &Value, json: bool) -> Result<()> {
    if json {
        return print_json(out);
    }
    let p = &out["paused_by_hand"];
    if p.is_null() {
        say!("{kind} {name} is not paused by hand");
    } else {
        let until = p["until"]
            .as_str()
            .map_or_else(|| "until resumed".to_owned(), |u| format!("until {u}"));
        let reason = p["reason"].as_str().filter(|r| !r.is_empty());
        say!(
            "{kind} {name} paused {until}{}",
            reason.map_or_else(String::new, |r| format!(": {r}"))
        );
    }
    Ok(())
}

/// `POST /v1/{kind}s/{name}/{verb}`: a pause, resume or reset of a queue or an endpoint.
async fn control(
    conn: &Conn,
    kind: &str,
    name: &str,
    verb: &str,
    body: Option<&Value>,
) -> Result<Value> {
    Client::new(conn)?
        .call(
            reqwest::Method::POST,
            &format!("/v1/{kind}s/{}/{verb}", path_id(name)),
            body,
        )
        .await
}

#[derive(Debug, clap::Args)]
pub struct EndpointShowArgs {
    #[command(flatten)]
    conn: Conn,
    /// The endpoint's name: a URL origin such as https://api.example.com.
    name: String,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn endpoints(a: EndpointsArgs) -> Result<()> {
    match a.command {
        Some(EndpointsCommand::Show(s)) => {
            let out = Client::new(&s.conn)?
                .call(
                    reqwest::Method::GET,
                    &format!("/v1/endpoints/{}", path_id(&s.name)),
                    None,
                )
                .await?;
            if s.out.json() {
                return print_json(&out);
            }
            say_part!("{}", human::endpoint(&out));
            return Ok(());
        }
        Some(EndpointsCommand::Pause(p)) => {
            let out = control(&p.conn, "endpoint", &p.name, "pause", Some(&p.body())).await?;
            return print_paused("endpoint", &p.name, &out, p.out.json());
        }
        Some(EndpointsCommand::Resume(t)) => {
            let out = control(&t.conn, "endpoint", &t.name, "resume", None).await?;
            if !t.out.json() {
                let holding = out["holding"].as_str().unwrap_or("nothing");
                say!(
                    "endpoint {} resumed; holding its jobs now: {holding}",
                    t.name
                );
                return Ok(());
            }
            return print_json(&out);
        }
        Some(EndpointsCommand::ResetBreaker(t)) => {
            let out = control(&t.conn, "endpoint", &t.name, "reset-breaker", None).await?;
            if !t.out.json() {
                say!(
                    "endpoint {} breaker {}",
                    t.name,
                    out["breaker"].as_str().unwrap_or("-")
                );
                return Ok(());
            }
            return print_json(&out);
        }
        None => {}
    }
    let out = Client::new(&a.conn)?
        .call(reqwest::Method::GET, "/v1/endpoints", None)
        .await?;
    if a.out.json() {
        return print_json(&out);
    }
    say!(
        "{:<36} {:<9} {:>6} {:>5} {:>7}  HOLDING",
        "ENDPOINT",
        "BREAKER",
        "HELD",
        "FLY",
        "BUDGET"
    );
    for e in out["endpoints"].as_array().into_iter().flatten() {
        say!(
            "{:<36} {:<9} {:>6} {:>5} {:>7}  {}",
            e["name"].as_str().unwrap_or("-"),
            e["breaker"].as_str().unwrap_or("-"),
            e["held"].to_string(),
            e["in_flight"].to_string(),
            e["budget_remaining"].to_string(),
            e["holding"].as_str().unwrap_or("-"),
        );
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct QueuesArgs {
    #[command(subcommand)]
    command: Option<QueuesCommand>,
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum QueuesCommand {
    /// Lease none of a queue's jobs (those running finish) until resumed (or for a while).
    Pause(PauseArgs),
    /// Lift a queue's hand pause.
    Resume(TargetArgs),
    /// A queue's groups (tenants) with work, most waiting first, with their limits.
    Groups(GroupsArgs),
}

#[derive(Debug, clap::Args)]
pub struct GroupsArgs {
    #[command(flatten)]
    conn: Conn,
    /// The queue.
    name: String,
    /// Groups shown at most.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1000))]
    limit: u32,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn queues(a: QueuesArgs) -> Result<()> {
    match a.command {
        Some(QueuesCommand::Pause(p)) => {
            let out = control(&p.conn, "queue", &p.name, "pause", Some(&p.body())).await?;
            print_paused("queue", &p.name, &out, p.out.json())
        }
        Some(QueuesCommand::Resume(t)) => {
            let out = control(&t.conn, "queue", &t.name, "resume", None).await?;
            print_paused("queue", &t.name, &out, t.out.json())
        }
        Some(QueuesCommand::Groups(g)) => {
            let path = format!("/v1/queues/{}/groups?limit={}", path_id(&g.name), g.limit);
            let out = Client::new(&g.conn)?
                .call(reqwest::Method::GET, &path, None)
                .await?;
            if g.out.json() {
                return print_json(&out);
            }
            let groups = out["groups"].as_array().cloned().unwrap_or_default();
            say!(
                "queue {}: {} group(s) with work{}",
                g.name,
                out["total"],
                if (groups.len() as u64) < out["total"].as_u64().unwrap_or(0) {
                    format!(", the first {} shown", groups.len())
                } else {
                    String::new()
                }
            );
            if groups.is_empty() {
                return Ok(());
            }
            say!(
                "{:<24} {:>9} {:>8} {:>10} {:>12} {:>10} {:>7}",
                "GROUP",
                "WAITING",
                "RUNNING",
                "IN FLIGHT",
                "CONCURRENCY",
                "RATE",
                "WEIGHT"
            );
            for r in &groups {
                let l = &r["limits"];
                let or_dash = |v: &Value| match v {
                    Value::Null => "-".to_owned(),
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                };
                say!(
                    "{:<24} {:>9} {:>8} {:>10} {:>12} {:>10} {:>7}",
                    human::s(r, "group"),
                    r["waiting"],
                    r["running"],
                    r["in_flight_here"],
                    or_dash(&l["concurrency"]),
                    or_dash(&l["rate"]),
                    l["weight"]
                );
            }
            Ok(())
        }
        None => {
            let out = Client::new(&a.conn)?
                .call(reqwest::Method::GET, "/v1/queues", None)
                .await?;
            if a.out.json() {
                return print_json(&out);
            }
            say!("{:<20} {:>11}  PAUSED BY HAND", "QUEUE", "CONCURRENCY");
            for q in out["queues"].as_array().into_iter().flatten() {
                let p = &q["paused_by_hand"];
                let paused = if p.is_null() {
                    "-".to_owned()
                } else {
                    format!(
                        "{} ({})",
                        p["until"]
                            .as_str()
                            .map_or("until resumed".to_owned(), |u| format!("until {u}")),
                        p["reason"]
                            .as_str()
                            .filter(|r| !r.is_empty())
                            .unwrap_or("no reason given")
                    )
                };
                say!(
                    "{:<20} {:>11}  {paused}",
                    q["name"].as_str().unwrap_or("-"),
                    q["concurrency"].to_string()
                );
            }
            Ok(())
        }
    }
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SchedulesArgs {
    #[command(subcommand)]
    command: Option<SchedulesCommand>,
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum SchedulesCommand {
    /// One schedule: its rule, its job, its next and last occurrence.
    Show(ScheduleTarget),
    /// Create a schedule (or replace one with --replace).
    #[command(
        after_help = "Examples:\n  redial schedules create nightly --cron '0 3 * * *' --timezone Europe/Berlin --url https://api.example.com/report\n  \
                      redial schedules create ping --every 5m --url https://api.example.com/ping --missed skip\n  \
                      redial schedules create digest --file digest.json   # the API's shape: {\"cron\": ..., \"job\": {...}}"
    )]
    Create(Box<ScheduleCreateArgs>),
    /// Delete a schedule (the jobs it enqueued stay).
    Delete(ScheduleTarget),
    /// Enqueue none of its occurrences until resumed.
    Pause(ScheduleTarget),
    /// Resume from the next occurrence (those that fell while paused are not run).
    Resume(ScheduleTarget),
}

#[derive(Debug, clap::Args)]
pub struct ScheduleTarget {
    #[command(flatten)]
    conn: Conn,
    /// The schedule's id.
    id: String,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct ScheduleCreateArgs {
    #[command(flatten)]
    conn: Conn,
    /// The schedule's id: 1 to 90 letters, digits and - _ . : (each occurrence's job is
    /// <id>@<instant>).
    id: String,
    /// The schedule as the API takes it (JSON), from a file or `-` for standard input.
    #[arg(long, short = 'f', conflicts_with_all = ["cron", "timezone", "every", "missed", "missed_max", "url", "method", "headers", "body", "queue"])]
    file: Option<PathBuf>,
    /// A cron expression: 5 fields, or 6 with seconds first ("0 9 * * 1-5").
    #[arg(long, conflicts_with = "every", required_unless_present_any = ["every", "file"])]
    cron: Option<String>,
    /// The IANA time zone the cron expression reads (default UTC).
    #[arg(long, requires = "cron")]
    timezone: Option<String>,
    /// An interval instead of a cron expression, with a unit: 5m.
    #[arg(long)]
    every: Option<String>,
    /// Occurrences missed while Redial was down: skip, run_once (default) or run_all.
    #[arg(long)]
    missed: Option<String>,
    /// With --missed run_all: the most missed occurrences run (default 10).
    #[arg(long)]
    missed_max: Option<u32>,
    /// The URL each occurrence's job calls.
    #[arg(long, required_unless_present = "file")]
    url: Option<String>,
    /// The HTTP method.
    #[arg(long, short = 'X', default_value = "POST")]
    method: String,
    /// A request header, 'Name: value'; repeat for more.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = cli_args::header)]
    headers: Vec<(String, String)>,
    /// The request body, sent as is.
    #[arg(long, short = 'd')]
    body: Option<String>,
    /// The queue (configured on the server); `default` when absent.
    #[arg(long)]
    queue: Option<String>,
    /// Replace the schedule of this id if there is one.
    #[arg(long)]
    replace: bool,
    #[command(flatten)]
    out: OutputArgs,
}

impl ScheduleCreateArgs {
    fn body(&self) -> Result<Value> {
        if let Some(path) = &self.file {
            let text = if path.as_os_str() == "-" {
                let mut s = String::new();
                std::io::stdin()
                    .read_to_string(&mut s)
                    .context("reading standard input")?;
                s
            } else {
                std::fs::read_to_string(path)
                    .map_err(|e| UsageError(format!("cannot read {}: {e}", path.display())))?
            };
            let mut v: Value = serde_json::from_str(&text)
                .map_err(|e| UsageError(format!("{} is not a JSON object: {e}", path.display())))?;
            let Some(o) = v.as_object_mut() else {
                return Err(UsageError(format!("{} is not a JSON object", path.display())).into());
            };
            o.remove("id");
            return Ok(v);
        }
        let mut request = Map::new();
        request.insert("method".into(), json!(self.method));
        request.insert("url".into(), json!(self.url));
        if !self.headers.is_empty() {
            request.insert("headers".into(), json!(self.headers));
        }
        if let Some(b) = &self.body {
            request.insert("body".into(), json!(b));
        }
        let mut job = Map::new();
        job.insert("request".into(), Value::Object(request));
        if let Some(q) = &self.queue {
            job.insert("queue".into(), json!(q));
        }
        let mut s = Map::new();
        s.insert("job".into(), Value::Object(job));
        for (k, v) in [
            ("cron", self.cron.clone().map(Value::from)),
            ("timezone", self.timezone.clone().map(Value::from)),
            ("every", self.every.clone().map(Value::from)),
            ("missed", self.missed.clone().map(Value::from)),
            ("missed_max", self.missed_max.map(Value::from)),
        ] {
            if let Some(v) = v {
                s.insert(k.into(), v);
            }
        }
        Ok(Value::Object(s))
    }
}

/// A path segment: the id's characters need no escaping, except to be safe against a typo.
fn schedule_path(id: &str) -> String {
    let escaped: String = id
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.:".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    format!("/v1/schedules/{escaped}")
}

fn print_schedule(s: &Value) {
    let rule = match s["rule"].as_object() {
        Some(r) if r.contains_key("cron") => format!(
            "cron {:?} in {}",
            s["rule"]["cron"]["expr"].as_str().unwrap_or("?"),
            s["rule"]["cron"]["timezone"].as_str().unwrap_or("UTC")
        ),
        Some(_) => format!(
            "every {} from {}",
            s["rule"]["every"]["interval"].as_str().unwrap_or("?"),
            s["rule"]["every"]["anchor"].as_str().unwrap_or("?")
        ),
        None => "?".into(),
    };
    let job = &s["job"];
    say!(
        "schedule {}{}\n  rule:    {rule}\n  missed:  {}\n  job:     {} {} (queue {})\n  next:    {}\n  last:    {}",
        s["id"].as_str().unwrap_or("?"),
        if s["paused"] == true { " (paused)" } else { "" },
        s["missed"]["policy"].as_str().unwrap_or("?"),
        job["request"]["method"].as_str().unwrap_or("?"),
        job["request"]["url"].as_str().unwrap_or("?"),
        job["queue"].as_str().unwrap_or("?"),
        s["next_at"].as_str().unwrap_or("none"),
        s["last_occurrence"].as_str().unwrap_or("none yet"),
    );
}

pub async fn schedules(a: SchedulesArgs) -> Result<()> {
    use reqwest::Method;
    let one = |t: &ScheduleTarget, method: Method, suffix: &str| {
        let path = format!("{}{suffix}", schedule_path(&t.id));
        (Client::new(&t.conn), method, path)
    };
    let (json_out, out) = match &a.command {
        Some(SchedulesCommand::Show(t)) => {
            let (c, m, p) = one(t, Method::GET, "");
            (t.out.json(), c?.call(m, &p, None).await?)
        }
        Some(SchedulesCommand::Pause(t)) => {
            let (c, m, p) = one(t, Method::POST, "/pause");
            (t.out.json(), c?.call(m, &p, None).await?)
        }
        Some(SchedulesCommand::Resume(t)) => {
            let (c, m, p) = one(t, Method::POST, "/resume");
            (t.out.json(), c?.call(m, &p, None).await?)
        }
        Some(SchedulesCommand::Delete(t)) => {
            let (c, m, p) = one(t, Method::DELETE, "");
            c?.call(m, &p, None).await?;
            if t.out.json() {
                return print_json(&json!({ "deleted": t.id }));
            }
            say!("schedule {} deleted (the jobs it enqueued stay)", t.id);
            return Ok(());
        }
        Some(SchedulesCommand::Create(c)) => {
            let mut body = c.body()?;
            let client = Client::new(&c.conn)?;
            let out = if c.replace {
                client
                    .call(Method::PUT, &schedule_path(&c.id), Some(&body))
                    .await?
            } else {
                if let Some(o) = body.as_object_mut() {
                    o.insert("id".into(), json!(c.id));
                }
                client
                    .call(Method::POST, "/v1/schedules", Some(&body))
                    .await?
            };
            (c.out.json(), out)
        }
        None => {
            let out = Client::new(&a.conn)?
                .call(Method::GET, "/v1/schedules", None)
                .await?;
            if a.out.json() {
                return print_json(&out);
            }
            say!(
                "{:<28} {:<7} {:<22} {:<22} RULE",
                "SCHEDULE",
                "PAUSED",
                "NEXT",
                "LAST"
            );
            for s in out["schedules"].as_array().into_iter().flatten() {
                let rule = if let Some(c) = s["rule"]["cron"].as_object() {
                    format!(
                        "cron {} ({})",
                        c["expr"].as_str().unwrap_or("?"),
                        c["timezone"].as_str().unwrap_or("UTC")
                    )
                } else {
                    format!(
                        "every {}",
                        s["rule"]["every"]["interval"].as_str().unwrap_or("?")
                    )
                };
                say!(
                    "{:<28} {:<7} {:<22} {:<22} {rule}",
                    s["id"].as_str().unwrap_or("-"),
                    if s["paused"] == true { "yes" } else { "no" },
                    s["next_at"].as_str().unwrap_or("none"),
                    s["last_occurrence"].as_str().unwrap_or("-"),
                );
            }
            return Ok(());
        }
    };
    if json_out {
        return print_json(&out);
    }
    print_schedule(&out);
    Ok(())
}
