//! Recurring schedules: when each occurrence falls, and which occurrences run when the scheduler
//! finds some due (on time, or missed while nothing was running).
//!
//! Pure: every function takes the instants it needs. Owns the daylight-saving rule and the
//! missed-run policies. Does not own storage, the scheduler's loop, nor the job an occurrence
//! enqueues.
//!
//! A cron expression is read by the `croner` crate (POSIX/Vixie fields, seconds optional, `L`,
//! `W`, `#`), matched against the wall clock of an IANA time zone (`chrono-tz`). The wall clock
//! is not a line in time twice a year, so the rule is Vixie cron's, which tells two kinds of
//! expressions apart:
//! - **A fixed time of day** (one second, one minute and one hour, such as `30 2 * * *`): a time
//!   the clock skips runs once, at the instant the clock jumps (02:30 on a day that goes from
//!   02:00 to 03:00 runs at 03:00); a time that happens twice runs once, at the first.
//! - **Anything else** (a wildcard, a step, a list or a range in the second, minute or hour
//!   field, such as `*/15 * * * *` or `0 * * * *`): it follows the clock as it is. A time the
//!   clock skips does not happen; a time that happens twice runs twice (an hourly expression
//!   runs 23 times on the spring-forward day and 25 on the fall-back one).
//!
//! An interval (`every = "5m"`) counts in real time from its anchor, so daylight saving does not
//! move it.

use crate::Timestamp;
use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};
use std::time::Duration;

/// When a schedule's occurrences fall.
#[derive(Clone, Debug)]
pub enum Recurrence {
    Cron(Box<CronRule>),
    Every(EveryRule),
}

/// A cron expression in a time zone.
#[derive(Clone, Debug)]
pub struct CronRule {
    expr: String,
    zone: chrono_tz::Tz,
    cron: croner::Cron,
    /// One second, minute and hour: the fixed-time rule above.
    fixed: bool,
}

/// An interval in real time, counted from an anchor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EveryRule {
    pub interval: Duration,
    pub anchor: Timestamp,
}

/// The shortest interval, and the finest a cron expression can name.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Refuses a step no larger range could take twice, such as `0-59/100` or `*/60` in the minutes:
/// it matches only the range's start, which is more likely a slip than a meaning (croner reads
/// it). Names (`MON`, `JAN`) and `L`, `W`, `#` are croner's to check.
fn check_steps(expr: &str) -> Result<(), String> {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    let (names, ranges): (&[&str], &[(u32, u32)]) = if fields.len() == 6 {
        (
            &[
                "second",
                "minute",
                "hour",
                "day of month",
                "month",
                "day of week",
            ],
            &[(0, 59), (0, 59), (0, 23), (1, 31), (1, 12), (0, 7)],
        )
    } else {
        (
            &["minute", "hour", "day of month", "month", "day of week"],
            &[(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)],
        )
    };
    for ((field, name), (lo, hi)) in fields.iter().zip(names).zip(ranges) {
        for part in field.split(',') {
            let Some((base, step)) = part.split_once('/') else {
                continue;
            };
            let Ok(step) = step.parse::<u32>() else {
                continue;
            };
            let (from, to) = match base.split_once('-') {
                Some((a, b)) => match (a.parse::<u32>(), b.parse::<u32>()) {
                    (Ok(a), Ok(b)) => (a, b),
                    _ => continue,
                },
                None if base == "*" => (*lo, *hi),
                None => match base.parse::<u32>() {
                    Ok(a) => (a, *hi),
                    Err(_) => continue,
                },
            };
            if step == 0 || step > to.saturating_sub(from) {
                return Err(format!(
                    "cron expression {expr:?}: the step {part:?} in the {name} field takes one value only ({from}); write {from} if that is meant"
                ));
            }
        }
    }
    Ok(())
}

impl CronRule {
    /// Reads `expr` (5 fields, or 6 with seconds first) and an IANA zone name such as
    /// `Europe/Berlin` (`UTC` when none is given).
    pub fn parse(expr: &str, zone: Option<&str>) -> Result<CronRule, String> {
        let zone_name = zone.unwrap_or("UTC");
        let zone: chrono_tz::Tz = zone_name.parse().map_err(|_| {
            format!("time zone {zone_name:?} is not an IANA time zone name, such as \"Europe/Berlin\" or \"UTC\"")
        })?;
        if expr.trim_start().starts_with('@') {
            return Err(format!(
                "cron expression {expr:?}: nicknames such as @daily are not read; write the fields (@daily is \"0 0 * * *\")"
            ));
        }
        let fields = expr.split_whitespace().count();
        if !(5..=6).contains(&fields) {
            return Err(format!(
                "cron expression {expr:?} has {fields} fields: give 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"
            ));
        }
        check_steps(expr)?;
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| format!("cron expression {expr:?} is not valid: {e}"))?;
        let fixed = cron.determine_job_type() == croner::JobType::FixedTime;
        let rule = CronRule {
            expr: expr.split_whitespace().collect::<Vec<_>>().join(" "),
            zone,
            cron,
            fixed,
        };
        // An expression that never matches (such as 30 February) is refused now, not found out
        // at the first due check.
        if rule.next_after(Timestamp::from_unix_secs(0)).is_none() {
            return Err(format!("cron expression {expr:?} never matches a date"));
        }
        Ok(rule)
    }

    pub fn expr(&self) -> &str {
        &self.expr
    }

    pub fn zone(&self) -> &str {
        self.zone.name()
    }

    /// The first occurrence strictly after `t`, by the daylight-saving rule above; `None` when
    /// there is none (past the year 9999, or the expression cannot match again).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        if self.fixed {
            self.next_fixed(t)
        } else {
            self.next_following(t)
        }
    }

    /// The next wall-clock match strictly after `wall`.
    fn next_wall(&self, wall: NaiveDateTime) -> Option<NaiveDateTime> {
        Some(
            self.cron
                .find_next_occurrence(&Utc.from_utc_datetime(&wall), false)
                .ok()?
                .naive_utc(),
        )
    }

    /// A fixed time of day: skipped times at the jump, repeated times at the first.
    fn next_fixed(&self, t: Timestamp) -> Option<Timestamp> {
        let mut cursor = self.wall(t)?;
        // A wall time that maps to `t` or earlier (the second pass of a repeated hour, or
        // several gap times collapsing into one instant) is passed over.
        for _ in 0..10_000 {
            let next = self.next_wall(cursor)?;
            let at = self.instant(next)?;
            if at > t {
                return Some(at);
            }
            cursor = next;
        }
        None
    }

    /// Any other expression follows the clock: the first instant after `t` whose wall-clock
    /// time matches. Wall time only goes back at a fall-back change, so the answer is the first
    /// match onwards from `t`'s wall time, unless the clock goes back before it: then the
    /// repeated hour's matches come first.
    fn next_following(&self, t: Timestamp) -> Option<Timestamp> {
        let mut cursor = self.wall(t)?;
        let mut ahead = None;
        for _ in 0..10_000 {
            let next = self.next_wall(cursor)?;
            cursor = next;
            match self.zone.from_local_datetime(&next) {
                chrono::LocalResult::Single(at) => {
                    let at = Timestamp::from_unix_millis(at.timestamp_millis());
                    if at > t {
                        ahead = Some(at);
                        break;
                    }
                }
                chrono::LocalResult::Ambiguous(a, b) => {
                    let (a, b) = (
                        Timestamp::from_unix_millis(a.timestamp_millis()),
                        Timestamp::from_unix_millis(b.timestamp_millis()),
                    );
                    let (first, second) = (a.min(b), a.max(b));
                    if first > t {
                        ahead = Some(first);
                        break;
                    }
                    if second > t {
                        ahead = Some(second);
                        break;
                    }
                }
                // Skipped by the clock: it does not happen.
                chrono::LocalResult::None => {}
            }
        }
        let ahead = ahead?;
        // Did the clock go back between `t` and `ahead`? Then the repeated wall times from the
        // change on come again, and the first match among them may come before `ahead`.
        let offset = |at: Timestamp| -> Option<i64> {
            let utc = DateTime::<Utc>::from_timestamp_millis(at.as_unix_millis())?;
            let local = utc.with_timezone(&self.zone).naive_local();
            Some((local - utc.naive_utc()).num_seconds())
        };
        let (before, after) = (offset(t)?, offset(ahead)?);
        if after >= before {
            return Some(ahead);
        }
        // The change: the first instant after `t` with the later offset.
        let (mut lo, mut hi) = (t.as_unix_millis() / 1000 + 1, ahead.as_unix_millis() / 1000);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if offset(Timestamp::from_unix_secs(mid))? == after {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let change = Timestamp::from_unix_secs(lo);
        // The first match at or after the change's wall time, in the second pass.
        let from = self.wall(change)? - chrono::Duration::seconds(1);
        let again = self.next_wall(from)?;
        let at = Timestamp::from_unix_millis((again.and_utc().timestamp() - after) * 1000);
        Some(if at > t && at < ahead { at } else { ahead })
    }

    /// The wall-clock time at `t` in the zone, to the whole second (cron's finest unit; the
    /// search is for times strictly after it).
    fn wall(&self, t: Timestamp) -> Option<NaiveDateTime> {
        let utc = DateTime::<Utc>::from_timestamp(t.as_unix_millis().div_euclid(1000), 0)?;
        Some(utc.with_timezone(&self.zone).naive_local())
    }

    /// The instant a wall-clock time runs at: itself; the first of two; or, when the clock
    /// skipped it, the instant the clock jumped.
    fn instant(&self, wall: NaiveDateTime) -> Option<Timestamp> {
        use chrono::LocalResult;
        let ms = match self.zone.from_local_datetime(&wall) {
            LocalResult::Single(at) => at.timestamp_millis(),
            LocalResult::Ambiguous(first, second) => {
                first.timestamp_millis().min(second.timestamp_millis())
            }
            LocalResult::None => return self.jump_after(wall),
        };
        Some(Timestamp::from_unix_millis(ms))
    }

    /// The first instant whose wall-clock time is `wall` or later: for a skipped wall time, the
    /// instant the clock jumped over it. Offsets lie within a day of UTC, and the wall clock only
    /// moves forward around a jump.
    fn jump_after(&self, wall: NaiveDateTime) -> Option<Timestamp> {
        let as_utc = wall.and_utc().timestamp();
        let (mut lo, mut hi) = (as_utc - 26 * 3600, as_utc + 26 * 3600);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = DateTime::<Utc>::from_timestamp(mid, 0)?
                .with_timezone(&self.zone)
                .naive_local();
            if at >= wall {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(Timestamp::from_unix_secs(lo))
    }
}

impl EveryRule {
    /// The first occurrence strictly after `t`: the anchor, or the anchor plus a whole number of
    /// intervals.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let step = i64::try_from(self.interval.as_millis()).ok()?.max(1);
        let anchor = self.anchor.as_unix_millis();
        let now = t.as_unix_millis();
        if now < anchor {
            return Some(self.anchor);
        }
        let steps = (now - anchor) / step + 1;
        Some(Timestamp::from_unix_millis(
            anchor.checked_add(steps.checked_mul(step)?)?,
        ))
    }
}

impl Recurrence {
    /// The first occurrence strictly after `t`.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        match self {
            Recurrence::Cron(c) => c.next_after(t),
            Recurrence::Every(e) => e.next_after(t),
        }
    }

    /// The first occurrence at or after `t`.
    pub fn first_from(&self, t: Timestamp) -> Option<Timestamp> {
        self.next_after(Timestamp::from_unix_millis(
            t.as_unix_millis().saturating_sub(1),
        ))
    }
}

/// What happens to occurrences that fell while no scheduler ran (Redial was down, or the
/// schedule's check came late).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    /// They are dropped; only occurrences due within the grace run.
    Skip,
    /// One job runs for them all (the latest).
    RunOnce,
    /// Each runs, the latest `max` at most; older ones are dropped.
    RunAll { max: u32 },
}

impl Missed {
    pub fn name(&self) -> &'static str {
        match self {
            Missed::Skip => "skip",
            Missed::RunOnce => "run_once",
            Missed::RunAll { .. } => "run_all",
        }
    }
}

/// How late an occurrence may be found and still count as on time: the scheduler checks about
/// every second, and a busy store can delay a check.
pub const GRACE: Duration = Duration::from_secs(60);

/// Which occurrences one check runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Firing {
    /// The occurrences to run, oldest first.
    pub run: Vec<Timestamp>,
    /// Missed occurrences dropped by the policy (estimated when there were very many).
    pub dropped: u64,
    /// The next occurrence after `now`; `None` when there is none.
    pub next: Option<Timestamp>,
}

/// Occurrences considered one by one at most before skipping ahead: past that, the walk jumps to
/// just before the ones it must keep (the latest late ones and the on-time ones), and the
/// occurrences jumped over are counted from their average spacing.
const MAX_STEPS: usize = 10_000;

/// The check of a schedule whose next occurrence was `due` (at or before `now`): which
/// occurrences in `[due, now]` run under `missed`, and the next one after `now`.
pub fn fire(rule: &Recurrence, due: Timestamp, now: Timestamp, missed: Missed) -> Firing {
    let keep = match missed {
        Missed::Skip | Missed::RunOnce => 1,
        Missed::RunAll { max } => usize::try_from(max).unwrap_or(usize::MAX).max(1),
    };
    let on_time_from = Timestamp::from_unix_millis(
        now.as_unix_millis()
            .saturating_sub(i64::try_from(GRACE.as_millis()).unwrap_or(0)),
    );
    // The occurrences in [due, now]: every on-time one, the latest `keep` late ones.
    let mut on_time = Vec::new();
    let mut late = std::collections::VecDeque::new();
    let mut dropped: u64 = 0;
    let mut at = Some(due).filter(|d| *d <= now);
    let mut steps = 0;
    while let Some(t) = at.filter(|t| *t <= now) {
        if t >= on_time_from {
            on_time.push(t);
        } else {
            late.push_back(t);
            if late.len() > keep {
                late.pop_front();
                dropped += 1;
            }
        }
        steps += 1;
        at = if steps == MAX_STEPS && t < on_time_from {
            // Very many missed (a per-second expression, down for days): on to just before the
            // latest `keep` late ones, by the spacing seen so far (twice over, for irregular
            // expressions).
            let spacing = ((t.as_unix_millis() - due.as_unix_millis()) / (MAX_STEPS as i64)).max(1);
            let keep_span = spacing.saturating_mul(2 * (keep as i64 + 1));
            let jump = Timestamp::from_unix_millis(
                on_time_from.as_unix_millis().saturating_sub(keep_span),
            );
            if jump > t {
                dropped += u64::try_from((jump.as_unix_millis() - t.as_unix_millis()) / spacing)
                    .unwrap_or(0);
                dropped += late.len() as u64;
                late.clear();
                rule.next_after(jump)
            } else {
                rule.next_after(t)
            }
        } else {
            rule.next_after(t)
        };
    }
    let late: Vec<Timestamp> = late.into();
    let run = match missed {
        Missed::Skip => {
            dropped += late.len() as u64;
            on_time
        }
        Missed::RunOnce if !on_time.is_empty() => {
            dropped += late.len() as u64;
            on_time
        }
        Missed::RunOnce => late,
        Missed::RunAll { .. } => late.into_iter().chain(on_time).collect(),
    };
    Firing {
        run,
        dropped,
        next: rule.next_after(now),
    }
}
