//! The gateway's SQLite database under `data_dir` (WAL): cooldowns, scorer stats, affinity
//! bindings, quota use and request logs. Read once at start; a change is appended to the
//! journal on the request path and committed by one writer thread in batches, so no request
//! waits on SQLite and a killed process loses nothing.

mod audit;
mod journal;
mod logs;
mod queue;
mod responses;
mod schema;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

pub use audit::AuditPage;
pub use logs::{Bucket, Grid, LogPage, LogQuery, LogRow, MAX_BUCKETS, MAX_PAGE, SpendBy, SpendRow};
pub use responses::StoredResponse;
pub use schema::open;

use rusqlite::Connection;
use serde::{Deserialize, Serialize};

use crate::config::KeyName;
use crate::scheduler::{
    Account, Loaded, Period, Persist, QuotaKey, SlotHealth, SlotKey, StateChange, Stats, UnixMs, Usage,
};
use schema::read_all;
use writer::{Item, replay, writer};

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state database {path}: {source}")]
    Database { path: String, source: rusqlite::Error },
    #[error("state journal {path}: {source}")]
    Journal { path: String, source: std::io::Error },
    #[error("state file {path}: {source}")]
    File { path: String, source: std::io::Error },
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
    /// A served attempt's row and the budgets its cost (`cost_usd`) is added to: one journal
    /// write for both, and increments, so their order does not matter.
    Charged(Box<LogRow>, Vec<Charge>),
    PruneLogs(u64),
    Response(Box<StoredResponse>),
    /// (owner, id)
    DeleteResponse(String, String),
    /// Every turn of the key with this id.
    DeleteOwnerResponses(String),
    PruneResponses(u64),
    /// An audit entry, this replica's or another's (stored once by id).
    Audit(Box<crate::access::AuditEntry>),
    /// (older than, most kept)
    PruneAudit(u64, u64),
}

/// One budget a served attempt's cost is added to: the account, its period, and the window the
/// attempt fell in.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Charge {
    pub account: Account,
    pub period: Period,
    pub window_start: UnixMs,
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
/// Changes queued for the writer past which the request path waits for it.
const MAX_BACKLOG: usize = 16_384;

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

    /// Logs a served attempt whose cost is added to `charges` (budgets) in the same write.
    pub fn log_charged(&self, row: LogRow, charges: Vec<Charge>) {
        self.send(if charges.is_empty() {
            Change::Log(Box::new(row))
        } else {
            Change::Charged(Box::new(row), charges)
        });
    }

    /// Deletes log rows older than `before_ms`.
    pub fn prune_logs(&self, before_ms: u64) {
        self.send(Change::PruneLogs(before_ms));
    }

    /// Appends an audit entry: journaled when this returns.
    pub fn audit(&self, entry: crate::access::AuditEntry) {
        self.send(Change::Audit(Box::new(entry)));
    }

    pub fn prune_audit(&self, before_ms: u64, max_entries: u64) {
        self.send(Change::PruneAudit(before_ms, max_entries));
    }

    /// A page of the audit trail, with every entry journaled before the call.
    pub fn query_audit(&self, q: &crate::access::AuditQuery) -> Result<AuditPage, StateError> {
        self.flush();
        self.read(|conn| audit::query(conn, q))
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

    /// Spend in `[since, until)` grouped `by` (every attempt journaled so far counted).
    pub fn spend(&self, by: SpendBy, since_ms: u64, until_ms: u64) -> Result<Vec<SpendRow>, StateError> {
        self.flush();
        self.read(|c| logs::spend(c, by, since_ms, until_ms))
    }

    /// Models without a price that served since `since_ms`: (source, model, attempts, last at).
    pub fn unpriced(&self, since_ms: u64) -> Result<Vec<(String, String, u64, u64)>, StateError> {
        self.flush();
        self.read(|c| logs::unpriced(c, since_ms))
    }

    /// Journals a change and queues it for the writer, which is not woken: it takes the
    /// queue whole when its batch window ends.
    fn send(&self, change: Change) {
        self.send_all([change], Written::Now);
    }

    /// Journals changes in order and queues them for the writer; with [`Written::Now`], in one
    /// `write` with whatever was staged before them. Each is queued as it is staged: the
    /// writer cannot truncate the journal while its lock is held, and one it commits before
    /// the line is written loses nothing.
    fn send_all(&self, changes: impl IntoIterator<Item = Change>, written: Written) {
        let mut journal = self.journal.lock().unwrap_or_else(|p| p.into_inner());
        for change in changes {
            let seq = journal.stage(&change);
            self.queue.push(Item::Change(seq, change));
        }
        if written == Written::Now {
            journal.write_staged();
        }
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

/// When staged journal lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Written {
    /// Before the call returns.
    Now,
    /// With the next change written now (or never, when the database has them first).
    WithNext,
}

/// The scheduler keeps its state here: each change journaled, then queued for the writer.
impl Persist for StateStore {
    fn take_loaded(&self) -> Loaded {
        self.loaded.lock().expect("state lock").take().unwrap_or_default()
    }

    fn keep(&self, changes: Vec<StateChange>) {
        // What a served call changes on its way to its log row (its score, its usage, its
        // binding) goes to disk with that row, which follows within the call: one `write` per
        // request, and a kill loses the row and its changes together. Cooldowns and an
        // operator's acts are written at once.
        let with_row = |c: &StateChange| {
            matches!(
                c,
                StateChange::Stats(..) | StateChange::Usage(..) | StateChange::KeyUsage(..) | StateChange::Bind(..)
            )
        };
        let written = if changes.iter().all(with_row) { Written::WithNext } else { Written::Now };
        let mut changes = changes
            .into_iter()
            .filter_map(|change| {
                Some(match change {
                    StateChange::Cooldown(key, health) => Change::Cooldown(key, health),
                    StateChange::Stats(key, stats) => Change::Stats(key, stats),
                    StateChange::Usage(key, usage) => Change::Usage(key, usage),
                    StateChange::KeyUsage(Account::Tokens(key), period, usage) => Change::KeyUsage(key, period, usage),
                    // A budget's spend is kept through the log rows that charge it (`charged`).
                    StateChange::KeyUsage(..) => return None,
                    StateChange::Bind(fingerprint, key, at) => Change::Bind(fingerprint, key, at),
                    StateChange::ClearBindings(source) => Change::ClearBindings(source),
                    StateChange::PruneBindings(before) => Change::PruneBindings(before),
                })
            })
            .peekable();
        if changes.peek().is_some() {
            self.send_all(changes, written);
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

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::schema::slot;
    use super::*;
    use crate::scheduler::{Binding, Window};

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
        store.keep(vec![StateChange::KeyUsage(Account::Tokens(KeyName::new("alice")), Period::Month, usage)]);
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
        assert_eq!(loaded.key_usage[&(Account::Tokens(KeyName::new("alice")), Period::Month)], usage);
    }

    #[test]
    fn a_calls_changes_are_journaled_in_order_with_its_log_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let a = slot("a".into(), "m".into());
        let quota = QuotaKey { slot: a.clone(), period: Period::Hours(5) };
        let usage = Usage { window_start: UnixMs(0), tokens: 10 };
        let store = StateStore::start(&path).unwrap();
        let journal = || std::fs::read_to_string(path.with_extension("journal")).unwrap();
        store.keep(vec![
            StateChange::Stats(a.clone(), Some(Stats::default())),
            StateChange::Usage(quota.clone(), usage),
            StateChange::Bind("fp".into(), a.clone(), UnixMs(7)),
        ]);
        assert_eq!(journal(), "", "staged: they go out with the call's log row");
        store.log(LogRow { request_id: "r1".into(), ..LogRow::default() });
        // Journaled when `log` returns (one `write`), before the writer's batch.
        let journal = journal();
        let lines: Vec<&str> = journal.lines().collect();
        assert_eq!(lines.len(), 4, "{journal}");
        let order = ["\"stats\"", "\"usage\"", "\"bind\"", "\"r1\""];
        assert!(lines.iter().zip(order).all(|(l, kind)| l.contains(kind)), "in order: {journal}");
        store.flush();
        drop(store);
        let loaded = StateStore::start(&path).unwrap().take_loaded();
        assert_eq!(loaded.usage[&quota], usage);
    }

    #[test]
    fn charged_rows_add_their_cost_to_each_budgets_window_once_in_any_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let alice = Account::KeyUsd(KeyName::new("alice"));
        let team = Account::GroupUsd(crate::config::GroupName::new("team"));
        let row = |pico| LogRow { cost_usd: Some(crate::domain::Usd::from_pico(pico)), ..LogRow::default() };
        let charge = |account: &Account, start| Charge {
            account: account.clone(),
            period: Period::Day,
            window_start: UnixMs(start),
        };
        let store = StateStore::start(&path).unwrap();
        store.log_charged(row(5), vec![charge(&alice, 86_400_000), charge(&team, 86_400_000)]);
        store.log_charged(row(7), vec![charge(&alice, 86_400_000)]);
        // The next day starts over; a late row of the day before changes nothing.
        store.log_charged(row(11), vec![charge(&team, 2 * 86_400_000)]);
        store.log_charged(row(13), vec![charge(&team, 86_400_000)]);
        // Whole values from the scheduler are not written for money: the rows carry it.
        store.keep(vec![StateChange::KeyUsage(
            alice.clone(),
            Period::Day,
            Usage { window_start: UnixMs(0), tokens: 999 },
        )]);
        store.flush();
        drop(store);
        let loaded = StateStore::start(&path).unwrap().take_loaded();
        assert_eq!(loaded.key_usage[&(alice, Period::Day)], Usage { window_start: UnixMs(86_400_000), tokens: 12 });
        assert_eq!(loaded.key_usage[&(team, Period::Day)], Usage { window_start: UnixMs(2 * 86_400_000), tokens: 11 });
    }

    #[test]
    fn a_budgets_spend_saturates_instead_of_leaving_the_integers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let alice = Account::KeyUsd(KeyName::new("alice"));
        let charge = Charge { account: alice.clone(), period: Period::Never, window_start: UnixMs(0) };
        let store = StateStore::start(&path).unwrap();
        // Two batches (a flush between), each near the largest amount.
        for _ in 0..2 {
            let row = LogRow { cost_usd: Some(crate::domain::Usd::from_pico(i64::MAX - 5)), ..LogRow::default() };
            store.log_charged(row, vec![charge.clone()]);
            store.flush();
        }
        drop(store);
        let loaded = StateStore::start(&path).unwrap().take_loaded();
        assert_eq!(loaded.key_usage[&(alice, Period::Never)].tokens, i64::MAX as u64, "read back, not a float");
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
