//! Data-driven decisions: one `check` helper, one line per case. Each row is an outcome, the job's
//! counters and the expected `action category delay`.

use redial_policy::*;
use std::time::Duration;

/// 2026-02-25T20:02:07Z: thirty seconds before the Anthropic example reset below.
const NOW_SECS: i64 = 1_772_049_727;

fn now() -> Timestamp {
    Timestamp::from_unix_secs(NOW_SECS)
}

/// The default policy, minus the server-wait jitter so that expected delays are exact.
fn policy() -> Policy {
    Policy {
        server_wait_jitter: Duration::ZERO,
        ..Policy::default()
    }
}

fn resp(status: u16, headers: &[(&str, &str)]) -> Outcome {
    let mut r = Response::new(status);
    for (n, v) in headers {
        r = r.header(n, v);
    }
    Outcome::Response(r)
}

fn err(e: &str) -> Outcome {
    Outcome::Transport(e.parse().expect("test names a real error kind"))
}

fn fresh() -> JobCounters {
    JobCounters::new(now())
}

fn with_key() -> JobCounters {
    JobCounters {
        has_idempotency_key: true,
        ..fresh()
    }
}

fn counts(failures: u32, unknown: u32, deferrals: u32) -> JobCounters {
    JobCounters {
        failures,
        unknown_failures: unknown,
        deferrals,
        ..fresh()
    }
}

/// `expected` is `"<action> <category> [<delay>]"`, the delay as `Human` prints it. The jitter
/// source always answers 0.5, so full jitter gives half the exponential schedule.
fn check_with(policy: &Policy, outcome: Outcome, job: JobCounters, expected: &str) -> Decision {
    let d = decide(&outcome, &job, policy, now(), &mut FixedJitter(0.5));
    let mut got = format!("{} {}", d.action.as_str(), d.category_str());
    if let Some(delay) = d.action.delay() {
        got.push_str(&format!(" {}", Human(delay)));
    }
    assert_eq!(
        got, expected,
        "outcome {outcome:?}, job {job:?}, reason {:?}",
        d.reason
    );
    d
}

fn check(outcome: Outcome, job: JobCounters, expected: &str) -> Decision {
    check_with(&policy(), outcome, job, expected)
}

#[test]
fn successes() {
    check(resp(200, &[]), fresh(), "complete success");
    check(resp(201, &[]), fresh(), "complete success");
    check(
        resp(204, &[("Retry-After", "30")]),
        fresh(),
        "complete success",
    );
    check(
        resp(299, &[("x-should-retry", "false")]),
        fresh(),
        "complete success",
    );
    check(
        Outcome::Handler(HandlerOutcome::Success),
        counts(3, 1, 4),
        "complete success",
    );
}

#[test]
fn deferrals_cost_no_attempt() {
    check(
        resp(429, &[("Retry-After", "30")]),
        fresh(),
        "defer defer 30s",
    );
    check(
        resp(429, &[("Retry-After", "2.0")]),
        fresh(),
        "defer defer 2s",
    );
    check(
        resp(429, &[("Retry-After", "0")]),
        fresh(),
        "defer defer 0s",
    );
    check(
        resp(429, &[("Retry-After", "30")]),
        counts(9, 2, 0),
        "defer defer 30s",
    );
    check(resp(529, &[]), fresh(), "defer defer 3.75s");
    check(
        resp(529, &[("retry-after", "10")]),
        fresh(),
        "defer defer 10s",
    );
    check(
        resp(503, &[("Retry-After", "120")]),
        fresh(),
        "defer defer 2m",
    );
    // A bare 429 falls back to the deferral backoff (equal jitter, base 5s).
    check(resp(429, &[]), fresh(), "defer defer 3.75s");
    check(resp(429, &[]), counts(0, 0, 2), "defer defer 15s");
    // 403 with a server wait is a rate limit (GitHub), without one it is permanent.
    check(
        resp(403, &[("Retry-After", "60")]),
        fresh(),
        "defer defer 1m",
    );
    check(resp(403, &[]), fresh(), "dead permanent");
}

#[test]
fn deferral_ceiling() {
    let d = check(
        resp(429, &[("Retry-After", "30")]),
        counts(0, 0, 2),
        "defer defer 30s",
    );
    assert_eq!(
        d.reason,
        "429 rate limited; Retry-After 30s; deferral 3 of 20"
    );
    check(
        resp(429, &[("Retry-After", "30")]),
        counts(0, 0, 19),
        "defer defer 30s",
    );
    let d = check(
        resp(429, &[("Retry-After", "30")]),
        counts(0, 0, 20),
        "dead deferral_exhausted",
    );
    assert_eq!(
        d.reason,
        "429 rate limited; deferral 21 over the limit of 20"
    );
}

#[test]
fn transient_failures() {
    check(resp(408, &[]), fresh(), "retry transient 1s");
    check(resp(502, &[]), fresh(), "retry transient 1s");
    check(resp(503, &[]), fresh(), "retry transient 1s");
    check(resp(504, &[]), fresh(), "retry transient 1s");
    check(resp(503, &[]), counts(3, 0, 0), "retry transient 8s");
    check(resp(409, &[]), with_key(), "retry transient 1s");
    for e in [
        "connection-refused",
        "connection-reset",
        "dns-temporary",
        "connect-timeout",
        "read-timeout",
        "timeout",
    ] {
        check(err(e), fresh(), "retry transient 1s");
    }
    // A server-given wait on a transient failure wins over backoff.
    check(
        resp(502, &[("Retry-After", "7")]),
        fresh(),
        "retry transient 7s",
    );
    let d = check(resp(503, &[]), counts(1, 0, 0), "retry transient 2s");
    assert_eq!(
        d.reason,
        "503 service unavailable; attempt 2 of 10; full jitter backoff 2s"
    );
}

#[test]
fn transient_ceiling() {
    check(resp(503, &[]), counts(8, 0, 0), "retry transient 4m16s");
    let d = check(resp(503, &[]), counts(9, 0, 0), "dead transient_exhausted");
    assert_eq!(
        d.reason,
        "503 service unavailable; attempt 10 of 10, retries exhausted"
    );
    check(
        err("read-timeout"),
        counts(9, 0, 5),
        "dead transient_exhausted",
    );
}

#[test]
fn permanent_failures() {
    for status in [400, 401, 403, 404, 405, 410, 422, 418, 451, 499] {
        check(resp(status, &[]), fresh(), "dead permanent");
    }
    check(resp(409, &[]), fresh(), "dead permanent");
    check(
        resp(400, &[("Retry-After", "5")]),
        fresh(),
        "dead permanent",
    );
    for e in ["dns-not-found", "invalid-request", "destination-refused"] {
        check(err(e), fresh(), "dead permanent");
    }
    let d = check(resp(400, &[]), fresh(), "dead permanent");
    assert_eq!(d.reason, "400 bad request; permanent, not retried");
}

#[test]
fn unknown_failures() {
    check(resp(500, &[]), fresh(), "retry unknown 15s");
    check(resp(501, &[]), fresh(), "retry unknown 15s");
    check(resp(599, &[]), fresh(), "retry unknown 15s");
    check(resp(301, &[]), fresh(), "retry unknown 15s");
    check(resp(304, &[]), fresh(), "retry unknown 15s");
    check(resp(100, &[]), fresh(), "retry unknown 15s");
    check(resp(999, &[]), fresh(), "retry unknown 15s");
    for e in [
        "tls",
        "malformed-response",
        "truncated-response",
        "redirect-not-followed",
        "response-too-large",
    ] {
        check(err(e), fresh(), "retry unknown 15s");
    }
    // Its own, smaller ceiling: the third unknown outcome ends the job.
    check(resp(500, &[]), counts(4, 1, 0), "retry unknown 4m");
    let d = check(resp(500, &[]), counts(4, 2, 0), "dead unknown_exhausted");
    assert_eq!(
        d.reason,
        "500 internal server error; attempt 5 of 10, unknown outcome 3 of 3, retries exhausted"
    );
    check(resp(500, &[]), counts(9, 0, 0), "dead unknown_exhausted");
}

#[test]
fn provider_hints() {
    check(
        resp(400, &[("x-should-retry", "true")]),
        fresh(),
        "retry transient 1s",
    );
    check(
        resp(500, &[("x-should-retry", "false")]),
        fresh(),
        "dead permanent",
    );
    check(
        resp(503, &[("Stripe-Should-Retry", "false")]),
        fresh(),
        "dead permanent",
    );
    check(
        resp(500, &[("Stripe-Should-Retry", "true")]),
        fresh(),
        "retry transient 1s",
    );
    check(
        resp(429, &[("x-should-retry", "true"), ("retry-after", "3")]),
        fresh(),
        "defer defer 3s",
    );
    // OpenAI answers an exhausted quota with 429 and x-should-retry: false.
    check(
        resp(429, &[("x-should-retry", "false")]),
        fresh(),
        "dead permanent",
    );
    check(
        resp(500, &[("x-should-retry", "maybe")]),
        fresh(),
        "retry unknown 15s",
    );
    let d = check(
        resp(400, &[("X-Should-Retry", "TRUE")]),
        fresh(),
        "retry transient 1s",
    );
    assert_eq!(
        d.reason,
        "400 bad request (x-should-retry: true); attempt 1 of 10; full jitter backoff 1s"
    );
    let untrusting = Policy {
        trust_provider_hints: false,
        ..policy()
    };
    check_with(
        &untrusting,
        resp(400, &[("x-should-retry", "true")]),
        fresh(),
        "dead permanent",
    );
}

#[test]
fn policy_rules_override_the_table() {
    let rules = |toml_rules: &str| -> Policy {
        let mut p: Policy = toml::from_str(toml_rules).expect("test policy parses");
        p.server_wait_jitter = Duration::ZERO;
        p
    };
    let p = rules(
        r#"
        [[rules]]
        status = 404
        category = "transient"
        [[rules]]
        status = "5xx"
        header = "x-idempotent-replay"
        category = "permanent"
        [[rules]]
        status = "500-501"
        category = "transient"
        [[rules]]
        error = "tls"
        category = "permanent"
        [[rules]]
        header = "x-done"
        category = "success"
        "#,
    );
    check_with(&p, resp(404, &[]), fresh(), "retry transient 1s");
    check_with(
        &p,
        resp(500, &[("X-Idempotent-Replay", "1")]),
        fresh(),
        "dead permanent",
    );
    check_with(&p, resp(500, &[]), fresh(), "retry transient 1s");
    check_with(&p, resp(502, &[]), fresh(), "retry transient 1s");
    check_with(
        &p,
        resp(599, &[("x-idempotent-replay", "")]),
        fresh(),
        "dead permanent",
    );
    check_with(&p, err("tls"), fresh(), "dead permanent");
    check_with(
        &p,
        resp(418, &[("x-done", "yes")]),
        fresh(),
        "complete success",
    );
    let d = check_with(&p, resp(404, &[]), fresh(), "retry transient 1s");
    assert!(
        d.reason
            .starts_with("404 not found (policy rule 1: transient);"),
        "{}",
        d.reason
    );

    let deferrable = rules("defer_with_server_wait = [\"4xx\"]");
    check_with(
        &deferrable,
        resp(418, &[("Retry-After", "9")]),
        fresh(),
        "defer defer 9s",
    );
    check_with(
        &deferrable,
        resp(503, &[("Retry-After", "9")]),
        fresh(),
        "retry transient 9s",
    );
}

#[test]
fn handler_outcomes() {
    let h = |o: HandlerOutcome| Outcome::Handler(o);
    let r = || "quota used".to_string();
    check(
        h(HandlerOutcome::Transient { reason: r() }),
        fresh(),
        "retry transient 1s",
    );
    check(
        h(HandlerOutcome::Permanent { reason: r() }),
        fresh(),
        "dead permanent",
    );
    check(
        h(HandlerOutcome::Unknown { reason: r() }),
        fresh(),
        "retry unknown 15s",
    );
    let until = now().saturating_add(Duration::from_secs(90));
    let d = check(
        h(HandlerOutcome::DeferUntil { until, reason: r() }),
        fresh(),
        "defer defer 1m30s",
    );
    assert_eq!(
        d.reason,
        "handler: quota used; handler wait 1m30s; deferral 1 of 20"
    );
    let d = check(
        h(HandlerOutcome::Transient {
            reason: "line one\nline two".into(),
        }),
        fresh(),
        "retry transient 1s",
    );
    assert!(d.reason.starts_with("handler: line one;"), "{}", d.reason);
}

#[test]
fn deadline_holds() {
    let deadline_in = |secs: u64| JobCounters {
        deadline: Some(now().saturating_add(Duration::from_secs(secs))),
        ..fresh()
    };
    check(
        resp(429, &[("Retry-After", "30")]),
        deadline_in(30),
        "defer defer 30s",
    );
    let d = check(
        resp(429, &[("Retry-After", "31")]),
        deadline_in(30),
        "dead deadline_exceeded",
    );
    assert_eq!(
        d.reason,
        "429 rate limited; Retry-After 31s; deferral 1 of 20; next try at 2026-02-25T20:02:38Z \
         would pass the deadline 2026-02-25T20:02:37Z"
    );
    check(resp(503, &[]), deadline_in(0), "dead deadline_exceeded");
    check(resp(400, &[]), deadline_in(0), "dead permanent");
    check(resp(200, &[]), deadline_in(0), "complete success");
    // max_age counts from enqueue and applies when earlier than the job's own deadline.
    let aged = Policy {
        max_age: Some(Duration::from_secs(60)),
        ..policy()
    };
    let enqueued_long_ago = JobCounters {
        enqueued_at: Timestamp::from_unix_secs(NOW_SECS - 50),
        ..deadline_in(3600)
    };
    check_with(
        &aged,
        resp(429, &[("Retry-After", "10")]),
        enqueued_long_ago,
        "defer defer 10s",
    );
    check_with(
        &aged,
        resp(429, &[("Retry-After", "11")]),
        enqueued_long_ago,
        "dead deadline_exceeded",
    );
}

#[test]
fn server_wait_clamped_and_jittered_later_only() {
    let d = check(
        resp(429, &[("Retry-After", "86400")]),
        fresh(),
        "defer defer 1h",
    );
    assert_eq!(
        d.reason,
        "429 rate limited; Retry-After 1d clamped to 1h; deferral 1 of 20"
    );
    // With the default 1s server-wait jitter, the delay lands between the wait and the wait + 1s.
    let d = decide(
        &resp(429, &[("Retry-After", "30")]),
        &fresh(),
        &Policy::default(),
        now(),
        &mut FixedJitter(0.25),
    );
    assert_eq!(d.action.delay(), Some(Duration::from_millis(30_250)));
}

#[test]
fn backoff_strategies_from_policy() {
    let with = |toml: &str| -> Policy { toml::from_str(toml).expect("test policy parses") };
    let fixed = with("[transient]\nstrategy = \"fixed\"\nbase = \"3s\"");
    check_with(
        &fixed,
        resp(503, &[]),
        counts(5, 0, 0),
        "retry transient 3s",
    );
    let exp = with("[transient]\nstrategy = \"exponential\"\nbase = \"1s\"\nfactor = 3.0");
    check_with(&exp, resp(503, &[]), counts(2, 0, 0), "retry transient 9s");
    let equal = with("[transient]\nstrategy = \"equal_jitter\"\nbase = \"4s\"");
    check_with(&equal, resp(503, &[]), fresh(), "retry transient 3s");
    let decorrelated = with("[transient]\nstrategy = \"decorrelated\"\nbase = \"1s\"");
    let job = JobCounters {
        last_delay: Some(Duration::from_secs(10)),
        ..counts(1, 0, 0)
    };
    check_with(&decorrelated, resp(503, &[]), job, "retry transient 15.5s");
}

/// A job whose request is `method`, without an idempotency key.
fn request(method: &str) -> JobCounters {
    JobCounters {
        method: Method::from_name(method),
        ..fresh()
    }
}

fn request_with(method: &str, failures: u32, unknown: u32) -> JobCounters {
    JobCounters {
        method: Method::from_name(method),
        ..counts(failures, unknown, 0)
    }
}

/// RFC 9110 section 9.2.2: an unknown outcome on a request that is safe to repeat waits the
/// transient backoff (base 2s, so 1s here), otherwise the unknown one (base 30s, so 15s).
#[test]
fn unknown_outcomes_wait_by_whether_a_repeat_is_safe() {
    for m in ["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"] {
        check(resp(500, &[]), request(m), "retry unknown 1s");
    }
    for m in ["POST", "PATCH", "CONNECT", "SEND", "get"] {
        check(resp(500, &[]), request(m), "retry unknown 15s");
    }
    let keyed = |m: &str| JobCounters {
        has_idempotency_key: true,
        ..request(m)
    };
    check(resp(500, &[]), keyed("POST"), "retry unknown 1s");
    check(resp(500, &[]), keyed("SEND"), "retry unknown 1s");
    check(
        err("truncated-response"),
        request("PUT"),
        "retry unknown 1s",
    );
    check(err("tls"), request("POST"), "retry unknown 15s");
    check(
        Outcome::Handler(HandlerOutcome::Unknown {
            reason: "no reply".into(),
        }),
        keyed("SEND"),
        "retry unknown 1s",
    );
    // A reset is transient by the table; a rule that makes it unknown gets the same treatment.
    check(
        err("connection-reset"),
        request("PUT"),
        "retry transient 1s",
    );
    let resets_unknown: Policy = toml::from_str(
        "server_wait_jitter = \"0s\"\n[[rules]]\nerror = \"connection-reset\"\ncategory = \"unknown\"",
    )
    .expect("test policy parses");
    check_with(
        &resets_unknown,
        err("connection-reset"),
        request("PUT"),
        "retry unknown 1s",
    );
    check_with(
        &resets_unknown,
        err("connection-reset"),
        request("POST"),
        "retry unknown 15s",
    );
    // The exponent counts every failure, as for transient outcomes.
    check(
        resp(500, &[]),
        request_with("GET", 4, 1),
        "retry unknown 16s",
    );
    check(
        resp(500, &[]),
        request_with("POST", 4, 1),
        "retry unknown 4m",
    );
}

#[test]
fn the_reason_names_the_rule_that_picked_the_backoff() {
    let d = check(resp(500, &[]), request("GET"), "retry unknown 1s");
    assert_eq!(
        d.reason,
        "500 internal server error; attempt 1 of 10, unknown outcome 1 of 3; \
         transient backoff: GET is idempotent (RFC 9110 9.2.2); full jitter backoff 1s"
    );
    assert_eq!(
        d.unknown_backoff,
        Some(UnknownBackoff::IdempotentMethod(Method::Get))
    );
    let d = check(resp(500, &[]), with_key(), "retry unknown 1s");
    assert_eq!(
        d.reason,
        "500 internal server error; attempt 1 of 10, unknown outcome 1 of 3; \
         transient backoff: the request carries an idempotency key; full jitter backoff 1s"
    );
    assert_eq!(d.unknown_backoff, Some(UnknownBackoff::IdempotencyKey));
    let d = check(resp(500, &[]), fresh(), "retry unknown 15s");
    assert_eq!(
        d.reason,
        "500 internal server error; attempt 1 of 10, unknown outcome 1 of 3; \
         unknown backoff: POST without an idempotency key may have taken effect; full jitter backoff 15s"
    );
    assert_eq!(
        d.unknown_backoff,
        Some(UnknownBackoff::NotSafeToRepeat(Method::Post))
    );
    let d = check(err("tls"), request("SEND"), "retry unknown 15s");
    assert!(
        d.reason.contains(
            "; unknown backoff: an extension method without an idempotency key may have taken effect;"
        ),
        "{}",
        d.reason
    );
    // A server-given wait wins over either backoff, so no rule is named.
    let d = check(
        resp(500, &[("Retry-After", "7")]),
        request("GET"),
        "retry unknown 7s",
    );
    assert_eq!(d.unknown_backoff, None);
    assert_eq!(
        d.reason,
        "500 internal server error; attempt 1 of 10, unknown outcome 1 of 3; Retry-After 7s"
    );
    // Other categories never name it.
    let d = check(resp(503, &[]), request("GET"), "retry transient 1s");
    assert_eq!(d.unknown_backoff, None);
}

#[test]
fn a_safe_repeat_still_counts_as_unknown() {
    let d = check(
        resp(500, &[]),
        request_with("GET", 4, 2),
        "dead unknown_exhausted",
    );
    assert_eq!(
        d.reason,
        "500 internal server error; attempt 5 of 10, unknown outcome 3 of 3, retries exhausted"
    );
    assert_eq!(d.unknown_backoff, None);
    let job = JobCounters {
        has_idempotency_key: true,
        ..counts(1, 1, 0)
    };
    let d = check(resp(500, &[]), job, "retry unknown 2s");
    let next = job.after(&d);
    assert_eq!((next.failures, next.unknown_failures), (2, 2));
    check(resp(500, &[]), next, "dead unknown_exhausted");
    check(
        resp(500, &[]),
        request_with("PUT", 9, 0),
        "dead unknown_exhausted",
    );
}

#[test]
fn a_safe_repeat_stays_within_the_transient_cap() {
    let long = Policy {
        max_attempts: 40,
        max_unknown_attempts: 40,
        ..policy()
    };
    // Transient: cap 10m, so 5m at jitter 0.5; the unknown backoff would give 15m (cap 30m).
    check_with(
        &long,
        resp(500, &[]),
        request_with("GET", 20, 0),
        "retry unknown 5m",
    );
    check_with(
        &long,
        resp(500, &[]),
        request_with("POST", 20, 0),
        "retry unknown 15m",
    );
    for u in [0.0, 0.5, 0.999_999] {
        let d = decide(
            &resp(500, &[]),
            &request_with("DELETE", 30, 0),
            &long,
            now(),
            &mut FixedJitter(u),
        );
        let delay = d.action.delay().expect("a retry has a delay");
        assert!(delay <= long.transient.cap, "{delay:?} at jitter {u}");
    }
}

#[test]
fn the_policy_can_keep_the_unknown_backoff_for_every_request() {
    let cautious = Policy {
        safe_repeat_transient_backoff: false,
        ..policy()
    };
    for job in [request("GET"), request("PUT"), with_key(), fresh()] {
        check_with(&cautious, resp(500, &[]), job, "retry unknown 15s");
    }
    let d = check_with(
        &cautious,
        resp(500, &[]),
        request("GET"),
        "retry unknown 15s",
    );
    assert_eq!(d.unknown_backoff, Some(UnknownBackoff::PolicyOff));
    assert_eq!(
        d.reason,
        "500 internal server error; attempt 1 of 10, unknown outcome 1 of 3; \
         unknown backoff: safe_repeat_transient_backoff is off; full jitter backoff 15s"
    );
    let from_toml: Policy =
        toml::from_str("safe_repeat_transient_backoff = false").expect("test policy parses");
    assert!(!from_toml.safe_repeat_transient_backoff);
}
