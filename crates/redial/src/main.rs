//! The `redial` binary: command-line parsing, wiring, and the mapping of errors to exit codes.
//!
//! Owns nothing of the domain: each subcommand is a thin layer over a library crate. This is the
//! only crate that uses `anyhow`, and the only one that picks a concrete store.

/// mimalloc instead of the system allocator: the storage thread frees what the runtime's threads
/// allocated (requests) and the other way round (rows), and glibc's allocator takes a lock of the
/// other thread's arena for each such free. Measured with `redial-bench --only noop`: the storage
/// thread's CPU time per job fell ~6%.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod backup;
mod cli_args;
mod client;
mod config;
mod config_check;
mod explain;
mod human;
mod migrate;
mod serve;
mod settings;
mod simulate;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Redial: a durable job queue and outbound-HTTP dispatcher that knows failures are not alike.
#[derive(Debug, Parser)]
#[command(name = "redial", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the dispatcher and its API (embedded SQLite, zero configuration needed).
    Serve(serve::Args),
    /// Enqueue jobs on a running server, from flags or from a JSON/NDJSON file.
    Enqueue(client::EnqueueArgs),
    /// List, show, replay, dismiss or cancel jobs on a running server.
    #[command(subcommand)]
    Jobs(client::JobsCommand),
    /// Dead letters on a running server: their causes (reason patterns), replay (as they were or
    /// with changes) or dismiss by filter, export.
    #[command(subcommand, name = "dead-letters")]
    DeadLetters(client::DeadLettersCommand),
    /// Counts per queue, state and dead-letter category, and per endpoint.
    Stats(client::StatsArgs),
    /// The event log: jobs finished, dead, cancelled, replayed; endpoints paused, breakers
    /// opened. A page from a cursor, or followed live with --follow.
    Events(client::EventsArgs),
    /// Each endpoint's protection: pause, limits in force, in flight, held jobs, budget, breaker;
    /// pause, resume or reset one.
    Endpoints(client::EndpointsArgs),
    /// The configured queues; pause or resume one, or list its groups (tenants) with work.
    Queues(client::QueuesArgs),
    /// Recurring schedules: list, show, create, delete, pause or resume.
    Schedules(client::SchedulesArgs),
    /// Show what Redial would do with one outcome: complete, retry, defer or dead, and why.
    Explain(explain::Args),
    /// What a configuration would do to a workload, on virtual time: drain time, requests,
    /// refusals, dead letters and completion times, per endpoint (--compare: two side by side).
    Simulate(simulate::Args),
    /// The database's schema version and pending migrations; apply them (--dry-run: only show).
    /// Upgrade a cluster by running this once, then rolling the nodes.
    Migrate(migrate::Args),
    /// Check a configuration before deploying it: `redial config check [--config FILE]
    /// [--print]` resolves it as `serve` would and reports every problem.
    #[command(subcommand)]
    Config(config_check::ConfigCommand),
    /// A consistent copy of the embedded SQLite database while jobs run (from the server, or
    /// --data-dir), checked before it is given FILE's name; serve the copy to restore it.
    Backup(backup::Args),
    /// Print a completion script for your shell, e.g. `redial completions bash >
    /// ~/.local/share/bash-completion/completions/redial`.
    Completions(CompletionsArgs),
}

#[derive(Debug, clap::Args)]
struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// A mistake in how the command was called: exit code 2, like clap's own usage errors.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The flags every command that talks to a server takes, which people also write before the
/// command (`redial --server URL stats`).
const CONNECTION_FLAGS: [&str; 2] = ["--server", "--token"];

/// Moves the connection flags written before the command to its end, where the command's own
/// arguments take them (before a `--`, if there is one).
fn lift_connection_flags(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let mut head = Vec::new();
    let mut lifted = Vec::new();
    let mut rest = args.into_iter();
    if let Some(program) = rest.next() {
        head.push(program);
    }
    let mut rest = rest.peekable();
    while let Some(arg) = rest.peek() {
        let text = arg.to_string_lossy();
        let Some(flag) = CONNECTION_FLAGS
            .iter()
            .find(|f| text == **f || text.starts_with(&format!("{f}=")))
        else {
            break;
        };
        let whole = text.len() > flag.len();
        lifted.extend(rest.next());
        if !whole {
            lifted.extend(rest.next());
        }
    }
    let mut out = head;
    let mut tail: Vec<_> = rest.collect();
    let split = tail.iter().position(|a| a == "--").unwrap_or(tail.len());
    let after: Vec<_> = tail.drain(split..).collect();
    out.extend(tail);
    out.extend(lifted);
    out.extend(after);
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(lift_connection_flags(std::env::args_os().collect()));
    // A server asked to log JSON says its last word in JSON too.
    let json_logs =
        matches!(&cli.command, Command::Serve(a) if a.log_format == serve::LogFormat::Json);
    let result = match cli.command {
        Command::Explain(args) => explain::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Completions(args) => {
            use clap::CommandFactory;
            use std::io::Write;
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut Cli::command(), "redial", &mut script);
            match std::io::stdout().write_all(&script) {
                // A reader that stopped early (`| head`) is not an error.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(anyhow::anyhow!("writing the completion script: {e}"))
                }
                _ => Ok(()),
            }
        }
        other => run_async(other),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if json_logs {
                let line = serde_json::json!({
                    "timestamp": redial_policy::Timestamp::from_unix_millis(
                        std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
                    )
                    .to_string(),
                    "level": "ERROR",
                    "message": format!("{e:#}"),
                    "target": "redial",
                });
                eprintln!("{line}");
            } else {
                // The error may quote the server's answer: shown through `printable`.
                eprintln!("error: {}", human::printable(&format!("{e:#}")));
            }
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

fn run_async(command: Command) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    runtime.block_on(async move {
        match command {
            Command::Serve(args) => {
                init_logging(args.log_format);
                serve::run(args).await
            }
            Command::Enqueue(args) => client::enqueue(args).await,
            Command::Jobs(cmd) => client::jobs(cmd).await,
            Command::DeadLetters(cmd) => client::dead_letters(cmd).await,
            Command::Stats(args) => client::stats(args).await,
            Command::Events(args) => client::events(args).await,
            Command::Endpoints(args) => client::endpoints(args).await,
            Command::Queues(args) => client::queues(args).await,
            Command::Schedules(args) => client::schedules(args).await,
            Command::Migrate(args) => migrate::run(args).await,
            Command::Backup(args) => backup::run(args).await,
            Command::Config(cmd) => config_check::run(cmd).await,
            Command::Explain(_) | Command::Simulate(_) | Command::Completions(_) => {
                unreachable!("explain, simulate and completions run without the runtime")
            }
        }
    })
}

/// Logs to standard error; `REDIAL_LOG` sets the filter (default `info`), `--log-format` the shape.
fn init_logging(format: serve::LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("REDIAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        // One JSON object per line, the event's fields at the top level.
        serve::LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
        serve::LogFormat::Pretty => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lifted(args: &[&str]) -> Vec<String> {
        lift_connection_flags(args.iter().map(Into::into).collect())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn connection_flags_before_the_command_go_after_it() {
        assert_eq!(
            lifted(&["redial", "--server", "http://x:1", "stats"]),
            ["redial", "stats", "--server", "http://x:1"]
        );
        assert_eq!(
            lifted(&[
                "redial",
                "--server=http://x:1",
                "--token",
                "t",
                "jobs",
                "show",
                "a"
            ]),
            [
                "redial",
                "jobs",
                "show",
                "a",
                "--server=http://x:1",
                "--token",
                "t"
            ]
        );
        assert_eq!(
            lifted(&["redial", "--token", "t", "explain", "--", "503"]),
            ["redial", "explain", "--token", "t", "--", "503"]
        );
        // After the command, nothing moves.
        assert_eq!(
            lifted(&["redial", "stats", "--server", "http://x:1"]),
            ["redial", "stats", "--server", "http://x:1"]
        );
    }
}

#[cfg(test)]
mod help_tests {
    use super::*;
    use clap::CommandFactory;

    /// Every argument of every command says what it is for (`--help` shows it).
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if sub.get_about().is_none() {
                    missing.push(format!("{path} {} (the command)", sub.get_name()));
                }
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "redial", &mut missing);
        assert!(missing.is_empty(), "no help for: {missing:#?}");
    }
}
