//! Graceful shutdown as a type: trigger it from anywhere, any number of times; wait for it anywhere.

use tokio::sync::watch;

/// A shutdown signal. Clones share it. Triggering twice is the same as once.
#[derive(Clone, Debug)]
pub struct Shutdown {
    tx: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Self::new()
    }
}

impl Shutdown {
    pub fn new() -> Self {
        Shutdown {
            tx: watch::Sender::new(false),
        }
    }

    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once the shutdown has been triggered (at once if it already was).
    pub async fn wait(&self) {
        let mut rx = self.tx.subscribe();
        // An error means the sender is gone, which cannot happen while `self` holds it.
        let _ = rx.wait_for(|v| *v).await;
    }
}
