//! The PostgreSQL schema and its migrations, applied in order and recorded in `redial_schema`.
//!
//! Several nodes may start at once: each applies migrations inside one transaction that first
//! takes a transaction-scoped advisory lock, so they run one after the other and the later ones
//! find nothing left to do.
//!
//! Over 600 lines: every migration, in the order applied; a released migration is never edited.

use tokio_postgres::Client;

/// The advisory lock key that serialises migrations ("redial-migrate").
const MIGRATE_LOCK: i64 = 0x7265_6469_616c_6d67;

/// Each entry moves the schema one version up. Never edit a shipped entry: add a new one.
/// Times are Unix milliseconds, as in the SQLite store, so both read and compare alike.
const MIGRATIONS: &[&str] = &[
    // 1: jobs, attempts, endpoint state and shared holds.
    r#"
    CREATE TABLE jobs (
        seq              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id               TEXT NOT NULL UNIQUE,
        queue            TEXT NOT NULL,
        endpoint         TEXT NOT NULL,
        state            TEXT NOT NULL,
        category         TEXT,
        request          TEXT NOT NULL,
        idempotency_key  TEXT,
        priority         INTEGER NOT NULL,
        run_at           BIGINT NOT NULL,
        deadline         BIGINT,
        tags             TEXT NOT NULL,
        policy           TEXT,
        created_at       BIGINT NOT NULL,
        updated_at       BIGINT NOT NULL,
        finished_at      BIGINT,
        attempts         INTEGER NOT NULL DEFAULT 0,
        unknown_attempts INTEGER NOT NULL DEFAULT 0,
        deferrals        INTEGER NOT NULL DEFAULT 0,
        stalls           INTEGER NOT NULL DEFAULT 0,
        replays          INTEGER NOT NULL DEFAULT 0,
        runs             INTEGER NOT NULL DEFAULT 0,
        last_delay_ms    BIGINT,
        last_reason      TEXT,
        lease_owner      TEXT,
        lease_until      BIGINT,
        cancel_requested BOOLEAN NOT NULL DEFAULT FALSE
    );
    CREATE INDEX jobs_runnable ON jobs (queue, priority DESC, run_at, seq)
        INCLUDE (endpoint, attempts)
        WHERE state IN ('ready', 'scheduled', 'deferred');
    CREATE INDEX jobs_waiting ON jobs (run_at) WHERE state IN ('scheduled', 'deferred');
    CREATE INDEX jobs_waiting_deadline ON jobs (deadline)
        WHERE deadline IS NOT NULL AND state IN ('ready', 'scheduled', 'deferred');
    CREATE INDEX jobs_leased ON jobs (lease_until) WHERE state = 'running';
    CREATE INDEX jobs_finished ON jobs (finished_at) WHERE state IN ('completed', 'dead', 'cancelled');
    CREATE INDEX jobs_dead ON jobs (seq) WHERE state = 'dead';
    CREATE TABLE attempts (
        id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        job_seq BIGINT NOT NULL REFERENCES jobs (seq) ON DELETE CASCADE,
        number  INTEGER NOT NULL,
        data    TEXT NOT NULL,
        UNIQUE (job_seq, number)
    );
    CREATE TABLE endpoints (
        name       TEXT PRIMARY KEY,
        state      TEXT NOT NULL,
        updated_at BIGINT NOT NULL
    );
    CREATE TABLE endpoint_holds (
        name           TEXT PRIMARY KEY,
        paused_until   BIGINT,
        pause_reason   TEXT,
        breaker_until  BIGINT,
        breaker_reason TEXT
    );
    "#,
    // 2: nodes that say they are alive with a presence lock (their leases are rescued when the
    // lock frees, not when they expire).
    r#"
    CREATE TABLE nodes (
        worker       TEXT PRIMARY KEY,
        announced_at BIGINT NOT NULL
    );
    "#,
    // 3: pauses, resumes and breaker resets set by hand on queues and endpoints.
    r#"
    CREATE TABLE controls (
        kind             TEXT NOT NULL,
        name             TEXT NOT NULL,
        paused_since     BIGINT,
        paused_until     BIGINT,
        pause_reason     TEXT,
        resumed_at       BIGINT,
        breaker_reset_at BIGINT,
        PRIMARY KEY (kind, name)
    );
    "#,
    // 4: attempts keyed by (job_seq, number): one index fewer, and no foreign key (it took a row
    // lock on the job for every attempt recorded); deleting jobs deletes their attempts. The new
    // key's index is built once, over every attempt kept.
    r#"
    ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_job_seq_fkey;
    ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_pkey;
    ALTER TABLE attempts DROP COLUMN IF EXISTS id;
    ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (job_seq, number);
    ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_job_seq_number_key;
    "#,
    // 5: recurring schedules; the due check reads `schedules_due` from its earliest entry.
    r#"
    CREATE TABLE schedules (
        id              TEXT PRIMARY KEY,
        definition      TEXT NOT NULL,
        paused          BOOLEAN NOT NULL,
        next_at         BIGINT,
        last_occurrence BIGINT,
        last_fired_at   BIGINT,
        created_at      BIGINT NOT NULL,
        updated_at      BIGINT NOT NULL
    );
    CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused AND next_at IS NOT NULL;
    "#,
    // 6: groups (tenants) within a queue. Ungrouped jobs keep `jobs_runnable` to themselves, so a
    // queue without groups writes and reads what it did; grouped jobs are in `jobs_grouped` (each
    // group's head, and the loose scan of a queue's groups) and `jobs_grouped_ready` (whether
    // one is ready: with `jobs_waiting` for those scheduled and due, whether one is due). Not
    // an index over grouped jobs by run time: one was measured to mislead the planner (with
    // statistics not yet taken after a bulk enqueue it read every group's head through it and
    // sorted, 8 ms per group); the ready one cannot serve those reads (its condition is not
    // theirs). The next run time of grouped jobs is read from `jobs_waiting`.
    r#"
    ALTER TABLE jobs ADD COLUMN grp TEXT;
    DROP INDEX jobs_runnable;
    CREATE INDEX jobs_runnable ON jobs (queue, priority DESC, run_at, seq)
        INCLUDE (endpoint, attempts)
        WHERE grp IS NULL AND state IN ('ready', 'scheduled', 'deferred');
    CREATE INDEX jobs_grouped ON jobs (queue, grp, priority DESC, run_at, seq)
        INCLUDE (endpoint, attempts)
        WHERE grp IS NOT NULL AND state IN ('ready', 'scheduled', 'deferred');
    CREATE INDEX jobs_grouped_ready ON jobs (queue, grp) WHERE grp IS NOT NULL AND state = 'ready';
    "#,
    // 7: names compare byte by byte (collation "C"), whatever the database's collation: the
    // indexes that hold them (ids, queues, groups) compare without the locale's rules on every
    // insert and lookup, and they sort as the SQLite store's do. The indexes are rebuilt; the
    // table is not rewritten. Changing a column's type drops its statistics (and autoanalyze
    // would not take them again until a tenth of the rows changed): they are taken again here.
    r#"
    ALTER TABLE jobs
        ALTER COLUMN id TYPE TEXT COLLATE "C",
        ALTER COLUMN queue TYPE TEXT COLLATE "C",
        ALTER COLUMN endpoint TYPE TEXT COLLATE "C",
        ALTER COLUMN grp TYPE TEXT COLLATE "C";
    ANALYZE jobs;
    "#,
    // 8: a pace learned from bare 429s, shared as the pause and the breaker are: until when the
    // nodes keep it (the latest refused request's send instant plus the time it is kept).
    r#"
    ALTER TABLE endpoint_holds ADD COLUMN paced_until BIGINT;
    "#,
    // 9: a node's last sign of life (each maintenance tick, on its presence connection) and
    // since when the rescue has found its presence lock free: a free lock alone is a sign to
    // look, not a death (a connection that blinked frees it too).
    r#"
    ALTER TABLE nodes ADD COLUMN seen_at BIGINT, ADD COLUMN free_since BIGINT;
    "#,
    // 10: completion callbacks: what a job asks to be told when it finishes (JSON), read with
    // the job. The deliveries are jobs of their own.
    r#"
    ALTER TABLE jobs ADD COLUMN callback TEXT;
    "#,
    // 11: the event log (`redial_store::Event`). Job events are written by a trigger, in the
    // statement that finishes or replays the job, so that no path forgets one; it names
    // `finished_at` and `replays`, so a lease (which sets neither) does not fire it. Commits do
    // not come in sequence order, so an event also keeps its transaction's id: readers take only
    // the events of transactions older than every one still running (`sql::events`).
    r#"
    CREATE TABLE events (
        tx       XID8 NOT NULL DEFAULT pg_current_xact_id(),
        seq      BIGINT GENERATED ALWAYS AS IDENTITY,
        at       BIGINT NOT NULL,
        kind     TEXT NOT NULL,
        queue    TEXT,
        job_id   TEXT,
        endpoint TEXT,
        category TEXT,
        reason   TEXT,
        until    BIGINT,
        PRIMARY KEY (tx, seq)
    );
    CREATE FUNCTION redial_job_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        IF NEW.replays > OLD.replays THEN
            INSERT INTO events (at, kind, queue, job_id, endpoint, reason)
            VALUES (NEW.updated_at, 'job.replayed', NEW.queue, NEW.id, NEW.endpoint,
                    OLD.last_reason);
        ELSE
            INSERT INTO events (at, kind, queue, job_id, endpoint, category, reason)
            VALUES (NEW.updated_at, 'job.' || NEW.state, NEW.queue, NEW.id, NEW.endpoint,
                    NEW.category, NEW.last_reason);
        END IF;
        RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER jobs_events AFTER UPDATE OF finished_at, replays ON jobs FOR EACH ROW
        WHEN (NEW.replays > OLD.replays
              OR (NEW.state IN ('completed', 'dead', 'cancelled')
                  AND NEW.state IS DISTINCT FROM OLD.state))
        EXECUTE FUNCTION redial_job_event();
    "#,
    // 12: what replays with changes did to a job (`redial_store::JobChange`, a JSON list),
    // read only when a job is shown: not in the job's columns.
    r#"
    ALTER TABLE jobs ADD COLUMN changes TEXT;
    "#,
    // 13: search (`JobFilter::idempotency_key`, `tag`, `reason_words`). `job_terms` holds each
    // job's key and tags (`redial_store::job_terms`) by bucket of 1,024 jobs
    // (`redial_store::TERM_BUCKET_BITS`: an insert writes where the last ones did), written by
    // the insert's own statement and
    // never updated: not an index on `jobs`, whose every lease and finish (none of them HOT)
    // would add an entry to it; a batch of 64 jobs or more puts its terms in one row of
    // `job_term_blocks` instead (see `sql::jobs::BLOCK_MIN`), which a deletion of one of
    // its jobs turns back into rows. `dead_words` holds the words of dead jobs' reasons
    // (`redial_store::reason_words`); dying only notes the job in `dead_pending` (in the
    // finish's event trigger, so that no path forgets one) and `Store::index_for_search`
    // writes the words later. Byte order ("C") for both: a search's word is a range of them.
    // Deleting jobs takes their rows with them (one statement-level trigger).
    r#"
    CREATE TABLE job_terms (
        bucket BIGINT NOT NULL,
        term   TEXT COLLATE "C" NOT NULL,
        seq    BIGINT NOT NULL,
        PRIMARY KEY (bucket, term, seq)
    );
    INSERT INTO job_terms (bucket, term, seq)
        SELECT seq >> 10, 'k:' || idempotency_key, seq FROM jobs
            WHERE idempotency_key IS NOT NULL
        UNION ALL SELECT seq >> 10, 't:' || t, seq
            FROM jobs, jsonb_array_elements_text(tags::jsonb) t
        ON CONFLICT DO NOTHING;
    CREATE TABLE job_term_blocks (
        first_seq BIGINT PRIMARY KEY,
        last_seq  BIGINT NOT NULL,
        bloom     BYTEA NOT NULL,
        terms     TEXT[] NOT NULL,
        seqs      BIGINT[] NOT NULL
    );
    -- Kept out of line as they are: compressing a block's random keys costs more than it saves.
    ALTER TABLE job_term_blocks ALTER COLUMN terms SET STORAGE EXTERNAL,
        ALTER COLUMN seqs SET STORAGE EXTERNAL;
    CREATE TABLE dead_words (
        word TEXT COLLATE "C" NOT NULL,
        seq  BIGINT NOT NULL,
        PRIMARY KEY (word, seq)
    );
    CREATE INDEX dead_words_seq ON dead_words (seq);
    CREATE TABLE dead_pending (seq BIGINT PRIMARY KEY);
    INSERT INTO dead_pending (seq) SELECT seq FROM jobs WHERE state = 'dead';
    CREATE OR REPLACE FUNCTION redial_job_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        IF NEW.replays > OLD.replays THEN
            INSERT INTO events (at, kind, queue, job_id, endpoint, reason)
            VALUES (NEW.updated_at, 'job.replayed', NEW.queue, NEW.id, NEW.endpoint,
                    OLD.last_reason);
        ELSE
            INSERT INTO events (at, kind, queue, job_id, endpoint, category, reason)
            VALUES (NEW.updated_at, 'job.' || NEW.state, NEW.queue, NEW.id, NEW.endpoint,
                    NEW.category, NEW.last_reason);
            IF NEW.state = 'dead' THEN
                INSERT INTO dead_pending (seq) VALUES (NEW.seq) ON CONFLICT DO NOTHING;
            END IF;
        END IF;
        RETURN NULL;
    END
    $fn$;
    CREATE FUNCTION redial_jobs_gone() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        DELETE FROM job_terms j USING gone g
            WHERE j.bucket = g.seq >> 10 AND j.term = 'k:' || g.idempotency_key
            AND j.seq = g.seq;
        DELETE FROM job_terms j USING gone g, jsonb_array_elements_text(g.tags::jsonb) t
            WHERE g.tags <> '[]' AND j.bucket = g.seq >> 10 AND j.term = 't:' || t
            AND j.seq = g.seq;
        -- A block that held a deleted job: the terms of its jobs still there become rows.
        WITH hit AS (
            DELETE FROM job_term_blocks b USING gone g
            WHERE b.first_seq = (SELECT max(k.first_seq) FROM job_term_blocks k
                                 WHERE k.first_seq <= g.seq)
            AND b.last_seq >= g.seq
            RETURNING b.terms, b.seqs)
        INSERT INTO job_terms (bucket, term, seq)
            SELECT u.s >> 10, u.t, u.s FROM hit, unnest(hit.terms, hit.seqs) AS u (t, s)
            WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.seq = u.s)
            ON CONFLICT DO NOTHING;
        DELETE FROM dead_words w USING gone g WHERE w.seq = g.seq;
        DELETE FROM dead_pending p USING gone g WHERE p.seq = g.seq;
        RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER jobs_gone AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone
        FOR EACH STATEMENT EXECUTE FUNCTION redial_jobs_gone();
    "#,
    // 14: an endpoint's retries waiting their backoff, found when its outage ends.
    r#"
    CREATE INDEX jobs_retrying ON jobs (endpoint, run_at) WHERE state = 'scheduled' AND attempts > 0;
    "#,
    // 15: ordering keys (`redial_store::OrderingKey`). A job with a key is in its key's line
    // while it waits, runs, or is dead with `block`; `oline` names the line
    // (`OrderingKey::line`), `ord_wait` is true for every job of a line but its head, and the
    // runnable indexes leave those out, so a lease never reads a job behind its key's head,
    // however long the line. The head is the line's running job, if any, or else its first job
    // by seq. Every change to a line takes the line's lock first (an advisory lock per line,
    // `redial_line_lock`), so two nodes never decide a line at once. Triggers keep the head: a
    // keyed job goes in waiting, and its insert makes the line's first job the head when the
    // line has none (`redial_line_insert`: a batch's rows are all in when their triggers run,
    // and two enqueues at once may commit out of seq order, so the new job is not always the
    // last; of two enqueued at once, the one committed first may go first); a head
    // that leaves its line (a finish) or is deleted from it makes the first job the head
    // (`redial_line_next`); a job that enters its line (a replay after `skip`), a run that ends
    // (an earlier job may have been replayed meanwhile) or a move to another queue sets the
    // head afresh (`redial_line_fix`, which locks the line's heads first: a lease that holds
    // one commits before, and the fix sees it running). The updates name `finished_at`,
    // `replays` or `queue`, which a lease does not set. A queue without keys writes nothing
    // more: the triggers' conditions are false for its jobs.
    r#"
    ALTER TABLE jobs ADD COLUMN okey TEXT COLLATE "C";
    ALTER TABLE jobs ADD COLUMN oline BIGINT;
    ALTER TABLE jobs ADD COLUMN ord_skip BOOLEAN NOT NULL DEFAULT FALSE;
    ALTER TABLE jobs ADD COLUMN ord_wait BOOLEAN NOT NULL DEFAULT FALSE;
    DROP INDEX jobs_runnable;
    DROP INDEX jobs_grouped;
    DROP INDEX jobs_grouped_ready;
    CREATE INDEX jobs_runnable ON jobs (queue, priority DESC, run_at, seq)
        INCLUDE (endpoint, attempts)
        WHERE grp IS NULL AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred');
    CREATE INDEX jobs_grouped ON jobs (queue, grp, priority DESC, run_at, seq)
        INCLUDE (endpoint, attempts)
        WHERE grp IS NOT NULL AND NOT ord_wait AND state IN ('ready', 'scheduled', 'deferred');
    CREATE INDEX jobs_grouped_ready ON jobs (queue, grp)
        WHERE grp IS NOT NULL AND NOT ord_wait AND state = 'ready';
    CREATE INDEX jobs_in_line ON jobs (oline, seq) WHERE oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip));
    CREATE INDEX jobs_line_heads ON jobs (queue, oline) WHERE NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip));
    CREATE FUNCTION redial_line_lock(l BIGINT) RETURNS VOID LANGUAGE sql
        AS $fn$ SELECT pg_advisory_xact_lock(1380207694, ((l # (l >> 32)) & 2147483647)::int) $fn$;
    CREATE FUNCTION redial_line_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM redial_line_lock(NEW.oline);
        UPDATE jobs SET ord_wait = FALSE WHERE seq = (SELECT seq FROM jobs
            WHERE oline = NEW.oline AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1) AND ord_wait
            AND NOT EXISTS (SELECT 1 FROM jobs WHERE queue = NEW.queue AND oline = NEW.oline
                AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)));
        RETURN NULL;
    END
    $fn$;
    CREATE FUNCTION redial_line_next() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM redial_line_lock(OLD.oline);
        UPDATE jobs SET ord_wait = FALSE WHERE seq = (SELECT seq FROM jobs
            WHERE oline = OLD.oline AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1) AND ord_wait;
        RETURN NULL;
    END
    $fn$;
    CREATE FUNCTION redial_line_fix(q TEXT, l BIGINT) RETURNS VOID LANGUAGE plpgsql
    AS $fn$
    DECLARE
        h BIGINT;
    BEGIN
        PERFORM redial_line_lock(l);
        PERFORM 1 FROM jobs WHERE queue = q AND oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip))
            FOR UPDATE;
        SELECT seq INTO h FROM jobs WHERE queue = q AND oline = l AND NOT ord_wait
            AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) AND state = 'running' LIMIT 1;
        IF h IS NULL THEN
            SELECT seq INTO h FROM jobs WHERE oline = l AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1;
        END IF;
        IF h IS NULL THEN
            RETURN;
        END IF;
        UPDATE jobs SET ord_wait = FALSE WHERE seq = h AND ord_wait;
        UPDATE jobs SET ord_wait = TRUE WHERE queue = q AND oline = l AND NOT ord_wait
            AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) AND seq <> h;
    END
    $fn$;
    CREATE FUNCTION redial_line_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        IF TG_NAME = 'jobs_line_move' THEN
            PERFORM redial_line_fix(OLD.queue, OLD.oline);
        END IF;
        PERFORM redial_line_fix(NEW.queue, NEW.oline);
        RETURN NULL;
    END
    $fn$;
    CREATE TRIGGER jobs_line_insert AFTER INSERT ON jobs FOR EACH ROW
        WHEN (NEW.oline IS NOT NULL) EXECUTE FUNCTION redial_line_insert();
    CREATE TRIGGER jobs_line_leave AFTER UPDATE OF finished_at ON jobs FOR EACH ROW
        WHEN (NEW.oline IS NOT NULL AND NOT OLD.ord_wait AND (OLD.state IN ('ready', 'scheduled', 'deferred', 'running') OR (OLD.state = 'dead' AND NOT OLD.ord_skip))
              AND NOT (NEW.state IN ('ready', 'scheduled', 'deferred', 'running') OR (NEW.state = 'dead' AND NOT NEW.ord_skip)))
        EXECUTE FUNCTION redial_line_next();
    CREATE TRIGGER jobs_line_enter AFTER UPDATE OF finished_at, replays ON jobs FOR EACH ROW
        WHEN (NEW.oline IS NOT NULL AND NOT (OLD.state IN ('ready', 'scheduled', 'deferred', 'running') OR (OLD.state = 'dead' AND NOT OLD.ord_skip)) AND (NEW.state IN ('ready', 'scheduled', 'deferred', 'running') OR (NEW.state = 'dead' AND NOT NEW.ord_skip)))
        EXECUTE FUNCTION redial_line_changed();
    CREATE TRIGGER jobs_line_run_ended AFTER UPDATE OF finished_at ON jobs FOR EACH ROW
        WHEN (NEW.oline IS NOT NULL AND OLD.state = 'running' AND (NEW.state IN ('ready', 'scheduled', 'deferred', 'running') OR (NEW.state = 'dead' AND NOT NEW.ord_skip)))
        EXECUTE FUNCTION redial_line_changed();
    CREATE TRIGGER jobs_line_move AFTER UPDATE OF queue ON jobs FOR EACH ROW
        WHEN (OLD.oline IS NOT NULL AND OLD.queue IS DISTINCT FROM NEW.queue)
        EXECUTE FUNCTION redial_line_changed();
    CREATE TRIGGER jobs_line_delete AFTER DELETE ON jobs FOR EACH ROW
        WHEN (OLD.oline IS NOT NULL AND NOT OLD.ord_wait AND (OLD.state IN ('ready', 'scheduled', 'deferred', 'running') OR (OLD.state = 'dead' AND NOT OLD.ord_skip)))
        EXECUTE FUNCTION redial_line_next();
    "#,
    // 16: one line index, as SQLite's migration 23. `jobs_in_line` is on (oline, ord_wait,
    // seq): a line's head and its first waiting job are each one seek in it, and
    // `jobs_line_heads` is gone. Every new row version of a keyed job (its lease, its
    // promotion) wrote an entry in both indexes; it writes one now. A line has one head at
    // most (the triggers keep it so, under the line's lock), so when its head leaves, the next
    // head is its first waiting job; its first job is the first of its head and its first
    // waiting job. The engine's batch record of completions promotes the next heads itself,
    // set-wise (`redial_lines_next`, one call for the batch instead of a trigger call a row):
    // it marks each keyed job it completes with `ord_wait`, and the leave trigger passes over
    // rows so marked.
    r#"
    DROP INDEX jobs_line_heads;
    DROP INDEX jobs_in_line;
    CREATE INDEX jobs_in_line ON jobs (oline, ord_wait, seq) WHERE oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip));
    CREATE OR REPLACE FUNCTION redial_line_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM redial_line_lock(NEW.oline);
        UPDATE jobs SET ord_wait = FALSE WHERE seq = LEAST(
                (SELECT seq FROM jobs WHERE oline = NEW.oline AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1),
                (SELECT seq FROM jobs WHERE oline = NEW.oline AND ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1))
            AND ord_wait
            AND NOT EXISTS (SELECT 1 FROM jobs WHERE oline = NEW.oline AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip))
                AND queue = NEW.queue);
        RETURN NULL;
    END
    $fn$;
    CREATE OR REPLACE FUNCTION redial_line_next() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        PERFORM redial_line_lock(OLD.oline);
        UPDATE jobs SET ord_wait = FALSE WHERE seq = (SELECT seq FROM jobs
            WHERE oline = OLD.oline AND ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1) AND ord_wait;
        RETURN NULL;
    END
    $fn$;
    CREATE OR REPLACE FUNCTION redial_line_fix(q TEXT, l BIGINT) RETURNS VOID LANGUAGE plpgsql
    AS $fn$
    DECLARE
        h BIGINT;
    BEGIN
        PERFORM redial_line_lock(l);
        PERFORM 1 FROM jobs WHERE oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) AND queue = q FOR UPDATE;
        SELECT seq INTO h FROM jobs WHERE oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) AND queue = q
            AND state = 'running' LIMIT 1;
        IF h IS NULL THEN
            h := LEAST(
                (SELECT seq FROM jobs WHERE oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1),
                (SELECT seq FROM jobs WHERE oline = l AND ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1));
        END IF;
        IF h IS NULL THEN
            RETURN;
        END IF;
        UPDATE jobs SET ord_wait = FALSE WHERE seq = h AND ord_wait;
        UPDATE jobs SET ord_wait = TRUE WHERE oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) AND queue = q
            AND seq <> h;
    END
    $fn$;
    DROP TRIGGER jobs_line_leave ON jobs;
    CREATE TRIGGER jobs_line_leave AFTER UPDATE OF finished_at ON jobs FOR EACH ROW
        WHEN (NEW.oline IS NOT NULL AND NOT OLD.ord_wait AND NOT NEW.ord_wait AND (OLD.state IN ('ready', 'scheduled', 'deferred', 'running') OR (OLD.state = 'dead' AND NOT OLD.ord_skip))
              AND NOT (NEW.state IN ('ready', 'scheduled', 'deferred', 'running') OR (NEW.state = 'dead' AND NOT NEW.ord_skip)))
        EXECUTE FUNCTION redial_line_next();
    CREATE FUNCTION redial_lines_next(ls BIGINT[]) RETURNS BIGINT LANGUAGE plpgsql AS $fn$
    DECLARE
        n BIGINT;
    BEGIN
        PERFORM count(redial_line_lock(l)) FROM (SELECT DISTINCT l FROM unnest(ls) AS u (l)
            ORDER BY l) AS s;
        UPDATE jobs SET ord_wait = FALSE WHERE seq IN (SELECT (SELECT seq FROM jobs
                WHERE oline = u.l AND ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1)
            FROM unnest(ls) AS u (l)) AND ord_wait;
        GET DIAGNOSTICS n = ROW_COUNT;
        RETURN n;
    END
    $fn$;
    "#,
    // 17: the attempt that ends a job is kept in the job's row (`final_attempt`, the attempt's
    // JSON as `attempts.data` holds it), written by the statement that finishes the job: a job
    // that succeeds first time writes no attempt row (no heap tuple, no index entry). Attempts
    // that do not end it keep their rows. A replay (the one way back from a finished state)
    // sets it to NULL, and the event trigger moves the old one to `attempts` under its number,
    // so the timeline stays whole.
    r#"
    ALTER TABLE jobs ADD COLUMN final_attempt TEXT;
    CREATE OR REPLACE FUNCTION redial_job_event() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN
        IF NEW.replays > OLD.replays THEN
            INSERT INTO events (at, kind, queue, job_id, endpoint, reason)
            VALUES (NEW.updated_at, 'job.replayed', NEW.queue, NEW.id, NEW.endpoint,
                    OLD.last_reason);
            IF OLD.final_attempt IS NOT NULL THEN
                INSERT INTO attempts (job_seq, number, data)
                VALUES (OLD.seq, (OLD.final_attempt::jsonb ->> 'number')::int,
                        OLD.final_attempt);
            END IF;
        ELSE
            INSERT INTO events (at, kind, queue, job_id, endpoint, category, reason)
            VALUES (NEW.updated_at, 'job.' || NEW.state, NEW.queue, NEW.id, NEW.endpoint,
                    NEW.category, NEW.last_reason);
            IF NEW.state = 'dead' THEN
                INSERT INTO dead_pending (seq) VALUES (NEW.seq) ON CONFLICT DO NOTHING;
            END IF;
        END IF;
        RETURN NULL;
    END
    $fn$;
    "#,
    // 18: the completions of the engine's batch record write one event row per batch, not one
    // per job: the batch statement inserts a row whose `batch` holds them (a JSON list of [at,
    // queue, job id, endpoint, reason]) and marks the jobs (`logged`), which the trigger passes
    // over; every other finish (dead, cancelled, a completion recorded one at a time) is still
    // written by the trigger, and a replay clears the mark. Sequence numbers are now taken
    // 1,024 at a time (`sql::events::EVENT_BLOCK`): the completions of a row are numbered from
    // the row's, so that every event keeps a cursor of its own.
    r#"
    ALTER TABLE events ADD COLUMN batch TEXT;
    ALTER TABLE events ALTER COLUMN seq SET INCREMENT BY 1024;
    ALTER TABLE jobs ADD COLUMN logged BOOLEAN;
    DROP TRIGGER jobs_events ON jobs;
    CREATE TRIGGER jobs_events AFTER UPDATE OF finished_at, replays ON jobs FOR EACH ROW
        WHEN (NEW.replays > OLD.replays
              OR (NEW.state IN ('completed', 'dead', 'cancelled')
                  AND NEW.state IS DISTINCT FROM OLD.state AND NEW.logged IS NULL))
        EXECUTE FUNCTION redial_job_event();
    "#,
    // 19: a lease changes no indexed column, so that it is a HOT update (no new entry in any
    // index; issue 56, `bench/pg-row-cost`: 4.5-5.3 us a row instead of 13-15). A leased job
    // keeps `state = 'ready'` and is known by its `lease_owner` (`sql::RUNNING`; every read
    // says `running` as before), `jobs_leased` is gone, and the rescue finds expired leases by
    // their log: each lease and heartbeat writes one row (`leases`: the owner, the end, the
    // jobs' seqs) for its batch, which the rescue deletes once it has ended. The table leaves
    // room on its pages for the lease's new row version (`fillfactor`).
    r#"
    CREATE TABLE leases (owner TEXT NOT NULL, until BIGINT NOT NULL, seqs BIGINT[] NOT NULL);
    CREATE INDEX leases_until ON leases (until);
    INSERT INTO leases (owner, until, seqs)
        SELECT lease_owner, lease_until, array_agg(seq) FROM jobs
        WHERE state = 'running' AND lease_owner IS NOT NULL AND lease_until IS NOT NULL
        GROUP BY lease_owner, lease_until;
    UPDATE jobs SET state = 'ready' WHERE state = 'running';
    DROP INDEX jobs_leased;
    ALTER TABLE jobs SET (fillfactor = 50);
    CREATE OR REPLACE FUNCTION redial_line_fix(q TEXT, l BIGINT) RETURNS VOID LANGUAGE plpgsql
    AS $fn$
    DECLARE
        h BIGINT;
    BEGIN
        PERFORM redial_line_lock(l);
        PERFORM 1 FROM jobs WHERE oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) AND queue = q FOR UPDATE;
        SELECT seq INTO h FROM jobs WHERE oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) AND queue = q
            AND state = 'ready' AND lease_owner IS NOT NULL LIMIT 1;
        IF h IS NULL THEN
            h := LEAST(
                (SELECT seq FROM jobs WHERE oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1),
                (SELECT seq FROM jobs WHERE oline = l AND ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) ORDER BY seq LIMIT 1));
        END IF;
        IF h IS NULL THEN
            RETURN;
        END IF;
        UPDATE jobs SET ord_wait = FALSE WHERE seq = h AND ord_wait;
        UPDATE jobs SET ord_wait = TRUE WHERE oline = l AND NOT ord_wait AND oline IS NOT NULL AND (state IN ('ready', 'scheduled', 'deferred', 'running') OR (state = 'dead' AND NOT ord_skip)) AND queue = q
            AND seq <> h;
    END
    $fn$;
    DROP TRIGGER jobs_line_run_ended ON jobs;
    CREATE TRIGGER jobs_line_run_ended AFTER UPDATE OF finished_at ON jobs FOR EACH ROW
        WHEN (NEW.oline IS NOT NULL AND OLD.state = 'ready' AND OLD.lease_owner IS NOT NULL AND (NEW.state IN ('ready', 'scheduled', 'deferred', 'running') OR (NEW.state = 'dead' AND NOT NEW.ord_skip)))
        EXECUTE FUNCTION redial_line_changed();
    "#,
];

/// Where the schema (in the connection's `search_path`) stands, without changing it.
pub async fn status(client: &Client) -> Result<redial_store::SchemaStatus, String> {
    let exists: bool = client
        .query_one("SELECT to_regclass('redial_schema') IS NOT NULL", &[])
        .await
        .map_err(|e| crate::describe(&e))?
        .get(0);
    let version = if exists {
        client
            .query_opt("SELECT version FROM redial_schema", &[])
            .await
            .map_err(|e| crate::describe(&e))?
            .map_or(0, |r| r.get::<_, i32>(0))
    } else {
        0
    };
    Ok(redial_store::SchemaStatus::of(
        usize::try_from(version).unwrap_or(0),
        MIGRATIONS,
    ))
}

/// Brings the schema (in the connection's `search_path`) to the latest version.
pub async fn migrate(client: &mut Client) -> Result<(), String> {
    migrate_to(client, MIGRATIONS.len()).await
}

/// Brings the schema up to version `target` (at most the latest; never down): `migrate`, and
/// the tests that build a database as an older Redial left it.
pub(crate) async fn migrate_to(client: &mut Client, target: usize) -> Result<(), String> {
    let target = target.min(MIGRATIONS.len());
    let tx = client
        .transaction()
        .await
        .map_err(|e| crate::describe(&e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_LOCK])
        .await
        .map_err(|e| crate::describe(&e))?;
    // Read before writing: a server that takes no writes (for now) can still be connected to
    // when the schema is current, and readiness says why nothing can be written.
    let exists: bool = tx
        .query_one("SELECT to_regclass('redial_schema') IS NOT NULL", &[])
        .await
        .map_err(|e| crate::describe(&e))?
        .get(0);
    if !exists {
        tx.batch_execute("CREATE TABLE IF NOT EXISTS redial_schema (version INTEGER NOT NULL)")
            .await
            .map_err(|e| crate::describe(&e))?;
    }
    let version: i32 = tx
        .query_opt("SELECT version FROM redial_schema", &[])
        .await
        .map_err(|e| crate::describe(&e))?
        .map_or(0, |r| r.get(0));
    let known = MIGRATIONS.len() as i32;
    let wanted = target as i32;
    if version > known {
        return Err(format!(
            "the database has schema version {version}, newer than this Redial knows ({known}): upgrade Redial"
        ));
    }
    for (i, migration) in MIGRATIONS
        .iter()
        .enumerate()
        .take(target)
        .skip(version as usize)
    {
        tx.batch_execute(migration)
            .await
            .map_err(|e| format!("migration {}: {}", i + 1, crate::describe(&e)))?;
    }
    if version < wanted {
        tx.execute("DELETE FROM redial_schema", &[])
            .await
            .map_err(|e| crate::describe(&e))?;
        tx.execute(
            "INSERT INTO redial_schema (version) VALUES ($1)",
            &[&wanted],
        )
        .await
        .map_err(|e| crate::describe(&e))?;
    }
    tx.commit().await.map_err(|e| crate::describe(&e))
}
