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
/// `block`, as the states say it. The condition of schema migration 22's line indexes; 23's
/// say it as [`lined!`].
macro_rules! in_line {
    () => {
        "oline IS NOT NULL AND (state = 'ready' OR state = 'scheduled' OR state = 'deferred' \
         OR state = 'running' OR (state = 'dead' AND ord_skip = 0))"
    };
}

/// [`in_line!`] without the state, which every lease changes: not finished (waiting or running),
/// or dead (the only state with a `category`) with `block`. The condition of `jobs_in_line`
/// (schema migration 23), so that the lease of a keyed job, which changes its state and not
/// whether it is in its line, does not write it: with 22's line indexes, on the state, each
/// lease rewrote the job's entries in both, on pages all over them.
macro_rules! lined {
    () => {
        "oline IS NOT NULL AND (finished_at IS NULL OR (category IS NOT NULL AND ord_skip = 0))"
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

/// The first job by seq of the line of the trigger row `$r`'s key (NULL for an empty line): the
/// first of its jobs that do not wait and the first of those that do, one seek each of
/// `jobs_in_line` (on the line, then `ord_wait`: schema migration 23), in the index alone.
macro_rules! line_first {
    ($r:literal) => {
        concat!(
            "(SELECT min(s) FROM (SELECT (SELECT seq FROM jobs WHERE oline = ",
            $r,
            ".oline AND ord_wait = 0 AND ",
            lined!(),
            " ORDER BY seq LIMIT 1) AS s UNION ALL SELECT (SELECT seq FROM jobs WHERE oline = ",
            $r,
            ".oline AND ord_wait = 1 AND ",
            lined!(),
            " ORDER BY seq LIMIT 1)))"
        )
    };
}

/// The head of the line of the trigger row `$r`'s key: its running job (one that does not wait),
/// or else its first job ([`line_first!`]); NULL for an empty line. Its queries, and those of
/// the macros below, say [`lined!`], as the index does.
macro_rules! line_head {
    ($r:literal) => {
        concat!(
            "SELECT COALESCE((SELECT seq FROM jobs WHERE oline = ",
            $r,
            ".oline AND ord_wait = 0 AND ",
            lined!(),
            " AND queue = ",
            $r,
            ".queue AND state = 'running' LIMIT 1), ",
            line_first!($r),
            ")"
        )
    };
}

/// Makes [`line_head!`] the only job of its line that does not wait: every other head (off
/// `jobs_in_line`'s jobs that do not wait: one or two, however long the line) waits. Two
/// statements of a trigger's body, for the rarer moves: a job entering its line, a run ending
/// behind a job replayed meanwhile, a move between queues.
macro_rules! line_fix {
    ($r:literal) => {
        concat!(
            "UPDATE jobs SET ord_wait = 0 WHERE seq = (",
            line_head!($r),
            ") AND ord_wait = 1; UPDATE jobs SET ord_wait = 1 WHERE oline = ",
            $r,
            ".oline AND ord_wait = 0 AND ",
            lined!(),
            " AND queue = ",
            $r,
            ".queue AND seq IS NOT (",
            line_head!($r),
            ");"
        )
    };
}

/// Makes the first job of the line of the trigger row `$r`'s key its head (its head just left
/// the line, and a line has one head at most, so every job left in it waits): one statement of
/// a trigger's body, one seek of `jobs_in_line` and the row.
macro_rules! line_next {
    ($r:literal) => {
        concat!(
            "UPDATE jobs SET ord_wait = 0 WHERE seq = (SELECT seq FROM jobs WHERE oline = ",
            $r,
            ".oline AND ord_wait = 1 AND ",
            lined!(),
            " ORDER BY seq LIMIT 1);"
        )
    };
}

/// An update that takes the line's head out of it (a finish, a death with `skip`, a cancel).
macro_rules! leaving {
    () => {
        concat!(
            "OLD.ord_wait = 0 AND ",
            row_in_line!("OLD"),
            " AND NOT ",
            row_in_line!("NEW")
        )
    };
}

/// An update that may change which job heads the line: a job entering it (a replay after
/// `skip`), or a run that ends with an earlier job of the line waiting (one replayed while it
/// ran).
macro_rules! heading {
    () => {
        concat!(
            "(NOT ",
            row_in_line!("OLD"),
            " AND ",
            row_in_line!("NEW"),
            ") OR (OLD.state = 'running' AND ",
            row_in_line!("NEW"),
            " AND (EXISTS (SELECT 1 FROM jobs WHERE oline = NEW.oline AND ord_wait = 0 AND ",
            lined!(),
            " AND seq < NEW.seq) OR EXISTS (SELECT 1 FROM jobs WHERE oline = NEW.oline \
             AND ord_wait = 1 AND ",
            lined!(),
            " AND seq < NEW.seq)))"
        )
    };
}

/// The triggers that keep each line's head (schema migration 23): a head leaving its line, on
/// the statements that name `okey` (`okey = okey`); the head set afresh, on those that name
/// `ord_stay` (all that name `okey` but the engine's record of a completion); on deletes, and
/// on moves between queues.
macro_rules! line_triggers {
    () => {
        concat!(
            "CREATE TRIGGER jobs_line_leave AFTER UPDATE OF okey ON jobs \
             WHEN NEW.oline IS NOT NULL AND ",
            leaving!(),
            " BEGIN ",
            line_next!("NEW"),
            " END; CREATE TRIGGER jobs_line_heading AFTER UPDATE OF ord_stay ON jobs \
             WHEN NEW.oline IS NOT NULL AND (",
            heading!(),
            ") BEGIN ",
            line_fix!("NEW"),
            " END; CREATE TRIGGER jobs_line_delete AFTER DELETE ON jobs \
             WHEN OLD.oline IS NOT NULL AND OLD.ord_wait = 0 AND ",
            row_in_line!("OLD"),
            " BEGIN ",
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
