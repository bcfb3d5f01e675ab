//! The picker's decisions, without a store.

use super::*;
use crate::JobId;
use redial_policy::Timestamp;

/// Admission by a table: each seq's verdict (Take when not listed); records what is handed back.
#[derive(Default)]
struct Table {
    verdicts: HashMap<i64, Verdict>,
    weights: HashMap<String, u32>,
    asked: Vec<i64>,
    returned: Vec<i64>,
}

impl Admit for Table {
    fn admit(&mut self, c: &Candidate) -> Verdict {
        self.asked.push(c.seq);
        self.verdicts.get(&c.seq).copied().unwrap_or(Verdict::Take)
    }
    fn not_leased(&mut self, c: &Candidate) {
        self.returned.push(c.seq);
    }
    fn weight(&self, group: &str) -> u32 {
        self.weights.get(group).copied().unwrap_or(1)
    }
}

fn cand(seq: i64, endpoint: &str, is_retry: bool) -> Candidate {
    Candidate {
        seq,
        id: JobId(format!("job-{seq}")),
        endpoint: endpoint.into(),
        is_retry,
        run_at: Timestamp::from_unix_millis(0),
        group: None,
    }
}

#[test]
fn verdicts_leave_out_an_endpoint_or_one_kind_of_its_jobs() {
    let mut table = Table::default();
    table.verdicts.insert(1, Verdict::HoldEndpoint);
    table.verdicts.insert(2, Verdict::HoldRetries);
    table.verdicts.insert(3, Verdict::HoldFirsts);
    table.verdicts.insert(4, Verdict::HoldGroup);
    table.verdicts.insert(5, Verdict::Fail);
    let mut choice = Choice::new(&mut table, 10);
    assert_eq!(choice.offer(cand(1, "a", false), ()), Offer::Held);
    assert_eq!(choice.offer(cand(2, "b", true), ()), Offer::Held);
    assert_eq!(choice.offer(cand(3, "c", false), ()), Offer::Held);
    assert_eq!(choice.offer(cand(4, "d", false), ()), Offer::GroupHeld);
    assert_eq!(choice.offer(cand(5, "e", true), ()), Offer::Failed);
    assert_eq!(choice.offer(cand(6, "e", false), ()), Offer::Taken);
    assert!(choice.left_out("a", false) && choice.left_out("a", true));
    assert!(choice.left_out("b", true) && !choice.left_out("b", false));
    assert!(choice.left_out("c", false) && !choice.left_out("c", true));
    assert!(
        !choice.left_out("d", false),
        "a group's hold leaves no endpoint out"
    );
    assert!(!choice.left_out("e", true));
    assert_eq!((choice.taking(), choice.open()), (1, 2));
    choice.forget_holds();
    assert!(!choice.left_out("a", false) && !choice.left_out("b", true));
    assert_eq!(choice.keep(), Vec::<Candidate>::new(), "nothing was leased");
    assert_eq!(
        table.returned,
        vec![5, 6],
        "the open admissions go back at keep"
    );
}

#[test]
fn a_full_choice_counts_only_jobs_to_run() {
    let mut table = Table::default();
    table.verdicts.insert(2, Verdict::Fail);
    let mut choice = Choice::new(&mut table, 2);
    choice.offer(cand(1, "a", false), ());
    choice.offer(cand(2, "a", true), ());
    assert!(!choice.is_full(), "a job to fail takes no slot");
    choice.offer(cand(3, "a", false), ());
    assert!(choice.is_full());
    assert_eq!(choice.open_seqs(), vec![1, 2, 3]);
}

#[test]
fn leasing_hands_back_what_was_not_leased_and_everything_after_an_error() {
    let mut table = Table::default();
    let mut choice = Choice::new(&mut table, 10);
    for seq in 1..=5 {
        choice.offer(cand(seq, "a", false), seq * 10);
    }
    let mut asked = Vec::new();
    let ended = choice.lease_each(|c, extra, fail| {
        assert_eq!(
            extra,
            c.seq * 10,
            "what was read along comes with its candidate"
        );
        assert!(!fail);
        asked.push(c.seq);
        match c.seq {
            2 => Ok(false),
            4 => Err("the disk is full"),
            _ => Ok(true),
        }
    });
    assert_eq!(ended, Err("the disk is full"));
    assert_eq!(asked, vec![1, 2, 3, 4], "nothing is leased after the error");
    assert_eq!(choice.open(), 0);
    let kept: Vec<i64> = choice.keep().iter().map(|c| c.seq).collect();
    assert_eq!(kept, vec![1, 3]);
    assert_eq!(table.returned, vec![2, 4, 5]);
}

#[test]
fn a_choice_dropped_before_it_is_kept_hands_back_every_admission_once() {
    let mut table = Table::default();
    {
        let mut choice = Choice::new(&mut table, 10);
        for seq in 1..=4 {
            choice.offer(cand(seq, "a", false), ());
        }
        choice
            .lease_each(|c, (), _| Ok::<_, ()>(c.seq != 3))
            .expect("no error");
        choice.offer(cand(5, "a", false), ());
        // Dropped here, as on an error path: the lease's transaction did not commit.
    }
    table.returned.sort_unstable();
    assert_eq!(table.returned, vec![1, 2, 3, 4, 5]);
}

#[test]
fn a_kept_choice_hands_nothing_back_on_drop() {
    let mut table = Table::default();
    let mut choice = Choice::new(&mut table, 10);
    choice.offer(cand(1, "a", false), ());
    choice
        .lease_each(|_, (), _| Ok::<_, ()>(true))
        .expect("no error");
    let kept = choice.keep();
    assert_eq!(kept.len(), 1);
    assert!(table.returned.is_empty());
}

#[test]
fn weights_are_at_least_one() {
    let mut table = Table::default();
    table.weights.insert("heavy".into(), 5);
    table.weights.insert("zero".into(), 0);
    let choice: Choice<'_, ()> = Choice::new(&mut table, 1);
    assert_eq!(choice.weight("heavy"), 5);
    assert_eq!(choice.weight("zero"), 1);
    assert_eq!(choice.weight("other"), 1);
}

#[test]
fn turns_start_after_the_last_one_served_and_wrap_once() {
    let groups = |after: &str, upto: Option<&str>| Leg::Groups {
        after: after.into(),
        upto: upto.map(Into::into),
    };
    assert_eq!(legs(None), vec![Leg::Ungrouped, groups("", None)]);
    assert_eq!(legs(Some("")), vec![groups("", None), Leg::Ungrouped]);
    assert_eq!(
        legs(Some("m")),
        vec![groups("m", None), Leg::Ungrouped, groups("", Some("m"))]
    );
    assert!(!past(None, "zzz"));
    assert!(
        !past(Some("m"), "m"),
        "the last group served gets its turn again, last"
    );
    assert!(past(Some("m"), "n"));
}

#[test]
fn later_passes_share_what_is_left_by_weight() {
    assert_eq!(share(10, [1, 1, 3]), Some(2));
    assert_eq!(share(1, [1, 1]), Some(1), "at least one each");
    assert_eq!(share(0, [1]), None);
    assert_eq!(share(5, []), None);
}

#[test]
fn the_next_lease_starts_after_the_last_turn_served_or_looked_at() {
    let g = |s: &str| Some(s.to_owned());
    assert_eq!(next_cursor(false, g("z"), Some(g("b"))), g("b"));
    assert_eq!(
        next_cursor(false, None, Some(None)),
        g(""),
        "the ungrouped jobs' turn"
    );
    assert_eq!(
        next_cursor(true, g("z"), Some(g("b"))),
        g("z"),
        "capped with room: further on"
    );
    assert_eq!(next_cursor(true, None, Some(g("b"))), g("b"));
    assert_eq!(next_cursor(false, g("z"), None), None);
}

#[test]
fn deep_reads_carry_on_from_where_the_last_stopped() {
    let pos = |priority, run_at, seq| ScanPos {
        priority,
        run_at,
        seq,
    };
    let mut memory = PickMemory::default();
    assert_eq!((memory.top, memory.deep), (TOP_SKIPS, DEEP_SKIPS));
    let head_end = pos(0, 10, 5);
    assert_eq!(memory.deep_start("q", head_end), head_end);
    memory.deep_read_ended("q", false, Some(pos(0, 50, 9)));
    assert_eq!(memory.deep_start("q", head_end), pos(0, 50, 9));
    assert_eq!(
        memory.deep_start("q", pos(0, 60, 1)),
        pos(0, 60, 1),
        "a head read that went further wins"
    );
    assert_eq!(memory.deep_start("other", head_end), head_end);
    memory.deep_read_ended("q", true, Some(pos(0, 70, 1)));
    assert_eq!(
        memory.deep_start("q", head_end),
        head_end,
        "ran out: from the head's end"
    );
    memory.deep_read_ended("q", false, Some(pos(0, 50, 9)));
    memory.set_bounds(0, 3);
    assert_eq!((memory.top, memory.deep), (1, 3));
    assert_eq!(
        memory.deep_start("q", head_end),
        head_end,
        "new bounds forget"
    );
    assert_eq!(memory.cursor("q"), None);
    memory.set_cursor("q", None);
    assert_eq!(memory.cursor("q"), None);
    memory.set_cursor("q", Some("g".into()));
    assert_eq!(memory.cursor("q"), Some("g"));
}
