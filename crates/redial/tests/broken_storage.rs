//! The real `redial serve` on a database it cannot trust or cannot write (issue 13): a file that
//! cannot be written or is damaged refuses the start with what to do; an empty file is named in
//! a warning; a full disk answers 503 `storage_unavailable` with `Retry-After`, `/readyz` says
//! so, and nothing acknowledged is lost.

use std::io::{Seek, SeekFrom, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

mod common;
use common::{
    copy_env, eventually_blocking, exchange, serve_command, serve_command_after, status,
    within_patience_blocking, Server,
};

/// One request on its own connection; the whole answer.
fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&str>) -> String {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    match body {
        Some(b) => raw.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{b}",
            b.len()
        )),
        None => raw.push_str("\r\n"),
    }
    exchange(addr, &raw)
}

/// A data folder with a database of `jobs` jobs, written by a real server that then stopped.
fn data_with_jobs(data: &Path, jobs: usize) {
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(data);
    let server = Server::start(cmd);
    let a = server.addr();
    for batch in 0..jobs.div_ceil(100) {
        let list: Vec<String> = (0..100.min(jobs - batch * 100))
            .map(|k| {
                format!(
                    r#"{{"id":"j{batch}-{k}","run_at":"2999-01-01T00:00:00Z","request":{{"url":"http://127.0.0.1:9/x","method":"POST","body":"{}"}}}}"#,
                    "x".repeat(200)
                )
            })
            .collect();
        let answer = call(
            a,
            "POST",
            "/v1/jobs/batch",
            Some(&format!(r#"{{"jobs":[{}]}}"#, list.join(","))),
        );
        assert_eq!(status(&answer), 201, "{answer}");
    }
    server.terminate();
}

/// Runs `redial serve` on `data` to its end (a refusal), as `cmd` prepared it.
fn refused(mut cmd: Command) -> Output {
    let out = cmd.output().expect("serve runs");
    assert!(
        !out.status.success(),
        "the start was refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn a_damaged_database_refuses_the_start_with_what_to_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    data_with_jobs(&data, 2_000);
    let db = data.join("redial.db");
    // Everything into the file itself, then ten pages of garbage where the jobs are.
    let conn = rusqlite::Connection::open(&db).expect("open");
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
    let page: u64 = conn
        .query_row("PRAGMA page_size", [], |r| r.get(0))
        .expect("page size");
    drop(conn);
    let pages = std::fs::metadata(&db).expect("metadata").len() / page;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .expect("open for damage");
    f.seek(SeekFrom::Start(pages / 2 * page)).expect("seek");
    f.write_all(&vec![0xA5; 10 * page as usize])
        .expect("garbage");
    drop(f);

    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(&data);
    let out = refused(cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to start"), "{err}");
    assert!(err.contains(&db.display().to_string()), "{err}");
    assert!(err.contains("restore the file from a backup"), "{err}");
}

#[test]
fn a_database_that_cannot_be_written_refuses_the_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    data_with_jobs(&data, 10);
    // The folder and its files read-only. Root writes whatever the modes say, so as root the
    // server runs as `nobody`, from a copy of the binary it may read.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let mode = |p: &Path, m: u32| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
    };
    for entry in std::fs::read_dir(&data).expect("data folder") {
        mode(&entry.expect("entry").path(), 0o444);
    }
    mode(&data, 0o555);
    mode(dir.path(), 0o755);
    let serve = serve_command();
    let mut cmd = if root {
        let bin = dir.path().join("redial");
        std::fs::copy(serve.get_program(), &bin).expect("binary copied");
        mode(&bin, 0o755);
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(bin);
        c
    } else {
        Command::new(serve.get_program())
    };
    cmd.args(serve.get_args()).arg("--data-dir").arg(&data);
    copy_env(&serve, &mut cmd);
    let out = refused(cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot be written"), "{err}");
    assert!(
        err.contains(&data.join("redial.db").display().to_string()),
        "{err}"
    );
    mode(&data, 0o755);
}

#[test]
fn an_empty_database_file_is_named_in_a_warning() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data folder");
    std::fs::write(data.join("redial.db"), b"").expect("empty file");
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(&data);
    let server = Server::start(cmd);
    let logs = server.logs();
    assert!(
        logs.iter()
            .any(|l| l.contains("exists but is empty") && l.contains("redial.db")),
        "{logs:?}"
    );
    server.terminate();
}

/// A disk that fills up, made with the file-size limit (`SIGXFSZ` ignored, so a write past it
/// fails as on a full disk instead of killing the process).
#[test]
fn a_full_disk_answers_503_and_readiness_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cmd = serve_command_after("trap '' XFSZ && ulimit -f 5859");
    cmd.arg("--data-dir").arg(dir.path().join("data"));
    let server = Server::start(cmd);
    let a = server.addr();
    // The integrity check of a new database ends at once; only a broken one waits this out.
    let ready = within_patience_blocking(|| status(&call(a, "GET", "/readyz", None)) == 200);
    if ready.is_none() {
        panic!("never ready: {}", call(a, "GET", "/readyz", None));
    }
    let body = "y".repeat(200_000);
    let mut acknowledged = 0;
    let full = loop {
        assert!(acknowledged < 200, "3 MB never filled up");
        let answer = call(
            a,
            "POST",
            "/v1/jobs",
            Some(&format!(
                r#"{{"id":"big{acknowledged}","run_at":"2999-01-01T00:00:00Z","request":{{"url":"http://127.0.0.1:9/x","method":"POST","body":"{body}"}}}}"#
            )),
        );
        match status(&answer) {
            201 => acknowledged += 1,
            _ => break answer,
        }
    };
    assert_eq!(status(&full), 503, "{full}");
    assert!(full.contains("\"storage_unavailable\""), "{full}");
    assert!(
        full.to_ascii_lowercase().contains("retry-after: 5"),
        "{full}"
    );
    let ready = call(a, "GET", "/readyz", None);
    assert_eq!(status(&ready), 503, "{ready}");
    assert!(ready.contains("unavailable"), "{ready}");
    // Every acknowledged job is there.
    for id in 0..acknowledged {
        let answer = call(a, "GET", &format!("/v1/jobs/big{id}"), None);
        assert_eq!(status(&answer), 200, "big{id}: {answer}");
    }
    drop(server);
}

/// The database holds every job's request, credentials included: a new data folder and its files
/// are their owner's alone.
#[test]
fn a_new_data_folder_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    data_with_jobs(&data, 1);
    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    for entry in std::fs::read_dir(&data).expect("data folder") {
        let p = entry.expect("entry").path();
        assert_eq!(mode(&p), 0o600, "{}", p.display());
    }
}

#[test]
fn a_second_server_on_the_same_data_folder_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(&data);
    let first = Server::start(cmd);
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(&data);
    let out = refused(cmd);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refusing to start"), "{err}");
    assert!(err.contains("in use by another redial"), "{err}");
    assert!(
        err.contains(&format!("process {}", first.child.id())),
        "{err}"
    );
    first.terminate();
    // Once the first is gone, the folder is free again.
    let mut cmd = serve_command();
    cmd.arg("--data-dir").arg(&data);
    Server::start(cmd).terminate();
}

/// A throwaway PostgreSQL server of this test's own (its processes are stopped and resumed):
/// stopped and removed when dropped.
struct OwnPostgres {
    data: String,
    url: String,
}

impl OwnPostgres {
    fn start() -> OwnPostgres {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/throwaway-postgres");
        let out = Command::new(&script)
            .arg("start")
            .output()
            .expect("throwaway-postgres");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).expect("UTF-8");
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("export {name}=")))
                .expect("a value")
                .to_owned()
        };
        OwnPostgres {
            data: value("REDIAL_TEST_PGDATA"),
            url: value("DATABASE_URL"),
        }
    }

    /// Sends `signal` to the server and every process of it: STOP hangs it (connections stay
    /// open, the kernel still acknowledges, nothing answers), CONT resumes it. The postmaster
    /// first: stopped, it forks no backend for a new connection between the two signals (one
    /// run in a fresh clone had a connection opened then answer while the rest hung).
    fn signal(&self, signal: &str) {
        let pid = std::fs::read_to_string(Path::new(&self.data).join("data/postmaster.pid"))
            .expect("postmaster.pid");
        let pid = pid.lines().next().expect("a pid").trim().to_owned();
        let ok = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status();
        assert!(ok.is_ok_and(|s| s.success()), "kill -{signal} {pid}");
        let _ = Command::new("pkill")
            .args([&format!("-{signal}"), "-P", &pid])
            .status();
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        self.signal("CONT");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/throwaway-postgres");
        let _ = Command::new(script).arg("stop").arg(&self.data).status();
    }
}

/// Issue 31: PostgreSQL hangs (its processes stopped, as in a partition where the kernel still
/// answers). Readiness turns 503 within seconds, and every call that needs the database answers
/// 503 `storage_unavailable` within a bound (before, both hung for as long as the server did);
/// when the server resumes, the node recovers by itself. The bounds are the configuration's
/// (`[postgres]`: here 4 s a call, 2 s for readiness, instead of 10 s and 3 s).
#[test]
fn a_hung_postgres_answers_503_within_a_bound_and_the_node_recovers() {
    let pg = OwnPostgres::start();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        "[postgres]\ncall_timeout = \"4s\"\nready_timeout = \"2s\"\n",
    )
    .expect("write");
    let mut cmd = serve_command();
    cmd.env("REDIAL_DATABASE_URL", &pg.url)
        .arg("--config")
        .arg(&config);
    let server = Server::start(cmd);
    let a = server.addr();
    assert_eq!(status(&call(a, "GET", "/readyz", None)), 200);
    pg.signal("STOP");
    let timed = |method: &str, path: &str, body: Option<&str>| {
        let started = std::time::Instant::now();
        let answer = call(a, method, path, body);
        (status(&answer), started.elapsed(), answer)
    };
    let (code, took, answer) = timed("GET", "/readyz", None);
    println!("hung PostgreSQL: /readyz answered {code} in {took:?}");
    assert_eq!(code, 503, "{answer}");
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(30),
        "/readyz took {took:?}"
    );
    let (code, took, answer) = timed("GET", "/v1/stats", None);
    println!("hung PostgreSQL: /v1/stats answered {code} in {took:?}");
    assert_eq!(code, 503, "{answer}");
    assert!(answer.contains("storage_unavailable"), "{answer}");
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(60),
        "/v1/stats took {took:?}"
    );
    let (code, took, answer) = timed(
        "POST",
        "/v1/jobs",
        Some(r#"{"id":"during","request":{"url":"http://127.0.0.1:9/x","method":"POST"}}"#),
    );
    println!("hung PostgreSQL: an enqueue answered {code} in {took:?}");
    assert_eq!(code, 503, "{answer}");
    let logs = server.logs().join("\n");
    for bound in ["within 2 s", "within 4 s"] {
        assert!(logs.contains(bound), "no {bound:?} in the logs:\n{logs}");
    }
    pg.signal("CONT");
    eventually_blocking("ready again", || {
        status(&call(a, "GET", "/readyz", None)) == 200
    });
    let answer = call(
        a,
        "POST",
        "/v1/jobs",
        Some(r#"{"id":"after","request":{"url":"http://127.0.0.1:9/x","method":"POST"}}"#),
    );
    assert_eq!(status(&answer), 201, "{answer}");
}
