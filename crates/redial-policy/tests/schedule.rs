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
fn spring_forward_runs_a_skipped_fixed_time_when_the_clock_jumps() {
    // Berlin, 2026-03-29: 02:00 CET becomes 03:00 CEST at 01:00Z. 02:30 does not exist.
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00:00Z",
        &["2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"],
    );
    // Several times in a field follow the clock: 02:00 and 02:30 do not happen that day.
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
    // Hourly across the jump follows the clock: 01:00 CET, then 03:00 and 04:00 CEST.
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
fn fall_back_runs_a_fixed_time_once_and_follows_the_clock_otherwise() {
    // Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET at 01:00Z; 02:00-02:59 happens twice.
    // A fixed time of day runs once, at the first.
    check(
        "30 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00:00Z",
        &["2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"],
    );
    // Every half hour follows the clock: 02:00 and 02:30 CEST, then 02:00 and 02:30 CET again.
    check(
        "*/30 * * * *",
        "Europe/Berlin",
        "2026-10-24T23:45:00Z",
        &[
            "2026-10-25T00:00:00Z",
            "2026-10-25T00:30:00Z",
            "2026-10-25T01:00:00Z",
            "2026-10-25T01:30:00Z",
            "2026-10-25T02:00:00Z",
        ],
    );
    // Asked at the end of the first pass (02:45 CEST), the next is the repeated 02:00 (CET).
    check(
        "*/30 * * * *",
        "Europe/Berlin",
        "2026-10-25T00:45:00Z",
        &["2026-10-25T01:00:00Z"],
    );
    // Asked from inside the repeated hour (a restart at 02:10 CET), the next is 02:30 CET.
    check(
        "*/30 * * * *",
        "Europe/Berlin",
        "2026-10-25T01:10:00Z",
        &["2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"],
    );
    // Per second across the change: the next second.
    check(
        "* * * * * *",
        "Europe/Berlin",
        "2026-10-25T00:59:59Z",
        &["2026-10-25T01:00:00Z", "2026-10-25T01:00:01Z"],
    );
}

/// How many times `expr` runs from `from` (exclusive) to `to` (inclusive).
fn count(expr: &str, zone: &str, from: &str, to: &str) -> usize {
    let rule = CronRule::parse(expr, Some(zone)).expect("valid");
    let (mut at, end) = (t(from), t(to));
    let mut n = 0;
    while let Some(next) = rule.next_after(at).filter(|x| *x <= end) {
        n += 1;
        at = next;
    }
    n
}

#[test]
fn runs_on_the_days_the_clock_changes() {
    // Berlin's days: 2026-03-29 is 23 hours long, 2026-10-25 is 25 (from local midnight to midnight).
    let spring = ("2026-03-28T22:59:59Z", "2026-03-29T21:59:59Z");
    let fall = ("2026-10-24T21:59:59Z", "2026-10-25T22:59:59Z");
    let z = "Europe/Berlin";
    assert_eq!(count("0 * * * *", z, spring.0, spring.1), 23);
    assert_eq!(count("0 * * * *", z, fall.0, fall.1), 25);
    assert_eq!(count("*/15 * * * *", z, spring.0, spring.1), 23 * 4);
    assert_eq!(count("*/15 * * * *", z, fall.0, fall.1), 25 * 4);
    // A fixed time of day runs once a day, whatever the day.
    assert_eq!(count("30 2 * * *", z, spring.0, spring.1), 1);
    assert_eq!(count("30 2 * * *", z, fall.0, fall.1), 1);
    assert_eq!(count("0 9 * * *", z, spring.0, spring.1), 1);
    assert_eq!(count("0 9 * * *", z, fall.0, fall.1), 1);
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
    // A step no range takes twice.
    for expr in [
        "0-59/100 * * * *",
        "*/60 * * * *",
        "0 */24 * * *",
        "0 0 * * */0",
    ] {
        assert!(err(expr, None).contains("takes one value only"), "{expr}");
    }
    for expr in [
        "*/15 * * * *",
        "0-30/10 * * * *",
        "5/10 * * * *",
        "0 0 1-31/2 * *",
    ] {
        CronRule::parse(expr, None).expect(expr);
    }
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

#[test]
fn run_all_after_a_long_gap_keeps_the_latest_and_counts_the_rest() {
    // Every minute, down for 30 days: the latest 5 missed run, then the one on time.
    let rule = Recurrence::Cron(Box::new(CronRule::parse("* * * * *", None).expect("valid")));
    let f = fire(
        &rule,
        t("2026-11-01T00:00:00Z"),
        t("2026-12-01T00:00:30Z"),
        Missed::RunAll { max: 5 },
    );
    let got: Vec<String> = f.run.iter().map(ToString::to_string).collect();
    assert_eq!(
        got,
        [
            "2026-11-30T23:55:00Z",
            "2026-11-30T23:56:00Z",
            "2026-11-30T23:57:00Z",
            "2026-11-30T23:58:00Z",
            "2026-11-30T23:59:00Z",
            "2026-12-01T00:00:00Z"
        ]
    );
    // 43,201 occurrences fell; the count of those dropped is estimated past 10,000 steps.
    let exact = 43_201 - 6;
    assert!(f.dropped.abs_diff(exact) <= exact / 100, "{}", f.dropped);
}
