//! Durations as people and servers write them: `30s`, `5m`, `1h30m`, Go's `6m0s` and `250ms`.
//!
//! Owns parsing and printing of human durations, and the serde glue that lets policy files say
//! `base = "2s"`. Does not own bare numbers: whether `30` means seconds, milliseconds or an epoch
//! depends on the header it came from, which `wait` decides.

use std::fmt;
use std::time::Duration;

/// Parses a sequence of `<number><unit>` parts, as Go's `time.ParseDuration` does, plus days:
/// units `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`, `d`; numbers may carry a fraction (`1.5s`);
/// parts may be separated by spaces (`1h 30m`), their units from the largest down, each once
/// (`1s1m`, which Go reads as 61 s, is refused: it is more likely a slip than a meaning). A lone
/// `0` is zero. Returns `None` for anything else, including negative values and overflow.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let b = s.as_bytes();
    let mut i = 0;
    let mut total: u128 = 0;
    let mut parts = 0;
    // Units go from the largest down, each once ("1h30m", not "30m1h" or "1s1m").
    let mut last_unit = u128::MAX;
    while i < b.len() {
        if b[i] == b' ' {
            i += 1;
            continue;
        }
        let mut whole: u128 = 0;
        let mut frac: u128 = 0;
        let mut frac_scale: u128 = 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            whole = whole
                .checked_mul(10)?
                .checked_add(u128::from(b[i] - b'0'))?;
            i += 1;
        }
        let mut digits = i - start;
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let fstart = i;
            while i < b.len() && b[i].is_ascii_digit() {
                // Beyond nanosecond precision the extra digits cannot change the result.
                if frac_scale < 1_000_000_000_000 {
                    frac = frac * 10 + u128::from(b[i] - b'0');
                    frac_scale *= 10;
                }
                i += 1;
            }
            digits += i - fstart;
        }
        if digits == 0 {
            return None;
        }
        let unit_start = i;
        while i < b.len() && !b[i].is_ascii_digit() && b[i] != b' ' && b[i] != b'.' {
            i += 1;
        }
        let nanos_per_unit: u128 = match &s[unit_start..i] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => return None,
        };
        if nanos_per_unit >= last_unit {
            return None;
        }
        last_unit = nanos_per_unit;
        let part = whole
            .checked_mul(nanos_per_unit)?
            .checked_add(frac * nanos_per_unit / frac_scale)?;
        total = total.checked_add(part)?;
        parts += 1;
    }
    if parts == 0 {
        return None;
    }
    let secs = u64::try_from(total / 1_000_000_000).ok()?;
    // The remainder of a division by 1e9 always fits in u32.
    let nanos = (total % 1_000_000_000) as u32;
    Some(Duration::new(secs, nanos))
}

/// Displays a duration the way `parse_duration` reads it, short and exact to the millisecond:
/// `250ms`, `30s`, `2.5s`, `1m30s`, `1h`, `2d3h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Human(pub Duration);

impl fmt::Display for Human {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total_ms = self.0.as_millis();
        if total_ms == 0 {
            return f.write_str(if self.0.is_zero() { "0s" } else { "<1ms" });
        }
        if total_ms < 1000 {
            return write!(f, "{total_ms}ms");
        }
        let ms = total_ms % 1000;
        let total_s = total_ms / 1000;
        let (d, h, m, s) = (
            total_s / 86_400,
            total_s % 86_400 / 3600,
            total_s % 3600 / 60,
            total_s % 60,
        );
        if d > 0 {
            write!(f, "{d}d")?;
        }
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 || ms > 0 {
            write!(f, "{s}")?;
            if ms > 0 {
                let frac = format!("{ms:03}");
                write!(f, ".{}", frac.trim_end_matches('0'))?;
            }
            f.write_str("s")?;
        }
        Ok(())
    }
}

/// Serde glue for `Duration` fields written as human strings (`"30s"`).
pub mod serde_human {
    use super::{parse_duration, Human};
    use serde::{de, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&Human(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        struct V;
        impl de::Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a duration with a unit, such as \"500ms\", \"30s\", \"5m\" or \"1h\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                parse_duration(v).ok_or_else(|| {
                    E::custom(format!(
                        "invalid duration {v:?}: write a number with a unit, such as \"500ms\", \"30s\", \"5m\" or \"1h\""
                    ))
                })
            }
        }
        d.deserialize_str(V)
    }

    /// The same, for `Option<Duration>`.
    pub mod option {
        use serde::{Deserialize, Deserializer, Serializer};
        use std::time::Duration;

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => super::serialize(d, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            #[derive(Deserialize)]
            struct Wrap(#[serde(with = "super")] Duration);
            Option::<Wrap>::deserialize(d).map(|w| w.map(|Wrap(d)| d))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Option<u64>) {
        assert_eq!(
            parse_duration(input).map(|d| d.as_millis() as u64),
            expected,
            "{input:?}"
        );
    }

    #[test]
    fn parses_human_and_go_durations() {
        check("30s", Some(30_000));
        check("5m", Some(300_000));
        check("1h", Some(3_600_000));
        check("1d", Some(86_400_000));
        check("6m0s", Some(360_000));
        check("1h30m", Some(5_400_000));
        check("1h 30m", Some(5_400_000));
        check("250ms", Some(250));
        check("1.5s", Some(1_500));
        check(".5s", Some(500));
        check("2.0s", Some(2_000));
        check("1500us", Some(1));
        check("1500µs", Some(1));
        check("7ns", Some(0));
        check("0", Some(0));
        check(" 20ms ", Some(20));
        check("", None);
        check("30", None);
        check("s", None);
        check("-1s", None);
        check("1x", None);
        check("1.s", Some(1_000));
        check(".s", None);
        check("99999999999999999999999999999h", None);
        // Units from the largest down, each once.
        check("1s1m", None);
        check("30m1h", None);
        check("1m1m", None);
        check("1h1m1s1ms", Some(3_661_001));
    }

    #[test]
    fn human_display_round_trips() {
        for (ms, text) in [
            (0, "0s"),
            (250, "250ms"),
            (30_000, "30s"),
            (2_500, "2.5s"),
            (90_000, "1m30s"),
            (3_600_000, "1h"),
            (97_200_000, "1d3h"),
            (3_723_040, "1h2m3.04s"),
        ] {
            let d = Duration::from_millis(ms);
            assert_eq!(Human(d).to_string(), text);
            assert_eq!(parse_duration(text), Some(d), "{text}");
        }
    }
}
