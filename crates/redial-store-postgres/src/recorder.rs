//! The recorder task: attempts recorded in batches, one statement each, on its own connection.

use super::conn::Conn;
use super::tls::DbConfig;
use super::{sql, too_slow};
use redial_store::{RecordAttemptParams, Recorded, StoreError, StoreResult};
use std::sync::Arc;

/// An attempt to record (its serialised data alongside) and where its answer goes.
pub(crate) struct RecordRequest {
    pub(crate) params: RecordAttemptParams,
    pub(crate) data: String,
    pub(crate) answer: tokio::sync::oneshot::Sender<StoreResult<Recorded>>,
}

/// At most this many attempts in one statement.
pub(crate) const MAX_RECORD_BATCH: usize = 512;

/// Records attempts in batches: whatever arrived while the last batch ran goes in the next, as
/// one statement, so that one commit serves them all (as the SQLite store's group commit does).
/// What the batch statement does not record (a lease lost, a cancel waiting, an id twice in the
/// batch), or a batch that fails, goes through the one-attempt path, each on its own.
///
/// Over 100 lines on purpose: the batching task's loop (gather, record, fall back one by one,
/// reconnect); its connection and queue live across the iterations.
pub(crate) async fn recorder(
    config: DbConfig,
    channel: String,
    mut requests: tokio::sync::mpsc::UnboundedReceiver<RecordRequest>,
    failures: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut conn: Option<Conn> = None;
    while let Some(first) = requests.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_RECORD_BATCH {
            match requests.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
        let limit = config.call_timeout();
        let ready = tokio::time::timeout(limit, Conn::ready(&mut conn, &config))
            .await
            .unwrap_or_else(|_| Err(too_slow(limit)));
        let c = match ready {
            Ok(c) => c,
            Err(e) => {
                // Each waiting recorder hears the same: the store cannot serve (it may try again).
                for r in batch {
                    let again = match &e {
                        StoreError::Unavailable(m) => StoreError::Unavailable(m.clone()),
                        other => StoreError::Backend(other.to_string()),
                    };
                    let _ = r.answer.send(Err(again));
                }
                continue;
            }
        };
        // The statement sees each id once: a second request for the same job waits for the
        // one-attempt path.
        let mut seen = std::collections::HashSet::new();
        let first_of_id: Vec<bool> = batch
            .iter()
            .map(|r| seen.insert(r.params.id.0.clone()))
            .collect();
        let distinct: Vec<(&RecordAttemptParams, &str)> = batch
            .iter()
            .zip(&first_of_id)
            .filter(|(_, first)| **first)
            .map(|(r, _)| (&r.params, r.data.as_str()))
            .collect();
        // A failed statement changed nothing: everything then takes the one-attempt path. One
        // that hangs leaves the connection dropped, and every attempt of the batch unrecorded
        // (the recording engine asks again).
        let recorded =
            match tokio::time::timeout(limit, sql::record_many(c, &channel, &distinct)).await {
                Ok(r) => r.unwrap_or_else(|e| {
                    // Said, not hidden: a statement that always fails would leave every attempt
                    // to the one-attempt path, correct but many times slower.
                    if failures
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                        .is_multiple_of(1000)
                    {
                        tracing::warn!(error = %e, "a batch of attempts could not be recorded at once; recording them one by one");
                    }
                    Default::default()
                }),
                Err(_) => {
                    conn = None;
                    for r in batch {
                        let _ = r.answer.send(Err(too_slow(limit)));
                    }
                    continue;
                }
            };
        for (r, first) in batch.into_iter().zip(first_of_id) {
            let answer = if first && recorded.jobs.contains(&r.params.id.0) {
                let p = r.params;
                let state = p.as_leased().0;
                // The delivery it owed went in leased to it when it asked for that (and it
                // was not there already).
                let delivery = match (p.callback, p.callback_leased_until) {
                    (Some(d), Some(until)) => recorded
                        .leased
                        .get(&d.id.0)
                        .map(|seq| d.into_leased(*seq, &p.owner, until)),
                    _ => None,
                };
                Ok(Recorded { state, delivery })
            } else {
                let Some(c) = conn.as_mut() else {
                    let _ = r.answer.send(Err(too_slow(limit)));
                    continue;
                };
                match tokio::time::timeout(
                    limit,
                    sql::record_attempt(c, &channel, r.params, r.data),
                )
                .await
                {
                    Ok(answer) => answer,
                    Err(_) => {
                        conn = None;
                        Err(too_slow(limit))
                    }
                }
            };
            let _ = r.answer.send(answer);
        }
    }
}
