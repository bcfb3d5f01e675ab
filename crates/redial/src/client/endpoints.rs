//! `redial endpoints`: every endpoint's protection at a glance, one in full, and the hand
//! controls (pause, resume, reset the breaker).

use super::{or_dash, print_json, say_paused, Conn, PauseArgs, TargetArgs};
use crate::human::{self, say, say_part, OutputArgs};
use anyhow::Result;

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EndpointsArgs {
    #[command(subcommand)]
    command: Option<EndpointsCommand>,
    #[command(flatten)]
    conn: Conn,
    /// Endpoints to show at most (by name).
    #[arg(long, default_value_t = 100)]
    limit: u32,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum EndpointsCommand {
    /// One endpoint in full: pause, limits in force, budget, breaker and its history.
    Show(EndpointShowArgs),
    /// Hold every job of an endpoint, on every node, until resumed (or for a while).
    Pause(EndpointPauseArgs),
    /// Lift a hand pause, and end a pause the endpoint's answers set (a server-given wait).
    Resume(TargetArgs),
    /// Close the endpoint's circuit breaker now, with an empty window.
    #[command(name = "reset-breaker")]
    ResetBreaker(TargetArgs),
    /// Replay the endpoint's dead letters that died since its last outage began.
    #[command(name = "replay-outage")]
    ReplayOutage(TargetArgs),
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

#[derive(Debug, clap::Args)]
pub struct EndpointPauseArgs {
    #[command(flatten)]
    pause: PauseArgs,
    /// Pause it even if Redial does not know it yet (no jobs, no configuration, not seen
    /// lately): to hold its jobs from the first one. Without it, an unknown name is refused.
    #[arg(long)]
    create: bool,
}

pub async fn endpoints(a: EndpointsArgs) -> Result<()> {
    match a.command {
        Some(EndpointsCommand::Show(s)) => {
            let server = s.conn.connect()?;
            let out = server.ask(server.client.endpoint(&s.name)).await?;
            if s.out.json() {
                return print_json(&out);
            }
            say_part!("{}", human::endpoint(&out));
            Ok(())
        }
        Some(EndpointsCommand::Pause(EndpointPauseArgs { pause: p, create })) => {
            let server = p.conn.connect()?;
            let out = if create {
                server
                    .ask(server.client.pause_endpoint_ahead(&p.name, &p.input()))
                    .await?
            } else {
                server
                    .ask(server.client.pause_endpoint(&p.name, &p.input()))
                    .await?
            };
            if p.out.json() {
                return print_json(&out);
            }
            say_paused("endpoint", &p.name, out.paused_by_hand.as_ref());
            Ok(())
        }
        Some(EndpointsCommand::Resume(t)) => {
            let server = t.conn.connect()?;
            let out = server.ask(server.client.resume_endpoint(&t.name)).await?;
            if t.out.json() {
                return print_json(&out);
            }
            let holding = out.holding.as_deref().unwrap_or("nothing");
            say!(
                "endpoint {} resumed; holding its jobs now: {holding}",
                t.name
            );
            Ok(())
        }
        Some(EndpointsCommand::ReplayOutage(t)) => {
            let server = t.conn.connect()?;
            let out = server.ask(server.client.replay_outage(&t.name)).await?;
            if t.out.json() {
                return print_json(&out);
            }
            say!(
                "endpoint {}: {} dead letters replayed (those that died since its outage began, {})",
                t.name,
                out.affected,
                out.since
            );
            Ok(())
        }
        Some(EndpointsCommand::ResetBreaker(t)) => {
            let server = t.conn.connect()?;
            let out = server.ask(server.client.reset_breaker(&t.name)).await?;
            if t.out.json() {
                return print_json(&out);
            }
            say!("endpoint {} breaker {}", t.name, out.breaker);
            Ok(())
        }
        None => {
            let server = a.conn.connect()?;
            let server = &server;
            let endpoints = super::up_to(a.limit, |page| async move {
                let out = server.ask(server.client.endpoints(&page)).await?;
                Ok((out.endpoints, out.next_cursor))
            })
            .await?;
            if a.out.json() {
                return print_json(&serde_json::json!({ "endpoints": endpoints }));
            }
            let rows: Vec<Vec<String>> = endpoints
                .iter()
                .map(|e| {
                    vec![
                        e.name.clone(),
                        e.breaker.to_string(),
                        e.held.to_string(),
                        e.in_flight.to_string(),
                        e.budget_remaining.to_string(),
                        or_dash(e.holding.as_ref()),
                    ]
                })
                .collect();
            say!(
                "{}",
                human::table(
                    &["ENDPOINT", "BREAKER", "HELD", "FLY", "BUDGET", "HOLDING"],
                    &rows,
                    &["HELD", "FLY", "BUDGET"]
                )
            );
            Ok(())
        }
    }
}
