//! `redial config check` (issue 31): the configuration examples of the README and of `docs/`,
//! and `deploy/redial.toml`, pass it; a file with many problems gets every one of them, each with
//! its line; flags and variables are resolved as `serve` resolves them; `--print` shows what is in
//! force, secrets redacted, as a file that checks again to the same.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::BIN;

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `redial config check ARGS` with only the variables given (nothing inherited that would
/// change what it resolves).
fn check(args: &[&str], env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(BIN);
    cmd.args(["config", "check"]).args(args);
    for (k, _) in std::env::vars() {
        if k.starts_with("REDIAL_") || k.starts_with("OTEL_") || k.starts_with("PGSSL") {
            cmd.env_remove(k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the CLI runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The environment variables the documentation's credentials examples read
/// (`docs/credentials.md`).
const DOCS_SECRETS: &[(&str, &str)] = &[
    ("STRIPE_API_KEY", "sk_test_doc"),
    ("OPENAI_API_KEY", "sk-doc"),
    ("MAILGUN_API_KEY", "key-doc"),
    ("SENDGRID_API_KEY", "SG.doc"),
    ("CRM_CLIENT_SECRET", "doc-client-secret"),
    ("PARTNER_DEFAULT_TOKEN", "doc-token"),
    ("STRIPE_EU_API_KEY", "sk_test_doc_eu"),
];

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_str().expect("utf-8").to_owned()
}

#[test]
fn the_docs_and_deploy_examples_pass() {
    // The README and every page of docs/ (the reference moved there, issue 32).
    let mut pages = vec![repo("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo("docs"))
        .expect("docs/")
        .map(|e| e.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let dir = tempfile::tempdir().expect("temp dir");
    // The examples' certificate files (`/etc/redial/tls/...`, docs/credentials.md) are ones
    // this test makes (`scripts/test-certs`), where the examples are written.
    let tls = dir.path().join("tls");
    let made = Command::new(repo("scripts/test-certs"))
        .arg(&tls)
        .status()
        .expect("run scripts/test-certs (needs openssl)");
    assert!(made.success(), "scripts/test-certs failed");
    let mut blocks = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a documentation page");
        let name = page.file_stem().and_then(|s| s.to_str()).expect("utf-8");
        for (i, block) in text.split("```toml\n").skip(1).enumerate() {
            let text = &block[..block.find("```").expect("block end")];
            let text = text.replace("/etc/redial/tls/", &format!("{}/", tls.display()));
            let file = write(dir.path(), &format!("{name}-{i}.toml"), &text);
            let out = check(&["--config", &file], DOCS_SECRETS);
            assert_eq!(
                out.code,
                0,
                "{}'s TOML block {i} fails the check:\n{text}\n{}",
                page.display(),
                out.stderr
            );
            assert!(out.stdout.starts_with("configuration ok"), "{}", out.stdout);
            blocks += 1;
        }
    }
    assert!(
        blocks >= 5,
        "the README and docs/ have their TOML examples ({blocks})"
    );

    let deploy = repo("deploy/redial.toml");
    let deploy = deploy.to_str().expect("utf-8");
    let env = [
        ("REDIAL_TOKEN", "a-long-random-token"),
        (
            "REDIAL_DATABASE_URL",
            "postgres://redial:pw@db.internal/redial?sslmode=verify-full&sslrootcert=system",
        ),
    ];
    let out = check(&["--config", deploy], &env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("listen on 0.0.0.0:8080")
            && out
                .stdout
                .contains("PostgreSQL at postgres://redial:redacted@db.internal"),
        "{}",
        out.stdout
    );
    // As serve would: without the token it says which it needs.
    let out = check(&["--config", deploy], &env[1..]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stderr.contains("without a token"), "{}", out.stderr);
}

#[test]
fn every_problem_is_told_with_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(
        dir.path(),
        "redial.toml",
        r#"# several mistakes
[server]
max_batch = 0
max_batchh = 3
header_timeout = "zz"

[engine]
heartbeat = "1m"
lease = "30s"

[queues.mail]
concurrency = 0

[queues.sms]
concurrency = "x"

[endpoints."https://api.example.com"]
rate = "fast"
"#,
    );
    let out = check(&["--config", &file], &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    for (line, what) in [
        (3, "server.max_batch must be at least 1"),
        (4, "server.max_batchh: unknown field"),
        (5, "server.header_timeout: invalid duration \"zz\""),
        (8, "engine.heartbeat must be shorter than engine.lease"),
        (12, "queues.mail.concurrency must be from 1 to 10000"),
        (15, "queues.sms.concurrency: invalid type"),
        (18, "invalid rate \"fast\""),
    ] {
        assert!(
            out.stderr
                .lines()
                .any(|l| l.contains(&format!("line {line}: ")) && l.contains(what)),
            "line {line}, {what}:\n{}",
            out.stderr
        );
    }
    assert!(out.stderr.contains("7 problems"), "{}", out.stderr);

    // The flags' problems beside the file's; a syntax error stops the reading there.
    let out = check(&["--config", &file, "--listen", "nowhere"], &[]);
    assert!(
        out.stderr.contains("8 problems") && out.stderr.contains("--listen \"nowhere\""),
        "{}",
        out.stderr
    );
    let broken = write(dir.path(), "broken.toml", "[server]\nlisten = \"x\n");
    let out = check(&["--config", &broken], &[]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains(", line 2: "), "{}", out.stderr);

    // Schedules are checked as the API checks them, each named by its line.
    let schedules = write(
        dir.path(),
        "schedules.toml",
        r#"[[schedules]]
id = "ok"
every = "1m"
job = { request = { method = "POST", url = "https://api.example.com/a" } }

[[schedules]]
id = "bad"
every = "1s1m"
job = { request = { method = "POST", url = "https://api.example.com/b" } }

[[schedules]]
id = "never"
cron = "* * 2 * 3 0L"
timezone = "Europe/Berlin"
job = { request = { method = "POST", url = "https://api.example.com/c" } }

[[schedules]]
id = "forged"
every = "1m"
job = { queue = "callbacks", request = { method = "POST", url = "https://api.example.com/d" } }
"#,
    );
    let out = check(&["--config", &schedules], &[]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("line 6: schedules[1]") && out.stderr.contains("line 11: schedules[2]"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("schedules[0]"), "{}", out.stderr);
    // Checked against the queues the engine runs, Redial's own among them: the callback
    // queue is there, and refused as serve refuses it (not told as unknown).
    assert!(
        out.stderr.contains("line 17: schedules[3]")
            && out
                .stderr
                .contains("carries Redial's own signed deliveries"),
        "{}",
        out.stderr
    );
}

#[test]
fn print_shows_what_is_in_force_with_secrets_redacted_and_reads_back_the_same() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = write(
        dir.path(),
        "redial.toml",
        r#"[server]
token = "file-token-abc"

[queues.mail]
concurrency = 4
group_concurrency = 2
signing_secrets = ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
policy = { max_attempts = 3 }

[queues.mail.groups.big]
weight = 5

[endpoints."https://api.example.com"]
rate = "5/s"

[[alerts.rules]]
name = "any"
more_than = 3

[[schedules]]
id = "s"
every = "1m"
job = { request = { method = "POST", url = "https://user:pw@api.example.com/x", headers = { Authorization = "Bearer sched-secret" } } }
"#,
    );
    let env = [
        ("REDIAL_LISTEN", "127.0.0.1:9999"),
        (
            "REDIAL_DATABASE_URL",
            "postgres://redial:db-password@db/redial",
        ),
    ];
    let out = check(&["--config", &file, "--print"], &env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let printed = out.stdout;
    for secret in [
        "file-token-abc",
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "db-password",
        "sched-secret",
        ":pw@",
    ] {
        assert!(!printed.contains(secret), "{secret} shows:\n{printed}");
    }
    for shown in [
        "listen = \"127.0.0.1:9999\"",
        "token = \"[redacted]\"",
        "signing_secrets = [\"[redacted]\"]",
        "max_attempts = 3",
        "group_concurrency = 2",
        "[queues.mail.groups.big]",
        "rate = \"5/1s\"",
        "[queues.default]",
        "lease = \"30s\"",
    ] {
        assert!(printed.contains(shown), "{shown} is not shown:\n{printed}");
    }
    // Without the secrets it cannot show, the printed file checks again to the same.
    let again = printed
        .replace("token = \"[redacted]\"\n", "")
        .replace("signing_secrets = [\"[redacted]\"]", "signing_secrets = []")
        .replace("Authorization = \"[redacted]\"\n", "")
        .replace("%5Bredacted%5D@", "");
    let file = write(dir.path(), "printed.toml", &again);
    let out = check(&["--config", &file, "--print"], &[]);
    assert_eq!(out.code, 0, "{}\n{again}", out.stderr);
    assert_eq!(out.stdout, again);
}

/// An endpoint's credentials: each mistake named with its field, a secret written in the file
/// refused unless insisted on, a missing variable told; `--print` shows where secrets come
/// from and never a value.
#[test]
fn endpoint_credentials_are_checked_and_never_printed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let secret_file = write(dir.path(), "key", "file-secret-value\n");
    let cases: &[(&str, &str)] = &[
        (
            "kind = \"bearer\"\nsecret = \"literal-value\"\n",
            "a secret written in the configuration file",
        ),
        ("kind = \"bearer\"\n", "needs its secret"),
        (
            "kind = \"bearer\"\nsecret_env = \"NOT_SET_ANYWHERE\"\n",
            "the environment variable NOT_SET_ANYWHERE is not set",
        ),
        (
            "kind = \"bearer\"\nsecret_file = \"/nonexistent/key\"\n",
            "secret_file: the secret file /nonexistent/key cannot be read",
        ),
        ("kind = \"digest\"\nsecret_env = \"K\"\n", "is not one of"),
        ("kind = \"basic\"\nsecret_env = \"K\"\n", "needs a username"),
        (
            "kind = \"bearer\"\nsecret_env = \"K\"\nusername = \"u\"\n",
            "username is not used by kind = \"bearer\"",
        ),
        (
            "kind = \"oauth2_client_credentials\"\ntoken_url = \"ftp://x\"\nclient_id = \"c\"\nclient_secret_env = \"K\"\n",
            "is not an http(s) URL",
        ),
        ("kind = \"mtls\"\n", "needs cert_file and key_file"),
        ("kind = \"mtls\"\ncert_file = \"/c.pem\"\n", "cert_file and key_file go together"),
        (
            "kind = \"mtls\"\ncert_file = \"/nonexistent/c.pem\"\nkey_file = \"/nonexistent/k.pem\"\n",
            "the certificate file /nonexistent/c.pem cannot be read",
        ),
        (
            "kind = \"bearer\"\nsecret_env = \"K\"\ncert_file = \"/c.pem\"\n",
            "cert_file and key_file go together",
        ),
        (
            "kind = \"bearer\"\nsecret_env = \"K\"\nca_file = \"/nonexistent/ca.pem\"\n",
            "the CA file /nonexistent/ca.pem cannot be read",
        ),
        (
            "kind = \"mtls\"\nca_file = \"/nonexistent/ca.pem\"\n",
            "needs cert_file and key_file",
        ),
    ];
    for (i, (auth, says)) in cases.iter().enumerate() {
        let file = write(
            dir.path(),
            &format!("bad-{i}.toml"),
            &format!("[endpoints.\"https://api.example.com\".auth]\n{auth}"),
        );
        let out = check(&["--config", &file], &[("K", "v")]);
        assert_eq!(out.code, 1, "case {i} is refused: {}", out.stdout);
        assert!(
            out.stderr
                .contains("endpoints.\"https://api.example.com\".auth")
                && out.stderr.contains(says),
            "case {i} says {says:?}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("literal-value"));
    }
    for (i, (table, says)) in [
        (
            "[credentials.\"no spaces\"]\nkind = \"bearer\"\nsecret_env = \"K\"\n",
            "credentials.\"no spaces\": a profile's name is 1 to 64",
        ),
        (
            "[credentials.b]\nkind = \"bearer\"\n",
            "credentials.\"b\": needs its secret",
        ),
        (
            "[credentials.b]\nkind = \"bearer\"\nsecret_env = \"K\"\nallow_job_credentials = 1\n",
            "credentials.\"b\".allow_job_credentials: true or false",
        ),
    ]
    .iter()
    .enumerate()
    {
        let file = write(dir.path(), &format!("profile-{i}.toml"), table);
        let out = check(&["--config", &file], &[("K", "v")]);
        assert_eq!(out.code, 1, "profile case {i} is refused: {}", out.stdout);
        assert!(
            out.stderr.contains(says),
            "profile case {i} says {says:?}: {}",
            out.stderr
        );
    }
    let good = write(
        dir.path(),
        "good.toml",
        &format!(
            "[endpoints.\"https://a.example.com\".auth]\nkind = \"bearer\"\nsecret_file = {secret_file:?}\n\n\
             [endpoints.\"https://b.example.com\".auth]\nkind = \"header\"\nheader = \"X-Api-Key\"\n\
             secret = \"literal-value\"\ninsecure_literal = true\n\n\
             [endpoints.\"https://c.example.com\".auth]\nkind = \"oauth2_client_credentials\"\n\
             token_url = \"https://login.example.com/token\"\nclient_id = \"me\"\n\
             client_secret_env = \"CLIENT_SECRET\"\nscopes = [\"a\", \"b\"]\n\n\
             [credentials.tenant-b]\nkind = \"bearer\"\nsecret_env = \"TENANT_B_KEY\"\n\
             allow_job_credentials = true\n"
        ),
    );
    let out = check(
        &["--config", &good, "--print"],
        &[
            ("CLIENT_SECRET", "env-secret-value"),
            ("TENANT_B_KEY", "profile-secret-value"),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    for secret in [
        "file-secret-value",
        "literal-value",
        "env-secret-value",
        "profile-secret-value",
    ] {
        assert!(
            !out.stdout.contains(secret),
            "{secret} printed:\n{}",
            out.stdout
        );
    }
    for shown in [
        "secret_file = ",
        "secret = \"[redacted]\"",
        "client_secret_env = \"CLIENT_SECRET\"",
        "kind = \"oauth2_client_credentials\"",
        "allow_job_credentials = false",
        "[credentials.tenant-b]",
        "secret_env = \"TENANT_B_KEY\"",
        "allow_job_credentials = true",
    ] {
        assert!(
            out.stdout.contains(shown),
            "{shown} not shown:\n{}",
            out.stdout
        );
    }
}
