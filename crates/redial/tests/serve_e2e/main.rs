//! The real `redial serve` process and the real CLI, against a scripted receiver on loopback:
//! the quick start, restart on the same data, rescue after SIGKILL, auth, dedup, replay, files.
//!
//! One test binary, a file per area: the server's life (start, restart, rescue, binds), the CLI
//! against it, and what the configuration file sets up. The helpers are here.

mod cli;
mod configured;
mod ordering;
mod server;

use redial_test_receiver::{Receiver, Reply};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[path = "../common/mod.rs"]
mod common;

use common::{eventually, serve_command, within_patience_blocking, Server, BIN};

/// `redial serve` on `data`, with `extra` arguments and `env` variables.
pub(crate) fn start(data: &Path, extra: &[&str], env: &[(&str, &str)]) -> Server {
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(data).args(extra);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Server::start(cmd)
}

pub(crate) struct Out {
    code: i32,
    json: Value,
    stdout: String,
    stderr: String,
}

/// Runs a CLI command with `--json` and parses what it printed.
pub(crate) fn cli(server: &str, args: &[&str], token: Option<&str>) -> Out {
    let mut with_json = args.to_vec();
    if !with_json.contains(&"--json") {
        with_json.push("--json");
    }
    cli_text(server, &with_json, token)
}

/// Runs a CLI command as a person would (text output); `json` is set only if it printed JSON.
pub(crate) fn cli_text(server: &str, args: &[&str], token: Option<&str>) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env("REDIAL_SERVER", server)
        .env_remove("REDIAL_TOKEN");
    if let Some(t) = token {
        cmd.env("REDIAL_TOKEN", t);
    }
    let out = cmd.output().expect("the CLI runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub(crate) fn show(server: &str, id: &str) -> Value {
    let out = cli(server, &["jobs", "show", id], None);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json
}

/// Waits until the job, as `redial jobs show` prints it, satisfies `pred`.
pub(crate) fn wait_for(server: &str, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let shown = within_patience_blocking(|| {
        let j = show(server, id);
        pred(&j).then_some(j)
    });
    shown.unwrap_or_else(|| panic!("job {id} never became {what}: {}", show(server, id)))
}

pub(crate) fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    (dir, data)
}
