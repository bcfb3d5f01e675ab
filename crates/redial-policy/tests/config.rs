//! Policy configuration: the documented defaults, partial files, overrides and clear errors.

use redial_policy::{Policy, PolicyOverride, StatusMatch, Strategy};
use std::time::Duration;

const DEFAULTS: &str = include_str!("../policy.defaults.toml");

fn parse(toml_text: &str) -> Result<Policy, String> {
    toml::from_str::<Policy>(toml_text).map_err(|e| e.to_string())
}

#[test]
fn documented_defaults_are_the_defaults() {
    assert_eq!(parse(DEFAULTS), Ok(Policy::default()));
    assert_eq!(parse(""), Ok(Policy::default()));
}

#[test]
fn partial_tables_keep_the_other_defaults() {
    let p = parse("max_attempts = 4\n[unknown]\nbase = \"1m\"").expect("valid policy");
    assert_eq!(p.max_attempts, 4);
    assert_eq!(p.unknown.base, Duration::from_secs(60));
    assert_eq!(p.unknown.cap, Policy::default().unknown.cap);
    assert_eq!(p.unknown.strategy, Strategy::FullJitter);
    assert_eq!(p.transient, Policy::default().transient);
}

#[test]
fn status_forms() {
    let p = parse("defer_with_server_wait = [503, \"4xx\", \"500-502\", \"418\"]").expect("valid");
    assert_eq!(
        p.defer_with_server_wait,
        vec![
            StatusMatch::Exact(503),
            StatusMatch::Range(400, 499),
            StatusMatch::Range(500, 502),
            StatusMatch::Exact(418)
        ]
    );
}

#[test]
fn errors_say_where_and_what_to_write() {
    let check = |text: &str, needles: &[&str]| {
        let e = parse(text).expect_err("invalid policy");
        for n in needles {
            assert!(e.contains(n), "{e:?} should mention {n:?}");
        }
    };
    check(
        "max_atempts = 3",
        &["unknown field `max_atempts`", "line 1"],
    );
    check(
        "\n[transient]\nbase = \"fast\"",
        &["invalid duration \"fast\"", "line 3", "\"30s\""],
    );
    check("max_server_wait = \"30\"", &["invalid duration \"30\""]);
    check("max_attempts = 0", &["max_attempts: must be at least 1"]);
    check("max_attempts = -1", &["max_attempts"]);
    check(
        "[transient]\nbase = \"20m\"",
        &["transient.base: must not be longer than cap"],
    );
    check("[deferral]\nfactor = 0.5", &["deferral.factor"]);
    check(
        "[unknown]\nstrategy = \"fibonacci\"",
        &["fibonacci", "full_jitter"],
    );
    check(
        "defer_with_server_wait = [\"5x\"]",
        &["invalid status \"5x\"", "\"5xx\""],
    );
    check(
        "defer_with_server_wait = [1000]",
        &["invalid status \"1000\""],
    );
    check(
        "[[rules]]\ncategory = \"transient\"",
        &["rules[0]: needs at least one of status, header or error"],
    );
    check(
        "[[rules]]\nstatus = 500\nerror = \"tls\"\ncategory = \"permanent\"",
        &["rules[0]: error cannot be combined"],
    );
    check(
        "[[rules]]\nerror = \"tls-bad\"\ncategory = \"permanent\"",
        &["tls-bad"],
    );
    check(
        "[[rules]]\nheader = \"bad header\"\ncategory = \"permanent\"",
        &["rules[0]: header must be a header name"],
    );
    check(
        "[[rules]]\nstatus = 500\ncategory = \"retry\"",
        &["retry", "transient"],
    );
}

#[test]
fn overrides_layer_onto_a_policy() {
    let queue = parse("max_attempts = 5\n[[rules]]\nstatus = 404\ncategory = \"transient\"")
        .expect("valid");
    let endpoint: PolicyOverride = toml::from_str(
        "max_deferrals = 3\n[transient]\ncap = \"1m\"\n[[rules]]\nstatus = 404\ncategory = \"permanent\"",
    )
    .expect("valid override");
    let p = queue.merged(&endpoint).expect("valid merge");
    assert_eq!((p.max_attempts, p.max_deferrals), (5, 3));
    assert_eq!(p.transient.cap, Duration::from_secs(60));
    assert_eq!(p.transient.base, Duration::from_secs(2));
    // The more specific policy's rules come first.
    assert_eq!(p.rules.len(), 2);
    assert_eq!(p.rules[0].category, redial_policy::Category::Permanent);

    let bad: PolicyOverride = toml::from_str("[transient]\nbase = \"1h\"").expect("parses");
    assert_eq!(
        queue.merged(&bad).map_err(|e| e.to_string()),
        Err("transient.base: must not be longer than cap".into())
    );
}

#[test]
fn a_policy_round_trips_through_json() {
    let p = parse("max_age = \"2h\"\n[[rules]]\nheader = \"x-done\"\ncategory = \"success\"\n[[rules]]\nstatus = \"5xx\"\ncategory = \"transient\"")
        .expect("valid");
    let json = serde_json::to_string(&p).expect("serialises");
    assert!(json.contains("\"max_age\":\"2h\""), "{json}");
    assert!(json.contains("\"status\":\"5xx\""), "{json}");
    assert_eq!(
        serde_json::from_str::<Policy>(&json).expect("reads back"),
        p
    );
}

#[test]
fn safe_repeat_transient_backoff_overrides_like_any_field() {
    let queue = parse("safe_repeat_transient_backoff = false").expect("valid");
    assert!(!queue.safe_repeat_transient_backoff);
    let unset: PolicyOverride = toml::from_str("max_attempts = 4").expect("valid override");
    assert!(
        !queue
            .merged(&unset)
            .expect("valid merge")
            .safe_repeat_transient_backoff
    );
    let on: PolicyOverride =
        toml::from_str("safe_repeat_transient_backoff = true").expect("valid override");
    assert!(
        queue
            .merged(&on)
            .expect("valid merge")
            .safe_repeat_transient_backoff
    );
    assert_eq!(
        PolicyOverride::from(Policy::default()).safe_repeat_transient_backoff,
        Some(true)
    );
}
