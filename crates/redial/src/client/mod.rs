//! The subcommands that talk to a running server, one file per command group, all through the
//! Rust client (`redial-client`): typed answers, typed errors. This file holds what they share:
//! where the server is (`Conn`), errors said for a person at a terminal, JSON output.

mod dead_letters;
mod endpoints;
mod enqueue;
mod events;
mod jobs;
mod patch;
mod queues;
mod schedules;
mod stats;

pub use dead_letters::{dead_letters, DeadLettersCommand};
pub use endpoints::{endpoints, EndpointsArgs};
pub use enqueue::{enqueue, EnqueueArgs};
pub use events::{events, EventsArgs};
pub use jobs::{jobs, JobsCommand};
pub use queues::{queues, QueuesArgs};
pub use schedules::{schedules, SchedulesArgs};
pub use stats::{stats, StatsArgs};

use crate::cli_args;
use crate::human::{self, say};
use crate::UsageError;
use anyhow::{anyhow, Result};
use redial_client::{Client, HandPause, PauseInput};
use redial_policy::Timestamp;
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

/// A server and the calls the CLI makes to it: each answer typed, each failure said as a person
/// at the CLI needs it.
#[derive(Debug)]
pub(crate) struct Server {
    pub client: Client,
    has_token: bool,
}

impl Conn {
    /// The client of the server `--server` names. A person at a terminal sees each failure at
    /// once: nothing is retried.
    pub(crate) fn connect(&self) -> Result<Server> {
        let token = self.token.clone().filter(|t| !t.is_empty());
        let mut builder = Client::builder(&self.server)
            .timeout(Duration::from_secs(60))
            .max_retries(0);
        if let Some(t) = &token {
            builder = builder.token(t);
        }
        let client = builder.build().map_err(|e| match e {
            redial_client::Error::Invalid(why) => {
                anyhow!(UsageError(format!("--server (or REDIAL_SERVER) {why}")))
            }
            e => anyhow!(e),
        })?;
        Ok(Server {
            client,
            has_token: token.is_some(),
        })
    }
}

impl Server {
    /// A call's answer, or its failure as the CLI says it.
    pub async fn ask<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, redial_client::Error>>,
    ) -> Result<T> {
        call.await.map_err(|e| self.failure(e))
    }

    /// The error a failed call means, as the CLI says it.
    pub fn failure(&self, e: redial_client::Error) -> anyhow::Error {
        use redial_client::Error;
        let unreachable = || {
            format!(
                "cannot reach the server at {}: is `redial serve` running there? (--server or REDIAL_SERVER says where)",
                self.client.base()
            )
        };
        match e {
            Error::Api {
                status,
                code,
                message,
                ..
            } => {
                // What the API says to programs ("send a header") is not what a person at the CLI
                // does.
                let message = match (status, self.has_token) {
                    (401, false) => "the server needs a token: set REDIAL_TOKEN to the server's token (or pass --token)".to_owned(),
                    (401, true) => "the server refused the token in REDIAL_TOKEN (or --token): it is not the server's token".to_owned(),
                    _ => message,
                };
                anyhow!(ApiFailure {
                    status,
                    code,
                    message
                })
            }
            e @ (Error::Connection { .. } | Error::Timeout { .. }) => {
                anyhow!(e.to_string()).context(unreachable())
            }
            e => anyhow!(e),
        }
    }
}

/// An error answer of the API, as the CLI says it.
#[derive(Debug)]
pub(crate) struct ApiFailure {
    pub status: u16,
    pub code: String,
    pub message: String,
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

/// Prints an answer as JSON, through `printable` (it may hold text from outside).
pub(crate) fn print_json(v: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(|e| anyhow!("encoding JSON: {e}"))?;
    std::println!("{}", human::printable_json(&text));
    Ok(())
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
    out: human::OutputArgs,
}

impl PauseArgs {
    fn input(&self) -> PauseInput {
        PauseInput {
            reason: self.reason.clone(),
            r#for: self.for_.clone(),
            until: self.until,
        }
    }
}

/// An endpoint or a queue to act on.
#[derive(Debug, clap::Args)]
pub struct TargetArgs {
    #[command(flatten)]
    conn: Conn,
    /// The endpoint's name (a URL origin such as https://api.example.com) or the queue's.
    name: String,
    #[command(flatten)]
    out: human::OutputArgs,
}

/// Says what a hand pause or resume left in force, in one line.
fn say_paused(kind: &str, name: &str, pause: Option<&HandPause>) {
    match pause {
        None => say!("{kind} {name} is not paused by hand"),
        Some(p) => {
            let until = p
                .until
                .as_ref()
                .map_or_else(|| "until resumed".to_owned(), |u| format!("until {u}"));
            let reason = Some(p.reason.as_str()).filter(|r| !r.is_empty());
            say!(
                "{kind} {name} paused {until}{}",
                reason.map_or_else(String::new, |r| format!(": {r}"))
            );
        }
    }
}

/// A value for a table cell: `-` when there is none.
/// Up to `limit` items of a list the server gives a page at a time (`GET /v1/endpoints`,
/// `GET /v1/schedules`): pages of at most 500, each from the cursor the one before gave.
async fn up_to<T, Fut>(
    limit: u32,
    mut page: impl FnMut(redial_client::PageQuery) -> Fut,
) -> Result<Vec<T>>
where
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>)>>,
{
    let mut items = Vec::new();
    let mut query = redial_client::PageQuery::default();
    while items.len() < limit as usize {
        query.limit = Some((limit - items.len() as u32).min(500));
        let (more, next) = page(query.clone()).await?;
        items.extend(more);
        match next {
            Some(c) => query.cursor = Some(c),
            None => break,
        }
    }
    Ok(items)
}

fn or_dash(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}
