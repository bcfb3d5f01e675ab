//! The schema and its migrations, applied in order and recorded in `PRAGMA user_version`.

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
];

/// Sets the connection up for durability and brings the schema to the latest version.
pub fn prepare(conn: &Connection) -> rusqlite::Result<()> {
    // WAL lets readers run beside the writer; FULL syncs the WAL on every commit, so an
    // acknowledged write survives power loss, not only a process crash.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // 32 MiB of page cache (the default is 2 MiB): the hot part of the queue stays in memory.
    conn.pragma_update(None, "cache_size", -32_768)?;
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
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
