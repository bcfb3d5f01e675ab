//! An attempt's end: heartbeats, recording (one attempt, or a batch in one statement, and the
//! slow path), and giving leases back.

use super::actions::settle;
use super::jobs::{insert_deliveries, JobRows, INSERT_MANY, INSERT_MANY_LEASED};
use super::{category_str, cols, get, int, job_from_row, ms, notify};
use crate::{backend, Conn};
use redial_store::{
    HeartbeatParams, JobState, NewJob, RecordAttemptParams, Recorded, ReleaseParams, StoreError,
    StoreResult,
};

/// Extends the leases (a HOT update: schema migration 19) and logs them in `leases`, where the
/// rescue finds them once they expire.
pub(super) const HEARTBEAT: &str = "WITH u AS (UPDATE jobs SET lease_until = $1 \
     WHERE id = ANY($2) AND state = 'ready' AND lease_owner = $3 RETURNING seq), \
     l AS (INSERT INTO leases (owner, until, seqs) SELECT $3, $1, array_agg(seq) FROM u \
       HAVING count(*) > 0) \
     SELECT count(*) FROM u";

pub async fn heartbeat(c: &mut Conn, p: &HeartbeatParams) -> StoreResult<u64> {
    let stmt = c.prepared(HEARTBEAT).await?;
    let ids: Vec<&str> = p.ids.iter().map(|i| i.0.as_str()).collect();
    let row = c
        .client
        .query_one(&stmt, &[&ms(p.lease_until), &ids, &p.owner])
        .await
        .map_err(backend)?;
    Ok(u64::try_from(get::<i64>(&row, 0)?).unwrap_or(0))
}

/// The common case in one statement: the lease is ours and no cancel waits. The attempt's
/// number is the job's new run count, written into the document as stored.
/// The attempt that ends the job goes in its row (`final_attempt`, schema migration 17), any
/// other in `attempts`.
pub(super) const RECORD: &str = "WITH u AS (UPDATE jobs SET state = $1, category = $2, \
         run_at = COALESCE($3, run_at), finished_at = $4, attempts = $5, unknown_attempts = $6, \
         deferrals = $7, last_delay_ms = $8, last_reason = $9, runs = runs + 1, \
         lease_owner = NULL, lease_until = NULL, updated_at = $10, \
         final_attempt = CASE WHEN $4::bigint IS NOT NULL \
           THEN jsonb_set($13::text::jsonb, '{number}', to_jsonb(runs + 1))::text END \
     WHERE id = $11 AND state = 'ready' AND lease_owner = $12 AND NOT cancel_requested \
     RETURNING seq, runs), \
     a AS (INSERT INTO attempts (job_seq, number, data) \
       SELECT seq, runs, jsonb_set($13::text::jsonb, '{number}', to_jsonb(runs))::text FROM u \
       WHERE $4::bigint IS NULL) \
     SELECT runs FROM u";

pub async fn record_attempt(
    c: &mut Conn,
    channel: &str,
    p: RecordAttemptParams,
    data: String,
) -> StoreResult<Recorded> {
    let (state, category, run_at, finished_at) = p.as_leased();
    let last_delay_ms = p.last_delay_ms.map(|v| v.min(i64::MAX as u64) as i64);
    let stmt = c.prepared(RECORD).await?;
    // A callback delivery goes in with the update, in one transaction (only jobs that have
    // one pay for it).
    // Leased only when the caller knows the job's seq, as the other store's fast path needs.
    let leased_until = p.callback_leased_until.filter(|_| p.seq.is_some());
    let insert = match (&p.callback, leased_until) {
        (Some(_), Some(_)) => Some(c.prepared(INSERT_MANY_LEASED).await?),
        (Some(_), None) => Some(c.prepared(INSERT_MANY).await?),
        (None, _) => None,
    };
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 13] = [
        &state.as_str(),
        &category_str(category),
        &run_at.map(ms),
        &finished_at.map(ms),
        &int(p.attempts),
        &int(p.unknown_attempts),
        &int(p.deferrals),
        &last_delay_ms,
        &p.attempt.reason,
        &ms(p.now),
        &p.id.0,
        &p.owner,
        &data,
    ];
    let (Some(insert), Some(delivery)) = (insert, &p.callback) else {
        let done = c.client.query_opt(&stmt, &params).await.map_err(backend)?;
        if done.is_some() {
            return Ok(Recorded::left(state));
        }
        return record_attempt_slow(c, channel, p, data)
            .await
            .map(Recorded::left);
    };
    let tx = c.client.transaction().await.map_err(backend)?;
    let done = tx.query_opt(&stmt, &params).await.map_err(backend)?;
    if done.is_some() {
        let leased = match leased_until {
            Some(until) => {
                let jobs = std::slice::from_ref(delivery);
                let mut cols = JobRows::of(jobs)?;
                cols.lease(0, &p.owner, until);
                let row = tx
                    .query_opt(&insert, &cols.params_leased())
                    .await
                    .map_err(backend)?;
                match row {
                    Some(r) => Some(delivery.clone().into_leased(get(&r, 1)?, &p.owner, until)),
                    None => None,
                }
            }
            None => {
                insert_deliveries(&tx, &insert, channel, std::slice::from_ref(delivery)).await?;
                None
            }
        };
        tx.commit().await.map_err(backend)?;
        return Ok(Recorded {
            state,
            delivery: leased,
        });
    }
    tx.rollback().await.map_err(backend)?;
    record_attempt_slow(c, channel, p, data)
        .await
        .map(Recorded::left)
}

/// Many attempts' common case in one statement (one round trip, one commit): each job found by
/// its `seq` (and id), still leased by its recorder with the runs the caller expects before this
/// attempt, no cancel waiting, is updated and its attempt inserted as serialised (its number is
/// the caller's). Returns the ids recorded; the others go through [`record_attempt`] one by one.
/// Ids must be distinct, and each request must carry its `seq` and a number of at least 1.
/// The completions' events go in as one row (`e`, schema migration 18), the jobs marked
/// `logged` so that the trigger passes over them; a batch holds fewer completions than
/// [`super::events::EVENT_BLOCK`].
macro_rules! record_many_ctes {
    () => {
        "WITH i AS ( \
       SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], \
         $6::bigint[], $7::bigint[], $8::int[], $9::int[], $10::int[], $11::bigint[], \
         $12::text[], $13::bigint[], $14::int[], $15::text[]) \
       AS t(seq, id, owner, state, category, run_at, finished_at, attempts, unknown_attempts, \
         deferrals, last_delay_ms, reason, now, number, data)), \
     u AS (UPDATE jobs j SET state = i.state, category = i.category, \
         run_at = COALESCE(i.run_at, j.run_at), finished_at = i.finished_at, \
         attempts = i.attempts, unknown_attempts = i.unknown_attempts, deferrals = i.deferrals, \
         last_delay_ms = i.last_delay_ms, last_reason = i.reason, runs = i.number, \
         lease_owner = NULL, lease_until = NULL, updated_at = i.now, \
         final_attempt = CASE WHEN i.finished_at IS NOT NULL THEN i.data END, \
         logged = CASE WHEN i.state = 'completed' THEN TRUE END, \
         ord_wait = j.ord_wait OR (j.oline IS NOT NULL AND i.state = 'completed') \
       FROM i \
       WHERE j.seq = i.seq AND j.id = i.id AND j.state = 'ready' AND j.lease_owner = i.owner \
         AND NOT j.cancel_requested AND j.runs = i.number - 1 \
       RETURNING j.seq, j.queue, j.endpoint, i.id, i.state, i.finished_at, i.now, i.reason, \
         i.number, i.data, CASE WHEN j.oline IS NOT NULL \
         AND i.state = 'completed' THEN j.oline END AS left_line), \
     a AS (INSERT INTO attempts (job_seq, number, data) \
       SELECT seq, number, data FROM u WHERE finished_at IS NULL), \
     p AS (SELECT redial_lines_next(array_agg(left_line)) FROM u \
       WHERE left_line IS NOT NULL HAVING count(*) > 0), \
     e AS (INSERT INTO events (at, kind, batch) \
       SELECT max(now), 'job.completed', json_agg(json_build_array(now, queue, id, endpoint, \
         reason) ORDER BY seq)::text \
       FROM u WHERE state = 'completed' HAVING count(*) > 0) "
    };
}

/// [`record_many_ctes!`]'s ids. A keyed job completed here leaves its line marked (`ord_wait`:
/// the line trigger passes over it), and its line's next job becomes the head in one call for
/// the batch (`p`, `redial_lines_next`, PostgreSQL schema migration 16), after every row of
/// `u` is written; the join on `p` is what runs it, and adds no row.
pub(super) const RECORD_MANY: &str = concat!(
    record_many_ctes!(),
    "SELECT u.id FROM u LEFT JOIN p ON TRUE"
);

/// [`RECORD_MANY`] with the callback deliveries the recorded jobs owe, in the same statement:
/// each delivery (`$16` the seq of the job that owes it, then the columns of
/// [`INSERT_MANY_LEASED`], in its order: a column added there is added here too, or every
/// batch owing a delivery fails and goes the one-attempt way, as it did from the ordering keys'
/// columns until 2026-12-07; `PgStore::batch_record_failures` counts such failures) goes in only if its job was recorded, its terms in the search index
/// (`job_terms`, as `redial_store::job_terms` spells them). Rows with a second column are the
/// deliveries that went in leased (their id and seq). A semi-join (`IN`), not a join: the planner
/// takes both sides for a row each and would make a join a nested loop over the batch squared.
pub(super) const RECORD_MANY_OWING: &str = concat!(
    record_many_ctes!(),
    ", d AS (INSERT INTO jobs (id, queue, endpoint, state, request, idempotency_key, \
       priority, run_at, deadline, tags, policy, created_at, updated_at, grp, callback, \
       okey, ord_skip, oline, ord_wait, lease_owner, lease_until) \
     SELECT t.id, t.queue, t.endpoint, t.state, t.request, t.key, t.priority, t.run_at, \
         t.deadline, t.tags, t.policy, t.created_at, t.created_at, t.grp, t.callback, \
         t.okey, t.ord_skip, t.oline, t.oline IS NOT NULL, t.lease_owner, t.lease_until \
     FROM unnest($16::bigint[], $17::text[], $18::text[], $19::text[], $20::text[], \
         $21::text[], $22::text[], $23::int[], $24::bigint[], $25::bigint[], $26::text[], \
         $27::text[], $28::bigint[], $29::text[], $30::text[], $31::text[], $32::bool[], \
         $33::bigint[], $34::text[], $35::bigint[]) \
       AS t (owner_seq, id, queue, endpoint, state, request, key, priority, run_at, deadline, \
         tags, policy, created_at, grp, callback, okey, ord_skip, oline, lease_owner, \
         lease_until) \
     WHERE t.owner_seq IN (SELECT seq FROM u) \
     ON CONFLICT (id) DO NOTHING RETURNING id, seq, lease_owner, lease_until, idempotency_key, tags), \
     dl AS (INSERT INTO leases (owner, until, seqs) SELECT lease_owner, lease_until, \
         array_agg(seq) FROM d WHERE lease_owner IS NOT NULL GROUP BY lease_owner, lease_until), \
     dt AS (INSERT INTO job_terms (bucket, term, seq) \
         SELECT seq >> 10, 'k:' || idempotency_key, seq FROM d \
             WHERE idempotency_key IS NOT NULL \
         UNION ALL SELECT seq >> 10, 't:' || t, seq \
             FROM d, jsonb_array_elements_text(d.tags::jsonb) t WHERE d.tags <> '[]' \
         ON CONFLICT DO NOTHING) \
     SELECT u.id, NULL::bigint FROM u LEFT JOIN p ON TRUE \
     UNION ALL SELECT d.id, d.seq FROM d WHERE d.lease_owner IS NOT NULL"
);

/// What [`record_many`] recorded: the ids of the jobs, and the seqs of the deliveries that went
/// in leased, by id.
#[derive(Debug, Default)]
pub struct RecordedMany {
    pub jobs: std::collections::HashSet<String>,
    pub leased: std::collections::HashMap<String, i64>,
}

/// Whether [`record_many`] can take this request (it knows the job's `seq` and the attempt's
/// number).
pub fn batchable(p: &RecordAttemptParams) -> bool {
    p.seq.is_some() && p.attempt.number >= 1
}

/// Over 100 lines on purpose: it lays the batch out as the statement's fifteen column arrays (and
/// the deliveries' twenty) and reads the answer: mostly those arrays, one line each.
pub async fn record_many(
    c: &mut Conn,
    channel: &str,
    batch: &[(&RecordAttemptParams, &str)],
) -> StoreResult<RecordedMany> {
    let n = batch.len();
    let mut seqs = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(n);
    let mut owners = Vec::with_capacity(n);
    let mut states = Vec::with_capacity(n);
    let mut categories = Vec::with_capacity(n);
    let mut run_ats = Vec::with_capacity(n);
    let mut finished = Vec::with_capacity(n);
    let mut attempts = Vec::with_capacity(n);
    let mut unknown = Vec::with_capacity(n);
    let mut deferrals = Vec::with_capacity(n);
    let mut delays = Vec::with_capacity(n);
    let mut reasons = Vec::with_capacity(n);
    let mut nows = Vec::with_capacity(n);
    let mut numbers = Vec::with_capacity(n);
    let mut data = Vec::with_capacity(n);
    for (p, d) in batch {
        let Some(seq) = p.seq.filter(|_| batchable(p)) else {
            continue;
        };
        let (state, category, run_at, finished_at) = p.as_leased();
        seqs.push(seq);
        ids.push(p.id.0.as_str());
        owners.push(p.owner.as_str());
        states.push(state.as_str());
        categories.push(category_str(category));
        run_ats.push(run_at.map(ms));
        finished.push(finished_at.map(ms));
        attempts.push(int(p.attempts));
        unknown.push(int(p.unknown_attempts));
        deferrals.push(int(p.deferrals));
        delays.push(p.last_delay_ms.map(|v| v.min(i64::MAX as u64) as i64));
        reasons.push(p.attempt.reason.as_str());
        nows.push(ms(p.now));
        numbers.push(int(p.attempt.number));
        data.push(*d);
    }
    if seqs.is_empty() {
        return Ok(RecordedMany::default());
    }
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 15] = [
        &seqs,
        &ids,
        &owners,
        &states,
        &categories,
        &run_ats,
        &finished,
        &attempts,
        &unknown,
        &deferrals,
        &delays,
        &reasons,
        &nows,
        &numbers,
        &data,
    ];
    // The callback deliveries of the jobs recorded go in with them, in the same statement.
    let deliveries: Vec<(i64, &RecordAttemptParams, &NewJob)> = batch
        .iter()
        .filter(|(p, _)| batchable(p))
        .filter_map(|(p, _)| Some((p.seq?, *p, p.callback.as_ref()?)))
        .collect();
    if deliveries.is_empty() {
        let stmt = c.prepared(RECORD_MANY).await?;
        let rows = c.client.query(&stmt, &params).await.map_err(backend)?;
        return Ok(RecordedMany {
            jobs: rows.iter().map(|r| r.get::<_, String>(0)).collect(),
            leased: Default::default(),
        });
    }
    let stmt = c.prepared(RECORD_MANY_OWING).await?;
    let owners: Vec<i64> = deliveries.iter().map(|(seq, _, _)| *seq).collect();
    let jobs: Vec<NewJob> = deliveries.iter().map(|(_, _, d)| (*d).clone()).collect();
    let mut cols = JobRows::of(&jobs)?;
    for (i, (_, p, _)) in deliveries.iter().enumerate() {
        if let Some(until) = p.callback_leased_until {
            cols.lease(i, &p.owner, until);
        }
    }
    let mut all: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params.to_vec();
    all.push(&owners);
    all.extend(cols.params_leased());
    let rows = c.client.query(&stmt, &all).await.map_err(backend)?;
    // The nodes' callback queues have work (this node's engine wakes its own), unless every
    // delivery went in leased to its recorder.
    let mut queues: Vec<&str> = deliveries
        .iter()
        .filter(|(_, p, _)| p.callback_leased_until.is_none())
        .map(|(_, _, d)| d.queue.as_str())
        .collect();
    queues.sort_unstable();
    queues.dedup();
    for q in queues {
        notify(&c.client, channel, q).await?;
    }
    let mut out = RecordedMany::default();
    for r in &rows {
        let id: String = r.get(0);
        match r.get::<_, Option<i64>>(1) {
            Some(seq) => {
                out.leased.insert(id, seq);
            }
            None => {
                out.jobs.insert(id);
            }
        }
    }
    Ok(out)
}

/// The rare cases: the lease is not ours (or the job is gone), or a cancel waits.
pub async fn record_attempt_slow(
    c: &mut Conn,
    channel: &str,
    p: RecordAttemptParams,
    data: String,
) -> StoreResult<JobState> {
    let insert = c.prepared(INSERT_MANY).await?;
    let tx = c.client.transaction().await.map_err(backend)?;
    let done = async {
        let row = tx
            .query_opt(
                concat!("SELECT ", cols!(), " FROM jobs WHERE id = $1 FOR UPDATE"),
                &[&p.id.0],
            )
            .await
            .map_err(backend)?
            .ok_or_else(|| StoreError::NotFound(p.id.clone()))?;
        let job = job_from_row(&row)?;
        let r = p.recording(&job, data)?;
        tx.execute(
            "UPDATE jobs SET state = $1, category = $2, run_at = $3, finished_at = $4, attempts = $5, \
             unknown_attempts = $6, deferrals = $7, last_delay_ms = $8, last_reason = $9, \
             runs = runs + 1, lease_owner = NULL, lease_until = NULL, updated_at = $10, \
             final_attempt = $12 WHERE seq = $11",
            &[
                &r.plan.state.as_str(),
                &category_str(r.plan.category),
                &ms(r.plan.run_at),
                &r.plan.finished_at.map(ms),
                &int(p.attempts),
                &int(p.unknown_attempts),
                &int(p.deferrals),
                &r.last_delay_ms,
                &r.plan.reason,
                &ms(p.now),
                &job.seq,
                &r.plan.finished_at.map(|_| r.data.as_str()),
            ],
        )
        .await
        .map_err(backend)?;
        if r.plan.finished_at.is_none() {
            tx.execute(
                "INSERT INTO attempts (job_seq, number, data) VALUES ($1, $2, $3)",
                &[&job.seq, &int(r.plan.number), &r.data],
            )
            .await
            .map_err(backend)?;
        }
        if let Some(delivery) = &r.delivery {
            insert_deliveries(&tx, &insert, channel, std::slice::from_ref(delivery)).await?;
        }
        Ok(r.plan.state)
    }
    .await;
    settle(tx, done).await
}

pub async fn release(c: &mut Conn, channel: &str, p: &ReleaseParams) -> StoreResult<u64> {
    let ids: Vec<&str> = p.ids.iter().map(|i| i.0.as_str()).collect();
    let tx = c.client.transaction().await.map_err(backend)?;
    let rows = tx
        .query(
            "UPDATE jobs SET state = 'ready', lease_owner = NULL, lease_until = NULL, finished_at = NULL, updated_at = $1 \
             WHERE id = ANY($2) AND state = 'ready' AND lease_owner = $3 RETURNING queue",
            &[&ms(p.now), &ids, &p.owner],
        )
        .await
        .map_err(backend)?;
    let mut queues: Vec<String> = rows.iter().map(|r| get(r, 0)).collect::<StoreResult<_>>()?;
    queues.sort();
    queues.dedup();
    for q in &queues {
        notify(&tx, channel, q).await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(rows.len() as u64)
}
