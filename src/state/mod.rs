//! The gateway's SQLite database under `data_dir` (WAL). It holds the schema version now;
//! cooldowns, quotas and logs land here as the scheduler grows.

use std::path::Path;

use rusqlite::Connection;

const SCHEMA_VERSION: i64 = 1;

#[derive(Debug, thiserror::Error)]
#[error("state database {path}: {source}")]
pub struct StateError {
    path: String,
    source: rusqlite::Error,
}

/// Opens (creating if needed) the state database and brings its schema up to date.
pub fn open(path: &Path) -> Result<Connection, StateError> {
    let wrap = |source| StateError { path: path.display().to_string(), source };
    let conn = Connection::open(path).map_err(wrap)?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(wrap)?;
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(wrap)?;
    conn.execute_batch("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);").map_err(wrap)?;
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', ?1) ON CONFLICT(key) DO NOTHING",
        [SCHEMA_VERSION.to_string()],
    )
    .map_err(wrap)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    #[test]
    fn opens_in_wal_mode_and_records_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let conn = super::open(&path).unwrap();
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        drop(conn);
        let conn = super::open(&path).unwrap();
        let v: String = conn.query_row("SELECT value FROM meta WHERE key='schema_version'", [], |r| r.get(0)).unwrap();
        assert_eq!(v, "1");
    }
}
