//! Migrations under control (issue 31): `redial migrate` lists and applies the schema's pending
//! migrations (`--dry-run` only lists them), `serve --migrate check` refuses to start while any
//! are pending, naming the command, and no node starts on a schema newer than it knows; on a
//! real SQLite file and a real PostgreSQL server (`DATABASE_URL`, a schema of its own).

use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::{serve_command, within_patience_blocking, Server, BIN, PATIENCE};

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `redial migrate` with `args`, nothing inherited that would choose another database.
fn migrate(args: &[&str]) -> Out {
    let out = Command::new(BIN)
        .arg("migrate")
        .args(args)
        .env_remove("REDIAL_DATABASE_URL")
        .env_remove("REDIAL_DATA_DIR")
        .output()
        .expect("redial migrate runs");
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs `serve` expecting it to refuse to start: its standard error. Fails if it serves.
fn refused(mut cmd: Command) -> String {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("serve starts");
    let exited = within_patience_blocking(|| child.try_wait().expect("wait"));
    let Some(status) = exited else {
        let _ = child.kill();
        panic!(
            "serve did not refuse to start within {} s",
            PATIENCE.as_secs()
        );
    };
    assert!(!status.success(), "serve exited 0");
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().expect("stderr"), &mut err)
        .expect("read stderr");
    err
}

fn user_version(db: &Path) -> i64 {
    rusqlite::Connection::open(db)
        .expect("open")
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .expect("user_version")
}

#[test]
fn sqlite_migrations_are_listed_applied_and_checked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let data_arg = data.to_str().expect("UTF-8");
    let db = data.join("redial.db");

    // A new database: everything pending, nothing written by a dry run.
    let out = migrate(&["--data-dir", data_arg, "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("schema version 0"), "{}", out.stdout);
    assert!(out.stdout.contains("migration 1:"), "{}", out.stdout);
    assert!(
        out.stdout.contains("dry run: nothing changed"),
        "{}",
        out.stdout
    );
    assert!(!db.exists(), "a dry run creates nothing");
    let out = migrate(&["--data-dir", data_arg]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let latest = user_version(&db);
    assert!(
        out.stdout
            .contains(&format!("applied migrations 1 to {latest}")),
        "{}",
        out.stdout
    );
    let out = migrate(&["--data-dir", data_arg]);
    assert!(out.stdout.contains("up to date"), "{}", out.stdout);

    // As the version before left it: the last migration not applied.
    {
        let c = rusqlite::Connection::open(&db).expect("open");
        // As migration 24 left it: every finish's event written by the trigger, one row each.
        c.execute_batch(&format!(
            "DROP TRIGGER jobs_finish_events; ALTER TABLE jobs DROP COLUMN logged; \
             ALTER TABLE events DROP COLUMN batch; \
             CREATE TRIGGER jobs_finish_events AFTER UPDATE OF finished_at ON jobs \
                 WHEN (NEW.state = 'completed' OR NEW.state = 'dead' OR NEW.state = 'cancelled') \
                     AND NEW.state <> OLD.state \
             BEGIN \
                 INSERT INTO events (at, kind, queue, job_id, endpoint, category, reason) \
                 VALUES (NEW.updated_at, 'job.' || NEW.state, NEW.queue, NEW.id, NEW.endpoint, \
                         NEW.category, NEW.last_reason); \
                 INSERT INTO dead_pending (seq) SELECT NEW.seq WHERE NEW.state = 'dead'; \
             END; \
             PRAGMA user_version = {};",
            latest - 1
        ))
        .expect("roll back the last migration");
    }
    let mut cmd = serve_command();
    cmd.args(["--data-dir", data_arg, "--migrate", "check"]);
    let err = refused(cmd);
    assert!(
        err.contains(&format!("schema version {}", latest - 1))
            && err.contains(&format!("redial migrate --data-dir {data_arg}")),
        "{err}"
    );
    assert_eq!(user_version(&db), latest - 1, "check changes nothing");
    let out = migrate(&["--data-dir", data_arg, "--dry-run"]);
    assert!(
        out.stdout.contains(&format!("migration {latest}:"))
            && out
                .stdout
                .contains("ALTER TABLE jobs ADD COLUMN logged INTEGER"),
        "{}",
        out.stdout
    );
    assert_eq!(user_version(&db), latest - 1, "a dry run changes nothing");

    // Applied once; then a node checking starts. Asking again while it runs reads the version
    // and writes nothing (a migration would first have to take the file's lock, which the
    // server holds).
    let out = migrate(&["--data-dir", data_arg]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(user_version(&db), latest);
    let mut cmd = serve_command();
    cmd.args(["--data-dir", data_arg, "--migrate", "check"]);
    let server = Server::start(cmd);
    let out = migrate(&["--data-dir", data_arg]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("up to date"), "{}", out.stdout);
    drop(server);

    // A schema newer than this Redial: no start, no migration.
    rusqlite::Connection::open(&db)
        .expect("open")
        .pragma_update(None, "user_version", latest + 5)
        .expect("set");
    let mut cmd = serve_command();
    cmd.args(["--data-dir", data_arg]);
    let err = refused(cmd);
    assert!(
        err.contains(&format!("schema version {}", latest + 5))
            && err.contains(&format!("newer than this Redial knows ({latest})")),
        "{err}"
    );
    let out = migrate(&["--data-dir", data_arg]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("newer than this Redial knows"),
        "{}",
        out.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_nodes_check_and_one_migrate_upgrades_the_schema() {
    let base = redial_store_postgres::testing::database_url();
    let schema = redial_store_postgres::testing::create_schema(&base)
        .await
        .expect("a schema");
    let url = redial_store_postgres::testing::url_in_schema(&base, &schema);
    let mut config = redial_store_postgres::DbConfig::parse(&base).expect("parses");
    config.pg_mut().options(format!("-c search_path={schema}"));

    let out = migrate(&["--database-url", &url, "--dry-run"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("schema version 0"), "{}", out.stdout);

    // As the version before left it: one migration behind.
    let out = migrate(&["--database-url", &url]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let latest: i32 = {
        let (client, conn) = config.connect().await.expect("connect");
        tokio::spawn(conn);
        client
            .query_one("SELECT version FROM redial_schema", &[])
            .await
            .expect("version")
            .get(0)
    };
    let older = redial_store_postgres::testing::fresh_schema(&base)
        .await
        .expect("a schema");
    redial_store_postgres::testing::migrate_to(&older, latest as usize - 1)
        .await
        .expect("one behind");
    let older_schema = {
        let (client, conn) = older.connect().await.expect("connect");
        tokio::spawn(conn);
        client
            .query_one("SELECT current_schema()", &[])
            .await
            .expect("schema")
            .get::<_, String>(0)
    };
    let older_url = redial_store_postgres::testing::url_in_schema(&base, &older_schema);

    // A node of this version does not migrate a schema in use by default: it refuses, naming
    // the command.
    let mut cmd = serve_command();
    cmd.env("REDIAL_DATABASE_URL", &older_url);
    let err = refused(cmd);
    assert!(
        err.contains(&format!(
            "schema version {} and this Redial needs {latest}",
            latest - 1
        )) && err.contains("redial migrate --database-url"),
        "{err}"
    );
    let out = migrate(&["--database-url", &older_url, "--dry-run"]);
    assert!(
        out.stdout.contains(&format!("migration {latest}:")),
        "{}",
        out.stdout
    );
    let out = migrate(&["--database-url", &older_url]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut cmd = serve_command();
    cmd.env("REDIAL_DATABASE_URL", &older_url);
    drop(Server::start(cmd));

    // Newer than this Redial: refused, naming both versions.
    {
        let (client, conn) = older.connect().await.expect("connect");
        tokio::spawn(conn);
        client
            .execute("UPDATE redial_schema SET version = 99", &[])
            .await
            .expect("set");
    }
    let mut cmd = serve_command();
    cmd.env("REDIAL_DATABASE_URL", &older_url);
    let err = refused(cmd);
    assert!(
        err.contains("schema version 99") && err.contains(&format!("({latest})")),
        "{err}"
    );
}
