//! A plain retry loop: the baseline the `protection` workload measures Redial's endpoint
//! protection against. What most services write by hand: N workers share a queue of jobs held in
//! memory, each job is retried on failure after a backoff, `Retry-After` is honoured when present,
//! and nothing is known or shared about the endpoint (no pause, no budget, no breaker).
//!
//! To isolate endpoint protection, every per-job rule is Redial's own: the outcome is classified
//! by `redial_policy::classify` (so a 400 is permanent, a 500 unknown, a 503 transient, a 429 or
//! a 503 with `Retry-After` a deferral), delays come from the same [`Backoff`] schedules, and the
//! same ceilings end a job (`max_attempts` failures, `max_unknown_attempts` unknown failures,
//! `max_deferrals` deferrals). A server-given wait is honoured exactly: unlike Redial, no jitter
//! is added after it. Requests go through the same HTTP executor (client, timeouts, error kinds).
//! A retry waits in the queue, not in a worker: the workers stay free for due jobs, as in Redial.
//!
//! Owns the loop and its counts. Does not own storage (nothing is durable) or the HTTP client.

use redial_engine::http::HttpExecutor;
use redial_engine::{Clock, Handler, SystemClock};
use redial_policy::{classify, Category, Jitter, Outcome, Policy, SplitMix64};
use redial_store::{Job, NewJob};
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// What a run of the loop did.
#[derive(Debug, Default)]
pub struct PlainRun {
    /// From the start to the last job's end; `None` when jobs were left at the cap.
    pub drained: Option<Duration>,
    pub completed: u64,
    /// Dead jobs by Redial's category names.
    pub dead: BTreeMap<&'static str, u64>,
    /// Jobs neither completed nor dead when the cap came.
    pub unfinished: u64,
}

/// One job and its counters, as Redial keeps them.
#[derive(Debug)]
struct Entry {
    job: Job,
    failures: u32,
    unknown_failures: u32,
    deferrals: u32,
}

/// A job waiting for its time; the heap's top is the earliest.
#[derive(Debug)]
struct Due {
    at: Instant,
    seq: u64,
    entry: Entry,
}

impl PartialEq for Due {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Due {}
impl PartialOrd for Due {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Due {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        // Reversed: BinaryHeap is a max-heap.
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Debug, Default)]
struct Queue {
    due: BinaryHeap<Due>,
    seq: u64,
    /// Jobs not yet completed or dead (waiting or in a worker's hands).
    outstanding: usize,
    completed: u64,
    dead: BTreeMap<&'static str, u64>,
    last_end: Option<Instant>,
}

#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    /// Told when a job is queued or the last one ends: sleeping workers look again.
    wake: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the loop does after an attempt.
enum Verdict {
    Complete,
    Dead(&'static str),
    Retry(Duration),
}

/// Redial's ceilings and backoffs for one outcome, without endpoint protection and without jitter
/// after a server-given wait.
fn judge(outcome: &Outcome, e: &mut Entry, policy: &Policy, jitter: &mut dyn Jitter) -> Verdict {
    let has_key = e.job.idempotency_key.is_some();
    let c = classify(outcome, has_key, policy, SystemClock.now());
    match c.category {
        Category::Success => Verdict::Complete,
        Category::Permanent => Verdict::Dead("permanent"),
        Category::Defer => {
            if e.deferrals >= policy.max_deferrals {
                return Verdict::Dead("deferral_exhausted");
            }
            e.deferrals += 1;
            Verdict::Retry(c.server_wait.map_or_else(
                || policy.deferral.delay(e.deferrals, None, jitter),
                |w| w.delay,
            ))
        }
        Category::Transient => {
            e.failures += 1;
            if e.failures >= policy.max_attempts {
                return Verdict::Dead("transient_exhausted");
            }
            Verdict::Retry(c.server_wait.map_or_else(
                || policy.transient.delay(e.failures, None, jitter),
                |w| w.delay,
            ))
        }
        Category::Unknown => {
            e.failures += 1;
            e.unknown_failures += 1;
            if e.unknown_failures >= policy.max_unknown_attempts
                || e.failures >= policy.max_attempts
            {
                return Verdict::Dead("unknown_exhausted");
            }
            // Redial's rule for a request safe to repeat (an idempotent method or a key): the
            // transient backoff; otherwise the longer unknown one.
            let safe = has_key
                || matches!(
                    e.job.request.method.as_str(),
                    "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
                );
            let backoff = if safe && policy.safe_repeat_transient_backoff {
                &policy.transient
            } else {
                &policy.unknown
            };
            Verdict::Retry(
                c.server_wait
                    .map_or_else(|| backoff.delay(e.failures, None, jitter), |w| w.delay),
            )
        }
    }
}

/// Runs `jobs` through the loop with `concurrency` workers until every job is completed or dead,
/// or `cap` has passed.
pub async fn run(
    jobs: Vec<NewJob>,
    exec: HttpExecutor,
    policy: Policy,
    concurrency: usize,
    cap: Duration,
) -> PlainRun {
    let start = Instant::now();
    let deadline = start + cap;
    let mut queue = Queue {
        outstanding: jobs.len(),
        ..Queue::default()
    };
    for job in jobs {
        let seq = queue.seq;
        queue.seq += 1;
        queue.due.push(Due {
            at: start,
            seq,
            entry: Entry {
                // The job as the executor takes it (the loop keeps no other copy).
                job: job.into_stored(0),
                failures: 0,
                unknown_failures: 0,
                deferrals: 0,
            },
        });
    }
    let shared = Arc::new(Shared {
        queue: Mutex::new(queue),
        wake: Notify::new(),
    });
    let policy = Arc::new(policy);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut workers = tokio::task::JoinSet::new();
    for w in 0..concurrency {
        let (shared, exec, policy) = (shared.clone(), exec.clone(), policy.clone());
        let jitter = SplitMix64::new(seed ^ (w as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        workers.spawn(worker(shared, exec, policy, deadline, jitter));
    }
    while workers.join_next().await.is_some() {}
    let q = shared.lock();
    PlainRun {
        drained: (q.outstanding == 0).then(|| q.last_end.map_or(Duration::ZERO, |t| t - start)),
        completed: q.completed,
        dead: q.dead.clone(),
        unfinished: q.outstanding as u64,
    }
}

enum Next {
    Run(Box<Entry>),
    Wait(Instant),
}

async fn worker(
    shared: Arc<Shared>,
    exec: HttpExecutor,
    policy: Arc<Policy>,
    deadline: Instant,
    mut jitter: SplitMix64,
) {
    loop {
        // Registered before looking, so that a job queued meanwhile is not missed.
        let notified = shared.wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let next = {
            let mut q = shared.lock();
            let now = Instant::now();
            if q.outstanding == 0 || now >= deadline {
                return;
            }
            match q.due.peek() {
                Some(d) if d.at <= now => {
                    let d = q.due.pop().expect("the heap has the element just peeked");
                    Next::Run(Box::new(d.entry))
                }
                Some(d) => Next::Wait(d.at.min(deadline)),
                None => Next::Wait(deadline),
            }
        };
        let mut entry = match next {
            Next::Run(e) => e,
            Next::Wait(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = &mut notified => {}
                }
                continue;
            }
        };
        let out = exec.run(&entry.job).await;
        let verdict = judge(&out.outcome, &mut entry, &policy, &mut jitter);
        let now = Instant::now();
        let mut q = shared.lock();
        let ended = match verdict {
            Verdict::Complete => {
                q.completed += 1;
                true
            }
            Verdict::Dead(category) => {
                *q.dead.entry(category).or_default() += 1;
                true
            }
            Verdict::Retry(delay) => {
                let seq = q.seq;
                q.seq += 1;
                q.due.push(Due {
                    at: now + delay,
                    seq,
                    entry: *entry,
                });
                false
            }
        };
        if ended {
            q.outstanding -= 1;
            q.last_end = Some(now);
        }
        drop(q);
        if !ended || shared.lock().outstanding == 0 {
            shared.wake.notify_waiters();
        }
    }
}
