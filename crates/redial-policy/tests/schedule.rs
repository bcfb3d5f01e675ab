//! Schedules' occurrences in virtual time: daylight-saving changes, leap days, seconds, intervals,
//! and the missed-run policies. Instants are written in UTC; comments give the wall clock.

use redial_policy::schedule::{fire, CronRule, EveryRule, Firing, Missed, Recurrence};
use redial_policy::Timestamp;
use std::time::Duration;

fn t(s: &str) -> Timestamp {
    Timestamp::parse_rfc3339(s).expect("an RFC 3339 instant")
}

/// The first `n` occurrences of `expr` in `zone` after `after`.
fn check(expr: &str, zone: &str, after: &str, want: &[&str]) {
    let rule = CronRule::parse(expr, Some(zone)).expect("a valid rule");
    let mut at = t(after);
    let mut got = Vec::new();
    for _ in want {
        at = rule.next_after(at).expect("an occurrence");
        got.push(at.to_string());
    }
    assert_eq!(got, want, "{expr:?} in {zone} after {after}");
}

#[test]
fn wall_clock_times_in_a_zone() {
    // Weekdays at 09:00 in Berlin (CET, UTC+1, in November): Friday, then Monday.
    check(
        "0 9 * * 1-5",
        "Europe/Berlin",
        "2026-11-27T10:00:00Z",
        &["2026-11-30T08:00:00Z", "2026-12-01T08:00:00Z"],
    );
    // Sunday is 0 or 7, as in POSIX cron.
    check(
        "0 9 * * 0",
        "UTC",
        "2026-12-01T00:00:00Z",
        &["2026-12-06T09:00:00Z"],
    );
    check(
        "0 9 * * 7",
        "UTC",
        "2026-12-01T00:00:00Z",
        &["2026-12-06T09:00:00Z"],
    );
    // Six fields: seconds first.
    check(
        "*/10 * * * * *",
        "UTC",
        "2026-01-01T00:00:05Z",
        &["2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"],
    );
    // Every 5 minutes, strictly after.
    check(
        "*/5 * * * *",
        "UTC",
        "2026-01-01T00:05:00Z",
        &["2026-01-01T00:10:00Z"],
    );
}

#[test]
fn leap_days() {
    check(
        "0 12 29 2 *",
        "UTC",
        "2026-01-01T00:00:00Z",
        &["2028-02-29T12:00:00Z", "2032-02-29T12:00:00Z"],
    );
    // The last day of February.
    check(
        "0 0 L 2 *",
        "UTC",
        "2027-01-01T00:00:00Z",
        &["2027-02-28T00:00:00Z", "2028-02-29T00:00:00Z"],
    );
}

#[test]
fn spring_forward_runs_a_skipped_time_once_when_the_clock_jumps() {
    // Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00Z. 02:30 does not exist.
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        &["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
    );
    // Two skipped times collapse into one run; 03:00 that day is the same instant.
    check(
        "0,30 2,3 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        &[
            "2026-03-29T01:00:00Z",
            "2026-03-29T01:30:00Z",
            "2026-03-30T00:00:00Z",
        ],
    );
    // New York, 2026-03-08: 02:00 EST becomes 03:00 EDT at 07:00Z.
    check(
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00:00Z",
        &["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
    );
    // Hourly across the jump: 01:00 CET, then 03:00 CEST (02:00 is skipped and runs at the
    // jump, which is 03:00).
    check(
        "0 * * * *",
        "Europe/Berlin",
        "2026-03-28T23:30:00Z",
        &[
            "2026-03-29T00:00:00Z",
            "2026-03-29T01:00:00Z",
            "2026-03-29T02:00:00Z",
        ],
    );
}

#[test]
fn fall_back_runs_a_repeated_time_once_at_the_first() {
    // Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00Z; 02:00-02:59 happens twice.
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00Z",
        &["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
    );
    // Every half hour: 02:00 and 02:30 CEST run, their repeats in CET do not, then 03:00 CET.
    check(
        "*/30 * * * *",
        "Europe/Berlin",
        "2026-10-24T23:45:00Z",
        &[
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-25T02:00:00Z",
        ],
    );
    // Asked from inside the repeated hour (a restart at 02:10 CET), the next is 03:00 CET.
    check(
        "*/30 * * * *",
        "Europe/Berlin",
        "2026-10-25T01:10:00Z",
        &["2026-10-25T02:00:00Z"],
    );
    // Per second across the repeated hour: no second runs twice.
    let rule = CronRule::parse("* * * * * *", Some("Europe/Berlin")).expect("valid");
    let at = rule
        .next_after(t("2026-10-25T01:00:00Z"))
        .expect("an occurrence");
    assert_eq!(at, t("2026-10-25T02:00:00Z"));
}

#[test]
fn intervals_count_real_time_across_daylight_saving() {
    let every = EveryRule {
        interval: Duration::from_secs(3600),
        anchor: t("2026-10-24T22:00:00Z"),
    };
    let mut at = t("2026-10-24T22:00:00Z");
    let mut got = Vec::new();
    for _ in 0..4 {
        at = every.next_after(at).expect("an occurrence");
        got.push(at.to_string());
    }
    assert_eq!(
        got,
        [
            "2026-10-24T23:00:00Z",
            "2026-10-25T00:00:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T02:00:00Z"
        ]
    );
    // Before the anchor, the anchor is next; at or after, a whole number of intervals on.
    assert_eq!(
        every.next_after(t("2026-01-01T00:00:00Z")),
        Some(every.anchor)
    );
    let r = Recurrence::Every(every);
    assert_eq!(r.first_from(every.anchor), Some(every.anchor));
    assert_eq!(
        r.first_from(t("2026-10-24T22:00:00.001Z")),
        Some(t("2026-10-24T23:00:00Z"))
    );
}

#[test]
fn bad_rules_say_what_to_write() {
    let err = |expr: &str, zone: Option<&str>| CronRule::parse(expr, zone).expect_err("refused");
    assert!(
        err("0 9 * *", None).contains("give 5"),
        "{}",
        err("0 9 * *", None)
    );
    assert!(err("0 9 * * * * *", None).contains("give 5"));
    assert!(err("0 9 * * *", Some("Europe/Berlln")).contains("IANA"));
    assert!(err("61 9 * * *", None).contains("not valid"));
    assert!(err("0 0 30 2 *", None).contains("never matches"));
    let ok = CronRule::parse("  0  9 * *   MON-FRI ", Some("Europe/Berlin")).expect("valid");
    assert_eq!(ok.expr(), "0 9 * * MON-FRI");
    assert_eq!(ok.zone(), "Europe/Berlin");
}

/// Hourly from 10:00Z, checked at `now`.
fn fired(now: &str, missed: Missed) -> Firing {
    let rule = Recurrence::Every(EveryRule {
        interval: Duration::from_secs(3600),
        anchor: t("2026-12-01T10:00:00Z"),
    });
    fire(&rule, t("2026-12-01T10:00:00Z"), t(now), missed)
}

fn check_fire(now: &str, missed: Missed, run: &[&str], dropped: u64) {
    let f = fired(now, missed);
    let got: Vec<String> = f.run.iter().map(ToString::to_string).collect();
    let want: Vec<String> = run.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!((got, f.dropped), (want, dropped), "{missed:?} at {now}");
    assert_eq!(
        f.next,
        Some(
            Timestamp::parse_rfc3339(now)
                .map(|n| {
                    let h = 3_600_000;
                    Timestamp::from_unix_millis((n.as_unix_millis() / h + 1) * h)
                })
                .expect("instant")
        )
    );
}

#[test]
fn missed_occurrences_follow_the_policy() {
    // On time: the one due runs whatever the policy.
    for m in [Missed::Skip, Missed::RunOnce, Missed::RunAll { max: 5 }] {
        check_fire("2026-12-01T10:00:01Z", m, &["2026-12-01T10:00:00Z"], 0);
    }
    // Down from 10:00 to 13:00:30: 13:00 is on time (within the grace), 10-12 were missed.
    check_fire(
        "2026-12-01T13:00:30Z",
        Missed::Skip,
        &["2026-12-01T13:00:00Z"],
        3,
    );
    check_fire(
        "2026-12-01T13:00:30Z",
        Missed::RunOnce,
        &["2026-12-01T13:00:00Z"],
        3,
    );
    check_fire(
        "2026-12-01T13:00:30Z",
        Missed::RunAll { max: 2 },
        &[
            "2026-12-01T11:00:00Z",
            "2026-12-01T12:00:00Z",
            "2026-12-01T13:00:00Z",
        ],
        1,
    );
    // Down until 13:30: nothing is on time.
    check_fire("2026-12-01T13:30:00Z", Missed::Skip, &[], 4);
    check_fire(
        "2026-12-01T13:30:00Z",
        Missed::RunOnce,
        &["2026-12-01T13:00:00Z"],
        3,
    );
    check_fire(
        "2026-12-01T13:30:00Z",
        Missed::RunAll { max: 2 },
        &["2026-12-01T12:00:00Z", "2026-12-01T13:00:00Z"],
        2,
    );
    check_fire(
        "2026-12-01T13:30:00Z",
        Missed::RunAll { max: 100 },
        &[
            "2026-12-01T10:00:00Z",
            "2026-12-01T11:00:00Z",
            "2026-12-01T12:00:00Z",
            "2026-12-01T13:00:00Z",
        ],
        0,
    );
}

#[test]
fn very_many_missed_occurrences_stay_cheap() {
    // Every second, down for 30 days: 2.6 million occurrences, not walked one by one.
    let rule = Recurrence::Cron(Box::new(
        CronRule::parse("* * * * * *", None).expect("valid"),
    ));
    let due = t("2026-11-01T00:00:00Z");
    let now = t("2026-12-01T00:00:00Z");
    let f = fire(&rule, due, now, Missed::RunOnce);
    // The last minute's are on time (within the grace) and run; the rest were missed.
    assert_eq!(f.run.len(), 61);
    assert_eq!(f.run.last(), Some(&now));
    assert!(f.dropped >= 100_000, "{}", f.dropped);
    assert_eq!(f.next, Some(t("2026-12-01T00:00:01Z")));
}
