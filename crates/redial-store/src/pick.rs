//! The lease picker's decisions, one for both stores: what admission's verdicts leave out of a
//! lease ([`Choice`]), that every admission not leased after all is handed back ([`Choice`]'s
//! drop), the order of turns between a queue's groups ([`legs`]) and their weighted shares
//! ([`share`]), where the next lease starts ([`next_cursor`], [`PickMemory`]), and the read
//! bounds ([`TOP_SKIPS`], [`DEEP_SKIPS`], [`GROUP_VISITS`]).
//!
//! Pure: no SQL, no clock. Each store keeps only how it reads its rows (SQLite steps an index on
//! its own thread; PostgreSQL reads in chunks, locking the head) and drives these decisions.
//!
//! Invariant: an admission granted while leasing ends exactly once, leased (kept with
//! [`Choice::keep`]) or handed back ([`Admit::not_leased`]), on every path, errors and early
//! returns included.
//!
//! **An endpoint's limits are asked before every attempt, and a held endpoint holds only its own
//! jobs.** Leasing goes through runnable jobs in lease order and asks each job's endpoint
//! (through the engine's [`Admit`]); an endpoint that holds is left out for the rest of the
//! request, so jobs of other endpoints behind it are reached (no head-of-line blocking); one that
//! holds only its retries (budget spent) or only its first attempts (suspect) has those left out,
//! and its other jobs behind them are reached. One request reads a bounded number of held
//! endpoints' rows ([`TOP_SKIPS`] from the head of the queue, [`DEEP_SKIPS`] further on from
//! where the previous request stopped, per queue and process: [`PickMemory`]), so a held
//! endpoint with a deep backlog costs each lease a bounded time and other endpoints' jobs behind
//! it are reached within a few leases. A held job is not leased, makes no request and spends no
//! attempt. Admission is asked in Rust, per candidate, instead of one `UPDATE ... LIMIT`,
//! because admission is per endpoint.
//!
//! **Groups take turns, and a queue without groups pays nothing for them.** A lease first asks
//! whether a grouped job is due; if none is, it reads as it always did. Otherwise it goes
//! round-robin: the turns are the ungrouped jobs and the groups by name, starting after the turn
//! the last lease ended with ([`legs`], [`next_cursor`]); only turns with a due job count,
//! [`GROUP_VISITS`] groups looked at at most (stopping there with room left, the lease says so,
//! `AdmittedLease::more`, and the engine leases again at once, from where it stopped). What is
//! left is shared by weight among the turns, pass after pass ([`share`]), until the lease is
//! full or every turn is spent or holds. A group that holds (its own limits, asked before the
//! endpoint's) is passed over for the lease ([`Offer::GroupHeld`]).

use crate::{Admit, Candidate, ScanPos, Verdict};
use std::collections::HashMap;

/// Rows of held endpoints' jobs one lease reads from the head of a queue, at most.
pub const TOP_SKIPS: usize = 1024;
/// Rows of held endpoints' jobs one lease reads further on, from where the last one stopped.
pub const DEEP_SKIPS: usize = 8192;
/// Groups looked at, at most, by one lease's round-robin for turns with a due job.
pub const GROUP_VISITS: usize = 4096;

/// What a store keeps between leases, per queue: the read bounds, where the last deep read
/// stopped (the next one carries on from there: jobs behind a deep held backlog are reached
/// over a few leases, each of bounded cost), and the last turn a lease served between groups.
#[derive(Debug)]
pub struct PickMemory {
    /// Skipped rows read from the head of the queue, every lease.
    pub top: usize,
    /// Skipped rows read further on, from where the last lease stopped.
    pub deep: usize,
    resume: HashMap<String, ScanPos>,
    /// Per queue, the last turn a lease served ("" for the ungrouped jobs: no group is named
    /// so): the next lease's round-robin starts after it.
    cursors: HashMap<String, String>,
}

impl Default for PickMemory {
    fn default() -> Self {
        PickMemory {
            top: TOP_SKIPS,
            deep: DEEP_SKIPS,
            resume: HashMap::new(),
            cursors: HashMap::new(),
        }
    }
}

impl PickMemory {
    /// Sets the read bounds (at least 1 each) and forgets where deep reads stopped.
    pub fn set_bounds(&mut self, top: usize, deep: usize) {
        self.top = top.max(1);
        self.deep = deep.max(1);
        self.resume.clear();
    }

    /// Where a deep read starts once the read from the head stopped at `last`, its budget
    /// spent: where the last deep read stopped, if that is further on.
    pub fn deep_start(&self, queue: &str, last: ScanPos) -> ScanPos {
        ScanPos::onwards(self.resume.get(queue).copied(), last)
    }

    /// A read of `queue` ran out of rows: the next deep read starts from the head's end again.
    pub fn ran_out(&mut self, queue: &str) {
        self.resume.remove(queue);
    }

    /// A deep read ended: it ran out of rows (`ran_out`), or stopped at `stopped`, where the
    /// next one carries on.
    pub fn deep_read_ended(&mut self, queue: &str, ran_out: bool, stopped: Option<ScanPos>) {
        match (ran_out, stopped) {
            (false, Some(at)) => {
                self.resume.insert(queue.to_owned(), at);
            }
            _ => self.ran_out(queue),
        }
    }

    /// The last turn a lease of `queue` served ([`next_cursor`]).
    pub fn cursor(&self, queue: &str) -> Option<&str> {
        self.cursors.get(queue).map(String::as_str)
    }

    /// Keeps where the next lease's round-robin starts, when there is a place to keep.
    pub fn set_cursor(&mut self, queue: &str, next: Option<String>) {
        if let Some(next) = next {
            self.cursors.insert(queue.to_owned(), next);
        }
    }
}

/// What became of a candidate offered to admission ([`Choice::offer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Admitted to run.
    Taken,
    /// Admitted to fail without a request.
    Failed,
    /// Its endpoint holds (all its jobs, its retries or its first attempts): it and the
    /// endpoint's like are left out of this lease. Counts as a row skipped.
    Held,
    /// Its group holds: its group's turn ends.
    GroupHeld,
}

#[derive(Debug, PartialEq, Eq)]
enum Standing {
    /// Admitted, not leased yet.
    Open,
    /// Leased, kept when the lease is ([`Choice::keep`]).
    Leased,
    /// Handed back.
    Returned,
}

#[derive(Debug)]
struct Grant<X> {
    candidate: Candidate,
    /// What the store read along with the candidate, until it leases it.
    extra: Option<X>,
    fail: bool,
    standing: Standing,
}

/// What one lease chose: the admissions granted, in the order granted, each with what the store
/// read along (`X`: the row, or nothing), and the endpoints admission left out. A guard: dropped
/// before [`Choice::keep`], it hands back every admission still standing (open or leased), as
/// the engine's `Admitted` releases a permit dropped on an error path.
pub struct Choice<'a, X> {
    admit: &'a mut dyn Admit,
    /// At most this many admitted to run and not yet leased.
    pub max: usize,
    grants: Vec<Grant<X>>,
    /// Open grants to run, and to fail.
    open_taking: usize,
    open_failing: usize,
    exclude: Vec<String>,
    exclude_retries: Vec<String>,
    exclude_firsts: Vec<String>,
}

impl<'a, X> Choice<'a, X> {
    pub fn new(admit: &'a mut dyn Admit, max: usize) -> Self {
        Choice {
            admit,
            max,
            grants: Vec::new(),
            open_taking: 0,
            open_failing: 0,
            exclude: Vec::new(),
            exclude_retries: Vec::new(),
            exclude_firsts: Vec::new(),
        }
    }

    /// Whether admission's earlier verdicts left this endpoint's jobs of this kind out.
    pub fn left_out(&self, endpoint: &str, is_retry: bool) -> bool {
        self.exclude.iter().any(|e| e == endpoint)
            || (is_retry && self.exclude_retries.iter().any(|e| e == endpoint))
            || (!is_retry && self.exclude_firsts.iter().any(|e| e == endpoint))
    }

    /// Asks admission about `candidate` and keeps its verdict: an admission granted (with
    /// `extra`), or the endpoint's jobs of that kind left out from now on.
    pub fn offer(&mut self, candidate: Candidate, extra: X) -> Offer {
        let verdict = self.admit.admit(&candidate);
        match verdict {
            Verdict::Take | Verdict::Fail => {
                let fail = verdict == Verdict::Fail;
                if fail {
                    self.open_failing += 1;
                } else {
                    self.open_taking += 1;
                }
                self.grants.push(Grant {
                    candidate,
                    extra: Some(extra),
                    fail,
                    standing: Standing::Open,
                });
                if fail {
                    Offer::Failed
                } else {
                    Offer::Taken
                }
            }
            Verdict::HoldEndpoint => {
                self.exclude.push(candidate.endpoint);
                Offer::Held
            }
            Verdict::HoldRetries => {
                self.exclude_retries.push(candidate.endpoint);
                Offer::Held
            }
            Verdict::HoldFirsts => {
                self.exclude_firsts.push(candidate.endpoint);
                Offer::Held
            }
            Verdict::HoldGroup => Offer::GroupHeld,
        }
    }

    /// How many turns `group` takes for each turn of a group of weight 1 (at least 1).
    pub fn weight(&self, group: &str) -> usize {
        self.admit.weight(group).max(1) as usize
    }

    /// Admitted to run and not leased yet.
    pub fn taking(&self) -> usize {
        self.open_taking
    }

    /// Admitted (to run or to fail) and not leased yet.
    pub fn open(&self) -> usize {
        self.open_taking + self.open_failing
    }

    /// As many admitted to run as wanted.
    pub fn is_full(&self) -> bool {
        self.open_taking >= self.max
    }

    /// The seqs of the open admissions, in the order granted.
    pub fn open_seqs(&self) -> Vec<i64> {
        self.open_grants().map(|g| g.candidate.seq).collect()
    }

    fn open_grants(&self) -> impl Iterator<Item = &Grant<X>> {
        self.grants.iter().filter(|g| g.standing == Standing::Open)
    }

    /// Leases the open admissions, in the order granted: `lease` is given each (its candidate,
    /// what was read along, whether it fails) and answers whether it was leased. Those not
    /// leased are handed back at once. The first error stops the leasing: that admission and
    /// every open one after it are handed back without asking, and the error is returned.
    pub fn lease_each<E>(
        &mut self,
        mut lease: impl FnMut(&Candidate, X, bool) -> Result<bool, E>,
    ) -> Result<(), E> {
        let mut failure = None;
        for g in self.grants.iter_mut() {
            if g.standing != Standing::Open {
                continue;
            }
            if g.fail {
                self.open_failing -= 1;
            } else {
                self.open_taking -= 1;
            }
            let leased = match (failure.is_some(), g.extra.take()) {
                (false, Some(extra)) => lease(&g.candidate, extra, g.fail),
                _ => Ok(false),
            };
            g.standing = match leased {
                Ok(true) => Standing::Leased,
                Ok(false) => Standing::Returned,
                Err(e) => {
                    failure = Some(e);
                    Standing::Returned
                }
            };
            if g.standing == Standing::Returned {
                self.admit.not_leased(&g.candidate);
            }
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Admission asked again about every endpoint: one left out may have held only because of
    /// what was just handed back (its first request, its last place).
    pub fn forget_holds(&mut self) {
        self.exclude.clear();
        self.exclude_retries.clear();
        self.exclude_firsts.clear();
    }

    /// The lease is kept (its transaction committed, or is sure to): the admissions leased
    /// stand, and their candidates are returned, in the order granted (to hand back should a
    /// later commit fail after all). Any still open were not leased: they are handed back.
    pub fn keep(mut self) -> Vec<Candidate> {
        self.return_open();
        std::mem::take(&mut self.grants)
            .into_iter()
            .filter(|g| g.standing == Standing::Leased)
            .map(|g| g.candidate)
            .collect()
    }

    fn return_open(&mut self) {
        for g in self.grants.iter_mut() {
            if g.standing == Standing::Open {
                g.standing = Standing::Returned;
                self.admit.not_leased(&g.candidate);
            }
        }
        self.open_taking = 0;
        self.open_failing = 0;
    }
}

impl<X> std::fmt::Debug for Choice<'_, X> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Choice")
            .field("max", &self.max)
            .field("open_taking", &self.open_taking)
            .field("open_failing", &self.open_failing)
            .field("exclude", &self.exclude)
            .field("exclude_retries", &self.exclude_retries)
            .field("exclude_firsts", &self.exclude_firsts)
            .finish_non_exhaustive()
    }
}

impl<X> Drop for Choice<'_, X> {
    fn drop(&mut self) {
        for g in self.grants.iter_mut() {
            if g.standing != Standing::Returned {
                g.standing = Standing::Returned;
                self.admit.not_leased(&g.candidate);
            }
        }
    }
}

/// Where one lease's round-robin looks for turns, in order: the ungrouped jobs (one turn), or
/// the groups named after `after` (and up to `upto`, inclusive, when given), in name order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leg {
    Ungrouped,
    Groups { after: String, upto: Option<String> },
}

/// The order of turns for a lease, from the turn after the one the last lease served
/// (`cursor`; "" for the ungrouped jobs): each turn comes once, wrapping around. Afresh (no
/// cursor), the ungrouped jobs come first.
pub fn legs(cursor: Option<&str>) -> Vec<Leg> {
    let groups = |after: &str, upto: Option<&str>| Leg::Groups {
        after: after.to_owned(),
        upto: upto.map(str::to_owned),
    };
    match cursor {
        None => vec![Leg::Ungrouped, groups("", None)],
        // The ungrouped jobs served last: every group, then them.
        Some("") => vec![groups("", None), Leg::Ungrouped],
        Some(c) => vec![groups(c, None), Leg::Ungrouped, groups("", Some(c))],
    }
}

/// Whether group `g`, found in a leg's name order, is past the leg's end.
pub fn past(leg_upto: Option<&str>, g: &str) -> bool {
    leg_upto.is_some_and(|u| g > u)
}

/// Each turn's share of the `left` slots per unit of weight, in a later pass of the round-robin
/// over the turns that may have more (`weights`): none when nothing is left or no turn may.
pub fn share(left: usize, weights: impl IntoIterator<Item = usize>) -> Option<usize> {
    let total: usize = weights.into_iter().sum();
    (left > 0 && total > 0).then(|| left.div_ceil(total))
}

/// Where the next lease's round-robin starts: after the last group looked at when the looking
/// stopped at its bound ([`GROUP_VISITS`]) with room left, so that the next lease looks further
/// on; otherwise after the last turn served (`None` standing for the ungrouped jobs, kept as "").
/// `None` when there is nothing to keep.
pub fn next_cursor(
    capped_with_room: bool,
    looked_last: Option<String>,
    served_last: Option<Option<String>>,
) -> Option<String> {
    match (capped_with_room, looked_last, served_last) {
        (true, Some(group), _) => Some(group),
        (_, _, Some(turn)) => Some(turn.unwrap_or_default()),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
