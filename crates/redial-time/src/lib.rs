//! Instants as plain values, and the date formats that servers put in headers: a crate of its
//! own so that the policy core and the API's types (`redial-api`, which the clients use) share
//! one instant without the clients taking the policy core.
//!
//! Owns [`Timestamp`] (milliseconds since the Unix epoch, UTC) and the parsers for RFC 3339 and the
//! three HTTP-date forms of RFC 9110. Does not own a clock: nothing here reads the current time, the
//! caller passes `now` in. Every parser takes arbitrary text and returns `None` for anything it does
//! not recognise; none of them can panic.

use std::fmt;
use std::time::Duration;

/// A UTC instant with millisecond precision, counted from the Unix epoch.
///
/// Milliseconds are enough for scheduling retries and keep the type a single `i64`, so it is cheap
/// to copy, compare and store. Its default is the epoch (what the API's types start from).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// 0000-01-01T00:00:00Z and 10000-01-01T00:00:00Z in seconds: the instants RFC 3339 can write
/// in UTC lie from the first up to the second.
const RFC3339_FIRST_SEC: i64 = -62_167_219_200;
const RFC3339_END_SEC: i64 = 253_402_300_800;

impl Timestamp {
    /// The Unix epoch, 1970-01-01T00:00:00Z.
    pub const EPOCH: Timestamp = Timestamp(0);
    /// The latest representable instant; used as "never".
    pub const MAX: Timestamp = Timestamp(i64::MAX);

    pub const fn from_unix_millis(millis: i64) -> Self {
        Timestamp(millis)
    }

    pub const fn as_unix_millis(self) -> i64 {
        self.0
    }

    /// Whole seconds since the epoch, saturating instead of overflowing.
    pub const fn from_unix_secs(secs: i64) -> Self {
        Timestamp(secs.saturating_mul(1000))
    }

    /// This instant moved later by `d`, saturating at [`Timestamp::MAX`].
    pub fn saturating_add(self, d: Duration) -> Self {
        let millis = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }

    /// How long after `earlier` this instant is; zero when it is not later.
    pub fn saturating_since(self, earlier: Timestamp) -> Duration {
        let diff = self.0.saturating_sub(earlier.0);
        Duration::from_millis(u64::try_from(diff).unwrap_or(0))
    }

    /// Parses an RFC 3339 instant such as `2026-02-25T20:02:37Z` or
    /// `2026-02-25T20:02:37.250+01:00`. Lenient where real servers are: a space or a lowercase `t`
    /// may separate date and time, `z` may be lowercase, and a leap second reads as second 59.
    pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
        let b = s.trim().as_bytes();
        if b.len() < 20 {
            return None;
        }
        let year = digits(b, 0, 4)?;
        if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
            return None;
        }
        let month = digits(b, 5, 2)?;
        let day = digits(b, 8, 2)?;
        if b[13] != b':' || b[16] != b':' {
            return None;
        }
        let (hour, min, sec) = (digits(b, 11, 2)?, digits(b, 14, 2)?, digits(b, 17, 2)?);
        let mut i = 19;
        let mut millis = 0i64;
        if b[i] == b'.' {
            i += 1;
            let start = i;
            while i < b.len() && b[i].is_ascii_digit() {
                if i - start < 3 {
                    millis = millis * 10 + i64::from(b[i] - b'0');
                }
                i += 1;
            }
            let n = i - start;
            if n == 0 {
                return None;
            }
            for _ in n..3 {
                millis *= 10;
            }
        }
        let offset_secs = match b.get(i..)? {
            [b'Z' | b'z'] => 0,
            [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
                let (oh, om) = (digits(b, i + 1, 2)?, digits(b, i + 4, 2)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                let off = oh * 3600 + om * 60;
                if *sign == b'-' {
                    -off
                } else {
                    off
                }
            }
            _ => return None,
        };
        let secs = civil_to_unix(year, month, day, hour, min, sec)? - offset_secs;
        // An offset can carry a four-digit year past 9999 or before 0000 in UTC, which RFC 3339
        // cannot write back.
        if !(RFC3339_FIRST_SEC..RFC3339_END_SEC).contains(&secs) {
            return None;
        }
        Some(Timestamp(secs.checked_mul(1000)?.checked_add(millis)?))
    }

    /// Parses an HTTP-date in any of the three forms RFC 9110 section 5.6.7 requires recipients
    /// to accept:
    ///
    /// - IMF-fixdate `Sun, 06 Nov 1994 08:49:37 GMT`
    /// - obsolete RFC 850 `Sunday, 06-Nov-94 08:49:37 GMT` (a two-digit year below 70 is 20xx,
    ///   otherwise 19xx)
    /// - asctime `Sun Nov  6 08:49:37 1994`
    ///
    /// The weekday must be a day name but is not checked against the date; `UTC` is accepted
    /// where `GMT` belongs, since some servers send it.
    pub fn parse_http_date(s: &str) -> Option<Timestamp> {
        let mut tokens = s.split([' ', ',', '-']).filter(|t| !t.is_empty());
        let weekday = tokens.next()?;
        if !is_weekday(weekday) {
            return None;
        }
        let second = tokens.next()?;
        let (year, month, day, time) = if let Some(month) = month_number(second) {
            // asctime: weekday month day time year
            let day = small_number(tokens.next()?, 1, 2)?;
            let time = tokens.next()?;
            let year = small_number(tokens.next()?, 4, 4)?;
            (year, month, day, time)
        } else {
            // IMF-fixdate or RFC 850: weekday day month year time zone
            let day = small_number(second, 1, 2)?;
            let month = month_number(tokens.next()?)?;
            let year_token = tokens.next()?;
            let year = match year_token.len() {
                4 => small_number(year_token, 4, 4)?,
                2 => {
                    let yy = small_number(year_token, 2, 2)?;
                    if yy < 70 {
                        2000 + yy
                    } else {
                        1900 + yy
                    }
                }
                _ => return None,
            };
            let time = tokens.next()?;
            if !matches!(tokens.next()?, "GMT" | "UTC") {
                return None;
            }
            (year, month, day, time)
        };
        if tokens.next().is_some() {
            return None;
        }
        let t = time.as_bytes();
        if t.len() != 8 || t[2] != b':' || t[5] != b':' {
            return None;
        }
        let (hour, min, sec) = (digits(t, 0, 2)?, digits(t, 3, 2)?, digits(t, 6, 2)?);
        let secs = civil_to_unix(year, month, day, hour, min, sec)?;
        Some(Timestamp(secs.checked_mul(1000)?))
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 in UTC, with milliseconds only when they are not zero.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.0.div_euclid(1000);
        let millis = self.0.rem_euclid(1000);
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        )?;
        if millis != 0 {
            write!(f, ".{millis:03}")?;
        }
        f.write_str("Z")
    }
}

/// Serialised as RFC 3339 text, the form people and JSON clients read.
impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 instant such as \"2026-02-25T20:02:37Z\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse_rfc3339(v).ok_or_else(|| {
                    E::custom(format!(
                        "invalid instant {v:?}: write RFC 3339, such as \"2026-02-25T20:02:37Z\""
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }
}

/// Reads `len` ASCII digits at `at`, or `None` if any is missing or not a digit.
fn digits(b: &[u8], at: usize, len: usize) -> Option<i64> {
    let field = b.get(at..at.checked_add(len)?)?;
    field.iter().try_fold(0i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

/// A token of `min..=max` ASCII digits as a number.
fn small_number(token: &str, min: usize, max: usize) -> Option<i64> {
    if token.len() < min || token.len() > max {
        return None;
    }
    digits(token.as_bytes(), 0, token.len())
}

fn is_weekday(token: &str) -> bool {
    const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
    const LONG: [&str; 7] = [
        "Monday",
        "Tuesday",
        "Wednesday",
        "Thursday",
        "Friday",
        "Saturday",
        "Sunday",
    ];
    DAYS.contains(&token) || LONG.contains(&token)
}

fn month_number(token: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    MONTHS
        .iter()
        .position(|m| *m == token)
        .map(|i| i as i64 + 1)
}

/// Seconds since the epoch for a UTC civil date and time, validating every field.
fn civil_to_unix(year: i64, month: i64, day: i64, hour: i64, min: i64, sec: i64) -> Option<i64> {
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return None;
    }
    if hour > 23 || min > 59 || sec > 60 {
        return None;
    }
    // A leap second (:60) is read as :59 rather than refused; retry timing does not need better.
    let sec = sec.min(59);
    Some(days_from_civil(year, month, day) * 86_400 + hour * 3600 + min * 60 + sec)
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOV_6_1994: i64 = 784_111_777_000;

    /// Every instant read is one RFC 3339 can write back in UTC: an offset that carries the year
    /// past 9999 or before 0000 is refused (the API once answered "10000-01-01T22:59:00Z").
    #[test]
    fn rfc3339_instants_stay_within_four_digit_years() {
        for (text, back) in [
            ("9999-12-31T23:59:59Z", Some("9999-12-31T23:59:59Z")),
            ("9999-12-31T23:00:00+01:00", Some("9999-12-31T22:00:00Z")),
            ("0000-01-01T00:00:00Z", Some("0000-01-01T00:00:00Z")),
            ("9999-12-31T23:00:00-23:59", None),
            ("0000-01-01T00:00:00+00:01", None),
        ] {
            assert_eq!(
                Timestamp::parse_rfc3339(text)
                    .map(|t| t.to_string())
                    .as_deref(),
                back,
                "{text}"
            );
        }
    }

    #[test]
    fn http_date_three_forms() {
        for s in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun Nov 6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
        ] {
            assert_eq!(
                Timestamp::parse_http_date(s),
                Some(Timestamp(NOV_6_1994)),
                "{s}"
            );
        }
    }

    #[test]
    fn http_date_rejects_garbage() {
        for s in [
            "",
            "Sun",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 31 Feb 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:49:37 GMT",
            "Sun, 06 Nov 1994 08:49:37 GMT extra",
            "Funday, 06 Nov 1994 08:49:37 GMT",
            "30",
        ] {
            assert_eq!(Timestamp::parse_http_date(s), None, "{s}");
        }
    }

    #[test]
    fn rfc3339_forms() {
        let check = |s: &str, millis: i64| {
            assert_eq!(Timestamp::parse_rfc3339(s), Some(Timestamp(millis)), "{s}")
        };
        check("1994-11-06T08:49:37Z", NOV_6_1994);
        check("1994-11-06t08:49:37z", NOV_6_1994);
        check("1994-11-06 08:49:37Z", NOV_6_1994);
        check("1994-11-06T09:49:37+01:00", NOV_6_1994);
        check("1994-11-06T08:49:37.5Z", NOV_6_1994 + 500);
        check("1994-11-06T08:49:37.123456Z", NOV_6_1994 + 123);
        check("2026-02-25T20:02:37Z", 1_772_049_757_000);
        for bad in [
            "1994-11-06T08:49:37",
            "1994-13-06T08:49:37Z",
            "1994-11-06T08:49:37.Z",
            "1994-11-06T08:49:37+1:00",
            "not a date at all!!",
        ] {
            assert_eq!(Timestamp::parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn display_round_trips() {
        for millis in [
            0,
            NOV_6_1994,
            NOV_6_1994 + 7,
            -86_400_000,
            253_402_300_799_000,
        ] {
            let t = Timestamp(millis);
            assert_eq!(Timestamp::parse_rfc3339(&t.to_string()), Some(t));
        }
        assert_eq!(Timestamp(0).to_string(), "1970-01-01T00:00:00Z");
    }
}
