//! Waiting for what a server does in its own time: a job's state, a request at a receiver, a
//! page's text. A wait looks again and again until its check holds, never sleeps for "long
//! enough", and gives up after [`PATIENCE`] so that a broken build fails instead of hanging.
//! [`eventually`] fails the test saying what never happened; [`within_patience`] hands the
//! failure back to a caller that has more to say about it. Each has a `_blocking` twin for
//! tests that are not async.

use std::future::Future;
use std::time::{Duration, Instant};

/// How long any wait may take before the test fails. Not a timing assertion: only a broken build
/// waits this out, a slow or busy machine (one that spawns each CLI call slowly) does not.
pub const PATIENCE: Duration = Duration::from_secs(180);

/// The pause between two looks.
const POLL: Duration = Duration::from_millis(50);

/// What a check answers: `true`, or `Some(value)`, once what it waits for has happened.
pub trait Done {
    type Value;
    fn done(self) -> Option<Self::Value>;
}

impl Done for bool {
    type Value = ();
    fn done(self) -> Option<()> {
        self.then_some(())
    }
}

impl<T> Done for Option<T> {
    type Value = T;
    fn done(self) -> Option<T> {
        self
    }
}

/// Polls `check` until it is done, and returns what it found; fails after [`PATIENCE`] saying
/// that `what` never happened.
pub async fn eventually<F, Fut>(what: &str, check: F) -> <Fut::Output as Done>::Value
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Done,
{
    match within_patience(check).await {
        Some(found) => found,
        None => panic!("never happened within {} s: {what}", PATIENCE.as_secs()),
    }
}

/// [`eventually`]'s wait without its failure: `None` once [`PATIENCE`] ran out.
pub async fn within_patience<F, Fut>(mut check: F) -> Option<<Fut::Output as Done>::Value>
where
    F: FnMut() -> Fut,
    Fut: Future,
    Fut::Output: Done,
{
    let give_up = Instant::now() + PATIENCE;
    loop {
        if let Some(found) = check().await.done() {
            return Some(found);
        }
        if Instant::now() >= give_up {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] for a test that is not async: `check` may block.
pub fn eventually_blocking<D: Done>(what: &str, check: impl FnMut() -> D) -> D::Value {
    match within_patience_blocking(check) {
        Some(found) => found,
        None => panic!("never happened within {} s: {what}", PATIENCE.as_secs()),
    }
}

/// [`within_patience`] for a test that is not async: `check` may block.
pub fn within_patience_blocking<D: Done>(mut check: impl FnMut() -> D) -> Option<D::Value> {
    let give_up = Instant::now() + PATIENCE;
    loop {
        if let Some(found) = check().done() {
            return Some(found);
        }
        if Instant::now() >= give_up {
            return None;
        }
        std::thread::sleep(POLL);
    }
}
