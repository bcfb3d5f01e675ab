//! Where a database's schema stands: its version, this Redial's, the migrations pending.

/// Where a database's schema stands against the schema this Redial knows: its version, the
/// latest, and what each pending migration would do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaStatus {
    /// 0 for a database that holds no Redial schema yet.
    pub version: usize,
    pub latest: usize,
    pub pending: Vec<PendingMigration>,
}

impl SchemaStatus {
    /// The status of a database at `version`, against `migrations` (each one's SQL).
    pub fn of(version: usize, migrations: &[&str]) -> SchemaStatus {
        SchemaStatus {
            version,
            latest: migrations.len(),
            pending: migrations
                .iter()
                .enumerate()
                .skip(version)
                .map(|(i, sql)| PendingMigration {
                    version: i + 1,
                    statements: statements(sql),
                })
                .collect(),
        }
    }

    /// Whether the database holds a schema newer than this Redial knows.
    pub fn is_newer(&self) -> bool {
        self.version > self.latest
    }
}

/// One migration still to apply: its version and the first line of each statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingMigration {
    pub version: usize,
    pub statements: Vec<String>,
}

/// The first line of each statement in `sql` (lines that begin with a statement's keyword),
/// cut to 120 characters: enough to see what a migration changes.
fn statements(sql: &str) -> Vec<String> {
    const KEYWORDS: [&str; 9] = [
        "CREATE ", "ALTER ", "DROP ", "INSERT ", "UPDATE ", "DELETE ", "ANALYZE", "DO ", "PRAGMA ",
    ];
    sql.lines()
        .map(str::trim)
        .filter(|l| KEYWORDS.iter().any(|k| l.starts_with(k)))
        .map(|l| {
            let l = l.trim_end_matches(['(', ';']).trim_end();
            if l.chars().count() > 120 {
                let mut cut: String = l.chars().take(119).collect();
                cut.push('…');
                cut
            } else {
                l.to_owned()
            }
        })
        .collect()
}
