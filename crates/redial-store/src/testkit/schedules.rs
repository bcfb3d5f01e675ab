//! Schedules: saved and read back, listed, paused, deleted; the due read and the advance that
//! only one of two nodes wins.

use super::at;
use crate::{ScheduleAdvance, ScheduleRecord, Store};
use redial_policy::Timestamp;
use std::sync::Arc;

fn record(id: &str, next_at: Option<Timestamp>) -> ScheduleRecord {
    ScheduleRecord {
        id: id.into(),
        definition: format!("{{\"id\":\"{id}\"}}"),
        paused: false,
        next_at,
        last_occurrence: None,
        last_fired_at: None,
        created_at: at(0),
        updated_at: at(0),
    }
}

pub async fn schedules_round_trip(store: Arc<dyn Store>) {
    assert_eq!(store.schedule_get("a").await.expect("get"), None);
    store
        .schedule_save(record("b", Some(at(60))))
        .await
        .expect("save");
    store
        .schedule_save(record("a", Some(at(30))))
        .await
        .expect("save");
    let ids: Vec<String> = store
        .schedule_list()
        .await
        .expect("list")
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids, ["a", "b"]);
    // Pages, by id.
    let page = |after: Option<&str>, limit| {
        let store = store.clone();
        let after = after.map(str::to_owned);
        async move {
            store
                .schedule_page(after, limit)
                .await
                .expect("page")
                .into_iter()
                .map(|s| s.id)
                .collect::<Vec<String>>()
        }
    };
    assert_eq!(page(None, 1).await, ["a"]);
    assert_eq!(page(Some("a"), 1).await, ["b"]);
    assert_eq!(page(Some("a"), 5).await, ["b"]);
    assert!(page(Some("b"), 5).await.is_empty());
    // Saving again replaces the definition and next occurrence; the pause, the creation time
    // and the last occurrence stay.
    assert!(store
        .schedule_advance(ScheduleAdvance {
            id: "a".into(),
            due: at(30),
            read_at: at(0),
            next_at: Some(at(90)),
            last_occurrence: Some(at(30)),
            now: at(31),
        })
        .await
        .expect("advance"));
    let mut again = record("a", Some(at(120)));
    again.definition = "{\"changed\":true}".into();
    again.created_at = at(100);
    again.updated_at = at(100);
    store.schedule_save(again).await.expect("save again");
    let a = store.schedule_get("a").await.expect("get").expect("kept");
    assert_eq!(a.definition, "{\"changed\":true}");
    assert_eq!(
        (a.next_at, a.created_at, a.updated_at),
        (Some(at(120)), at(0), at(100))
    );
    assert_eq!(
        (a.last_occurrence, a.last_fired_at),
        (Some(at(30)), Some(at(31)))
    );
    // Paused: not due, whatever its next occurrence, which a pause leaves as it was.
    assert!(store
        .schedule_set_paused("a", true, Some(at(999)), at(101))
        .await
        .expect("pause"));
    assert!(store
        .schedules_due(at(1000), 10)
        .await
        .expect("due")
        .iter()
        .all(|s| s.id != "a"));
    let a = store.schedule_get("a").await.expect("get").expect("kept");
    assert!(a.paused);
    assert_eq!(a.next_at, Some(at(120)));
    // Saving over a paused schedule keeps it paused.
    store
        .schedule_save(record("a", Some(at(130))))
        .await
        .expect("save");
    let a = store.schedule_get("a").await.expect("get").expect("kept");
    assert_eq!((a.paused, a.next_at), (true, Some(at(130))));
    // Resumed from the next occurrence given.
    assert!(store
        .schedule_set_paused("a", false, Some(at(140)), at(102))
        .await
        .expect("resume"));
    let a = store.schedule_get("a").await.expect("get").expect("kept");
    assert_eq!((a.paused, a.next_at), (false, Some(at(140))));
    assert!(!store
        .schedule_set_paused("nope", true, None, at(101))
        .await
        .expect("pause"));
    assert!(store.schedule_delete("a").await.expect("delete"));
    assert!(!store.schedule_delete("a").await.expect("delete"));
    assert_eq!(store.schedule_get("a").await.expect("get"), None);
}

pub async fn schedules_due_and_advance_once(store: Arc<dyn Store>) {
    store
        .schedule_save(record("late", Some(at(10))))
        .await
        .expect("save");
    store
        .schedule_save(record("also", Some(at(10))))
        .await
        .expect("save");
    store
        .schedule_save(record("early", Some(at(5))))
        .await
        .expect("save");
    store
        .schedule_save(record("later", Some(at(100))))
        .await
        .expect("save");
    store
        .schedule_save(record("never", None))
        .await
        .expect("save");
    let due: Vec<String> = store
        .schedules_due(at(50), 10)
        .await
        .expect("due")
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(
        due,
        ["early", "also", "late"],
        "the earliest first, then by id; none not yet due"
    );
    assert_eq!(store.schedules_due(at(50), 1).await.expect("due").len(), 1);
    // Two nodes read "late" due at 10; the first to advance wins, the other changes nothing.
    let advance = |next: i64| ScheduleAdvance {
        id: "late".into(),
        due: at(10),
        read_at: at(0),
        next_at: Some(at(next)),
        last_occurrence: Some(at(10)),
        now: at(50),
    };
    assert!(store.schedule_advance(advance(70)).await.expect("advance"));
    assert!(!store.schedule_advance(advance(80)).await.expect("advance"));
    let late = store
        .schedule_get("late")
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(late.next_at, Some(at(70)));
    // An advance that enqueued nothing keeps the last occurrence.
    assert!(store
        .schedule_advance(ScheduleAdvance {
            id: "late".into(),
            due: at(70),
            read_at: at(0),
            next_at: None,
            last_occurrence: None,
            now: at(80),
        })
        .await
        .expect("advance"));
    let late = store
        .schedule_get("late")
        .await
        .expect("get")
        .expect("kept");
    assert_eq!(
        (late.next_at, late.last_occurrence, late.last_fired_at),
        (None, Some(at(10)), Some(at(50)))
    );
    // A schedule saved after it was read is not moved on by that read, even when its new next
    // occurrence is the instant the reader found due.
    let read = store
        .schedule_get("also")
        .await
        .expect("get")
        .expect("kept");
    let mut replaced = record("also", Some(at(10)));
    replaced.updated_at = at(40);
    store.schedule_save(replaced).await.expect("save");
    assert!(!store
        .schedule_advance(ScheduleAdvance {
            id: "also".into(),
            due: at(10),
            read_at: read.updated_at,
            next_at: Some(at(90)),
            last_occurrence: Some(at(10)),
            now: at(50),
        })
        .await
        .expect("advance"));
    let also = store
        .schedule_get("also")
        .await
        .expect("get")
        .expect("kept");
    assert_eq!((also.next_at, also.updated_at), (Some(at(10)), at(40)));
}
