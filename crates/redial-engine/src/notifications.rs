//! Notifications: the lifecycle events people want to be told of (an endpoint quarantined or
//! recovered, a breaker opened or closed, an endpoint paused for long, an alert firing or
//! resolved), delivered to webhook targets as jobs of Redial's own queue (`notifications`): retried,
//! dead-lettered and visible as any job, signed as any delivery of that queue or endpoint is
//! (Standard Webhooks), and never sent from the dispatch path itself.
//!
//! One event makes one job per target that wants it, whose id (and so idempotency key, and
//! `webhook-id`) is derived from the target, the event's kind, its subject and its instant: an
//! event told twice (a restart, a second node) is the same job, stored once. Only the node that
//! leads maintenance tells endpoint events and alert changes, as the event log and the alert
//! webhook already are.
//!
//! Owns the targets' configuration, which events each wants, and the body of each format. Does
//! not own when an event happens (the endpoint registry and the alerts say), nor delivery (the
//! queue's ordinary machinery).

use crate::alerts::Change;
use redial_policy::Timestamp;
use redial_store::{EventKind, HttpRequest, JobId, NewEvent, NewJob};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a target may ask to be told of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NotifyEvent {
    #[serde(rename = "endpoint.quarantined")]
    EndpointQuarantined,
    #[serde(rename = "endpoint.recovered")]
    EndpointRecovered,
    #[serde(rename = "endpoint.breaker_opened")]
    BreakerOpened,
    #[serde(rename = "endpoint.breaker_closed")]
    BreakerClosed,
    /// Held by a pause (its answers' or a hand's) meant to last `paused_longer_than` or more.
    #[serde(rename = "endpoint.paused")]
    EndpointPaused,
    #[serde(rename = "endpoint.resumed")]
    EndpointResumed,
    /// An alert rule started firing (rules on dead letters per queue and category, on the age
    /// of deferred work: see the alerts' configuration).
    #[serde(rename = "alert.firing")]
    AlertFiring,
    #[serde(rename = "alert.resolved")]
    AlertResolved,
}

impl NotifyEvent {
    pub const ALL: [NotifyEvent; 8] = [
        NotifyEvent::EndpointQuarantined,
        NotifyEvent::EndpointRecovered,
        NotifyEvent::BreakerOpened,
        NotifyEvent::BreakerClosed,
        NotifyEvent::EndpointPaused,
        NotifyEvent::EndpointResumed,
        NotifyEvent::AlertFiring,
        NotifyEvent::AlertResolved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::EndpointQuarantined => "endpoint.quarantined",
            NotifyEvent::EndpointRecovered => "endpoint.recovered",
            NotifyEvent::BreakerOpened => "endpoint.breaker_opened",
            NotifyEvent::BreakerClosed => "endpoint.breaker_closed",
            NotifyEvent::EndpointPaused => "endpoint.paused",
            NotifyEvent::EndpointResumed => "endpoint.resumed",
            NotifyEvent::AlertFiring => "alert.firing",
            NotifyEvent::AlertResolved => "alert.resolved",
        }
    }

    pub fn parse(s: &str) -> Result<NotifyEvent, String> {
        NotifyEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| {
                let all: Vec<_> = NotifyEvent::ALL.iter().map(|e| e.as_str()).collect();
                format!(
                    "unknown notification event {s:?}: one of {}",
                    all.join(", ")
                )
            })
    }

    fn of(kind: EventKind) -> Option<NotifyEvent> {
        Some(match kind {
            EventKind::EndpointQuarantined => NotifyEvent::EndpointQuarantined,
            EventKind::EndpointRecovered => NotifyEvent::EndpointRecovered,
            EventKind::BreakerOpened => NotifyEvent::BreakerOpened,
            EventKind::BreakerClosed => NotifyEvent::BreakerClosed,
            EventKind::EndpointPaused => NotifyEvent::EndpointPaused,
            EventKind::EndpointResumed => NotifyEvent::EndpointResumed,
            _ => return None,
        })
    }
}

/// How a notification's body is written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotifyFormat {
    /// `{"type", "timestamp", "data"}`, as Standard Webhooks payloads are.
    #[default]
    Standard,
    /// `{"text"}`: what Slack's and compatible incoming webhooks take.
    Slack,
}

/// A webhook target and what it wants to be told of.
#[derive(Clone, Debug, PartialEq)]
pub struct NotificationTarget {
    /// Its name, in the jobs' ids (`notify-NAME-...`) and the logs.
    pub name: String,
    pub url: String,
    pub events: Vec<NotifyEvent>,
    pub format: NotifyFormat,
    /// `endpoint.paused` only for pauses meant to last this long or more (a pause with no end
    /// always counts); zero: every pause.
    pub paused_longer_than: Duration,
}

/// One thing to tell: what happened, to what (an endpoint or an alert), when, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub event: NotifyEvent,
    pub at: Timestamp,
    /// The endpoint's name, or the alert's.
    pub subject: String,
    pub reason: Option<String>,
    /// Until when it holds, when known (a pause, an open breaker).
    pub until: Option<Timestamp>,
}

impl Notice {
    /// The notices an endpoint event makes (none for job events).
    pub fn of_event(e: &NewEvent) -> Option<Notice> {
        Some(Notice {
            event: NotifyEvent::of(e.kind)?,
            at: e.at,
            subject: e.endpoint.clone(),
            reason: e.reason.clone(),
            until: e.until,
        })
    }

    /// The notice an alert's change makes.
    pub fn of_alert(c: &Change, at: Timestamp) -> Notice {
        let s = &c.status;
        Notice {
            event: if s.firing {
                NotifyEvent::AlertFiring
            } else {
                NotifyEvent::AlertResolved
            },
            at: s.since.unwrap_or(at),
            subject: s.name.clone(),
            reason: Some(s.summary.clone()),
            until: None,
        }
    }

    fn line(&self) -> String {
        let what = match self.event {
            NotifyEvent::EndpointQuarantined => "endpoint quarantined",
            NotifyEvent::EndpointRecovered => "endpoint recovered",
            NotifyEvent::BreakerOpened => "breaker opened",
            NotifyEvent::BreakerClosed => "breaker closed",
            NotifyEvent::EndpointPaused => "endpoint paused",
            NotifyEvent::EndpointResumed => "endpoint resumed",
            NotifyEvent::AlertFiring => "alert firing",
            NotifyEvent::AlertResolved => "alert resolved",
        };
        let mut line = format!("Redial: {what}: {}", self.subject);
        if let Some(until) = self.until {
            line.push_str(&format!(" until {until}"));
        }
        if let Some(r) = self.reason.as_deref().filter(|r| !r.is_empty()) {
            line.push_str(&format!(" ({r})"));
        }
        line
    }
}

impl NotificationTarget {
    /// Whether this target wants `notice`.
    pub fn wants(&self, notice: &Notice) -> bool {
        if !self.events.contains(&notice.event) {
            return false;
        }
        if notice.event == NotifyEvent::EndpointPaused && !self.paused_longer_than.is_zero() {
            return notice
                .until
                .is_none_or(|u| u.saturating_since(notice.at) >= self.paused_longer_than);
        }
        true
    }

    /// The delivery job of `notice` for this target, in `queue`. Its id (and key, and
    /// `webhook-id`) is in the form [`is_notification_id`] recognises, which the API refuses
    /// from clients.
    pub fn job(&self, notice: &Notice, queue: &str) -> Option<NewJob> {
        let endpoint = url::Url::parse(&self.url)
            .ok()?
            .origin()
            .ascii_serialization();
        let body = match self.format {
            NotifyFormat::Standard => serde_json::json!({
                "type": notice.event.as_str(),
                "timestamp": notice.at,
                "data": {
                    "subject": notice.subject,
                    "reason": notice.reason,
                    "until": notice.until,
                    "text": notice.line(),
                },
            }),
            NotifyFormat::Slack => serde_json::json!({ "text": notice.line() }),
        };
        let id = format!(
            "notify-{}-{}-{:016x}-{}",
            self.name,
            notice.event.as_str(),
            fnv(notice.subject.as_bytes()),
            notice.at.as_unix_millis()
        );
        Some(NewJob {
            ordering: None,
            callback: None,
            id: JobId(id.clone()),
            queue: queue.to_owned(),
            endpoint,
            request: HttpRequest {
                method: "POST".into(),
                url: self.url.clone(),
                headers: vec![("content-type".into(), "application/json".into())],
                body: Some(body.to_string()),
                timeout_ms: None,
                credentials: None,
            },
            idempotency_key: Some(id),
            priority: 0,
            run_at: notice.at,
            deadline: None,
            tags: vec!["notification".into(), notice.event.as_str().into()],
            policy: None,
            created_at: notice.at,
            group: None,
        })
    }
}

/// The delivery jobs of `notices` for every target that wants them.
pub fn jobs(targets: &[NotificationTarget], notices: &[Notice], queue: &str) -> Vec<NewJob> {
    notices
        .iter()
        .flat_map(|n| {
            targets
                .iter()
                .filter(|t| t.wants(n))
                .filter_map(|t| t.job(n, queue))
        })
        .collect()
}

/// A short stable hash of a subject (an endpoint's name may be long and hold any character; a
/// job id must not).
/// Whether `s` has the form of a notification's id (`notify-<target>-<event>-<16 hex>-<ms>`),
/// which is also its idempotency key and `webhook-id`: such ids and keys are Redial's own, and
/// the API refuses them from clients (a job holding one would suppress the genuine delivery, or
/// be signed in its place).
pub fn is_notification_id(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("notify-") else {
        return false;
    };
    let mut tail = rest.rsplitn(3, '-');
    let (Some(ms), Some(hash), Some(head)) = (tail.next(), tail.next(), tail.next()) else {
        return false;
    };
    !ms.is_empty()
        && ms.bytes().all(|b| b.is_ascii_digit())
        && hash.len() == 16
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && NotifyEvent::ALL
            .iter()
            .any(|e| head.ends_with(&format!("-{}", e.as_str())))
}

/// Whether an idempotency key (or a job id) is in a form Redial's own deliveries use: a
/// callback's (`callback~...`, see `Callback::delivery_id`) or a notification's. The key is a
/// signed delivery's `webhook-id`; the API refuses these from clients on every queue.
pub fn is_reserved_delivery_key(s: &str) -> bool {
    s.starts_with("callback~") || is_notification_id(s)
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(events: &[NotifyEvent], paused_longer_than: Duration) -> NotificationTarget {
        NotificationTarget {
            name: "ops".into(),
            url: "https://hooks.example.com/redial?token=x".into(),
            events: events.to_vec(),
            format: NotifyFormat::Standard,
            paused_longer_than,
        }
    }

    fn paused(for_s: Option<u64>) -> Notice {
        let at = Timestamp::from_unix_millis(1_796_000_000_000);
        Notice {
            event: NotifyEvent::EndpointPaused,
            at,
            subject: "https://api.example.com".into(),
            reason: Some("429 Retry-After".into()),
            until: for_s.map(|s| at.saturating_add(Duration::from_secs(s))),
        }
    }

    #[test]
    fn a_pause_is_told_when_it_is_meant_to_last() {
        let t = target(&[NotifyEvent::EndpointPaused], Duration::from_secs(300));
        for (for_s, told) in [
            (Some(60), false),
            (Some(300), true),
            (Some(3600), true),
            (None, true),
        ] {
            assert_eq!(t.wants(&paused(for_s)), told, "{for_s:?}");
        }
        // Zero: every pause; and only the events asked for.
        assert!(target(&[NotifyEvent::EndpointPaused], Duration::ZERO).wants(&paused(Some(1))));
        assert!(!target(&[NotifyEvent::EndpointResumed], Duration::ZERO).wants(&paused(None)));
    }

    #[test]
    fn a_notification_id_is_known_for_redials_own() {
        let t = target(&[NotifyEvent::EndpointPaused], Duration::ZERO);
        let id = t.job(&paused(None), "notifications").expect("a job").id.0;
        assert!(is_notification_id(&id), "{id}");
        assert!(is_reserved_delivery_key(&id));
        assert!(is_reserved_delivery_key("callback~completed~1.0~victim"));
        for other in [
            "notify-user-42",
            "notify-ops-endpoint.paused",
            "notify-ops-endpoint.paused-0123456789abcdef-",
            "order-42",
            "",
        ] {
            assert!(!is_reserved_delivery_key(other), "{other}");
        }
    }

    #[test]
    fn one_event_is_one_job_whose_id_it_makes() {
        let t = target(&[NotifyEvent::EndpointPaused], Duration::ZERO);
        let mut n = paused(None);
        n.subject = "https://api.example.com/\u{1b}[31m weird".into();
        let a = t.job(&n, "notifications").expect("a job");
        let b = t.job(&n, "notifications").expect("a job");
        assert_eq!(a.id, b.id);
        assert!(a.id.0.is_ascii() && !a.id.0.contains(' '), "{}", a.id.0);
        assert_eq!(a.idempotency_key.as_deref(), Some(a.id.0.as_str()));
        assert_eq!(a.endpoint, "https://hooks.example.com");
        let body: serde_json::Value =
            serde_json::from_str(a.request.body.as_deref().expect("a body")).expect("JSON");
        assert_eq!(body["type"], "endpoint.paused");
        // Another target, or another instant, is another job.
        let mut later = n.clone();
        later.at = n.at.saturating_add(Duration::from_millis(1));
        assert_ne!(t.job(&later, "notifications").expect("a job").id, a.id);
        assert_eq!(jobs(&[t.clone(), t], &[n], "notifications").len(), 2);
    }
}
