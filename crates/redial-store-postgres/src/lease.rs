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
//! Owns the read bounds, the resume positions, the floors and the count of jobs chosen but
//! taken by another node first. Does not own admission (the caller's [`Admit`]) nor the SQL (`sql/lease.rs`).

use crate::sql;
use crate::Conn;
use redial_store::{
    Admit, AdmittedLease, Candidate, Job, LeaseAdmittedParams, LeaseIdsParams, ScanPos,
    StoreResult, Verdict,
};
use std::collections::HashMap;

/// How far one lease request reads past held endpoints' jobs, and where the deep part of the
/// last request stopped, per queue.
#[derive(Debug)]
pub(crate) struct LeaseScan {
    /// Skipped rows read from the head of the queue, every request.
    pub top: usize,
    /// Skipped rows read further on, from where the last request stopped.
    pub deep: usize,
    resume: HashMap<String, ScanPos>,
    floors: HashMap<String, Floor>,
    /// Per queue, the last turn a lease served ("" for the ungrouped jobs): the next lease's
    /// round-robin starts after it.
    groups: HashMap<String, String>,
}

impl Default for LeaseScan {
    fn default() -> Self {
        LeaseScan {
            top: 1024,
            deep: 8192,
            resume: HashMap::new(),
            floors: HashMap::new(),
            groups: HashMap::new(),
        }
    }
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
struct Picker {
    max: usize,
    taking: Vec<Candidate>,
    failing: Vec<Candidate>,
    exclude: Vec<String>,
    exclude_retries: Vec<String>,
    exclude_firsts: Vec<String>,
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

impl Picker {
    fn left_out(&self, c: &Candidate) -> bool {
        self.exclude.contains(&c.endpoint)
            || (c.is_retry && self.exclude_retries.contains(&c.endpoint))
            || (!c.is_retry && self.exclude_firsts.contains(&c.endpoint))
    }

    /// Reads from the head (`from` = None) or after `from`, asking admission of each job not
    /// left out, until enough are taken, `budget` rows were skipped, or rows run out.
    async fn read(
        &mut self,
        c: &mut Conn,
        p: &LeaseAdmittedParams,
        from: Option<ScanPos>,
        budget: usize,
        admit: &mut dyn Admit,
    ) -> StoreResult<ScanEnd> {
        let mut after = from;
        let mut skipped = 0;
        // Enough for the common case (nothing held) in one read; larger reads once rows are
        // being skipped. The first read from the head locks what it reads (each lock is a WAL
        // record, and a row locked but not leased is read again by the next lease), so it
        // reads no more than is wanted.
        let mut chunk = if from.is_none() {
            self.max
        } else {
            self.max * 2 + 8
        };
        loop {
            let want = self.max.saturating_sub(self.taking.len());
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
                if self.taking.len() >= self.max {
                    return Ok(ScanEnd::Full);
                }
                if skipped >= budget {
                    return Ok(ScanEnd::Budget);
                }
                self.last = Some(pos);
                after = Some(pos);
                if self.left_out(&candidate) {
                    skipped += 1;
                    continue;
                }
                let verdict = admit.admit(&candidate);
                if !lock && matches!(verdict, Verdict::Take | Verdict::Fail) {
                    self.unlocked += 1;
                }
                match verdict {
                    Verdict::Take => self.taking.push(candidate),
                    Verdict::Fail => self.failing.push(candidate),
                    Verdict::HoldEndpoint => {
                        skipped += 1;
                        self.exclude.push(candidate.endpoint);
                    }
                    Verdict::HoldRetries => {
                        skipped += 1;
                        self.exclude_retries.push(candidate.endpoint);
                    }
                    Verdict::HoldFirsts => {
                        skipped += 1;
                        self.exclude_firsts.push(candidate.endpoint);
                    }
                    // Not given for an ungrouped job; skipped should it be.
                    Verdict::HoldGroup => skipped += 1,
                }
            }
            if read < n {
                return Ok(if self.taking.len() >= self.max {
                    ScanEnd::Full
                } else {
                    ScanEnd::End
                });
            }
            chunk = (chunk * 4).min(4096);
        }
    }
}

impl Picker {
    /// Round-robin across the queue's groups, the ungrouped jobs (`stash`) taking their turn as
    /// one group: up to as many groups as the lease may take jobs, from the turn after the one
    /// the last lease ended with. Each group's head is read at once, locked (share plus a few
    /// rows each); then each turn offers its weight's share of what is left to admission, pass
    /// after pass, until the lease is full or every turn is spent or holds. Past held
    /// endpoints a turn reads no further than its head in this lease.
    async fn fair(
        &mut self,
        c: &mut Conn,
        p: &LeaseAdmittedParams,
        scan: &std::sync::Mutex<LeaseScan>,
        admit: &mut dyn Admit,
    ) -> StoreResult<bool> {
        let max = self.max.max(1);
        let cursor = scan
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .groups
            .get(&p.queue)
            .cloned();
        // Turns in rotation order: None for the ungrouped jobs, then the groups by name. Only
        // turns with a due job count (the ungrouped jobs' head, read with BEGIN, holds only
        // due ones); groups whose jobs all wait for later are passed over, GROUP_VISITS looked
        // at per lease at most.
        let ungrouped_due = !self.stash.is_empty();
        let mut turns: Vec<Option<String>> = Vec::new();
        let mut visited: Option<String> = None;
        let mut looked = 0;
        let take = |found: Vec<(String, bool)>,
                    turns: &mut Vec<Option<String>>,
                    looked: &mut usize,
                    visited: &mut Option<String>| {
            *looked += found.len();
            if let Some((last, _)) = found.last() {
                *visited = Some(last.clone());
            }
            turns.extend(found.into_iter().filter(|f| f.1).map(|f| Some(f.0)));
        };
        match &cursor {
            None => {
                if ungrouped_due {
                    turns.push(None);
                }
                let want = max - turns.len();
                let found =
                    sql::groups_after(c, &p.queue, "", None, p.now, want, GROUP_VISITS).await?;
                take(found, &mut turns, &mut looked, &mut visited);
            }
            Some(from) => {
                let found =
                    sql::groups_after(c, &p.queue, from, None, p.now, max, GROUP_VISITS).await?;
                take(found, &mut turns, &mut looked, &mut visited);
                let wrapped = turns.len() < max && looked < GROUP_VISITS;
                if wrapped && ungrouped_due {
                    turns.push(None);
                }
                if wrapped && turns.len() < max && !from.is_empty() {
                    let (want, visits) = (max - turns.len(), GROUP_VISITS - looked);
                    let found =
                        sql::groups_after(c, &p.queue, "", Some(from), p.now, want, visits).await?;
                    take(found, &mut turns, &mut looked, &mut visited);
                }
            }
        }
        let capped = turns.len() < max && looked >= GROUP_VISITS;
        let weights: Vec<usize> = turns
            .iter()
            .map(|g| g.as_deref().map_or(1, |g| admit.weight(g).max(1) as usize))
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
                let left = max.saturating_sub(self.taking.len());
                let total: usize = (0..turns.len())
                    .filter(|&i| more[i])
                    .map(|i| weights[i])
                    .sum();
                if left == 0 || total == 0 {
                    break;
                }
                let share = left.div_ceil(total);
                for i in 0..turns.len() {
                    if !more[i] {
                        continue;
                    }
                    if self.taking.len() >= max {
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
                    while took < want && self.taking.len() < max {
                        let Some(cand) = queue.pop_front() else {
                            break;
                        };
                        if self.left_out(&cand) {
                            continue;
                        }
                        match admit.admit(&cand) {
                            Verdict::Take => {
                                took += 1;
                                self.taking.push(cand);
                            }
                            Verdict::Fail => {
                                took += 1;
                                self.failing.push(cand);
                            }
                            Verdict::HoldEndpoint => self.exclude.push(cand.endpoint),
                            Verdict::HoldRetries => self.exclude_retries.push(cand.endpoint),
                            Verdict::HoldFirsts => self.exclude_firsts.push(cand.endpoint),
                            Verdict::HoldGroup => {
                                held[i] = true;
                                break;
                            }
                        }
                    }
                    more[i] = !held[i] && took == want && !queue.is_empty();
                }
                first_pass = false;
            }
            if self.taking.len() >= max {
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
            each += max.saturating_sub(self.taking.len()) + 8;
        }
        // The ungrouped jobs past their head (held endpoints' jobs there, say): when the groups
        // leave room, read on as a lease without groups does, within the same bounds.
        if self.taking.len() < max && self.stash_full {
            if let Some(from) = self.stash_end {
                let top = scan.lock().unwrap_or_else(|e| e.into_inner()).top;
                self.max = max;
                self.read(c, p, Some(from), top.max(1), admit).await?;
            }
        }
        // The next lease starts after the last turn served; after the last group looked at
        // when the looking stopped at its bound with room left (every due turn found was
        // served), so that the next lease looks further on.
        let full = self.taking.len() >= max;
        let last = match (capped && !full, visited, served) {
            (true, Some(v), _) => Some(v),
            (_, _, Some(i)) => Some(turns[i].clone().unwrap_or_default()),
            _ => None,
        };
        if let Some(last) = last {
            scan.lock()
                .unwrap_or_else(|e| e.into_inner())
                .groups
                .insert(p.queue.clone(), last);
        }
        Ok(capped && !full)
    }
}

/// Groups looked at, at most, by one lease's round-robin for turns with a due job.
const GROUP_VISITS: usize = 4096;

/// [`redial_store::Store::job_lease_admitted`] on one connection, in one transaction: bounded
/// reads (the first locking the rows it reads, skipping rows locked by other nodes), admission,
/// the lease statement. Returns the jobs leased and how many chosen jobs another node took first
/// (their admission handed back). A failure hands every admission back and rolls back.
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
        (Ok(l), Ok(())) => Ok((l.lease, l.missed)),
        (Ok(Leased { lease, .. }), Err(e)) => {
            // Not leased after all.
            hand_back(&lease, admit);
            Err(crate::backend(e))
        }
        (Err(e), _) => Err(e),
    }
}

/// What [`lease_in_transaction`] leased.
struct Leased {
    lease: AdmittedLease,
    /// Jobs chosen that another node took first.
    missed: u64,
    /// The transaction was committed with the last lease statement, or never begun.
    ended: bool,
}

async fn lease_in_transaction(
    c: &mut Conn,
    scan: &std::sync::Mutex<LeaseScan>,
    p: &LeaseAdmittedParams,
    admit: &mut dyn Admit,
) -> StoreResult<Leased> {
    let lock = || scan.lock().unwrap_or_else(|e| e.into_inner());
    let now = p.now.as_unix_millis();
    let (top, deep, resume, floor) = {
        let s = lock();
        let floor = s
            .floors
            .get(&p.queue)
            .copied()
            .filter(|f| (0..FLOOR_FOR_MS).contains(&now.saturating_sub(f.full_at)));
        (s.top, s.deep, s.resume.get(&p.queue).copied(), floor)
    };
    let mut picker = Picker {
        max: p.max,
        taking: Vec::new(),
        failing: Vec::new(),
        exclude: Vec::new(),
        exclude_retries: Vec::new(),
        exclude_firsts: Vec::new(),
        last: None,
        begun: false,
        unlocked: 0,
        stash: Vec::new(),
        stash_end: None,
        stash_full: false,
        floor: floor.map(|f| f.pos),
        head: None,
    };
    let read = picker.read(c, p, None, top.max(1), admit).await;
    let head = picker.head.take();
    if read.is_err() {
        lock().floors.remove(&p.queue);
    }
    // Admissions granted before a failed read are handed back.
    let give_back = |picker: &Picker, admit: &mut dyn Admit| {
        for x in picker.failing.iter().chain(&picker.taking) {
            admit.not_leased(x);
        }
    };
    let ended = match read {
        Ok(e) => e,
        Err(e) => {
            give_back(&picker, admit);
            return Err(e);
        }
    };
    let mut more_groups = false;
    match (ended, picker.last) {
        (ScanEnd::Grouped, _) => match picker.fair(c, p, scan, admit).await {
            Ok(more) => more_groups = more,
            Err(e) => {
                give_back(&picker, admit);
                return Err(e);
            }
        },
        (ScanEnd::End, _) => {
            lock().resume.remove(&p.queue);
        }
        (ScanEnd::Full, _) | (ScanEnd::Budget, None) => {}
        (ScanEnd::Budget, Some(last)) => {
            // Onwards from where the last request's deep read stopped, if that is further.
            let from = ScanPos::onwards(resume, last);
            let ended = match picker.read(c, p, Some(from), deep, admit).await {
                Ok(e) => e,
                Err(e) => {
                    give_back(&picker, admit);
                    return Err(e);
                }
            };
            match (ended, picker.last) {
                (ScanEnd::End, _) | (_, None) => {
                    lock().resume.remove(&p.queue);
                }
                (_, Some(stopped)) => {
                    lock().resume.insert(p.queue.clone(), stopped);
                }
            }
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
        if picker.taking.is_empty() && picker.failing.is_empty() {
            break;
        }
        let failing = std::mem::take(&mut picker.failing);
        let taking = std::mem::take(&mut picker.taking);
        // Rows this transaction locked cannot be missed: this statement is the last, and the
        // COMMIT goes out with it.
        let last = std::mem::take(&mut picker.unlocked) == 0 && picker.begun;
        let params = LeaseIdsParams {
            seqs: failing.iter().chain(&taking).map(|x| x.seq).collect(),
            owner: p.owner.clone(),
            now: p.now,
            lease_until: p.lease_until,
        };
        let leased = if last {
            ended = true;
            sql::lease_locked_and_commit(c, &params).await
        } else {
            sql::lease_ids(c, &params).await
        };
        let jobs = match leased {
            Ok(jobs) => jobs,
            Err(e) => {
                // The transaction is aborted: what earlier rounds leased is not leased either.
                for x in failing.iter().chain(&taking) {
                    admit.not_leased(x);
                }
                hand_back(&out, admit);
                return Err(e);
            }
        };
        let mut by_seq: HashMap<i64, Job> = jobs.into_iter().map(|j| (j.seq, j)).collect();
        let mut missed_now = 0;
        for (list, into) in [(&failing, &mut out.failed), (&taking, &mut out.taken)] {
            for x in list {
                match by_seq.remove(&x.seq) {
                    Some(job) => into.push(job),
                    None => {
                        missed_now += 1;
                        admit.not_leased(x);
                    }
                }
            }
        }
        missed += missed_now;
        if ended || missed_now == 0 || out.taken.len() >= p.max || round + 1 == LEASE_ROUNDS {
            break;
        }
        picker.max = p.max - out.taken.len();
        // An endpoint left out may have held only because of what was just handed back (its
        // first request, its last place): every endpoint is asked again.
        picker.exclude.clear();
        picker.exclude_retries.clear();
        picker.exclude_firsts.clear();
        let from = picker.last;
        if let Err(e) = picker.read(c, p, from, top.max(1), admit).await {
            for x in picker.failing.iter().chain(&picker.taking) {
                admit.not_leased(x);
            }
            hand_back(&out, admit);
            return Err(e);
        }
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
    })
}

/// Hands back the admissions of jobs a failed transaction did not lease after all.
fn hand_back(lease: &AdmittedLease, admit: &mut dyn Admit) {
    for job in lease.taken.iter().chain(&lease.failed) {
        admit.not_leased(&Candidate {
            seq: job.seq,
            id: job.id.clone(),
            endpoint: job.endpoint.clone(),
            is_retry: job.attempts > 0,
            run_at: job.run_at,
            group: job.group.clone(),
        });
    }
}

/// Reads of the groups' heads in one lease at most: the first, and further reads of groups
/// whose rows ran out while the lease still had room.
const GROUP_READS: usize = 3;

/// Lease statements in one request at most: the first, and reads on past jobs other nodes took.
const LEASE_ROUNDS: usize = 4;

impl LeaseScan {
    pub fn set(&mut self, top: usize, deep: usize) {
        self.top = top;
        self.deep = deep;
        self.resume.clear();
        self.floors.clear();
    }
}
