//! Recurring schedules: when each occurrence falls, and which occurrences run when the scheduler
//! finds some due (on time, or missed while nothing was running).
//!
//! Pure: every function takes the instants it needs. Owns the daylight-saving rule and the
//! missed-run policies. Does not own storage, the scheduler's loop, nor the job an occurrence
//! enqueues.
//!
//! A cron expression is read by the `croner` crate (POSIX/Vixie fields, seconds optional, `L`,
//! `W`, `#`), matched against the wall clock of an IANA time zone (`chrono-tz`). The wall clock
//! is not a line in time twice a year, so the rule is Vixie cron's:
//! - **Spring forward** (a wall-clock time that does not exist that day): it runs once, at the
//!   instant the clock jumps (02:30 on a day that goes from 02:00 to 03:00 runs at 03:00), and
//!   two such times collapse into one run.
//! - **Fall back** (a wall-clock time that happens twice): it runs once, at the first.
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
}

/// An interval in real time, counted from an anchor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EveryRule {
    pub interval: Duration,
    pub anchor: Timestamp,
}

/// The shortest interval, and the finest a cron expression can name.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

impl CronRule {
    /// Reads `expr` (5 fields, or 6 with seconds first) and an IANA zone name such as
    /// `Europe/Berlin` (`UTC` when none is given).
    pub fn parse(expr: &str, zone: Option<&str>) -> Result<CronRule, String> {
        let zone_name = zone.unwrap_or("UTC");
        let zone: chrono_tz::Tz = zone_name.parse().map_err(|_| {
            format!("time zone {zone_name:?} is not an IANA time zone name, such as \"Europe/Berlin\" or \"UTC\"")
        })?;
        let fields = expr.split_whitespace().count();
        if !(5..=6).contains(&fields) || expr.trim_start().starts_with('@') {
            return Err(format!(
                "cron expression {expr:?} has {fields} fields: give 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)"
            ));
        }
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|e| format!("cron expression {expr:?} is not valid: {e}"))?;
        let rule = CronRule {
            expr: expr.split_whitespace().collect::<Vec<_>>().join(" "),
            zone,
            cron,
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
        let mut cursor = self.wall(t)?;
        // A wall time that maps to `t` or earlier (the second pass of a repeated hour, or
        // several gap times collapsing into one instant) is passed over; a per-second
        // expression crosses a repeated hour in 3,600 steps.
        for _ in 0..10_000 {
            let next = self
                .cron
                .find_next_occurrence(&Utc.from_utc_datetime(&cursor), false)
                .ok()?
                .naive_utc();
            let at = self.instant(next)?;
            if at > t {
                return Some(at);
            }
            cursor = next;
        }
        None
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
    /// Missed occurrences dropped by the policy (a lower bound when there were very many).
    pub dropped: u64,
    /// The next occurrence after `now`; `None` when there is none.
    pub next: Option<Timestamp>,
}

/// Occurrences considered one by one at most, in one check; past that, the ones in the last day
/// stand for the rest (which are counted as dropped, at least).
const MAX_STEPS: usize = 100_000;

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
            // Very many missed (a per-second expression, down for days): skip to the last day.
            let day_before = Timestamp::from_unix_millis(now.as_unix_millis() - 86_400_000);
            dropped += 1;
            rule.next_after(t.max(day_before))
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
