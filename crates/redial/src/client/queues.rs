//! `redial queues`: every queue with its concurrency and hand pause, a queue's groups with work,
//! its ordering keys' lines, and the hand controls (pause, resume).

use super::{or_dash, print_json, say_paused, Conn, PauseArgs, TargetArgs};
use crate::human::{self, say, OutputArgs};
use anyhow::Result;

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
    /// A queue's ordering keys with a line: each key's head, the jobs behind it, why it waits.
    OrderingKeys(OrderingKeysArgs),
}

#[derive(Debug, clap::Args)]
pub struct OrderingKeysArgs {
    #[command(flatten)]
    conn: Conn,
    /// The queue.
    name: String,
    /// Only the keys whose head is dead (they wait for it to be replayed or dismissed).
    #[arg(long)]
    blocked: bool,
    /// Keys shown at most (in the listing's own order, stable from page to page).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    limit: u32,
    #[command(flatten)]
    out: OutputArgs,
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
        Some(QueuesCommand::Pause(p)) => pause(p).await,
        Some(QueuesCommand::Resume(t)) => resume(t).await,
        Some(QueuesCommand::Groups(g)) => groups(g).await,
        Some(QueuesCommand::OrderingKeys(k)) => ordering_keys(k).await,
        None => list(a).await,
    }
}

/// Pauses a queue by hand.
async fn pause(p: PauseArgs) -> Result<()> {
    let server = p.conn.connect()?;
    let out = server
        .ask(server.client.pause_queue(&p.name, &p.input()))
        .await?;
    if p.out.json() {
        return print_json(&out);
    }
    say_paused("queue", &p.name, out.paused_by_hand.as_ref());
    Ok(())
}

/// Resumes a queue paused by hand.
async fn resume(t: TargetArgs) -> Result<()> {
    let server = t.conn.connect()?;
    let out = server.ask(server.client.resume_queue(&t.name)).await?;
    if t.out.json() {
        return print_json(&out);
    }
    say_paused("queue", &t.name, out.paused_by_hand.as_ref());
    Ok(())
}

/// A queue's groups with work: waiting, running, limits, forecast.
async fn groups(g: GroupsArgs) -> Result<()> {
    let server = g.conn.connect()?;
    let out = server
        .ask(server.client.queue_groups(&g.name, Some(g.limit)))
        .await?;
    if g.out.json() {
        return print_json(&out);
    }
    let shown = out.groups.len();
    say!(
        "queue {}: {} group(s) with work{}",
        g.name,
        out.total,
        if (shown as i64) < out.total {
            format!(", the first {shown} shown")
        } else {
            String::new()
        }
    );
    if out.groups.is_empty() {
        return Ok(());
    }
    let rows: Vec<Vec<String>> = out
        .groups
        .iter()
        .map(|r| {
            vec![
                r.group.clone(),
                r.waiting.to_string(),
                r.running.to_string(),
                r.in_flight_here.to_string(),
                or_dash(r.limits.concurrency),
                or_dash(r.limits.rate.as_ref()),
                r.limits.weight.to_string(),
                match (r.forecast.drain_seconds, &r.forecast.drains_at) {
                    _ if r.waiting == 0 => "-".to_owned(),
                    // Beyond two days, when rather than how long.
                    (Some(s), Some(at)) if s > 2.0 * 86_400.0 => format!("at {at}"),
                    (Some(s), _) => format!(
                        "{}",
                        redial_policy::Human(std::time::Duration::from_secs(s.ceil() as u64))
                    ),
                    (None, _) => "not known".to_owned(),
                },
                format!(
                    "{} of {}",
                    r.forecast.deadline_at_risk, r.forecast.with_deadline
                ),
            ]
        })
        .collect();
    let headers = [
        "GROUP",
        "WAITING",
        "RUNNING",
        "IN FLIGHT",
        "CONCURRENCY",
        "RATE",
        "WEIGHT",
        "DRAINS IN",
        "AT RISK",
    ];
    say!("{}", human::table(&headers, &rows, &headers[1..]));
    Ok(())
}

/// A queue's ordering keys with a line (or only the blocked ones): each head and why it waits.
async fn ordering_keys(k: OrderingKeysArgs) -> Result<()> {
    let server = k.conn.connect()?;
    let server = &server;
    let (name, blocked) = (&k.name, k.blocked);
    let keys = super::up_to(k.limit, |page| async move {
        let out = server
            .ask(server.client.ordering_keys(name, blocked, &page))
            .await?;
        Ok((out.keys, out.next_cursor))
    })
    .await?;
    if k.out.json() {
        return print_json(&serde_json::json!({ "queue": k.name, "keys": keys }));
    }
    if keys.is_empty() {
        say!(
            "queue {}: no ordering key{}",
            k.name,
            if k.blocked {
                " is blocked"
            } else {
                " has a line"
            }
        );
        return Ok(());
    }
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|l| {
            vec![
                l.key.clone(),
                l.head.id.clone(),
                l.head.state.to_string(),
                l.behind.to_string(),
                l.why.clone(),
            ]
        })
        .collect();
    let headers = ["KEY", "HEAD", "STATE", "BEHIND", "WHY"];
    say!("{}", human::table(&headers, &rows, &["BEHIND"]));
    Ok(())
}

/// The queues: concurrency, a pause by hand, what a dead keyed job does to its line.
async fn list(a: QueuesArgs) -> Result<()> {
    let server = a.conn.connect()?;
    let out = server.ask(server.client.queues()).await?;
    if a.out.json() {
        return print_json(&out);
    }
    let rows: Vec<Vec<String>> = out
        .queues
        .iter()
        .map(|q| {
            let paused = match &q.paused_by_hand {
                None => "-".to_owned(),
                Some(p) => format!(
                    "{} ({})",
                    p.until
                        .as_ref()
                        .map_or("until resumed".to_owned(), |u| format!("until {u}")),
                    Some(p.reason.as_str())
                        .filter(|r| !r.is_empty())
                        .unwrap_or("no reason given")
                ),
            };
            vec![
                q.name.clone(),
                q.concurrency.to_string(),
                paused,
                q.ordering_on_dead.to_string(),
            ]
        })
        .collect();
    say!(
        "{}",
        human::table(
            &["QUEUE", "CONCURRENCY", "PAUSED BY HAND", "ORDERING ON DEAD"],
            &rows,
            &["CONCURRENCY"]
        )
    );
    Ok(())
}
