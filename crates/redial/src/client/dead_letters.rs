//! `redial dead-letters`: the reason patterns of the dead letters, and replay or dismiss every
//! dead job a filter matches.

use super::patch::{self, PatchArgs};
use super::{print_json, Conn};
use crate::cli_args;
use crate::human::{self, say, OutputArgs};
use crate::UsageError;
use anyhow::Result;
use redial_client::{DeadCategory, DeadGroupsQuery, DeadLetterFilter, OperationState};
use redial_policy::Timestamp;
use std::io::IsTerminal;

// Parsed once per run: the size of its largest variant (a replay's filter and patch) costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, clap::Subcommand)]
pub enum DeadLettersCommand {
    /// The dead letters grouped by the pattern of their reason (numbers, ids, times and quoted
    /// values masked), largest first: one row per cause. Give a pattern to --pattern to act on it.
    Patterns(PatternsArgs),
    /// Replay every dead job matching the filter; with changes to their request or routing
    /// (--url-prefix, --set-header, ...), job by job, or only a preview of them (--dry-run).
    Replay(ReplayArgs),
    /// Dismiss (delete) every dead job matching the filter.
    Dismiss(FilterArgs),
    /// Write every dead job matching the filter (every one without a filter) as NDJSON, a job a
    /// line, with its request as sent (secrets included: keep the file safe) and under `dead` its
    /// category, reason and attempts. `redial enqueue --file` takes it back.
    Export(ExportArgs),
}

/// Which dead letters, as every dead-letters command takes them (a pattern is a command's own).
#[derive(Debug, clap::Args)]
pub struct Criteria {
    /// Only dead jobs of this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only this dead-letter category: permanent, transient_exhausted, unknown_exhausted,
    /// deferral_exhausted, deadline_exceeded or budget_exhausted.
    #[arg(long, value_parser = cli_args::one_of(DeadCategory::ALL, DeadCategory::as_str))]
    category: Option<DeadCategory>,
    /// Only dead jobs of this endpoint (a URL origin such as https://api.example.com).
    #[arg(long)]
    endpoint: Option<String>,
    /// Created at or after (RFC 3339).
    #[arg(long, value_parser = cli_args::instant)]
    since: Option<Timestamp>,
    /// Created before (RFC 3339).
    #[arg(long, value_parser = cli_args::instant)]
    until: Option<Timestamp>,
}

impl Criteria {
    /// The criteria as a bulk action's filter (no pattern, nothing else).
    fn filter(&self) -> DeadLetterFilter {
        DeadLetterFilter {
            queue: self.queue.clone(),
            category: self.category,
            endpoint: self.endpoint.clone(),
            since: self.since,
            until: self.until,
            ..DeadLetterFilter::default()
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    criteria: Criteria,
    /// Only dead jobs whose reason has this pattern, as `redial dead-letters patterns` prints
    /// it (the dead letters that have it when the action starts).
    #[arg(long)]
    pattern: Option<String>,
    /// Act on every dead letter (needed when no filter is given).
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    filter: FilterArgs,
    #[command(flatten)]
    patch: PatchArgs,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    criteria: Criteria,
    /// Only dead jobs whose reason has this pattern.
    #[arg(long)]
    pattern: Option<String>,
    /// Write to this file (made readable by its owner only) instead of standard output.
    #[arg(long, value_name = "FILE")]
    output_file: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct PatternsArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    criteria: Criteria,
    /// Patterns to show at most (1 to 500).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=500))]
    limit: u32,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn dead_letters(cmd: DeadLettersCommand) -> Result<()> {
    let (a, replay, changes) = match cmd {
        DeadLettersCommand::Patterns(a) => return patterns(a).await,
        DeadLettersCommand::Export(a) => return export(a).await,
        DeadLettersCommand::Replay(ReplayArgs { filter, patch }) => (filter, true, patch),
        DeadLettersCommand::Dismiss(a) => (a, false, PatchArgs::default()),
    };
    let verb = if replay { "replay" } else { "dismiss" };
    let mut filter = DeadLetterFilter {
        pattern: a.pattern.clone(),
        ..a.criteria.filter()
    };
    if filter == DeadLetterFilter::default() && !a.all {
        return Err(UsageError(format!(
            "no filter: give --queue, --category, --endpoint, --since, --until or --pattern, or --all to {verb} every dead letter"
        ))
        .into());
    }
    if a.all {
        filter.all = Some(true);
    }
    let server = a.conn.connect()?;
    if changes.changes() || changes.dry_run {
        filter.patch = changes.patch();
        filter.key = changes.key();
        if changes.dry_run {
            let preview = server
                .ask(server.client.preview_dead_letters(&filter))
                .await?;
            if a.out.json() {
                return print_json(&preview);
            }
            patch::say_preview(&preview);
            return Ok(());
        }
    }
    // On a terminal, a bulk action without changes is followed as it goes: a progress bar from
    // its operation, polled. Elsewhere (and with changes) the answer comes when it is done.
    let terminal = std::io::stderr().is_terminal() && !a.out.json();
    let with_changes = filter.patch.is_some() || filter.key.is_some();
    let out = if terminal && !with_changes {
        follow(&server, if replay { "replay" } else { "dismiss" }, &filter).await
    } else if replay {
        server.ask(server.client.replay_dead_letters(&filter)).await
    } else {
        server
            .ask(server.client.dismiss_dead_letters(&filter))
            .await
    };
    let out = out?;
    if a.out.json() {
        return print_json(&out);
    }
    let done = match (replay, filter.patch.is_some() || filter.key.is_some()) {
        (true, false) => "replayed (back to ready, same idempotency keys)",
        (true, true) => {
            "replayed with changes (back to ready; redial jobs show ID has what changed)"
        }
        (false, _) => "dismissed",
    };
    say!("{} dead jobs {done}", out.affected);
    if let (Some(matched), Some(skipped)) = (out.matched, out.skipped) {
        if skipped > 0 {
            say!(
                "{skipped} of {matched} matched were skipped (the patch is not for them, or they changed meanwhile)"
            );
        }
    }
    Ok(())
}

async fn patterns(a: PatternsArgs) -> Result<()> {
    let server = a.conn.connect()?;
    let f = a.criteria.filter();
    let query = DeadGroupsQuery {
        queue: f.queue,
        category: f.category.map(|c| c.as_str().to_owned()),
        endpoint: f.endpoint,
        since: f.since.map(|t| t.to_string()),
        until: f.until.map(|t| t.to_string()),
        pattern: None,
        limit: Some(a.limit),
    };
    let found = server
        .ask(server.client.dead_letter_patterns(&query))
        .await?;
    if a.out.json() {
        return print_json(&found);
    }
    let rows: Vec<Vec<String>> = found
        .patterns
        .iter()
        .map(|p| {
            vec![
                human::thousands(u64::try_from(p.count).unwrap_or(0)),
                p.last.to_string(),
                human::printable(&p.pattern).into_owned(),
            ]
        })
        .collect();
    say!(
        "{}",
        human::table(&["DEAD", "LAST", "PATTERN"], &rows, &["DEAD"])
    );
    let total = u64::try_from(found.total).unwrap_or(0);
    let count = u64::try_from(found.count).unwrap_or(0);
    let shown = found.patterns.len() as u64;
    if shown < count {
        say!(
            "{} dead letters in {} patterns; the {shown} largest shown (--limit)",
            human::thousands(total),
            human::thousands(count)
        );
    } else {
        say!(
            "{} dead letters in {} patterns",
            human::thousands(total),
            human::thousands(count)
        );
    }
    Ok(())
}

/// Starts a bulk action and shows its progress until it ends; answers as a waiting request would.
async fn follow(
    server: &super::Server,
    action: &str,
    filter: &DeadLetterFilter,
) -> Result<redial_client::Affected> {
    let mut op = server
        .ask(server.client.start_dead_letters(action, filter))
        .await?;
    let what = if action == "replay" {
        "dead jobs replayed"
    } else {
        "dead jobs dismissed"
    };
    let mut bar = human::Progress::new(what, usize::try_from(op.total).unwrap_or(0));
    while op.state == OperationState::Running {
        bar.update(usize::try_from(op.done.min(op.total)).unwrap_or(0));
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        op = server.ask(server.client.operation(&op.id)).await?;
    }
    bar.update(usize::try_from(op.done.min(op.total)).unwrap_or(0));
    bar.finish();
    if op.state == OperationState::Failed {
        anyhow::bail!(
            "the bulk action failed after {} of {} dead jobs ({}): each was acted on or left as it was; run the same command again for the rest",
            op.done,
            op.total,
            op.error.as_deref().unwrap_or("the server log says why")
        );
    }
    Ok(redial_client::Affected {
        affected: op.done,
        operation: Some(op.id),
        state: Some(op.state),
        ..Default::default()
    })
}

async fn export(a: ExportArgs) -> Result<()> {
    use std::io::Write;
    let server = a.conn.connect()?;
    let filter = DeadLetterFilter {
        pattern: a.pattern,
        ..a.criteria.filter()
    };
    let mut out: Box<dyn Write> = match &a.output_file {
        Some(path) => {
            let mut open = std::fs::OpenOptions::new();
            open.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
            Box::new(std::io::BufWriter::new(open.open(path).map_err(|e| {
                UsageError(format!("cannot write {}: {e}", path.display()))
            })?))
        }
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let mut resp = server
        .ask(server.client.export_dead_letters(&filter))
        .await?;
    let mut lines = 0u64;
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| anyhow::anyhow!("the export was cut off after {lines} dead jobs: {e}"))?
    {
        lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
        match out.write_all(&chunk) {
            // A reader that went away (| head) ends it quietly.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            other => other?,
        }
    }
    match out.flush() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        other => other?,
    }
    if let Some(path) = &a.output_file {
        say!(
            "{} dead jobs written to {}",
            human::thousands(lines),
            path.display()
        );
    }
    Ok(())
}
