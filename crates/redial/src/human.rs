//! What the CLI prints for people (the default); `--json` (or `-o json`) prints the API's JSON
//! for scripts instead. Text from the server is shown on one line each, long values cut with an
//! ellipsis, so a receiver's HTML page never floods the terminal; and everything printed passes
//! through [`printable`] (or [`printable_json`]), so text from outside (a response body, a
//! reason, an id) cannot drive the terminal.
//!
//! Over 600 lines: a printer per view of the CLI, sharing the table and cutting helpers, with their
//! tests.

use redial_client::{Endpoint, Job};
use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters a terminal would act on or that reorder what follows them: control characters
/// (C0, DEL, C1: escape sequences clear the screen, set the title, write the clipboard with
/// OSC 52), Unicode's bidirectional embeddings, overrides and isolates, and its line and
/// paragraph separators.
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// `text` safe for a terminal: each unsafe character (but newlines and tabs, which the CLI's
/// own layout uses) shown as an escape, `\u{1b}`.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| unsafe_char(c) && c != '\n' && c != '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) && c != '\n' && c != '\t' {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Serialised JSON safe for a terminal: serde_json escapes C0 controls already; the other
/// unsafe characters (only ever inside strings there) become JSON escapes, `\u2028`, so the
/// JSON means the same.
pub fn printable_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| unsafe_char(c) && c != '\n') {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if unsafe_char(c) && c != '\n' {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{u:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `println!` for what the CLI prints: through [`printable`].
macro_rules! say {
    () => {
        std::println!()
    };
    ($($arg:tt)*) => {
        std::println!("{}", $crate::human::printable(&std::format!($($arg)*)))
    };
}
pub(crate) use say;

/// `print!` through [`printable`].
macro_rules! say_part {
    ($($arg:tt)*) => {
        std::print!("{}", $crate::human::printable(&std::format!($($arg)*)))
    };
}
pub(crate) use say_part;

/// Output for people or for programs, on every command that prints something.
#[derive(Debug, Clone, clap::Args)]
pub struct OutputArgs {
    /// Print the API's JSON (for scripts) instead of text for people.
    #[arg(long)]
    json: bool,
    /// `text` (for people, the default) or `json` (the same as --json).
    #[arg(long, short = 'o', value_enum, value_name = "FORMAT")]
    output: Option<Format>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

impl OutputArgs {
    pub fn json(&self) -> bool {
        self.json || self.output == Some(Format::Json)
    }
}

/// A value, or `-` when there is none.
fn or_dash(v: Option<impl ToString>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// `text` on one line, cut to `max` characters with an ellipsis.
pub fn cut(text: &str, max: usize) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut out: String = one_line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A table: a header row and rows, columns as wide as their widest cell (the last one is not
/// padded). Columns named in `right` are aligned right (numbers).
pub fn table(headers: &[&str], rows: &[Vec<String>], right: &[&str]) -> String {
    let widths: Vec<usize> = (0..headers.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .chain([headers[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            if right.contains(&headers[i]) {
                out.push_str(&" ".repeat(pad));
                out.push_str(cell);
            } else {
                out.push_str(cell);
                if i != last {
                    out.push_str(&" ".repeat(pad));
                }
            }
            if i != last {
                out.push_str("  ");
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(headers.to_vec());
    for r in rows {
        out.push('\n');
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// "dead (permanent)", "ready".
fn state(j: &Job) -> String {
    match &j.category {
        Some(c) => format!("{} ({c})", j.state),
        None => j.state.to_string(),
    }
}

fn ms(v: Option<i64>) -> String {
    match v.and_then(|n| u64::try_from(n).ok()) {
        None => "-".to_owned(),
        Some(n) if n < 1000 => format!("{n} ms"),
        Some(n) => format!("{:.1} s", n as f64 / 1000.0),
    }
}

/// A job for people: what it is, where it stands and why, then its attempts as a table.
pub fn job(j: &Job) -> String {
    let mut out = format!("job {}  {}\n", j.id, state(j));
    let finished = matches!(j.state.as_str(), "completed" | "dead" | "cancelled");
    let facts = [
        ("why", cut(&or_dash(j.last_reason.as_ref()), 200)),
        ("queue", j.queue.clone()),
        ("endpoint", j.endpoint.clone()),
        (
            "request",
            format!(
                "{} {} ({} bytes of body)",
                j.request.method, j.request.url, j.request.body_bytes
            ),
        ),
        ("key", or_dash(j.idempotency_key.as_ref())),
        ("created", j.created_at.to_string()),
        (
            "next run",
            if finished {
                "none".to_owned()
            } else {
                j.run_at.to_string()
            },
        ),
        (
            "counts",
            format!(
                "{} requests, {} failed, {} deferrals, {} replays",
                j.runs, j.attempts, j.deferrals, j.replays
            ),
        ),
    ];
    for (k, v) in facts {
        out.push_str(&format!("  {k:<9} {v}\n"));
        if k == "endpoint" {
            if let Some(g) = &j.group {
                out.push_str(&format!("  {:<9} {g}\n", "group"));
            }
            if let Some(k) = &j.ordering_key {
                out.push_str(&format!("  {:<9} {k}\n", "order key"));
            }
        }
    }
    if let Some(first) = j.original_request.as_ref() {
        out.push_str(&format!(
            "  {:<9} {} {} ({} bytes of body)\n",
            "enqueued", first.method, first.url, first.body_bytes
        ));
    }
    for c in j.changes.as_deref().unwrap_or_default() {
        out.push_str(&format!(
            "  {:<9} replay {} at {}: {}\n",
            "changed",
            c.replay,
            c.at,
            printable(&c.changed.join("; "))
        ));
    }
    let attempts = j.attempt_log.as_deref().unwrap_or_default();
    if attempts.is_empty() {
        out.push_str("\nno attempt yet\n");
        return out;
    }
    let rows: Vec<Vec<String>> = attempts.iter().map(attempt_row).collect();
    out.push('\n');
    out.push_str(&table(
        &[
            "#", "STARTED", "TOOK", "RESULT", "CATEGORY", "DECISION", "DELAY", "WAIT", "WHY",
        ],
        &rows,
        &["#", "TOOK", "DELAY"],
    ));
    out.push('\n');
    // The last answer's body, cut: enough to recognise it, never a whole page.
    if let Some(body) = attempts
        .iter()
        .rev()
        .find_map(|a| a.response_body.as_deref())
        .filter(|b| !b.trim().is_empty())
    {
        out.push_str(&format!("\nlast response body: {}\n", cut(body, 200)));
    }
    out
}

/// One attempt's row in a job's table.
fn attempt_row(a: &redial_client::Attempt) -> Vec<String> {
    let result = match (a.status, &a.error) {
        (Some(st), _) => st.to_string(),
        (None, Some(e)) => e.clone(),
        _ => "-".to_owned(),
    };
    let decision = match &a.dead_category {
        Some(c) => format!("{} ({c})", a.decision),
        None => a.decision.clone(),
    };
    let wait = match a.server_wait_ms {
        Some(w) => format!(
            "{} ({})",
            ms(Some(w)),
            or_dash(a.server_wait_source.as_ref())
        ),
        None => "-".to_owned(),
    };
    vec![
        a.number.to_string(),
        a.started_at.to_string(),
        ms(Some(a.duration_ms)),
        result,
        a.category.clone(),
        decision,
        ms(a.delay_ms),
        wait,
        match &a.held {
            Some(h) => cut(&format!("{}; held before it by {h}", a.reason), 120),
            None => cut(&a.reason, 120),
        },
    ]
}

/// Jobs as a table: requests made (every attempt, across replays), failed attempts counted
/// against the ceilings, and deferrals.
pub fn jobs(list: &[Job]) -> String {
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|j| {
            vec![
                j.id.clone(),
                j.queue.clone(),
                state(j),
                j.runs.to_string(),
                j.attempts.to_string(),
                j.deferrals.to_string(),
                cut(&or_dash(j.last_reason.as_ref()), 80),
            ]
        })
        .collect();
    table(
        &[
            "ID", "QUEUE", "STATE", "REQUESTS", "FAILED", "DEFERRED", "REASON",
        ],
        &rows,
        &["REQUESTS", "FAILED", "DEFERRED"],
    )
}

/// One endpoint in full, for people.
pub fn endpoint(e: &Endpoint) -> String {
    let mut out = format!("endpoint {}\n", e.name);
    let mut facts = endpoint_holds(e);
    facts.extend(endpoint_limits(e));
    if let Some(f) = &e.forecast {
        facts.extend(forecast(f));
    }
    if e.nodes > 1 {
        facts.push((
            "nodes",
            format!(
                "{}: limits are divided among them; the counts above are this node's part",
                e.nodes
            ),
        ));
    }
    for (k, v) in facts {
        out.push_str(&format!("  {k:<17} {v}\n"));
    }
    if !e.breaker_history.is_empty() {
        let rows: Vec<Vec<String>> = e
            .breaker_history
            .iter()
            .rev()
            .map(|h| vec![h.at.to_string(), h.to.clone(), cut(&h.reason, 120)])
            .collect();
        out.push_str("\nbreaker history, newest first\n");
        out.push_str(&table(&["WHEN", "TO", "WHY"], &rows, &[]));
        out.push('\n');
    }
    out
}

/// What holds an endpoint's jobs, if anything: pauses, the breaker, a quarantine, an outage.
fn endpoint_holds(e: &Endpoint) -> Vec<(&'static str, String)> {
    let paused_by_hand = match &e.paused_by_hand {
        None => "no".to_owned(),
        Some(p) => format!(
            "{} (since {}){}",
            p.until
                .as_ref()
                .map_or("until resumed".to_owned(), |u| format!("until {u}")),
            p.since,
            Some(p.reason.as_str())
                .filter(|r| !r.is_empty())
                .map_or(String::new(), |r| format!(": {r}"))
        ),
    };
    vec![
        (
            "holding",
            e.holding.clone().unwrap_or_else(|| "nothing".into()),
        ),
        ("paused by hand", paused_by_hand),
        (
            "paused by answers",
            match &e.paused_until {
                Some(u) => format!("until {u}: {}", or_dash(e.pause_reason.as_ref())),
                None => "no".to_owned(),
            },
        ),
        (
            "jobs",
            format!(
                "{} due and held, {} scheduled later",
                e.held, e.waiting_later
            ),
        ),
        (
            "breaker",
            match &e.breaker_until {
                Some(u) => format!("{} until {u}", e.breaker),
                None => e.breaker.to_string(),
            },
        ),
        (
            "quarantined",
            match &e.quarantined_since {
                Some(s) => format!("since {s}: jobs held, not failed; one probe at a time"),
                None => "no".to_owned(),
            },
        ),
        (
            "failing",
            match &e.failing_since {
                Some(s) => format!("since {s}"),
                None => "no".to_owned(),
            },
        ),
        (
            "last outage began",
            match &e.outage_began {
                Some(s) => format!("{s} (redial endpoints replay-outage replays what died since)"),
                None => "-".to_owned(),
            },
        ),
    ]
}

/// Where an endpoint stands against its limits: the breaker's window, the retry budget, the
/// rate, what its answers taught, what is in flight.
fn endpoint_limits(e: &Endpoint) -> Vec<(&'static str, String)> {
    vec![
        (
            "window",
            format!(
                "{} failures ({} of retries) in {} calls",
                e.breaker_window_failures, e.breaker_window_retry_failures, e.breaker_window_calls
            ),
        ),
        (
            "retry budget",
            format!(
                "{} used of {}, {} left",
                e.budget_used, e.budget_allowed, e.budget_remaining
            ),
        ),
        ("rate", or_dash(e.rate.as_ref())),
        (
            "learned pace",
            match e.learned_pace {
                Some(p) => {
                    format!("{p:.1} requests/s (from bare refusals: 429s, a limiter's 503s)")
                }
                None => "none".to_owned(),
            },
        ),
        (
            "learned quota",
            match e.learned_limit {
                Some(l) => format!(
                    "{} of {l} left, resets {}",
                    or_dash(e.learned_remaining),
                    or_dash(e.learned_reset_at.as_ref())
                ),
                None => "none".to_owned(),
            },
        ),
        (
            "in flight",
            match e.concurrency_limit {
                Some(l) => format!("{} of {l}", e.in_flight),
                None => e.in_flight.to_string(),
            },
        ),
    ]
}

/// A forecast's lines: when the backlog drains and at what pace, and the deadlines at risk.
pub fn forecast(f: &redial_client::Forecast) -> Vec<(&'static str, String)> {
    let drains = match (&f.drains_at, f.drain_seconds) {
        _ if f.waiting == 0 => "nothing waits".to_owned(),
        (Some(at), Some(secs)) => format!(
            "{at}, in {} ({} jobs{}, limited by {})",
            redial_policy::Human(std::time::Duration::from_secs(secs.max(0.0).round() as u64)),
            f.waiting,
            f.jobs_per_second.map_or(String::new(), |r| format!(
                " at {}",
                redial_policy::endpoint::pace_text(r)
            )),
            f.limited_by
        ),
        _ => format!("not known: {}", f.limited_by),
    };
    let mut out = vec![("drains", drains)];
    if let Some(start) = f.starts_at.as_ref().filter(|_| f.waiting > 0) {
        out.push(("starts", start.to_string()));
    }
    let risk = match &f.first_at_risk {
        None => format!(
            "{} of {} with a deadline",
            f.deadline_at_risk, f.with_deadline
        ),
        Some(first) => format!(
            "{} of {} with a deadline; the first due by {}, forecast to start {}",
            f.deadline_at_risk,
            f.with_deadline,
            first.deadline,
            or_dash(first.forecast_start.as_ref())
        ),
    };
    out.push(("deadlines at risk", risk));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn text_from_outside_cannot_drive_the_terminal() {
        // Clear the screen, set the title, write the clipboard (OSC 52), ring, NUL, C1 CSI,
        // a right-to-left override, a line separator.
        let hostile = "a\u{1b}[2J\u{1b}]0;owned\u{7}\u{1b}]52;c;ZWNobw==\u{7}\u{0}\u{9b}31m\u{202e}txt.exe\u{2028}b";
        let shown = printable(hostile);
        assert!(!shown.chars().any(unsafe_char), "{shown}");
        assert_eq!(
            shown,
            "a\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\u{1b}]52;c;ZWNobw==\\u{7}\\u{0}\\u{9b}31m\\u{202e}txt.exe\\u{2028}b"
        );
        assert_eq!(printable("two\nlines\tand a tab"), "two\nlines\tand a tab");
        assert!(matches!(printable("plain"), Cow::Borrowed(_)));
        // In JSON, as JSON escapes: the value reads back the same.
        let v = serde_json::json!({ "body": hostile });
        let text = serde_json::to_string_pretty(&v).expect("JSON");
        let shown = printable_json(&text);
        assert!(
            !shown.chars().any(|c| unsafe_char(c) && c != '\n'),
            "{shown}"
        );
        let back: Value = serde_json::from_str(&shown).expect("still JSON");
        assert_eq!(back, v);
        // What the job view prints of a hostile body.
        let job = Job {
            id: "j1".into(),
            state: redial_client::JobState::Dead,
            attempt_log: Some(vec![redial_client::Attempt {
                number: 1,
                status: Some(200),
                response_body: Some(hostile.into()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert!(!printable(&super::job(&job))
            .chars()
            .any(|c| unsafe_char(c) && c != '\n'));
    }

    #[test]
    fn tables_fit_their_widest_cell_and_numbers_align_right() {
        let t = table(
            &["ID", "N", "WHY"],
            &[
                vec!["a".into(), "7".into(), "x".into()],
                vec!["long-id".into(), "12".into(), "y".into()],
            ],
            &["N"],
        );
        assert_eq!(t, "ID        N  WHY\na         7  x\nlong-id  12  y");
    }

    #[test]
    fn long_text_is_cut_on_one_line() {
        let page = format!("<html>\n<body>{}</body></html>", "word ".repeat(200));
        let c = cut(&page, 50);
        assert_eq!(c.chars().count(), 50);
        assert!(c.ends_with('…') && !c.contains('\n'));
    }

    #[test]
    fn a_job_reads_as_a_summary_and_a_timeline() {
        let j: Job = serde_json::from_value(json!({
            "id": "missing", "queue": "default", "endpoint": "http://127.0.0.1:9000",
            "state": "dead", "category": "permanent", "attempts": 0, "deferrals": 0, "runs": 1,
            "replays": 0, "last_reason": "404 not found; permanent, not retried",
            "idempotency_key": "k", "created_at": "2026-12-01T00:00:00Z", "run_at": "2026-12-01T00:00:00Z",
            "updated_at": "2026-12-01T00:00:00Z", "finished_at": "2026-12-01T00:00:00Z",
            "deadline": null, "group": null, "priority": 0, "tags": [], "unknown_attempts": 0,
            "stalls": 0, "cancel_requested": false,
            "request": {"method": "GET", "url": "http://127.0.0.1:9000/nope", "body_bytes": 0,
                "headers": [], "timeout_ms": null},
            "attempt_log": [{"number": 1, "started_at": "2026-12-01T00:00:00Z", "duration_ms": 3,
                "status": 404, "error": null, "category": "permanent", "decision": "dead",
                "dead_category": "permanent", "delay_ms": null, "server_wait_ms": null,
                "server_wait_source": null, "reason": "404 not found; permanent, not retried",
                "response_headers": [], "worker": "w1",
                "response_body": format!("<html>{}</html>", "x".repeat(5000))}]
        }))
        .expect("a job as the API writes it");
        let text = job(&j);
        assert!(
            text.starts_with("job missing  dead (permanent)\n"),
            "{text}"
        );
        assert!(text.contains("  counts    1 requests, 0 failed"), "{text}");
        assert!(text.contains("#  STARTED"), "{text}");
        assert!(text.contains("404     permanent"), "{text}");
        assert!(text.len() < 2000, "the body is cut: {} bytes", text.len());
    }
}

/// Progress of a long operation on standard error: on a terminal one line redrawn in place (a
/// bar, counts, rate); otherwise a plain line at each tenth, so logs of a CI job show it too.
pub struct Progress {
    what: &'static str,
    total: usize,
    started: std::time::Instant,
    terminal: bool,
    /// The last tenth reported (plain lines).
    tenth: usize,
}

impl Progress {
    pub fn new(what: &'static str, total: usize) -> Progress {
        use std::io::IsTerminal;
        Progress {
            what,
            total: total.max(1),
            started: std::time::Instant::now(),
            terminal: std::io::stderr().is_terminal(),
            tenth: 0,
        }
    }

    /// The line for `done` of the total.
    pub fn line(&self, done: usize) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        let rate = (done as f64 / secs).round() as u64;
        let percent = done * 100 / self.total;
        let filled = done * 20 / self.total;
        format!(
            "[{}{}] {}/{} {} ({percent}%), {}/s",
            "#".repeat(filled),
            " ".repeat(20 - filled.min(20)),
            thousands(done as u64),
            thousands(self.total as u64),
            self.what,
            thousands(rate)
        )
    }

    pub fn update(&mut self, done: usize) {
        if self.terminal {
            eprint!("\r{}", self.line(done));
            return;
        }
        let tenth = done * 10 / self.total;
        if tenth > self.tenth {
            self.tenth = tenth;
            eprintln!("{}", self.line(done));
        }
    }

    pub fn finish(&self) {
        if self.terminal {
            eprintln!();
        }
    }
}

/// 1234567 -> "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod progress_tests {
    use super::*;

    #[test]
    fn a_progress_line_has_a_bar_counts_and_a_rate() {
        let p = Progress {
            what: "jobs",
            total: 200_000,
            started: std::time::Instant::now() - std::time::Duration::from_secs(2),
            terminal: false,
            tenth: 0,
        };
        let line = p.line(50_000);
        assert!(
            line.starts_with("[#####               ] 50,000/200,000 jobs (25%), "),
            "{line}"
        );
        assert!(line.ends_with("/s"), "{line}");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
