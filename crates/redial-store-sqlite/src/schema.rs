//! The schema and its migrations, applied in order and recorded in `PRAGMA user_version`.
//!
//! Indexes are chosen for the hot path, where every state change pays for each index on `state`:
//! leasing reads `jobs_runnable` (a covering, partial index in lease order), a queue's next run
//! time reads it too, one priority level at a time (two seeks per level; its own index
//! `jobs_queue_waiting` cost a b-tree write per enqueue and lease and was dropped in migration 10),
//! rescue reads `jobs_leased`, retention `jobs_finished` (a test checks that the maintenance
//! statements read by index: a table scan there held the one writer for 110 ms per million jobs),
//! dead-letter listings and bulk actions `jobs_dead`. Counts per queue, state, category and
//! endpoint are kept in memory (`counts.rs`) rather than indexed.
//!
//! Over 600 lines: every migration, in the order applied; a released migration is never edited.

use rusqlite::Connection;

/// Each entry moves the schema one version up. Never edit a shipped entry: add a new one.
const MIGRATIONS: &[&str] = &[
    // 1: jobs and attempts.
    r#"
    CREATE TABLE jobs (
        seq              INTEGER PRIMARY KEY AUTOINCREMENT,
        id               TEXT NOT NULL UNIQUE,
        queue            TEXT NOT NULL,
        endpoint         TEXT NOT NULL,
        state            TEXT NOT NULL,
        category         TEXT,
        request          TEXT NOT NULL,
        idempotency_key  TEXT,
        priority         INTEGER NOT NULL,
        run_at           INTEGER NOT NULL,
        deadline         INTEGER,
        tags             TEXT NOT NULL,
        policy           TEXT,
        created_at       INTEGER NOT NULL,
        updated_at       INTEGER NOT NULL,
        finished_at      INTEGER,
        attempts         INTEGER NOT NULL DEFAULT 0,
        unknown_attempts INTEGER NOT NULL DEFAULT 0,
        deferrals        INTEGER NOT NULL DEFAULT 0,
        stalls           INTEGER NOT NULL DEFAULT 0,
        replays          INTEGER NOT NULL DEFAULT 0,
        runs             INTEGER NOT NULL DEFAULT 0,
        last_delay_ms    INTEGER,
        last_reason      TEXT,
        lease_owner      TEXT,
        lease_until      INTEGER,
        cancel_requested INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX jobs_runnable ON jobs (queue, priority DESC, run_at, seq)
        WHERE state IN ('ready', 'scheduled', 'deferred');
    CREATE INDEX jobs_waiting ON jobs (run_at) WHERE state IN ('scheduled', 'deferred');
    CREATE INDEX jobs_leased ON jobs (lease_until) WHERE state = 'running';
    CREATE INDEX jobs_finished ON jobs (finished_at) WHERE state IN ('completed', 'dead', 'cancelled');
    CREATE INDEX jobs_queue_state ON jobs (queue, state, category);
    CREATE INDEX jobs_endpoint_state ON jobs (endpoint, state);
    CREATE TABLE attempts (
        job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
        number  INTEGER NOT NULL,
        data    TEXT NOT NULL,
        PRIMARY KEY (job_seq, number)
    ) WITHOUT ROWID;
    "#,
    // 2: endpoint protection state; deadlines of waiting jobs.
    r#"
    CREATE TABLE endpoints (
        name       TEXT PRIMARY KEY,
        state      TEXT NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX jobs_waiting_deadline ON jobs (deadline)
        WHERE deadline IS NOT NULL AND state IN ('ready', 'scheduled', 'deferred');
    "#,
    // 3: the next run time of a queue's waiting jobs, without scanning them.
    r#"
    CREATE INDEX jobs_queue_waiting ON jobs (queue, run_at)
        WHERE state IN ('ready', 'scheduled', 'deferred');
    "#,
    // 4: lease candidates read from the index alone (endpoint and attempts in it).
    r#"
    DROP INDEX jobs_runnable;
    CREATE INDEX jobs_runnable ON jobs (queue, priority DESC, run_at, seq, endpoint, attempts)
        WHERE state IN ('ready', 'scheduled', 'deferred');
    "#,
    // 5: attempts in an ordinary rowid table. As a WITHOUT ROWID table its ~500-byte rows made
    // every insert rebalance a shallow, wide b-tree; measured, recording an attempt cost twice as
    // much.
    r#"
    CREATE TABLE attempts_v5 (
        id      INTEGER PRIMARY KEY,
        job_seq INTEGER NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
        number  INTEGER NOT NULL,
        data    TEXT NOT NULL
    );
    INSERT INTO attempts_v5 (job_seq, number, data)
        SELECT job_seq, number, data FROM attempts ORDER BY job_seq, number;
    DROP TABLE attempts;
    ALTER TABLE attempts_v5 RENAME TO attempts;
    CREATE UNIQUE INDEX attempts_job ON attempts (job_seq, number);
    "#,
    // 6: every state change used to update two counting indexes (queue x state x category, and
    // endpoint x state); they cost a third of each change. Counts are read on demand and scan;
    // dead letters, the listing on-call people need fast, keep an index of their own, touched only
    // when a job dies or leaves the dead letters.
    r#"
    DROP INDEX jobs_queue_state;
    DROP INDEX jobs_endpoint_state;
    CREATE INDEX jobs_dead ON jobs (seq) WHERE state = 'dead';
    "#,
    // 7: the partial indexes' conditions as chains of `=` instead of `IN` lists. SQLite tests a
    // constant list of three or more values through a temporary b-tree, built afresh for the old
    // and the new row of every update, for every such index: measured, that was the largest
    // single cost of leasing and recording a job. Queries spell the same chains (see
    // `sql::WAITING`) so the planner can still use these indexes.
    r#"
    DROP INDEX jobs_runnable;
    DROP INDEX jobs_waiting_deadline;
    DROP INDEX jobs_queue_waiting;
    DROP INDEX jobs_finished;
    CREATE INDEX jobs_runnable ON jobs (queue, priority DESC, run_at, seq, endpoint, attempts)
        WHERE (state = 'ready' OR state = 'scheduled' OR state = 'deferred');
    CREATE INDEX jobs_waiting_deadline ON jobs (deadline)
        WHERE deadline IS NOT NULL AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred');
    CREATE INDEX jobs_queue_waiting ON jobs (queue, run_at)
        WHERE (state = 'ready' OR state = 'scheduled' OR state = 'deferred');
    CREATE INDEX jobs_finished ON jobs (finished_at)
        WHERE (state = 'completed' OR state = 'dead' OR state = 'cancelled');
    "#,
    // 8: holds shared between nodes (the same table as PostgreSQL's, for one behaviour).
    r#"
    CREATE TABLE endpoint_holds (
        name           TEXT PRIMARY KEY,
        paused_until   INTEGER,
        pause_reason   TEXT,
        breaker_until  INTEGER,
        breaker_reason TEXT
    ) WITHOUT ROWID;
    "#,
    // An attempt's rowid is its job's seq and its number (`ATTEMPT_KEY_BITS` low bits), so
    // recording one writes one b-tree: no index on the job, no foreign-key lookup. A trigger
    // takes the place of the cascade. The two columns people read stay, computed.
    r#"
    CREATE TABLE attempts_v9 (
        id      INTEGER PRIMARY KEY,
        data    TEXT NOT NULL,
        job_seq INTEGER GENERATED ALWAYS AS (id >> 20) VIRTUAL,
        number  INTEGER GENERATED ALWAYS AS (id & 1048575) VIRTUAL
    );
    INSERT INTO attempts_v9 (id, data)
        SELECT (job_seq << 20) | number, data FROM attempts WHERE number < 1048576
        ORDER BY job_seq, number;
    DROP TABLE attempts;
    ALTER TABLE attempts_v9 RENAME TO attempts;
    CREATE TRIGGER jobs_delete_attempts AFTER DELETE ON jobs BEGIN
        DELETE FROM attempts WHERE id >= (old.seq << 20) AND id < ((old.seq + 1) << 20);
    END;
    "#,
    // 10: a queue's next run time is read from `jobs_runnable`, one priority level at a time
    // (see `sql::next_run_at`). Its own index cost one more b-tree write on every enqueue and
    // every lease: measured, ~7% of the storage thread's time per job.
    r#"
    DROP INDEX jobs_queue_waiting;
    "#,
    // 11: one row the readiness check writes, so that "ready" means "can write".
    r#"
    CREATE TABLE health (
        id        INTEGER PRIMARY KEY CHECK (id = 1),
        probed_at INTEGER NOT NULL
    );
    "#,
    // 12: pauses, resumes and breaker resets set by hand on queues and endpoints.
    r#"
    CREATE TABLE controls (
        kind             TEXT NOT NULL,
        name             TEXT NOT NULL,
        paused_since     INTEGER,
        paused_until     INTEGER,
        pause_reason     TEXT,
        resumed_at       INTEGER,
        breaker_reset_at INTEGER,
        PRIMARY KEY (kind, name)
    ) WITHOUT ROWID;
    "#,
    // 13: counts are kept in memory as jobs change (see `counts`); what they cannot say is read
    // by index: when each queue's longest-deferred job was deferred, and each dead-letter
    // group's first and last death and reason. Both touched only when a job defers or dies.
    r#"
    CREATE INDEX jobs_deferred ON jobs (queue, updated_at) WHERE state = 'deferred';
    CREATE INDEX jobs_dead_groups ON jobs (queue, category, endpoint, finished_at)
        WHERE state = 'dead';
    "#,
    // 14: recurring schedules; the due check reads `schedules_due` from its earliest entry.
    r#"
    CREATE TABLE schedules (
        id              TEXT PRIMARY KEY,
        definition      TEXT NOT NULL,
        paused          INTEGER NOT NULL,
        next_at         INTEGER,
        last_occurrence INTEGER,
        last_fired_at   INTEGER,
        created_at      INTEGER NOT NULL,
        updated_at      INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX schedules_due ON schedules (next_at) WHERE paused = 0 AND next_at IS NOT NULL;
    "#,
    // 15: groups (tenants) within a queue. Ungrouped jobs keep `jobs_runnable` to themselves, so
    // a queue without groups writes and reads exactly what it did; a grouped job is in
    // `jobs_grouped` (a queue's groups in order, each in lease order: the round-robin reads each
    // group's head) and `jobs_grouped_due` (the queue's grouped jobs by run time: whether one is
    // due, and when the next is, in one seek each).
    r#"
    ALTER TABLE jobs ADD COLUMN grp TEXT;
    DROP INDEX jobs_runnable;
    CREATE INDEX jobs_runnable ON jobs (queue, priority DESC, run_at, seq, endpoint, attempts)
        WHERE grp IS NULL AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred');
    CREATE INDEX jobs_grouped ON jobs (queue, grp, priority DESC, run_at, seq, endpoint, attempts)
        WHERE grp IS NOT NULL AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred');
    CREATE INDEX jobs_grouped_due ON jobs (queue, run_at)
        WHERE grp IS NOT NULL AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred');
    "#,
    // A pace learned from bare 429s, shared as the pause and the breaker are: until when the
    // nodes keep it (the latest refused request's send instant plus the time it is kept).
    r#"
    ALTER TABLE endpoint_holds ADD COLUMN paced_until INTEGER;
    "#,
    // 17: completion callbacks: what a job asks to be told when it finishes (JSON), read with
    // the job. The deliveries are jobs of their own.
    r#"
    ALTER TABLE jobs ADD COLUMN callback TEXT;
    "#,
    // 18: the event log (`redial_store::Event`). Job events are written by triggers, in the
    // statement that finishes or replays the job, so that no path forgets one. The triggers
    // name `finished_at` and `replays`, not `state`: a lease (which sets neither) does not
    // invoke them at all; the conditions are chains of `=` (see migration 7). Not
    // AUTOINCREMENT (it cost the storage thread about 1 us per job, 5%, measured with
    // `redial-bench --only events` and `BENCH_EVENTS_SQL`): the cleanup keeps the newest event
    // instead, so a sequence number is never used twice and a reader's cursor never skips a
    // newer event.
    r#"
    CREATE TABLE events (
        seq      INTEGER PRIMARY KEY,
        at       INTEGER NOT NULL,
        kind     TEXT NOT NULL,
        queue    TEXT,
        job_id   TEXT,
        endpoint TEXT,
        category TEXT,
        reason   TEXT,
        until    INTEGER
    );
    CREATE TRIGGER jobs_finish_events AFTER UPDATE OF finished_at ON jobs
        WHEN (NEW.state = 'completed' OR NEW.state = 'dead' OR NEW.state = 'cancelled')
            AND NEW.state <> OLD.state
    BEGIN
        INSERT INTO events (at, kind, queue, job_id, endpoint, category, reason)
        VALUES (NEW.updated_at, 'job.' || NEW.state, NEW.queue, NEW.id, NEW.endpoint,
                NEW.category, NEW.last_reason);
    END;
    CREATE TRIGGER jobs_replay_events AFTER UPDATE OF replays ON jobs
        WHEN NEW.replays > OLD.replays
    BEGIN
        INSERT INTO events (at, kind, queue, job_id, endpoint, reason)
        VALUES (NEW.updated_at, 'job.replayed', NEW.queue, NEW.id, NEW.endpoint, OLD.last_reason);
    END;
    "#,
    // 19: what replays with changes did to a job (`redial_store::JobChange`, a JSON list),
    // read only when a job is shown: not in the job's columns.
    r#"
    ALTER TABLE jobs ADD COLUMN changes TEXT;
    "#,
    // 20: search (`JobFilter::idempotency_key`, `tag`, `reason_words`). Nothing is written for
    // search when a job is inserted, leased or finished: `Store::index_for_search` (maintenance,
    // and every search first) writes the terms (`redial_store::job_terms`: key and tags) of the
    // jobs inserted since `search_state.terms_upto`, a row each in `job_terms`, by bucket of
    // 1,024 jobs (`redial_store::TERM_BUCKET_BITS`: rows go where the last ones did), or for 64
    // jobs or more one row of `job_term_blocks` (the terms, their seqs, a bloom filter); and
    // the words of the reasons (`redial_store::reason_words`) of the jobs that died since, which
    // the finish's event trigger notes in `dead_pending` (so that no path forgets one), in
    // `dead_words`. Deleting a job takes its rows with it, turns a block it was in back into rows,
    // and leaves its notes to the next indexing. `dead_pending` has no key: a job that dies twice
    // before the next indexing is noted twice (a conflict in a trigger is the firing
    // statement's to resolve, and a check for one reads the table the trigger writes: a
    // temporary table for every finish, see `state_changes_build_no_temporary_tables`).
    r#"
    CREATE TABLE job_terms (
        bucket INTEGER NOT NULL,
        term   TEXT NOT NULL,
        seq    INTEGER NOT NULL,
        PRIMARY KEY (bucket, term, seq)
    ) WITHOUT ROWID;
    INSERT OR IGNORE INTO job_terms (bucket, term, seq)
        SELECT seq >> 10, 'k:' || idempotency_key, seq FROM jobs
        WHERE idempotency_key IS NOT NULL;
    INSERT OR IGNORE INTO job_terms (bucket, term, seq)
        SELECT jobs.seq >> 10, 't:' || t.value, jobs.seq FROM jobs, json_each(jobs.tags) AS t;
    CREATE TABLE search_state (
        id         INTEGER PRIMARY KEY CHECK (id = 1),
        terms_upto INTEGER NOT NULL
    );
    INSERT INTO search_state (id, terms_upto) SELECT 1, COALESCE(MAX(seq), 0) FROM jobs;
    CREATE TABLE job_term_blocks (
        first_seq INTEGER PRIMARY KEY,
        last_seq  INTEGER NOT NULL,
        bloom     BLOB NOT NULL,
        terms     TEXT NOT NULL,
        seqs      TEXT NOT NULL
    );
    CREATE TABLE dead_words (
        word TEXT NOT NULL,
        seq  INTEGER NOT NULL,
        PRIMARY KEY (word, seq)
    ) WITHOUT ROWID;
    CREATE INDEX dead_words_seq ON dead_words (seq);
    CREATE TABLE dead_pending (seq INTEGER NOT NULL);
    INSERT INTO dead_pending (seq) SELECT seq FROM jobs WHERE state = 'dead';
    DROP TRIGGER jobs_finish_events;
    CREATE TRIGGER jobs_finish_events AFTER UPDATE OF finished_at ON jobs
        WHEN (NEW.state = 'completed' OR NEW.state = 'dead' OR NEW.state = 'cancelled')
            AND NEW.state <> OLD.state
    BEGIN
        INSERT INTO events (at, kind, queue, job_id, endpoint, category, reason)
        VALUES (NEW.updated_at, 'job.' || NEW.state, NEW.queue, NEW.id, NEW.endpoint,
                NEW.category, NEW.last_reason);
        INSERT INTO dead_pending (seq) SELECT NEW.seq WHERE NEW.state = 'dead';
    END;
    CREATE TRIGGER jobs_delete_terms AFTER DELETE ON jobs BEGIN
        DELETE FROM job_terms
            WHERE bucket = old.seq >> 10 AND term = 'k:' || old.idempotency_key AND seq = old.seq;
        DELETE FROM job_terms
            WHERE bucket = old.seq >> 10
            AND term IN (SELECT 't:' || value FROM json_each(old.tags)) AND seq = old.seq;
        DELETE FROM dead_words WHERE seq = old.seq;
    END;
    -- A block that held a deleted job: the terms of its jobs still there become rows.
    CREATE TRIGGER jobs_delete_block AFTER DELETE ON jobs
        WHEN (SELECT last_seq FROM job_term_blocks WHERE first_seq <= old.seq
              ORDER BY first_seq DESC LIMIT 1) >= old.seq
    BEGIN
        INSERT OR IGNORE INTO job_terms (bucket, term, seq)
            SELECT json_extract(k.seqs, '$[' || u.key || ']') >> 10, u.value,
                   json_extract(k.seqs, '$[' || u.key || ']')
            FROM job_term_blocks k, json_each(k.terms) u
            WHERE k.first_seq = (SELECT first_seq FROM job_term_blocks
                                 WHERE first_seq <= old.seq ORDER BY first_seq DESC LIMIT 1)
            AND EXISTS (SELECT 1 FROM jobs
                        WHERE seq = json_extract(k.seqs, '$[' || u.key || ']'));
        DELETE FROM job_term_blocks
            WHERE first_seq = (SELECT first_seq FROM job_term_blocks
                               WHERE first_seq <= old.seq ORDER BY first_seq DESC LIMIT 1);
    END;
    "#,
    // 21: an endpoint's retries waiting their backoff, found when its outage ends.
    r#"
    CREATE INDEX jobs_retrying ON jobs (endpoint, run_at) WHERE state = 'scheduled' AND attempts > 0;
    "#,
    // 22: ordering keys (`redial_store::OrderingKey`). A job with a key is in its key's line
    // while it waits, runs, or is dead with `block` (`in_line!`); `oline` names the line
    // (`OrderingKey::line`: an integer compares in one step); `ord_wait` is 1 for every job of a
    // line but its head, and the runnable indexes leave those out, so a lease never reads a job
    // behind its key's head, however long the line. The head is the line's running job, if any,
    // or else its first job by seq. An insert writes `ord_wait` itself (the new job is the last
    // of its line: it waits when the line has a job). Triggers keep the head as jobs move, on
    // the statements that name `okey` (`okey = okey`, a column in no index): every statement
    // that ends a run, finishes, replays, cancels or rescues a job does, but the engine's
    // record of a job without a key, so that its hot path enters no trigger program (each
    // costs the writer a sub-program per row: about 2 us of a no-op job's 18). A head that
    // leaves its line, or is deleted from it, makes the first job the head (`line_next!`, one
    // seek of `jobs_in_line`); a job that enters its line (a replay after `skip`), a run that
    // ends with an earlier job waiting (one replayed meanwhile), or a move to another queue sets
    // the head afresh (`line_fix!`, off `jobs_line_heads`). A queue without keys writes nothing
    // more. 23 made the line indexes again, and the triggers (`line_triggers!`), which 22 made
    // as it shipped.
    concat!(
        "ALTER TABLE jobs ADD COLUMN okey TEXT; ALTER TABLE jobs ADD COLUMN oline INTEGER; \
         ALTER TABLE jobs ADD COLUMN ord_skip INTEGER NOT NULL DEFAULT 0; \
         ALTER TABLE jobs ADD COLUMN ord_wait INTEGER NOT NULL DEFAULT 0; \
         DROP INDEX jobs_runnable; DROP INDEX jobs_grouped; DROP INDEX jobs_grouped_due; \
         CREATE INDEX jobs_runnable ON jobs (queue, priority DESC, run_at, seq, endpoint, attempts) \
             WHERE ",
        ungrouped!(),
        "; CREATE INDEX jobs_grouped ON jobs (queue, grp, priority DESC, run_at, seq, endpoint, \
             attempts) WHERE ",
        grouped!(),
        "; CREATE INDEX jobs_grouped_due ON jobs (queue, run_at) WHERE ",
        grouped!(),
        "; CREATE INDEX jobs_in_line ON jobs (oline, seq) WHERE ",
        in_line!(),
        "; CREATE INDEX jobs_line_heads ON jobs (queue, oline) WHERE ord_wait = 0 AND ",
        in_line!(),
    ),
    // 23: what a keyed job's no-op costs the writer, lowered (BENCHMARKS.md, "Ordering keys"):
    // - The line indexes again, on `lined!`, which says "in its line" without the state: a
    //   lease changes the state (ready to running), so with 22's conditions every lease of a
    //   keyed job rewrote its entries in both indexes, on pages all over them; now a lease
    //   writes neither. `jobs_in_line` holds the columns of that condition, so a line's first
    //   job is found in the index alone; it names the jobs that wait apart from the head
    //   (`ord_wait` after the line), so it finds the heads too, and `jobs_line_heads` goes: a
    //   finish and the promotion it makes write one page of one index, not one of each.
    // - The trigger that sets a line's head afresh hangs on a column of its own, `ord_stay`,
    //   named by the statements after which a job may stay in its line (all that named `okey`),
    //   but the engine's record of a completion: that one leaves its line, and enters only the
    //   trigger that makes the next job the head.
    // The triggers are made here, their queries saying `lined!` as the indexes do. 22, as it
    // shipped, made the same four with its own conditions; a database made now gets them here
    // only, and one made then has them dropped and made again.
    concat!(
        "DROP INDEX jobs_in_line; DROP INDEX jobs_line_heads; \
         DROP TRIGGER IF EXISTS jobs_line_leave; DROP TRIGGER IF EXISTS jobs_line_heading; \
         DROP TRIGGER IF EXISTS jobs_line_delete; DROP TRIGGER IF EXISTS jobs_line_move; \
         ALTER TABLE jobs ADD COLUMN ord_stay INTEGER; \
         CREATE INDEX jobs_in_line ON jobs (oline, ord_wait, seq, finished_at, category, ord_skip) \
             WHERE ",
        lined!(),
        "; ",
        line_triggers!(),
    ),
    // 24: the attempt that ends a job is kept in the job's row (`final_attempt`, the attempt's
    // JSON as `attempts.data` holds it), written by the statement that finishes the job: a job
    // that succeeds first time writes no attempt row. Attempts that do not end it keep their
    // rows. A replay (the one way back from a finished state) sets it to NULL, and its trigger
    // moves the old one to `attempts` under its number, so the timeline stays whole.
    r#"
    ALTER TABLE jobs ADD COLUMN final_attempt TEXT;
    DROP TRIGGER jobs_replay_events;
    CREATE TRIGGER jobs_replay_events AFTER UPDATE OF replays ON jobs
        WHEN NEW.replays > OLD.replays
    BEGIN
        INSERT INTO events (at, kind, queue, job_id, endpoint, reason)
        VALUES (NEW.updated_at, 'job.replayed', NEW.queue, NEW.id, NEW.endpoint, OLD.last_reason);
        INSERT INTO attempts (id, data)
            SELECT (OLD.seq << 20) | json_extract(OLD.final_attempt, '$.number'), OLD.final_attempt
            WHERE OLD.final_attempt IS NOT NULL;
    END;
    "#,
    // 25: the completions the engine records on the fast path write one event row per
    // transaction, not one per job: the storage thread notes each (`sql::events`) and, before
    // the commit, inserts one row whose `batch` holds them (a JSON list of [at, queue, job id,
    // endpoint, reason]), under the sequence number of the last and with the ones before it
    // left free for the others, so every event keeps a number of its own. The job is marked
    // (`logged`) by the statement that completes it, and the finish's trigger passes over it;
    // every other finish (dead, cancelled, a completion on the careful path) is still written
    // by the trigger. A replay clears the mark.
    r#"
    ALTER TABLE events ADD COLUMN batch TEXT;
    ALTER TABLE jobs ADD COLUMN logged INTEGER;
    DROP TRIGGER jobs_finish_events;
    CREATE TRIGGER jobs_finish_events AFTER UPDATE OF finished_at ON jobs
        WHEN (NEW.state = 'completed' OR NEW.state = 'dead' OR NEW.state = 'cancelled')
            AND NEW.state <> OLD.state AND NEW.logged IS NULL
    BEGIN
        INSERT INTO events (at, kind, queue, job_id, endpoint, category, reason)
        VALUES (NEW.updated_at, 'job.' || NEW.state, NEW.queue, NEW.id, NEW.endpoint,
                NEW.category, NEW.last_reason);
        INSERT INTO dead_pending (seq) SELECT NEW.seq WHERE NEW.state = 'dead';
    END;
    "#,
];

/// The readiness check's write: one row, rewritten.
pub const PROBE: &str = "INSERT INTO health (id, probed_at) VALUES (1, ?1)
    ON CONFLICT (id) DO UPDATE SET probed_at = excluded.probed_at";

/// The low bits of an attempt's rowid that hold its number (migration 9).
pub const ATTEMPT_KEY_BITS: u32 = 20;

/// Sets the connection up for durability and brings the schema to the latest version.
pub fn prepare(conn: &Connection) -> rusqlite::Result<()> {
    // WAL lets readers run beside the writer; FULL syncs the WAL on every commit, so an
    // acknowledged write survives power loss, not only a process crash.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // 8 MiB of page cache (the default is 2 MiB): the hot part of the queue (its head, the
    // indexes' upper levels) stays in memory; the rest is read from the OS's cache. Not more: a
    // b-tree rebalance briefly gives a page the lock-byte page's number, and the next commit then
    // walks the whole page cache to drop pages past the end of the file. With 32 MiB that walk
    // cost ~5% of the storage thread's time under load (measured with perf); with 8 MiB the 1M
    // job backlog runs as fast and the process is 28 MiB smaller.
    conn.pragma_update(None, "cache_size", -8_192)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    migrate(conn)
}

/// Where the schema of the database open on `conn` stands.
pub fn status(conn: &Connection) -> rusqlite::Result<redial_store::SchemaStatus> {
    let version: usize = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    Ok(status_at(version))
}

/// The status of a database at schema `version` (0: a new one).
pub fn status_at(version: usize) -> redial_store::SchemaStatus {
    redial_store::SchemaStatus::of(version, MIGRATIONS)
}

/// Applies the pending migrations, each with its version bump in one transaction; refuses a
/// schema newer than this Redial knows.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let version: usize = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > MIGRATIONS.len() {
        return Err(rusqlite::Error::InvalidParameterName(format!(
            "the database has schema version {version}, newer than this Redial knows ({}): upgrade Redial",
            MIGRATIONS.len()
        )));
    }
    for (i, migration) in MIGRATIONS.iter().enumerate().skip(version) {
        // Each migration and its version bump commit together, so a crash mid-way leaves the
        // previous version intact.
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {migration}; PRAGMA user_version = {}; COMMIT;",
            i + 1
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database made by an older Redial keeps its jobs and attempts through every migration.
    #[test]
    fn upgrading_keeps_jobs_and_attempts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("old.db");
        let conn = Connection::open(&path).expect("open");
        for (i, m) in MIGRATIONS[..4].iter().enumerate() {
            conn.execute_batch(&format!("{m}; PRAGMA user_version = {};", i + 1))
                .expect("old migration");
        }
        conn.execute_batch(
            "INSERT INTO jobs (id, queue, endpoint, state, request, priority, run_at, tags, created_at, updated_at) \
             VALUES ('j1', 'default', 'e', 'completed', '{}', 0, 1, '[]', 1, 1); \
             INSERT INTO attempts (job_seq, number, data) VALUES (1, 1, '{\"n\":1}'), (1, 2, '{\"n\":2}');",
        )
        .expect("old data");
        drop(conn);

        let conn = Connection::open(&path).expect("reopen");
        prepare(&conn).expect("upgrade");
        let version: usize = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .expect("version");
        assert_eq!(version, MIGRATIONS.len());
        let rows: Vec<(i64, i64, String)> = conn
            .prepare("SELECT job_seq, number, data FROM attempts ORDER BY number")
            .expect("prepare")
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("query")
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        assert_eq!(
            rows,
            vec![
                (1, 1, "{\"n\":1}".to_owned()),
                (1, 2, "{\"n\":2}".to_owned())
            ]
        );
        // Deleting the job still takes its attempts with it.
        conn.execute("DELETE FROM jobs WHERE seq = 1", [])
            .expect("delete");
        let left: i64 = conn
            .query_row("SELECT COUNT(*) FROM attempts", [], |r| r.get(0))
            .expect("count");
        assert_eq!(left, 0);
    }

    /// Changing a job's state must not build temporary b-trees (an `IN` list of three or more
    /// constants in a partial index's condition does, for every row changed).
    #[test]
    fn state_changes_build_no_temporary_tables() {
        let conn = Connection::open_in_memory().expect("open");
        prepare(&conn).expect("schema");
        for sql in [
            "UPDATE jobs SET state = 'running', lease_until = 5 WHERE seq = 1",
            "UPDATE jobs SET state = 'completed', finished_at = 5 WHERE seq = 1",
            "UPDATE jobs SET state = 'scheduled', run_at = 5 WHERE seq = 1",
            "INSERT INTO attempts (id, data) VALUES (1048577, '{}')",
        ] {
            let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).expect("explain");
            // The statement's own program, up to its first Halt: the triggers' programs follow
            // it, and each runs only when its condition holds (the ordering keys' for keyed
            // jobs only, whose two-pass update of a line's heads is theirs to pay).
            let ops: Vec<String> = stmt
                .query_map([], |r| r.get(1))
                .expect("query")
                .collect::<rusqlite::Result<Vec<String>>>()
                .expect("rows")
                .into_iter()
                .take_while(|op| op != "Halt")
                .collect();
            assert!(
                !ops.iter().any(|op| op == "OpenEphemeral"),
                "{sql} opens a temporary table"
            );
        }
    }

    /// The engine's record of a job without an ordering key enters no trigger of the lines
    /// (each would cost the writer a sub-program per row): the statement names neither `okey`
    /// nor `queue`, so only the event log's trigger is coded. A keyed job's record enters them:
    /// a completion, which names only `okey`, enters only the one that takes it out of its line.
    #[test]
    fn a_job_without_a_key_enters_no_line_trigger() {
        let conn = Connection::open_in_memory().expect("open");
        prepare(&conn).expect("schema");
        let programs = |sql: &str| {
            let mut stmt = conn.prepare(&format!("EXPLAIN {sql}")).expect("explain");
            let ops: Vec<String> = stmt
                .query_map([], |r| r.get(1))
                .expect("query")
                .collect::<rusqlite::Result<_>>()
                .expect("rows");
            ops.iter().filter(|op| *op == "Program").count()
        };
        let record = "UPDATE OR FAIL jobs SET state = 'completed', finished_at = 5, \
                      lease_owner = NULL WHERE seq = 1 AND oline IS NULL";
        assert_eq!(programs(record), 1, "the event log's trigger only");
        let completed = "UPDATE OR FAIL jobs SET state = 'completed', finished_at = 5, \
                     lease_owner = NULL, okey = okey WHERE seq = 1";
        assert_eq!(
            programs(completed),
            2,
            "the event log's and the line's leaving"
        );
        let keyed = "UPDATE OR FAIL jobs SET state = 'dead', finished_at = 5, \
                     lease_owner = NULL, okey = okey, ord_stay = ord_stay WHERE seq = 1";
        assert_eq!(programs(keyed), 3, "the event log's and the lines' two");
    }

    #[test]
    fn a_newer_database_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let conn = Connection::open(dir.path().join("new.db")).expect("open");
        conn.pragma_update(None, "user_version", 999)
            .expect("set version");
        let err = prepare(&conn).expect_err("refused");
        assert!(err.to_string().contains("upgrade Redial"), "{err}");
    }
}
