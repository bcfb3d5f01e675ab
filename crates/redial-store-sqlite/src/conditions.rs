//! The conditions of the partial indexes, spelled once: the migrations that make the indexes and
//! the queries that must use them write the same text (SQLite uses a partial index only for a
//! query whose WHERE holds each term of the index's condition).

/// The waiting states (ready, scheduled, deferred) as the partial indexes spell them: a chain of
/// `=`, not an `IN` list (which SQLite evaluates through a temporary b-tree, schema migration 7).
/// A query must spell it exactly so to use those indexes.
macro_rules! waiting {
    () => {
        "(state = 'ready' OR state = 'scheduled' OR state = 'deferred')"
    };
}

/// Waiting, ungrouped, and not behind an earlier job of its ordering key: the condition of
/// `jobs_runnable` (schema migration 22).
macro_rules! ungrouped {
    () => {
        "grp IS NULL AND ord_wait = 0 AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred')"
    };
}

/// Waiting, grouped, and not behind an earlier job of its ordering key: the condition of
/// `jobs_grouped` and `jobs_grouped_due` (schema migration 22).
macro_rules! grouped {
    () => {
        "grp IS NOT NULL AND ord_wait = 0 AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred')"
    };
}

/// In its ordering key's line ([`redial_store::OrderingKey`]): waiting, running, or dead with
/// `block`. The condition of `jobs_in_line` (schema migration 22).
macro_rules! in_line {
    () => {
        "oline IS NOT NULL AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred' \
         OR state = 'running' OR (state = 'dead' AND ord_skip = 0))"
    };
}

/// [`in_line!`]'s state condition for the trigger row `$r` (`NEW` or `OLD`): 1 or 0.
macro_rules! row_in_line {
    ($r:literal) => {
        concat!(
            "(",
            $r,
            ".state = 'ready' OR ",
            $r,
            ".state = 'scheduled' OR ",
            $r,
            ".state = 'deferred' OR ",
            $r,
            ".state = 'running' OR (",
            $r,
            ".state = 'dead' AND ",
            $r,
            ".ord_skip = 0))"
        )
    };
}

/// The jobs of the line `$line` (an SQL expression) of queue `$queue`: a job is in its line
/// while `oin` holds the line's number (schema migration 23; [`in_line!`] is what the triggers
/// keep it to), so that a lease, which changes a job's state but not whether it is in its line,
/// writes nothing to `jobs_in_line`.
macro_rules! in_line_of {
    ($queue:expr, $line:expr) => {
        concat!("queue = ", $queue, " AND oin = ", $line)
    };
}

/// The first job by seq of the line of the trigger row `$r`'s key (NULL for an empty line): the
/// first of its jobs that do not wait and the first of those that do, two seeks of
/// `jobs_in_line`, however long the line.
macro_rules! line_first {
    ($r:literal) => {
        concat!(
            "(SELECT min(COALESCE(h, w), COALESCE(w, h)) FROM (SELECT (SELECT seq FROM jobs \
             WHERE ",
            in_line_of!(concat!($r, ".queue"), concat!($r, ".oline")),
            " AND ord_wait = 0 ORDER BY seq LIMIT 1) AS h, (SELECT seq FROM jobs WHERE ",
            in_line_of!(concat!($r, ".queue"), concat!($r, ".oline")),
            " AND ord_wait = 1 ORDER BY seq LIMIT 1) AS w))"
        )
    };
}

/// The head of the line of the trigger row `$r`'s key: its running job (one that does not
/// wait), or else its first job ([`line_first!`]); NULL for an empty line.
macro_rules! line_head {
    ($r:literal) => {
        concat!(
            "SELECT COALESCE((SELECT seq FROM jobs WHERE ",
            in_line_of!(concat!($r, ".queue"), concat!($r, ".oline")),
            " AND ord_wait = 0 AND state = 'running' LIMIT 1), ",
            line_first!($r),
            ")"
        )
    };
}

/// Makes [`line_head!`] the only job of its line that does not wait: every other head (off
/// `jobs_in_line`'s jobs that do not wait: one or two rows, however long the line) waits. Two
/// statements of a trigger's body, for the rarer moves: a job entering its line, a run ending
/// behind a job replayed meanwhile, a move between queues.
macro_rules! line_fix {
    ($r:literal) => {
        concat!(
            "UPDATE jobs SET ord_wait = 0 WHERE seq = (",
            line_head!($r),
            ") AND ord_wait = 1; UPDATE jobs SET ord_wait = 1 WHERE ",
            in_line_of!(concat!($r, ".queue"), concat!($r, ".oline")),
            " AND ord_wait = 0 AND seq IS NOT (",
            line_head!($r),
            ");"
        )
    };
}

/// Makes the first job of the line of the trigger row `$r`'s key its head (its head just left
/// the line): one statement of a trigger's body, two seeks of `jobs_in_line` and the row. With a
/// guard, it does nothing unless the guard holds.
macro_rules! line_next {
    ($r:literal) => {
        line_next!($r, "1")
    };
    ($r:literal, $($guard:tt)+) => {
        concat!(
            "UPDATE jobs SET ord_wait = 0 WHERE seq = ",
            line_first!($r),
            " AND ord_wait = 1 AND (",
            $($guard)+,
            ");"
        )
    };
}

/// The triggers that keep each line (schema migration 23), on the statements that name `okey`
/// (`okey = okey`: every statement that ends a run, finishes, replays, cancels or rescues a
/// job does, but the engine's record of a job without a key), on deletes and on moves between
/// queues:
/// - `jobs_line_leave`: a job whose state leaves the line ([`in_line!`]) leaves `oin`; if it
///   was the head, the first job of its line becomes the head.
/// - `jobs_line_heading`: a job whose state enters the line (a replay after `skip`, or into
///   another queue) takes `oin`, and a run that ends with an earlier job of its line waiting
///   (one replayed while it ran): the line's head is set afresh.
/// - `jobs_line_delete`: a head deleted from its line (a dismissal) makes the first job the head.
/// - `jobs_line_move`: a job moved to another queue (a replay with changes, which also clears its
///   `oin`): both lines' heads are set afresh.
macro_rules! line_triggers {
    () => {
        concat!(
            "CREATE TRIGGER jobs_line_leave AFTER UPDATE OF okey ON jobs \
             WHEN NEW.oin IS NOT NULL AND NOT ",
            row_in_line!("NEW"),
            " BEGIN UPDATE jobs SET oin = NULL WHERE seq = NEW.seq; ",
            line_next!("NEW", "OLD.ord_wait = 0"),
            " END; CREATE TRIGGER jobs_line_heading AFTER UPDATE OF okey ON jobs \
             WHEN NEW.oline IS NOT NULL AND ",
            row_in_line!("NEW"),
            " AND (NEW.oin IS NULL OR (OLD.state = 'running' AND EXISTS (SELECT 1 FROM jobs WHERE ",
            in_line_of!("NEW.queue", "NEW.oline"),
            " AND seq < NEW.seq))) BEGIN UPDATE jobs SET oin = oline WHERE seq = NEW.seq; ",
            line_fix!("NEW"),
            " END; CREATE TRIGGER jobs_line_delete AFTER DELETE ON jobs \
             WHEN OLD.oin IS NOT NULL AND OLD.ord_wait = 0 BEGIN ",
            line_next!("OLD"),
            " END; CREATE TRIGGER jobs_line_move AFTER UPDATE OF queue ON jobs \
             WHEN OLD.oline IS NOT NULL AND OLD.queue <> NEW.queue BEGIN ",
            line_fix!("OLD"),
            " ",
            line_fix!("NEW"),
            " END;"
        )
    };
}
