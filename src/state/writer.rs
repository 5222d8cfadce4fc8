//! The writer thread: it commits the journaled changes the queue hands it, in batches,
//! and at start replays the journal entries the database has not applied yet.

use std::sync::{Mutex, mpsc};

use rusqlite::{Connection, OptionalExtension, params};

use super::{Change, audit, journal, logs, queue, responses};

/// Changes between two checkpoints of the WAL into the database file.
const CHECKPOINT_EVERY: usize = 1024;
/// Where the database records the last journal entry it has applied.
const APPLIED_KEY: &str = "journal_applied_seq";

pub(super) enum Item {
    /// A journaled change and its sequence number.
    Change(u64, Change),
    /// Someone waits until everything before it is committed.
    Flush(mpsc::Sender<()>),
}

/// Applies the queue in batches, one commit each, at low CPU priority: the database is a
/// copy of the journal, so it may trail while requests have the core.
pub(super) fn writer(mut conn: Connection, queue: &queue::Queue<Item>, journal: &Mutex<journal::Journal>) {
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
            let mut charges = Charges::default();
            for item in batch {
                match item {
                    Item::Flush(done) => flushed.push(done),
                    Item::Change(seq, change) => {
                        apply(&tx, change, &mut charges)?;
                        last = Some(seq);
                    }
                }
            }
            charges.apply(&tx)?;
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

/// What a batch's rows charge to budgets, summed per window: one upsert per budget a batch,
/// however many rows charged it.
#[derive(Default)]
struct Charges(std::collections::HashMap<super::Charge, i64>);

impl Charges {
    fn add(&mut self, charge: super::Charge, pico: i64) {
        let sum = self.0.entry(charge).or_default();
        *sum = sum.saturating_add(pico);
    }

    /// Each sum added to its window (in window order); a newer window starts over, an older
    /// one is past.
    fn apply(self, tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
        let mut sums: Vec<_> = self.0.into_iter().collect();
        sums.sort_by_key(|(charge, _)| charge.window_start);
        for (charge, pico) in sums {
            let Some(account) = charge.account.stored_name() else { continue };
            let (period, start) = (charge.period.to_string(), charge.window_start.0 as i64);
            tx.prepare_cached(
                "INSERT INTO budget_usage (account, period, window_start, pico) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT(account, period) DO UPDATE SET
                     pico = CASE WHEN excluded.window_start > window_start THEN excluded.pico
                                 WHEN excluded.window_start < window_start THEN pico
                                 -- Saturating: past i64 SQLite would store a float.
                                 WHEN pico > 9223372036854775807 - excluded.pico THEN 9223372036854775807
                                 ELSE pico + excluded.pico END,
                     window_start = MAX(window_start, excluded.window_start)",
            )?
            .execute(params![account, period, start, pico])?;
        }
        Ok(())
    }
}

fn apply(tx: &rusqlite::Transaction<'_>, change: Change, charges: &mut Charges) -> rusqlite::Result<()> {
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
        Change::Charged(row, charged) => {
            logs::insert(tx, &row)?;
            let pico = row.cost_usd.map_or(0, crate::domain::Usd::pico);
            for charge in charged {
                charges.add(charge, pico);
            }
        }
        Change::Response(stored) => responses::insert(tx, &stored)?,
        Change::DeleteResponse(owner, id) => responses::delete(tx, &owner, &id)?,
        Change::DeleteOwnerResponses(owner) => {
            let deleted = responses::delete_owner(tx, &owner)?;
            tracing::info!(deleted, "a deleted key's stored responses deleted");
        }
        Change::Audit(entry) => audit::insert(tx, &entry)?,
        Change::PruneAudit(before, max) => {
            let pruned = audit::prune(tx, before, max)?;
            if pruned > 0 {
                tracing::info!(pruned, "audit entries past their retention deleted");
            }
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

/// Applies the journal's entries the database has not seen; returns the last applied seq.
pub(super) fn replay(conn: &mut Connection, entries: Vec<(u64, Change)>) -> rusqlite::Result<u64> {
    let applied: u64 = conn
        .query_row("SELECT value FROM meta WHERE key = ?1", [APPLIED_KEY], |r| r.get::<_, String>(0))
        .optional()?
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let pending: Vec<(u64, Change)> = entries.into_iter().filter(|(seq, _)| *seq > applied).collect();
    let Some(last) = pending.iter().map(|(seq, _)| *seq).max() else { return Ok(applied) };
    tracing::info!(changes = pending.len(), "replaying the state journal");
    let tx = conn.transaction()?;
    let mut charges = Charges::default();
    for (_, change) in pending {
        apply(&tx, change, &mut charges)?;
    }
    charges.apply(&tx)?;
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
