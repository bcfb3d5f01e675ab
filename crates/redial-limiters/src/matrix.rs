//! Issue 54's limiter matrix as data: its cells (a limiter and a number of jobs each), the goals
//! a run of a cell is judged by, and whether two runs of a cell agree. The engine's tests run it
//! on virtual time (`redial-engine/tests/model.rs`), `redial-bench --only limiters` on the wall
//! clock, and both beside the simulator.
//!
//! The goals: every job ended and none dead; drained within 1.15x of jobs over the rate (fixed
//! windows: plus a window); refused at most 5% of the jobs when the limiter says anything, 10%
//! when it is bare. Two runs agree when their drains and refusals are within 15% of each other
//! (refusals: or 10 requests).

use crate::{Kind, Limiter, QuotaStyle, Wait};

/// One cell: a name for the table, the limiter, how many jobs go to it at once.
#[derive(Clone, Debug)]
pub struct Cell {
    pub name: String,
    pub limiter: Limiter,
    pub jobs: u64,
}

/// What one run of a cell came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// From the enqueue to the last job's end (or to when the run stopped).
    pub drain_ms: u64,
    /// Answers 429 or 503 (or 403 from a limiter refusing with it).
    pub refused: u64,
    pub dead: u64,
    /// Jobs not ended when the run stopped.
    pub left: u64,
}

/// The ways limiters speak, by the name the table gives them.
pub const STYLES: [(&str, Wait, QuotaStyle); 7] = [
    ("bare", Wait::Bare, QuotaStyle::None),
    ("Retry-After rounded up", Wait::Seconds, QuotaStyle::None),
    ("retry-after-ms", Wait::Millis, QuotaStyle::None),
    ("GitHub headers", Wait::Bare, QuotaStyle::GitHub),
    ("OpenAI headers", Wait::Millis, QuotaStyle::OpenAi),
    ("draft-6 headers", Wait::Seconds, QuotaStyle::Draft6),
    ("IETF RateLimit", Wait::Seconds, QuotaStyle::Ietf),
];

/// The kinds counted over a window or a bucket, at `rate` a second.
pub fn kinds(rate: u32) -> [(&'static str, Kind); 4] {
    [
        (
            "token bucket, burst 10",
            Kind::TokenBucket {
                count: rate,
                per_ms: 1000,
                burst: 10,
            },
        ),
        (
            "fixed windows",
            Kind::FixedWindow {
                limit: rate,
                window_ms: 1000,
            },
        ),
        (
            "sliding log",
            Kind::SlidingLog {
                limit: rate,
                window_ms: 1000,
            },
        ),
        (
            "sliding counter",
            Kind::SlidingCounter {
                limit: rate,
                window_ms: 1000,
            },
        ),
    ]
}

/// A concurrency limit that lets `rate` a second through: a tenth of the rate in flight (at
/// least one), each answered in the time that makes the rate.
pub fn concurrency(rate: u32) -> (String, Kind) {
    let limit = (rate / 10).max(1);
    let hold_ms = u64::from(limit) * 1000 / u64::from(rate.max(1));
    (
        format!("{limit} in flight x {hold_ms} ms"),
        Kind::Concurrency { limit, hold_ms },
    )
}

/// 1,000 jobs, 200 at 5 a second.
pub fn jobs_at(rate: u32) -> u64 {
    if rate <= 5 {
        200
    } else {
        1000
    }
}

fn cell(name: String, limiter: Limiter, rate: u32) -> Cell {
    Cell {
        name,
        limiter,
        jobs: jobs_at(rate),
    }
}

/// nginx `limit_req`'s shapes at `rate`: burst 10 refusing with bare 503s, and as shipped (no
/// burst, bare 503s).
fn nginx(rate: u32) -> [Cell; 2] {
    let bursting = Limiter::new(kinds(rate)[0].1).refusing_with(503);
    let shipped = Limiter::new(Kind::TokenBucket {
        count: rate,
        per_ms: 1000,
        burst: 1,
    })
    .refusing_with(503);
    [
        cell(
            format!("nginx limit_req {rate}/s burst 10, bare 503s"),
            bursting,
            rate,
        ),
        cell(
            format!("nginx limit_req {rate}/s without burst, bare 503s"),
            shipped,
            rate,
        ),
    ]
}

/// Token buckets of `rate` with bursts of 1 and of a second's worth, bare and with
/// `Retry-After` rounded up.
fn buckets(rate: u32) -> Vec<Cell> {
    let mut cells = Vec::new();
    for burst in [1, rate] {
        let kind = Kind::TokenBucket {
            count: rate,
            per_ms: 1000,
            burst,
        };
        for (style, wait, quota) in &STYLES[..2] {
            let l = Limiter::new(kind).speaking(*wait, *quota);
            let name = format!("token bucket {rate}/s burst {burst}, {style}");
            cells.push(cell(name, l, rate));
        }
    }
    cells
}

/// Each kind at 50 a second, halved from 5 s to 12 s, bare.
fn halved() -> Vec<Cell> {
    kinds(50)
        .into_iter()
        .map(|(kind_name, kind)| {
            let l = Limiter::new(kind).halved_between(5_000, 12_000);
            let name = format!("{kind_name} 50/s halved from 5 s to 12 s, bare");
            cell(name, l, 50)
        })
        .collect()
}

/// The grid on virtual time: every kind counted over a window or a bucket, in every style, at
/// 5, 50 and 500 a second; token buckets of bursts 1 and a second's worth; nginx's shapes; each
/// kind halved. (A concurrency limit is on the wall clock only: its service time needs the
/// clock to move while requests are in flight, and the virtual-time harness settles what is in
/// flight before it moves the clock.)
pub fn grid() -> Vec<Cell> {
    let mut cells = Vec::new();
    for rate in [5, 50, 500] {
        for (kind_name, kind) in kinds(rate) {
            for (style, wait, quota) in STYLES {
                let l = Limiter::new(kind).speaking(wait, quota);
                cells.push(cell(format!("{kind_name} {rate}/s, {style}"), l, rate));
            }
        }
        cells.extend(buckets(rate));
        cells.extend(nginx(rate));
    }
    cells.extend(halved());
    cells
}

/// The grid on the wall clock (about twenty minutes): every kind, the concurrency limit too, in
/// every style at 50 a second; the token bucket's and nginx's shapes at 5, 50 and 500 a second;
/// each kind halved.
pub fn wall_clock_grid() -> Vec<Cell> {
    let mut cells = Vec::new();
    let (name, kind) = concurrency(50);
    let mut all = kinds(50).map(|(n, k)| (n.to_owned(), k)).to_vec();
    all.push((format!("concurrency limit, {name}"), kind));
    for (kind_name, kind) in all {
        for (style, wait, quota) in STYLES {
            let l = Limiter::new(kind).speaking(wait, quota);
            cells.push(cell(format!("{kind_name} 50/s, {style}"), l, 50));
        }
    }
    for rate in [5, 50, 500] {
        cells.extend(
            buckets(rate)
                .into_iter()
                .filter(|c| c.name.contains("bare")),
        );
        cells.extend(nginx(rate));
    }
    cells.extend(halved());
    cells
}

/// The cell of the virtual-time grid named `name`, if there is one.
pub fn cell_named(name: &str) -> Option<Cell> {
    grid().into_iter().find(|c| c.name == name)
}

/// The ideal drain of `cell`: its jobs at the limiter's long-run rate.
pub fn ideal_ms(cell: &Cell) -> u64 {
    cell.limiter.ideal_ms(cell.jobs)
}

/// The goals `run` of `cell` misses, in words; empty when it meets them all.
pub fn misses(cell: &Cell, run: &Outcome) -> Vec<String> {
    let l = &cell.limiter;
    let mut out = Vec::new();
    let window = match l.kind {
        Kind::FixedWindow { window_ms, .. } => window_ms,
        _ => 0,
    };
    let most = (ideal_ms(cell) as f64 * 1.15) as u64 + window;
    if run.drain_ms > most.max(1000) {
        out.push(format!(
            "drain {:.1} s over {:.1} s",
            run.drain_ms as f64 / 1000.0,
            most as f64 / 1000.0
        ));
    }
    let says = l.speaks.wait != Wait::Bare || l.speaks.quota != QuotaStyle::None;
    let share = if says { 0.05 } else { 0.10 };
    let allowed = share * cell.jobs as f64;
    if run.refused as f64 > allowed {
        out.push(format!("{} refused over {allowed:.0}", run.refused));
    }
    if run.dead > 0 {
        out.push(format!("{} dead", run.dead));
    }
    if run.left > 0 {
        out.push(format!("{} not ended", run.left));
    }
    out
}

/// Whether two runs of a cell (the model's and the engine's) agree: drain and refused within
/// 15% of each other, or 10 requests apart (issue 54's item 3).
pub fn agree(a: &Outcome, b: &Outcome) -> bool {
    let near = |a: f64, b: f64, slack: f64| (a - b).abs() <= slack.max(0.15 * a.max(b));
    near(a.drain_ms as f64, b.drain_ms as f64, 0.0)
        && near(a.refused as f64, b.refused as f64, 10.0)
}
