//! The alert webhook, over real HTTP on loopback: a notification it does not take is told again,
//! in order, at the next evaluation; one it refuses for good is not.

use redial_engine::alerts::{AlertConfig, AlertStatus, Alerts, Change, MAX_UNTOLD};
use redial_test_receiver::{Misbehaviour, RawServer, Receiver, Reply};

fn change(name: &str, firing: bool) -> Change {
    Change {
        status: AlertStatus {
            name: name.into(),
            rule: "more than 0 permanent dead letters within 5m".into(),
            firing,
            since: None,
            value: 1.0,
            threshold: 0.0,
            evaluated_at: None,
            summary: "1 dead letter".into(),
        },
    }
}

fn alerts(hook: &Receiver) -> Alerts {
    Alerts::new(AlertConfig {
        rules: Vec::new(),
        interval: std::time::Duration::from_secs(1),
        webhook: Some(hook.url("/hook")),
    })
}

/// The (alert, status) of each notification the webhook took, in order.
fn taken(hook: &Receiver) -> Vec<(String, String)> {
    hook.received("/hook")
        .iter()
        .filter(|r| r.status == 200)
        .map(|r| {
            let v: serde_json::Value = serde_json::from_str(&r.body).expect("JSON");
            (
                v["alert"].as_str().unwrap_or_default().to_owned(),
                v["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_notification_the_webhook_did_not_take_is_told_again_in_order() {
    let hook = Receiver::start().await;
    hook.script(
        "/hook",
        vec![Reply::status(503), Reply::status(429), Reply::status(200)],
    );
    let a = alerts(&hook);
    a.notify(&[change("dead", true)]).await;
    assert!(a.has_untold().await, "a 503 is told again");
    // The next evaluation brings a change: the untold one goes first.
    a.notify(&[change("dead", false)]).await;
    assert!(a.has_untold().await, "a 429 is told again");
    a.notify(&[]).await;
    assert!(!a.has_untold().await);
    assert_eq!(
        taken(&hook),
        [
            ("dead".to_owned(), "firing".to_owned()),
            ("dead".to_owned(), "resolved".to_owned())
        ]
    );
    assert_eq!(hook.received("/hook").len(), 4, "503, 429, then both taken");
}

#[tokio::test]
async fn a_notification_is_kept_while_the_webhook_cannot_be_reached() {
    // A server that resets every connection without answering.
    let down = RawServer::start(Misbehaviour::Reset).await;
    let a = Alerts::new(AlertConfig {
        rules: Vec::new(),
        interval: std::time::Duration::from_secs(1),
        webhook: Some(down.url("/hook")),
    });
    a.notify(&[change("dead", true)]).await;
    a.notify(&[change("dead", false)]).await;
    assert!(a.has_untold().await, "kept while unreachable");
}

#[tokio::test]
async fn a_notification_the_webhook_refuses_for_good_is_not_told_again() {
    let hook = Receiver::start().await;
    hook.script("/hook", vec![Reply::status(400), Reply::status(200)]);
    let a = alerts(&hook);
    a.notify(&[change("dead", true), change("late", true)])
        .await;
    assert!(!a.has_untold().await);
    assert_eq!(taken(&hook), [("late".to_owned(), "firing".to_owned())]);
    assert_eq!(hook.received("/hook").len(), 2);
}

#[tokio::test]
async fn the_last_hundred_untold_are_kept_and_a_node_that_stops_leading_forgets_them() {
    let hook = Receiver::start().await;
    hook.script("/hook", vec![Reply::status(503)]);
    let a = alerts(&hook);
    let changes: Vec<Change> = (0..=MAX_UNTOLD)
        .map(|i| change(&format!("a{i}"), true))
        .collect();
    a.notify(&changes).await;
    hook.script("/hook", vec![Reply::status(200)]);
    a.notify(&[]).await;
    let told = taken(&hook);
    assert_eq!(told.len(), MAX_UNTOLD, "the oldest was dropped");
    assert_eq!(told[0].0, "a1");
    assert_eq!(told[MAX_UNTOLD - 1].0, format!("a{MAX_UNTOLD}"));

    hook.script("/hook", vec![Reply::status(503)]);
    a.notify(&[change("b", true)]).await;
    assert!(a.has_untold().await);
    a.forget_untold().await;
    assert!(!a.has_untold().await);
}
