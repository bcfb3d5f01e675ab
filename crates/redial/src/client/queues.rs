//! `redial queues`: every queue with its concurrency and hand pause, a queue's groups with work,
//! and the hand controls (pause, resume).

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
        Some(QueuesCommand::Resume(t)) => {
            let server = t.conn.connect()?;
            let out = server.ask(server.client.resume_queue(&t.name)).await?;
            if t.out.json() {
                return print_json(&out);
            }
            say_paused("queue", &t.name, out.paused_by_hand.as_ref());
            Ok(())
        }
        Some(QueuesCommand::Groups(g)) => {
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
            ];
            say!("{}", human::table(&headers, &rows, &headers[1..]));
            Ok(())
        }
        None => {
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
                    vec![q.name.clone(), q.concurrency.to_string(), paused]
                })
                .collect();
            say!(
                "{}",
                human::table(
                    &["QUEUE", "CONCURRENCY", "PAUSED BY HAND"],
                    &rows,
                    &["CONCURRENCY"]
                )
            );
            Ok(())
        }
    }
}
