//! The `redial` binary: command-line parsing, wiring, and the mapping of errors to exit codes.
//!
//! Owns nothing of the domain: each subcommand is a thin layer over a library crate. This is the
//! only crate that uses `anyhow`; libraries return typed errors.

mod cli_args;
mod explain;

use clap::{Parser, Subcommand};
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
    /// Show what Redial would do with one outcome: complete, retry, defer or dead, and why.
    Explain(explain::Args),
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Explain(args) => explain::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
