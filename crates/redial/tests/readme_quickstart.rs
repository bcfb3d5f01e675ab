//! The README's Quick start, run as written against the built binary (issue 16): its commands are
//! read from the README itself, so the README and the product cannot drift apart unnoticed.
//!
//! What a test must change, and only that: `./target/release/redial` is this build's binary, the
//! server listens on a free port (not 8080) with its own data folder, the receiver on a free port
//! (not 9000), and `cargo build` is not run. Between the enqueues and the first look at the jobs
//! the test waits until both jobs have ended (a person reading the output takes longer).

use serde_json::Value;
use std::process::{Child, Command, Stdio};

mod common;
use common::{eventually_blocking, within_patience_blocking, Server, BIN};

const README: &str = include_str!("../../../README.md");

/// The Quick start section's `sh` blocks, each as its command lines.
fn blocks() -> Vec<Vec<String>> {
    let start = README
        .find("## Quick start")
        .expect("a Quick start section");
    let section = &README[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    section
        .split("```sh\n")
        .skip(1)
        .map(|b| {
            b[..b.find("```").expect("a block's end")]
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .collect()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn get(url: &str) -> Option<Value> {
    let out = Command::new("curl").args(["-s", url]).output().ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

#[test]
fn the_quick_start_works_as_written() {
    let blocks = blocks();
    assert_eq!(
        blocks.len(),
        3,
        "the Quick start's three blocks: {blocks:?}"
    );
    let dir = tempfile::tempdir().expect("temp dir");

    // Block 1: build (skipped), then serve with the README's flags.
    let serve = blocks[0]
        .iter()
        .find(|l| l.contains(" serve"))
        .expect("a serve command");
    let args: Vec<&str> = serve
        .split_whitespace()
        .skip_while(|w| !w.ends_with("redial"))
        .skip(1)
        .collect();
    let mut cmd = Command::new(BIN);
    cmd.args(&args)
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .env_remove("REDIAL_TOKEN")
        .env_remove("REDIAL_CONFIG")
        .env_remove("REDIAL_DATABASE_URL")
        .env_remove("REDIAL_ALLOW_PRIVATE_NETWORKS")
        .env("REDIAL_LOG", "warn");
    let server = Server::start(cmd);
    let host = server.url.trim_start_matches("http://").to_owned();
    let receiver_port = free_port().to_string();
    let adapt = |line: &str| {
        line.replace("./target/release/redial", BIN)
            .replace("localhost:8080", &host)
            .replace("9000", &receiver_port)
    };

    let mut background: Vec<Child> = Vec::new();
    let mut outputs: Vec<(String, String)> = Vec::new();
    let mut waited = false;
    for line in blocks[1].iter().chain(&blocks[2]) {
        let line = adapt(line);
        if let Some(bg) = line
            .split('#')
            .next()
            .and_then(|l| l.trim_end().strip_suffix('&'))
        {
            let child = Command::new("sh")
                .args(["-c", &format!("exec {bg}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("a background command starts");
            background.push(child);
            let port = receiver_port.parse::<u16>().expect("port");
            eventually_blocking(&format!("the receiver listens: {bg}"), || {
                std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            });
            continue;
        }
        if line.contains(" jobs ") && !waited {
            // Both jobs have ended before anyone looks.
            let state = |id: &str| {
                get(&format!("{}/v1/jobs/{id}", server.url))
                    .and_then(|j| j["state"].as_str().map(str::to_owned))
            };
            let ended = within_patience_blocking(|| {
                state("hello").as_deref() == Some("completed")
                    && state("missing").as_deref() == Some("dead")
            });
            assert!(
                ended.is_some(),
                "the quick start's jobs never ended: hello {:?}, missing {:?}",
                state("hello"),
                state("missing")
            );
            waited = true;
        }
        // In the test's own folder: what a command writes (an export's file) stays out of the
        // work tree.
        let out = Command::new("sh")
            .args(["-c", &line])
            .current_dir(dir.path())
            .env("REDIAL_SERVER", &server.url)
            .env_remove("REDIAL_TOKEN")
            .output()
            .expect("the command runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{line}\nfailed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((line, stdout));
    }
    for mut child in background {
        let _ = child.kill();
        let _ = child.wait();
    }

    // What the README says happens, happened: the reason it quotes is the one `jobs show` prints.
    let quoted = README
        .split("as `permanent` (`")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .expect("the README quotes the dead job's reason");
    let quoted = quoted.split_whitespace().collect::<Vec<_>>().join(" ");
    let (_, shown) = outputs
        .iter()
        .find(|(l, _)| l.contains("jobs show missing"))
        .expect("the README shows the dead job");
    assert!(shown.contains(&quoted), "{quoted:?} not in:\n{shown}");
    let (_, listed) = outputs
        .iter()
        .find(|(l, _)| l.contains("jobs list"))
        .expect("the README lists the jobs");
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("hello") && l.contains("completed")),
        "{listed}"
    );
    // Every curl answer ends with a newline, so the shell prompt starts on its own line.
    for (line, out) in outputs.iter().filter(|(l, _)| l.starts_with("curl")) {
        assert!(out.ends_with('\n'), "{line}: {out:?}");
    }
    server.terminate();
}
