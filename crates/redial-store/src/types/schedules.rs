//! Recurring schedules as stored, and a due check's advance.

use super::Timestamp;

/// A recurring schedule as kept: its definition is a document the engine writes and reads (the
/// store does not look inside); the store keeps when it next falls and whether it is paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleRecord {
    /// Unique; occurrences' job ids are derived from it.
    pub id: String,
    /// The definition, as JSON.
    pub definition: String,
    pub paused: bool,
    /// When the next occurrence falls; `None` when none will.
    pub next_at: Option<Timestamp>,
    /// The latest occurrence enqueued, and when.
    pub last_occurrence: Option<Timestamp>,
    pub last_fired_at: Option<Timestamp>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// [`Store::schedule_advance`](crate::Store::schedule_advance): moves a schedule on from the
/// occurrence `due`, if no other node did first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleAdvance {
    pub id: String,
    /// The `next_at` the caller read; nothing changes unless it is still the stored one.
    pub due: Timestamp,
    /// The `updated_at` the caller read: a schedule saved, paused or resumed since is not moved
    /// on by what was read before.
    pub read_at: Timestamp,
    pub next_at: Option<Timestamp>,
    /// The latest occurrence enqueued by this check, if any.
    pub last_occurrence: Option<Timestamp>,
    pub now: Timestamp,
}
