//! How real APIs' rate limiters decide and what they answer, as one pure model: `redial
//! simulate` runs it on virtual time, and the test receiver answers with it over real HTTP, so
//! that the model and the engine meet the same limiter (issue 54's matrix).
//!
//! Owns: the limiter kinds (a token bucket or leaky bucket in GCRA form, fixed windows, a sliding
//! log, a sliding window counter, a limit on requests in flight), a rate that halves for a while, and the ways limiters speak
//! (`Retry-After` in whole seconds, truncated or to the millisecond, `retry-after-ms`, and quota
//! headers in the styles of GitHub, OpenAI, the IETF drafts and the older `x-ratelimit-*` family;
//! `../shared/REFERENCE.md` has the facts). Does not own: time (every call takes the instant),
//! outages and failures (the simulator and the receiver script those), or what Redial does with
//! the answers.
//!
//! Pure and total: no I/O, no clock, no randomness; a limit of zero is taken as one.
//!
//! [`matrix`] holds the matrix of limiters the engine, the benchmark and the simulator are
//! run against, and the goals each run is judged by.

pub mod matrix;

/// A rate limiter as an API runs it: what it counts, how it speaks, and what it refuses with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limiter {
    pub kind: Kind,
    pub speaks: Speaks,
    /// The status a refusal answers: 429, 503 (nginx `limit_req` unless told otherwise) or 403
    /// (GitHub's primary limit).
    pub status: u16,
    /// The rate is halved from the first instant until the second (ms since the start): a
    /// limiter whose rate halves and then doubles.
    pub halved: Option<(u64, u64)>,
}

/// What a limiter counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `count` requests every `per_ms`, with room for `burst` at once (GCRA: a token bucket,
    /// or nginx `limit_req` with `nodelay`).
    TokenBucket { count: u32, per_ms: u64, burst: u32 },
    /// At most `limit` a window; windows start at the limiter's start.
    FixedWindow { limit: u32, window_ms: u64 },
    /// A moving window (a sliding log): a request goes when fewer than `limit` went in the
    /// `window_ms` before it.
    SlidingLog { limit: u32, window_ms: u64 },
    /// A sliding window counter (Cloudflare's, and Redis recipes'): the last window's count,
    /// weighted by how much of it the moving window still covers, plus this window's.
    SlidingCounter { limit: u32, window_ms: u64 },
    /// At most `limit` requests in flight (Zendesk's, HubSpot's and many partner APIs'
    /// concurrency limits): the service takes `hold_ms` to answer a request it lets through,
    /// and refuses one that arrives while `limit` are still being answered.
    Concurrency { limit: u32, hold_ms: u64 },
}

/// What the limiter's answers say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Speaks {
    /// What a refusal says about when to come back.
    pub wait: Wait,
    /// What every answer says about the quota.
    pub quota: QuotaStyle,
}

/// How a refusal says when to come back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Wait {
    /// Nothing.
    #[default]
    Bare,
    /// `Retry-After` in whole seconds, rounded up, at least 1 (most gateways and APIs).
    Seconds,
    /// `Retry-After` in whole seconds, truncated: the epoch second the quota frees in less
    /// the current one (flask-limiter).
    Truncated,
    /// `Retry-After` in seconds to the millisecond (`0.250`).
    Decimal,
    /// `retry-after-ms` to the millisecond, and `Retry-After` in whole seconds rounded up
    /// (OpenAI).
    Millis,
}

/// How every answer reports the quota.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QuotaStyle {
    #[default]
    None,
    /// `x-ratelimit-limit`, `-remaining`, `-reset` in seconds from now, rounded up.
    XRateLimitSeconds,
    /// GitHub's (and flask-limiter's): `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` as
    /// epoch seconds, rounded up.
    GitHub,
    /// OpenAI's: `x-ratelimit-limit-requests`, `-remaining-requests`, `-reset-requests` as a Go
    /// duration (`20ms`, `1.5s`, `6m0s`).
    OpenAi,
    /// The IETF draft 6 fields (express-rate-limit): `ratelimit-limit`, `-remaining`, `-reset`
    /// in seconds, rounded up.
    Draft6,
    /// The IETF structured fields: `RateLimit: "default";r=R;t=T` and `RateLimit-Policy:
    /// "default";q=Q;w=W`, seconds rounded up.
    Ietf,
}

/// What the limiter answered one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The request went through (the API then answers it as it would).
    pub ok: bool,
    /// 200 when it went through, the limiter's refusal status when not.
    pub status: u16,
    /// The headers it adds, names lowercase.
    pub headers: Vec<(String, String)>,
    /// How long the service takes to answer a request it let through (a concurrency limit's
    /// service time; 0 for the others, whose answers take what the network takes).
    pub hold_ms: u64,
}

/// What a limiter remembers between requests.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// A token bucket's theoretical arrival time (GCRA), in µs since the start.
    tat_us: u64,
    /// The fixed or counter window this is, and the requests it counted; a counter's last
    /// window's count.
    window: u64,
    used: u32,
    last_used: u32,
    /// A sliding log's accepted requests (ms since the start), oldest first; for a
    /// concurrency limit, when each request in flight is answered, soonest first.
    log: std::collections::VecDeque<u64>,
}

impl Limiter {
    /// A limiter of `kind` refusing with a bare 429.
    pub fn new(kind: Kind) -> Limiter {
        Limiter {
            kind,
            speaks: Speaks::default(),
            status: 429,
            halved: None,
        }
    }

    pub fn speaking(mut self, wait: Wait, quota: QuotaStyle) -> Limiter {
        self.speaks = Speaks { wait, quota };
        self
    }

    pub fn refusing_with(mut self, status: u16) -> Limiter {
        self.status = status;
        self
    }

    pub fn halved_between(mut self, from_ms: u64, until_ms: u64) -> Limiter {
        self.halved = Some((from_ms, until_ms));
        self
    }

    /// Requests a second it lets through in the long run, at full rate. A sliding counter
    /// sent to evenly lets one fewer a window through: with as many in the last window as in
    /// this one, its estimate is already that many when the next would go.
    pub fn per_second(&self) -> f64 {
        match self.kind {
            Kind::TokenBucket { count, per_ms, .. } => {
                f64::from(count.max(1)) * 1000.0 / per_ms.max(1) as f64
            }
            Kind::FixedWindow { limit, window_ms } | Kind::SlidingLog { limit, window_ms } => {
                f64::from(limit.max(1)) * 1000.0 / window_ms.max(1) as f64
            }
            Kind::SlidingCounter { limit, window_ms } => {
                f64::from(limit.saturating_sub(1).max(1)) * 1000.0 / window_ms.max(1) as f64
            }
            Kind::Concurrency { limit, hold_ms } => {
                f64::from(limit.max(1)) * 1000.0 / hold_ms.max(1) as f64
            }
        }
    }

    /// Jobs over the rate, in ms: what `jobs` requests take at the limiter's long-run rate, its
    /// halved stretch included (issue 54's ideal; a burst at the start is not counted).
    pub fn ideal_ms(&self, jobs: u64) -> u64 {
        // Each request's share of time, in µs, at full rate.
        let share_us = 1e6 / self.per_second();
        let mut t_us = 0.0f64;
        for _ in 0..jobs {
            let ms = (t_us / 1000.0) as u64;
            t_us += if self.is_halved(ms) {
                share_us * 2.0
            } else {
                share_us
            };
        }
        (t_us / 1000.0).round() as u64
    }

    fn is_halved(&self, at_ms: u64) -> bool {
        self.halved
            .is_some_and(|(from, until)| from <= at_ms && at_ms < until)
    }

    /// The limit a window has at `at_ms`, or a bucket's count.
    fn scaled(&self, n: u32, at_ms: u64) -> u32 {
        if self.is_halved(at_ms) {
            (n / 2).max(1)
        } else {
            n.max(1)
        }
    }
}

/// What a limiter made of one request: whether it goes, the quota (how many it allows, how
/// many remain after this one), in how many ms the quota next frees (a refused request: when
/// it could go), in how many ms it resets (what quota headers call the reset: a bucket's full
/// again, a window's end, a log's oldest request's expiry, the soonest answer of those in
/// flight), when it is back to its initial state, and how long an accepted request is held (a
/// concurrency limit's service time).
struct Counted {
    ok: bool,
    limit: u32,
    remaining: u32,
    frees_in_ms: u64,
    resets_in_ms: u64,
    empty_in_ms: u64,
    hold_ms: u64,
}

/// The quota headers the limiter speaks, for any answer.
fn quota_headers(l: &Limiter, c: &Counted, at_ms: u64, epoch_ms: i64) -> Vec<(String, String)> {
    let (limit, remaining) = (c.limit, c.remaining);
    let (resets_in_ms, empty_in_ms) = (c.resets_in_ms, c.empty_in_ms);
    let mut headers: Vec<(String, String)> = Vec::new();
    let reset_secs_up = resets_in_ms.div_ceil(1000).max(1);
    match l.speaks.quota {
        QuotaStyle::None => {}
        QuotaStyle::XRateLimitSeconds => {
            headers.push(("x-ratelimit-limit".into(), limit.to_string()));
            headers.push(("x-ratelimit-remaining".into(), remaining.to_string()));
            headers.push(("x-ratelimit-reset".into(), reset_secs_up.to_string()));
        }
        QuotaStyle::GitHub => {
            let frees = epoch_ms + i64::try_from(at_ms + resets_in_ms).unwrap_or(i64::MAX);
            headers.push(("x-ratelimit-limit".into(), limit.to_string()));
            headers.push(("x-ratelimit-remaining".into(), remaining.to_string()));
            let used = limit.saturating_sub(remaining);
            headers.push(("x-ratelimit-used".into(), used.to_string()));
            let reset = frees.div_euclid(1000) + 1;
            headers.push(("x-ratelimit-reset".into(), reset.to_string()));
        }
        QuotaStyle::OpenAi => {
            headers.push(("x-ratelimit-limit-requests".into(), limit.to_string()));
            let left = remaining.to_string();
            headers.push(("x-ratelimit-remaining-requests".into(), left));
            // "The time until the rate limit resets to its initial state" (OpenAI's
            // documentation): every request counted gone, not the oldest.
            let reset = go_duration(empty_in_ms);
            headers.push(("x-ratelimit-reset-requests".into(), reset));
        }
        QuotaStyle::Draft6 => {
            headers.push(("ratelimit-limit".into(), limit.to_string()));
            headers.push(("ratelimit-remaining".into(), remaining.to_string()));
            headers.push(("ratelimit-reset".into(), reset_secs_up.to_string()));
        }
        QuotaStyle::Ietf => {
            let window_s = match l.kind {
                Kind::TokenBucket { per_ms, .. } => per_ms,
                Kind::FixedWindow { window_ms, .. }
                | Kind::SlidingLog { window_ms, .. }
                | Kind::SlidingCounter { window_ms, .. } => window_ms,
                Kind::Concurrency { .. } => 1000,
            }
            .div_ceil(1000)
            .max(1);
            let policy = format!("\"default\";q={limit};w={window_s}");
            headers.push(("ratelimit-policy".into(), policy));
            let now = format!("\"default\";r={remaining};t={reset_secs_up}");
            headers.push(("ratelimit".into(), now));
        }
    }
    headers
}

/// The wait headers of a refusal, as the limiter speaks them.
fn wait_headers(
    l: &Limiter,
    c: &Counted,
    at_ms: u64,
    epoch_ms: i64,
    headers: &mut Vec<(String, String)>,
) {
    let frees_in_ms = c.frees_in_ms;
    let secs_up = frees_in_ms.div_ceil(1000).max(1);
    match l.speaks.wait {
        Wait::Bare => {}
        Wait::Seconds => headers.push(("retry-after".into(), secs_up.to_string())),
        Wait::Truncated => {
            // The epoch second the quota frees in, less this one (flask-limiter's
            // reset header less the time, truncated).
            let now = epoch_ms + i64::try_from(at_ms).unwrap_or(i64::MAX);
            let frees = now + i64::try_from(frees_in_ms).unwrap_or(i64::MAX);
            let secs = (frees.div_euclid(1000) - now.div_euclid(1000)).max(0);
            headers.push(("retry-after".into(), secs.to_string()));
        }
        Wait::Decimal => {
            let secs = format!("{:.3}", frees_in_ms.max(1) as f64 / 1000.0);
            headers.push(("retry-after".into(), secs));
        }
        Wait::Millis => {
            let ms = frees_in_ms.max(1).to_string();
            headers.push(("retry-after-ms".into(), ms));
            headers.push(("retry-after".into(), secs_up.to_string()));
        }
    }
}

impl State {
    /// Decides the request that arrives `at_ms` after the limiter started; `epoch_ms` is the
    /// Unix time, in ms, at its start (for resets given as epoch seconds).
    pub fn take(&mut self, l: &Limiter, at_ms: u64, epoch_ms: i64) -> Verdict {
        let c = match l.kind {
            Kind::TokenBucket {
                count,
                per_ms,
                burst,
            } => self.token_bucket(l, at_ms, count, per_ms, burst),
            Kind::FixedWindow { limit, window_ms } => self.fixed_window(l, at_ms, limit, window_ms),
            Kind::SlidingLog { limit, window_ms } => self.sliding_log(l, at_ms, limit, window_ms),
            Kind::SlidingCounter { limit, window_ms } => {
                self.sliding_counter(l, at_ms, limit, window_ms)
            }
            Kind::Concurrency { limit, hold_ms } => self.concurrency(l, at_ms, limit, hold_ms),
        };
        let mut headers = quota_headers(l, &c, at_ms, epoch_ms);
        if !c.ok {
            wait_headers(l, &c, at_ms, epoch_ms, &mut headers);
        }
        Verdict {
            ok: c.ok,
            status: if c.ok { 200 } else { l.status },
            headers,
            hold_ms: c.hold_ms,
        }
    }

    fn token_bucket(
        &mut self,
        l: &Limiter,
        at_ms: u64,
        count: u32,
        per_ms: u64,
        burst: u32,
    ) -> Counted {
        let count = l.scaled(count, at_ms);
        // One request's share of the period, in µs.
        let emission = (per_ms.max(1) * 1000 / u64::from(count)).max(1);
        let tolerance = emission * u64::from(burst.max(1) - 1);
        let now_us = at_ms * 1000;
        let tat = self.tat_us.max(now_us);
        let ok = tat <= now_us + tolerance;
        if ok {
            self.tat_us = tat + emission;
        }
        let tat = self.tat_us.max(now_us);
        // Room left at once: how many more emissions fit under the tolerance.
        let room = (now_us + tolerance + emission).saturating_sub(tat) / emission;
        // When the next request could go.
        let next_us = (tat.saturating_sub(tolerance)).max(now_us);
        let wait = (next_us - now_us).div_ceil(1000);
        let full = (tat - now_us).div_ceil(1000);
        let room = room.min(u64::from(burst.max(1))) as u32;
        Counted {
            ok,
            limit: burst.max(1),
            remaining: room,
            frees_in_ms: wait,
            resets_in_ms: full,
            empty_in_ms: full,
            hold_ms: 0,
        }
    }

    fn fixed_window(&mut self, l: &Limiter, at_ms: u64, limit: u32, window_ms: u64) -> Counted {
        let w = window_ms.max(1);
        let index = at_ms / w;
        if index != self.window {
            self.window = index;
            self.used = 0;
        }
        let n = l.scaled(limit, index * w);
        let ok = self.used < n;
        if ok {
            self.used += 1;
        }
        let ends_in = ((index + 1) * w - at_ms).max(1);
        Counted {
            ok,
            limit: n,
            remaining: n - self.used.min(n),
            frees_in_ms: ends_in,
            resets_in_ms: ends_in,
            empty_in_ms: ends_in,
            hold_ms: 0,
        }
    }

    fn sliding_log(&mut self, l: &Limiter, at_ms: u64, limit: u32, window_ms: u64) -> Counted {
        let w = window_ms.max(1);
        while self.log.front().is_some_and(|sent| sent + w <= at_ms) {
            self.log.pop_front();
        }
        let n = l.scaled(limit, at_ms) as usize;
        let ok = self.log.len() < n;
        if ok {
            self.log.push_back(at_ms);
        }
        // When the oldest request counted expires.
        let frees = self.log.front().map_or(at_ms, |oldest| oldest + w);
        let left = n.saturating_sub(self.log.len());
        let frees_in = frees.saturating_sub(at_ms).max(1);
        // Back to its initial state when the newest request counted expires.
        let empty_in = self
            .log
            .back()
            .map_or(1, |newest| (newest + w).saturating_sub(at_ms).max(1));
        Counted {
            ok,
            limit: n as u32,
            remaining: left as u32,
            frees_in_ms: frees_in,
            resets_in_ms: frees_in,
            empty_in_ms: empty_in,
            hold_ms: 0,
        }
    }

    fn sliding_counter(&mut self, l: &Limiter, at_ms: u64, limit: u32, window_ms: u64) -> Counted {
        let w = window_ms.max(1);
        let index = at_ms / w;
        if index != self.window {
            self.last_used = if index == self.window + 1 {
                self.used
            } else {
                0
            };
            self.used = 0;
            self.window = index;
        }
        let n = l.scaled(limit, at_ms);
        let start = index * w;
        let into = at_ms - start;
        // The estimate, in thousandths of a request, to stay in integers.
        let estimate = |last: u32, cur: u32, into: u64| {
            u64::from(last) * (w - into.min(w)) * 1000 / w + u64::from(cur) * 1000
        };
        let ok = estimate(self.last_used, self.used, into) + 1000 <= u64::from(n) * 1000;
        if ok {
            self.used += 1;
        }
        let now_est = estimate(self.last_used, self.used, into);
        let left = (u64::from(n) * 1000).saturating_sub(now_est) / 1000;
        let frees_in = self.counter_frees_in(n, w, into);
        let ends_in = (w - into).max(1);
        // Back to its initial state when nothing counted weighs: this window's requests
        // weigh on the next one until it ends.
        let empty_in = if self.used > 0 { 2 * w - into } else { ends_in };
        Counted {
            ok,
            limit: n,
            remaining: left as u32,
            frees_in_ms: frees_in,
            resets_in_ms: ends_in,
            empty_in_ms: empty_in,
            hold_ms: 0,
        }
    }

    fn concurrency(&mut self, l: &Limiter, at_ms: u64, limit: u32, hold_ms: u64) -> Counted {
        // Requests answered by now are no longer in flight.
        while self.log.front().is_some_and(|ends| *ends <= at_ms) {
            self.log.pop_front();
        }
        let n = l.scaled(limit, at_ms) as usize;
        let ok = self.log.len() < n;
        let mut hold = 0;
        if ok {
            hold = hold_ms.max(1);
            self.log.push_back(at_ms + hold);
        }
        let frees_in = self
            .log
            .front()
            .map_or(1, |ends| ends.saturating_sub(at_ms).max(1));
        let left = n.saturating_sub(self.log.len());
        let empty_in = self
            .log
            .back()
            .map_or(1, |last| last.saturating_sub(at_ms).max(1));
        Counted {
            ok,
            limit: n as u32,
            remaining: left as u32,
            frees_in_ms: frees_in,
            resets_in_ms: frees_in,
            empty_in_ms: empty_in,
            hold_ms: hold,
        }
    }

    /// In how many ms a sliding window counter lets one more request through, `into` ms into
    /// its window of `w`, if no other comes.
    fn counter_frees_in(&self, n: u32, w: u64, into: u64) -> u64 {
        let n = u64::from(n);
        let (last, cur) = (u64::from(self.last_used), u64::from(self.used));
        // This window: last * (w - t) / w + cur + 1 <= n.
        if cur < n {
            if last == 0 {
                return 1;
            }
            // (w - t) <= (n - cur - 1) * w / last
            let t = w.saturating_sub((n - cur - 1) * w / last);
            if t <= w {
                return t.saturating_sub(into).max(1);
            }
        }
        // The next window: cur * (w - t) / w + 1 <= n.
        let t = (n.saturating_sub(1) * w)
            .checked_div(cur)
            .map_or(0, |free| w.saturating_sub(free));
        (w - into.min(w) + t).max(1)
    }
}

/// `ms` as Go prints a duration: `20ms`, `1s`, `1.5s`, `6m0s`.
fn go_duration(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (mins, rest) = (ms / 60_000, ms % 60_000);
    let secs = if rest % 1000 == 0 {
        format!("{}s", rest / 1000)
    } else {
        let s = format!("{:.3}", rest as f64 / 1000.0);
        format!("{}s", s.trim_end_matches('0'))
    };
    if mins > 0 {
        format!("{mins}m{secs}")
    } else {
        secs
    }
}

#[cfg(test)]
mod tests;
