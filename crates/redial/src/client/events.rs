//! `redial events`: the event log, a page at a time, or followed live (`--follow`).

use super::{or_dash, print_json, Conn};
use crate::human::{self, say, OutputArgs};
use anyhow::{anyhow, Result};
use redial_client::{Event, EventsQuery};
use std::io::Write;

#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    #[command(flatten)]
    conn: Conn,
    /// Events after this one (an event's id, or the cursor a page ends with). Without it: from
    /// the oldest kept, or with --follow from now on.
    #[arg(long)]
    after: Option<String>,
    /// Only job events of these queues (comma-separated).
    #[arg(long)]
    queue: Option<String>,
    /// Only these kinds (comma-separated): job.completed, job.dead, job.cancelled, job.replayed,
    /// endpoint.paused, endpoint.resumed, endpoint.breaker_opened, endpoint.breaker_closed.
    #[arg(long)]
    kind: Option<String>,
    /// Events to show at most (without --follow; 1 to 1000).
    #[arg(long, default_value_t = 100, conflicts_with = "follow")]
    limit: u32,
    /// Keep printing events as they happen (one line each, or one JSON object per line with
    /// --json), until interrupted.
    #[arg(long, short = 'f')]
    follow: bool,
    #[command(flatten)]
    out: OutputArgs,
}

pub async fn events(a: EventsArgs) -> Result<()> {
    let server = a.conn.connect()?;
    let query = EventsQuery {
        after: a.after.clone(),
        queue: a.queue.clone(),
        kind: a.kind.clone(),
        limit: (!a.follow).then_some(a.limit),
    };
    if a.follow {
        return follow(&server, query, a.out.json()).await;
    }
    let page = server.ask(server.client.events(&query)).await?;
    if a.out.json() {
        return print_json(&page);
    }
    let rows: Vec<Vec<String>> = page.events.iter().map(row).collect();
    say!(
        "{}",
        human::table(
            &["ID", "AT", "TYPE", "QUEUE", "JOB", "ENDPOINT", "CATEGORY", "REASON"],
            &rows,
            &[]
        )
    );
    if page.more {
        say!("more follow: --after {}", page.next_cursor);
    } else {
        say!(
            "up to date: --after {} reads what comes next",
            page.next_cursor
        );
    }
    Ok(())
}

fn row(e: &Event) -> Vec<String> {
    vec![
        e.id.clone(),
        e.at.clone(),
        e.r#type.clone(),
        or_dash(e.queue.as_ref()),
        or_dash(e.job_id.as_ref()),
        or_dash(e.endpoint.as_ref()),
        or_dash(e.category.as_ref()),
        or_dash(e.reason.as_ref()),
    ]
}

/// Prints the stream's events as they come; returns when it ends (the server stopping), saying
/// where to resume.
async fn follow(server: &super::Server, query: EventsQuery, json: bool) -> Result<()> {
    let mut resp = server.ask(server.client.event_stream(&query)).await?;
    let mut buffer = String::new();
    let mut last: Option<String> = query.after.clone();
    loop {
        let chunk = resp
            .chunk()
            .await
            .map_err(|e| anyhow!("reading the event stream: {e}"))?;
        let Some(chunk) = chunk else {
            let resume = last.map_or(String::new(), |id| format!(": resume with --after {id}"));
            return Err(anyhow!("the server ended the event stream{resume}"));
        };
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let Some(data) = block.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue; // a keepalive
            };
            let event: Event = serde_json::from_str(data)
                .map_err(|e| anyhow!("the server sent an event that is not JSON: {e}"))?;
            let line = if json {
                serde_json::to_string(&event)?
            } else {
                line_of(&event)
            };
            // Each line as it comes (stdout is not line-buffered when piped); a reader that went
            // away (`| head -1`) ends the command quietly.
            let mut out = std::io::stdout().lock();
            match writeln!(out, "{}", human::printable(&line)).and_then(|()| out.flush()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                Err(e) => return Err(anyhow!("writing to standard output: {e}")),
            }
            last = Some(event.id.clone());
        }
    }
}

/// One event on one line, for a person following the log.
fn line_of(e: &Event) -> String {
    let what = match (&e.job_id, &e.endpoint) {
        (Some(job), _) => format!("job {job} ({})", or_dash(e.queue.as_ref())),
        (None, Some(endpoint)) => endpoint.clone(),
        (None, None) => String::new(),
    };
    let mut line = format!("{}  {}  {what}", e.at, e.r#type);
    if let Some(c) = &e.category {
        line.push_str(&format!("  {c}"));
    }
    if let Some(r) = &e.reason {
        line.push_str(&format!(": {r}"));
    }
    if let Some(u) = &e.until {
        line.push_str(&format!(" (until {u})"));
    }
    line
}
