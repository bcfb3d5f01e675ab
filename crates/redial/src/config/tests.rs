//! The configuration file's tests: the examples in docs/, every kind of problem, the defaults.

use super::*;

/// The configuration reference's file (docs/configuration.md) must be a valid file.
#[test]
fn reference_example_parses() {
    let page = include_str!("../../../../docs/configuration.md");
    let section = &page[page.find("## The file").expect("section")..];
    let start = section.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let block = &section[start..start + section[start..].find("```").expect("block end")];
    let config: FileConfig = toml::from_str(block).expect("the reference's example parses");
    config.resolve().expect("the reference's example is valid");
    let queues = config.queues().expect("queues");
    assert_eq!(queues["emails"].policy.max_attempts, 5);
    assert_eq!(queues["default"].policy.max_attempts, 10);
    assert_eq!(config.retention.dead, Duration::from_secs(30 * 86_400));
}

/// Signing secrets come from queues and endpoints; an endpoint's do not disturb its limits.
#[test]
fn signing_secrets_of_queues_and_endpoints() {
    let text = "[queues.events]\nsigning_secrets = [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]\n\n[endpoints.\"https://hooks.example.com\"]\nrate = \"5/s\"\nsigning_secrets = [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]\n";
    let config: FileConfig = toml::from_str(text).expect("parses");
    let r = config.resolve().expect("valid");
    assert!(r
        .signing
        .secrets("events", "https://x.example.com")
        .is_some());
    assert!(r
        .signing
        .secrets("default", "https://hooks.example.com")
        .is_some());
    assert!(r
        .signing
        .secrets("default", "https://x.example.com")
        .is_none());
    assert!(r.endpoints["https://hooks.example.com"]
        .limits
        .rate
        .is_some());
    let bad: FileConfig = toml::from_str(
        "[endpoints.\"https://hooks.example.com\"]\nsigning_secrets = \"whsec_x\"\n",
    )
    .expect("parses");
    let e = bad.resolve().expect_err("a string is not a list");
    assert!(e.contains("signing_secrets: a list"), "{e}");
}

/// Value errors name the line, as syntax errors do.
#[test]
fn value_errors_name_their_line() {
    let dir = tempfile::tempdir().expect("dir");
    let cases = [
        (
            "# the API\n[server]\nlisten = \"127.0.0.1:8080\"\nmax_batch = 0\n",
            4,
            "server.max_batch",
        ),
        (
            "[queues.mail]\nconcurrency = 0\n",
            2,
            "queues.mail.concurrency",
        ),
        (
            "[queues.mail]\nconcurrency = 4\n\n[queues.mail.policy]\nmax_attempts = 0\n",
            5,
            "queues.mail.policy",
        ),
        (
            "[endpoints.\"https://api.example.com\"]\nburst = 1\nrate = \"fast\"\n",
            3,
            "endpoints",
        ),
        (
            "[engine]\nheartbeat = \"1m\"\nlease = \"30s\"\n",
            2,
            "engine.heartbeat",
        ),
    ];
    for (text, line, what) in cases {
        let path = dir.path().join("redial.toml");
        std::fs::write(&path, text).expect("write");
        let e = FileConfig::load(&path).expect_err(text).to_string();
        assert!(e.contains(&format!(", line {line}: ")), "{text:?}: {e}");
        assert!(e.contains(what), "{text:?}: {e}");
    }
}

#[test]
fn alert_rules_are_checked() {
    let bad = |text: &str, want: &str| {
        let config: FileConfig = toml::from_str(text).expect("parses");
        let err = config.resolve().expect_err("refused");
        assert!(err.contains(want), "{err}");
    };
    bad(
        "[[alerts.rules]]\nname = \"x\"\ncategory = \"nope\"\n",
        "unknown category",
    );
    bad(
        "[[alerts.rules]]\nname = \"x\"\ndeferred_older_than = \"1h\"\nmore_than = 3\n",
        "deferred_older_than takes only a queue",
    );
    bad(
        "[[alerts.rules]]\nname = \"x\"\ndeadline_at_risk = true\nwithin = \"5m\"\n",
        "deadline_at_risk takes only more_than and endpoint",
    );
    bad(
        "[[alerts.rules]]\nname = \"x\"\nendpoint = \"https://a.example\"\n",
        "endpoint is for deadline_at_risk rules only",
    );
    bad(
        "[[alerts.rules]]\nname = \"x\"\n[[alerts.rules]]\nname = \"x\"\n",
        "a name of its own",
    );
    bad("[alerts]\nwebhook = \"ftp://x\"\n", "http or https");
    // No rules given: the defaults.
    let config: FileConfig = toml::from_str("").expect("parses");
    assert_eq!(
        config.alerts.to_config().expect("valid").rules,
        redial_engine::alerts::AlertRule::defaults()
    );
}

/// The endpoint defaults docs/protection.md shows must be the defaults.
#[test]
fn documented_endpoint_defaults_are_the_defaults() {
    let page = include_str!("../../../../docs/protection.md");
    let section = &page[page.find("## Configuration").expect("section")..];
    let start = section.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let block = &section[start..start + section[start..].find("```").expect("block end")];
    let config: FileConfig = toml::from_str(block).expect("parses");
    let (defaults, _) = config.endpoint_settings().expect("valid");
    assert_eq!(defaults, EndpointConfig::default());
}

#[test]
fn endpoint_settings_layer_over_the_defaults() {
    let text = "[endpoint_defaults]\nconcurrency = 8\n[endpoint_defaults.breaker]\nopen_for = \"5s\"\n\n\
                [endpoints.\"https://a.example\"]\nrate = \"5/s\"\n[endpoints.\"https://a.example\".breaker]\nmin_throughput = 3\n\
                [endpoints.\"https://a.example\".policy]\nmax_attempts = 2\n";
    let config: FileConfig = toml::from_str(text).expect("parses");
    config.resolve().expect("valid");
    let (defaults, endpoints) = config.endpoint_settings().expect("valid");
    assert_eq!(defaults.concurrency, Some(8));
    let a = &endpoints["https://a.example"];
    assert_eq!(
        (
            a.limits.concurrency,
            a.limits.breaker.open_for,
            a.limits.breaker.min_throughput
        ),
        (Some(8), Duration::from_secs(5), 3)
    );
    assert_eq!(a.limits.rate.map(|r| r.count), Some(5));
    assert_eq!(a.policy.as_ref().and_then(|p| p.max_attempts), Some(2));
    let bad: FileConfig = toml::from_str("[endpoints.\"x\"]\nrate = \"fast\"\n").expect("parses");
    let e = bad.resolve().expect_err("invalid");
    assert!(
        e.contains("endpoints.\"x\"") && e.contains("invalid rate"),
        "{e}"
    );
}

#[test]
fn defaults_hold_without_a_file() {
    let config = FileConfig::default();
    config.resolve().expect("defaults are valid");
    assert!(config.queues().expect("queues").contains_key("default"));
}

/// A queue's callback is checked as a job's is; the callback queue's own is refused (no loops).
#[test]
fn queue_callbacks() {
    let text = "[queues.billing.callback]\nurl = \"https://app.example.com/hooks\"\non = [\"dead\"]\nheaders = { authorization = \"Bearer x\" }\n";
    let config: FileConfig = toml::from_str(text).expect("parses");
    let queues = config.queues().expect("valid");
    let cb = queues["billing"].callback.as_ref().expect("a callback");
    assert_eq!(cb.url, "https://app.example.com/hooks");
    assert_eq!(cb.on, vec![redial_store::CallbackEvent::Dead]);
    assert!(
        queues.contains_key(CALLBACK_QUEUE),
        "the callback queue is there"
    );
    for (text, says) in [
        (
            "[queues.billing.callback]\nurl = \"ftp://x\"\n",
            "queues.billing.callback.url",
        ),
        (
            "[queues.billing.callback]\nurl = \"https://x.example.com\"\non = [\"done\"]\n",
            "callback.on",
        ),
        (
            "[queues.callbacks.callback]\nurl = \"https://x.example.com\"\n",
            "never have one",
        ),
    ] {
        let config: FileConfig = toml::from_str(text).expect("parses");
        let e = config.queues().expect_err(text).join("; ");
        assert!(e.contains(says), "{text:?}: {e}");
    }
}

/// `[[notifications]]` (issue 36): targets, what each is told of, and their signing secrets as
/// their URL's endpoint's; every mistake named with its place.
#[test]
fn notification_targets() {
    use redial_engine::notifications::{NotifyEvent, NotifyFormat};
    let text = "[[notifications]]\nname = \"ops\"\nurl = \"https://hooks.example.com/redial\"\nevents = [\"endpoint.quarantined\", \"endpoint.recovered\", \"alert.firing\"]\nsigning_secrets = [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]\n\n[[notifications]]\nurl = \"https://chat.example.com/hook\"\nevents = [\"endpoint.paused\"]\nformat = \"slack\"\npaused_longer_than = \"10m\"\n";
    let config: FileConfig = toml::from_str(text).expect("parses");
    let r = config.resolve().expect("valid");
    assert_eq!(r.notifications.len(), 2);
    assert_eq!(r.notifications[0].name, "ops");
    assert_eq!(
        r.notifications[0].events,
        [
            NotifyEvent::EndpointQuarantined,
            NotifyEvent::EndpointRecovered,
            NotifyEvent::AlertFiring
        ]
    );
    assert_eq!(r.notifications[1].name, "n2");
    assert_eq!(r.notifications[1].format, NotifyFormat::Slack);
    assert_eq!(
        r.notifications[1].paused_longer_than,
        Duration::from_secs(600)
    );
    assert!(r
        .signing
        .secrets("notifications", "https://hooks.example.com")
        .is_some());
    assert!(r
        .signing
        .secrets("notifications", "https://chat.example.com")
        .is_none());

    for (text, expected) in [
        (
            "[[notifications]]\nurl = \"ftp://x\"\nevents = [\"alert.firing\"]\n",
            "notifications[0].url",
        ),
        (
            "[[notifications]]\nurl = \"https://x.example.com\"\nevents = [\"endpoint.exploded\"]\n",
            "notifications[0].events: unknown notification event \"endpoint.exploded\"",
        ),
        (
            "[[notifications]]\nurl = \"https://x.example.com\"\nevents = []\n",
            "notifications[0].events: name at least one",
        ),
        (
            "[[notifications]]\nurl = \"https://x.example.com\"\nevents = [\"alert.firing\"]\nformat = \"teams\"\n",
            "notifications[0].format",
        ),
        (
            "[[notifications]]\nname = \"a\"\nurl = \"https://x.example.com\"\nevents = [\"alert.firing\"]\n[[notifications]]\nname = \"a\"\nurl = \"https://y.example.com\"\nevents = [\"alert.firing\"]\n",
            "notifications[1].name: \"a\" names another target too",
        ),
        (
            "[endpoints.\"https://x.example.com\"]\nsigning_secrets = [\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"]\n[[notifications]]\nurl = \"https://x.example.com/h\"\nevents = [\"alert.firing\"]\nsigning_secrets = [\"whsec_dGhpcyBpcyBhbm90aGVyIHNlY3JldCBvZiAzMiBieXRlcw==\"]\n",
            "signed with other secrets already",
        ),
    ] {
        let config: FileConfig = toml::from_str(text).expect("parses");
        let e = config.resolve().expect_err(expected);
        assert!(e.contains(expected), "{expected}: {e}");
    }
}
