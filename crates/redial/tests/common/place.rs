//! A test server's store, SQLite or PostgreSQL, and `redial serve` started on it.

use super::{serve_command, Server};

/// The store a test's server runs on.
#[derive(Clone, Copy, Debug)]
pub enum Db {
    Sqlite,
    Postgres,
}

/// Where a test's server keeps its jobs: a data directory, or a fresh schema of the test
/// PostgreSQL server (`DATABASE_URL`).
pub struct Place {
    pub dir: tempfile::TempDir,
    pub database_url: Option<String>,
}

impl Place {
    pub async fn new(db: Db) -> Place {
        let database_url = match db {
            Db::Sqlite => None,
            Db::Postgres => {
                let base = redial_store_postgres::testing::database_url();
                let schema = redial_store_postgres::testing::create_schema(&base)
                    .await
                    .expect("a schema");
                Some(redial_store_postgres::testing::url_in_schema(
                    &base, &schema,
                ))
            }
        };
        Place {
            dir: tempfile::tempdir().expect("temp dir"),
            database_url,
        }
    }

    /// Starts `redial serve` on this place with `config` (TOML).
    pub fn serve(&self, config: &str) -> Server {
        let file = self.dir.path().join("redial.toml");
        std::fs::write(&file, config).expect("config");
        let mut cmd = serve_command();
        cmd.arg("--config").arg(&file);
        match &self.database_url {
            Some(url) => cmd.env("REDIAL_DATABASE_URL", url),
            None => cmd.arg("--data-dir").arg(self.dir.path().join("data")),
        };
        Server::start(cmd)
    }
}
