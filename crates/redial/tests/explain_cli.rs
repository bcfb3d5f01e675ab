//! `redial explain` as a user runs it: the real binary, its JSON, its reason and its exit codes.

use serde_json::Value;
use std::process::Command;

const NOW: &str = "2026-02-25T20:02:07Z";

struct Run {
    code: i32,
    json: Value,
    stderr: String,
}

fn explain(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_redial"))
        .arg("explain")
        .args(args)
        .env_remove("REDIAL_POLICY")
        .output()
        .expect("the redial binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    Run {
        code: out.status.code().unwrap_or(-1),
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs with a fixed clock and seed and checks `decision category delay_ms`.
fn check(args: &[&str], expected: &str) -> Run {
    let mut all = vec!["--now", NOW, "--seed", "7"];
    all.extend_from_slice(args);
    let r = explain(&all);
    assert_eq!(r.code, 0, "{args:?}: {}", r.stderr);
    let j = &r.json;
    let got = format!(
        "{} {} {}",
        j["decision"].as_str().unwrap_or("?"),
        j["category"].as_str().unwrap_or("?"),
        j["delay_ms"]
    );
    assert_eq!(got, expected, "{args:?}: {j}");
    assert_eq!(
        r.stderr.trim_end(),
        j["reason"].as_str().unwrap_or("?"),
        "the reason goes to stderr too"
    );
    r
}

#[test]
fn decisions() {
    let r = check(
        &[
            "--status",
            "429",
            "--header",
            "Retry-After: 30",
            "--deferrals",
            "3",
        ],
        "defer defer 30389",
    );
    assert_eq!(
        r.json["reason"],
        "429 rate limited; Retry-After 30s; deferral 4 of 20"
    );
    assert_eq!(r.json["next_run_at"], "2026-02-25T20:02:37.389Z");
    assert_eq!(r.json["server_wait"]["source"], "Retry-After");
    assert_eq!(r.json["counters_after"]["deferrals"], 4);
    assert_eq!(r.json["counters_after"]["attempts"], 0);
    check(&["--status", "200"], "complete success null");
    check(&["--status", "400"], "dead permanent null");
    check(
        &["--status", "503", "--attempts", "9"],
        "dead transient_exhausted null",
    );
    check(
        &[
            "--status",
            "500",
            "--attempts",
            "2",
            "--unknown-attempts",
            "2",
        ],
        "dead unknown_exhausted null",
    );
    check(
        &["--status", "429", "--deferrals", "20"],
        "dead deferral_exhausted null",
    );
    check(
        &["--status", "503", "--deadline", "2026-02-25T20:02:07Z"],
        "dead deadline_exceeded null",
    );
    check(
        &["--status", "409", "--idempotency-key"],
        "retry transient 779",
    );
    check(&["--status", "409"], "dead permanent null");
    check(&["--error", "connection-refused"], "retry transient 779");
    check(
        &["--handler", "defer", "--until", "2026-02-25T20:03:07Z"],
        "defer defer 60389",
    );
    check(&["--handler", "permanent"], "dead permanent null");
    // Date headers read against --now.
    check(
        &[
            "--status",
            "503",
            "-H",
            "Retry-After: Wed, 25 Feb 2026 20:02:37 GMT",
        ],
        "defer defer 30389",
    );
}

/// `--method` decides which backoff an unknown outcome waits (RFC 9110 section 9.2.2); POST, the
/// default, waits the long unknown backoff unless the request carries an idempotency key.
#[test]
fn method_picks_the_backoff_of_an_unknown_outcome() {
    let unknown_backoff = |r: &Run| {
        format!(
            "{} {}",
            r.json["unknown_backoff"]["backoff"].as_str().unwrap_or("?"),
            r.json["unknown_backoff"]["basis"].as_str().unwrap_or("?")
        )
    };
    // The same seed gives the same jitter, so the delays differ only by the backoff.
    let r = check(&["--status", "500"], "retry unknown 11694");
    assert_eq!(unknown_backoff(&r), "unknown not_safe_to_repeat");
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap_or("?")
            .contains("; unknown backoff: POST without an idempotency key may have taken effect;"),
        "{}",
        r.json["reason"]
    );
    let r = check(&["--status", "500", "--method", "GET"], "retry unknown 779");
    assert_eq!(unknown_backoff(&r), "transient idempotent_method");
    assert!(
        r.json["reason"]
            .as_str()
            .unwrap_or("?")
            .contains("; transient backoff: GET is idempotent (RFC 9110 9.2.2);"),
        "{}",
        r.json["reason"]
    );
    // Methods are upper-cased, as the API stores them.
    let r = check(
        &["--error", "truncated-response", "--method", "put"],
        "retry unknown 779",
    );
    assert_eq!(unknown_backoff(&r), "transient idempotent_method");
    let r = check(
        &["--status", "500", "--method", "PATCH", "--idempotency-key"],
        "retry unknown 779",
    );
    assert_eq!(unknown_backoff(&r), "transient idempotency_key");
    // Still an unknown failure: max_unknown_attempts ends the job.
    let r = check(
        &[
            "--status",
            "500",
            "--method",
            "GET",
            "--attempts",
            "2",
            "--unknown-attempts",
            "2",
        ],
        "dead unknown_exhausted null",
    );
    assert_eq!(r.json["unknown_backoff"], Value::Null);
    assert_eq!(r.json["counters_after"]["unknown_attempts"], 3);
    // A server-given wait wins, and other categories have no such field.
    let r = check(
        &["--status", "500", "-H", "Retry-After: 7", "--method", "GET"],
        "retry unknown 7389",
    );
    assert_eq!(r.json["unknown_backoff"], Value::Null);
    let r = check(
        &["--status", "503", "--method", "GET"],
        "retry transient 779",
    );
    assert_eq!(r.json["unknown_backoff"], Value::Null);

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, "safe_repeat_transient_backoff = false\n").expect("write policy");
    let p = path.to_str().expect("utf-8 path");
    let r = check(
        &["--status", "500", "--method", "GET", "--policy", p],
        "retry unknown 11694",
    );
    assert_eq!(unknown_backoff(&r), "unknown policy_off");
}

#[test]
fn seed_and_now_make_it_reproducible() {
    let args = ["--status", "503", "--now", NOW, "--seed", "42"];
    assert_eq!(explain(&args).json, explain(&args).json);
    let r = explain(&["--status", "503"]);
    assert_eq!(r.code, 0);
    assert!(r.json["seed"].is_u64() && r.json["now"].is_string());
}

#[test]
fn policy_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("policy.toml");
    std::fs::write(
        &path,
        "max_attempts = 2\n[[rules]]\nstatus = 404\ncategory = \"transient\"\n",
    )
    .expect("write policy");
    let p = path.to_str().expect("utf-8 path");
    check(
        &["--status", "503", "--attempts", "1", "--policy", p],
        "dead transient_exhausted null",
    );
    let r = check(&["--status", "404", "--policy", p], "retry transient 779");
    assert_eq!(r.json["basis"], "policy rule 1");
    // Without a rule, the built-in table decided, and the output says so as docs/api.md does.
    let plain = explain(&["--status", "404"]);
    assert_eq!(plain.json["basis"], "built-in table");

    std::fs::write(&path, "\nmax_attempts = \"three\"\n").expect("write policy");
    let r = explain(&["--status", "503", "--policy", p]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("invalid policy file") && r.stderr.contains("line 2"),
        "{}",
        r.stderr
    );
    // A value the checks refuse names its line too.
    std::fs::write(
        &path,
        "# mine\n\n[transient]\nbase = \"10s\"\ncap = \"1s\"\n",
    )
    .expect("write policy");
    let r = explain(&["--status", "503", "--policy", p]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains(", line 4: transient.base"),
        "{}",
        r.stderr
    );
    let r = explain(&["--status", "503", "--policy", "/no/such/policy.toml"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("cannot read policy file /no/such/policy.toml"),
        "{}",
        r.stderr
    );
}

#[test]
fn bad_arguments_exit_2_with_a_clear_error() {
    for (args, needle) in [
        (&[][..], "--status"),
        (&["--status", "42"][..], "100..=999"),
        (&["--status", "abc"][..], "--status"),
        (
            &["--status", "500", "--error", "tls"][..],
            "cannot be used with",
        ),
        (
            &["--error", "read-timeut"][..],
            "use one of connection-refused",
        ),
        (
            &["--status", "500", "--header", "no colon"][..],
            "'Name: value'",
        ),
        (
            &["--status", "500", "--header", "bad name: 1"][..],
            "not a valid header name",
        ),
        (&["--status", "500", "--now", "yesterday"][..], "RFC 3339"),
        (&["--status", "500", "--last-delay", "5"][..], "with a unit"),
        (&["--handler", "defer"][..], "--until"),
        (
            &[
                "--status",
                "500",
                "--attempts",
                "1",
                "--unknown-attempts",
                "2",
            ][..],
            "cannot exceed",
        ),
        (&["--status", "500", "--frobnicate"][..], "--frobnicate"),
        (
            &["--status", "500", "--method", "GE T"][..],
            "not an HTTP method",
        ),
    ] {
        let r = explain(args);
        assert_eq!(r.code, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
        assert_eq!(r.json, Value::Null, "nothing on stdout for {args:?}");
    }
}
