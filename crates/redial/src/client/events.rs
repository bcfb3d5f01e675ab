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
    /// --json), until interrupted; a stream that is cut is reopened where it left off.
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
        e.at.to_string(),
        e.r#type.to_string(),
        or_dash(e.queue.as_ref()),
        or_dash(e.job_id.as_ref()),
        or_dash(e.endpoint.as_ref()),
        or_dash(e.category.as_ref()),
        or_dash(e.reason.as_ref()),
    ]
}

/// How long `--follow` keeps trying to reopen a stream that broke before it gives up.
const RECONNECT_FOR: std::time::Duration = std::time::Duration::from_secs(300);

/// How one connection of the stream ended.
enum Ended {
    /// The server ended it, or it broke: reopen it after the last event printed.
    Cut(String),
    /// Standard output's reader went away (`| head -1`): the command is done.
    ReaderGone,
}

/// Prints the stream's events as they come, reopening it after a cut (the server restarting, a
/// proxy's timeout, a network drop) with `Last-Event-ID`'s cursor, so that nothing is missed or
/// printed twice; gives up when it cannot be reopened for five minutes, saying where to resume.
async fn follow(server: &super::Server, mut query: EventsQuery, json: bool) -> Result<()> {
    let mut last: Option<String> = query.after.clone();
    let mut opened = false;
    let mut failing_since: Option<std::time::Instant> = None;
    let mut pause = std::time::Duration::from_millis(250);
    loop {
        query.after = last.clone();
        let why = match server.ask(server.client.event_stream(&query)).await {
            // The first opening fails as any command does (a wrong --server, a bad token).
            Err(e) if !opened => return Err(e),
            Err(e) => e.to_string(),
            Ok(resp) => {
                opened = true;
                match read_stream(resp, &mut last, json).await? {
                    Ended::ReaderGone => return Ok(()),
                    Ended::Cut(why) => {
                        failing_since = None;
                        pause = std::time::Duration::from_millis(250);
                        why
                    }
                }
            }
        };
        let since = *failing_since.get_or_insert_with(std::time::Instant::now);
        let resume = last
            .as_ref()
            .map_or(String::new(), |id| format!(" (resume with --after {id})"));
        if since.elapsed() >= RECONNECT_FOR {
            return Err(anyhow!(
                "the event stream could not be reopened for {} s: {why}{resume}",
                RECONNECT_FOR.as_secs()
            ));
        }
        eprintln!("redial: the event stream was cut ({why}); reopening it{resume}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(10));
    }
}

/// Prints one connection's events as they come, noting the last one's id in `last`.
async fn read_stream(
    mut resp: reqwest::Response,
    last: &mut Option<String>,
    json: bool,
) -> Result<Ended> {
    // Bytes, not text: a chunk may end inside a character.
    let mut buffer: Vec<u8> = Vec::new();
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return Ok(Ended::Cut("the server ended it".into())),
            Err(e) => return Ok(Ended::Cut(format!("reading it failed: {e}"))),
        };
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = buffer.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&block);
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
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                    return Ok(Ended::ReaderGone)
                }
                Err(e) => return Err(anyhow!("writing to standard output: {e}")),
            }
            *last = Some(event.id.clone());
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
