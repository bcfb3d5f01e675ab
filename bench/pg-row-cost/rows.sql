-- What one update of a job's row costs on PostgreSQL, by what the table carries (issue 56).
-- Run by run.sh on a database Redial's migrations made. Every variant holds the same 50,000
-- jobs, all `ready`, and takes the hot path's two updates (the lease's, the record's) by seq
-- in batches of 40, as the engine's statements do; the time is the server's, per row, inside
-- one PL/pgSQL loop (no round trip, no commit: the rows' own cost).
\set ON_ERROR_STOP on
SET client_min_messages = warning;
TRUNCATE jobs CASCADE;
INSERT INTO jobs (id, queue, endpoint, state, request, priority, run_at, tags, created_at, updated_at)
SELECT 'job_' || md5(g::text), 'default', 'http://127.0.0.1:9999', 'ready',
  '{"method":"POST","url":"http://127.0.0.1:9999/noop","headers":{"content-type":"application/json"},"body":"{\"n\":'
    || g || ',\"pad\":\"' || repeat('x', 150) || '\"}"}',
  0, 1000, '[]', 1000, 1000
FROM generate_series(1, 50000) g;

CREATE FUNCTION pg_row_cost(tbl text, q text) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE lo bigint; hi bigint; t0 timestamptz; s bigint;
BEGIN
  EXECUTE format('SELECT min(seq), max(seq) FROM %I', tbl) INTO lo, hi;
  t0 := clock_timestamp();
  s := lo;
  WHILE s <= hi LOOP
    EXECUTE format(q, tbl) USING ARRAY(SELECT generate_series(s, least(s + 39, hi)));
    s := s + 40;
  END LOOP;
  RETURN round(extract(epoch FROM clock_timestamp() - t0) * 1e6 / (hi - lo + 1), 2);
END $$;

-- a: as Redial's schema has it (every index, fillfactor 100)
-- b: every index, fillfactor 40 (room on the page for the new versions)
-- c: the primary key and the id's index only, fillfactor 100
-- d: the primary key and the id's index only, fillfactor 40: the updates can be HOT
CREATE TABLE row_cost_a (LIKE jobs INCLUDING DEFAULTS INCLUDING INDEXES);
CREATE TABLE row_cost_b (LIKE jobs INCLUDING DEFAULTS INCLUDING INDEXES) WITH (fillfactor = 40);
CREATE TABLE row_cost_c (LIKE jobs INCLUDING DEFAULTS, PRIMARY KEY (seq), UNIQUE (id));
CREATE TABLE row_cost_d (LIKE jobs INCLUDING DEFAULTS, PRIMARY KEY (seq), UNIQUE (id)) WITH (fillfactor = 40);
INSERT INTO row_cost_a OVERRIDING SYSTEM VALUE SELECT * FROM jobs;
INSERT INTO row_cost_b OVERRIDING SYSTEM VALUE SELECT * FROM jobs;
INSERT INTO row_cost_c SELECT * FROM jobs;
INSERT INTO row_cost_d SELECT * FROM jobs;
VACUUM ANALYZE row_cost_a, row_cost_b, row_cost_c, row_cost_d;

SELECT v AS "table", pg_row_cost(v,
    'UPDATE %I SET state = ''running'', lease_owner = ''node-1'', lease_until = 99999, updated_at = 2000 '
    'WHERE seq = ANY($1) AND state = ''ready''') AS "lease us/row",
  pg_row_cost(v,
    'UPDATE %I SET state = ''completed'', finished_at = 3000, attempts = 1, runs = 1, lease_owner = NULL, '
    'lease_until = NULL, updated_at = 3000, last_reason = ''HTTP 200'', logged = TRUE, final_attempt = '
    '''{"number":1,"started_at":2000,"finished_at":3000,"outcome":{"status":200},"duration_ms":1}'' '
    'WHERE seq = ANY($1)') AS "record us/row"
FROM unnest(ARRAY['row_cost_a', 'row_cost_b', 'row_cost_c', 'row_cost_d']) v;
SELECT pg_stat_force_next_flush();
SELECT relname AS "table", n_tup_upd AS updates, n_tup_hot_upd AS hot
FROM pg_stat_user_tables WHERE relname LIKE 'row_cost_%' ORDER BY relname;

-- Three shapes of issue 56's second decision (a lease that does not write the job's row as it
-- is today), against a (today's two updates):
-- e: the runnable set in a narrow table of its own and the claims in another: the lease
--    deletes the runnable rows and inserts the claims; the record updates the job's row (from
--    `ready`: the lease left it alone) with every index, and deletes the claims. The enqueue
--    pays for the runnable row (its insert is timed apart).
-- g: the claims alone in a narrow table (the runnable set stays the job's indexes): the lease
--    locks the job's row and inserts its claim; the record updates the row and deletes it.
-- f: the lease as a HOT update: the job's row stays `ready` and only the lease's own columns
--    (owner, until; no index holds them) change, on a table with room on its pages; every
--    index but `jobs_leased` (a lease is no longer a state).
CREATE TABLE row_cost_e (LIKE jobs INCLUDING DEFAULTS INCLUDING INDEXES);
INSERT INTO row_cost_e OVERRIDING SYSTEM VALUE SELECT * FROM jobs;
CREATE TABLE row_cost_e_runnable (seq bigint PRIMARY KEY, queue text NOT NULL,
  priority int NOT NULL, run_at bigint NOT NULL);
CREATE INDEX ON row_cost_e_runnable (queue, priority DESC, run_at, seq);
CREATE TABLE row_cost_e_claims (seq bigint PRIMARY KEY, owner text NOT NULL,
  lease_until bigint NOT NULL);
CREATE TABLE row_cost_g (LIKE jobs INCLUDING DEFAULTS INCLUDING INDEXES);
DROP INDEX IF EXISTS row_cost_g_lease_until_idx;
INSERT INTO row_cost_g OVERRIDING SYSTEM VALUE SELECT * FROM jobs;
CREATE TABLE row_cost_g_claims (seq bigint PRIMARY KEY, owner text NOT NULL,
  lease_until bigint NOT NULL);
CREATE INDEX ON row_cost_g_claims (lease_until);
CREATE TABLE row_cost_f (LIKE jobs INCLUDING DEFAULTS INCLUDING INDEXES) WITH (fillfactor = 40);
DROP INDEX IF EXISTS row_cost_f_lease_until_idx;
INSERT INTO row_cost_f OVERRIDING SYSTEM VALUE SELECT * FROM jobs;
VACUUM ANALYZE row_cost_e, row_cost_e_claims, row_cost_f, row_cost_g, row_cost_g_claims;

SELECT 'row_cost_e' AS "table", pg_row_cost('row_cost_e',
    'INSERT INTO row_cost_e_runnable SELECT seq, queue, priority, run_at FROM row_cost_e '
    'WHERE seq = ANY($1)') AS "enqueue's runnable row us/row",
  pg_row_cost('row_cost_e',
    'WITH d AS (DELETE FROM row_cost_e_runnable WHERE seq = ANY($1) RETURNING seq) '
    'INSERT INTO row_cost_e_claims SELECT seq, ''node-1'', 99999 FROM d') AS "lease us/row",
  pg_row_cost('row_cost_e',
    'WITH d AS (DELETE FROM row_cost_e_claims WHERE seq = ANY($1)) '
    'UPDATE %I SET state = ''completed'', finished_at = 3000, attempts = 1, runs = 1, '
    'updated_at = 3000, last_reason = ''HTTP 200'', logged = TRUE, final_attempt = '
    '''{"number":1,"started_at":2000,"finished_at":3000,"outcome":{"status":200},"duration_ms":1}'' '
    'WHERE seq = ANY($1)') AS "record us/row";
SELECT 'row_cost_f' AS "table", pg_row_cost('row_cost_f',
    'UPDATE %I SET lease_owner = ''node-1'', lease_until = 99999 '
    'WHERE seq = ANY($1) AND state = ''ready''') AS "lease us/row",
  pg_row_cost('row_cost_f',
    'UPDATE %I SET state = ''completed'', finished_at = 3000, attempts = 1, runs = 1, lease_owner = NULL, '
    'lease_until = NULL, updated_at = 3000, last_reason = ''HTTP 200'', logged = TRUE, final_attempt = '
    '''{"number":1,"started_at":2000,"finished_at":3000,"outcome":{"status":200},"duration_ms":1}'' '
    'WHERE seq = ANY($1)') AS "record us/row";
SELECT 'row_cost_g' AS "table", pg_row_cost('row_cost_g',
    'INSERT INTO row_cost_g_claims SELECT seq, ''node-1'', 99999 FROM %I '
    'WHERE seq = ANY($1) AND state = ''ready'' FOR UPDATE SKIP LOCKED') AS "lease us/row",
  pg_row_cost('row_cost_g',
    'WITH d AS (DELETE FROM row_cost_g_claims WHERE seq = ANY($1) AND owner = ''node-1'' RETURNING seq) '
    'UPDATE %I SET state = ''completed'', finished_at = 3000, attempts = 1, runs = 1, '
    'updated_at = 3000, last_reason = ''HTTP 200'', logged = TRUE, final_attempt = '
    '''{"number":1,"started_at":2000,"finished_at":3000,"outcome":{"status":200},"duration_ms":1}'' '
    'WHERE seq IN (SELECT seq FROM d)') AS "record us/row";
SELECT pg_stat_force_next_flush();
SELECT relname AS "table", n_tup_upd AS updates, n_tup_hot_upd AS hot
FROM pg_stat_user_tables WHERE relname IN ('row_cost_e', 'row_cost_f') ORDER BY relname;
