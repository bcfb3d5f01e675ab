//! A learned quota shared by several nodes, simulated: each node's pure endpoint state against
//! one API that counts, with requests that arrive and answers that come back in any order, shared
//! pauses that reach the other nodes late, a node that dies while its requests are on the wire,
//! answers without headers (timeouts), requests given back unsent, and windows that reset.
//! Counts how many requests the API refused beyond its quota.

mod common;

use proptest::prelude::*;
use redial_policy::endpoint::*;
use redial_policy::{quota, Timestamp};
use std::time::Duration;

const T0: i64 = 1_795_996_800_000;
const NAME: &str = "https://api.example.com";
/// The API's window in the runs where it never resets: longer than any run.
const LONG_WINDOW_MS: i64 = 3_600_000;

#[derive(Clone, Debug)]
enum Op {
    /// Node `node` (modulo the nodes) asks to send one request.
    Admit {
        node: usize,
    },
    /// The request at `index` (modulo those on the wire) reaches the API.
    Arrive {
        index: usize,
    },
    /// The answer at `index` (modulo those answered) reaches its node; without `headers`, as a
    /// timeout would (the API counted the request, the node learns nothing).
    Deliver {
        index: usize,
        headers: bool,
    },
    /// The request at `index` (modulo those on the wire) was given back before it was sent.
    Release {
        index: usize,
    },
    /// Node `to` takes in the pause node `from` learned (the store's shared holds).
    Sync {
        from: usize,
        to: usize,
    },
    /// A node dies (once per run, never the last): its answers are lost, its requests still on
    /// the wire may still reach the API.
    Kill {
        node: usize,
    },
    /// A survivor learns the nodes changed and takes its new share.
    Reshare {
        node: usize,
    },
    Advance {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<usize>().prop_map(|node| Op::Admit { node }),
        5 => any::<usize>().prop_map(|index| Op::Arrive { index }),
        5 => any::<usize>().prop_map(|index| Op::Deliver { index, headers: true }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(from, to)| Op::Sync { from, to }),
        1 => any::<usize>().prop_map(|node| Op::Kill { node }),
        1 => any::<usize>().prop_map(|node| Op::Reshare { node }),
        1 => (0u64..50).prop_map(|ms| Op::Advance { ms }),
    ]
}

/// Every op, with timeouts, requests given back, and time moving across short windows.
fn any_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => any::<usize>().prop_map(|node| Op::Admit { node }),
        5 => any::<usize>().prop_map(|index| Op::Arrive { index }),
        5 => (any::<usize>(), prop::bool::weighted(0.9))
            .prop_map(|(index, headers)| Op::Deliver { index, headers }),
        1 => any::<usize>().prop_map(|index| Op::Release { index }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(from, to)| Op::Sync { from, to }),
        1 => any::<usize>().prop_map(|node| Op::Kill { node }),
        1 => any::<usize>().prop_map(|node| Op::Reshare { node }),
        3 => (0u64..40).prop_map(|ms| Op::Advance { ms }),
    ]
}

struct Request {
    node: usize,
    /// The API's answer, once it arrived.
    answer: Option<Answer>,
    /// Given back before it was sent: it never arrives.
    released: bool,
    /// The API's window when it was sent.
    sent_in: i64,
    /// Sent after the API's window ended but before its node's reset, as its node heard it:
    /// the node counts it in the old window, the API in the new one.
    late: bool,
    /// Sent by a node that knew no quota (no answer with headers yet, or only timeouts).
    blind: bool,
    /// Sent by a node whose last answer was a timeout, its part spent, to find out whether the
    /// window ended (no answer told it the reset).
    probe: bool,
}

#[derive(Clone, Copy)]
struct Answer {
    ok: bool,
    remaining: u64,
    /// Until the API's window ends, from when the request arrived.
    reset_ms: i64,
    /// The API's window it arrived in.
    window: i64,
}

struct Node {
    state: EndpointState,
    alive: bool,
    /// Whether it took the share of the nodes left after the kill.
    reshared: bool,
    /// Whether the last answer it heard was a timeout (no headers).
    timed_out: bool,
    permits: Vec<(usize, Permit)>,
}

struct Sim {
    cfg: EndpointConfig,
    limit: u64,
    window_ms: i64,
    /// The API's current window and what it counted in it.
    api_window: i64,
    nodes: Vec<Node>,
    requests: Vec<Request>,
    used: u64,
    refused: u64,
    now_ms: i64,
    /// The node that died, once one did.
    dead: Option<usize>,
    /// The requests the dead node sent, when the survivors' windows began after they learned of
    /// its death (then they divided the quota without it).
    unshared_by_the_dead: u64,
}

impl Sim {
    fn new(nodes: u32, limit: u64) -> Sim {
        Sim::with_window(nodes, limit, LONG_WINDOW_MS)
    }

    fn with_window(nodes: u32, limit: u64, window_ms: i64) -> Sim {
        Sim {
            window_ms,
            api_window: 0,
            cfg: EndpointConfig {
                learn_from_headers: true,
                probe_first: true,
                retry_budget: BudgetConfig {
                    enabled: false,
                    ..BudgetConfig::default()
                },
                breaker: BreakerConfig {
                    enabled: false,
                    ..BreakerConfig::default()
                },
                ..EndpointConfig::default()
            },
            limit,
            nodes: (0..nodes)
                .map(|rank| {
                    let mut state = EndpointState::default();
                    state.set_share(Share::for_endpoint(rank, nodes, NAME));
                    Node {
                        state,
                        alive: true,
                        reshared: false,
                        timed_out: false,
                        permits: Vec::new(),
                    }
                })
                .collect(),
            requests: Vec::new(),
            used: 0,
            refused: 0,
            now_ms: 0,
            dead: None,
            unshared_by_the_dead: 0,
        }
    }

    /// The requests sent and not yet arrived.
    fn on_the_wire(&self) -> Vec<usize> {
        (0..self.requests.len())
            .filter(|i| self.requests[*i].answer.is_none() && !self.requests[*i].released)
            .collect()
    }

    /// Requests the API and their node may count in different windows: sent in one window and
    /// arriving in the next, or sent after the API's window ended but before the node heard of
    /// it (its reset is when the answer reached it, a little after the API's).
    fn across_a_reset(&self) -> u64 {
        self.requests
            .iter()
            .filter(|r| r.late || r.answer.is_some_and(|a| a.window != r.sent_in))
            .count() as u64
    }

    /// Requests sent by a node that knew no quota.
    fn blind(&self) -> u64 {
        self.requests.iter().filter(|r| r.blind).count() as u64
    }

    /// Requests sent, a node's part spent, to learn a reset its last answer (a timeout) did
    /// not tell.
    fn probes(&self) -> u64 {
        self.requests.iter().filter(|r| r.probe).count() as u64
    }

    /// The API's windows some request arrived in.
    fn windows(&self) -> u64 {
        let mut w: Vec<i64> = self
            .requests
            .iter()
            .filter_map(|r| r.answer.map(|a| a.window))
            .collect();
        w.dedup();
        w.len() as u64
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_unix_millis(T0 + self.now_ms)
    }

    fn in_flight(&self, node: usize) -> u32 {
        self.nodes[node].permits.len() as u32
    }

    fn alive(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|i| self.nodes[*i].alive)
            .collect()
    }

    fn apply(&mut self, op: &Op) {
        let now = self.now();
        let alive = self.alive();
        match *op {
            Op::Admit { node } => {
                let node = alive[node % alive.len()];
                let in_flight = self.in_flight(node);
                let cfg = self.cfg.clone();
                let heard_end = self.nodes[node].state.quota_reset_at;
                let blind = self.nodes[node].state.quota_tokens.is_none();
                if let Admission::Go(p) = self.nodes[node].state.admit(&cfg, now, false, in_flight)
                {
                    let late = heard_end.is_some_and(|end| {
                        let end = end.as_unix_millis() - T0;
                        let api_end = end / self.window_ms * self.window_ms;
                        (api_end..end).contains(&self.now_ms)
                    });
                    self.requests.push(Request {
                        node,
                        answer: None,
                        released: false,
                        sent_in: self.now_ms / self.window_ms,
                        late,
                        blind,
                        probe: p.is_quota_probe() && self.nodes[node].timed_out,
                    });
                    self.nodes[node].permits.push((self.requests.len() - 1, p));
                }
            }
            Op::Arrive { index } => {
                let wire = self.on_the_wire();
                if wire.is_empty() {
                    return;
                }
                let r = wire[index % wire.len()];
                let window = self.now_ms / self.window_ms;
                if window != self.api_window {
                    self.api_window = window;
                    self.used = 0;
                }
                let ok = self.used < self.limit;
                if ok {
                    self.used += 1;
                } else {
                    self.refused += 1;
                }
                self.requests[r].answer = Some(Answer {
                    ok,
                    remaining: self.limit - self.used,
                    reset_ms: (window + 1) * self.window_ms - self.now_ms,
                    window,
                });
            }
            Op::Deliver { index, headers } => {
                let answered: Vec<(usize, usize)> = alive
                    .iter()
                    .flat_map(|n| {
                        self.nodes[*n]
                            .permits
                            .iter()
                            .enumerate()
                            .filter(|(_, (r, _))| self.requests[*r].answer.is_some())
                            .map(move |(k, _)| (*n, k))
                    })
                    .collect();
                if answered.is_empty() {
                    return;
                }
                let (node, k) = answered[index % answered.len()];
                let (r, permit) = self.nodes[node].permits.remove(k);
                let a = self.requests[r].answer.expect("answered");
                let remaining = a.remaining.to_string();
                let limit = self.limit.to_string();
                let reset = format!("{}ms", a.reset_ms);
                let wait = Duration::from_millis(a.reset_ms as u64);
                let o = if headers {
                    let headers = [
                        ("x-ratelimit-limit-requests", limit.as_str()),
                        ("x-ratelimit-remaining-requests", remaining.as_str()),
                        ("x-ratelimit-reset-requests", reset.as_str()),
                    ];
                    Observed {
                        class: if a.ok {
                            ResultClass::Success
                        } else {
                            ResultClass::Neutral
                        },
                        overload: !a.ok,
                        rate_limited: !a.ok,
                        unavailable: false,
                        server_wait: (!a.ok).then(|| (wait, "429 Retry-After".into())),
                        quota: quota(headers, now),
                        others_in_flight: self.in_flight(node),
                        safe_retry: false,
                        job: None,
                    }
                } else {
                    Observed {
                        class: ResultClass::Failure,
                        overload: true,
                        rate_limited: false,
                        unavailable: false,
                        server_wait: None,
                        quota: Default::default(),
                        others_in_flight: self.in_flight(node),
                        safe_retry: false,
                        job: None,
                    }
                };
                let cfg = self.cfg.clone();
                self.nodes[node].state.record(&cfg, now, permit, &o);
                self.nodes[node].timed_out = !headers;
            }
            Op::Release { index } => {
                let wire: Vec<usize> = self
                    .on_the_wire()
                    .into_iter()
                    .filter(|r| self.nodes[self.requests[*r].node].alive)
                    .collect();
                if wire.is_empty() {
                    return;
                }
                let r = wire[index % wire.len()];
                let node = self.requests[r].node;
                let k = self.nodes[node]
                    .permits
                    .iter()
                    .position(|(q, _)| *q == r)
                    .expect("its permit");
                let (_, permit) = self.nodes[node].permits.remove(k);
                self.requests[r].released = true;
                let cfg = self.cfg.clone();
                self.nodes[node].state.release(&cfg, now, permit);
            }
            Op::Sync { from, to } => {
                let (from, to) = (alive[from % alive.len()], alive[to % alive.len()]);
                let holds = self.nodes[from].state.shareable(now);
                self.nodes[to].state.absorb(now, &holds);
            }
            Op::Kill { node } => {
                if self.dead.is_some() || alive.len() < 2 {
                    return;
                }
                let node = alive[node % alive.len()];
                self.nodes[node].alive = false;
                self.dead = Some(node);
                // Its requests on the wire may still arrive; their answers go nowhere.
                self.nodes[node].permits.clear();
            }
            Op::Reshare { node } => {
                let Some(dead) = self.dead else {
                    return;
                };
                let node = alive[node % alive.len()];
                if self.nodes[node].reshared {
                    return;
                }
                self.nodes[node].reshared = true;
                if self.nodes[node].state.quota_limit.is_none() {
                    self.unshared_by_the_dead =
                        self.requests.iter().filter(|r| r.node == dead).count() as u64;
                }
                let rank = alive.iter().position(|n| *n == node).expect("alive") as u32;
                self.nodes[node].state.set_share(Share::for_endpoint(
                    rank,
                    alive.len() as u32,
                    NAME,
                ));
            }
            Op::Advance { ms } => self.now_ms += ms as i64,
        }
    }

    /// Lets every request arrive and every answer come back, then has every node ask again
    /// until none may send.
    fn drain(&mut self) {
        for _ in 0..10_000 {
            let before = (self.requests.len(), self.used, self.refused);
            self.apply(&Op::Arrive { index: 0 });
            self.apply(&Op::Deliver {
                index: 0,
                headers: true,
            });
            for i in 0..self.alive().len() {
                self.apply(&Op::Admit { node: i });
            }
            if (self.requests.len(), self.used, self.refused) == before
                && self.on_the_wire().is_empty()
                && self.nodes.iter().all(|n| n.permits.is_empty())
            {
                return;
            }
        }
    }
}

/// Requests beyond the quota that no division can prevent: each node's first, sent before any
/// answer told of a quota (`probe_first`), when the quota has fewer requests than there are
/// nodes.
fn first_requests_beyond(limit: u64, nodes: u64) -> u64 {
    nodes.saturating_sub(limit)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: common::cases(1000), ..ProptestConfig::default() })]

    /// Whatever order requests arrive and answers come back in, the three send no more than the
    /// quota, and, each having work, they send all of it.
    #[test]
    fn three_nodes_spend_a_learned_quota_exactly(
        ops in proptest::collection::vec(op(), 0..400),
        limit in 1u64..40,
    ) {
        let mut sim = Sim::new(3, limit);
        for op in ops.iter().filter(|o| !matches!(o, Op::Kill { .. })) {
            sim.apply(op);
        }
        sim.drain();
        prop_assert!(
            sim.refused <= first_requests_beyond(limit, 3),
            "{} refused, quota {limit}", sim.refused
        );
        prop_assert_eq!(sim.used, limit, "each node had work: the whole quota went");
    }

    /// One node dies at any moment, its requests still on the wire: the two left still send no
    /// more than the quota, but for the dead node's requests on the wire when the survivors'
    /// window began after they learned of its death (then none of them counted those). They do
    /// not take its part before the window ends (what it sent of it is not known), so at most
    /// its part goes unused.
    #[test]
    fn a_learned_quota_holds_when_a_node_dies(
        ops in proptest::collection::vec(op(), 0..400),
        limit in 1u64..40,
    ) {
        let mut sim = Sim::new(3, limit);
        for op in &ops {
            sim.apply(op);
        }
        sim.drain();
        prop_assert!(
            sim.refused <= first_requests_beyond(limit, 3) + sim.unshared_by_the_dead,
            "{} refused, quota {limit}, {} sent by the dead node", sim.refused, sim.unshared_by_the_dead
        );
        let largest_part = limit.div_ceil(3);
        prop_assert!(
            sim.used + largest_part >= limit,
            "{} of {limit} used: more than a dead node's part unused", sim.used
        );
    }

    /// Short windows that reset while requests are on the wire, answers without headers
    /// (timeouts), requests given back unsent, and a node dying: nothing beyond the quota but
    /// requests sent knowing no quota (a node's first, and more when its answers were
    /// timeouts), requests sent knowing no reset (a node's part spent and its answers in the
    /// window timeouts, it asks one at a time whether the window ended: each may be refused,
    /// or take what is another node's part of the next window), one a window from each node
    /// whose part is nothing, the requests the API and
    /// their node count in different windows (sent in one, arriving in the next, or sent
    /// between the API's reset and the moment the node heard of it), and the dead node's part
    /// when the survivors' window began after they learned of its death.
    #[test]
    fn a_learned_quota_holds_window_after_window(
        ops in proptest::collection::vec(any_op(), 0..600),
        limit in 1u64..20,
        window_ms in 20i64..200,
    ) {
        let mut sim = Sim::with_window(3, limit, window_ms);
        for op in &ops {
            sim.apply(op);
        }
        sim.drain();
        let allowed = sim.blind()
            + sim.probes()
            + sim.windows() * first_requests_beyond(limit, 3)
            + sim.across_a_reset()
            + sim.unshared_by_the_dead;
        prop_assert!(
            sim.refused <= allowed,
            "{} refused, quota {limit}, a window of {window_ms} ms: {} blind, {} probes, {} windows, {} across a reset, {} by the dead",
            sim.refused, sim.blind(), sim.probes(), sim.windows(), sim.across_a_reset(), sim.unshared_by_the_dead
        );
    }
}

/// A node that gets ahead of the others (they are slow to lease, or busy) and hears answers
/// saying much remains takes its part and no more: what remains is the others' too. (Before
/// the parts were kept, it went on one request at a time while answers said some remained, and
/// the others' parts were then refused: 18 of 30 here.)
#[test]
fn a_node_that_runs_ahead_takes_its_part_and_leaves_the_rest() {
    let mut sim = Sim::new(3, 30);
    for n in 0..3 {
        sim.apply(&Op::Admit { node: n });
    }
    for _ in 0..3 {
        sim.apply(&Op::Arrive { index: 0 });
        sim.apply(&Op::Deliver {
            index: 0,
            headers: true,
        });
    }
    // Node 0 alone, over and over: it sends what it may, and every answer comes back.
    for _ in 0..100 {
        sim.apply(&Op::Admit { node: 0 });
        sim.apply(&Op::Arrive { index: 0 });
        sim.apply(&Op::Deliver {
            index: 0,
            headers: true,
        });
    }
    let by_0 = sim.requests.iter().filter(|r| r.node == 0).count() as u64;
    assert_eq!(
        by_0,
        Share::for_endpoint(0, 3, NAME).part(30),
        "node 0's part"
    );
    let (cfg, now) = (sim.cfg.clone(), sim.now());
    let view = sim.nodes[0].state.view(&cfg, now, 0);
    assert_eq!(
        view.learned_remaining,
        Some(0),
        "what node 0 shows as left to it"
    );
    assert!(
        view.holding
            .as_deref()
            .is_some_and(|h| h.contains("this node's part")),
        "{:?}",
        view.holding
    );
    // Then the other two spend theirs.
    for n in 1..3 {
        for _ in 0..100 {
            sim.apply(&Op::Admit { node: n });
        }
    }
    sim.drain();
    assert_eq!((sim.used, sim.refused), (30, 0));
}

/// Issue 29: a node whose answers in a window were all timeouts never learns when the window
/// ends, so once its part is spent it asks, one request at a time, whether it did. In the same
/// window each such request is refused: the bound counts them (one per timeout).
#[test]
fn after_a_timeout_a_node_with_its_part_spent_probes_for_the_reset() {
    let mut sim = Sim::with_window(3, 3, 100);
    // Each node's first request, answered with the quota's headers: each learns the reset.
    for n in 0..3 {
        sim.apply(&Op::Admit { node: n });
        sim.apply(&Op::Arrive { index: 0 });
        sim.apply(&Op::Deliver {
            index: 0,
            headers: true,
        });
    }
    assert_eq!((sim.used, sim.refused, sim.probes()), (3, 0, 0));
    // The next window: each node sends its part, and every answer is a timeout.
    sim.apply(&Op::Advance { ms: 110 });
    for n in 0..3 {
        sim.apply(&Op::Admit { node: n });
    }
    assert_eq!(sim.requests.len(), 6, "each node's part of 3 is one");
    for _ in 0..3 {
        sim.apply(&Op::Arrive { index: 0 });
        sim.apply(&Op::Deliver {
            index: 0,
            headers: false,
        });
    }
    // Parts spent, no reset known: each node asks once, and the window is still spent.
    for n in 0..3 {
        sim.apply(&Op::Admit { node: n });
    }
    assert_eq!(sim.probes(), 3, "one probe from each node");
    for _ in 0..3 {
        sim.apply(&Op::Arrive { index: 0 });
        sim.apply(&Op::Deliver {
            index: 0,
            headers: true,
        });
    }
    assert_eq!(sim.refused, 3);
    // The refusals told the reset: nothing more goes until it.
    for n in 0..3 {
        sim.apply(&Op::Admit { node: n });
    }
    assert_eq!(sim.requests.len(), 9);
}
