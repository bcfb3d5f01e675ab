//! `redial explain`: what would Redial do with this outcome? Prints the decision as JSON on
//! standard output and the one-line reason on standard error.

use crate::cli_args;
use crate::UsageError;
use anyhow::{Context, Result};
use redial_engine::{Clock, SystemClock};
use redial_policy::{
    decide, is_http_token, Basis, HandlerOutcome, JobCounters, Method, Outcome, Policy, Response,
    SplitMix64, Timestamp, TransportError,
};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// The typed results a custom job handler can return.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum HandlerKind {
    Success,
    Transient,
    Permanent,
    Unknown,
    /// Defer until the instant given with --until.
    Defer,
}

#[derive(Debug, clap::Args)]
#[command(
    group(clap::ArgGroup::new("outcome").required(true).args(["status", "error", "handler"])),
    after_help = "Examples:\n  redial explain --status 429 --header 'Retry-After: 30' --deferrals 3\n  \
                  redial explain --error read-timeout --attempts 2\n  \
                  redial explain --status 500 --method GET\n  \
                  redial explain --status 503 --policy policy.toml --now 2026-02-25T20:02:07Z --seed 1"
)]
pub struct Args {
    /// The response's HTTP status.
    #[arg(long, value_parser = clap::value_parser!(u16).range(100..=999))]
    status: Option<u16>,
    /// A response header, 'Name: value'; repeat for more.
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE", value_parser = cli_args::header, requires = "status")]
    headers: Vec<(String, String)>,
    /// A transport error instead of a response: connection-refused, connection-reset,
    /// dns-not-found, dns-temporary, connect-timeout, read-timeout, timeout, tls,
    /// malformed-response, truncated-response, redirect-not-followed, response-too-large,
    /// invalid-request, destination-refused.
    #[arg(long, value_name = "KIND", value_parser = parse_error_kind)]
    error: Option<TransportError>,
    /// A custom handler's typed result instead of a response.
    #[arg(long, value_enum, value_name = "RESULT")]
    handler: Option<HandlerKind>,
    /// With --handler defer: when to come back (RFC 3339).
    #[arg(long, value_parser = cli_args::instant, required_if_eq("handler", "defer"))]
    until: Option<Timestamp>,
    /// Failed attempts before this one.
    #[arg(long, default_value_t = 0)]
    attempts: u32,
    /// Of those, how many had an unknown outcome.
    #[arg(long, default_value_t = 0)]
    unknown_attempts: u32,
    /// Deferrals before this one.
    #[arg(long, default_value_t = 0)]
    deferrals: u32,
    /// The request carried an idempotency key: an unknown outcome is then safe to repeat.
    #[arg(long)]
    idempotency_key: bool,
    /// The request's method. GET, HEAD, OPTIONS, TRACE, PUT and DELETE are idempotent, so an
    /// unknown outcome waits the transient backoff (unless the policy sets
    /// safe_repeat_transient_backoff = false); POST, the default, is not, so without
    /// --idempotency-key it waits the longer unknown backoff.
    #[arg(long, default_value = "POST", value_parser = parse_method)]
    method: String,
    /// When the job was enqueued (RFC 3339); defaults to --now.
    #[arg(long, value_parser = cli_args::instant)]
    enqueued_at: Option<Timestamp>,
    /// The job's deadline (RFC 3339).
    #[arg(long, value_parser = cli_args::instant)]
    deadline: Option<Timestamp>,
    /// The delay chosen after the previous attempt (decorrelated jitter grows from it).
    #[arg(long, value_parser = cli_args::duration)]
    last_delay: Option<Duration>,
    /// A policy file (TOML); the defaults apply to every field it leaves out.
    #[arg(long, value_name = "FILE", env = "REDIAL_POLICY")]
    policy: Option<PathBuf>,
    /// The current time (RFC 3339), so that date headers give reproducible answers.
    #[arg(long, value_parser = cli_args::instant)]
    now: Option<Timestamp>,
    /// Seed for the jitter, so that the delay is reproducible.
    #[arg(long)]
    seed: Option<u64>,
}

/// Upper case, as the API stores a job's method.
fn parse_method(s: &str) -> Result<String, String> {
    let m = s.to_ascii_uppercase();
    if is_http_token(&m) {
        Ok(m)
    } else {
        Err(format!(
            "{s:?} is not an HTTP method: write a token such as GET or POST"
        ))
    }
}

fn parse_error_kind(s: &str) -> Result<TransportError, String> {
    s.parse()
        .map_err(|e: redial_policy::UnknownTransportError| e.to_string())
}

pub fn run(args: Args) -> Result<()> {
    let policy = match &args.policy {
        None => Policy::default(),
        Some(path) => load_policy(path)?,
    };
    let now = args.now.unwrap_or_else(|| SystemClock.now());
    let seed = args.seed.unwrap_or_else(redial_engine::random_u64);
    let outcome = if let Some(status) = args.status {
        Outcome::Response(Response {
            status,
            headers: args.headers.clone(),
        })
    } else if let Some(e) = args.error {
        Outcome::Transport(e)
    } else {
        let reason = || "handler result given on the command line".to_owned();
        Outcome::Handler(match args.handler {
            Some(HandlerKind::Success) => HandlerOutcome::Success,
            Some(HandlerKind::Transient) => HandlerOutcome::Transient { reason: reason() },
            Some(HandlerKind::Permanent) => HandlerOutcome::Permanent { reason: reason() },
            Some(HandlerKind::Unknown) => HandlerOutcome::Unknown { reason: reason() },
            Some(HandlerKind::Defer) => HandlerOutcome::DeferUntil {
                until: args
                    .until
                    .context("--until is required with --handler defer")?,
                reason: reason(),
            },
            None => {
                return Err(UsageError("give one of --status, --error or --handler".into()).into())
            }
        })
    };
    if args.unknown_attempts > args.attempts {
        return Err(UsageError(format!(
            "--unknown-attempts {} cannot exceed --attempts {}: unknown failures are counted among the attempts",
            args.unknown_attempts, args.attempts
        ))
        .into());
    }
    let job = JobCounters {
        failures: args.attempts,
        unknown_failures: args.unknown_attempts,
        deferrals: args.deferrals,
        enqueued_at: args.enqueued_at.unwrap_or(now),
        deadline: args.deadline,
        has_idempotency_key: args.idempotency_key,
        method: Method::from_name(&args.method),
        last_delay: args.last_delay,
    };
    let d = decide(&outcome, &job, &policy, now, &mut SplitMix64::new(seed));
    let after = job.after(&d);
    let basis = match d.classification.basis {
        Basis::Default => "built-in table".to_owned(),
        Basis::Rule(i) => format!("policy rule {}", i + 1),
        Basis::Hint(h, v) => format!("{h}: {v}"),
        Basis::Handler => "handler".to_owned(),
    };
    let out = Explanation {
        decision: d.action.as_str(),
        category: d.category_str(),
        delay_ms: d.action.delay().map(millis),
        next_run_at: d.action.next_run().map(|t| t.to_string()),
        reason: &d.reason,
        outcome_category: d.classification.category.as_str(),
        basis,
        server_wait: d.classification.server_wait.map(|w| WaitOut {
            source: w.source,
            requested_ms: millis(w.requested),
            delay_ms: millis(w.delay),
            clamped: w.clamped,
        }),
        unknown_backoff: d.unknown_backoff.map(|u| UnknownBackoffOut {
            backoff: u.backoff_name(),
            basis: u.as_str(),
        }),
        counters_after: CountersOut {
            attempts: after.failures,
            unknown_attempts: after.unknown_failures,
            deferrals: after.deferrals,
        },
        now: now.to_string(),
        seed,
    };
    println!(
        "{}",
        serde_json::to_string_pretty(&out).context("encoding the decision as JSON")?
    );
    eprintln!("{}", d.reason);
    Ok(())
}

/// The JSON printed by `redial explain`; field order is the order of importance.
#[derive(Serialize)]
struct Explanation<'a> {
    /// `complete`, `retry`, `defer` or `dead`.
    decision: &'static str,
    /// The dead-letter category for `dead`, the outcome's category otherwise.
    category: &'static str,
    delay_ms: Option<u64>,
    next_run_at: Option<String>,
    reason: &'a str,
    outcome_category: &'static str,
    /// Who classified the outcome: `built-in table`, `policy rule N`, a provider hint (`header:
    /// value`), or `handler`.
    basis: String,
    server_wait: Option<WaitOut>,
    /// For an unknown outcome retried after a backoff: which one, and why.
    unknown_backoff: Option<UnknownBackoffOut>,
    counters_after: CountersOut,
    now: String,
    seed: u64,
}

#[derive(Serialize)]
struct WaitOut {
    source: &'static str,
    requested_ms: u64,
    delay_ms: u64,
    clamped: bool,
}

#[derive(Serialize)]
struct UnknownBackoffOut {
    /// `transient` or `unknown`.
    backoff: &'static str,
    /// `idempotent_method`, `idempotency_key`, `not_safe_to_repeat` or `policy_off`.
    basis: &'static str,
}

#[derive(Serialize)]
struct CountersOut {
    attempts: u32,
    unknown_attempts: u32,
    deferrals: u32,
}

/// Reads and validates a policy file. Every problem is a usage error naming the file, and for
/// syntax and type errors the line and column.
pub fn load_policy(path: &std::path::Path) -> Result<Policy> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read policy file {}: {e}", path.display())))?;
    toml::from_str::<Policy>(&text).map_err(|e| {
        let message = e.to_string();
        let message = message.trim_end();
        // A value the checks refuse comes without a place; syntax and type errors have theirs.
        let at = if message.contains("line ") {
            String::new()
        } else {
            crate::config::locate(&text, message)
                .map_or_else(String::new, |l| format!(", line {l}"))
        };
        UsageError(format!(
            "invalid policy file {}{at}: {message}",
            path.display()
        ))
        .into()
    })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
