//! The shared store behaviour suite, against a real PostgreSQL server: `DATABASE_URL`, which
//! `./scripts/test` sets to a throwaway server it starts when none is given. Each test works in a
//! schema of its own.

use redial_store_postgres::PgStore;
use std::sync::Arc;

async fn fresh() -> Arc<dyn redial_store::Store> {
    Arc::new(redial_store_postgres::testing::fresh_test_store(4).await)
}

redial_store::store_suite!(fresh());

/// No foreign key deletes a job's attempts: every statement that deletes jobs does. After the
/// suite's deleting cases, no attempt is left without its job.
#[tokio::test]
async fn deleting_jobs_deletes_their_attempts() {
    let config = redial_store_postgres::testing::fresh_test_schema().await;
    let store: Arc<dyn redial_store::Store> = Arc::new(
        PgStore::connect_with(config.clone(), 4)
            .await
            .expect("connect store"),
    );
    redial_store::testkit::dismiss_dead_job(store.clone()).await;
    redial_store::testkit::bulk_dead_letter_actions(store.clone()).await;
    redial_store::testkit::cleanup_respects_retention(store.clone()).await;
    let (client, conn) = config.connect().await.expect("connect to check");
    tokio::spawn(conn);
    let count = |sql: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(sql, &[])
                .await
                .expect("count")
                .get::<_, i64>(0)
        }
    };
    assert!(
        count("SELECT count(*) FROM attempts").await > 0,
        "some kept"
    );
    assert_eq!(
        count(
            "SELECT count(*) FROM attempts a WHERE NOT EXISTS \
             (SELECT 1 FROM jobs j WHERE j.seq = a.job_seq)"
        )
        .await,
        0,
        "attempts left without their job"
    );
}

/// What [`Counting`] admitted and what it was handed back.
#[derive(Default)]
struct Counted {
    admitted: Vec<String>,
    handed_back: Vec<String>,
}

/// Admits every job, keeping count.
struct Counting(Arc<std::sync::Mutex<Counted>>);

impl redial_store::Admit for Counting {
    fn admit(&mut self, c: &redial_store::Candidate) -> redial_store::Verdict {
        self.0.lock().expect("lock").admitted.push(c.id.0.clone());
        redial_store::Verdict::Take
    }

    fn not_leased(&mut self, c: &redial_store::Candidate) {
        self.0
            .lock()
            .expect("lock")
            .handed_back
            .push(c.id.0.clone());
    }
}

/// The lease statement and its COMMIT go out together. When the statement fails, the COMMIT
/// ends an aborted transaction: nothing is leased, every admission is handed back, and the
/// connection leases again once the fault is gone.
#[tokio::test]
async fn a_failed_lease_statement_leases_nothing_and_hands_back_every_admission() {
    use redial_store::testkit::{at, new_job};
    use redial_store::{JobId, JobState, LeaseAdmittedParams};
    let config = redial_store_postgres::testing::fresh_test_schema().await;
    // One connection: the one that failed is the one that leases again.
    let store: Arc<dyn redial_store::Store> = Arc::new(
        PgStore::connect_with(config.clone(), 1)
            .await
            .expect("connect store"),
    );
    for i in 0..5 {
        store
            .job_insert(new_job(&format!("j{i}"), "q"))
            .await
            .expect("insert");
    }
    let (client, conn) = config.connect().await.expect("connect to set the fault");
    tokio::spawn(conn);
    client
        .batch_execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
               $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
             CREATE TRIGGER refuse_leases BEFORE UPDATE ON jobs FOR EACH ROW \
               WHEN (NEW.lease_owner IS NOT NULL) EXECUTE FUNCTION refuse();",
        )
        .await
        .expect("set the fault");
    let params = || LeaseAdmittedParams {
        queue: "q".into(),
        now: at(0),
        owner: "w0".into(),
        lease_until: at(30),
        max: 3,
    };
    let counted = Arc::new(std::sync::Mutex::new(Counted::default()));
    let failed = store
        .job_lease_admitted(params(), Box::new(Counting(counted.clone())))
        .await;
    assert!(failed.is_err(), "the lease statement failed: {failed:?}");
    {
        let c = counted.lock().expect("lock");
        assert_eq!(c.admitted.len(), 3);
        let mut back = c.handed_back.clone();
        back.sort();
        assert_eq!(back, c.admitted, "every admission handed back");
    }
    for i in 0..5 {
        let (job, _) = store
            .job_get(&JobId(format!("j{i}")))
            .await
            .expect("get")
            .expect("kept");
        assert_eq!(job.state, JobState::Ready, "j{i} not leased");
    }
    client
        .batch_execute("DROP TRIGGER refuse_leases ON jobs")
        .await
        .expect("lift the fault");
    let counted = Arc::new(std::sync::Mutex::new(Counted::default()));
    let lease = store
        .job_lease_admitted(params(), Box::new(Counting(counted.clone())))
        .await
        .expect("leases again");
    assert_eq!(lease.taken.len(), 3);
    assert!(counted.lock().expect("lock").handed_back.is_empty());
}

/// Completions owing callback deliveries, recorded at once, are recorded in batch statements:
/// none of them fails and sends its attempts the one-attempt way (one did, for every batch,
/// from the ordering keys' columns until 2026-12-07: 10x slower with callbacks, and correct, so
/// no other test saw it).
#[tokio::test]
async fn completions_owing_deliveries_are_recorded_in_batches() {
    let store = Arc::new(redial_store_postgres::testing::fresh_test_store(4).await);
    redial_store::testkit::deliveries_owed_by_completions_recorded_at_once(store.clone()).await;
    assert_eq!(store.batch_record_failures(), 0, "batch statements failed");
}
