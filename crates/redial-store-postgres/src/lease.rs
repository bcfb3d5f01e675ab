//! Leasing on PostgreSQL: reads the runnable jobs of a queue in lease order, asks admission of
//! each, then leases the chosen ones in one statement (`FOR UPDATE SKIP LOCKED`).
//!
//! Past held endpoints' jobs a request reads a bounded number of rows, as the SQLite store does:
//! `top` skipped rows from the head of the queue, then `deep` more onwards from where the last
//! request's deep read stopped (per queue, in this process), so jobs behind a held endpoint's
//! deep backlog are reached over a few requests, each of bounded cost. Reads go in chunks, each
//! after the last row read (keyset on the index's order), so no row is read twice in a request;
//! the endpoints left out are left out here, not in SQL.
//!
//! A read from the head of a deep queue starts where the last one began ([`Floor`]), not at
//! the index's first entry, past which lie the entries of every job leased since the last
//! vacuum.
//!
//! **A job is leased to at most one owner at a time.** The lease is one transaction whose first
//! read of the queue's head locks its rows `FOR UPDATE SKIP LOCKED` and whose UPDATE claims the
//! chosen rows by `seq` the same way (rows all read under that lock are updated by their key,
//! not locked again), so two nodes never both take a job, never wait on each other, and do not
//! pick the same jobs at the head; a job chosen from a later, unlocked read that another node
//! took first is handed back to admission and the read goes on. The head is read across
//! priority levels (jobs scheduled for later at a higher priority are stepped over there), then
//! within a level after the last row read, then the levels below. Grouped jobs: the groups are
//! listed by one statement, each with whether one of its jobs is due (`jobs_grouped_ready`, due
//! scheduled ones read from `jobs_waiting`), and each turn's head is read locked.
//!
//! The picker's decisions (what admission leaves out, the turns between groups, where the next
//! lease starts, the bounds, handing admissions back on every path) are [`redial_store::pick`]'s,
//! shared with the SQLite store. This file owns how PostgreSQL reads (chunks, locks, the floors)
//! and the count of jobs chosen but taken by another node first; the SQL is `sql/lease.rs`.
//!
//! Over 600 lines: the lease's reads, the picker's passes and the lease statement, on one
//! transaction.

use crate::sql;
use crate::Conn;
use redial_store::pick::{self, Choice, Leg, Offer, PickMemory, GROUP_VISITS};
use redial_store::{Admit, AdmittedLease, Job, LeaseAdmittedParams, LeaseIdsParams, ScanPos};
use redial_store::{Candidate, StoreResult};
use std::collections::HashMap;

/// What leases keep between them, per queue: the picker's memory (bounds, where deep reads
/// stopped, the round-robin's place) and the floors.
#[derive(Debug, Default)]
pub(crate) struct LeaseScan {
    pick: PickMemory,
    floors: HashMap<String, Floor>,
}

/// Why a read stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanEnd {
    /// As many taken as wanted.
    Full,
    /// Its budget of skipped rows spent.
    Budget,
    /// No more rows.
    End,
    /// A grouped job is due: the lease goes round-robin across groups ([`Picker::fair`]); the
    /// head of the ungrouped jobs, read (and locked), waits in `Picker::stash`.
    Grouped,
}

/// Candidates chosen so far in one lease request.
struct Picker<'a> {
    choice: Choice<'a, ()>,
    /// The last row considered.
    last: Option<ScanPos>,
    /// The transaction was begun (with the first read).
    begun: bool,
    /// Candidates taking or failing that were read without a lock: the lease statement may find
    /// them taken by another node. Those read locked cannot be.
    unlocked: usize,
    /// The ungrouped head read with BEGIN, when a grouped job is due; where that read ended,
    /// and whether it came back full (more may follow).
    stash: Vec<Candidate>,
    stash_end: Option<ScanPos>,
    stash_full: bool,
    /// Where the first read from the head may start ([`Floor`]), and how that read went.
    floor: Option<ScanPos>,
    head: Option<HeadRead>,
}

/// Where a recent read from the head of a queue began, kept (per queue, in this process) so
/// that the next reads start there instead of stepping over every index entry leased jobs
/// left at the head since the last vacuum: on a queue drained without pause, each read from
/// the head used to step over all of them, a cost that grew with the jobs drained.
///
/// Kept only after a lease whose read from the head came back full and which took all it had
/// slots for (a queue being drained). Everything before the place, in its priority level, was
/// leased, or locked by another transaction, when it was read. Jobs can come due there later: a
/// job released with its old run time (given back by this node's other lease or at shutdown), a
/// job rescued from a dead node, a job enqueued to run in the past, a job enqueued by a node
/// whose clock is a little behind. So the head is read in full again:
/// - at once, in the same transaction, when the read at the floor comes back short (the
///   floor's level ran out, or a level above it has a due job);
/// - by the next lease, started at once (`AdmittedLease::more`), when a lease that read at the
///   floor took fewer jobs than it had slots for (held endpoints, say): the engine never goes
///   idle on the word of a lease that did not look before its floor;
/// - by the first lease [`FLOOR_FOR_MS`] after the head was last read in full.
///
/// Such a job waits about that long past its turn at most.
#[derive(Clone, Copy, Debug)]
struct Floor {
    pos: ScanPos,
    /// When the head was last read in full (Unix milliseconds, the lease's clock).
    full_at: i64,
}

/// How long a floor serves before the head is read in full again.
const FLOOR_FOR_MS: i64 = 1000;

/// How the first read from the head went: where it began, whether it came back full, and
/// whether it was read at the floor.
#[derive(Clone, Copy, Debug)]
struct HeadRead {
    first: Option<ScanPos>,
    full: bool,
    floored: bool,
}

impl Picker<'_> {
    /// Reads from the head (`from` = None) or after `from`, asking admission of each job not
    /// left out, until enough are taken, `budget` rows were skipped, or rows run out.
    ///
    /// Over 100 lines on purpose: the scan's loop: a page read, each row offered to admission, the
    /// position and the skip budget carried from row to row.
    async fn read(
        &mut self,
        c: &mut Conn,
        p: &LeaseAdmittedParams,
        from: Option<ScanPos>,
        budget: usize,
    ) -> StoreResult<ScanEnd> {
        let mut after = from;
        let mut skipped = 0;
        // Enough for the common case (nothing held) in one read; larger reads once rows are
        // being skipped. The first read from the head locks what it reads (each lock is a WAL
        // record, and a row locked but not leased is read again by the next lease), so it
        // reads no more than is wanted.
        let mut chunk = if from.is_none() {
            self.choice.max
        } else {
            self.choice.max * 2 + 8
        };
        loop {
            let want = self.choice.max.saturating_sub(self.choice.taking());
            if want == 0 {
                return Ok(ScanEnd::Full);
            }
            if skipped >= budget {
                return Ok(ScanEnd::Budget);
            }
            let n = chunk.min(want + (budget - skipped)).max(1);
            // The first read of the head locks its rows, skipping those other nodes are
            // taking: two nodes leasing at once take different jobs instead of the same ones.
            // It goes out with the transaction's BEGIN.
            let lock = after.is_none();
            let head = if !self.begun {
                sql::Head::BeginLocked
            } else {
                sql::Head::Locked
            };
            self.begun = true;
            let first = head == sql::Head::BeginLocked;
            let mut grouped = false;
            let mut floored = false;
            let floor = if first { self.floor.take() } else { None };
            let rows = sql::runnable(
                c,
                &p.queue,
                p.now,
                after,
                n,
                head,
                floor,
                &mut grouped,
                &mut floored,
            )
            .await?;
            let read = rows.len();
            if first {
                self.head = Some(HeadRead {
                    first: rows.first().map(|(_, pos)| *pos),
                    full: read >= n,
                    floored,
                });
            }
            if first && grouped {
                self.stash_end = rows.last().map(|(_, pos)| *pos);
                self.stash_full = read >= n;
                self.stash = rows.into_iter().map(|(c, _)| c).collect();
                return Ok(ScanEnd::Grouped);
            }
            for (candidate, pos) in rows {
                if self.choice.is_full() {
                    return Ok(ScanEnd::Full);
                }
                if skipped >= budget {
                    return Ok(ScanEnd::Budget);
                }
                self.last = Some(pos);
                after = Some(pos);
                if self
                    .choice
                    .left_out(&candidate.endpoint, candidate.is_retry)
                {
                    skipped += 1;
                    continue;
                }
                match self.choice.offer(candidate, ()) {
                    Offer::Taken | Offer::Failed => {
                        if !lock {
                            self.unlocked += 1;
                        }
                    }
                    // A group's hold is not given for an ungrouped job; skipped should it be.
                    Offer::Held | Offer::GroupHeld => skipped += 1,
                }
            }
            if read < n {
                return Ok(if self.choice.is_full() {
                    ScanEnd::Full
                } else {
                    ScanEnd::End
                });
            }
            chunk = (chunk * 4).min(4096);
        }
    }
}

impl Picker<'_> {
    /// Round-robin across the queue's groups, the ungrouped jobs (`stash`) taking their turn as
    /// one group: up to as many groups as the lease may take jobs, in [`pick::legs`]'s order.
    /// Each group's head is read at once, locked (share plus a few rows each); then each turn
    /// offers its weight's share of what is left to admission ([`pick::share`]), pass after
    /// pass, until the lease is full or every turn is spent or holds. Past held endpoints a
    /// turn reads no further than its head in this lease.
    ///
    /// Over 100 lines on purpose: one round-robin over the groups' heads and their shares: its
    /// state (the turns, what each took and read) lives across the passes, and a split would hand
    /// all of it to every part.
    async fn fair(
        &mut self,
        c: &mut Conn,
        p: &LeaseAdmittedParams,
        scan: &std::sync::Mutex<LeaseScan>,
    ) -> StoreResult<bool> {
        let max = self.choice.max.max(1);
        let legs = pick::legs(
            scan.lock()
                .unwrap_or_else(|e| e.into_inner())
                .pick
                .cursor(&p.queue),
        );
        // Turns in rotation order. Only turns with a due job count (the ungrouped jobs' head,
        // read with BEGIN, holds only due ones); groups whose jobs all wait for later are passed
        // over, GROUP_VISITS looked at per lease at most.
        let ungrouped_due = !self.stash.is_empty();
        let mut turns: Vec<Option<String>> = Vec::new();
        let mut visited: Option<String> = None;
        let mut looked = 0;
        for (i, leg) in legs.into_iter().enumerate() {
            if i > 0 && (turns.len() >= max || looked >= GROUP_VISITS) {
                break;
            }
            match leg {
                Leg::Ungrouped => {
                    if ungrouped_due {
                        turns.push(None);
                    }
                }
                Leg::Groups { after, upto } => {
                    let (want, visits) = (max - turns.len(), GROUP_VISITS - looked);
                    let found = sql::groups_after(
                        c,
                        &p.queue,
                        &after,
                        upto.as_deref(),
                        p.now,
                        want,
                        visits,
                    )
                    .await?;
                    looked += found.len();
                    if let Some((last, _)) = found.last() {
                        visited = Some(last.clone());
                    }
                    turns.extend(found.into_iter().filter(|f| f.1).map(|f| Some(f.0)));
                }
            }
        }
        let capped = turns.len() < max && looked >= GROUP_VISITS;
        let weights: Vec<usize> = turns
            .iter()
            .map(|g| g.as_deref().map_or(1, |g| self.choice.weight(g)))
            .collect();
        let groups: Vec<String> = turns.iter().flatten().cloned().collect();
        let heaviest = weights.iter().copied().max().unwrap_or(1);
        let mut each = (max.div_ceil(turns.len().max(1)) * heaviest + 8).min(max + 8);
        let mut heads: HashMap<String, std::collections::VecDeque<Candidate>> = HashMap::new();
        // Rows read per group by the last read of its head, and every row read: a group whose
        // read came back full may have more, read again (further) if the lease is not full.
        let mut read_n: HashMap<String, usize> = HashMap::new();
        let mut seen: std::collections::HashSet<i64> = std::collections::HashSet::new();
        let mut to_read = groups;
        let mut ungrouped: std::collections::VecDeque<Candidate> =
            std::mem::take(&mut self.stash).into();
        let mut more = vec![true; turns.len()];
        let mut held = vec![false; turns.len()];
        let mut served = None;
        let mut first_pass = true;
        for _ in 0..GROUP_READS {
            if !to_read.is_empty() {
                read_n.clear();
                for cand in sql::group_heads(c, &p.queue, &to_read, p.now, each).await? {
                    let g = cand.group.clone().unwrap_or_default();
                    *read_n.entry(g.clone()).or_default() += 1;
                    // Rows this transaction read before come again (its own locks do not
                    // skip them): each is offered once.
                    if seen.insert(cand.seq) {
                        heads.entry(g).or_default().push_back(cand);
                    }
                }
            }
            loop {
                let left = max.saturating_sub(self.choice.taking());
                let offered = (0..turns.len()).filter(|&i| more[i]).map(|i| weights[i]);
                let Some(share) = pick::share(left, offered) else {
                    break;
                };
                for i in 0..turns.len() {
                    if !more[i] {
                        continue;
                    }
                    if self.choice.taking() >= max {
                        break;
                    }
                    if first_pass {
                        served = Some(i);
                    }
                    let queue = match &turns[i] {
                        None => &mut ungrouped,
                        Some(g) => heads.entry(g.clone()).or_default(),
                    };
                    let want = share * weights[i];
                    let mut took = 0;
                    while took < want && self.choice.taking() < max {
                        let Some(cand) = queue.pop_front() else {
                            break;
                        };
                        if self.choice.left_out(&cand.endpoint, cand.is_retry) {
                            continue;
                        }
                        match self.choice.offer(cand, ()) {
                            Offer::Taken | Offer::Failed => took += 1,
                            Offer::Held => {}
                            Offer::GroupHeld => {
                                held[i] = true;
                                break;
                            }
                        }
                    }
                    more[i] = !held[i] && took == want && !queue.is_empty();
                }
                first_pass = false;
            }
            if self.choice.taking() >= max {
                break;
            }
            // Groups whose rows read ran out while their read came back full: read further.
            to_read = Vec::new();
            for (i, turn) in turns.iter().enumerate() {
                if let Some(g) = turn {
                    if !held[i] && read_n.get(g).copied().unwrap_or(0) >= each {
                        to_read.push(g.clone());
                        more[i] = true;
                    }
                }
            }
            if to_read.is_empty() {
                break;
            }
            each += max.saturating_sub(self.choice.taking()) + 8;
        }
        // The ungrouped jobs past their head (held endpoints' jobs there, say): when the groups
        // leave room, read on as a lease without groups does, within the same bounds.
        if self.choice.taking() < max && self.stash_full {
            if let Some(from) = self.stash_end {
                let top = scan.lock().unwrap_or_else(|e| e.into_inner()).pick.top;
                self.choice.max = max;
                self.read(c, p, Some(from), top).await?;
            }
        }
        // Where the next lease starts ([`pick::next_cursor`]): every due turn found was served
        // when the looking stopped at its bound with room left.
        let full = self.choice.taking() >= max;
        let served = served.map(|i| turns[i].clone());
        let next = pick::next_cursor(capped && !full, visited, served);
        scan.lock()
            .unwrap_or_else(|e| e.into_inner())
            .pick
            .set_cursor(&p.queue, next);
        Ok(capped && !full)
    }
}

/// [`redial_store::Store::job_lease_admitted`] on one connection, in one transaction: bounded
/// reads (the first locking the rows it reads, skipping rows locked by other nodes), admission,
/// the lease statement. Returns the jobs leased and how many chosen jobs another node took first
/// (their admission handed back). A failure rolls back, and every admission is handed back
/// ([`Choice`]'s drop), as it is should this future be dropped.
pub(crate) async fn lease_admitted(
    c: &mut Conn,
    scan: &std::sync::Mutex<LeaseScan>,
    p: &LeaseAdmittedParams,
    admit: &mut dyn Admit,
) -> StoreResult<(AdmittedLease, u64)> {
    // Should this future be dropped before the end (even while BEGIN is on its way), the pool
    // rolls back before the next use. BEGIN goes out with the first read.
    c.open_transaction = true;
    let leased = lease_in_transaction(c, scan, p, admit).await;
    let ended = match &leased {
        Ok(Leased { ended: true, .. }) => Ok(()),
        Ok(_) => c.client.batch_execute("COMMIT").await,
        Err(_) => c.client.batch_execute("ROLLBACK").await,
    };
    c.open_transaction = false;
    match (leased, ended) {
        (Ok(l), Ok(())) => {
            l.choice.keep();
            Ok((l.lease, l.missed))
        }
        // Not leased after all: dropping the choice hands every admission back.
        (Ok(_), Err(e)) => Err(crate::backend(e)),
        (Err(e), _) => Err(e),
    }
}

/// What [`lease_in_transaction`] leased.
struct Leased<'a> {
    lease: AdmittedLease,
    /// Jobs chosen that another node took first.
    missed: u64,
    /// The transaction was committed with the last lease statement, or never begun.
    ended: bool,
    /// The admissions, kept once the transaction commits.
    choice: Choice<'a, ()>,
}

/// Over 100 lines on purpose: one transaction's steps on one connection, in the order that makes it
/// correct (lock, read, admit, write, commit); read at once, the order is the argument.
async fn lease_in_transaction<'a>(
    c: &mut Conn,
    scan: &std::sync::Mutex<LeaseScan>,
    p: &LeaseAdmittedParams,
    admit: &'a mut dyn Admit,
) -> StoreResult<Leased<'a>> {
    let lock = || scan.lock().unwrap_or_else(|e| e.into_inner());
    let now = p.now.as_unix_millis();
    let (top, deep, floor) = {
        let s = lock();
        let floor = s
            .floors
            .get(&p.queue)
            .copied()
            .filter(|f| (0..FLOOR_FOR_MS).contains(&now.saturating_sub(f.full_at)));
        (s.pick.top, s.pick.deep, floor)
    };
    let mut picker = Picker {
        choice: Choice::new(admit, p.max),
        last: None,
        begun: false,
        unlocked: 0,
        stash: Vec::new(),
        stash_end: None,
        stash_full: false,
        floor: floor.map(|f| f.pos),
        head: None,
    };
    let read = picker.read(c, p, None, top).await;
    let head = picker.head.take();
    if read.is_err() {
        lock().floors.remove(&p.queue);
    }
    let mut more_groups = false;
    match (read?, picker.last) {
        (ScanEnd::Grouped, _) => more_groups = picker.fair(c, p, scan).await?,
        (ScanEnd::End, _) => lock().pick.ran_out(&p.queue),
        (ScanEnd::Full, _) | (ScanEnd::Budget, None) => {}
        (ScanEnd::Budget, Some(last)) => {
            let from = lock().pick.deep_start(&p.queue, last);
            let ended = picker.read(c, p, Some(from), deep).await?;
            lock()
                .pick
                .deep_read_ended(&p.queue, ended == ScanEnd::End, picker.last);
        }
    }
    // Lease what was chosen. Jobs another node took first (it read the same head of the queue)
    // are handed back; then the read goes on after the last row read, for what is still
    // wanted, a few times at most.
    let mut out = AdmittedLease {
        more: more_groups,
        ..AdmittedLease::default()
    };
    let mut missed = 0;
    // No BEGIN went out without a read: nothing to commit.
    let mut ended = !picker.begun;
    for round in 0..LEASE_ROUNDS {
        if picker.choice.open() == 0 {
            break;
        }
        // Rows this transaction locked cannot be missed: this statement is the last, and the
        // COMMIT goes out with it.
        let last = std::mem::take(&mut picker.unlocked) == 0 && picker.begun;
        let params = LeaseIdsParams {
            seqs: picker.choice.open_seqs(),
            owner: p.owner.clone(),
            now: p.now,
            lease_until: p.lease_until,
        };
        // On an error the transaction is aborted: what earlier rounds leased is not leased
        // either, and the picker's drop hands every admission back.
        let jobs = if last {
            ended = true;
            sql::lease_locked_and_commit(c, &params).await?
        } else {
            sql::lease_ids(c, &params).await?
        };
        let mut by_seq: HashMap<i64, Job> = jobs.into_iter().map(|j| (j.seq, j)).collect();
        let mut missed_now = 0;
        let (taken, failed) = (&mut out.taken, &mut out.failed);
        let leasing = picker.choice.lease_each(|chosen, (), fail| {
            let Some(job) = by_seq.remove(&chosen.seq) else {
                missed_now += 1;
                return Ok(false);
            };
            if fail {
                failed.push(job);
            } else {
                taken.push(job);
            }
            Ok::<_, std::convert::Infallible>(true)
        });
        if let Err(never) = leasing {
            match never {}
        }
        missed += missed_now;
        if ended || missed_now == 0 || out.taken.len() >= p.max || round + 1 == LEASE_ROUNDS {
            break;
        }
        picker.choice.max = p.max - out.taken.len();
        picker.choice.forget_holds();
        let from = picker.last;
        picker.read(c, p, from, top).await?;
    }
    // The next lease's floor: where this lease's read from the head began, when that read came
    // back full and the lease took all it had slots for (a queue being drained). A lease that
    // read at the floor and still came up short (held endpoints, say) has not looked before
    // it: the next reads the head in full, at once.
    let took_all = out.taken.len() >= p.max;
    match head {
        Some(HeadRead {
            first: Some(pos),
            full: true,
            floored,
        }) if took_all => {
            let full_at = match (floored, floor) {
                (true, Some(f)) => f.full_at,
                _ => now,
            };
            lock()
                .floors
                .insert(p.queue.clone(), Floor { pos, full_at });
        }
        _ => {
            lock().floors.remove(&p.queue);
        }
    }
    if matches!(head, Some(HeadRead { floored: true, .. })) && !took_all {
        out.more = true;
    }
    Ok(Leased {
        lease: out,
        missed,
        ended,
        choice: picker.choice,
    })
}

/// Reads of the groups' heads in one lease at most: the first, and further reads of groups
/// whose rows ran out while the lease still had room.
const GROUP_READS: usize = 3;

/// Lease statements in one request at most: the first, and reads on past jobs other nodes took.
const LEASE_ROUNDS: usize = 4;

impl LeaseScan {
    /// Sets the read bounds and forgets where deep reads stopped and the floors.
    pub fn set(&mut self, top: usize, deep: usize) {
        self.pick.set_bounds(top, deep);
        self.floors.clear();
    }
}
