//! The event log: what happened to jobs (finished, replayed) and endpoints (paused, breaker),
//! kept for a while and read from a cursor.
//!
//! Job events are written by the database itself, by a trigger on the jobs table, in the
//! transaction that changes the job: no path that finishes or replays a job can forget its event,
//! and a crash can neither lose nor invent one. The completions of the engine's fast path are the
//! one exception: a store writes them as one row for many, in the same transaction (the stores'
//! `sql/events.rs`); each is still an event with a cursor of its own. Endpoint events are
//! appended by the engine when it sees its endpoints' state change ([`NewEvent`]).
//!
//! A cursor is a position in the log: events are read in cursor order and a reader that resumes
//! after the last cursor it saw misses nothing and sees nothing twice. On SQLite (one writer) the
//! cursor is the row's sequence number. On PostgreSQL commits do not come in sequence order, so
//! the cursor is (transaction id, sequence number) and a read returns only the events of
//! transactions older than every transaction still running: a later commit can never land
//! behind a cursor already handed out.

use redial_policy::Timestamp;
use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// What happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum EventKind {
    #[serde(rename = "job.completed")]
    JobCompleted,
    #[serde(rename = "job.dead")]
    JobDead,
    #[serde(rename = "job.cancelled")]
    JobCancelled,
    /// A dead job was put back to run again.
    #[serde(rename = "job.replayed")]
    JobReplayed,
    /// The endpoint's jobs are held: a pause by hand, or one its answers asked for.
    #[serde(rename = "endpoint.paused")]
    EndpointPaused,
    #[serde(rename = "endpoint.resumed")]
    EndpointResumed,
    /// The breaker stopped sending (open, then probing).
    #[serde(rename = "endpoint.breaker_opened")]
    BreakerOpened,
    #[serde(rename = "endpoint.breaker_closed")]
    BreakerClosed,
    /// Down for long: its jobs are held, not failed, and one probe goes at a time.
    #[serde(rename = "endpoint.quarantined")]
    EndpointQuarantined,
    /// A quarantine ended (a probe succeeded, or it was resumed or reset by hand).
    #[serde(rename = "endpoint.recovered")]
    EndpointRecovered,
}

impl EventKind {
    pub const ALL: [EventKind; 10] = [
        EventKind::JobCompleted,
        EventKind::JobDead,
        EventKind::JobCancelled,
        EventKind::JobReplayed,
        EventKind::EndpointPaused,
        EventKind::EndpointResumed,
        EventKind::BreakerOpened,
        EventKind::BreakerClosed,
        EventKind::EndpointQuarantined,
        EventKind::EndpointRecovered,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::JobCompleted => "job.completed",
            EventKind::JobDead => "job.dead",
            EventKind::JobCancelled => "job.cancelled",
            EventKind::JobReplayed => "job.replayed",
            EventKind::EndpointPaused => "endpoint.paused",
            EventKind::EndpointResumed => "endpoint.resumed",
            EventKind::BreakerOpened => "endpoint.breaker_opened",
            EventKind::BreakerClosed => "endpoint.breaker_closed",
            EventKind::EndpointQuarantined => "endpoint.quarantined",
            EventKind::EndpointRecovered => "endpoint.recovered",
        }
    }

    /// Whether the event is about a job (it has a queue and a job id) rather than an endpoint.
    pub fn is_job(self) -> bool {
        matches!(
            self,
            EventKind::JobCompleted
                | EventKind::JobDead
                | EventKind::JobCancelled
                | EventKind::JobReplayed
        )
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EventKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EventKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let all: Vec<_> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
                format!("unknown event kind {s:?}: one of {}", all.join(", "))
            })
    }
}

/// A position in the event log, written `TX-SEQ` (`0-SEQ` on SQLite). Events after it are those
/// with a greater (tx, seq).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EventCursor {
    /// The writing transaction's id (PostgreSQL); 0 on SQLite.
    pub tx: i64,
    pub seq: i64,
}

impl fmt::Display for EventCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.tx, self.seq)
    }
}

impl FromStr for EventCursor {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?} is not an event cursor: give the id of an event read before");
        let (tx, seq) = s.split_once('-').ok_or_else(bad)?;
        let number = |p: &str| {
            (!p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                .then(|| p.parse::<i64>().ok())
                .flatten()
        };
        Ok(EventCursor {
            tx: number(tx).ok_or_else(bad)?,
            seq: number(seq).ok_or_else(bad)?,
        })
    }
}

/// An event as the log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub cursor: EventCursor,
    pub at: Timestamp,
    pub kind: EventKind,
    /// The job's queue and id (job events).
    pub queue: Option<String>,
    pub job_id: Option<String>,
    pub endpoint: Option<String>,
    /// The dead-letter category (a dead job).
    pub category: Option<String>,
    /// Why: the job's last reason, the pause's or the breaker's.
    pub reason: Option<String>,
    /// Until when a pause or an open breaker holds, as known when it began.
    pub until: Option<Timestamp>,
}

/// A completion as a row of them holds it (`batch`, a JSON list of these): [at, queue, job id,
/// endpoint, reason]. The completions the engine records on its fast path are logged as such
/// rows, one per transaction or batch; each is a `job.completed` event with a cursor of its own.
pub type Completion = (i64, String, String, String, String);

/// The events of a row of completions (`batch`) whose first is numbered `first` in transaction
/// `tx`, the next ones one apart, after `after` only (a cursor may stop inside a row).
pub fn completed_events(
    batch: &str,
    tx: i64,
    first: impl FnOnce(usize) -> i64,
    after: EventCursor,
) -> crate::StoreResult<Vec<Event>> {
    let done: Vec<Completion> = serde_json::from_str(batch).map_err(crate::corrupt_json)?;
    let first = first(done.len());
    Ok(done
        .into_iter()
        .enumerate()
        .map(|(i, (at, queue, id, endpoint, reason))| Event {
            cursor: EventCursor {
                tx,
                seq: first + i as i64,
            },
            at: Timestamp::from_unix_millis(at),
            kind: EventKind::JobCompleted,
            queue: Some(queue),
            job_id: Some(id),
            endpoint: Some(endpoint),
            category: None,
            reason: Some(reason),
            until: None,
        })
        .filter(|e| e.cursor > after)
        .collect())
}

/// An endpoint event to append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewEvent {
    pub at: Timestamp,
    pub kind: EventKind,
    pub endpoint: String,
    pub reason: Option<String>,
    pub until: Option<Timestamp>,
}

/// Where a read of the log starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventFrom {
    /// The oldest event kept.
    Start,
    /// The events after this cursor.
    After(EventCursor),
    /// Nothing yet: the page is empty and its `next` is where the events from now on begin.
    End,
}

#[derive(Clone, Debug, PartialEq)]
pub struct EventListParams {
    pub from: EventFrom,
    /// Only job events of these queues (endpoint events have no queue and are left out when
    /// this is not empty). Empty: every queue.
    pub queues: Vec<String>,
    /// Only these kinds; empty: every kind.
    pub kinds: Vec<EventKind>,
    /// At most this many events returned, and at most [`EVENT_SCAN`] times this many read.
    pub limit: u32,
}

/// Rows read per event asked for, at most, when filters leave rows out: a read stays bounded
/// however rare the events the filter wants, and its `next` still moves on.
pub const EVENT_SCAN: u32 = 20;

#[derive(Clone, Debug, PartialEq)]
pub struct EventPage {
    pub events: Vec<Event>,
    /// Where the next read starts: after the last row read (matching or not), or the `from`
    /// cursor when nothing was read.
    pub next: EventCursor,
    /// Whether rows may follow right away (the read stopped at its limit).
    pub more: bool,
}

impl EventListParams {
    /// How many rows a store reads for this page, at most.
    pub fn scan(&self) -> u32 {
        self.limit.max(1).saturating_mul(EVENT_SCAN)
    }

    /// The page the rows a store read (in cursor order, at most [`Self::scan`], after `from`
    /// whose cursor is `start`) make: the wanted ones up to the limit, and where to go on.
    pub fn page(&self, start: EventCursor, rows: Vec<Event>) -> EventPage {
        let full = rows.len() as u64 >= u64::from(self.scan());
        let mut page = EventPage {
            events: Vec::new(),
            next: start,
            more: full,
        };
        for e in rows {
            page.next = e.cursor;
            if self.wants(&e) {
                page.events.push(e);
                if page.events.len() >= self.limit.max(1) as usize {
                    page.more = true;
                    break;
                }
            }
        }
        page
    }

    /// Whether `e` passes the filters.
    pub fn wants(&self, e: &Event) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&e.kind))
            && (self.queues.is_empty() || e.queue.as_ref().is_some_and(|q| self.queues.contains(q)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_garbage() {
        let c = EventCursor { tx: 7, seq: 42 };
        assert_eq!(c.to_string(), "7-42");
        assert_eq!("7-42".parse::<EventCursor>(), Ok(c));
        for bad in [
            "",
            "7",
            "-1",
            "7-",
            "a-1",
            "1-+2",
            "1-2-3",
            "99999999999999999999-1",
        ] {
            assert!(bad.parse::<EventCursor>().is_err(), "{bad}");
        }
    }

    #[test]
    fn kinds_parse_from_their_names() {
        for k in EventKind::ALL {
            assert_eq!(k.as_str().parse::<EventKind>(), Ok(k));
        }
        assert!("job.done".parse::<EventKind>().is_err());
    }
}
