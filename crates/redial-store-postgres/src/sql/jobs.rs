//! Jobs in and out: insert (one, and batches in one statement), get, list.

use super::{
    cols, get, get_job, jobs_from_rows, json_err, ms, must_get, notify, notify_prepared, Param,
    NOTIFY, RUNNING,
};
use crate::{backend, Conn};
use redial_policy::Timestamp;
use redial_store::{
    Attempt, Callback, Condition, InsertOutcome, Job, JobFilter, JobId, JobListParams, JobPage,
    JobState, NewJob, OnDead, OrderingKey, SqlValue, StoreError, StoreResult,
};
use tokio_postgres::types::ToSql;

pub async fn insert_one(c: &mut Conn, channel: &str, job: NewJob) -> StoreResult<InsertOutcome> {
    insert_batch(c, channel, vec![job])
        .await?
        .pop()
        .ok_or_else(|| StoreError::Backend("no outcome for the inserted job".into()))
}

/// The insert of a batch of jobs, one statement (arrays unnested into rows), less its
/// `RETURNING`.
macro_rules! insert_jobs {
    () => {
        "INSERT INTO jobs (id, queue, endpoint, state, request, idempotency_key, \
         priority, run_at, deadline, tags, policy, created_at, updated_at, grp, callback, \
         okey, ord_skip, oline, ord_wait) \
         SELECT id, queue, endpoint, state, request, key, priority, run_at, deadline, tags, \
             policy, created_at, created_at, grp, callback, okey, ord_skip, oline, \
             oline IS NOT NULL \
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
             $7::int[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::bigint[], \
             $13::text[], $14::text[], $15::text[], $16::bool[], $17::bigint[]) \
             WITH ORDINALITY AS t (id, queue, endpoint, state, request, key, priority, run_at, \
                 deadline, tags, policy, created_at, grp, callback, okey, ord_skip, oline, n) \
         ORDER BY n \
         ON CONFLICT (id) DO NOTHING"
    };
}

/// One statement for the whole batch; ids that already exist are then read back and compared,
/// as duplicates or conflicts. The new jobs' terms go in the search index next
/// ([`insert_rows`]).
pub(super) const INSERT_MANY: &str = concat!(insert_jobs!(), " RETURNING id, seq");

/// Batches of at least this many jobs put their terms in one block (`job_term_blocks`,
/// [`INSERT_BLOCK`]) instead of a row each (`job_terms`, [`INSERT_TERMS`]). Measured with
/// `redial-bench --only search-cost` and the server's statement times: a row per term cost a
/// batched enqueue about a fifth of its rate (PostgreSQL's own cost of writing a row), and the
/// terms written by the insert's own statement (a CTE) cost a single insert a fifth of its
/// rate in planning alone; a block costs the batch's insert about 0.4 ms of 11.
const BLOCK_MIN: usize = 64;

/// One block of terms (`$1` first seq, `$2` last, `$3` the bloom of the terms,
/// `redial_store::term_bloom`, `$4` the terms, `$5` their jobs' seqs). A search reads each
/// block's bloom and, where it may hold the term, its arrays.
const INSERT_BLOCK: &str = "INSERT INTO job_term_blocks (first_seq, last_seq, bloom, terms, seqs) \
     VALUES ($1, $2, $3, $4, $5)";

/// Terms a row each (`$1` their jobs' seqs, `$2` the terms).
const INSERT_TERMS: &str = "INSERT INTO job_terms (bucket, term, seq) \
     SELECT s >> 10, t, s FROM unnest($1::bigint[], $2::text[]) AS u (s, t) \
     ON CONFLICT DO NOTHING";

/// [`INSERT_MANY`] with each job's lease (`$18` owner, `$19` until; none for a job that goes
/// in as it would): a callback delivery its recorder sends at once goes in leased to it.
/// A job that goes in leased says `ready` with its owner (schema migration 19), and its lease
/// is logged in `leases` for the rescue.
pub(super) const INSERT_MANY_LEASED: &str =
    "WITH d AS (INSERT INTO jobs (id, queue, endpoint, state, request, idempotency_key, \
     priority, run_at, deadline, tags, policy, created_at, updated_at, grp, callback, \
     okey, ord_skip, oline, ord_wait, lease_owner, lease_until) \
     SELECT id, queue, endpoint, state, request, key, priority, run_at, deadline, tags, policy, \
         created_at, created_at, grp, callback, okey, ord_skip, oline, oline IS NOT NULL, \
         lease_owner, lease_until \
     FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], \
         $7::int[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::bigint[], \
         $13::text[], $14::text[], $15::text[], $16::bool[], $17::bigint[], $18::text[], \
         $19::bigint[]) \
         WITH ORDINALITY AS t (id, queue, endpoint, state, request, key, priority, run_at, \
             deadline, tags, policy, created_at, grp, callback, okey, ord_skip, oline, \
             lease_owner, lease_until, n) \
     ORDER BY n \
     ON CONFLICT (id) DO NOTHING RETURNING id, seq, lease_owner, lease_until), \
     l AS (INSERT INTO leases (owner, until, seqs) SELECT lease_owner, lease_until, \
         array_agg(seq) FROM d WHERE lease_owner IS NOT NULL GROUP BY lease_owner, lease_until) \
     SELECT id, seq FROM d";

/// Jobs as the columns of [`INSERT_MANY`] (`$1` to `$17`), one array per column, and their
/// leases as [`INSERT_MANY_LEASED`]'s (`$18`, `$19`).
pub(super) struct JobRows<'a> {
    id: Vec<&'a str>,
    queue: Vec<&'a str>,
    endpoint: Vec<&'a str>,
    state: Vec<&'static str>,
    request: Vec<String>,
    key: Vec<Option<&'a str>>,
    priority: Vec<i32>,
    run_at: Vec<i64>,
    deadline: Vec<Option<i64>>,
    tags: Vec<String>,
    policy: Vec<Option<String>>,
    created_at: Vec<i64>,
    group: Vec<Option<&'a str>>,
    callback: Vec<Option<String>>,
    okey: Vec<Option<&'a str>>,
    ord_skip: Vec<bool>,
    oline: Vec<Option<i64>>,
    lease_owner: Vec<Option<&'a str>>,
    lease_until: Vec<Option<i64>>,
}

impl<'a> JobRows<'a> {
    pub(super) fn of(jobs: &'a [NewJob]) -> StoreResult<JobRows<'a>> {
        let json = |v: Option<Result<String, serde_json::Error>>| v.transpose().map_err(json_err);
        let mut r = JobRows {
            id: Vec::with_capacity(jobs.len()),
            queue: Vec::with_capacity(jobs.len()),
            endpoint: Vec::with_capacity(jobs.len()),
            state: Vec::with_capacity(jobs.len()),
            request: Vec::with_capacity(jobs.len()),
            key: Vec::with_capacity(jobs.len()),
            priority: Vec::with_capacity(jobs.len()),
            run_at: Vec::with_capacity(jobs.len()),
            deadline: Vec::with_capacity(jobs.len()),
            tags: Vec::with_capacity(jobs.len()),
            policy: Vec::with_capacity(jobs.len()),
            created_at: Vec::with_capacity(jobs.len()),
            group: Vec::with_capacity(jobs.len()),
            callback: Vec::with_capacity(jobs.len()),
            okey: Vec::with_capacity(jobs.len()),
            ord_skip: Vec::with_capacity(jobs.len()),
            oline: Vec::with_capacity(jobs.len()),
            lease_owner: vec![None; jobs.len()],
            lease_until: vec![None; jobs.len()],
        };
        for job in jobs {
            r.id.push(job.id.0.as_str());
            r.queue.push(job.queue.as_str());
            r.endpoint.push(job.endpoint.as_str());
            r.state.push(job.initial_state().as_str());
            r.request
                .push(serde_json::to_string(&job.request).map_err(json_err)?);
            r.key.push(job.idempotency_key.as_deref());
            r.priority.push(job.priority);
            r.run_at.push(ms(job.run_at));
            r.deadline.push(job.deadline.map(ms));
            r.tags
                .push(serde_json::to_string(&job.tags).map_err(json_err)?);
            r.policy
                .push(json(job.policy.as_ref().map(serde_json::to_string))?);
            r.created_at.push(ms(job.created_at));
            r.group.push(job.group.as_deref());
            r.callback
                .push(json(job.callback.as_ref().map(serde_json::to_string))?);
            r.okey.push(job.ordering.as_ref().map(|o| o.key.as_str()));
            r.ord_skip.push(
                job.ordering
                    .as_ref()
                    .is_some_and(|o| o.on_dead == OnDead::Skip),
            );
            r.oline.push(
                job.ordering
                    .as_ref()
                    .map(|o| OrderingKey::line(&job.queue, &o.key)),
            );
        }
        Ok(r)
    }

    /// The `i`th job goes in leased to `owner` until `until`: running, which its row says as
    /// `ready` with an owner (schema migration 19).
    pub(super) fn lease(&mut self, i: usize, owner: &'a str, until: Timestamp) {
        self.state[i] = JobState::Ready.as_str();
        self.lease_owner[i] = Some(owner);
        self.lease_until[i] = Some(ms(until));
    }

    /// The arrays, in the order of [`INSERT_MANY_LEASED`]'s parameters.
    pub(super) fn params_leased(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 19] {
        let [a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, q] = self.params();
        [
            a,
            b,
            c,
            d,
            e,
            f,
            g,
            h,
            i,
            j,
            k,
            l,
            m,
            n,
            o,
            p,
            q,
            &self.lease_owner,
            &self.lease_until,
        ]
    }

    /// The arrays, in the order of [`INSERT_MANY`]'s parameters.
    pub(super) fn params(&self) -> [&(dyn tokio_postgres::types::ToSql + Sync); 17] {
        [
            &self.id,
            &self.queue,
            &self.endpoint,
            &self.state,
            &self.request,
            &self.key,
            &self.priority,
            &self.run_at,
            &self.deadline,
            &self.tags,
            &self.policy,
            &self.created_at,
            &self.group,
            &self.callback,
            &self.okey,
            &self.ord_skip,
            &self.oline,
        ]
    }
}

/// Inserts the jobs whose ids are new, in one statement (`insert`: [`INSERT_MANY`] prepared),
/// and their terms ([`index_terms`]); returns their seqs by id.
pub(super) async fn insert_rows(
    c: &impl tokio_postgres::GenericClient,
    insert: &tokio_postgres::Statement,
    jobs: &[NewJob],
) -> StoreResult<std::collections::HashMap<String, i64>> {
    insert_rows_with(c, insert, None, jobs).await
}

/// [`insert_rows`] with the terms' statements prepared (the enqueue's path).
async fn insert_rows_with(
    c: &impl tokio_postgres::GenericClient,
    insert: &tokio_postgres::Statement,
    terms: Option<&TermStatements>,
    jobs: &[NewJob],
) -> StoreResult<std::collections::HashMap<String, i64>> {
    let cols = JobRows::of(jobs)?;
    lock_lines(c, jobs).await?;
    let seqs_of = |rows: &[tokio_postgres::Row]| {
        let mut seqs = std::collections::HashMap::with_capacity(rows.len());
        for r in rows {
            seqs.insert(get::<String>(r, 0)?, get::<i64>(r, 1)?);
        }
        StoreResult::Ok(seqs)
    };
    if let (Some(prepared), [job]) = (terms, jobs) {
        // One job: its terms sent with the insert, in the same round trip (a single enqueue's
        // commit is most of its time, and a second round trip was a tenth more).
        let these = redial_store::job_terms(job.idempotency_key.as_deref(), &job.tags);
        let job_params = cols.params();
        let term_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&these];
        let (rows, indexed) = tokio::join!(
            c.query(insert, &job_params),
            c.execute(&prepared.last, &term_params)
        );
        // The insert's own error first: the second one fails only because the first did.
        let rows = rows.map_err(backend)?;
        indexed.map_err(backend)?;
        return seqs_of(&rows);
    }
    let rows = c.query(insert, &cols.params()).await.map_err(backend)?;
    let seqs = seqs_of(&rows)?;
    index_terms(c, terms, jobs, &seqs).await?;
    Ok(seqs)
}

/// Takes the line locks of a batch's ordering keys in one order (`redial_line_lock`), before the
/// insert's triggers take them row by row: two batches with the same keys then wait on each
/// other instead of deadlocking. Nothing for a batch of one key or none.
async fn lock_lines(c: &impl tokio_postgres::GenericClient, jobs: &[NewJob]) -> StoreResult<()> {
    let mut lines: Vec<i64> = jobs
        .iter()
        .filter_map(|j| {
            j.ordering
                .as_ref()
                .map(|o| OrderingKey::line(&j.queue, &o.key))
        })
        .collect();
    lines.sort_unstable();
    lines.dedup();
    if lines.len() < 2 {
        return Ok(());
    }
    c.execute(
        "SELECT count(redial_line_lock(l)) FROM (SELECT l FROM unnest($1::bigint[]) AS u (l) \
         ORDER BY l) AS s",
        &[&lines],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

/// The terms (`$1`) of the job the session's last insert made, if this transaction made it
/// (not when it was a duplicate: the insert drew a seq and wrote nothing).
const INSERT_TERMS_OF_LAST: &str = "INSERT INTO job_terms (bucket, term, seq) \
     SELECT c.s >> 10, t, c.s \
     FROM (SELECT currval(pg_get_serial_sequence('jobs', 'seq')) AS s) AS c, \
         unnest($1::text[]) AS t \
     WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.seq = c.s \
         AND j.xmin = pg_current_xact_id()::xid) \
     ON CONFLICT DO NOTHING";

/// [`INSERT_TERMS`], [`INSERT_TERMS_OF_LAST`] and [`INSERT_BLOCK`], prepared.
pub(super) struct TermStatements {
    rows: tokio_postgres::Statement,
    last: tokio_postgres::Statement,
    block: tokio_postgres::Statement,
}

impl TermStatements {
    pub(super) async fn of(c: &mut Conn) -> StoreResult<TermStatements> {
        Ok(TermStatements {
            rows: c.prepared(INSERT_TERMS).await?,
            last: c.prepared(INSERT_TERMS_OF_LAST).await?,
            block: c.prepared(INSERT_BLOCK).await?,
        })
    }
}

/// Puts the terms of the jobs just inserted (those of `seqs`) in the search index, in the
/// caller's transaction: one block for a batch of [`BLOCK_MIN`] or more, a row each otherwise.
pub(super) async fn index_terms(
    c: &impl tokio_postgres::GenericClient,
    prepared: Option<&TermStatements>,
    jobs: &[NewJob],
    seqs: &std::collections::HashMap<String, i64>,
) -> StoreResult<()> {
    let (mut terms, mut of) = (Vec::new(), Vec::new());
    let mut done = std::collections::HashSet::with_capacity(seqs.len());
    for job in jobs {
        // An id twice in the batch was inserted once: its terms go in once.
        let Some(&seq) = seqs.get(&job.id.0) else {
            continue;
        };
        if !done.insert(seq) {
            continue;
        }
        for t in redial_store::job_terms(job.idempotency_key.as_deref(), &job.tags) {
            terms.push(t);
            of.push(seq);
        }
    }
    let (Some(first), Some(last)) = (of.iter().min(), of.iter().max()) else {
        return Ok(());
    };
    let done = if done.len() >= BLOCK_MIN {
        let bloom = redial_store::term_bloom(&terms);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 5] =
            [first, last, &bloom, &terms, &of];
        match prepared {
            Some(p) => c.execute(&p.block, &params).await,
            None => c.execute(INSERT_BLOCK, &params).await,
        }
    } else {
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&of, &terms];
        match prepared {
            Some(p) => c.execute(&p.rows, &params).await,
            None => c.execute(INSERT_TERMS, &params).await,
        }
    };
    done.map_err(backend)?;
    Ok(())
}

pub async fn insert_batch(
    c: &mut Conn,
    channel: &str,
    jobs: Vec<NewJob>,
) -> StoreResult<Vec<InsertOutcome>> {
    let n = jobs.len();
    let insert = c.prepared(INSERT_MANY).await?;
    let terms = TermStatements::of(c).await?;
    let wake = c.prepared(NOTIFY).await?;
    let tx = c.client.transaction().await.map_err(backend)?;
    let mut seqs = insert_rows_with(&tx, &insert, Some(&terms), &jobs).await?;
    let mut outs = Vec::with_capacity(n);
    let mut queues: Vec<String> = Vec::new();
    for job in jobs {
        // An id inserted earlier in this same batch is a duplicate of that one, not new again.
        match seqs.remove(&job.id.0) {
            Some(seq) => {
                if !queues.contains(&job.queue) {
                    queues.push(job.queue.clone());
                }
                // The job as stored, built from what was written rather than read back.
                outs.push(InsertOutcome::Inserted(job.into_stored(seq)));
            }
            None => {
                let existing = must_get(&tx, &job.id).await?;
                let same = existing.queue == job.queue
                    && existing.request.same_as(&job.request)
                    && existing.idempotency_key == job.idempotency_key
                    && existing.callback == job.callback;
                outs.push(if same {
                    InsertOutcome::Duplicate(existing)
                } else {
                    InsertOutcome::Conflict(existing)
                });
            }
        }
    }
    if outs.iter().any(|o| matches!(o, InsertOutcome::Conflict(_))) {
        tx.rollback().await.map_err(backend)?;
        return Ok(outs);
    }
    for q in &queues {
        notify_prepared(&tx, &wake, channel, q).await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(outs)
}

/// Inserts callback deliveries in the caller's transaction (one made before under the same id
/// is left as it is), and tells the nodes their queues have work.
pub(super) async fn insert_deliveries(
    c: &impl tokio_postgres::GenericClient,
    insert: &tokio_postgres::Statement,
    channel: &str,
    deliveries: &[NewJob],
) -> StoreResult<()> {
    if deliveries.is_empty() {
        return Ok(());
    }
    let seqs = insert_rows(c, insert, deliveries).await?;
    let mut queues: Vec<&str> = deliveries
        .iter()
        .filter(|d| seqs.contains_key(&d.id.0))
        .map(|d| d.queue.as_str())
        .collect();
    queues.sort_unstable();
    queues.dedup();
    for q in queues {
        notify(c, channel, q).await?;
    }
    Ok(())
}

/// The deliveries the jobs of `ids`, as they now stand, owe (with their last attempts'
/// responses), inserted in the caller's transaction.
pub(super) async fn insert_owed(
    c: &impl tokio_postgres::GenericClient,
    insert: &tokio_postgres::Statement,
    channel: &str,
    ids: &[JobId],
    now: Timestamp,
) -> StoreResult<()> {
    let mut deliveries = Vec::new();
    for id in ids {
        let job = must_get(c, id).await?;
        let last = c
            .query_opt(
                "SELECT COALESCE((SELECT final_attempt FROM jobs WHERE seq = $1), \
                   (SELECT data FROM attempts WHERE job_seq = $1 ORDER BY number DESC LIMIT 1))",
                &[&job.seq],
            )
            .await
            .map_err(backend)?
            .map(|r| get::<Option<String>>(&r, 0))
            .transpose()?
            .flatten()
            .map(|d| serde_json::from_str::<Attempt>(&d).map_err(json_err))
            .transpose()?;
        deliveries.extend(Callback::delivery(&job, last.as_ref(), now));
    }
    insert_deliveries(c, insert, channel, &deliveries).await
}

pub async fn get_with_attempts(
    c: &mut Conn,
    id: &JobId,
) -> StoreResult<Option<(Job, Vec<Attempt>)>> {
    let Some(job) = get_job(&c.client, id).await? else {
        return Ok(None);
    };
    let rows = c
        .client
        .query(
            "SELECT data FROM attempts WHERE job_seq = $1 \
             UNION ALL SELECT final_attempt FROM jobs WHERE seq = $1 AND final_attempt IS NOT NULL",
            &[&job.seq],
        )
        .await
        .map_err(backend)?;
    let attempts = rows
        .iter()
        .map(|r| serde_json::from_str(&get::<String>(r, 0)?).map_err(json_err))
        .collect::<StoreResult<Vec<Attempt>>>()?;
    Ok(Some((job, Attempt::in_order(attempts))))
}

/// Appends the filter's conditions to `sql` and their values to `params`.
pub(super) fn push_filter(
    sql: &mut String,
    params: &mut Vec<Box<dyn ToSql + Sync + Send>>,
    f: &JobFilter,
) {
    match f.state {
        // A leased job's row says `ready` with an owner (schema migration 19).
        Some(JobState::Running) => sql.push_str(&format!(" AND {RUNNING}")),
        Some(JobState::Ready) => sql.push_str(" AND state = 'ready' AND lease_owner IS NULL"),
        Some(s) => {
            params.push(Box::new(s.as_str().to_owned()));
            sql.push_str(&format!(" AND state = ${}", params.len()));
        }
        None => {}
    }
    push_conditions(sql, params, f.conditions());
}

pub(super) fn push_conditions(
    sql: &mut String,
    params: &mut Vec<Box<dyn ToSql + Sync + Send>>,
    conditions: Vec<Condition>,
) {
    for c in conditions {
        let list = matches!(c.value, SqlValue::TextList(_));
        params.push(match c.value {
            SqlValue::Text(t) => Box::new(t),
            SqlValue::Int(i) => Box::new(i),
            SqlValue::TextList(l) => Box::new(l),
            SqlValue::Term(t) => {
                let (h1, h2) = redial_store::term_hashes(&t);
                params.push(Box::new(t));
                // A point read in each bucket from the first job's to the last's, and the
                // blocks whose bloom may hold the term.
                let term = params.len();
                params.push(Box::new(h1));
                params.push(Box::new(h2));
                let bits: Vec<String> = (0..redial_store::BLOOM_HASHES)
                    .map(|i| {
                        format!(
                            "get_bit(b.bloom, ((${}::bigint + {i} * ${}::bigint) % (8 * length(b.bloom)))::int) = 1",
                            term + 1,
                            term + 2
                        )
                    })
                    .collect();
                sql.push_str(&format!(
                    " AND seq IN (SELECT t.seq FROM job_terms t WHERE t.term = ${term} \
                     AND t.bucket = ANY(ARRAY(SELECT generate_series( \
                         (SELECT MIN(seq) FROM jobs) >> 10, (SELECT MAX(seq) FROM jobs) >> 10))) \
                     UNION ALL SELECT u.s FROM job_term_blocks b, unnest(b.terms, b.seqs) AS u (t, s) \
                     WHERE {} AND u.t = ${term})",
                    bits.join(" AND ")
                ));
                continue;
            }
            SqlValue::Words(words) => {
                // The planner starts with the rarest word, by its statistics.
                let bind = |v: String| {
                    params.push(Box::new(v));
                    format!("${}", params.len())
                };
                sql.push_str(&redial_store::words_condition(&words, bind, ", "));
                continue;
            }
        });
        if list {
            sql.push_str(&format!(" AND {} = ANY(${})", c.clause, params.len()));
        } else {
            sql.push_str(&format!(" AND {} ${}", c.clause, params.len()));
        }
    }
}

pub(super) fn refs(params: &[Box<dyn ToSql + Sync + Send>]) -> Vec<Param<'_>> {
    params.iter().map(|p| p.as_ref() as Param<'_>).collect()
}

pub async fn list(c: &mut Conn, p: &JobListParams) -> StoreResult<JobPage> {
    let mut sql = concat!("SELECT ", cols!(), " FROM jobs WHERE TRUE").to_owned();
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::new();
    let state_only = JobFilter {
        state: p.filter.state,
        ..JobFilter::default()
    };
    push_filter(&mut sql, &mut params, &state_only);
    push_conditions(&mut sql, &mut params, p.conditions());
    params.push(Box::new(p.rows_to_read()));
    sql.push_str(&format!(" ORDER BY seq LIMIT ${}", params.len()));
    let rows = c
        .client
        .query(&sql, &refs(&params))
        .await
        .map_err(backend)?;
    Ok(JobPage::from_rows(jobs_from_rows(&rows)?, p.limit))
}
