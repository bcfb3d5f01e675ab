//! Alert rules on dead letters and deferred work, evaluated in the server: their state is shown
//! at `/v1/alerts` and as the `redial_alert_firing` metric, and a webhook (a Slack-compatible JSON
//! body) is told when an alert starts and stops firing.
//!
//! Every node evaluates the rules against the shared store, so every node shows the same state;
//! only the maintenance leader posts to the webhook, so a team is told once. A notification the
//! webhook did not take (unreachable, or a 5xx, 408 or 429) is posted again at each evaluation,
//! in order, until it is taken (the last [`MAX_UNTOLD`] are kept).

use redial_policy::{DeadCategory, Human, Timestamp};
use redial_store::{Store, StoreError};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

/// Notifications kept for the webhook while it does not take them; older ones are dropped.
pub const MAX_UNTOLD: usize = 100;

/// What a rule watches.
#[derive(Clone, Debug, PartialEq)]
pub enum AlertCondition {
    /// More than `more_than` jobs went dead within the last `within` (of a category and a queue,
    /// when given).
    DeadLetters {
        category: Option<DeadCategory>,
        queue: Option<String>,
        more_than: u64,
        within: Duration,
    },
    /// A job (of a queue, when given) has been deferred for longer than `older_than`.
    DeferredAge {
        queue: Option<String>,
        older_than: Duration,
    },
    /// More than `more_than` waiting jobs (of an endpoint, when given) are forecast to miss
    /// their deadline: their deadline falls before their forecast start at the limits in force
    /// ([`redial_policy::endpoint::Forecast`]).
    DeadlineAtRisk {
        endpoint: Option<String>,
        more_than: u64,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct AlertRule {
    pub name: String,
    pub condition: AlertCondition,
}

impl AlertRule {
    /// One line saying what the rule watches.
    pub fn describe(&self) -> String {
        match &self.condition {
            AlertCondition::DeadLetters {
                category,
                queue,
                more_than,
                within,
            } => format!(
                "more than {more_than} {} dead letters{} within {}",
                category.map_or("", DeadCategory::as_str),
                queue
                    .as_ref()
                    .map_or(String::new(), |q| format!(" in queue {q}")),
                Human(*within)
            )
            .replace("  ", " "),
            AlertCondition::DeferredAge { queue, older_than } => format!(
                "a job deferred for longer than {}{}",
                Human(*older_than),
                queue
                    .as_ref()
                    .map_or(String::new(), |q| format!(" in queue {q}"))
            ),
            AlertCondition::DeadlineAtRisk {
                endpoint,
                more_than,
            } => format!(
                "more than {more_than} waiting jobs{} forecast to miss their deadline",
                endpoint
                    .as_ref()
                    .map_or(String::new(), |e| format!(" of {e}"))
            ),
        }
    }

    /// The rules Redial starts with when none are configured.
    pub fn defaults() -> Vec<AlertRule> {
        let dead = |name: &str, category, more_than, within| AlertRule {
            name: name.into(),
            condition: AlertCondition::DeadLetters {
                category: Some(category),
                queue: None,
                more_than,
                within,
            },
        };
        vec![
            dead(
                "permanent_dead_letters",
                DeadCategory::Permanent,
                0,
                Duration::from_secs(300),
            ),
            dead(
                "transient_exhausted_growing",
                DeadCategory::TransientExhausted,
                10,
                Duration::from_secs(60),
            ),
            dead(
                "unknown_outcomes",
                DeadCategory::UnknownExhausted,
                5,
                Duration::from_secs(3600),
            ),
            AlertRule {
                name: "deferred_too_long".into(),
                condition: AlertCondition::DeferredAge {
                    queue: None,
                    older_than: Duration::from_secs(3600),
                },
            },
            AlertRule {
                name: "deadline_at_risk".into(),
                condition: AlertCondition::DeadlineAtRisk {
                    endpoint: None,
                    more_than: 0,
                },
            },
        ]
    }
}

#[derive(Clone, Debug)]
pub struct AlertConfig {
    pub rules: Vec<AlertRule>,
    pub interval: Duration,
    /// Told when an alert starts and stops firing (Slack-compatible JSON).
    pub webhook: Option<String>,
}

impl Default for AlertConfig {
    fn default() -> Self {
        AlertConfig {
            rules: AlertRule::defaults(),
            interval: Duration::from_secs(15),
            webhook: None,
        }
    }
}

/// A rule's state as last evaluated.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AlertStatus {
    pub name: String,
    pub rule: String,
    pub firing: bool,
    /// Since when it fires (or, when it does not, since when it stopped), if it ever fired.
    pub since: Option<Timestamp>,
    /// What was measured: a count of dead letters, a deferral's age in seconds, or a count of
    /// waiting jobs forecast to miss their deadline.
    pub value: f64,
    pub threshold: f64,
    pub evaluated_at: Option<Timestamp>,
    pub summary: String,
}

/// The rules and their states.
#[derive(Debug)]
pub struct Alerts {
    config: AlertConfig,
    states: Mutex<Vec<AlertStatus>>,
    http: reqwest::Client,
    /// Changes the webhook has not taken yet, oldest first. Only the alert loop takes it, one
    /// call after another, and holds it across the posts.
    untold: tokio::sync::Mutex<VecDeque<Change>>,
}

/// A change of state to tell the webhook about.
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub status: AlertStatus,
}

impl Alerts {
    pub fn new(config: AlertConfig) -> Alerts {
        let states = config
            .rules
            .iter()
            .map(|r| AlertStatus {
                name: r.name.clone(),
                rule: r.describe(),
                firing: false,
                since: None,
                value: 0.0,
                threshold: threshold(&r.condition),
                evaluated_at: None,
                summary: format!("{}: not evaluated yet", r.name),
            })
            .collect();
        Alerts {
            config,
            states: Mutex::new(states),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
            untold: tokio::sync::Mutex::new(VecDeque::new()),
        }
    }

    pub fn interval(&self) -> Duration {
        self.config.interval
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<AlertStatus>> {
        self.states.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn statuses(&self) -> Vec<AlertStatus> {
        self.lock().clone()
    }

    /// Whether some rule reads the store's counts (deferral ages).
    pub fn needs_stats(&self) -> bool {
        self.config
            .rules
            .iter()
            .any(|r| matches!(r.condition, AlertCondition::DeferredAge { .. }))
    }

    /// Whether some rule watches the forecasts (deadlines at risk).
    pub fn needs_forecasts(&self) -> bool {
        self.config
            .rules
            .iter()
            .any(|r| matches!(r.condition, AlertCondition::DeadlineAtRisk { .. }))
    }

    /// Evaluates every rule against the store (dead letters), `stats` (deferral ages; pass
    /// them when [`Alerts::needs_stats`]) and `at_risk` (per endpoint, the waiting jobs
    /// forecast to miss their deadline; pass them when [`Alerts::needs_forecasts`]); returns
    /// the alerts that started or stopped firing.
    pub async fn evaluate(
        &self,
        store: &dyn Store,
        stats: Option<&redial_store::Stats>,
        at_risk: Option<&[(String, u64)]>,
        now: Timestamp,
    ) -> Result<Vec<Change>, StoreError> {
        let mut values = Vec::with_capacity(self.config.rules.len());
        for rule in &self.config.rules {
            let value = match &rule.condition {
                AlertCondition::DeadLetters {
                    category,
                    queue,
                    within,
                    ..
                } => {
                    let since = Timestamp::from_unix_millis(
                        now.as_unix_millis()
                            - i64::try_from(within.as_millis()).unwrap_or(i64::MAX),
                    );
                    store
                        .dead_letters_since(since)
                        .await?
                        .iter()
                        .filter(|d| category.is_none_or(|c| c == d.category))
                        .filter(|d| queue.as_ref().is_none_or(|q| *q == d.queue))
                        .map(|d| d.count)
                        .sum::<u64>() as f64
                }
                AlertCondition::DeferredAge { queue, .. } => stats
                    .map(|s| {
                        s.oldest_deferred
                            .iter()
                            .filter(|o| queue.as_ref().is_none_or(|q| *q == o.queue))
                            .map(|o| now.saturating_since(o.since).as_secs_f64())
                            .fold(0.0, f64::max)
                    })
                    .unwrap_or(0.0),
                AlertCondition::DeadlineAtRisk { endpoint, .. } => at_risk
                    .unwrap_or_default()
                    .iter()
                    .filter(|(e, _)| endpoint.as_ref().is_none_or(|want| want == e))
                    .map(|(_, n)| *n)
                    .sum::<u64>()
                    as f64,
            };
            values.push(value);
        }
        let mut changes = Vec::new();
        let mut states = self.lock();
        for ((rule, state), value) in self.config.rules.iter().zip(states.iter_mut()).zip(values) {
            let firing = value > state.threshold;
            state.value = value;
            state.evaluated_at = Some(now);
            state.summary = summary(rule, firing, value);
            if firing != state.firing {
                state.firing = firing;
                state.since = Some(now);
                changes.push(Change {
                    status: state.clone(),
                });
            }
        }
        Ok(changes)
    }

    /// Whether some notification waits for the webhook to take it.
    pub async fn has_untold(&self) -> bool {
        !self.untold.lock().await.is_empty()
    }

    /// Drops the notifications the webhook has not taken (this node no longer leads: the leader
    /// tells the changes it sees).
    pub async fn forget_untold(&self) {
        let mut untold = self.untold.lock().await;
        if !untold.is_empty() {
            tracing::info!(
                count = untold.len(),
                "no longer the maintenance leader: the untold alert notifications are left to the leader"
            );
            untold.clear();
        }
    }

    /// Tells the webhook, if one is configured, of `changes` after those it has not taken yet,
    /// in order. One the webhook does not take for now (unreachable, 5xx, 408, 429) stops the
    /// round and is told again at the next call; one it answers otherwise (another 4xx, a
    /// redirect, which is not followed) is dropped. Either is logged. Cancelling the call loses
    /// nothing: a notification leaves the queue once taken.
    pub async fn notify(&self, changes: &[Change]) {
        let Some(url) = &self.config.webhook else {
            return;
        };
        let mut untold = self.untold.lock().await;
        untold.extend(changes.iter().cloned());
        while untold.len() > MAX_UNTOLD {
            if let Some(c) = untold.pop_front() {
                tracing::warn!(alert = %c.status.name, "the alert webhook has not taken {MAX_UNTOLD} notifications: the oldest is dropped");
            }
        }
        while let Some(c) = untold.front() {
            let s = &c.status;
            let status = if s.firing { "firing" } else { "resolved" };
            let sent = self
                .http
                .post(url)
                .header("content-type", "application/json")
                .body(body(s).to_string())
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => {
                    tracing::info!(alert = %s.name, status, "alert webhook told");
                }
                Ok(r) if !again(r.status().as_u16()) => {
                    tracing::warn!(alert = %s.name, status = r.status().as_u16(), "the alert webhook refused the notification; not told again");
                }
                Ok(r) => {
                    tracing::warn!(alert = %s.name, status = r.status().as_u16(), "the alert webhook did not take the notification; told again at the next evaluation");
                    return;
                }
                Err(e) => {
                    tracing::warn!(alert = %s.name, error = %e.without_url(), "the alert webhook could not be reached; told again at the next evaluation");
                    return;
                }
            }
            untold.pop_front();
        }
    }
}

/// Whether a webhook's answer says to try again later.
fn again(status: u16) -> bool {
    matches!(status, 408 | 429) || status >= 500
}

/// The notification of a change, Slack-compatible.
fn body(s: &AlertStatus) -> serde_json::Value {
    let status = if s.firing { "firing" } else { "resolved" };
    serde_json::json!({
        "text": format!(
            "[redial] {} {}: {}",
            s.name,
            if s.firing { "FIRING" } else { "resolved" },
            s.summary
        ),
        "alert": s.name,
        "status": status,
        "rule": s.rule,
        "value": s.value,
        "threshold": s.threshold,
        "since": s.since,
    })
}

fn threshold(c: &AlertCondition) -> f64 {
    match c {
        AlertCondition::DeadLetters { more_than, .. } => *more_than as f64,
        AlertCondition::DeferredAge { older_than, .. } => older_than.as_secs_f64(),
        AlertCondition::DeadlineAtRisk { more_than, .. } => *more_than as f64,
    }
}

fn summary(rule: &AlertRule, firing: bool, value: f64) -> String {
    match &rule.condition {
        AlertCondition::DeadLetters { within, .. } => format!(
            "{} dead letters within {} ({}: {})",
            value,
            Human(*within),
            if firing {
                "over the limit"
            } else {
                "within the limit"
            },
            rule.describe()
        ),
        AlertCondition::DeferredAge { .. } => format!(
            "oldest deferral {}s ({}: {})",
            value.round(),
            if firing {
                "over the limit"
            } else {
                "within the limit"
            },
            rule.describe()
        ),
        AlertCondition::DeadlineAtRisk { .. } => format!(
            "{value} waiting jobs forecast to miss their deadline ({}: {})",
            if firing {
                "over the limit"
            } else {
                "within the limit"
            },
            rule.describe()
        ),
    }
}
