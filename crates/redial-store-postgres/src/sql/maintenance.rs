//! What maintenance runs: rescuing leases (expired, or of nodes gone silent), presence, promoting
//! due jobs, expiring deadlines, retention's deletions.
//!
//! Presence and rescue. A node killed with SIGKILL leaves its jobs `running`. Each node holds a
//! presence lock (a session advisory lock on its worker id, on a connection of its own,
//! `Store::node_announce`, recorded in the `nodes` table) from before its first lease; when it dies
//! its session ends and the lock frees, and the leader's next rescue (every maintenance tick) goes
//! through the announced nodes and takes each one's lock for the length of its transaction. A lock
//! found free is a sign to look, not a death: a node whose connection blinked (a database restart,
//! a terminated backend) is still sending its jobs, and takes its lock back at its next tick (each
//! tick, a node holding its lock writes `nodes.seen_at`). So the rescue notes since when it found
//! the lock free (`nodes.free_since`), clears that when the lock is held again or the node was seen
//! since, and ends a node's leases and forgets it only once the lock has been free for
//! `RescueParams::presence_grace` (`EngineConfig::presence_grace`: three maintenance ticks, at
//! least 3 s) with no sign of life. A node that stopped gracefully is forgotten the same way. A
//! node cut off for longer than that is taken for dead (as in a partition: its late results are
//! refused as `LeaseLost`). Before, the first free lock ended the leases: after a database restart,
//! 96 of about 128 jobs in flight were sent twice. A node that hangs while connected keeps its
//! lock, and its leases expire (`engine.lease`); a node that never announced (an older version
//! during a rolling upgrade) is not in `nodes` and keeps its leases until they expire. The
//! maintenance advisory lock also ends with the session, so another node takes maintenance over at
//! its next tick.

use super::actions::delete_counted;
use super::jobs::{insert_owed, INSERT_MANY};
use super::{get, int, ms, notify, ENDPOINTS_CHANGED, WAITING};
use crate::{backend, Conn};
use redial_policy::Timestamp;
use redial_store::{CleanupParams, ExpireParams, JobId, RescueParams, RescueReport, StoreResult};

/// Over 100 lines on purpose: one transaction, in order: the expired leases back, the stalls
/// counted, the jobs that stalled too often made dead, and the deliveries those owe.
pub async fn rescue(c: &mut Conn, channel: &str, p: &RescueParams) -> StoreResult<RescueReport> {
    let insert = c.prepared(INSERT_MANY).await?;
    let tx = c.client.transaction().await.map_err(backend)?;
    let now = ms(p.now);
    let max = int(p.max_stalls);
    // The nodes that announced a presence lock. A free lock is a sign to look: the node died
    // (its session ended), or its connection blinked (a database restart, a terminated backend)
    // while it goes on sending its jobs. So the first rescue that finds it free notes when; a
    // node that announces itself again (each maintenance tick, on a new connection if need be)
    // takes its lock back, or at least says it is alive; one that stays silent for the grace
    // has its leases ended now and is forgotten. The lock is taken for this transaction only,
    // so a node that restarts under the same id takes it back after.
    let grace = i64::try_from(p.presence_grace.as_millis()).unwrap_or(i64::MAX);
    let nodes = tx
        .query(
            "SELECT worker, seen_at, free_since, \
             (extract(epoch FROM clock_timestamp()) * 1000)::bigint FROM nodes",
            &[],
        )
        .await
        .map_err(backend)?;
    let mut forgotten = 0;
    for row in nodes {
        let worker: String = get(&row, 0)?;
        let seen_at: Option<i64> = get(&row, 1)?;
        let free_since: Option<i64> = get(&row, 2)?;
        let db_now: i64 = get(&row, 3)?;
        let free: bool = tx
            .query_one(
                "SELECT pg_try_advisory_xact_lock($1, hashtext(current_schema() || ':' || $2))",
                &[&crate::PRESENCE_LOCK_CLASS, &worker],
            )
            .await
            .map_err(backend)?
            .get(0);
        let dead = match (free, free_since) {
            (false, None) => false,
            (false, Some(_)) => {
                tx.execute(
                    "UPDATE nodes SET free_since = NULL WHERE worker = $1",
                    &[&worker],
                )
                .await
                .map_err(backend)?;
                false
            }
            // Free, and alive since it was first found so (or never found so): look again later.
            (true, None) => {
                mark_free(&tx, &worker, db_now).await?;
                false
            }
            (true, Some(since)) if seen_at.is_some_and(|s| s > since) => {
                mark_free(&tx, &worker, db_now).await?;
                false
            }
            (true, Some(since)) => db_now.saturating_sub(since) >= grace,
        };
        if dead {
            // Its leases, found by their log (no index holds a job's lease: schema migration
            // 19), end now; the expired pass below takes them.
            tx.execute(
                "WITH l AS (UPDATE leases SET until = $1 - 1 WHERE owner = $2 AND until >= $1 \
                   RETURNING seqs) \
                 UPDATE jobs SET lease_until = $1 - 1 \
                 WHERE seq IN (SELECT unnest(seqs) FROM l) AND state = 'ready' \
                   AND lease_owner = $2 AND lease_until >= $1",
                &[&now, &worker],
            )
            .await
            .map_err(backend)?;
            tx.execute("DELETE FROM nodes WHERE worker = $1", &[&worker])
                .await
                .map_err(backend)?;
            forgotten += 1;
        }
    }
    if forgotten > 0 {
        // The others divide the endpoints' limits again, at once.
        notify(&tx, channel, ENDPOINTS_CHANGED).await?;
    }
    // The leases that expired, by their log (each lease and heartbeat writes a row with its
    // jobs and its end), read once: the jobs still leased past their end. A job whose lease was
    // extended since, or that was recorded, or leased again, is passed over (its row says so),
    // and its later lease has a row of its own.
    let expired: Vec<i64> = get(
        &tx.query_one(
            "WITH x AS (DELETE FROM leases WHERE until < $1 RETURNING seqs) \
             SELECT COALESCE(array_agg(seq), '{}') FROM jobs \
             WHERE seq IN (SELECT unnest(seqs) FROM x) AND state = 'ready' \
               AND lease_owner IS NOT NULL AND lease_until < $1",
            &[&now],
        )
        .await
        .map_err(backend)?,
        0,
    )?;
    let dead = finishing(
        &tx,
        &insert,
        channel,
        "UPDATE jobs SET state = 'dead', category = 'unknown_exhausted', stalls = stalls + 1, \
         lease_owner = NULL, lease_until = NULL, finished_at = $1, updated_at = $1, \
         last_reason = 'lease expired while running (the worker died or hung); stall ' \
             || (stalls + 1) || ' over the limit of ' || $2::int \
         WHERE seq = ANY($3) AND state = 'ready' AND lease_owner IS NOT NULL \
           AND lease_until < $1 AND stalls + 1 > $2::int",
        &[&now, &max, &expired],
        p.now,
    )
    .await?;
    let ready = tx
        .execute(
            "UPDATE jobs SET state = 'ready', stalls = stalls + 1, lease_owner = NULL, finished_at = NULL, \
             lease_until = NULL, run_at = LEAST(run_at, $1), updated_at = $1, \
             last_reason = 'lease expired while running (the worker died or hung); stall ' \
                 || (stalls + 1) || ' of ' || $2::int \
             WHERE seq = ANY($3) AND state = 'ready' AND lease_owner IS NOT NULL \
               AND lease_until < $1",
            &[&now, &max, &expired],
        )
        .await
        .map_err(backend)?;
    if ready > 0 {
        notify(&tx, channel, "").await?;
    }
    tx.commit().await.map_err(backend)?;
    Ok(RescueReport {
        requeued: ready,
        dead,
    })
}

/// Notes that `worker`'s presence lock was found free at `db_now` (the database's clock).
pub(super) async fn mark_free(
    tx: &tokio_postgres::Transaction<'_>,
    worker: &str,
    db_now: i64,
) -> StoreResult<()> {
    tx.execute(
        "UPDATE nodes SET free_since = $2 WHERE worker = $1",
        &[&worker, &db_now],
    )
    .await
    .map_err(backend)?;
    Ok(())
}

pub async fn nodes_live(c: &mut Conn) -> StoreResult<Vec<String>> {
    c.client
        .query(
            "SELECT worker FROM nodes ORDER BY worker COLLATE \"C\"",
            &[],
        )
        .await
        .map_err(backend)?
        .iter()
        .map(|r| get(r, 0))
        .collect()
}

pub async fn promote(c: &mut Conn, now: Timestamp) -> StoreResult<u64> {
    c.client
        .execute(
            "UPDATE jobs SET state = 'ready', updated_at = $1 \
             WHERE state IN ('scheduled', 'deferred') AND run_at <= $1",
            &[&ms(now)],
        )
        .await
        .map_err(backend)
}

pub async fn expire_deadlines(c: &mut Conn, channel: &str, p: &ExpireParams) -> StoreResult<u64> {
    let insert = c.prepared(INSERT_MANY).await?;
    let tx = c.client.transaction().await.map_err(backend)?;
    let now = ms(p.now);
    let mut n = 0;
    // Endpoints with a known hold first, so their jobs' reasons name it.
    for (endpoint, why) in &p.reasons {
        n += finishing(
            &tx,
            &insert,
            channel,
            &format!(
                "UPDATE jobs SET state = 'dead', category = 'deadline_exceeded', finished_at = $1, \
                 updated_at = $1, last_reason = 'deadline passed while held by its endpoint: ' || $3 \
                 WHERE deadline IS NOT NULL AND deadline <= $1 AND endpoint = $2 AND {WAITING}"
            ),
            &[&now, endpoint, why],
            p.now,
        )
        .await?;
    }
    n += finishing(
        &tx,
        &insert,
        channel,
        &format!(
            "UPDATE jobs SET state = 'dead', category = 'deadline_exceeded', finished_at = $1, \
             updated_at = $1, last_reason = 'deadline passed before the job could run' \
             WHERE deadline IS NOT NULL AND deadline <= $1 AND {WAITING}"
        ),
        &[&now],
        p.now,
    )
    .await?;
    tx.commit().await.map_err(backend)?;
    Ok(n)
}

/// Runs an UPDATE that finishes jobs (`sql`, without a RETURNING clause), then inserts the
/// callback deliveries they owe, in the same transaction; returns how many it finished.
async fn finishing(
    tx: &tokio_postgres::Transaction<'_>,
    insert: &tokio_postgres::Statement,
    channel: &str,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    now: Timestamp,
) -> StoreResult<u64> {
    let rows = tx
        .query(
            &format!("{sql} RETURNING CASE WHEN callback IS NULL THEN NULL ELSE id END"),
            params,
        )
        .await
        .map_err(backend)?;
    let owing: Vec<JobId> = rows
        .iter()
        .filter_map(|r| r.get::<_, Option<String>>(0))
        .map(JobId)
        .collect();
    insert_owed(tx, insert, channel, &owing, now).await?;
    Ok(rows.len() as u64)
}

pub async fn cleanup(c: &mut Conn, p: &CleanupParams) -> StoreResult<u64> {
    let limit = i64::from(p.limit);
    let by_age = delete_counted(
        &c.client,
        "DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs WHERE \
           (state IN ('completed', 'cancelled') AND finished_at < $1) \
           OR (state = 'dead' AND finished_at < $2) LIMIT $3)",
        &[&ms(p.completed_before), &ms(p.dead_before), &limit],
    )
    .await?;
    let Some(keep) = p.completed_keep else {
        return Ok(by_age);
    };
    let room = u64::from(p.limit).saturating_sub(by_age);
    let by_count = delete_counted(
        &c.client,
        "DELETE FROM jobs WHERE seq IN (SELECT seq FROM (SELECT seq FROM jobs \
           WHERE state IN ('completed', 'cancelled') ORDER BY finished_at DESC, seq DESC \
           OFFSET $1) AS old LIMIT $2)",
        &[
            &(keep.min(i64::MAX as u64) as i64),
            &(room.min(i64::MAX as u64) as i64),
        ],
    )
    .await?;
    Ok(by_age + by_count)
}

/// [`redial_store::Store::index_for_search`]: the words of up to `limit` jobs noted in
/// `dead_pending`, in one transaction (another node's run at the same time takes other ones). A
/// job no longer dead (replayed since) loses its words; one dead again has its old words
/// replaced.
pub async fn index_for_search(c: &mut Conn, limit: u32) -> StoreResult<u32> {
    let tx = c.client.transaction().await.map_err(backend)?;
    let rows = tx
        .query(
            // Each job read by its seq (a join may read the jobs from the first one on, every
            // chunk: a million jobs made a chunk 200 ms).
            "SELECT p.seq, (SELECT CASE WHEN j.state = 'dead' THEN j.last_reason END \
                 FROM jobs j WHERE j.seq = p.seq) \
             FROM dead_pending p ORDER BY p.seq LIMIT $1 FOR UPDATE OF p SKIP LOCKED",
            &[&i64::from(limit)],
        )
        .await
        .map_err(backend)?;
    if rows.is_empty() {
        return Ok(0);
    }
    let seqs: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    let (mut words, mut of) = (Vec::new(), Vec::new());
    for r in &rows {
        let reason: Option<String> = r.get(1);
        for w in redial_store::reason_words(reason.as_deref().unwrap_or("")) {
            words.push(w);
            of.push(r.get::<_, i64>(0));
        }
    }
    tx.execute("DELETE FROM dead_words WHERE seq = ANY($1)", &[&seqs])
        .await
        .map_err(backend)?;
    tx.execute(
        "INSERT INTO dead_words (word, seq) SELECT * FROM unnest($1::text[], $2::bigint[]) \
         ON CONFLICT DO NOTHING",
        &[&words, &of],
    )
    .await
    .map_err(backend)?;
    tx.execute("DELETE FROM dead_pending WHERE seq = ANY($1)", &[&seqs])
        .await
        .map_err(backend)?;
    tx.commit().await.map_err(backend)?;
    Ok(seqs.len() as u32)
}
