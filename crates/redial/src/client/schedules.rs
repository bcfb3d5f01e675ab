//! `redial schedules`: list, show, create (or replace), delete, pause, resume.

use super::{print_json, Conn};
use crate::cli_args;
use crate::human::{self, say, OutputArgs};
use crate::UsageError;
use anyhow::{Context, Result};
use redial_client::{JobTemplateInput, JobTemplateInputRequest, Missed, Schedule, ScheduleInput};
use serde_json::{json, Value};
use std::io::Read;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SchedulesArgs {
    #[command(subcommand)]
    command: Option<SchedulesCommand>,
    #[command(flatten)]
    conn: Conn,
    /// Schedules to show at most (by id).
    #[arg(long, default_value_t = 100)]
    limit: u32,
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
    #[arg(long, value_parser = cli_args::one_of(Missed::ALL, Missed::as_str))]
    missed: Option<Missed>,
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
    /// The schedule, without its id: from the file as it is (the server checks it), or from
    /// the flags.
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
        let input = ScheduleInput {
            id: None,
            cron: self.cron.clone(),
            timezone: self.timezone.clone(),
            every: self.every.clone(),
            missed: self.missed,
            missed_max: self.missed_max.map(i64::from),
            job: JobTemplateInput {
                request: JobTemplateInputRequest {
                    method: self.method.clone(),
                    url: self.url.clone().unwrap_or_default(),
                    headers: (!self.headers.is_empty()).then(|| json!(self.headers)),
                    body: self.body.clone().map(Value::from),
                    timeout: None,
                    credentials: None,
                },
                queue: self.queue.clone(),
                ..JobTemplateInput::default()
            },
        };
        serde_json::to_value(&input).context("encoding the schedule")
    }
}

/// A schedule's rule in a few words: `cron "0 3 * * *" in UTC`, `every 5m from ...`.
fn rule(s: &Schedule, long: bool) -> String {
    match (&s.rule.cron, &s.rule.every) {
        (Some(c), _) if long => format!("cron {:?} in {}", c.expr, c.timezone),
        (Some(c), _) => format!("cron {} ({})", c.expr, c.timezone),
        (None, Some(e)) if long => format!("every {} from {}", e.interval, e.anchor),
        (None, Some(e)) => format!("every {}", e.interval),
        (None, None) => "?".into(),
    }
}

fn print_schedule(s: &Schedule) {
    let job = &s.job;
    say!(
        "schedule {}{}\n  rule:    {}\n  missed:  {}\n  job:     {} {} (queue {})\n  next:    {}\n  last:    {}",
        s.id,
        if s.paused { " (paused)" } else { "" },
        rule(s, true),
        s.missed.policy,
        job.request.method,
        job.request.url,
        job.queue,
        s.next_at.map_or_else(|| "none".into(), |t| t.to_string()),
        s.last_occurrence.map_or_else(|| "none yet".into(), |t| t.to_string()),
    );
}

pub async fn schedules(a: SchedulesArgs) -> Result<()> {
    let (json_out, out) = match &a.command {
        Some(SchedulesCommand::Show(t)) => {
            let server = t.conn.connect()?;
            (
                t.out.json(),
                server.ask(server.client.schedule(&t.id)).await?,
            )
        }
        Some(SchedulesCommand::Pause(t)) => {
            let server = t.conn.connect()?;
            let out = server.ask(server.client.pause_schedule(&t.id)).await?;
            (t.out.json(), out)
        }
        Some(SchedulesCommand::Resume(t)) => {
            let server = t.conn.connect()?;
            let out = server.ask(server.client.resume_schedule(&t.id)).await?;
            (t.out.json(), out)
        }
        Some(SchedulesCommand::Delete(t)) => {
            let server = t.conn.connect()?;
            server.ask(server.client.delete_schedule(&t.id)).await?;
            if t.out.json() {
                return print_json(&json!({ "deleted": t.id }));
            }
            say!("schedule {} deleted (the jobs it enqueued stay)", t.id);
            return Ok(());
        }
        Some(SchedulesCommand::Create(c)) => {
            let mut body = c.body()?;
            let server = c.conn.connect()?;
            let out = if c.replace {
                server.ask(server.client.put_schedule(&c.id, &body)).await?
            } else {
                if let Some(o) = body.as_object_mut() {
                    o.insert("id".into(), json!(c.id));
                }
                server.ask(server.client.create_schedule(&body)).await?
            };
            (c.out.json(), out)
        }
        None => {
            let server = a.conn.connect()?;
            let server = &server;
            let schedules = super::up_to(a.limit, |page| async move {
                let out = server.ask(server.client.schedules(&page)).await?;
                Ok((out.schedules, out.next_cursor))
            })
            .await?;
            if a.out.json() {
                return print_json(&json!({ "schedules": schedules }));
            }
            let rows: Vec<Vec<String>> = schedules
                .iter()
                .map(|s| {
                    vec![
                        s.id.clone(),
                        if s.paused { "yes" } else { "no" }.to_owned(),
                        s.next_at.map_or_else(|| "none".into(), |t| t.to_string()),
                        s.last_occurrence
                            .map_or_else(|| "-".into(), |t| t.to_string()),
                        rule(s, false),
                    ]
                })
                .collect();
            say!(
                "{}",
                human::table(&["SCHEDULE", "PAUSED", "NEXT", "LAST", "RULE"], &rows, &[])
            );
            return Ok(());
        }
    };
    if json_out {
        return print_json(&out);
    }
    print_schedule(&out);
    Ok(())
}
