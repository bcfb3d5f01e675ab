//! Leasing: candidates, the reads of the lease picker over priority levels and groups (bounded
//! reads past held endpoints, carried on from where the last lease stopped), and taking the
//! chosen jobs. The picker's decisions (what admission leaves out, the turns between groups,
//! where the next lease starts, the bounds, handing admissions back) are
//! [`redial_store::pick`]'s, shared with the PostgreSQL store: this file only reads rows.
//!
//! A lease is one request on the storage thread: the admission callback runs there, inside the
//! batch's transaction, while the candidates are stepped off `jobs_runnable` (index only; a
//! candidate's row is read once, for admission and for the lease, and the lease's conditional
//! UPDATE patches it instead of reading it back). It reads one priority level at a time, so jobs
//! scheduled for later end each level's read (a range of the index) rather than being stepped
//! over. Grouped jobs are in `jobs_grouped` (queue, group, lease order) instead of
//! `jobs_runnable`, and `jobs_grouped_due` (queue, run time) serves the due probe and the next
//! run time; the first pass of the round-robin takes each turn's weight in jobs, and a turn that
//! takes none is passed over.
//!
//! Over 600 lines: the lease's statements and the picker's reads, whose SQL and query plans are
//! checked together.

use super::{backend, ms, query_rows, raw_from_row, ts, Sp, COLS};
use crate::counts;
use redial_policy::Timestamp;
use redial_store::pick::{self, Choice, Leg, Offer, PickMemory, GROUP_VISITS};
use redial_store::{
    Admit, Candidate, CandidateParams, JobId, JobState, LeaseAdmittedParams, LeaseIdsParams,
    RawJob, ScanPos, StoreError, StoreResult,
};
use rusqlite::types::Value;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Statement};

/// The highest priority level below `?2` with waiting ungrouped jobs in a queue.
pub(super) const PRIORITY_BELOW: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_runnable WHERE queue = ?1 AND ",
    ungrouped!(),
    " AND priority < ?2 ORDER BY priority DESC LIMIT 1"
);
/// The earliest run time after `?3` within one priority level, of ungrouped jobs.
pub(super) const FIRST_AFTER: &str = concat!(
    "SELECT run_at FROM jobs INDEXED BY jobs_runnable WHERE queue = ?1 AND ",
    ungrouped!(),
    " AND priority = ?2 AND run_at > ?3 ORDER BY run_at LIMIT 1"
);
/// The earliest run time after `?2` of the queue's grouped jobs.
pub(super) const GROUPED_FIRST_AFTER: &str = concat!(
    "SELECT run_at FROM jobs INDEXED BY jobs_grouped_due WHERE queue = ?1 AND ",
    grouped!(),
    " AND run_at > ?2 ORDER BY run_at LIMIT 1"
);

/// The earliest run time after `after` among the queue's waiting jobs. `jobs_runnable` orders
/// by priority before run time, so this probes each priority level that has waiting ungrouped
/// jobs (two index seeks per level; queues use a handful): no index of its own to keep up on
/// every enqueue and lease (migration 10). Grouped jobs have one (`jobs_grouped_due`).
pub fn next_run_at(
    c: &mut Connection,
    queue: &str,
    after: Timestamp,
) -> StoreResult<Option<Timestamp>> {
    let after = ms(after);
    let mut below = c.prepare_cached(PRIORITY_BELOW).map_err(backend)?;
    let mut first = c.prepare_cached(FIRST_AFTER).map_err(backend)?;
    let mut earliest: Option<i64> = c
        .prepare_cached(GROUPED_FIRST_AFTER)
        .and_then(|mut s| s.query_row(params![queue, after], |r| r.get(0)).optional())
        .map_err(backend)?;
    // Priorities are i32: every level is below i64::MAX.
    let mut level = i64::MAX;
    while let Some(priority) = below
        .query_row(params![queue, level], |r| r.get::<_, i64>(0))
        .optional()
        .map_err(backend)?
    {
        let at: Option<i64> = first
            .query_row(params![queue, priority, after], |r| r.get(0))
            .optional()
            .map_err(backend)?;
        earliest = earliest.into_iter().chain(at).min();
        level = priority;
    }
    Ok(ts(earliest))
}

/// `?n, ?n+1, ...` for `count` values starting at parameter `first`.
pub(super) fn placeholders(first: usize, count: usize) -> String {
    (first..first + count)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads in lease order, grouped and ungrouped jobs together (not the engine's path: it sorts
/// the waiting jobs it reads).
pub fn candidates(c: &mut Connection, p: &CandidateParams) -> StoreResult<Vec<Candidate>> {
    let mut params = vec![Value::Text(p.queue.clone()), Value::Integer(ms(p.now))];
    let mut sql = concat!(
        "SELECT seq, id, endpoint, attempts > 0, run_at, grp FROM jobs WHERE queue = ?1 AND ",
        waiting!(),
        " AND ord_wait = 0 AND run_at <= ?2"
    )
    .to_owned();
    if !p.exclude.is_empty() {
        sql.push_str(&format!(
            " AND endpoint NOT IN ({})",
            placeholders(params.len() + 1, p.exclude.len())
        ));
        params.extend(p.exclude.iter().map(|e| Value::Text(e.clone())));
    }
    if !p.exclude_retries.is_empty() {
        sql.push_str(&format!(
            " AND NOT (attempts > 0 AND endpoint IN ({}))",
            placeholders(params.len() + 1, p.exclude_retries.len())
        ));
        params.extend(p.exclude_retries.iter().map(|e| Value::Text(e.clone())));
    }
    if !p.exclude_firsts.is_empty() {
        sql.push_str(&format!(
            " AND NOT (attempts = 0 AND endpoint IN ({}))",
            placeholders(params.len() + 1, p.exclude_firsts.len())
        ));
        params.extend(p.exclude_firsts.iter().map(|e| Value::Text(e.clone())));
    }
    params.push(Value::Integer(i64::from(p.limit)));
    sql.push_str(&format!(
        " ORDER BY priority DESC, run_at, seq LIMIT ?{}",
        params.len()
    ));
    let rows = query_rows(c, &sql, params_from_iter(params.iter()), |r| {
        Ok(Candidate {
            seq: r.get(0)?,
            id: JobId(r.get(1)?),
            endpoint: r.get(2)?,
            is_retry: r.get(3)?,
            run_at: Timestamp::from_unix_millis(r.get(4)?),
            group: r.get(5)?,
        })
    })?;
    Ok(rows)
}

/// Returns the leased rows undecoded: the caller decodes them off the storage thread.
/// Leases one job, found by seq, if it is still runnable (and the head of its key's line, if it
/// has a key): ?1 owner, ?2 lease until, ?3 now, ?4 seq.
/// `OR FAIL`, so that SQLite keeps no statement journal for it: one row, no trigger, nothing
/// that can break a constraint (see `record::record_leased`).
pub(super) const LEASE_ONE: &str = concat!(
    "UPDATE OR FAIL jobs SET state = 'running', lease_owner = ?1, lease_until = ?2, updated_at = ?3 \
     WHERE seq = ?4 AND ord_wait = 0 AND ",
    waiting!(),
    " AND run_at <= ?3"
);

/// Leases the jobs of `seqs` that are still runnable, in that order.
pub fn lease_ids(c: &mut Connection, p: &LeaseIdsParams) -> StoreResult<Vec<RawJob>> {
    let (seqs, owner, now, lease_until) = (&p.seqs, &p.owner, p.now, p.lease_until);
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    let tx = Sp::begin(c)?;
    // Cached statements run per job, found by rowid: an `IN (...)` list of varying length would
    // be parsed afresh for nearly every call, and `RETURNING` builds a temporary table every run.
    let mut leased = Vec::with_capacity(seqs.len());
    {
        let mut update = tx.prepare_cached(LEASE_ONE).map_err(backend)?;
        let mut before = tx
            .prepare_cached("SELECT queue, endpoint, state FROM jobs WHERE seq = ?1")
            .map_err(backend)?;
        for seq in seqs {
            // What the lease moves, for the counts (this path is not the engine's).
            let was: Option<(String, String, String)> = before
                .query_row([seq], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()
                .map_err(backend)?;
            if update
                .execute(params![owner, ms(lease_until), ms(now), seq])
                .map_err(backend)?
                == 1
            {
                if let Some((queue, endpoint, state)) = was {
                    let from: JobState = state.parse().map_err(StoreError::Backend)?;
                    let to = Some((JobState::Running, None));
                    counts::moved(&queue, &endpoint, Some((from, None)), to, 1);
                }
                leased.push(*seq);
            }
        }
    }
    static SQL: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {COLS} FROM jobs WHERE seq = ?1"));
    let mut jobs = Vec::with_capacity(leased.len());
    {
        let mut read = tx.prepare_cached(&SQL).map_err(backend)?;
        for seq in leased {
            let mut rows = read.query([seq]).map_err(backend)?;
            if let Some(r) = rows.next().map_err(backend)? {
                jobs.push(raw_from_row(r).map_err(backend)?);
            }
        }
    }
    tx.commit()?;
    Ok(jobs)
}

/// Candidates chosen so far in one lease request.
pub(super) struct Picker<'c, 'a> {
    read: rusqlite::CachedStatement<'c>,
    choice: Choice<'a, RawJob>,
    last: Option<ScanPos>,
    /// The seqs taken or failed so far: a group read again in a later pass of the round-robin
    /// passes over them.
    picked: std::collections::HashSet<i64>,
}

/// Why a scan stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ScanEnd {
    /// As many taken as wanted.
    Full,
    /// Its budget of skipped rows spent.
    Budget,
    /// No more rows.
    End,
    /// The group being read holds (a limit of its own).
    GroupHeld,
}

impl Picker<'_, '_> {
    /// Steps `stmt` (columns seq, endpoint, is retry, priority, run_at), asking admission of each
    /// job not left out, until enough are taken, `budget` rows were skipped, or rows run out;
    /// says why it stopped and how many rows it skipped.
    fn scan(
        &mut self,
        stmt: &mut Statement<'_>,
        params: impl rusqlite::Params,
        budget: usize,
    ) -> StoreResult<(ScanEnd, usize)> {
        let mut skipped = 0;
        let mut rows = stmt.query(params).map_err(backend)?;
        loop {
            if self.choice.is_full() {
                return Ok((ScanEnd::Full, skipped));
            }
            if skipped >= budget {
                return Ok((ScanEnd::Budget, skipped));
            }
            let Some(r) = rows.next().map_err(backend)? else {
                return Ok((ScanEnd::End, skipped));
            };
            let seq: i64 = r.get(0).map_err(backend)?;
            self.last = Some(ScanPos {
                priority: r.get(3).map_err(backend)?,
                run_at: r.get(4).map_err(backend)?,
                seq,
            });
            let endpoint = r.get_ref(1).map_err(backend)?;
            let endpoint = endpoint
                .as_str()
                .map_err(|e| StoreError::Backend(e.to_string()))?;
            let is_retry: bool = r.get(2).map_err(backend)?;
            if self.picked.contains(&seq) {
                continue;
            }
            if self.choice.left_out(endpoint, is_retry) {
                skipped += 1;
                continue;
            }
            let mut found = self.read.query([seq]).map_err(backend)?;
            let Some(row) = found.next().map_err(backend)? else {
                continue;
            };
            let raw = raw_from_row(row).map_err(backend)?;
            let candidate = Candidate {
                seq,
                id: raw.job.id.clone(),
                endpoint: raw.job.endpoint.clone(),
                is_retry,
                run_at: raw.job.run_at,
                group: raw.job.group.clone(),
            };
            match self.choice.offer(candidate, raw) {
                Offer::Taken | Offer::Failed => {
                    self.picked.insert(seq);
                }
                Offer::Held => skipped += 1,
                Offer::GroupHeld => return Ok((ScanEnd::GroupHeld, skipped + 1)),
            }
        }
    }
}

/// The highest priority level with waiting jobs, below `below` when given (an index seek).
pub(super) const LEVEL_TOP: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_runnable WHERE queue = ?1 AND ",
    ungrouped!(),
    " ORDER BY priority DESC LIMIT 1"
);
pub(super) const LEVEL_BELOW: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_runnable WHERE queue = ?1 AND ",
    ungrouped!(),
    " AND priority < ?2 ORDER BY priority DESC LIMIT 1"
);
/// The due jobs of one priority level, in lease order. With the level fixed, `run_at <= now` is
/// a range of the index: the read ends at the first job scheduled for later instead of stepping
/// over every one of them (a queue holding a million jobs scheduled for tomorrow made every
/// lease read the whole index when the levels were read together).
pub(super) const LEVEL_DUE: &str = concat!(
    "SELECT seq, endpoint, attempts > 0, priority, run_at FROM jobs INDEXED BY jobs_runnable \
     WHERE queue = ?1 AND ",
    ungrouped!(),
    " AND priority = ?3 AND run_at <= ?2 ORDER BY run_at, seq"
);

/// [`LEVEL_TOP`], [`LEVEL_BELOW`] and [`LEVEL_DUE`] within one group (`?4`), off `jobs_grouped`.
pub(super) const GROUP_LEVEL_TOP: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_grouped WHERE queue = ?1 AND grp = ?4 AND ",
    grouped!(),
    " ORDER BY priority DESC LIMIT 1"
);
pub(super) const GROUP_LEVEL_BELOW: &str = concat!(
    "SELECT priority FROM jobs INDEXED BY jobs_grouped WHERE queue = ?1 AND grp = ?4 AND ",
    grouped!(),
    " AND priority < ?2 ORDER BY priority DESC LIMIT 1"
);
pub(super) const GROUP_LEVEL_DUE: &str = concat!(
    "SELECT seq, endpoint, attempts > 0, priority, run_at FROM jobs INDEXED BY jobs_grouped \
     WHERE queue = ?1 AND grp = ?4 AND ",
    grouped!(),
    " AND priority = ?3 AND run_at <= ?2 ORDER BY run_at, seq"
);
/// Whether one of the queue's grouped jobs is due.
pub(super) const GROUPED_DUE: &str = concat!(
    "SELECT 1 FROM jobs INDEXED BY jobs_grouped_due WHERE queue = ?1 AND ",
    grouped!(),
    " AND run_at <= ?2 LIMIT 1"
);
/// The next group after `?2` with waiting jobs (a loose scan of `jobs_grouped`: one seek per
/// group, however many jobs each holds).
pub(super) const GROUP_AFTER: &str = concat!(
    "SELECT grp FROM jobs INDEXED BY jobs_grouped WHERE queue = ?1 AND grp > ?2 AND ",
    grouped!(),
    " ORDER BY grp LIMIT 1"
);

impl Picker<'_, '_> {
    /// Reads the due jobs level by level, from the highest below `below` (all levels when
    /// `None`) down, until enough are taken, `budget` rows were skipped in all, or levels run out:
    /// the queue's ungrouped jobs, or one group's.
    fn scan_levels(
        &mut self,
        c: &Connection,
        queue: &str,
        group: Option<&str>,
        now: i64,
        below: Option<i64>,
        budget: usize,
    ) -> StoreResult<ScanEnd> {
        let mut below = below;
        let mut left = budget;
        loop {
            let level: Option<i64> = match (below, group) {
                (None, None) => c
                    .prepare_cached(LEVEL_TOP)
                    .and_then(|mut s| s.query_row([queue], |r| r.get(0)).optional()),
                (Some(b), None) => c
                    .prepare_cached(LEVEL_BELOW)
                    .and_then(|mut s| s.query_row(params![queue, b], |r| r.get(0)).optional()),
                (None, Some(g)) => c.prepare_cached(GROUP_LEVEL_TOP).and_then(|mut s| {
                    // ?2 and ?3 are not in this statement: numbered parameters leave gaps.
                    s.raw_bind_parameter(1, queue)?;
                    s.raw_bind_parameter(4, g)?;
                    let mut rows = s.raw_query();
                    rows.next()?.map(|r| r.get(0)).transpose()
                }),
                (Some(b), Some(g)) => c.prepare_cached(GROUP_LEVEL_BELOW).and_then(|mut s| {
                    s.raw_bind_parameter(1, queue)?;
                    s.raw_bind_parameter(2, b)?;
                    s.raw_bind_parameter(4, g)?;
                    let mut rows = s.raw_query();
                    rows.next()?.map(|r| r.get(0)).transpose()
                }),
            }
            .map_err(backend)?;
            let Some(level) = level else {
                return Ok(ScanEnd::End);
            };
            let scanned = match group {
                None => {
                    let mut due = c.prepare_cached(LEVEL_DUE).map_err(backend)?;
                    self.scan(&mut due, params![queue, now, level], left)?
                }
                Some(g) => {
                    let mut due = c.prepare_cached(GROUP_LEVEL_DUE).map_err(backend)?;
                    self.scan(&mut due, params![queue, now, level, g], left)?
                }
            };
            match scanned {
                (ScanEnd::End, skipped) => {
                    left = left.saturating_sub(skipped);
                    below = Some(level);
                }
                (end, _) => return Ok(end),
            }
        }
    }

    /// The queue's ungrouped jobs: from the head (`memory.top` skipped rows at most), then
    /// onwards from where the last request's deep read stopped (`memory.deep`).
    fn scan_ungrouped(
        &mut self,
        c: &Connection,
        queue: &str,
        now: i64,
        memory: &mut PickMemory,
    ) -> StoreResult<ScanEnd> {
        // Every column read while stepping is in `jobs_runnable`: rows skipped cost no table
        // lookup.
        const SAME_PRIORITY_AFTER: &str = concat!(
            "SELECT seq, endpoint, attempts > 0, priority, run_at FROM jobs INDEXED BY jobs_runnable \
             WHERE queue = ?1 AND ",
            ungrouped!(),
            " AND run_at <= ?2 AND priority = ?3 AND (run_at, seq) > (?4, ?5) ORDER BY run_at, seq"
        );
        self.last = None;
        let ended = self.scan_levels(c, queue, None, now, None, memory.top)?;
        match (ended, self.last) {
            (ScanEnd::End, _) => {
                memory.ran_out(queue);
                Ok(ScanEnd::End)
            }
            (ScanEnd::Budget, Some(last)) => {
                let from = memory.deep_start(queue, last);
                let mut same = c.prepare_cached(SAME_PRIORITY_AFTER).map_err(backend)?;
                let (mut ended, _) = self.scan(
                    &mut same,
                    params![queue, now, from.priority, from.run_at, from.seq],
                    memory.deep,
                )?;
                if ended == ScanEnd::End {
                    ended =
                        self.scan_levels(c, queue, None, now, Some(from.priority), memory.deep)?;
                }
                memory.deep_read_ended(queue, ended == ScanEnd::End, self.last);
                Ok(ended)
            }
            (end, _) => Ok(end),
        }
    }

    /// Round-robin across the queue's groups, the ungrouped jobs taking their turn as one
    /// group, in [`pick::legs`]'s order. The first pass goes round once, each turn taking its
    /// weight in jobs (a group with nothing due takes none and does not count), until the lease
    /// is full, every turn was visited, or GROUP_VISITS groups were looked at; later passes share
    /// what is left among the turns that filled theirs, by weight ([`pick::share`]), until the
    /// lease is full or every turn is spent or holds. Returns whether the first pass stopped at
    /// its bound with room left: more may be due further on.
    fn scan_fair(
        &mut self,
        c: &Connection,
        queue: &str,
        now: i64,
        memory: &mut PickMemory,
    ) -> StoreResult<bool> {
        let max = self.choice.max;
        // Turns served in the first pass: (turn, weight, may have more).
        let mut turns: Vec<(Option<String>, usize, bool)> = Vec::new();
        let mut visited: Option<String> = None;
        let mut capped = false;
        let mut looked = 0;
        'legs: for leg in pick::legs(memory.cursor(queue)) {
            let (mut from, upto) = match leg {
                Leg::Ungrouped => {
                    if self.choice.taking() >= max {
                        break;
                    }
                    self.first_turn(c, queue, None, now, memory, max, &mut turns)?;
                    continue;
                }
                Leg::Groups { after, upto } => (after, upto),
            };
            loop {
                if self.choice.taking() >= max {
                    break 'legs;
                }
                if looked >= GROUP_VISITS {
                    capped = true;
                    break 'legs;
                }
                let next: Option<String> = c
                    .prepare_cached(GROUP_AFTER)
                    .and_then(|mut st| st.query_row(params![queue, from], |r| r.get(0)).optional())
                    .map_err(backend)?;
                let Some(g) = next.filter(|g| !pick::past(upto.as_deref(), g)) else {
                    break;
                };
                looked += 1;
                from.clone_from(&g);
                visited = Some(g.clone());
                self.first_turn(c, queue, Some(g), now, memory, max, &mut turns)?;
            }
        }
        self.choice.max = max;
        let full = self.choice.taking() >= max;
        let served = turns.last().map(|t| t.0.clone());
        memory.set_cursor(queue, pick::next_cursor(capped && !full, visited, served));
        // Later passes: what is left, shared by weight among the turns that filled theirs.
        loop {
            let left = max.saturating_sub(self.choice.taking());
            let Some(share) = pick::share(left, turns.iter().filter(|t| t.2).map(|t| t.1)) else {
                break;
            };
            for (turn, weight, more) in turns.iter_mut() {
                if !*more {
                    continue;
                }
                if self.choice.taking() >= max {
                    break;
                }
                self.choice.max = (self.choice.taking() + share * *weight).min(max);
                let before = self.choice.open();
                let ended = self.take_turn(c, queue, turn.as_deref(), now, memory)?;
                // Only a turn that filled its share may have more.
                *more = ended == ScanEnd::Full && self.choice.open() > before;
            }
            self.choice.max = max;
        }
        self.choice.max = max;
        Ok(capped && !full)
    }

    /// A turn of the round-robin's first pass: its weight in jobs at most; kept in `turns` when
    /// it took any.
    #[allow(clippy::too_many_arguments)]
    fn first_turn(
        &mut self,
        c: &Connection,
        queue: &str,
        turn: Option<String>,
        now: i64,
        memory: &mut PickMemory,
        max: usize,
        turns: &mut Vec<(Option<String>, usize, bool)>,
    ) -> StoreResult<()> {
        let weight = turn.as_deref().map_or(1, |g| self.choice.weight(g));
        self.choice.max = (self.choice.taking() + weight).min(max);
        let before = self.choice.open();
        let ended = self.take_turn(c, queue, turn.as_deref(), now, memory)?;
        if self.choice.open() > before {
            turns.push((turn, weight, ended == ScanEnd::Full));
        }
        Ok(())
    }

    /// One turn: the ungrouped jobs, or one group's, up to `self.choice.max` taken.
    fn take_turn(
        &mut self,
        c: &Connection,
        queue: &str,
        group: Option<&str>,
        now: i64,
        memory: &mut PickMemory,
    ) -> StoreResult<ScanEnd> {
        match group {
            None => self.scan_ungrouped(c, queue, now, memory),
            Some(g) => self.scan_levels(c, queue, Some(g), now, None, memory.top),
        }
    }
}

/// Whether any of the queue's grouped jobs is due (one index seek).
pub(super) fn grouped_due(c: &Connection, queue: &str, now: i64) -> StoreResult<bool> {
    c.prepare_cached(GROUPED_DUE)
        .and_then(|mut s| s.exists(params![queue, now]))
        .map_err(backend)
}

/// [`Store::job_lease_admitted`] in one request: steps through the runnable jobs in lease order
/// on the index alone, reads the row of each job admission is asked about (the lease needs it),
/// then leases the chosen ones. Past held endpoints' jobs it reads a bounded number of rows: from
/// the head of the queue, then onwards from where the last request stopped (so jobs behind a
/// deep held backlog are reached over a few requests, each of bounded cost). Returns the rows to
/// run and the rows to fail, undecoded, and the candidates leased (to hand back to admission
/// should the transaction fail to commit). Every other admission is handed back on every path
/// ([`Choice`]).
pub fn lease_admitted(
    c: &mut Connection,
    p: &LeaseAdmittedParams,
    admit: &mut dyn Admit,
    memory: &mut PickMemory,
) -> StoreResult<LeasedRows> {
    static ROW: std::sync::LazyLock<String> =
        std::sync::LazyLock::new(|| format!("SELECT {COLS} FROM jobs WHERE seq = ?1"));
    let mut choice = Choice::new(admit, p.max);
    let more = {
        let mut picker = Picker {
            read: c.prepare_cached(&ROW).map_err(backend)?,
            choice,
            last: None,
            picked: std::collections::HashSet::new(),
        };
        let now = ms(p.now);
        // A queue none of whose due jobs has a group reads as it always did.
        let mut more = false;
        if grouped_due(c, &p.queue, now)? {
            more = picker.scan_fair(c, &p.queue, now, memory)?;
        } else {
            picker.scan_ungrouped(c, &p.queue, now, memory)?;
        }
        choice = picker.choice;
        more
    };
    // No savepoint: each lease is one atomic update, and should one fail, those before it stand
    // and are handed out (what is leased and not handed out would wait for its lease to expire).
    let mut out = LeasedRows {
        more,
        ..LeasedRows::default()
    };
    let mut update = c.prepare_cached(LEASE_ONE).map_err(backend)?;
    let (taken, failed) = (&mut out.taken, &mut out.failed);
    let leased = choice.lease_each(|candidate, mut raw, fail| {
        let leased = update
            .execute(params![
                p.owner,
                ms(p.lease_until),
                ms(p.now),
                candidate.seq
            ])
            .map_err(backend)?;
        if leased != 1 {
            return Ok(false);
        }
        // Candidates are waiting jobs: no dead category.
        let from = Some((raw.stored_state()?, None));
        counts::moved(
            &raw.job.queue,
            &raw.job.endpoint,
            from,
            Some((JobState::Running, None)),
            1,
        );
        // The row as the update left it.
        raw.set_state(JobState::Running);
        raw.job.lease_owner = Some(p.owner.clone());
        raw.job.lease_until = Some(p.lease_until);
        raw.job.updated_at = p.now;
        if fail {
            failed.push(raw);
        } else {
            taken.push(raw);
        }
        Ok(true)
    });
    out.admitted = choice.keep();
    match leased {
        Err(e) if out.admitted.is_empty() => Err(e),
        _ => Ok(out),
    }
}

#[derive(Default)]
pub struct LeasedRows {
    pub taken: Vec<RawJob>,
    pub failed: Vec<RawJob>,
    pub admitted: Vec<Candidate>,
    /// [`AdmittedLease::more`].
    pub more: bool,
}
