//! Running the real `redial serve` in tests: start it on a free loopback port, wait for its
//! address, keep its standard error (the logs), stop it gracefully or kill it; and waiting,
//! bounded, for what it does in its own time (`wait.rs`).

#![allow(dead_code)] // each test file uses its own part

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

mod place;
mod wait;
#[allow(unused_imports)] // each test file uses its own part
pub use place::{Db, Place};
#[allow(unused_imports)] // each test file uses its own part
pub use wait::{
    eventually, eventually_blocking, within_patience, within_patience_blocking, PATIENCE,
};

pub const BIN: &str = env!("CARGO_BIN_EXE_redial");

/// `redial serve --listen 127.0.0.1:0 --allow-private-networks`, with nothing inherited from
/// the environment that would change it; add arguments and variables, then [`Server::start`].
pub fn serve_command() -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--allow-private-networks",
    ])
    .env_remove("REDIAL_TOKEN")
    .env_remove("REDIAL_CONFIG")
    .env_remove("REDIAL_DATABASE_URL")
    .env_remove("REDIAL_DATA_DIR")
    .env("REDIAL_LOG", "warn");
    cmd
}

/// [`serve_command`] run by `sh -c "<setup> && exec redial serve ..."`: `setup` changes the
/// process's limits or signals first (`ulimit -n 256`, `trap '' XFSZ`...).
pub fn serve_command_after(setup: &str) -> Command {
    let serve = serve_command();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!("{setup} && exec \"$0\" \"$@\""))
        .arg(serve.get_program())
        .args(serve.get_args());
    copy_env(&serve, &mut cmd);
    cmd
}

/// Gives `to` the environment changes `from` makes.
pub fn copy_env(from: &Command, to: &mut Command) {
    for (k, v) in from.get_envs() {
        match v {
            Some(v) => to.env(k, v),
            None => to.env_remove(k),
        };
    }
}

/// Sends `raw` on a new connection and reads the answer until the server closes it.
pub fn exchange(addr: SocketAddr, raw: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .expect("timeout set");
    s.write_all(raw.as_bytes()).expect("request written");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("answer read");
    out
}

/// The status code of a raw HTTP answer.
pub fn status(answer: &str) -> u16 {
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {answer:?}"))
}

pub struct Server {
    pub child: Child,
    pub url: String,
    /// Every line the server wrote to standard error but its address.
    pub logs: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Spawns `cmd` and waits for its "listening" line.
    pub fn start(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("redial serve starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut lines = BufReader::new(stderr).lines();
        let mut before = Vec::new();
        let url = loop {
            let line = lines
                .next()
                .expect("serve printed its address before exiting")
                .expect("a line");
            if let Some(rest) = line.strip_prefix("redial listening on ") {
                break rest.split_whitespace().next().expect("a URL").to_owned();
            }
            // With --log-format json, the same as an event (and the line stays in the logs).
            if let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) {
                if event["message"] == "redial listening" {
                    if let Some(url) = event["address"].as_str() {
                        let url = url.to_owned();
                        before.push(line);
                        break url;
                    }
                }
            }
            before.push(line);
        };
        // Keep draining so the child never blocks on a full pipe.
        let logs = Arc::new(Mutex::new(before));
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                sink.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        Server { child, url, logs }
    }

    pub fn addr(&self) -> SocketAddr {
        self.url
            .trim_start_matches("http://")
            .parse()
            .expect("a socket address")
    }

    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// SIGTERM, and a graceful stop that exits 0.
    pub fn terminate(mut self) {
        let pid = self.child.id().to_string();
        let ok = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(ok.success());
        let status = self.child.wait().expect("serve exits");
        assert!(status.success(), "a graceful stop exits 0: {status:?}");
    }

    /// SIGKILL: no chance to give anything back.
    pub fn kill9(&mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the Standard Webhooks reference library (`standardwebhooks` on PyPI, first on PATH
/// through `./scripts/test`'s virtual environment) accepts the delivery with `secret`.
pub fn reference_verifies(
    secret: &str,
    headers: &[(String, String)],
    body: &str,
) -> Result<(), String> {
    let header = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let input = serde_json::json!({
        "secret": secret,
        "body": body,
        "headers": {
            "webhook-id": header("webhook-id"),
            "webhook-timestamp": header("webhook-timestamp"),
            "webhook-signature": header("webhook-signature"),
        },
    });
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import json, sys\nfrom standardwebhooks import Webhook\nd = json.load(sys.stdin)\nWebhook(d['secret']).verify(d['body'].encode(), d['headers'])\nprint('verified')",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("python3: {e}"))?;
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.to_string().as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
