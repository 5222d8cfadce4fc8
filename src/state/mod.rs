//! The gateway's SQLite database under `data_dir` (WAL). Reads happen at start; writes go
//! through one writer thread that batches them, so no request waits on the disk.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;

use rusqlite::{Connection, params};

use crate::config::SourceName;
use crate::scheduler::{SlotHealth, SlotKey, UnixMs, Window};

const SCHEMA_VERSION: i64 = 2;

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
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS cooldowns (
             source TEXT NOT NULL, model TEXT NOT NULL, failures INTEGER NOT NULL,
             window_start INTEGER, window_until INTEGER, PRIMARY KEY (source, model));",
    )
    .map_err(wrap)?;
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('schema_version', ?1) ON CONFLICT(key) DO UPDATE SET value = ?1",
        [SCHEMA_VERSION.to_string()],
    )
    .map_err(wrap)?;
    Ok(conn)
}

enum Write {
    Cooldown(SlotKey, Option<SlotHealth>),
    Flush(mpsc::Sender<()>),
}

/// Handle to the writer thread (which owns its own connection).
pub struct StateStore {
    tx: mpsc::Sender<Write>,
    /// Rows present at start, handed to the scheduler once.
    loaded: HashMap<SlotKey, SlotHealth>,
}

impl StateStore {
    pub fn start(path: &Path) -> Result<StateStore, StateError> {
        let conn = open(path)?;
        let loaded = read_cooldowns(&conn).map_err(|source| StateError { path: path.display().to_string(), source })?;
        let (tx, rx) = mpsc::channel::<Write>();
        std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || writer(conn, rx))
            .expect("spawning the state writer");
        Ok(StateStore { tx, loaded })
    }

    pub fn load_cooldowns(&self) -> HashMap<SlotKey, SlotHealth> {
        self.loaded.clone()
    }

    /// Queues the slot's health (`None`: healthy again, delete the row).
    pub fn save_cooldown(&self, key: &SlotKey, health: Option<&SlotHealth>) {
        let _ = self.tx.send(Write::Cooldown(key.clone(), health.cloned()));
    }

    /// Blocks until everything queued so far is committed.
    pub fn flush(&self) {
        let (done, wait) = mpsc::channel();
        if self.tx.send(Write::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

fn read_cooldowns(conn: &Connection) -> rusqlite::Result<HashMap<SlotKey, SlotHealth>> {
    let mut stmt = conn.prepare("SELECT source, model, failures, window_start, window_until FROM cooldowns")?;
    let rows = stmt.query_map([], |r| {
        let key = SlotKey { source: SourceName::new(r.get::<_, String>(0)?), model: r.get(1)? };
        let start: Option<i64> = r.get(3)?;
        let until: Option<i64> = r.get(4)?;
        let window = start.map(|s| Window { start: UnixMs(s as u64), until: until.map(|u| UnixMs(u as u64)) });
        Ok((key, SlotHealth { failures: r.get(2)?, window, probes_in_flight: 0 }))
    })?;
    rows.collect()
}

/// Applies writes in batches: block for one, take whatever else is queued, commit once.
fn writer(mut conn: Connection, rx: mpsc::Receiver<Write>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let mut flushed = Vec::new();
        let result = (|| -> rusqlite::Result<()> {
            let tx = conn.transaction()?;
            for write in batch {
                match write {
                    Write::Cooldown(key, None) => {
                        tx.execute(
                            "DELETE FROM cooldowns WHERE source = ?1 AND model = ?2",
                            params![key.source.as_str(), key.model],
                        )?;
                    }
                    Write::Cooldown(key, Some(h)) => {
                        tx.execute(
                            "INSERT INTO cooldowns (source, model, failures, window_start, window_until) VALUES (?1, ?2, ?3, ?4, ?5)
                             ON CONFLICT(source, model) DO UPDATE SET failures = ?3, window_start = ?4, window_until = ?5",
                            params![
                                key.source.as_str(),
                                key.model,
                                h.failures,
                                h.window.map(|w| w.start.0 as i64),
                                h.window.and_then(|w| w.until).map(|u| u.0 as i64)
                            ],
                        )?;
                    }
                    Write::Flush(done) => flushed.push(done),
                }
            }
            tx.commit()
        })();
        if let Err(e) = result {
            tracing::error!("state database write failed: {e}");
        }
        for done in flushed {
            let _ = done.send(());
        }
    }
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
        assert_eq!(v, "2");
    }

    #[test]
    fn cooldowns_written_are_read_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let key = SlotKey { source: SourceName::new("a"), model: "m".into() };
        let other = SlotKey { source: SourceName::new("b"), model: "m".into() };
        let health = SlotHealth {
            failures: 3,
            window: Some(Window { start: UnixMs(10), until: Some(UnixMs(20)) }),
            probes_in_flight: 1,
        };
        let store = StateStore::start(&path).unwrap();
        store.save_cooldown(&key, Some(&health));
        store.save_cooldown(&other, Some(&health));
        store.save_cooldown(&other, None);
        store.flush();
        drop(store);
        let loaded = StateStore::start(&path).unwrap().load_cooldowns();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[&key], SlotHealth { probes_in_flight: 0, ..health });
    }
}
