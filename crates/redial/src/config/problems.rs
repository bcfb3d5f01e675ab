//! What is wrong with a configuration file, each problem with its line: type errors found key
//! by key, value errors located by the dotted path they begin with.

use super::{one_line, FileConfig};

/// One thing wrong with a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The line it is on, when it can be told.
    pub line: Option<usize>,
    pub message: String,
}

impl Problem {
    /// A problem the TOML reader found: its line from its place in `text`, its message alone.
    pub(super) fn of_toml(text: &str, e: &toml::de::Error) -> Problem {
        Problem {
            line: e
                .span()
                .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1),
            message: one_line(&e.message()),
        }
    }
}

/// The problems of a file as one message: "invalid config file F, line N: what" for one, and a
/// line for each under "invalid config file F: K problems" for several.
pub fn describe_problems(file: &str, problems: &[Problem]) -> String {
    let at = |p: &Problem| p.line.map_or_else(String::new, |l| format!("line {l}: "));
    match problems {
        [one] => format!(
            "invalid config file {file}{}: {}",
            one.line.map_or_else(String::new, |l| format!(", line {l}")),
            one.message
        ),
        many => {
            let mut out = format!("invalid config file {file}: {} problems", many.len());
            for p in many {
                out.push_str(&format!("\n  {}{}", at(p), p.message));
            }
            out
        }
    }
}

/// The type errors of a file that failed to read, each key apart: a section's keys one at a
/// time (`[server]`'s `max_batch`, then its `listen`...), each table of `queues` and
/// `endpoints` apart, so one wrong value does not hide the next.
pub(super) fn type_problems(text: &str, table: &toml::Table) -> (Vec<Problem>, toml::Table) {
    let mut problems = Vec::new();
    let mut pruned = table.clone();
    let mut try_one = |top: &str, value: toml::Table| {
        if let Err(e) = toml::Value::Table(value).try_into::<FileConfig>() {
            let full = e.to_string();
            let (what, within) = match full.trim_end().rsplit_once("\nin `") {
                Some((what, path)) => {
                    (what.to_owned(), Some(path.trim_end_matches('`').to_owned()))
                }
                None => (full.trim_end().to_owned(), None),
            };
            // "unknown field `x`": the place is the field's own key.
            let unknown = what
                .strip_prefix("unknown field `")
                .and_then(|r| r.split('`').next());
            let path = match (unknown, within) {
                (Some(field), Some(within)) => format!("{within}.{field}"),
                (Some(field), None) => field.to_owned(),
                (None, Some(within)) => within,
                (None, None) => top.to_owned(),
            };
            prune(&mut pruned, &segments(&path));
            let message = format!("{path}: {}", one_line(&what));
            let problem = Problem {
                line: locate(text, &message),
                message,
            };
            if !problems.contains(&problem) {
                problems.push(problem);
            }
        }
    };
    for (key, value) in table {
        match value {
            toml::Value::Table(section) if !section.is_empty() => {
                for (sub, v) in section {
                    let mut inner = toml::Table::new();
                    inner.insert(sub.clone(), v.clone());
                    let mut outer = toml::Table::new();
                    outer.insert(key.clone(), toml::Value::Table(inner));
                    try_one(key, outer);
                }
            }
            v => {
                let mut outer = toml::Table::new();
                outer.insert(key.clone(), v.clone());
                try_one(key, outer);
            }
        }
    }
    (problems, pruned)
}

/// Removes the key at `path` (a value at fault) from `table`; a path into an array removes the
/// array's key.
fn prune(table: &mut toml::Table, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            table.remove(last);
        }
        [first, rest @ ..] => match table.get_mut(first) {
            Some(toml::Value::Table(inner)) => prune(inner, rest),
            Some(_) => {
                table.remove(first);
            }
            None => {}
        },
    }
}

/// The line of the file a value error is about, from the dotted path it begins with
/// (`server.max_batch must be...`, `queues.mail.policy.max_attempts: ...`,
/// `endpoints."https://api.example.com".rate: ...`): the key's line within the longest table
/// header the path begins with, else that header's line. Tables written inline or as dotted keys
/// of a parent table are found by their key too.
pub(crate) fn locate(text: &str, error: &str) -> Option<usize> {
    let mut path = segments(error);
    if path.is_empty() {
        return None;
    }
    // Errors of a table's fields end with the field: "... in `rate`".
    if let Some(field) = error
        .trim_end()
        .rsplit_once("in `")
        .and_then(|(_, r)| r.strip_suffix('`'))
    {
        path.extend(field.split('.').map(str::to_owned));
    }
    // Each line: the header it is under, and the key it sets (if it sets one).
    let mut header: Vec<String> = Vec::new();
    let mut best: Option<(usize, usize)> = None; // (matched segments, line)
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if let Some(h) = line
            .strip_prefix("[[")
            .and_then(|l| l.strip_suffix("]]"))
            .or_else(|| line.strip_prefix('[').and_then(|l| l.split(']').next()))
        {
            header = segments(h);
            if path.starts_with(&header) && best.is_none_or(|(n, _)| header.len() > n) {
                best = Some((header.len(), i + 1));
            }
            continue;
        }
        let Some((key, _)) = line.split_once('=') else {
            continue;
        };
        if line.starts_with('#') {
            continue;
        }
        let mut full = header.clone();
        full.extend(segments(key));
        let n = full.len();
        if path.starts_with(&full) && best.is_none_or(|(m, _)| n > m) {
            best = Some((n, i + 1));
        }
    }
    best.map(|(_, line)| line)
}

/// The dotted path at the start of `s`, split into keys (quotes removed): up to the first
/// space or colon outside quotes.
fn segments(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in s.trim().chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => out.push(std::mem::take(&mut cur).trim().to_owned()),
            ' ' | ':' | '=' | '[' if !quoted => break,
            c => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_owned());
    }
    out.retain(|k| !k.is_empty());
    out
}
