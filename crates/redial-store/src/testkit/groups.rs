//! Groups (tenants) within a queue: leasing goes round-robin across the groups with due work,
//! the ungrouped jobs taking their turn as one group; a group admission holds is passed over;
//! weights give a group more turns.

use super::{at, get, new_job};
use crate::{
    Admit, Candidate, JobFilter, JobListParams, JobState, LeaseAdmittedParams, LeaseIdsParams,
    NewJob, Store, Verdict,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Inserts `count` jobs of `group` (None: ungrouped) into queue "q", ids `<prefix><n>`, all due
/// at `T0`, in batches.
pub async fn insert_group(store: &Arc<dyn Store>, prefix: &str, group: Option<&str>, count: usize) {
    let mut n = 0;
    while n < count {
        let batch: Vec<NewJob> = (n..count.min(n + 1000))
            .map(|i| NewJob {
                ordering: None,
                group: group.map(str::to_owned),
                ..new_job(&format!("{prefix}{i}"), "q")
            })
            .collect();
        n += batch.len();
        store.job_insert_batch(batch).await.expect("insert");
    }
}

/// Admission for the group cases: holds the groups in `held`, weighs groups as `weights` says,
/// takes everything else.
#[derive(Debug)]
pub struct GroupAdmit {
    pub held: Vec<String>,
    pub weights: BTreeMap<String, u32>,
}

impl Admit for GroupAdmit {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        match &c.group {
            Some(g) if self.held.contains(g) => Verdict::HoldGroup,
            _ => Verdict::Take,
        }
    }

    fn not_leased(&mut self, _c: &Candidate) {}

    fn weight(&self, group: &str) -> u32 {
        self.weights.get(group).copied().unwrap_or(1)
    }
}

/// One lease of up to `max` jobs of queue "q" under `admit`; the group of each job leased, in
/// the order returned (None for an ungrouped job).
pub async fn lease_groups(
    store: &Arc<dyn Store>,
    max: usize,
    admit: GroupAdmit,
) -> Vec<Option<String>> {
    let params = LeaseAdmittedParams {
        queue: "q".into(),
        now: at(1),
        owner: "w".into(),
        lease_until: at(31),
        max,
    };
    let got = store
        .job_lease_admitted(params, Box::new(admit))
        .await
        .expect("lease");
    got.taken.iter().map(|j| j.group.clone()).collect()
}

fn plain() -> GroupAdmit {
    GroupAdmit {
        held: Vec::new(),
        weights: BTreeMap::new(),
    }
}

fn count(groups: &[Option<String>], group: Option<&str>) -> usize {
    groups.iter().filter(|g| g.as_deref() == group).count()
}

/// A big group enqueued first does not keep a small group nor the ungrouped jobs waiting: every
/// lease gives each its turn, and the small group's ten are all leased within the first leases.
pub async fn groups_take_turns(store: Arc<dyn Store>) {
    insert_group(&store, "big", Some("big"), 2000).await;
    insert_group(&store, "small", Some("small"), 10).await;
    insert_group(&store, "plain", None, 6).await;
    let job = get(&store, "small3").await.0;
    assert_eq!(job.group.as_deref(), Some("small"));
    assert_eq!(get(&store, "plain0").await.0.group, None);

    // Three turns (ungrouped, big, small) share each lease of 6.
    let first = lease_groups(&store, 6, plain()).await;
    assert_eq!(first.len(), 6);
    assert_eq!(count(&first, Some("big")), 2, "{first:?}");
    assert_eq!(count(&first, Some("small")), 2, "{first:?}");
    assert_eq!(count(&first, None), 2, "{first:?}");
    let mut seen = first;
    for _ in 0..4 {
        seen.extend(lease_groups(&store, 6, plain()).await);
    }
    // Five leases of six: the small group's ten and the six ungrouped are all out.
    assert_eq!(count(&seen, Some("small")), 10, "{seen:?}");
    assert_eq!(count(&seen, None), 6, "{seen:?}");
    assert_eq!(seen.len(), 30);
    // Then the big group has the queue to itself.
    let next = lease_groups(&store, 6, plain()).await;
    assert_eq!(count(&next, Some("big")), 6, "{next:?}");
    // Jobs within a group go in lease order.
    let big = store
        .job_list(JobListParams {
            filter: JobFilter {
                state: Some(JobState::Running),
                ..JobFilter::default()
            },
            after: None,
            limit: 1000,
        })
        .await
        .expect("list");
    let mut leased_big: Vec<i64> = big
        .jobs
        .iter()
        .filter(|j| j.group.as_deref() == Some("big"))
        .map(|j| j.seq)
        .collect();
    leased_big.sort_unstable();
    let first_big = get(&store, "big0").await.0.seq;
    assert_eq!(leased_big, (first_big..first_big + 20).collect::<Vec<_>>());
}

/// With one job wanted per lease, the turn goes round: each group (and the ungrouped jobs)
/// gets the next lease in rotation, not always the first.
pub async fn one_job_leases_rotate_across_groups(store: Arc<dyn Store>) {
    insert_group(&store, "a", Some("a"), 5).await;
    insert_group(&store, "b", Some("b"), 5).await;
    insert_group(&store, "c", Some("c"), 5).await;
    insert_group(&store, "u", None, 5).await;
    let mut order = Vec::new();
    for _ in 0..8 {
        let got = lease_groups(&store, 1, plain()).await;
        assert_eq!(got.len(), 1);
        order.push(got[0].clone().unwrap_or_else(|| "-".into()));
    }
    assert_eq!(order, ["-", "a", "b", "c", "-", "a", "b", "c"]);
}

/// A group admission holds is passed over for the rest of the lease; the others fill it.
pub async fn a_held_group_is_passed_over(store: Arc<dyn Store>) {
    insert_group(&store, "a", Some("a"), 20).await;
    insert_group(&store, "b", Some("b"), 20).await;
    let admit = GroupAdmit {
        held: vec!["a".into()],
        weights: BTreeMap::new(),
    };
    let got = lease_groups(&store, 8, admit).await;
    assert_eq!(got.len(), 8);
    assert_eq!(count(&got, Some("b")), 8, "{got:?}");
}

/// A group of weight 3 takes three turns for each of a group of weight 1.
pub async fn weights_share_a_lease(store: Arc<dyn Store>) {
    insert_group(&store, "heavy", Some("heavy"), 50).await;
    insert_group(&store, "light", Some("light"), 50).await;
    let admit = GroupAdmit {
        held: Vec::new(),
        weights: BTreeMap::from([("heavy".to_owned(), 3)]),
    };
    let got = lease_groups(&store, 8, admit).await;
    assert_eq!(got.len(), 8);
    assert_eq!(count(&got, Some("heavy")), 6, "{got:?}");
    assert_eq!(count(&got, Some("light")), 2, "{got:?}");
}

/// Grouped jobs scheduled for later are not leased early, and count for the queue's next run
/// time.
pub async fn grouped_jobs_wait_for_their_time(store: Arc<dyn Store>) {
    let later = NewJob {
        ordering: None,
        group: Some("g".into()),
        run_at: at(60),
        ..new_job("later", "q")
    };
    store.job_insert(later).await.expect("insert");
    assert!(lease_groups(&store, 4, plain()).await.is_empty());
    let next = store.job_next_run_at("q", at(1)).await.expect("next");
    assert_eq!(next, Some(at(60)));
}

/// One group holds `big` due jobs, enqueued first; another holds ten. The ten all go in the
/// first lease of 32, and that lease reads the big group's head, not its backlog: it costs
/// about what a lease of a queue with ten jobs costs (the time is printed).
pub async fn a_ten_job_group_goes_in_the_first_lease_behind_a_big_one(
    store: Arc<dyn Store>,
    big: usize,
) {
    let started = std::time::Instant::now();
    insert_group(&store, "big", Some("big"), big).await;
    insert_group(&store, "small", Some("small"), 10).await;
    let inserted = started.elapsed();
    let started = std::time::Instant::now();
    let first = lease_groups(&store, 32, plain()).await;
    let took = started.elapsed();
    assert_eq!(first.len(), 32);
    assert_eq!(count(&first, Some("small")), 10, "{first:?}");
    assert_eq!(count(&first, Some("big")), 22, "{first:?}");
    println!(
        "{big} jobs in one group and 10 in another: inserted in {inserted:?}; the first lease \
         of 32 took {took:?} and held all ten"
    );
}

/// A queue's groups are counted, waiting and running, most waiting first; ungrouped jobs and
/// other queues' are not.
pub async fn groups_are_counted(store: Arc<dyn Store>) {
    insert_group(&store, "a", Some("a"), 3).await;
    insert_group(&store, "b", Some("b"), 5).await;
    insert_group(&store, "u", None, 4).await;
    let other = NewJob {
        ordering: None,
        group: Some("a".into()),
        ..new_job("elsewhere", "other")
    };
    store.job_insert(other).await.expect("insert");
    // One of b's leased: running.
    let b0 = get(&store, "b0").await.0;
    let leased = store
        .job_lease_ids(LeaseIdsParams {
            seqs: vec![b0.seq],
            owner: "w".into(),
            now: at(1),
            lease_until: at(31),
        })
        .await
        .expect("lease");
    assert_eq!(leased.len(), 1);
    let counts = store.group_counts("q", 10).await.expect("counts");
    assert_eq!(counts.total, 2);
    let by: Vec<(String, u64, u64)> = counts
        .groups
        .iter()
        .map(|g| (g.group.clone(), g.waiting, g.running))
        .collect();
    assert_eq!(by, [("b".into(), 4, 1), ("a".into(), 3, 0)]);
    let first = store.group_counts("q", 1).await.expect("counts");
    assert_eq!((first.total, first.groups.len()), (2, 1));
    assert_eq!(first.groups[0].group, "b");
    assert_eq!(
        store.group_counts("none", 10).await.expect("counts").total,
        0
    );
}

/// Groups whose jobs all wait for later (a backoff, a run time) take no turn: a lease of one
/// job goes to the ungrouped jobs, then to the one due group behind fifty waiting ones.
pub async fn groups_with_nothing_due_take_no_turn(store: Arc<dyn Store>) {
    for i in 0..50 {
        let later = NewJob {
            ordering: None,
            group: Some(format!("a{i:02}")),
            run_at: at(3600),
            ..new_job(&format!("later{i}"), "q")
        };
        store.job_insert(later).await.expect("insert");
    }
    insert_group(&store, "z", Some("z"), 1).await;
    insert_group(&store, "u", None, 1).await;
    let first = lease_groups(&store, 1, plain()).await;
    assert_eq!(first, [None]);
    let second = lease_groups(&store, 1, plain()).await;
    assert_eq!(second, [Some("z".to_owned())]);
    assert!(lease_groups(&store, 1, plain()).await.is_empty());
}
