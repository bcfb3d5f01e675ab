//! `redial jobs`: list, show, replay, dismiss, cancel.

use super::patch::{self, PatchArgs};
use super::{print_json, Conn};
use crate::human::{self, say, say_part, OutputArgs};
use anyhow::Result;
use redial_client::{Job, JobsQuery, ReplayInput};

#[derive(Debug, clap::Subcommand)]
pub enum JobsCommand {
    /// List jobs, oldest first.
    List(ListArgs),
    /// Show a job with its attempt log.
    Show(IdArgs),
    /// Replay a dead job: back to ready, counters reset, same idempotency key; with changes to
    /// its request or routing (--url, --set-header, ...), or only a preview of them (--dry-run).
    Replay(ReplayArgs),
    /// Dismiss a dead job: it and its attempts are deleted.
    Dismiss(IdArgs),
    /// Cancel a job that has not finished.
    Cancel(IdArgs),
    /// Wait for a job to finish: exits 0 when it completed, 1 when it ended dead or cancelled or
    /// the time ran out (for shell scripts).
    Wait(WaitArgs),
}

#[derive(Debug, clap::Args)]
pub struct WaitArgs {
    #[command(flatten)]
    conn: Conn,
    /// The job's id.
    id: String,
    /// How long to wait at most, with a unit: 5m.
    #[arg(long, default_value = "60s", value_parser = crate::cli_args::duration)]
    timeout: std::time::Duration,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    conn: Conn,
    /// The job's id.
    id: String,
    #[command(flatten)]
    patch: PatchArgs,
    #[command(flatten)]
    out: OutputArgs,
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
    /// Only dead jobs whose reason has this pattern, as `redial dead-letters patterns` prints it.
    #[arg(long)]
    pattern: Option<String>,
    /// Only the job(s) with this idempotency key (exactly, as sent in the request's header).
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Only jobs with this tag (exactly).
    #[arg(long)]
    tag: Option<String>,
    /// Only dead jobs whose reason has words starting with each of these words, in any order
    /// (case does not matter): --reason-text "certificate expired".
    #[arg(long)]
    reason_text: Option<String>,
    /// Jobs to show at most.
    #[arg(long, default_value_t = 50)]
    limit: u32,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn jobs(cmd: JobsCommand) -> Result<()> {
    match cmd {
        JobsCommand::List(a) => list(a).await,
        JobsCommand::Show(a) => {
            let server = a.conn.connect()?;
            let job = server.ask(server.client.job(&a.id)).await?;
            if a.out.json() {
                return print_json(&job);
            }
            say_part!("{}", human::job(&job));
            Ok(())
        }
        JobsCommand::Replay(a) => replay(a).await,
        JobsCommand::Dismiss(a) => {
            let server = a.conn.connect()?;
            let out = server.ask(server.client.dismiss(&a.id)).await?;
            if a.out.json() {
                return print_json(&out);
            }
            say!("job {} dismissed (deleted with its attempts)", a.id);
            Ok(())
        }
        JobsCommand::Wait(a) => {
            let server = a.conn.connect()?;
            let job = server
                .ask(server.client.wait_for_job(&a.id, a.timeout))
                .await?;
            if a.out.json() {
                print_json(&job)?;
            } else if job.state == redial_client::JobState::Completed {
                say!("job {} completed", a.id);
            }
            match job.state.as_str() {
                "completed" => Ok(()),
                "dead" | "cancelled" => Err(anyhow::anyhow!(
                    "job {} is {}{}",
                    a.id,
                    job.state,
                    job.last_reason
                        .as_deref()
                        .map_or_else(String::new, |r| format!(": {r}"))
                )),
                state => Err(anyhow::anyhow!(
                    "job {} is still {state} after {}",
                    a.id,
                    redial_policy::Human(a.timeout)
                )),
            }
        }
        JobsCommand::Cancel(a) => {
            let server = a.conn.connect()?;
            let job = server.ask(server.client.cancel(&a.id)).await?;
            if a.out.json() {
                return print_json(&job);
            }
            if job.cancel_requested && job.state == redial_client::JobState::Running {
                say!(
                    "job {}: cancel requested; it ends cancelled when its running attempt returns (unless that attempt completes it)",
                    a.id
                );
            } else {
                say!("job {} {}", a.id, job.state);
            }
            Ok(())
        }
    }
}

async fn replay(a: ReplayArgs) -> Result<()> {
    let server = a.conn.connect()?;
    if !a.patch.changes() && !a.patch.dry_run {
        let job = server.ask(server.client.replay(&a.id)).await?;
        if a.out.json() {
            return print_json(&job);
        }
        say!(
            "job {} replayed: {}, runs again from {} with the same idempotency key",
            a.id,
            job.state,
            job.run_at
        );
        return Ok(());
    }
    let input = ReplayInput {
        patch: a.patch.patch(),
        key: a.patch.key(),
        dry_run: None,
    };
    if a.patch.dry_run {
        let preview = server
            .ask(server.client.replay_preview(&a.id, &input))
            .await?;
        if a.out.json() {
            return print_json(&preview);
        }
        patch::say_preview(&preview);
        return Ok(());
    }
    let job = server
        .ask(server.client.replay_changed(&a.id, &input))
        .await?;
    if a.out.json() {
        return print_json(&job);
    }
    let key = if a.patch.renew_key {
        "a new idempotency key"
    } else {
        "the same idempotency key"
    };
    say!(
        "job {} replayed with changes: {}, runs again from {} with {key} (redial jobs show {} has what changed)",
        a.id,
        job.state,
        job.run_at,
        a.id
    );
    Ok(())
}

async fn list(a: ListArgs) -> Result<()> {
    let server = a.conn.connect()?;
    let mut jobs: Vec<Job> = Vec::new();
    let mut query = JobsQuery {
        queue: a.queue.clone(),
        state: a.state.clone(),
        category: a.category.clone(),
        endpoint: a.endpoint.clone(),
        pattern: a.pattern.clone(),
        idempotency_key: a.idempotency_key.clone(),
        tag: a.tag.clone(),
        reason_text: a.reason_text.clone(),
        ..JobsQuery::default()
    };
    while jobs.len() < a.limit as usize {
        query.limit = Some((a.limit - jobs.len() as u32).min(500));
        let page = server.ask(server.client.jobs(&query)).await?;
        jobs.extend(page.jobs);
        match page.next_cursor {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    if a.out.json() {
        return print_json(&jobs);
    }
    if jobs.is_empty() {
        say!("no job matches");
        return Ok(());
    }
    say!("{}", human::jobs(&jobs));
    Ok(())
}
