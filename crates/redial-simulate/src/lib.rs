//! `redial simulate`'s core. One simulation runs a workload's jobs through the real policy core
//! and endpoint protection (`redial_policy`: `decide`, `EndpointState::admit`,
//! `EndpointState::finish`, `Finished::apply`, the same calls the engine makes for each attempt)
//! on virtual time, against model endpoints that answer as the workload says. The binary reads
//! workloads from TOML and prints the figures; the engine's tests hold the figures against the
//! engine itself, run on a manual clock against receivers that behave as the model does.
//!
//! Time moves from event to event: an answer arrives, a job falls due, a hold ends, or (as the
//! engine's queues poll) a second passes while due jobs are held. At each such moment the answers
//! are recorded first, then each queue leases as the engine does: due jobs in order of due time
//! and enqueue order, each asking its endpoint, an endpoint that holds skipped for the rest of the
//! pass (only its retries, or only its first attempts, for the holds that say so), up to the
//! queue's concurrency.
//!
//! What it leaves out: groups, priorities, ordering keys, several nodes, the engine's lease-ahead
//! and the store's own time. The randomness of the workload (latencies, which jobs fail) is drawn
//! per job and attempt from the seed, so two policies compared meet the same workload; the
//! policy's jitter has a stream of its own.
//!
//! Over 600 lines: the model's types, what model endpoints answer, and the simulation's steps: one
//! model, read in one place.

use redial_policy::endpoint::{
    conclude, Admission, Concluded, EndpointConfig, EndpointState, Permit,
};
use redial_policy::Method;
use redial_policy::{
    Action, DeadCategory, JobCounters, Outcome, Policy, Response, SplitMix64, Timestamp,
    TransportError,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::time::Duration;

/// A workload: what `redial simulate` read and checked from its file.
#[derive(Clone, Debug)]
pub struct Workload {
    pub seed: Option<u64>,
    pub endpoints: Vec<EndpointModel>,
}

/// One endpoint's jobs and answers.
#[derive(Clone, Debug)]
pub struct EndpointModel {
    /// The endpoint's name, as `[endpoints."<name>"]` in a configuration names it.
    pub name: String,
    pub queue: String,
    pub jobs: u64,
    pub arrival: Arrival,
    pub method: Method,
    pub idempotency_key: bool,
    pub deadline: Option<Duration>,
    /// Uniform between the two.
    pub latency: (Duration, Duration),
    /// How long an attempt that times out takes.
    pub timeout: Duration,
    pub limit: Option<Limit>,
    pub outages: Vec<Outage>,
    pub failures: Vec<Failure>,
    /// What happened to the endpoint, read from a store: its jobs and its answers are replayed
    /// instead of drawn (`jobs` is then the number of its jobs; `arrival`, `method`,
    /// `idempotency_key`, `deadline`, `latency`, `limit`, `outages` and `failures` are unused).
    pub history: Option<History>,
}

/// An endpoint's past: its jobs as they arrived, and what it answered when.
///
/// A request is answered as the endpoint answered at about that moment: by one of the answers
/// recorded within half a second of it (drawn from the seed), else by the nearest one. So an
/// outage or a run of 429s comes back where it was, whatever the policy sends; how the endpoint
/// would have answered more or fewer requests is not known. A job that met an answer of its
/// own (a 4xx other than 408 or 429: its payload, not the endpoint) meets it on every attempt.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// By arrival.
    pub jobs: Vec<PastJob>,
    /// By time.
    pub answers: Vec<PastAnswer>,
}

#[derive(Clone, Debug)]
pub struct PastJob {
    /// From the start.
    pub at: Duration,
    /// From its arrival.
    pub deadline: Option<Duration>,
    pub method: Method,
    pub idempotency_key: bool,
    /// An answer of its own, met on every attempt.
    pub fails_with: Option<Answer>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PastAnswer {
    /// From the start.
    pub at: Duration,
    /// None: a success.
    pub answer: Option<Answer>,
    /// How long the attempt took.
    pub took: Duration,
}

impl History {
    /// The answer to a request `t` after the start; `draw` in [0, 1) picks among those recorded
    /// within half a second. None when nothing was recorded (a success then).
    fn answer_at(&self, t: Duration, draw: f64) -> Option<PastAnswer> {
        let near = Duration::from_millis(500);
        let a = &self.answers;
        let lo = a.partition_point(|x| x.at + near < t);
        let hi = a.partition_point(|x| x.at <= t + near);
        if lo < hi {
            let k = lo + ((draw * (hi - lo) as f64) as usize).min(hi - lo - 1);
            return Some(a[k]);
        }
        // None that near: the nearest, before or after.
        let after = a.get(lo);
        let before = lo.checked_sub(1).and_then(|k| a.get(k));
        match (before, after) {
            (Some(b), Some(n)) => Some(if t - b.at <= n.at - t { *b } else { *n }),
            (b, n) => b.or(n).copied(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrival {
    AtOnce,
    /// One job every interval.
    Rate(Duration),
    Bursts {
        size: u64,
        every: Duration,
    },
}

/// The endpoint's own rate limit: the shared model of real limiters, which the test receiver
/// answers with too.
pub use redial_limiters::{Kind as LimitKind, Limiter as Limit, QuotaStyle, Wait};

/// A time, from the simulation's start, when the endpoint is down.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outage {
    pub from: Duration,
    pub until: Duration,
    pub answer: Answer,
}

/// What a failing endpoint does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answer {
    Status(u16),
    /// A 503 that says when to come back.
    Unavailable(Duration),
    /// A 429, saying when to come back or not.
    TooMany(Option<Duration>),
    /// Any failure without a response, taking the attempt's time (read from a store).
    Transport(TransportError),
    ConnectionRefused,
    ConnectionReset,
    Timeout,
}

/// A share of the jobs that fail with `answer`: on their first attempt only (`once`), or on
/// every attempt (`always`). With `commit`, the endpoint did the work before the failure (an
/// answer lost to a timeout or a reset, a 500 after the write): a repeat that is not safe (no
/// idempotency key, a method that is not idempotent) does it again.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Failure {
    pub answer: Answer,
    pub ratio: f64,
    pub always: bool,
    pub commit: bool,
}

/// Where virtual time starts (a realistic instant: reset headers are read by their size).
pub const T0: Timestamp = Timestamp::from_unix_millis(1_795_996_800_000);

/// How long the engine's queues wait, at most, before they look again.
const POLL: Duration = Duration::from_secs(1);

/// Virtual time after which a simulation stops, drained or not.
const HORIZON: Duration = Duration::from_secs(30 * 24 * 3600);

/// What a simulation takes besides the workload: each endpoint's limits and policy (in the
/// workload's order), each queue's concurrency.
#[derive(Clone, Debug)]
pub struct Setup {
    pub endpoints: Vec<(EndpointConfig, Policy)>,
    pub concurrency: BTreeMap<String, usize>,
}

/// What one endpoint's jobs did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub jobs: u64,
    pub requests: u64,
    /// Answers 429 or 503.
    pub refused: u64,
    pub completed: u64,
    pub dead: BTreeMap<&'static str, u64>,
    /// Jobs still waiting when the simulation stopped (at its horizon).
    pub left: u64,
    /// Jobs whose work the endpoint did more than once: a repeat that was not safe after a
    /// failure that came after the work (`Failure::commit`).
    pub duplicates: u64,
    /// From the start to the last job's end.
    pub drain: Option<Duration>,
    /// Enqueue to completion, of each completed job, in ms, sorted.
    pub completion_ms: Vec<u64>,
    /// Requests sent in each second from the start.
    pub per_second: Vec<u32>,
    /// Jobs not yet finished at the end of each second from the start.
    pub backlog: Vec<u64>,
}

struct Job {
    ep: usize,
    seq: u64,
    enqueued_at: Timestamp,
    counters: JobCounters,
    /// Its failure: the answer, on every attempt, after the work was done.
    failure: Option<(Answer, bool, bool)>,
    attempts: u32,
    /// Times the endpoint did its work (a success, or a failure after the work): more than one
    /// is a duplicate. A repeat that is safe (an idempotency key, an idempotent method) is
    /// answered from the first.
    effects: u32,
    /// When its current retry was scheduled (for an outage's end: retries scheduled since the
    /// outage began are due at once).
    scheduled_at: Timestamp,
    /// Completed or dead (its entries in the due heaps and the deadlines are dropped when met).
    ended: bool,
    /// An attempt of it is out.
    flying: bool,
}

struct Flight {
    job: usize,
    permit: Permit,
    outcome: Outcome,
}

/// A model endpoint's own limiter.
#[derive(Default)]
struct Server(redial_limiters::State);

/// Due jobs by (run time, enqueue order).
type Due = BinaryHeap<Reverse<(Timestamp, u64, usize)>>;

struct Endpoint<'a> {
    model: &'a EndpointModel,
    cfg: &'a EndpointConfig,
    policy: &'a Policy,
    queue: usize,
    state: EndpointState,
    in_flight: u32,
    firsts: Due,
    retries: Due,
    server: Server,
    tally: Tally,
}

fn mix(seed: u64, a: u64, b: u64) -> u64 {
    SplitMix64::new(
        seed ^ a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.wrapping_mul(0xD1B5_4A32_D192_ED03),
    )
    .next_u64()
}

fn unit(x: u64) -> f64 {
    (x >> 11) as f64 / (1u64 << 53) as f64
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn since_start(now: Timestamp) -> Duration {
    now.saturating_since(T0)
}

impl Server {
    /// Whether the limiter lets a request through at `now`, the headers it answers with, and
    /// how long the service holds a request it let through (a concurrency limit's).
    fn take(
        &mut self,
        model: &EndpointModel,
        now: Timestamp,
    ) -> (bool, Vec<(String, String)>, Duration) {
        let Some(limit) = model.limit else {
            return (true, Vec::new(), Duration::ZERO);
        };
        let at_ms = u64::try_from(since_start(now).as_millis()).unwrap_or(u64::MAX);
        let v = self.0.take(&limit, at_ms, T0.as_unix_millis());
        (v.ok, v.headers, Duration::from_millis(v.hold_ms))
    }
}

/// Ends `job` at `now`: completed (`dead` none), or dead in `dead`'s category. `open` counts the
/// jobs not yet ended, `left` those of its endpoint.
fn finish_job(
    job: &mut Job,
    tally: &mut Tally,
    dead: Option<DeadCategory>,
    now: Timestamp,
    open: &mut u64,
    left: &mut u64,
) {
    job.ended = true;
    match dead {
        None => {
            tally.completed += 1;
            let took = now.saturating_since(job.enqueued_at);
            tally
                .completion_ms
                .push(u64::try_from(ms(took)).unwrap_or(0));
        }
        Some(category) => *tally.dead.entry(category.as_str()).or_default() += 1,
    }
    *open -= 1;
    *left -= 1;
    tally.drain = Some(since_start(now));
}

/// How many of the endpoint's jobs have arrived `t` after the start.
fn arrived_by(model: &EndpointModel, t: Duration) -> u64 {
    if let Some(h) = &model.history {
        return h.jobs.partition_point(|j| j.at <= t) as u64;
    }
    let arrived = match model.arrival {
        Arrival::AtOnce => model.jobs,
        Arrival::Rate(every) => (t.as_nanos() / every.as_nanos().max(1)) as u64 + 1,
        Arrival::Bursts { size, every } => {
            ((t.as_nanos() / every.as_nanos().max(1)) as u64 + 1).saturating_mul(size)
        }
    };
    arrived.min(model.jobs)
}

/// What the model answers, and how long the attempt takes.
fn answer_of(answer: Answer, model: &EndpointModel, latency: Duration) -> (Outcome, Duration) {
    match answer {
        Answer::Status(code) => (Outcome::Response(Response::new(code)), latency),
        Answer::Unavailable(wait) => (
            Outcome::Response(
                Response::new(503).header("retry-after", &wait.as_secs().max(1).to_string()),
            ),
            latency,
        ),
        Answer::TooMany(wait) => {
            let mut r = Response::new(429);
            if let Some(w) = wait {
                r = r.header("retry-after", &format!("{:.3}", w.as_secs_f64()));
            }
            (Outcome::Response(r), latency)
        }
        Answer::Transport(e) => (Outcome::Transport(e), latency),
        Answer::ConnectionRefused => (
            Outcome::Transport(TransportError::ConnectionRefused),
            Duration::from_millis(1),
        ),
        Answer::ConnectionReset => (Outcome::Transport(TransportError::ConnectionReset), latency),
        Answer::Timeout => (Outcome::Transport(TransportError::Timeout), model.timeout),
    }
}

/// Runs the workload under `setup`, with `seed`: from event to event (answers due, deadlines
/// passed, then each queue's lease pass) until every job ended or the horizon.
pub fn simulate(workload: &Workload, setup: &Setup, seed: u64) -> Vec<Tally> {
    let mut sim = Sim::new(workload, setup, seed);
    let end = T0.saturating_add(HORIZON);
    loop {
        sim.take_answers();
        sim.end_expired();
        let mut wake: Option<Timestamp> = None;
        if let Some(Reverse((deadline, _))) = sim.deadlines.peek() {
            soonest(
                sim.now,
                deadline.saturating_add(Duration::from_millis(1)),
                &mut wake,
            );
        }
        for q in 0..sim.slots.len() {
            sim.lease(q, &mut wake);
        }
        let next_answer = sim.answers.peek().map(|Reverse((t, _, _))| *t);
        let next = match (next_answer, wake) {
            (Some(a), Some(w)) => Some(a.min(w)),
            (a, w) => a.or(w),
        };
        let Some(next) = next.filter(|t| *t <= end) else {
            break;
        };
        sim.count_backlog(next);
        sim.now = next;
        if sim.open == 0 && sim.answers.is_empty() {
            break;
        }
    }
    sim.tallies()
}

/// `wake` becomes `t` (at least a millisecond after `now`) when that is sooner.
fn soonest(now: Timestamp, t: Timestamp, wake: &mut Option<Timestamp>) {
    let t = t.max(now.saturating_add(Duration::from_millis(1)));
    *wake = Some(wake.map_or(t, |w| w.min(t)));
}

/// One simulation's state: the jobs, the endpoints and their queues, the attempts out.
struct Sim<'a> {
    seed: u64,
    now: Timestamp,
    /// Each queue's slots, and how many are taken.
    slots: Vec<usize>,
    busy: Vec<usize>,
    jobs: Vec<Job>,
    eps: Vec<Endpoint<'a>>,
    jitter: SplitMix64,
    /// The attempts out, by slot (`free` the slots to reuse), and when each is answered.
    flights: Vec<Option<Flight>>,
    free: Vec<usize>,
    answers: BinaryHeap<Reverse<(Timestamp, u64, usize)>>,
    sent: u64,
    /// Jobs not yet ended, in all and per endpoint.
    open: u64,
    open_per_ep: Vec<u64>,
    /// Jobs with a deadline, by deadline: one that passes while its job waits ends it, as the
    /// engine's maintenance does.
    deadlines: BinaryHeap<Reverse<(Timestamp, usize)>>,
}

impl<'a> Sim<'a> {
    fn new(workload: &'a Workload, setup: &'a Setup, seed: u64) -> Sim<'a> {
        let queue_names: Vec<&str> = {
            let mut q: Vec<&str> = workload
                .endpoints
                .iter()
                .map(|e| e.queue.as_str())
                .collect();
            q.sort_unstable();
            q.dedup();
            q
        };
        let slots: Vec<usize> = queue_names
            .iter()
            .map(|q| setup.concurrency.get(*q).copied().unwrap_or(32).max(1))
            .collect();
        let mut jobs: Vec<Job> = Vec::new();
        let mut eps: Vec<Endpoint> = Vec::with_capacity(workload.endpoints.len());
        for (i, (model, (cfg, policy))) in
            workload.endpoints.iter().zip(&setup.endpoints).enumerate()
        {
            let mut firsts = Due::new();
            for k in 0..model.jobs {
                let seq = jobs.len() as u64;
                jobs.push(arrival(model, i, k, seq, seed));
                firsts.push(Reverse((
                    jobs[jobs.len() - 1].enqueued_at,
                    seq,
                    jobs.len() - 1,
                )));
            }
            let queue = queue_names
                .iter()
                .position(|q| *q == model.queue)
                .unwrap_or(0);
            eps.push(Endpoint {
                model,
                cfg,
                policy,
                queue,
                state: EndpointState::default(),
                in_flight: 0,
                firsts,
                retries: Due::new(),
                server: Server::default(),
                tally: Tally {
                    jobs: model.jobs,
                    ..Tally::default()
                },
            });
        }
        let deadlines = jobs
            .iter()
            .enumerate()
            .filter_map(|(k, j)| Some(Reverse((j.counters.deadline?, k))))
            .collect();
        Sim {
            seed,
            now: T0,
            busy: vec![0usize; slots.len()],
            slots,
            open: jobs.len() as u64,
            open_per_ep: eps.iter().map(|e| e.model.jobs).collect(),
            jobs,
            eps,
            jitter: SplitMix64::new(seed ^ 0x7265_6469_616c_7369),
            flights: Vec::new(),
            free: Vec::new(),
            answers: BinaryHeap::new(),
            sent: 0,
            deadlines,
        }
    }

    /// Ends job `k` (completed when `dead` is none).
    fn end(&mut self, k: usize, dead: Option<DeadCategory>) {
        let job = &mut self.jobs[k];
        let (e, left) = (&mut self.eps[job.ep], &mut self.open_per_ep[job.ep]);
        finish_job(job, &mut e.tally, dead, self.now, &mut self.open, left);
    }

    /// The answers due now, each decided as the engine does (the policy, then the endpoint's
    /// protection), the job ended or due again.
    fn take_answers(&mut self) {
        let now = self.now;
        while let Some(Reverse((at, _, slot))) = self.answers.peek().copied() {
            if at > now {
                break;
            }
            self.answers.pop();
            let Some(Flight {
                job: j,
                permit,
                outcome,
            }) = self.flights[slot].take()
            else {
                continue;
            };
            self.free.push(slot);
            let job = &mut self.jobs[j];
            job.flying = false;
            let e = &mut self.eps[job.ep];
            self.busy[e.queue] -= 1;
            e.in_flight -= 1;
            let (in_flight, seq) = (e.in_flight, job.seq);
            let Concluded {
                decision: d,
                after,
                finished,
            } = conclude(
                &outcome,
                &job.counters,
                e.policy,
                now,
                &mut self.jitter,
                |mut observed| {
                    observed.others_in_flight = in_flight;
                    observed.job = Some(seq);
                    e.state.finish(e.cfg, now, permit, &observed)
                },
            );
            job.counters = after;
            if let Some(since) = finished.recovered_from {
                // The outage is over: retries scheduled since it began are due now.
                let waiting: Vec<_> = std::mem::take(&mut e.retries).into_vec();
                e.retries = waiting
                    .into_iter()
                    .map(|Reverse((run_at, s, k))| {
                        let due = if run_at > now && jobs_scheduled_since(&self.jobs, k, since) {
                            now
                        } else {
                            run_at
                        };
                        Reverse((due, s, k))
                    })
                    .collect();
            }
            match d.action {
                Action::Complete => self.end(j, None),
                Action::Dead(category) => self.end(j, Some(category)),
                Action::Retry { at, .. } | Action::Defer { until: at, .. } => {
                    let job = &mut self.jobs[j];
                    let e = &mut self.eps[job.ep];
                    job.scheduled_at = now;
                    let heap = if job.counters.failures > 0 {
                        &mut e.retries
                    } else {
                        &mut e.firsts
                    };
                    heap.push(Reverse((at.max(now), job.seq, j)));
                }
            }
        }
    }

    /// Deadlines passed while their jobs waited.
    fn end_expired(&mut self) {
        while let Some(Reverse((deadline, k))) = self.deadlines.peek().copied() {
            if deadline >= self.now {
                break;
            }
            self.deadlines.pop();
            let job = &self.jobs[k];
            if job.ended || job.flying {
                continue;
            }
            self.end(k, Some(DeadCategory::DeadlineExceeded));
        }
    }

    /// Queue `q`'s lease pass: due jobs in order of due time and enqueue order across its
    /// endpoints, each asking its endpoint, an endpoint that holds skipped for the rest of the
    /// pass, up to the queue's slots. `wake` becomes the soonest moment something may change.
    fn lease(&mut self, q: usize, wake: &mut Option<Timestamp>) {
        let now = self.now;
        // Per endpoint: (firsts held, retries held) for the rest of this pass.
        let mut held = vec![(false, false); self.eps.len()];
        // Jobs a deadline ended leave the due heaps here.
        for e in self.eps.iter_mut().filter(|e| e.queue == q) {
            for heap in [&mut e.firsts, &mut e.retries] {
                while heap
                    .peek()
                    .is_some_and(|Reverse((_, _, k))| self.jobs[*k].ended)
                {
                    heap.pop();
                }
            }
        }
        while self.busy[q] < self.slots[q] {
            let Some((i, retry)) = self.first_due(q, &held) else {
                break;
            };
            let e = &mut self.eps[i];
            let heap = if retry { &mut e.retries } else { &mut e.firsts };
            let Some(Reverse((_, _, j))) = heap.peek().copied() else {
                break;
            };
            let job = &self.jobs[j];
            if job.ended {
                // Its deadline passed while it waited behind others.
                heap.pop();
                continue;
            }
            if job.counters.deadline.is_some_and(|d| d < now) {
                heap.pop();
                self.end(j, Some(DeadCategory::DeadlineExceeded));
                continue;
            }
            match e.state.admit(e.cfg, now, retry, e.in_flight) {
                Admission::Go(permit) => {
                    heap.pop();
                    self.send(i, j, permit);
                }
                Admission::FailRetry(_) => {
                    heap.pop();
                    self.end(j, Some(DeadCategory::BudgetExhausted));
                }
                Admission::Hold(h) => {
                    held[i] = (true, true);
                    soonest(now, h.until.unwrap_or(now.saturating_add(POLL)), wake);
                }
                Admission::HoldRetries(h) => {
                    held[i].1 = true;
                    soonest(now, h.until.unwrap_or(now.saturating_add(POLL)), wake);
                }
                Admission::HoldFirsts(h) => {
                    held[i].0 = true;
                    soonest(now, h.until.unwrap_or(now.saturating_add(POLL)), wake);
                }
            }
        }
        // When the queue's next job falls due. A due job left behind waits for a hold (whose
        // end, or the poll, is a wake above) or for a free slot (an answer).
        for e in self.eps.iter().filter(|e| e.queue == q) {
            for heap in [&e.firsts, &e.retries] {
                if let Some(Reverse((run_at, _, _))) = heap.peek() {
                    if *run_at > now {
                        soonest(now, *run_at, wake);
                    }
                }
            }
        }
    }

    /// The due job first in line across queue `q`'s endpoints not held: its endpoint, and
    /// whether it is a retry.
    fn first_due(&self, q: usize, held: &[(bool, bool)]) -> Option<(usize, bool)> {
        let mut best: Option<(Timestamp, u64, usize, bool)> = None;
        for (i, e) in self.eps.iter().enumerate() {
            if e.queue != q {
                continue;
            }
            for (retry, heap, is_held) in
                [(false, &e.firsts, held[i].0), (true, &e.retries, held[i].1)]
            {
                if is_held {
                    continue;
                }
                if let Some(Reverse((run_at, s, _))) = heap.peek() {
                    if *run_at <= self.now
                        && best.is_none_or(|(r, bs, _, _)| (*run_at, *s) < (r, bs))
                    {
                        best = Some((*run_at, *s, i, retry));
                    }
                }
            }
        }
        best.map(|(_, _, i, retry)| (i, retry))
    }

    /// Sends job `j` to endpoint `i` (admitted with `permit`): what it answers and when, what
    /// it counts, and the work done (a duplicate when done twice unsafely).
    fn send(&mut self, i: usize, j: usize, permit: Permit) {
        let now = self.now;
        let e = &mut self.eps[i];
        let job = &mut self.jobs[j];
        job.flying = true;
        let attempt = job.attempts;
        job.attempts += 1;
        let (outcome, took, worked) = answer(e, job, attempt, now, self.seed);
        let safe = job.counters.has_idempotency_key || job.counters.method.is_idempotent();
        if worked && (job.effects == 0 || !safe) {
            job.effects += 1;
        }
        if let Outcome::Response(r) = &outcome {
            if r.status == 429 || r.status == 503 {
                e.tally.refused += 1;
            }
        }
        e.tally.requests += 1;
        let second = usize::try_from(since_start(now).as_secs()).unwrap_or(0);
        if e.tally.per_second.len() <= second {
            e.tally.per_second.resize(second + 1, 0);
        }
        e.tally.per_second[second] += 1;
        e.in_flight += 1;
        self.busy[e.queue] += 1;
        let flight = Flight {
            job: j,
            permit,
            outcome,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.flights[s] = Some(flight);
                s
            }
            None => {
                self.flights.push(Some(flight));
                self.flights.len() - 1
            }
        };
        self.answers.push(Reverse((
            now.saturating_add(took.max(Duration::from_millis(1))),
            self.sent,
            slot,
        )));
        self.sent += 1;
    }

    /// The backlog (jobs arrived and not yet ended) at the end of each second passed by `next`.
    fn count_backlog(&mut self, next: Timestamp) {
        let passed = usize::try_from(since_start(next).as_secs()).unwrap_or(0);
        for (e, left) in self.eps.iter_mut().zip(&self.open_per_ep) {
            while e.tally.backlog.len() < passed {
                let end_of = Duration::from_secs(e.tally.backlog.len() as u64 + 1);
                let to_come = e.model.jobs - arrived_by(e.model, end_of);
                e.tally.backlog.push(left.saturating_sub(to_come));
            }
        }
    }

    /// Each endpoint's figures.
    fn tallies(mut self) -> Vec<Tally> {
        for job in self.jobs.iter().filter(|j| j.effects > 1) {
            self.eps[job.ep].tally.duplicates += 1;
        }
        self.eps
            .into_iter()
            .zip(self.open_per_ep)
            .map(|(mut e, left)| {
                e.tally.left = left;
                e.tally.completion_ms.sort_unstable();
                e.tally
            })
            .collect()
    }
}

/// Job `k` of endpoint `ep`'s model (the `seq`-th of the workload), from its history or drawn
/// from the model: when it arrives, its deadline (from then), its key and method, its failure.
fn arrival(model: &EndpointModel, ep: usize, k: u64, seq: u64, seed: u64) -> Job {
    let (after, deadline, key, method, failure) = match &model.history {
        Some(h) => {
            let past = &h.jobs[k as usize];
            let failure = past.fails_with.map(|a| (a, true, false));
            (
                past.at,
                past.deadline,
                past.idempotency_key,
                past.method,
                failure,
            )
        }
        None => {
            let after = match model.arrival {
                Arrival::AtOnce => Duration::ZERO,
                Arrival::Rate(every) => every.saturating_mul(k as u32),
                Arrival::Bursts { size, every } => every.saturating_mul((k / size) as u32),
            };
            let draw = unit(mix(seed, seq, u64::MAX));
            let mut acc = 0.0;
            let failure = model.failures.iter().find_map(|f| {
                acc += f.ratio;
                (draw < acc).then_some((f.answer, f.always, f.commit))
            });
            let m = model;
            (after, m.deadline, m.idempotency_key, m.method, failure)
        }
    };
    let at = T0.saturating_add(after);
    let mut counters = JobCounters::new(at);
    counters.deadline = deadline.map(|d| at.saturating_add(d));
    counters.has_idempotency_key = key;
    counters.method = method;
    Job {
        ep,
        seq,
        enqueued_at: at,
        counters,
        failure,
        attempts: 0,
        effects: 0,
        scheduled_at: at,
        ended: false,
        flying: false,
    }
}

/// What endpoint `e` answers to `attempt` of `job` at `now`: the outcome, how long it takes,
/// and whether the endpoint did the work. From history when the workload has one; otherwise an
/// outage's answer, the endpoint's limiter, or the job's failure.
fn answer(
    e: &mut Endpoint,
    job: &Job,
    attempt: u32,
    now: Timestamp,
    seed: u64,
) -> (Outcome, Duration, bool) {
    let model = e.model;
    let (lo, hi) = model.latency;
    let spread = hi.saturating_sub(lo);
    let latency = lo + spread.mul_f64(unit(mix(seed, job.seq, u64::from(attempt))));
    if let Some(h) = &model.history {
        return match job.failure {
            Some((a, _, _)) => with(answer_of(a, model, latency), false),
            None => {
                let draw = unit(mix(seed, job.seq, 1 << 40 | u64::from(attempt)));
                match h.answer_at(since_start(now), draw) {
                    Some(PastAnswer {
                        answer: Some(a),
                        took,
                        ..
                    }) => with(answer_of(a, model, took), false),
                    past => (
                        Outcome::Response(Response::new(200)),
                        past.map_or(latency, |p| p.took),
                        true,
                    ),
                }
            }
        };
    }
    let t = since_start(now);
    if let Some(o) = model.outages.iter().find(|o| o.from <= t && t < o.until) {
        return with(answer_of(o.answer, model, latency), false);
    }
    let (ok, headers, hold) = e.server.take(model, now);
    let latency = latency + hold;
    if !ok {
        let status = model.limit.map_or(429, |l| l.status);
        let mut r = Response::new(status);
        r.headers = headers;
        return (Outcome::Response(r), latency, false);
    }
    match job.failure {
        Some((a, always, commit)) if always || attempt == 0 => {
            with(answer_of(a, model, latency), commit)
        }
        _ => {
            let mut r = Response::new(200);
            r.headers = headers;
            (Outcome::Response(r), latency, true)
        }
    }
}

fn with((outcome, took): (Outcome, Duration), worked: bool) -> (Outcome, Duration, bool) {
    (outcome, took, worked)
}

fn jobs_scheduled_since(jobs: &[Job], k: usize, since: Timestamp) -> bool {
    jobs[k].scheduled_at >= since
}
