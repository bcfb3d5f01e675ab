//! Value parsers shared by subcommands, so that clap reports a bad value with exit code 2 and a
//! message that says what to write.

use redial_policy::{parse_duration, Timestamp};
use std::time::Duration;

/// An RFC 3339 instant: `2026-02-25T20:02:37Z`.
pub fn instant(s: &str) -> Result<Timestamp, String> {
    Timestamp::parse_rfc3339(s).ok_or_else(|| {
        format!("{s:?} is not an RFC 3339 instant: write it like 2026-02-25T20:02:37Z")
    })
}

/// A duration with a unit: `30s`, `5m`, `250ms`.
pub fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).ok_or_else(|| {
        format!("{s:?} is not a duration: write a number with a unit, such as 500ms, 30s or 5m")
    })
}

/// An HTTP header written `Name: value`.
pub fn header(s: &str) -> Result<(String, String), String> {
    let (name, value) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?} is not a header: write it as 'Name: value'"))?;
    let name = name.trim();
    if !redial_policy::is_http_token(name) {
        return Err(format!(
            "{name:?} is not a valid header name: use letters, digits and '-'"
        ));
    }
    Ok((name.to_owned(), value.trim().to_owned()))
}

/// One of an API enum's values (`all`, written by `as_str`): anything else is refused here,
/// naming the values there are, rather than sent.
pub fn one_of<T: Copy + Send + Sync + 'static>(
    all: &'static [T],
    as_str: fn(T) -> &'static str,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        all.iter()
            .copied()
            .find(|v| as_str(*v) == s)
            .ok_or_else(|| {
                let names: Vec<&str> = all.iter().map(|v| as_str(*v)).collect();
                format!("{s:?} is not one of {}", names.join(", "))
            })
    }
}
