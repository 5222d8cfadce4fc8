//! The database's schema: `open` creates the tables and brings a file an older version
//! wrote up to date; `read_all` reads the state back once at start.

use std::path::Path;

use rusqlite::Connection;

use super::{StateError, audit, logs, responses};
use crate::config::{KeyName, SourceName};
use crate::scheduler::{Account, Binding, Loaded, Period, QuotaKey, SlotHealth, SlotKey, Stats, UnixMs, Usage, Window};

const SCHEMA_VERSION: i64 = 8;

/// Opens (creating if needed) the state database and brings its schema up to date.
pub fn open(path: &Path) -> Result<Connection, StateError> {
    let wrap = |source| StateError::Database { path: path.display().to_string(), source };
    // SQLite gives the -wal and -shm files the database file's mode: create it 600 first,
    // and bring files an older version wrote 644 to 600.
    let file_error = |file: &Path| {
        let path = file.display().to_string();
        move |source| StateError::File { path, source }
    };
    if !path.exists() {
        crate::private_fs::open(path, true).map_err(file_error(path))?;
    }
    let beside = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        std::path::PathBuf::from(name)
    };
    for file in [path.to_path_buf(), beside("-wal"), beside("-shm")] {
        crate::private_fs::restrict(&file).map_err(file_error(&file))?;
    }
    let conn = Connection::open(path).map_err(wrap)?;
    conn.pragma_update(None, "journal_mode", "WAL").map_err(wrap)?;
    conn.pragma_update(None, "synchronous", "NORMAL").map_err(wrap)?;
    // 16 MiB of page cache: the log's index pages stay in memory instead of being re-read.
    conn.pragma_update(None, "cache_size", -16_000).map_err(wrap)?;
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS cooldowns (
             source TEXT NOT NULL, model TEXT NOT NULL, failures INTEGER NOT NULL,
             window_start INTEGER, window_until INTEGER, no_probe_before INTEGER, PRIMARY KEY (source, model));
         CREATE TABLE IF NOT EXISTS scorer_stats (
             source TEXT NOT NULL, model TEXT NOT NULL, total INTEGER NOT NULL, successes INTEGER NOT NULL,
             recent INTEGER NOT NULL, recent_successes REAL NOT NULL, avg_connect_ms REAL NOT NULL,
             avg_first_byte_ms REAL NOT NULL, last_updated INTEGER NOT NULL, PRIMARY KEY (source, model));
         CREATE TABLE IF NOT EXISTS affinity (
             fingerprint TEXT PRIMARY KEY, source TEXT NOT NULL, model TEXT NOT NULL, last_used INTEGER NOT NULL);
         CREATE TABLE IF NOT EXISTS quota_usage (
             source TEXT NOT NULL, model TEXT NOT NULL, period TEXT NOT NULL, window_start INTEGER NOT NULL,
             tokens INTEGER NOT NULL, PRIMARY KEY (source, model, period));
         CREATE TABLE IF NOT EXISTS key_usage (
             key TEXT NOT NULL, period TEXT NOT NULL, window_start INTEGER NOT NULL, tokens INTEGER NOT NULL,
             PRIMARY KEY (key, period));
         CREATE TABLE IF NOT EXISTS budget_usage (
             account TEXT NOT NULL, period TEXT NOT NULL, window_start INTEGER NOT NULL, pico INTEGER NOT NULL,
             PRIMARY KEY (account, period));",
    )
    .map_err(wrap)?;
    add_column(&conn, "cooldowns", "no_probe_before", "INTEGER").map_err(wrap)?;
    logs::migrate(&conn).map_err(wrap)?;
    responses::migrate(&conn).map_err(wrap)?;
    audit::migrate(&conn).map_err(wrap)?;
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', ?1) ON CONFLICT(key) DO UPDATE SET value = ?1",
        [SCHEMA_VERSION.to_string()],
    )
    .map_err(wrap)?;
    Ok(conn)
}

/// Adds a column a table of an earlier schema lacks.
pub(crate) fn add_column(conn: &Connection, table: &str, column: &str, kind: &str) -> rusqlite::Result<()> {
    let present: i64 =
        conn.query_row(&format!("SELECT COUNT(*) FROM pragma_table_info('{table}') WHERE name = ?1"), [column], |r| {
            r.get(0)
        })?;
    if present == 0 {
        conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind}"))?;
    }
    Ok(())
}

pub(super) fn slot(source: String, model: String) -> SlotKey {
    SlotKey { source: SourceName::new(source), model }
}

/// `(name, period, window_start, amount)` rows of `sql`, each name read by `account`.
fn accounts(
    conn: &Connection,
    sql: &str,
    account: impl Fn(&str) -> Option<Account>,
) -> rusqlite::Result<Vec<((Account, Period), Usage)>> {
    let mut stmt = conn.prepare(sql)?;
    let rows: Vec<(String, String, Usage)> = stmt
        .query_map([], |r| {
            let usage = Usage { window_start: UnixMs(r.get::<_, i64>(2)? as u64), tokens: r.get::<_, i64>(3)? as u64 };
            Ok((r.get(0)?, r.get(1)?, usage))
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(rows
        .into_iter()
        .filter_map(|(name, period, usage)| Some(((account(&name)?, period.parse::<Period>().ok()?), usage)))
        .collect())
}

pub(super) fn read_all(conn: &Connection) -> rusqlite::Result<Loaded> {
    let mut stmt =
        conn.prepare("SELECT source, model, failures, window_start, window_until, no_probe_before FROM cooldowns")?;
    let cooldowns = stmt
        .query_map([], |r| {
            let start: Option<i64> = r.get(3)?;
            let until: Option<i64> = r.get(4)?;
            let no_probe_before: Option<i64> = r.get(5)?;
            let window = start.map(|s| Window {
                start: UnixMs(s as u64),
                until: until.map(|u| UnixMs(u as u64)),
                no_probe_before: no_probe_before.map(|t| UnixMs(t as u64)),
            });
            Ok((slot(r.get(0)?, r.get(1)?), SlotHealth { failures: r.get(2)?, window, probes_in_flight: 0 }))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut stmt = conn.prepare(
        "SELECT source, model, total, successes, recent, recent_successes, avg_connect_ms, avg_first_byte_ms, last_updated
         FROM scorer_stats",
    )?;
    let stats = stmt
        .query_map([], |r| {
            let stats = Stats {
                total: r.get::<_, i64>(2)? as u64,
                successes: r.get::<_, i64>(3)? as u64,
                recent: r.get(4)?,
                recent_successes: r.get(5)?,
                avg_connect_ms: r.get(6)?,
                avg_first_byte_ms: r.get(7)?,
                last_updated: UnixMs(r.get::<_, i64>(8)? as u64),
            };
            Ok((slot(r.get(0)?, r.get(1)?), stats))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut stmt = conn.prepare("SELECT fingerprint, source, model, last_used FROM affinity")?;
    let bindings = stmt
        .query_map([], |r| {
            let binding = Binding { slot: slot(r.get(1)?, r.get(2)?), last_used: UnixMs(r.get::<_, i64>(3)? as u64) };
            Ok((r.get(0)?, binding))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let mut stmt = conn.prepare("SELECT source, model, period, window_start, tokens FROM quota_usage")?;
    let rows: Vec<(SlotKey, String, Usage)> = stmt
        .query_map([], |r| {
            let usage = Usage { window_start: UnixMs(r.get::<_, i64>(3)? as u64), tokens: r.get::<_, i64>(4)? as u64 };
            Ok((slot(r.get(0)?, r.get(1)?), r.get(2)?, usage))
        })?
        .collect::<rusqlite::Result<_>>()?;
    // A row whose period this version does not know is left alone rather than misread.
    let usage = rows
        .into_iter()
        .filter_map(|(slot, period, usage)| Some((QuotaKey { slot, period: period.parse::<Period>().ok()? }, usage)))
        .collect();
    // Accounts by name and period; a row this version cannot read is left alone.
    let tokens = accounts(conn, "SELECT key, period, window_start, tokens FROM key_usage", |key| {
        Some(Account::Tokens(KeyName::new(key)))
    })?;
    let money =
        accounts(conn, "SELECT account, period, window_start, pico FROM budget_usage", Account::from_stored_name)?;
    let key_usage = tokens.into_iter().chain(money).collect();
    Ok(Loaded { cooldowns, stats, bindings, usage, key_usage })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(v, SCHEMA_VERSION.to_string());
    }
}
