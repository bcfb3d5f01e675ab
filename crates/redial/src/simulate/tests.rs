//! The simulator against workloads whose outcome is known: what the policy promises (a 400 is
//! never retried, a 429 with Retry-After pauses the endpoint, an outage does not become a retry
//! storm) shows in its figures, the same seed gives the same figures, and a bad workload is
//! refused naming its field.

use super::workload::{parse, read};
use super::*;
use redial_simulate::{simulate, Setup, Tally};

fn defaults(workload: &Workload) -> Setup {
    candidate(None, workload)
        .expect("the defaults resolve")
        .setup
}

fn run(toml: &str) -> Vec<Tally> {
    let w = parse(toml).expect("a valid workload");
    simulate(&w, &defaults(&w), 7)
}

fn dead(t: &Tally, category: &str) -> u64 {
    t.dead.get(category).copied().unwrap_or(0)
}

#[test]
fn a_healthy_endpoint_completes_every_job_with_one_request_each() {
    let t = &run("[[endpoint]]\nname = \"ok\"\njobs = 1000\n")[0];
    assert_eq!(
        (t.completed, t.requests, t.refused, t.left),
        (1000, 1000, 0, 0)
    );
    assert!(t.dead.is_empty(), "{:?}", t.dead);
    assert_eq!(t.completion_ms.len(), 1000);
    assert!(t.drain.is_some());
}

#[test]
fn a_400_is_never_retried() {
    let t = &run("[[endpoint]]\nname = \"bad\"\njobs = 2000\n\
         [[endpoint.failure]]\nanswer = \"400\"\nratio = 0.1\n")[0];
    let permanent = dead(t, "permanent");
    assert!(
        (100..=300).contains(&permanent),
        "about a tenth of 2000: {permanent}"
    );
    assert_eq!(t.completed + permanent, 2000);
    assert_eq!(t.requests, 2000, "one request a job: none retried");
}

#[test]
fn a_failure_once_is_retried_and_completes() {
    let t = &run("[[endpoint]]\nname = \"flaky\"\njobs = 1000\n\
         [[endpoint.failure]]\nanswer = \"connection_reset\"\nratio = 0.05\nrepeat = \"once\"\n")
        [0];
    assert_eq!(t.completed, 1000, "{:?}", t.dead);
    assert!(t.requests > 1000 && t.requests <= 1100, "{}", t.requests);
}

#[test]
fn a_rate_limit_with_retry_after_drains_at_its_rate_and_pauses_instead_of_hammering() {
    // 300 jobs against 10 a second (a bucket of 10): 29 s at the least.
    let t = &run("[[endpoint]]\nname = \"limited\"\njobs = 300\n\
         limit = { kind = \"token_bucket\", rate = \"10/s\", burst = 10, retry_after = true }\n")
        [0];
    assert_eq!(t.completed, 300, "{:?}", t.dead);
    let drain = t.drain.expect("drained");
    assert!(
        drain >= Duration::from_secs(29) && drain <= Duration::from_secs(45),
        "{drain:?}"
    );
    // Each refusal pauses the whole endpoint until the time it gave: refusals stay a small
    // share of the requests, not one per job per second.
    assert!(t.refused < 100, "{} refused", t.refused);
    assert_eq!(t.requests, 300 + t.refused);
}

#[test]
fn an_outage_does_not_become_a_retry_storm_and_its_jobs_complete_after_it() {
    // Two minutes of bare 503s, 1000 jobs arriving 10 a second through it.
    let t = &run(
        "[[endpoint]]\nname = \"down\"\njobs = 1000\narrival = { rate = \"10/s\" }\n\
         [[endpoint.outage]]\nfrom = \"10s\"\nuntil = \"2m10s\"\n",
    )[0];
    assert_eq!(t.completed + t.dead.values().sum::<u64>(), 1000);
    // A retry loop without protection sends every job's attempts into the outage: at least
    // 1200 (each job once) and, with 10 attempts, up to 10 times that. The breaker and the
    // budget keep it near the jobs' own count.
    let in_outage: u32 = t.per_second[10..130].iter().sum();
    assert!(in_outage < 600, "{in_outage} requests during the outage");
    assert!(
        t.completed >= 900,
        "{} completed, {:?}",
        t.completed,
        t.dead
    );
}

#[test]
fn the_same_seed_gives_the_same_figures_and_another_seed_other_draws() {
    let toml = "[[endpoint]]\nname = \"mixed\"\njobs = 500\nlatency = \"10ms\"\n\
        latency_max = \"300ms\"\n\
        [[endpoint.failure]]\nanswer = \"500\"\nratio = 0.2\nrepeat = \"once\"\n\
        [[endpoint.failure]]\nanswer = \"timeout\"\nratio = 0.05\nrepeat = \"always\"\n";
    let w = parse(toml).expect("valid");
    let setup = defaults(&w);
    let a = simulate(&w, &setup, 11);
    let b = simulate(&w, &setup, 11);
    assert_eq!(a, b);
    let c = simulate(&w, &setup, 12);
    assert_ne!(a[0].completion_ms, c[0].completion_ms);
}

#[test]
fn two_endpoints_in_one_queue_share_its_concurrency_and_are_counted_apart() {
    let tallies = run("[[endpoint]]\nname = \"a\"\njobs = 100\n\
         [[endpoint]]\nname = \"b\"\njobs = 50\n\
         [[endpoint.failure]]\nanswer = \"404\"\nratio = 1.0\n");
    assert_eq!(tallies[0].completed, 100);
    assert_eq!(dead(&tallies[1], "permanent"), 50);
    let total = total_of(&tallies);
    assert_eq!((total.jobs, total.requests), (150, 150));
}

#[test]
fn a_bad_workload_is_refused_naming_its_field() {
    let cases = [
        ("", "no endpoint"),
        ("[[endpoint]]\nname = \"x\"\njobs = 0\n", "jobs must be 1"),
        (
            "[[endpoint]]\nname = \"x\"\njobs = 1\n[[endpoint.failure]]\nanswer = \"600\"\nratio = 0.1\n",
            "failure 1: answer: \"600\" is not an answer",
        ),
        (
            "[[endpoint]]\nname = \"x\"\njobs = 1\n[[endpoint.failure]]\nanswer = \"500\"\nratio = 0.7\n\
             [[endpoint.failure]]\nanswer = \"400\"\nratio = 0.7\n",
            "add up to more than 1",
        ),
        (
            "[[endpoint]]\nname = \"x\"\njobs = 1\nlimit = { kind = \"leaky\" }\n",
            "limit.kind \"leaky\" is not one",
        ),
        (
            "[[endpoint]]\nname = \"x\"\njobs = 1\nlimit = { kind = \"concurrency\", limit = 5 }\n",
            "a concurrency limit needs hold",
        ),
        (
            "[[endpoint]]\nname = \"x\"\njobs = 1\nlimit = { kind = \"fixed_window\", limit = 5, hold = \"1s\" }\n",
            "limit.hold goes with kind = \"concurrency\" only",
        ),
        (
            "[[endpoint]]\nname = \"x\"\njobs = 1\n[[endpoint.outage]]\nfrom = \"2m\"\nuntil = \"1m\"\n",
            "outage 1: until must be after from",
        ),
        (
            "[[endpoint]]\nname = \"x\"\njobs = 1\nlatency = \"fast\"\n",
            "endpoint 1 (x): latency",
        ),
        ("[[endpoint]]\nname = \"x\"\njobs = 1\ncolour = 1\n", "unknown field `colour`"),
    ];
    for (toml, want) in cases {
        let err = parse(toml).expect_err(toml).to_string();
        assert!(err.contains(want), "{toml:?}: {err}");
    }
}

#[test]
fn a_million_jobs_simulate_in_seconds() {
    // Measured, not asserted tightly: the issue asks for seconds; a debug build on a loaded
    // machine gets a wide margin.
    let w =
        parse("[[endpoint]]\nname = \"big\"\njobs = 1000000\nlatency = \"20ms\"\n").expect("valid");
    let setup = defaults(&w);
    let started = Instant::now();
    let t = simulate(&w, &setup, 1);
    let took = started.elapsed();
    eprintln!("a million jobs simulated in {took:?}");
    assert_eq!(t[0].completed, 1_000_000);
    assert!(took < Duration::from_secs(120), "{took:?}");
}

#[test]
fn the_worked_example_in_the_docs_runs_as_shown() {
    // docs/simulate.md and the README show this comparison; its figures are the seed's.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/simulate");
    let w = read(&dir.join("stripe.toml")).expect("the example workload");
    let seed = w.seed.expect("the example fixes its seed");
    let current = candidate(Some(&dir.join("current.toml")), &w).expect("current.toml");
    let fewer = candidate(Some(&dir.join("fewer-attempts.toml")), &w).expect("fewer-attempts");
    let a = &simulate(&w, &current.setup, seed)[0];
    let b = &simulate(&w, &fewer.setup, seed)[0];
    // Its hopeless jobs end by their deadline while others wait around them: each once (one
    // ended twice, and the count of jobs left underflowed, before the lease passed over the
    // jobs a deadline had ended).
    assert_eq!((a.requests, a.completed, a.left), (11357, 9969, 0));
    assert_eq!(dead(a, "deadline_exceeded"), 31);
    assert_eq!((b.requests, b.completed, b.left), (11331, 9967, 0));
    assert_eq!(
        (dead(b, "deadline_exceeded"), dead(b, "transient_exhausted")),
        (17, 16)
    );
}

#[test]
fn the_workloads_in_the_docs_are_valid() {
    // docs/simulate.md fences its workload files as "toml workload" (its plain "toml" blocks
    // are configurations, which the config check's test reads).
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/simulate.md");
    let text = std::fs::read_to_string(page).expect("docs/simulate.md");
    let blocks: Vec<&str> = text
        .split("```toml workload\n")
        .skip(1)
        .map(|b| &b[..b.find("```").expect("block end")])
        .collect();
    assert!(!blocks.is_empty());
    for block in blocks {
        parse(block).unwrap_or_else(|e| panic!("{e}\n{block}"));
    }
}

/// A history where the endpoint answered 503 for its first 10 s, then 200: replayed, the jobs
/// meet the outage where it was and complete after it; a job refused for its own sake is dead
/// at once.
#[test]
fn a_replayed_outage_comes_back_where_it_was() {
    use redial_simulate::{Answer, History, PastAnswer, PastJob};
    let ms = Duration::from_millis;
    let answers = (0..200)
        .map(|i| PastAnswer {
            at: ms(i * 100),
            answer: (i < 100).then_some(Answer::Status(503)),
            took: ms(20),
        })
        .collect();
    let jobs = (0..50)
        .map(|i| PastJob {
            at: ms(i * 10),
            deadline: None,
            method: redial_policy::Method::Post,
            idempotency_key: true,
            fails_with: (i == 0).then_some(Answer::Status(422)),
        })
        .collect();
    let mut w = parse("[[endpoint]]\nname = \"past\"\njobs = 50\n").expect("a workload");
    w.endpoints[0].history = Some(History { jobs, answers });
    let t = &simulate(&w, &defaults(&w), 7)[0];
    assert_eq!(
        (t.completed, dead(t, "permanent"), t.left),
        (49, 1, 0),
        "{t:?}"
    );
    let drain = t.drain.expect("drained");
    assert!(drain >= Duration::from_secs(10), "{drain:?}");
    // Every job met the outage first; retries went on within it, but not 50 a round.
    assert!(t.refused >= 49, "{t:?}");
    assert!(t.requests < 49 * 10, "{t:?}");
}

/// Commit-then-fail: the endpoint charges, then the answer is lost. With an idempotency key the
/// retry is answered from the first charge: nothing is done twice. Without one, every retried
/// lost answer is a second charge.
#[test]
fn a_lost_answer_is_done_twice_only_without_an_idempotency_key() {
    let workload = |key: bool| {
        format!(
            "[[endpoint]]\nname = \"charges\"\njobs = 2000\nmethod = \"POST\"\n\
             idempotency_key = {key}\n\
             [[endpoint.failure]]\nanswer = \"timeout\"\nratio = 0.1\nrepeat = \"once\"\n\
             commit = true\n"
        )
    };
    let with_key = &run(&workload(true))[0];
    assert_eq!((with_key.completed, with_key.duplicates), (2000, 0));
    let without = &run(&workload(false))[0];
    assert_eq!(without.completed, 2000);
    // About a tenth of the jobs lost their answer once: each retry charged again.
    assert!(
        (150..=250).contains(&without.duplicates),
        "{}",
        without.duplicates
    );
    // A PUT is idempotent: its repeat is not a second effect.
    let put = workload(false).replace("POST", "PUT");
    assert_eq!(run(&put)[0].duplicates, 0);
    // A refused connection reached nothing that could do the work.
    let err = parse(
        "[[endpoint]]\nname = \"x\"\njobs = 1\n\
         [[endpoint.failure]]\nanswer = \"connection_refused\"\nratio = 0.1\ncommit = true\n",
    )
    .expect_err("refused");
    assert!(err.to_string().contains("failure 1: commit"), "{err}");
}

/// Issue 54, observation 5: jobs that fail on every attempt while their endpoint answers the
/// others (a tenth of 2,000 POSTs time out every time) used to be held by quarantine for good:
/// once the healthy jobs were done, their retries alone failed for `quarantine_after`, and every
/// failed probe held its job with its counters unchanged (189 jobs left after 30 virtual days).
/// A job that failed, and failed again after the endpoint answered another a success, fails for
/// its own sake: its failures count, and it lands in its dead-letter category. Those whose every
/// failure came after the last success cannot be told from an endpoint that went down then: they
/// are held until a success comes, or their deadline.
#[test]
fn jobs_that_always_fail_on_a_healthy_endpoint_end_dead_not_held_by_quarantine() {
    let workload = |deadline: &str| {
        format!(
            "[[endpoint]]\nname = \"charges\"\njobs = 2000\nmethod = \"POST\"\n\
             idempotency_key = true\n{deadline}\
             [[endpoint.failure]]\nanswer = \"timeout\"\nratio = 0.1\nrepeat = \"always\"\n"
        )
    };
    let t = &run(&workload(""))[0];
    let died = dead(t, "unknown_exhausted") + dead(t, "transient_exhausted");
    let figures = (t.completed, died, t.left);
    assert_eq!(t.completed + died + t.left, 2000, "{figures:?}");
    assert!(died >= 150, "most of the tenth dead: {figures:?}");
    assert!(t.left <= 40, "held (was 189): {figures:?}");
    println!("2,000 POSTs, a tenth always timing out: (completed, dead, held) {figures:?}");
    // With a deadline, every job ends.
    let t = &run(&workload("deadline = \"2h\"\n"))[0];
    let figures = (t.completed, t.dead.clone(), t.left);
    assert_eq!(t.left, 0, "{figures:?}");
    assert_eq!(
        t.completed + t.dead.values().sum::<u64>(),
        2000,
        "{figures:?}"
    );
    let drain = t.drain.expect("drained");
    assert!(drain <= Duration::from_secs(2 * 3600 + 60), "{drain:?}");
}

/// Issue 54, observation 0: nginx `limit_req` as shipped refuses with a bare 503. While the
/// endpoint answers others, those 503s are a limiter's refusals (the pace learns from them, the
/// refused jobs wait for it without spending attempts), so 1,000 jobs drain near the limiter's
/// rate as against bare 429s; before, they were an outage (breaker, suspicion, backoff): more
/// than 120 s and 1,908 refused from outside.
#[test]
fn a_limiter_answering_bare_503s_is_met_at_its_rate_as_one_answering_429s() {
    let workload = |status: u16| {
        format!(
            "[[endpoint]]\nname = \"nginx\"\njobs = 1000\nmethod = \"GET\"\n\
             latency = \"1ms\"\n\
             limit = {{ kind = \"token_bucket\", rate = \"50/s\", burst = 10, status = {status} }}\n"
        )
    };
    let at_429 = &run(&workload(429))[0];
    let at_503 = &run(&workload(503))[0];
    for (status, t) in [(429, at_429), (503, at_503)] {
        let drain = t.drain.expect("drained").as_secs_f64();
        println!(
            "bare {status}s, 50/s burst 10, 1,000 jobs: drain {drain:.1} s, {} refused, {} completed",
            t.refused, t.completed
        );
        assert_eq!(t.completed, 1000, "{status}: {:?}", t.dead);
        assert!(drain <= 19.8 * 1.15, "{status}: drain {drain}");
        assert!(t.refused <= 100, "{status}: {} refused", t.refused);
    }
}

/// A concurrency limit (issue 54's last limiter kind): at most 5 in flight, each answered in
/// 100 ms, so 50 a second at most; its refusals are bare 429s. Redial, whose queue would send 64
/// at once, learns a pace from the refusals and drains within the issue's goals (21.2 s and 14
/// refused of 1,000 at the seed used).
#[test]
fn a_concurrency_limit_is_met_near_what_it_lets_through() {
    let t = &run(
        "[[endpoint]]\nname = \"crm\"\njobs = 1000\nmethod = \"GET\"\nlatency = \"1ms\"\n\
         limit = { kind = \"concurrency\", limit = 5, hold = \"100ms\" }\n",
    )[0];
    let drain = t.drain.expect("drained").as_secs_f64();
    println!(
        "concurrency 5 x 100 ms, 1,000 jobs: drain {drain:.1} s, {} refused",
        t.refused
    );
    assert_eq!(t.completed, 1000, "{:?}", t.dead);
    assert!(drain <= 20.0 * 1.15, "drain {drain}");
    assert!(t.refused <= 100, "{} refused", t.refused);
}

/// An endpoint whose bare 503s come at random (a bad node behind a balancer), not from a
/// limiter, answering others meanwhile: under half, they never look like a limiter's and are
/// failures, retried as before (2.3 s for 2,000 jobs before and after); at half or more a trial
/// finds that they do not follow the pace, at the cost of about a second at the pace of what
/// went through (before: 2.3 s whatever the ratio).
#[test]
fn random_bare_503s_on_a_live_endpoint_are_not_taken_for_a_limiter() {
    for (ratio, most) in [("0.05", 3.0), ("0.3", 3.0), ("0.5", 6.0), ("0.9", 8.0)] {
        let t = &run(&format!(
            "[[endpoint]]\nname = \"flaky\"\njobs = 2000\nmethod = \"GET\"\n\
             latency = \"5ms\"\n\
             [[endpoint.failure]]\nanswer = \"503\"\nratio = {ratio}\nrepeat = \"once\"\n"
        ))[0];
        let drain = t.drain.expect("drained").as_secs_f64();
        println!(
            "random 503s ({ratio}), 2,000 jobs: drain {drain:.1} s, {} requests, {} completed",
            t.requests, t.completed
        );
        assert_eq!(t.completed, 2000, "{ratio}: {:?}", t.dead);
        assert!(drain <= most, "{ratio}: drain {drain}");
    }
}

/// Issue 54, observation 4: a leaky bucket (50/s, burst 10) whose 429s say `Retry-After: 1`
/// for a 20 ms wait held Redial to one burst a second (600 jobs in 56-63 s against 12 s
/// ideal). An early question tells a bucket that rounds its waits up from a fixed window that
/// means them: the bucket is met at its rate, and a window with the same whole-second
/// `Retry-After` (express-rate-limit) still waits for its end. A moving window whose quota
/// resets are whole epoch seconds is asked about before them (`endpoint/rounded_reset.rs`).
#[test]
fn a_bucket_that_rounds_its_retry_after_up_is_met_at_its_rate_and_a_window_is_not_rushed() {
    let run_one = |limit: &str, jobs: u64| {
        let t = run(&format!(
            "[[endpoint]]\nname = \"x\"\njobs = {jobs}\nmethod = \"GET\"\nlatency = \"1ms\"\n\
             limit = {{ {limit} }}\n"
        ))[0]
            .clone();
        let drain = t.drain.expect("drained").as_secs_f64();
        println!(
            "{limit}, {jobs} jobs: drain {drain:.1} s, {} refused",
            t.refused
        );
        assert_eq!(t.completed, jobs, "{limit}: {:?}", t.dead);
        (drain, t.refused)
    };
    let (drain, refused) = run_one(
        "kind = \"token_bucket\", rate = \"50/s\", burst = 10, retry_after = true",
        600,
    );
    assert!(drain <= 1.15 * 590.0 / 50.0, "{drain}");
    assert!(refused <= 30, "{refused}");
    let (drain, refused) = run_one(
        "kind = \"fixed_window\", limit = 50, window = \"1s\", retry_after = true, whole_seconds = true",
        1000,
    );
    assert!(drain <= 1.15 * 20.0 + 1.0, "{drain}");
    assert!(refused <= 50, "{refused}");
    let (drain, refused) = run_one(
        "kind = \"fixed_window\", limit = 50, window = \"1s\", retry_after = true, quota_headers = true, whole_seconds = true",
        1000,
    );
    assert!(drain <= 1.15 * 20.0 + 1.0, "{drain}");
    assert!(refused <= 50, "{refused}");
    // Issue 54, observation 4: a moving window whose quota headers give the reset in epoch
    // seconds, rounded up (flask-limiter's): 23 s from outside when the reset was obeyed as
    // the window's end.
    let (drain, refused) = run_one(
        "kind = \"sliding_log\", limit = 50, window = \"1s\", retry_after = true, quota_headers = true, whole_seconds = true",
        600,
    );
    assert!(drain <= 1.15 * 12.0, "{drain}");
    assert!(refused <= 30, "{refused}");
}
