//! Reason patterns: a reason with its variable parts masked, so that dead letters that died of
//! one cause fall in one group ("timeout after 30012 ms" and "timeout after 30544 ms" are both
//! "timeout after <n> ms").
//!
//! Owns the masking rules and nothing else: which reasons share a pattern is decided here, once,
//! for every store, the API, the CLI and the dashboard. Does not own where reasons are kept or
//! how groups are counted.
//!
//! What is masked, in this order at each place in the text:
//! - a UUID: `<uuid>`;
//! - an RFC 3339 date or time (`2026-12-06`, `2026-12-06T10:00:00.5Z`, `10:00:00`): `<time>`;
//! - a value in double quotes or backticks: `"<value>"`;
//! - a duration as Redial writes it (`150ms`, `2m30s`, `1.5s`): `<duration>`;
//! - a number, with its unit kept (`30012`, `2.5`, `10KiB`, `95%`): `<n>`, `<n>KiB`, `<n>%`;
//! - any other word of 8 characters or more with a digit in it (`ord_8F2kq71`, a hex digest):
//!   `<id>`.
//!
//! Kept as they are: a reason's leading HTTP status (`404 not found` stays apart from `410
//! gone`), and short words with digits (`http2`, `sha256`, `5xx`).

/// The pattern of `reason`: its variable parts masked. Idempotent: a pattern is its own
/// pattern.
pub fn reason_pattern(reason: &str) -> String {
    let b = reason.as_bytes();
    let mut out = String::with_capacity(reason.len());
    let mut i = 0;
    // A leading status ("404 not found") says which failure it was: it is kept.
    if b.len() >= 3 && b[..3].iter().all(u8::is_ascii_digit) && !b.get(3).is_some_and(is_word) {
        out.push_str(&reason[..3]);
        i = 3;
    }
    // Right after a mask, what follows starts afresh (`<uuid>-0` masks its `0` too), so that a
    // pattern's own pattern is itself.
    let mut masked = false;
    while i < b.len() {
        let at_boundary = i == 0 || masked || !is_word(&b[i - 1]);
        masked = false;
        if at_boundary {
            if let Some(n) = uuid_len(&b[i..]) {
                out.push_str("<uuid>");
                i += n;
                masked = true;
                continue;
            }
            if let Some(n) = time_len(&b[i..]) {
                out.push_str("<time>");
                i += n;
                masked = true;
                continue;
            }
        }
        // Redial writes a wait under a millisecond as "<1ms".
        if b[i..].starts_with(b"<1ms") && !b.get(i + 4).is_some_and(is_word) {
            out.push_str("<duration>");
            i += 4;
            masked = true;
            continue;
        }
        if let Some(n) = quoted_len(&b[i..]) {
            let q = b[i] as char;
            out.push(q);
            out.push_str("<value>");
            out.push(q);
            i += n;
            continue;
        }
        if is_word(&b[i]) && at_boundary {
            let n = b[i..].iter().take_while(|c| is_word(c)).count();
            mask_word(&reason[i..i + n], &mut out);
            i += n;
            continue;
        }
        // Not a word's start: copied as it is (a whole character, whatever its width).
        let ch = reason[i..].chars().next().unwrap_or('\u{fffd}');
        out.push(ch);
        i += ch.len_utf8().max(1);
    }
    out
}

/// Letters, digits, `_` and `.` between digits make a word; `-` too, so that `ord-123-abc` is
/// one id. `<` and `>` are not word characters, so a mask is never read as a word again.
fn is_word(c: &u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.')
}

/// A word (letters, digits, `_`, `-` and `.`) masked as the module's rules say. A `.` or `-`
/// that ends the word (the end of a sentence, a range) is not part of it.
fn mask_word(word: &str, out: &mut String) {
    let trimmed = word.trim_end_matches(['.', '-']);
    let tail = &word[trimmed.len()..];
    let w = trimmed;
    if w.is_empty() {
        out.push_str(tail);
        return;
    }
    let status_class = w.len() == 3 && w.as_bytes()[0].is_ascii_digit() && w.ends_with("xx");
    if status_class || !w.bytes().any(|c| c.is_ascii_digit()) {
        out.push_str(w);
    } else if is_duration(w) {
        out.push_str("<duration>");
    } else if let Some(unit) = number_unit(w) {
        out.push_str("<n>");
        out.push_str(unit);
    } else if w.contains(['.', '-']) {
        // Parts of a dotted or dashed word (an address, a version, a range) masked one by one.
        let mut rest = w;
        while let Some(at) = rest.find(['.', '-']) {
            mask_word(&rest[..at], out);
            out.push_str(&rest[at..at + 1]);
            rest = &rest[at + 1..];
        }
        mask_word(rest, out);
    } else if w.len() >= 8 {
        out.push_str("<id>");
    } else {
        out.push_str(w);
    }
    out.push_str(tail);
}

/// `150ms`, `30s`, `2m30s`, `1.5s`, `1d2h`: one or more numbers each followed by a time unit.
fn is_duration(w: &str) -> bool {
    let b = w.as_bytes();
    let mut i = 0;
    let mut parts = 0;
    while i < b.len() {
        let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        i += digits;
        if b.get(i) == Some(&b'.') {
            let frac = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if frac == 0 {
                return false;
            }
            i += 1 + frac;
        }
        let unit = ["ms", "us", "ns", "d", "h", "m", "s"]
            .into_iter()
            .find(|u| b[i..].starts_with(u.as_bytes()))
            .map(str::len);
        let Some(unit) = unit else { return false };
        i += unit;
        parts += 1;
    }
    parts > 0
}

/// The unit after a number (`""` for a bare one): digits, an optional fraction, then at most
/// three letters (`10KiB`, `2.5`, `200`). `None` when the word is anything else.
fn number_unit(w: &str) -> Option<&str> {
    let b = w.as_bytes();
    let mut i = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if i == 0 {
        return None;
    }
    if b.get(i) == Some(&b'.') {
        let frac = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if frac == 0 {
            return None;
        }
        i += 1 + frac;
    }
    let unit = &w[i..];
    (unit.len() <= 3 && unit.bytes().all(|c| c.is_ascii_alphabetic())).then_some(unit)
}

/// The length of a UUID (8-4-4-4-12 hexadecimal digits) at the start of `b`, when one is there
/// and does not run on into a longer word.
fn uuid_len(b: &[u8]) -> Option<usize> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut i = 0;
    for (k, n) in GROUPS.into_iter().enumerate() {
        if k > 0 {
            if b.get(i) != Some(&b'-') {
                return None;
            }
            i += 1;
        }
        if b.len() < i + n || !b[i..i + n].iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        i += n;
    }
    (!b.get(i).is_some_and(|c| c.is_ascii_alphanumeric())).then_some(i)
}

/// The length of an RFC 3339 date, date and time, or time of day at the start of `b`: `YYYY-MM-DD`,
/// optionally `T` or a space and a time; or `HH:MM:SS` alone. A time is `HH:MM:SS`, an optional
/// fraction, then an optional `Z` or offset.
fn time_len(b: &[u8]) -> Option<usize> {
    let digits =
        |at: usize, n: usize| b.len() >= at + n && b[at..at + n].iter().all(u8::is_ascii_digit);
    let is = |at: usize, c: u8| b.get(at) == Some(&c);
    let time_at = |at: usize| -> Option<usize> {
        if !(digits(at, 2)
            && is(at + 2, b':')
            && digits(at + 3, 2)
            && is(at + 5, b':')
            && digits(at + 6, 2))
        {
            return None;
        }
        let mut i = at + 8;
        if is(i, b'.') {
            let frac = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
            if frac > 0 {
                i += 1 + frac;
            }
        }
        if is(i, b'Z') {
            i += 1;
        } else if (is(i, b'+') || is(i, b'-'))
            && digits(i + 1, 2)
            && is(i + 3, b':')
            && digits(i + 4, 2)
        {
            i += 6;
        }
        Some(i)
    };
    let end = if digits(0, 4) && is(4, b'-') && digits(5, 2) && is(7, b'-') && digits(8, 2) {
        match (b.get(10), time_at(11)) {
            (Some(b'T' | b't' | b' '), Some(end)) => end,
            _ => 10,
        }
    } else {
        time_at(0)?
    };
    (!b.get(end).is_some_and(|c| c.is_ascii_alphanumeric())).then_some(end)
}

/// The length of a value in double quotes or backticks at the start of `b`, closing quote
/// included; a `\` escapes the next character. `None` when it is not closed.
fn quoted_len(b: &[u8]) -> Option<usize> {
    let q = *b.first()?;
    if q != b'"' && q != b'`' {
        return None;
    }
    let mut i = 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            c if c == q => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::reason_pattern;

    #[track_caller]
    fn check(reason: &str, expected: &str) {
        assert_eq!(
            reason_pattern(reason),
            expected,
            "the pattern of {reason:?}"
        );
        assert_eq!(
            reason_pattern(expected),
            expected,
            "a pattern is its own pattern"
        );
    }

    #[test]
    fn masks() {
        check("timeout after 30012 ms", "timeout after <n> ms");
        check("timeout after 30544 ms", "timeout after <n> ms");
        check(
            "404 not found; permanent, not retried",
            "404 not found; permanent, not retried",
        );
        check(
            "503 service unavailable; exponential backoff 2m30s; attempt 5 of 5",
            "503 service unavailable; exponential backoff <duration>; attempt <n> of <n>",
        );
        check(
            "429 rate limited; Retry-After 30s; deferral 20 of 20",
            "429 rate limited; Retry-After <duration>; deferral <n> of <n>",
        );
        check(
            "500 internal server error; next try at 2026-12-06T10:00:00.5Z would pass the deadline 2026-12-06T09:59:00Z",
            "500 internal server error; next try at <time> would pass the deadline <time>",
        );
        check(
            "handler: order 5f0c1e2a-9b7d-4c3e-8a1f-0123456789ab not found",
            "handler: order <uuid> not found",
        );
        check(
            "handler: customer \"Ada \\\"L\\\"\" is locked",
            "handler: customer \"<value>\" is locked",
        );
        check(
            "handler: field `amount` is invalid",
            "handler: field `<value>` is invalid",
        );
        check(
            "handler: cus_8F2kq71Zx was deleted",
            "handler: <id> was deleted",
        );
        check(
            "handler: payload 10KiB over the limit, 95% used",
            "handler: payload <n>KiB over the limit, <n>% used",
        );
        check(
            "connection refused to 127.0.0.1:8080",
            "connection refused to <n>.<n>.<n>.<n>:<n>",
        );
        check(
            "https://api.example.com/v1/orders/123 gone",
            "https://api.example.com/v1/orders/<n> gone",
        );
        check(
            "tls: http2 frame error at 10:04:59",
            "tls: http2 frame error at <time>",
        );
        check(
            "policy rule 2: 5xx is transient",
            "policy rule <n>: 5xx is transient",
        );
        check("died after 3 stalls.", "died after <n> stalls.");
        check("", "");
        check("1.5s", "<duration>");
        check("backoff <1ms", "backoff <duration>");
        check(
            "order 0a0000a0-a0aa-000a-aaa0-0aaaa000aa00-0 gone",
            "order <uuid>-<n> gone",
        );
        check("200", "200");
        check("2000 jobs", "<n> jobs");
        check("unterminated \"quote 12", "unterminated \"quote <n>");
        check("héllo 42 wörld", "héllo <n> wörld");
    }

    #[test]
    fn one_cause_one_pattern() {
        let a = reason_pattern("503 service unavailable; exponential backoff 45s; attempt 3 of 8");
        let b =
            reason_pattern("503 service unavailable; exponential backoff 1m2.5s; attempt 7 of 8");
        assert_eq!(a, b);
        assert_ne!(reason_pattern("404 not found"), reason_pattern("410 gone"));
    }
}
