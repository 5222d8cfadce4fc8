//! The gateway's SQLite database under `data_dir` (WAL): cooldowns, scorer stats, affinity
//! bindings, quota use and request logs. Read once at start; a change is appended to the
//! journal on the request path and committed by one writer thread in batches, so no request
//! waits on SQLite and a killed process loses nothing.

mod journal;
mod logs;
mod queue;
mod responses;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

pub use logs::{Bucket, Grid, LogPage, LogQuery, LogRow, MAX_BUCKETS, MAX_PAGE};
pub use responses::StoredResponse;

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::config::{KeyName, SourceName};
use crate::scheduler::{
    Binding, Loaded, Period, Persist, QuotaKey, SlotHealth, SlotKey, StateChange, Stats, UnixMs, Usage, Window,
};

const SCHEMA_VERSION: i64 = 6;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state database {path}: {source}")]
    Database { path: String, source: rusqlite::Error },
    #[error("state journal {path}: {source}")]
    Journal { path: String, source: std::io::Error },
    #[error("state file {path}: {source}")]
    File { path: String, source: std::io::Error },
}

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
             PRIMARY KEY (key, period));",
    )
    .map_err(wrap)?;
    add_column(&conn, "cooldowns", "no_probe_before", "INTEGER").map_err(wrap)?;
    logs::migrate(&conn).map_err(wrap)?;
    responses::migrate(&conn).map_err(wrap)?;
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

/// One change to the state, as journaled and as applied to the database.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Change {
    Cooldown(SlotKey, Option<SlotHealth>),
    Stats(SlotKey, Option<Stats>),
    Bind(String, SlotKey, UnixMs),
    ClearBindings(Option<String>),
    PruneBindings(UnixMs),
    Usage(QuotaKey, Usage),
    KeyUsage(KeyName, Period, Usage),
    Log(Box<LogRow>),
    PruneLogs(u64),
    Response(Box<StoredResponse>),
    /// (owner, id)
    DeleteResponse(String, String),
    /// Every turn of the key with this id.
    DeleteOwnerResponses(String),
    PruneResponses(u64),
}

enum Item {
    /// A journaled change and its sequence number.
    Change(u64, Change),
    /// Someone waits until everything before it is committed.
    Flush(mpsc::Sender<()>),
}

/// Handle to the journal and the writer thread (which owns its own connection).
pub struct StateStore {
    path: PathBuf,
    /// Held while a change is appended and queued, so queue order is journal order.
    journal: Arc<Mutex<journal::Journal>>,
    queue: Arc<queue::Queue<Item>>,
    writer: Option<std::thread::JoinHandle<()>>,
    /// Rows present at start, handed to the scheduler once.
    loaded: Mutex<Option<Loaded>>,
}

/// How long journaled changes wait to be committed together: the database trails the
/// journal by at most this much, and a burst of requests costs one commit.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(20);
/// Changes between two checkpoints of the WAL into the database file.
const CHECKPOINT_EVERY: usize = 1024;
/// Changes queued for the writer past which the request path waits for it.
const MAX_BACKLOG: usize = 16_384;
/// Where the database records the last journal entry it has applied.
const APPLIED_KEY: &str = "journal_applied_seq";

impl StateStore {
    /// Opens the database, replays the journal's changes it had not yet committed, and starts
    /// the writer. The journal is `<path>.journal`.
    pub fn start(path: &Path) -> Result<StateStore, StateError> {
        let wrap = |source| StateError::Database { path: path.display().to_string(), source };
        let mut conn = open(path)?;
        let journal_path = path.with_extension("journal");
        let (mut journal, leftover) = journal::Journal::open(&journal_path)
            .map_err(|source| StateError::Journal { path: journal_path.display().to_string(), source })?;
        let applied = replay(&mut conn, leftover).map_err(wrap)?;
        journal.continue_after(applied);
        journal.truncate_through(applied);
        let loaded = read_all(&conn).map_err(wrap)?;
        // The writer checkpoints between its own batches (see `writer`).
        conn.pragma_update(None, "wal_autocheckpoint", 0).map_err(wrap)?;
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024).map_err(wrap)?;
        let journal = Arc::new(Mutex::new(journal));
        let queue = Arc::new(queue::Queue::new(BATCH_WINDOW));
        let (writes, truncate) = (Arc::clone(&queue), Arc::clone(&journal));
        let writer = std::thread::Builder::new()
            .name("state-writer".into())
            .spawn(move || writer(conn, &writes, &truncate))
            .expect("spawning the state writer");
        Ok(StateStore {
            path: path.to_path_buf(),
            journal,
            queue,
            writer: Some(writer),
            loaded: Mutex::new(Some(loaded)),
        })
    }

    /// Records a request-log row: journaled when this returns (a crash after it keeps the
    /// row), in the database within `BATCH_WINDOW`.
    pub fn log(&self, row: LogRow) {
        self.send(Change::Log(Box::new(row)));
    }

    /// Deletes log rows older than `before_ms`.
    pub fn prune_logs(&self, before_ms: u64) {
        self.send(Change::PruneLogs(before_ms));
    }

    /// Stores a Responses turn: journaled when this returns, readable by [`StateStore::response`]
    /// at once.
    pub fn store_response(&self, stored: StoredResponse) {
        self.send(Change::Response(Box::new(stored)));
    }

    pub fn delete_response(&self, owner: &str, id: &str) {
        self.send(Change::DeleteResponse(owner.to_string(), id.to_string()));
    }

    /// Forgets every turn stored by the key with id `owner`.
    pub fn delete_owner_responses(&self, owner: &str) {
        self.send(Change::DeleteOwnerResponses(owner.to_string()));
    }

    /// Bytes each key id stored since `since_ms` (blocking).
    pub fn stored_response_bytes(&self, since_ms: u64) -> Result<Vec<(String, u64)>, StateError> {
        self.flush();
        self.read(|c| responses::stored_bytes(c, since_ms))
    }

    /// Deletes stored responses created before `before_ms`.
    pub fn prune_responses(&self, before_ms: u64) {
        self.send(Change::PruneResponses(before_ms));
    }

    /// A stored response by id. Blocking: a miss waits for the batch in flight and looks again,
    /// so a turn stored a moment ago is found.
    pub fn response(&self, owner: &str, id: &str) -> Result<Option<StoredResponse>, StateError> {
        if let Some(found) = self.read(|c| responses::get(c, owner, id))? {
            return Ok(Some(found));
        }
        self.flush();
        self.read(|c| responses::get(c, owner, id))
    }

    /// Runs a read-only query on its own connection (WAL readers never wait for the writer).
    pub fn read<T>(&self, f: impl FnOnce(&Connection) -> rusqlite::Result<T>) -> Result<T, StateError> {
        let wrap = |source| StateError::Database { path: self.path.display().to_string(), source };
        let conn = Connection::open_with_flags(&self.path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(wrap)?;
        f(&conn).map_err(wrap)
    }

    /// A page of logs; every row journaled before the call is in it (the batch in flight is
    /// committed first).
    pub fn query_logs(&self, q: &LogQuery) -> Result<LogPage, StateError> {
        self.flush();
        self.read(|c| logs::query(c, q))
    }

    pub fn log_series(&self, since_ms: u64, until_ms: u64, buckets: u32) -> Result<Vec<logs::Bucket>, StateError> {
        self.flush();
        self.read(|c| logs::series(c, since_ms, until_ms, buckets))
    }

    pub fn log_stats(&self, since_ms: u64) -> Result<Vec<serde_json::Value>, StateError> {
        self.flush();
        self.read(|c| logs::stats(c, since_ms))
    }

    /// Journals a change and queues it for the writer, which is not woken: it takes the
    /// queue whole when its batch window ends.
    fn send(&self, change: Change) {
        let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        let seq = journal.append(&change);
        self.queue.push(Item::Change(seq, change));
        drop(journal);
        // Back pressure: requests wait for a writer that fell this far behind, rather than
        // its backlog (memory, journal) growing for as long as the load lasts.
        self.queue.wait_below(MAX_BACKLOG);
    }

    /// Changes journaled and waiting for the database writer.
    pub fn backlog(&self) -> usize {
        self.queue.len()
    }

    /// Blocks until everything queued so far is in the database.
    pub fn flush(&self) {
        let (done, wait) = mpsc::channel();
        self.queue.push_urgent(Item::Flush(done));
        let _ = wait.recv();
    }
}

/// The scheduler keeps its state here: each change journaled, then queued for the writer.
impl Persist for StateStore {
    fn take_loaded(&self) -> Loaded {
        self.loaded.lock().expect("state lock").take().unwrap_or_default()
    }

    fn keep(&self, changes: Vec<StateChange>) {
        for change in changes {
            self.send(match change {
                StateChange::Cooldown(key, health) => Change::Cooldown(key, health),
                StateChange::Stats(key, stats) => Change::Stats(key, stats),
                StateChange::Usage(key, usage) => Change::Usage(key, usage),
                StateChange::KeyUsage(key, period, usage) => Change::KeyUsage(key, period, usage),
                StateChange::Bind(fingerprint, key, at) => Change::Bind(fingerprint, key, at),
                StateChange::ClearBindings(source) => Change::ClearBindings(source),
                StateChange::PruneBindings(before) => Change::PruneBindings(before),
            });
        }
    }

    fn flush(&self) {
        StateStore::flush(self);
    }
}

impl Drop for StateStore {
    /// The writer commits what is queued and ends.
    fn drop(&mut self) {
        self.queue.close();
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

/// Applies the journal's entries the database has not seen; returns the last applied seq.
fn replay(conn: &mut Connection, entries: Vec<(u64, Change)>) -> rusqlite::Result<u64> {
    let applied: u64 = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [APPLIED_KEY], |r| r.get::<_, String>(0))
        .optional()?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let pending: Vec<(u64, Change)> = entries.into_iter().filter(|(seq, _)| *seq > applied).collect();
    let Some(last) = pending.iter().map(|(seq, _)| *seq).max() else { return Ok(applied) };
    tracing::info!(changes = pending.len(), "replaying the state journal");
    let tx = conn.transaction()?;
    for (_, change) in pending {
        apply(&tx, change)?;
    }
    set_applied(&tx, last)?;
    tx.commit()?;
    Ok(last)
}

fn set_applied(tx: &rusqlite::Transaction<'_>, seq: u64) -> rusqlite::Result<usize> {
    run(
        tx,
        "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2",
        params![APPLIED_KEY, seq.to_string()],
    )
}

fn slot(source: String, model: String) -> SlotKey {
    SlotKey { source: SourceName::new(source), model }
}

fn read_all(conn: &Connection) -> rusqlite::Result<Loaded> {
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
    let mut stmt = conn.prepare("SELECT key, period, window_start, tokens FROM key_usage")?;
    let rows: Vec<(String, String, Usage)> = stmt
        .query_map([], |r| {
            let usage = Usage { window_start: UnixMs(r.get::<_, i64>(2)? as u64), tokens: r.get::<_, i64>(3)? as u64 };
            Ok((r.get(0)?, r.get(1)?, usage))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let key_usage = rows
        .into_iter()
        .filter_map(|(key, period, usage)| Some(((KeyName::new(key), period.parse::<Period>().ok()?), usage)))
        .collect();
    Ok(Loaded { cooldowns, stats, bindings, usage, key_usage })
}

/// Applies the queue in batches, one commit each, at low CPU priority: the database is a
/// copy of the journal, so it may trail while requests have the core.
fn writer(mut conn: Connection, queue: &queue::Queue<Item>, journal: &Mutex<journal::Journal>) {
    lower_priority();
    let mut since_checkpoint = 0;
    // After a failed commit the journal is kept whole until the next start replays it.
    let mut failed_once = false;
    while let Some(batch) = queue.next_batch() {
        since_checkpoint += batch.len();
        let mut flushed = Vec::new();
        let mut last = None;
        let result = (|| -> rusqlite::Result<()> {
            let tx = conn.transaction()?;
            for item in batch {
                match item {
                    Item::Flush(done) => flushed.push(done),
                    Item::Change(seq, change) => {
                        apply(&tx, change)?;
                        last = Some(seq);
                    }
                }
            }
            if let Some(seq) = last {
                set_applied(&tx, seq)?;
            }
            tx.commit()
        })();
        match (result, last) {
            (Ok(()), Some(seq)) if !failed_once => {
                journal.lock().unwrap_or_else(|p| p.into_inner()).truncate_through(seq);
            }
            (Ok(()), _) => {}
            (Err(e), _) => {
                failed_once = true;
                tracing::error!("state database write failed (the journal keeps the changes for the next start): {e}");
            }
        }
        for done in flushed {
            let _ = done.send(());
        }
        // Between its own batches the one writer's checkpoint copies every frame (unless a
        // reader still needs one), so the next batch starts the WAL over; a checkpoint on
        // another connection races the writer and, under steady writes, never catches up.
        if since_checkpoint >= CHECKPOINT_EVERY {
            since_checkpoint = 0;
            if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                tracing::warn!("state database checkpoint failed: {e}");
            }
        }
    }
}

/// The state writer yields the core to request handling (nice 10), which matters most when
/// the gateway runs on one core; they still get their share when requests saturate it.
fn lower_priority() {
    // SAFETY: setpriority on the calling thread's own id has no memory effects.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10) };
    if rc != 0 {
        tracing::debug!("could not lower the state writer's priority: {}", std::io::Error::last_os_error());
    }
}

/// Runs one of the writer's statements; each is prepared once per connection, not per write.
fn run(tx: &rusqlite::Transaction<'_>, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    tx.prepare_cached(sql)?.execute(params)
}

fn apply(tx: &rusqlite::Transaction<'_>, change: Change) -> rusqlite::Result<()> {
    match change {
        Change::Cooldown(key, None) => {
            run(tx, "DELETE FROM cooldowns WHERE source = ?1 AND model = ?2", params![key.source.as_str(), key.model])?;
        }
        Change::Cooldown(key, Some(h)) => {
            run(
                tx,
                "INSERT INTO cooldowns (source, model, failures, window_start, window_until, no_probe_before)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT(source, model) DO UPDATE SET failures = ?3, window_start = ?4, window_until = ?5,
                     no_probe_before = ?6",
                params![
                    key.source.as_str(),
                    key.model,
                    h.failures,
                    h.window.map(|w| w.start.0 as i64),
                    h.window.and_then(|w| w.until).map(|u| u.0 as i64),
                    h.window.and_then(|w| w.no_probe_before).map(|t| t.0 as i64)
                ],
            )?;
        }
        Change::Stats(key, None) => {
            run(
                tx,
                "DELETE FROM scorer_stats WHERE source = ?1 AND model = ?2",
                params![key.source.as_str(), key.model],
            )?;
        }
        Change::Stats(key, Some(s)) => {
            run(
                tx,
                "INSERT INTO scorer_stats (source, model, total, successes, recent, recent_successes, avg_connect_ms,
                     avg_first_byte_ms, last_updated) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT(source, model) DO UPDATE SET total = ?3, successes = ?4, recent = ?5,
                     recent_successes = ?6, avg_connect_ms = ?7, avg_first_byte_ms = ?8, last_updated = ?9",
                params![
                    key.source.as_str(),
                    key.model,
                    s.total as i64,
                    s.successes as i64,
                    s.recent,
                    s.recent_successes,
                    s.avg_connect_ms,
                    s.avg_first_byte_ms,
                    s.last_updated.0 as i64
                ],
            )?;
        }
        Change::Bind(fp, key, at) => {
            run(
                tx,
                "INSERT INTO affinity (fingerprint, source, model, last_used) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(fingerprint) DO UPDATE SET source = ?2, model = ?3, last_used = ?4",
                params![fp, key.source.as_str(), key.model, at.0 as i64],
            )?;
        }
        Change::ClearBindings(None) => {
            run(tx, "DELETE FROM affinity", [])?;
        }
        Change::ClearBindings(Some(source)) => {
            run(tx, "DELETE FROM affinity WHERE source = ?1", [source])?;
        }
        Change::PruneBindings(before) => {
            run(tx, "DELETE FROM affinity WHERE last_used < ?1", [before.0 as i64])?;
        }
        Change::Usage(key, usage) => {
            run(
                tx,
                "INSERT INTO quota_usage (source, model, period, window_start, tokens) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(source, model, period) DO UPDATE SET window_start = ?4, tokens = ?5",
                params![
                    key.slot.source.as_str(),
                    key.slot.model,
                    key.period.to_string(),
                    usage.window_start.0 as i64,
                    usage.tokens as i64
                ],
            )?;
        }
        Change::KeyUsage(key, period, usage) => {
            run(
                tx,
                "INSERT INTO key_usage (key, period, window_start, tokens) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(key, period) DO UPDATE SET window_start = ?3, tokens = ?4",
                params![key.as_str(), period.to_string(), usage.window_start.0 as i64, usage.tokens as i64],
            )?;
        }
        Change::PruneLogs(before) => {
            let pruned = logs::prune(tx, before)?;
            if pruned > 0 {
                tracing::info!(pruned, "request logs past their retention deleted");
            }
        }
        Change::Log(row) => logs::insert(tx, &row)?,
        Change::Response(stored) => responses::insert(tx, &stored)?,
        Change::DeleteResponse(owner, id) => responses::delete(tx, &owner, &id)?,
        Change::DeleteOwnerResponses(owner) => {
            let deleted = responses::delete_owner(tx, &owner)?;
            tracing::info!(deleted, "a deleted key's stored responses deleted");
        }
        Change::PruneResponses(before) => {
            let pruned = responses::prune(tx, before)?;
            if pruned > 0 {
                tracing::info!(pruned, "stored responses past their retention deleted");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

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

    #[test]
    fn everything_written_is_read_back_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let key = slot("a".into(), "m".into());
        let other = slot("b".into(), "m".into());
        let health = SlotHealth {
            failures: 3,
            window: Some(Window { start: UnixMs(10), until: Some(UnixMs(20)), no_probe_before: Some(UnixMs(19)) }),
            probes_in_flight: 1,
        };
        let stats = Stats {
            total: 7,
            successes: 6,
            recent: 7,
            recent_successes: 6.0,
            avg_connect_ms: 12.5,
            avg_first_byte_ms: 99.0,
            last_updated: UnixMs(42),
        };
        let quota = QuotaKey { slot: key.clone(), period: Period::Hours(5) };
        let usage = Usage { window_start: UnixMs(3_600_000), tokens: 1234 };

        let store = StateStore::start(&path).unwrap();
        store.keep(vec![StateChange::Cooldown(key.clone(), Some(health.clone()))]);
        store.keep(vec![StateChange::Cooldown(other.clone(), Some(health.clone()))]);
        store.keep(vec![StateChange::Cooldown(other.clone(), None)]);
        store.keep(vec![StateChange::Stats(key.clone(), Some(stats.clone()))]);
        store.keep(vec![StateChange::Stats(other.clone(), Some(stats.clone()))]);
        store.keep(vec![StateChange::Stats(other.clone(), None)]);
        store.keep(vec![StateChange::Bind("fp-a".into(), key.clone(), UnixMs(100))]);
        store.keep(vec![StateChange::Bind("fp-b".into(), other.clone(), UnixMs(100))]);
        store.keep(vec![StateChange::Bind("fp-old".into(), key.clone(), UnixMs(1))]);
        store.keep(vec![StateChange::ClearBindings(Some("b".into()))]);
        store.keep(vec![StateChange::PruneBindings(UnixMs(50))]);
        store.keep(vec![StateChange::Usage(quota.clone(), usage)]);
        store.keep(vec![StateChange::KeyUsage(KeyName::new("alice"), Period::Month, usage)]);
        store.flush();
        drop(store);

        let loaded = StateStore::start(&path).unwrap().take_loaded();
        assert_eq!(loaded.cooldowns.len(), 1);
        assert_eq!(loaded.cooldowns[&key], SlotHealth { probes_in_flight: 0, ..health });
        assert_eq!(loaded.stats.len(), 1);
        assert_eq!(loaded.stats[&key], stats);
        assert_eq!(loaded.bindings, vec![("fp-a".to_string(), Binding { slot: key.clone(), last_used: UnixMs(100) })]);
        assert_eq!(loaded.usage.len(), 1);
        assert_eq!(loaded.usage[&quota], usage);
        assert_eq!(loaded.key_usage[&(KeyName::new("alice"), Period::Month)], usage);
    }

    #[test]
    fn under_steady_writes_the_wal_the_journal_and_the_backlog_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let store = StateStore::start(&path).unwrap();
        let size = |p: std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
        let (mut wal, mut journal, mut backlog) = (0, 0, 0);
        // Never a pause for the writer to catch up: every row finds the previous ones queued.
        // ~50 MB of journal lines in all: kept whole, it would reach that.
        let message = Some("m".repeat(700));
        for i in 0..60_000u64 {
            let request_id = format!("req-{i:08}");
            let row = LogRow { request_id, at_ms: i, key: "k".into(), message: message.clone(), ..LogRow::default() };
            store.log(row);
            backlog = backlog.max(store.backlog());
            if i % 500 == 0 {
                wal = wal.max(size(path.with_extension("db-wal")));
                journal = journal.max(size(path.with_extension("journal")) + size(dir.path().join("state.journal.1")));
            }
        }
        store.flush();
        assert!(backlog <= MAX_BACKLOG + 1, "the writer's backlog is bounded: {backlog}");
        assert!(wal < 64 << 20, "the WAL stays bounded: {wal}");
        // A sealed segment, the open one, and at most twice the backlog behind the writer.
        assert!(journal < 64 << 20, "the journal stays bounded: {journal}");
        let rows: i64 = store.read(|c| c.query_row("SELECT COUNT(*) FROM request_logs", [], |r| r.get(0))).unwrap();
        assert_eq!(rows, 60_000, "nothing is lost");
    }

    #[test]
    fn changes_only_in_the_journal_are_replayed_once_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        drop(super::open(&path).unwrap());
        let quota = QuotaKey { slot: slot("a".into(), "m".into()), period: Period::Month };
        let usage = Usage { window_start: UnixMs(7), tokens: 21 };
        let journal_path = path.with_extension("journal");
        let (mut journal, _) = journal::Journal::open(&journal_path).unwrap();
        journal.append(&Change::Usage(quota.clone(), usage));
        journal.append(&Change::Log(Box::new(LogRow { request_id: "r1".into(), ..LogRow::default() })));
        drop(journal);
        // The process died inside its next write.
        std::fs::OpenOptions::new().append(true).open(&journal_path).unwrap().write_all(b"{\"seq\":3,\"cha").unwrap();

        let store = StateStore::start(&path).unwrap();
        assert_eq!(store.take_loaded().usage[&quota], usage);
        assert_eq!(std::fs::metadata(&journal_path).unwrap().len(), 0, "a replayed journal is emptied");
        store.log(LogRow { request_id: "r2".into(), ..LogRow::default() });
        drop(store);

        let store = StateStore::start(&path).unwrap();
        let ids: Vec<String> =
            store.query_logs(&LogQuery::default()).unwrap().rows.into_iter().map(|r| r.request_id).collect();
        assert_eq!(ids, ["r2", "r1"], "each row once, the newest first");
    }
}
