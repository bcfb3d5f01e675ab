//! What the configuration file sets up, seen through the API and the CLI: schedules, groups.

use super::*;

/// Schedules from the configuration file and from the CLI: the file's are saved at start and
/// their occurrences run as jobs; one removed from the file is deleted at the next start, one made
/// through the API stays; a bad one refuses the start, naming it.
#[tokio::test(flavor = "multi_thread")]
async fn schedules_from_the_config_file_and_the_cli() {
    let rx = Receiver::start().await;
    rx.script("/tick", vec![Reply::status(200)]);
    let (dir, data) = temp();
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        format!(
            "[[schedules]]\nid = \"tick\"\nevery = \"1s\"\nmissed = \"skip\"\n\
             job = {{ request = {{ method = \"POST\", url = \"{}\" }} }}\n\n\
             [[schedules]]\nid = \"nightly\"\ncron = \"0 3 * * *\"\ntimezone = \"Europe/Berlin\"\n\
             job = {{ request = {{ method = \"POST\", url = \"https://api.example.com/n\" }} }}\n",
            rx.url("/tick")
        ),
    )
    .expect("write config");
    let config = config.to_str().expect("utf-8 path");
    let s = start(&data, &["--config", config], &[]);
    let listed = cli(&s.url, &["schedules"], None);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let ids: Vec<(&str, &str)> = listed.json["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| {
            (
                s["id"].as_str().expect("id"),
                s["source"].as_str().expect("source"),
            )
        })
        .collect();
    assert_eq!(ids, [("nightly", "config"), ("tick", "config")]);
    // Occurrences arrive at the receiver as ordinary jobs, each with its own key.
    eventually("two occurrences arrived", || async {
        rx.count("/tick") >= 2
    })
    .await;
    let keys: std::collections::HashSet<String> = rx
        .received("/tick")
        .iter()
        .filter_map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert!(keys.len() >= 2, "each occurrence has its own key: {keys:?}");
    let made = cli(
        &s.url,
        &[
            "schedules",
            "create",
            "by-hand",
            "--every",
            "1h",
            "--url",
            "https://api.example.com/h",
        ],
        None,
    );
    assert_eq!(made.code, 0, "{}", made.stderr);
    assert_eq!(made.json["source"], "api");
    let shown = cli_text(&s.url, &["schedules", "show", "nightly"], None);
    assert!(
        shown.stdout.contains("cron \"0 3 * * *\" in Europe/Berlin"),
        "{}",
        shown.stdout
    );
    s.terminate();

    // The file without schedules: the file's are deleted, the one made by hand stays.
    std::fs::write(dir.path().join("redial.toml"), "").expect("rewrite config");
    let s = start(&data, &["--config", config], &[]);
    let listed = cli(&s.url, &["schedules"], None);
    let ids: Vec<&str> = listed.json["schedules"]
        .as_array()
        .expect("schedules")
        .iter()
        .map(|s| s["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids, ["by-hand"]);
    s.terminate();

    // A bad schedule refuses the start and says which and why.
    std::fs::write(
        dir.path().join("redial.toml"),
        "[[schedules]]\nid = \"bad\"\ncron = \"0 9 * *\"\njob = { request = { method = \"POST\", url = \"https://api.example.com/\" } }\n",
    )
    .expect("rewrite config");
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(["--config", config])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("schedules[0]") && err.contains("give 5"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn groups_from_the_config_file_the_api_and_the_cli() {
    let rx = Receiver::start().await;
    let (dir, data) = temp();
    let config = dir.path().join("redial.toml");
    std::fs::write(
        &config,
        "[queues.default]\ngroup_concurrency = 2\ngroup_rate = \"10/s\"\n\n\
         [queues.default.groups.vip]\nconcurrency = 5\nweight = 3\n",
    )
    .expect("write config");
    let config_arg = config.to_str().expect("utf-8 path");
    let s = start(&data, &["--config", config_arg], &[]);
    // Jobs for later stay waiting, to be counted.
    for (group, n) in [("acme", 3), ("vip", 2)] {
        for i in 0..n {
            let out = cli(
                &s.url,
                &[
                    "enqueue",
                    "--url",
                    &rx.url("/g"),
                    "--group",
                    group,
                    "--id",
                    &format!("{group}-{i}"),
                    "--run-at",
                    "2999-01-01T00:00:00Z",
                ],
                None,
            );
            assert_eq!(out.code, 0, "{}", out.stderr);
            assert_eq!(out.json["group"], group);
        }
    }
    let shown = cli_text(&s.url, &["jobs", "show", "vip-0"], None);
    assert!(shown.stdout.contains("group     vip"), "{}", shown.stdout);
    let groups = cli(&s.url, &["queues", "groups", "default"], None);
    assert_eq!(groups.code, 0, "{}", groups.stderr);
    assert_eq!(groups.json["total"], 2);
    let rows: Vec<(String, u64, Value, Value, u64)> = groups.json["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            (
                g["group"].as_str().expect("group").to_owned(),
                g["waiting"].as_u64().expect("waiting"),
                g["limits"]["concurrency"].clone(),
                g["limits"]["rate"].clone(),
                g["limits"]["weight"].as_u64().expect("weight"),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "acme".to_owned(),
                3,
                Value::from(2),
                Value::from("10/1s"),
                1
            ),
            ("vip".to_owned(), 2, Value::from(5), Value::from("10/1s"), 3),
        ]
    );
    let text = cli_text(&s.url, &["queues", "groups", "default"], None);
    assert!(
        text.stdout.contains("2 group(s) with work") && text.stdout.contains("vip"),
        "{}",
        text.stdout
    );
    let unknown = cli(&s.url, &["queues", "groups", "nope"], None);
    assert_ne!(unknown.code, 0);
    assert!(unknown.stderr.contains("nope"), "{}", unknown.stderr);
    let queues = cli(&s.url, &["queues"], None);
    let default = queues.json["queues"]
        .as_array()
        .and_then(|q| q.iter().find(|q| q["name"] == "default"))
        .expect("the default queue");
    assert_eq!(default["groups"]["named"]["vip"]["weight"], 3);
    drop(s);

    // A group limit out of range refuses the start, naming the field.
    std::fs::write(&config, "[queues.default.groups.vip]\nweight = 0\n").expect("write");
    let out = Command::new(BIN)
        .args(["serve", "--data-dir"])
        .arg(&data)
        .arg("--config")
        .arg(&config)
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("queues.default.groups.vip.weight must be from 1 to 100"),
        "{err}"
    );
}
