//! Online backups of a real SQLite file (issue 31): a copy taken while jobs are enqueued, leased
//! and completed holds every job acknowledged before it began, in the state it had then or later;
//! it passes the integrity check and its kept counts match its rows; a job leased when the copy
//! was taken is rescued as any expired lease is when the copy is served. Nothing is left under
//! the copy's name when it cannot be made.

use redial_store::testkit::{at, new_job, record, T0};
use redial_store::*;
use redial_store_sqlite::{backup_file, SqliteStore};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

async fn lease(store: &SqliteStore, owner: &str, limit: u32) -> Vec<Job> {
    store
        .job_lease_available(LeaseParams {
            queue: "q".into(),
            limit,
            owner: owner.into(),
            now: T0,
            lease_until: at(60),
        })
        .await
        .expect("lease")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_load_holds_every_acknowledged_job_and_its_leases_are_rescued() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redial.db");
    let store = SqliteStore::open(&path).expect("open");
    // A base of 20,000 jobs, so that the copy takes a while.
    for batch in 0..200 {
        let jobs = (0..100)
            .map(|k| new_job(&format!("base-{batch}-{k}"), "q"))
            .collect();
        store.job_insert_batch(jobs).await.expect("insert");
    }
    let held = lease(&store, "held-owner", 1).await;
    assert_eq!(held.len(), 1);
    let held = held[0].id.clone();

    // The load: enqueue 50, lease 20 and complete them, over and over; what was acknowledged
    // is noted once its call returned.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let completed = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = tokio::spawn({
        let (store, acked, completed, stop) = (
            store.clone(),
            acked.clone(),
            completed.clone(),
            stop.clone(),
        );
        async move {
            let mut round = 0;
            while !stop.load(Ordering::Relaxed) {
                let ids: Vec<String> = (0..50).map(|k| format!("load-{round}-{k}")).collect();
                let jobs = ids.iter().map(|id| new_job(id, "q")).collect();
                store.job_insert_batch(jobs).await.expect("insert");
                acked.lock().expect("not poisoned").extend(ids);
                for job in lease(&store, "w", 20).await {
                    let mut p = record(job.id.0.as_str(), "w", 1, Transition::Complete);
                    p.queue = job.queue.clone();
                    p.endpoint = job.endpoint.clone();
                    store.job_record_attempt(p).await.expect("record");
                    completed
                        .lock()
                        .expect("not poisoned")
                        .push(job.id.0.as_str().to_owned());
                }
                round += 1;
            }
            round
        }
    });
    // Wait (on events, not time) until the load is well under way.
    while acked.lock().expect("not poisoned").len() < 1_000 {
        tokio::task::yield_now().await;
    }
    let acked_before = acked.lock().expect("not poisoned").clone();
    let completed_before = completed.lock().expect("not poisoned").clone();
    let copy = dir.path().join("copy.db");
    let made = {
        let (path, copy) = (path.clone(), copy.clone());
        tokio::task::spawn_blocking(move || backup_file(&path, &copy, false, &mut |_, _| {}))
            .await
            .expect("the backup runs")
            .expect("the backup is made")
    };
    // The server's way (`POST /v1/backup`): a checked copy beside the database, removed when
    // dropped.
    let served = store.backup().await.expect("the store's own backup");
    assert!(served.path.starts_with(dir.path()) && served.jobs >= made.jobs);
    let served_path = served.path.clone();
    drop(served);
    assert!(
        !served_path.exists(),
        "the served copy is removed once dropped"
    );

    stop.store(true, Ordering::Relaxed);
    let rounds = load.await.expect("the load ends");
    assert!(rounds >= 20, "the load ran ({rounds} rounds)");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("in-progress"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "half-written copies left: {leftovers:?}"
    );

    // The copy, served as a database of its own.
    let restored = SqliteStore::open(&copy).expect("the copy opens");
    assert_eq!(
        restored.integrity(std::time::Duration::from_secs(60)).await,
        Some(Ok(())),
        "the copy passes the integrity check"
    );
    restored
        .counts_check()
        .await
        .expect("the copy's kept counts match its jobs");
    let mut in_copy = 0;
    for id in &acked_before {
        let (job, _) = restored
            .job_get(&JobId::from(id.as_str()))
            .await
            .expect("read")
            .unwrap_or_else(|| panic!("job {id}, acknowledged before the backup, is in the copy"));
        in_copy += 1;
        assert!(
            matches!(
                job.state,
                JobState::Ready | JobState::Running | JobState::Completed
            ),
            "{id} is {:?}",
            job.state
        );
    }
    for id in &completed_before {
        let (job, attempts) = restored
            .job_get(&JobId::from(id.as_str()))
            .await
            .expect("read")
            .expect("in the copy");
        assert_eq!(
            (job.state, attempts.len()),
            (JobState::Completed, 1),
            "{id} was completed before the backup"
        );
    }
    assert!(made.jobs >= 20_000 + in_copy as u64);

    // The job leased when the copy was taken: its lease runs out, and it is rescued.
    let (job, _) = restored
        .job_get(&held)
        .await
        .expect("read")
        .expect("held job");
    assert_eq!(job.state, JobState::Running);
    let rescued = restored
        .job_rescue_expired(RescueParams {
            now: at(61),
            max_stalls: 3,
            presence_grace: std::time::Duration::from_secs(3),
        })
        .await
        .expect("rescue");
    assert!(rescued.requeued >= 1);
    let (job, _) = restored
        .job_get(&held)
        .await
        .expect("read")
        .expect("held job");
    assert_eq!((job.state, job.stalls), (JobState::Ready, 1));
    let again = lease(&restored, "w2", 100_000).await;
    assert!(again.iter().any(|j| j.id == held), "the rescued job runs");
}

#[tokio::test]
async fn a_backup_refuses_to_overwrite_and_leaves_nothing_when_it_cannot_be_made() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redial.db");
    let store = SqliteStore::open(&path).expect("open");
    store.job_insert(new_job("a", "q")).await.expect("insert");
    let copy = dir.path().join("copy.db");
    std::fs::write(&copy, "an older backup").expect("write");
    let e = backup_file(&path, &copy, false, &mut |_, _| {}).expect_err("refused");
    assert!(e.to_string().contains("--force"), "{e}");
    assert_eq!(
        std::fs::read_to_string(&copy).expect("read"),
        "an older backup",
        "untouched"
    );
    // With replace, the new copy takes its place whole.
    let made = backup_file(&path, &copy, true, &mut |_, _| {}).expect("replaced");
    assert_eq!(made.jobs, 1);
    assert_eq!(redial_store_sqlite::check_backup(&copy).expect("checks"), 1);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&copy).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "only its owner reads a copy");
    }
    // No database there: refused, nothing written.
    let none = dir.path().join("none.db");
    let e = backup_file(&dir.path().join("missing.db"), &none, false, &mut |_, _| {})
        .expect_err("no source");
    assert!(e.to_string().contains("no database"), "{e}");
    // A folder that does not exist: refused, nothing written.
    let e = backup_file(
        &path,
        &dir.path().join("no/such/folder/copy.db"),
        false,
        &mut |_, _| {},
    )
    .expect_err("no folder");
    assert!(e.to_string().contains("cannot write"), "{e}");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| !n.contains("in-progress") && n != "none.db"),
        "{names:?}"
    );
}

/// Observed at c38adc7: a SIGKILL mid-backup left a 208 MB in-progress copy that the restart
/// kept, because the killed process's PID still looked alive (in a container, where the server
/// is always the same PID, it would never go). The rule no longer rests on PIDs: a copy whose
/// writer is gone (its lock free) is swept when the database next opens, whatever PID its name
/// carries; one whose writer lives (its lock held) is left alone.
#[tokio::test]
async fn leftover_copies_are_swept_by_their_lock_not_their_pid() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("redial.db");
    drop(SqliteStore::open(&path).expect("open"));
    // Named with this very process's PID, as a container's PID 1 would leave it.
    let me = std::process::id();
    let dead = dir
        .path()
        .join(format!(".redial-backup-in-progress-{me}-served-7.db"));
    std::fs::write(&dead, vec![0u8; 4096]).expect("a leftover");
    // A living writer's copy: its lock is held.
    let living = dir
        .path()
        .join(format!(".redial-backup-in-progress-{me}-copy.db"));
    std::fs::write(&living, b"being written").expect("a copy in progress");
    let held = std::fs::OpenOptions::new()
        .write(true)
        .open(&living)
        .expect("open");
    held.try_lock().expect("locked by its writer");
    drop(SqliteStore::open(&path).expect("reopen"));
    assert!(!dead.exists(), "the dead writer's copy is swept");
    assert!(living.exists(), "the living writer's copy stays");
    drop(held);
    drop(SqliteStore::open(&path).expect("reopen"));
    assert!(!living.exists(), "swept once its writer is gone");
}
