//! Jobs in and out: insert (with its duplicate and conflict rules), get, list.

use super::record::attempt_key;
use super::{backend, get, json_err, ms, must_get, query_jobs, query_rows, COLS};
use crate::counts;
use redial_policy::Timestamp;
use redial_store::{
    Attempt, Callback, Condition, InsertOutcome, Job, JobFilter, JobId, JobListParams, JobPage,
    JobState, NewJob, OnDead, OrderingKey, SqlValue, StoreResult,
};
use rusqlite::types::Value;
use rusqlite::{params, Connection, OptionalExtension};

pub fn insert(tx: &Connection, job: NewJob) -> StoreResult<InsertOutcome> {
    insert_as(tx, job, None)
}

/// Inserts `jobs` in the caller's transaction, one by one ([`insert`]).
pub fn insert_batch(tx: &Connection, jobs: Vec<NewJob>) -> StoreResult<Vec<InsertOutcome>> {
    jobs.into_iter().map(|j| insert(tx, j)).collect()
}

/// [`insert`], or with `lease` (owner, until) the job goes in already leased: running, as a
/// callback delivery its recorder sends at once (`Recorded::delivery`).
pub(super) fn insert_as(
    tx: &Connection,
    job: NewJob,
    lease: Option<(&str, Timestamp)>,
) -> StoreResult<InsertOutcome> {
    let request = serde_json::to_string(&job.request).map_err(json_err)?;
    let state = match lease {
        Some(_) => JobState::Running,
        None => job.initial_state(),
    };
    let tags = serde_json::to_string(&job.tags).map_err(json_err)?;
    let policy = job
        .policy
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(json_err)?;
    let callback = job
        .callback
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(json_err)?;
    // A keyed job is the last of its key's line: it waits when the line has a job (schema
    // migration 22); the CASE reads nothing for a job without a key.
    static INSERT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            "INSERT INTO jobs (id, queue, endpoint, state, request, idempotency_key, priority, \
             run_at, deadline, tags, policy, created_at, updated_at, grp, callback, lease_owner, \
             lease_until, okey, ord_skip, oline, ord_wait) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13, ?14, ?15, ?16, \
             ?17, ?18, ?19, CASE WHEN ?19 IS NULL THEN 0 ELSE EXISTS (SELECT 1 FROM jobs \
             INDEXED BY jobs_in_line WHERE oline = ?19 AND {}) END) \
             ON CONFLICT (id) DO NOTHING",
            lined!()
        )
    });
    let inserted = tx
        .prepare_cached(&INSERT)
        .and_then(|mut s| {
            s.execute(params![
                job.id.0,
                job.queue,
                job.endpoint,
                state.as_str(),
                request,
                job.idempotency_key,
                job.priority,
                ms(job.run_at),
                job.deadline.map(ms),
                tags,
                policy,
                ms(job.created_at),
                job.group,
                callback,
                lease.map(|(owner, _)| owner),
                lease.map(|(_, until)| ms(until)),
                job.ordering.as_ref().map(|o| o.key.as_str()),
                job.ordering
                    .as_ref()
                    .is_some_and(|o| o.on_dead == OnDead::Skip),
                job.ordering
                    .as_ref()
                    .map(|o| OrderingKey::line(&job.queue, &o.key)),
            ])
        })
        .map_err(backend)?;
    if inserted == 0 {
        // The id exists: the same job again is a duplicate, anything else a conflict.
        let existing = must_get(tx, &job.id)?;
        let same = existing.queue == job.queue
            && existing.request.same_as(&job.request)
            && existing.idempotency_key == job.idempotency_key
            && existing.callback == job.callback;
        return Ok(if same {
            InsertOutcome::Duplicate(existing)
        } else {
            InsertOutcome::Conflict(existing)
        });
    }
    counts::moved(&job.queue, &job.endpoint, None, Some((state, None)), 1);
    // The job as stored, built from what was written rather than read back.
    // Its key and tags go in the search index later (`index_terms`), not here.
    let seq = tx.last_insert_rowid();
    Ok(InsertOutcome::Inserted(match lease {
        Some((owner, until)) => job.into_leased(seq, owner, until),
        None => job.into_stored(seq),
    }))
}

/// Puts `terms` ([`redial_store::job_terms`]) in the search index for the job of `seq`.
pub(super) fn insert_terms(tx: &Connection, seq: i64, terms: &[String]) -> StoreResult<()> {
    if terms.is_empty() {
        return Ok(());
    }
    // Up to four terms a statement (a key and three tags: most jobs, in one), so that the
    // statement cache holds four shapes at most.
    const ROWS: [&str; 4] = [
        "INSERT OR IGNORE INTO job_terms (bucket, term, seq) VALUES (?1, ?3, ?2)",
        "INSERT OR IGNORE INTO job_terms (bucket, term, seq) VALUES (?1, ?3, ?2), (?1, ?4, ?2)",
        "INSERT OR IGNORE INTO job_terms (bucket, term, seq) VALUES (?1, ?3, ?2), (?1, ?4, ?2), \
         (?1, ?5, ?2)",
        "INSERT OR IGNORE INTO job_terms (bucket, term, seq) VALUES (?1, ?3, ?2), (?1, ?4, ?2), \
         (?1, ?5, ?2), (?1, ?6, ?2)",
    ];
    let bucket = redial_store::term_bucket(seq);
    for chunk in terms.chunks(ROWS.len()) {
        let mut s = tx.prepare_cached(ROWS[chunk.len() - 1]).map_err(backend)?;
        let mut values: Vec<&dyn rusqlite::ToSql> = vec![&bucket, &seq];
        values.extend(chunk.iter().map(|t| t as &dyn rusqlite::ToSql));
        s.execute(values.as_slice()).map_err(backend)?;
    }
    Ok(())
}

pub fn get_with_attempts(
    c: &mut Connection,
    id: &JobId,
) -> StoreResult<Option<(Job, Vec<Attempt>)>> {
    let Some(job) = get(c, id)? else {
        return Ok(None);
    };
    let mut rows = query_rows(
        c,
        "SELECT data FROM attempts WHERE id >= ?1 AND id < ?2 ORDER BY id",
        [attempt_key(job.seq, 0)?, attempt_key(job.seq + 1, 0)?],
        |r| r.get::<_, String>(0),
    )?;
    rows.extend(final_attempt(c, job.seq)?);
    let attempts = rows
        .iter()
        .map(|d| serde_json::from_str(d).map_err(json_err))
        .collect::<StoreResult<Vec<Attempt>>>()?;
    Ok(Some((job, Attempt::in_order(attempts))))
}

/// The attempt that ended the job of `seq`, as stored in its row (schema migration 24).
fn final_attempt(c: &Connection, seq: i64) -> StoreResult<Option<String>> {
    c.prepare_cached("SELECT final_attempt FROM jobs WHERE seq = ?1")
        .and_then(|mut s| {
            s.query_row([seq], |r| r.get::<_, Option<String>>(0))
                .optional()
        })
        .map(Option::flatten)
        .map_err(backend)
}

/// Appends the filter's conditions to `sql` and their values to `params`.
pub(super) fn push_filter(sql: &mut String, params: &mut Vec<Value>, f: &JobFilter) {
    if let Some(s) = f.state {
        // A literal from the fixed set of state names, not a parameter: only then can SQLite use
        // the partial index of that state (jobs_dead).
        sql.push_str(&format!(" AND state = '{}'", s.as_str()));
    }
    push_conditions(sql, params, f.conditions());
}

pub(super) fn push_conditions(
    sql: &mut String,
    params: &mut Vec<Value>,
    conditions: Vec<Condition>,
) {
    for c in conditions {
        match c.value {
            SqlValue::Text(t) => params.push(Value::Text(t)),
            SqlValue::Int(i) => params.push(Value::Integer(i)),
            SqlValue::TextList(list) => {
                // One placeholder however long the list (SQLite caps their number): a JSON array.
                params.push(Value::Text(
                    serde_json::to_string(&list).expect("a list of strings serialises to JSON"),
                ));
                sql.push_str(&format!(
                    " AND {} IN (SELECT value FROM json_each(?{}))",
                    c.clause,
                    params.len()
                ));
                continue;
            }
            SqlValue::Term(t) => {
                // A point read in each bucket from the first job's to the last's, and the
                // blocks whose bloom may hold the term.
                let (h1, h2) = redial_store::term_hashes(&t);
                params.push(Value::Text(t));
                let term = params.len();
                params.push(Value::Integer(h1));
                params.push(Value::Integer(h2));
                let bits: Vec<String> = (0..redial_store::BLOOM_HASHES)
                    .map(|i| {
                        format!(
                            "substr(k.bloom, (?{} + {i} * ?{}) % length(k.bloom) + 1, 1) = x'01'",
                            term + 1,
                            term + 2
                        )
                    })
                    .collect();
                sql.push_str(&format!(
                    " AND seq IN (WITH RECURSIVE b(n) AS (SELECT (SELECT MIN(seq) FROM jobs) >> 10 \
                     UNION ALL SELECT n + 1 FROM b WHERE n < (SELECT MAX(seq) FROM jobs) >> 10) \
                     SELECT t.seq FROM b, job_terms t WHERE t.bucket = b.n AND t.term = ?{term} \
                     UNION ALL SELECT json_extract(k.seqs, '$[' || u.key || ']') \
                     FROM job_term_blocks k, json_each(k.terms) u \
                     WHERE {} AND u.value = ?{term})",
                    bits.join(" AND ")
                ));
                continue;
            }
            SqlValue::Words(words) => {
                // CROSS JOIN: SQLite keeps the order given, the likeliest rarest word first.
                let bind = |v: String| {
                    params.push(Value::Text(v));
                    format!("?{}", params.len())
                };
                sql.push_str(&redial_store::words_condition(&words, bind, " CROSS JOIN "));
                continue;
            }
        }
        sql.push_str(&format!(" AND {} ?{}", c.clause, params.len()));
    }
}

pub fn list(c: &mut Connection, p: &JobListParams) -> StoreResult<JobPage> {
    let mut sql = format!("SELECT {COLS} FROM jobs WHERE 1=1");
    let mut params = Vec::new();
    let state_only = JobFilter {
        state: p.filter.state,
        ..JobFilter::default()
    };
    push_filter(&mut sql, &mut params, &state_only);
    push_conditions(&mut sql, &mut params, p.conditions());
    params.push(Value::Integer(p.rows_to_read()));
    sql.push_str(&format!(" ORDER BY seq LIMIT ?{}", params.len()));
    Ok(JobPage::from_rows(query_jobs(c, &sql, &params)?, p.limit))
}

/// The last attempt of the job of `seq`, if it has one.
pub(super) fn last_attempt(c: &Connection, seq: i64) -> StoreResult<Option<Attempt>> {
    if let Some(d) = final_attempt(c, seq)? {
        return serde_json::from_str(&d).map(Some).map_err(json_err);
    }
    let rows = query_rows(
        c,
        "SELECT data FROM attempts WHERE id >= ?1 AND id < ?2 ORDER BY id DESC LIMIT 1",
        [attempt_key(seq, 0)?, attempt_key(seq + 1, 0)?],
        |r| r.get::<_, String>(0),
    )?;
    rows.first()
        .map(|d| serde_json::from_str(d).map_err(json_err))
        .transpose()
}

/// Inserts the callback delivery `job`, as it now stands, owes (with its last attempt's
/// response), in the caller's transaction. A delivery made before under the same id is left
/// as it is.
pub(super) fn insert_delivery(c: &Connection, job: &Job, now: Timestamp) -> StoreResult<()> {
    if job.callback.is_none() {
        return Ok(());
    }
    let last = last_attempt(c, job.seq)?;
    if let Some(delivery) = Callback::delivery(job, last.as_ref(), now) {
        insert(c, delivery)?;
    }
    Ok(())
}
