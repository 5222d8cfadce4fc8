//! The audit trail's table: entries appended (a copy from another replica is stored once), read
//! back newest first by filter, and pruned by age and count. Rows are never updated.

use rusqlite::{Connection, OptionalExtension, params};

use crate::access::{AuditEntry, AuditQuery, MAX_AUDIT_PAGE};

pub fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS audit (
             id TEXT PRIMARY KEY, at_ms INTEGER NOT NULL, actor TEXT NOT NULL, outcome TEXT NOT NULL,
             path TEXT NOT NULL, entry TEXT NOT NULL);
         CREATE INDEX IF NOT EXISTS audit_at ON audit (at_ms);
         CREATE TRIGGER IF NOT EXISTS audit_append_only BEFORE UPDATE ON audit
             BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;",
    )
}

pub fn insert(conn: &Connection, entry: &AuditEntry) -> rusqlite::Result<()> {
    let json = serde_json::to_string(entry).unwrap_or_default();
    conn.prepare_cached(
        "INSERT OR IGNORE INTO audit (id, at_ms, actor, outcome, path, entry) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![entry.id, entry.at_ms as i64, entry.actor, entry.outcome.as_str(), entry.path, json])?;
    Ok(())
}

/// Deletes entries older than `before_ms`, then the oldest past `max_entries`.
pub fn prune(conn: &Connection, before_ms: u64, max_entries: u64) -> rusqlite::Result<usize> {
    let mut pruned = conn.execute("DELETE FROM audit WHERE at_ms < ?1", [before_ms as i64])?;
    let cutoff: Option<i64> = conn
        .query_row("SELECT at_ms FROM audit ORDER BY at_ms DESC LIMIT 1 OFFSET ?1", [max_entries as i64], |r| r.get(0))
        .optional()?;
    if let Some(cutoff) = cutoff {
        pruned += conn.execute("DELETE FROM audit WHERE at_ms <= ?1", [cutoff])?;
    }
    Ok(pruned)
}

/// A page of entries, newest first, and where the next page ends (exclusive).
#[derive(Debug, serde::Serialize)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    pub next_until_ms: Option<u64>,
}

pub fn query(conn: &Connection, q: &AuditQuery) -> rusqlite::Result<AuditPage> {
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_AUDIT_PAGE) as usize;
    let mut stmt = conn.prepare_cached(
        "SELECT entry FROM audit
         WHERE (?1 IS NULL OR actor = ?1) AND (?2 IS NULL OR outcome = ?2) AND (?3 IS NULL OR instr(path, ?3) > 0)
           AND at_ms >= ?4 AND at_ms < ?5
         ORDER BY at_ms DESC, id DESC LIMIT ?6",
    )?;
    let rows: Vec<String> = stmt
        .query_map(
            params![
                q.actor,
                q.outcome.map(|o| o.as_str()),
                q.path,
                q.since_ms.unwrap_or(0).min(i64::MAX as u64) as i64,
                q.until_ms.unwrap_or(i64::MAX as u64).min(i64::MAX as u64) as i64,
                (limit + 1) as i64
            ],
            |r| r.get(0),
        )?
        .collect::<rusqlite::Result<_>>()?;
    // A row that does not read (written by a later version) is left out, not an error.
    let mut entries: Vec<AuditEntry> = rows.iter().filter_map(|r| serde_json::from_str(r).ok()).collect();
    let mut next_until_ms = None;
    if rows.len() > limit {
        let first_left_out = entries.get(limit).map(|e| e.at_ms);
        entries.truncate(limit);
        let last = entries.last().map_or(0, |e| e.at_ms);
        next_until_ms = Some(last);
        // A millisecond the page would split moves whole to the next page (unless it is all of it).
        let kept = entries.iter().take_while(|e| e.at_ms != last).count();
        if first_left_out == Some(last) && kept > 0 {
            entries.truncate(kept);
            next_until_ms = Some(last + 1);
        }
    }
    Ok(AuditPage { entries, next_until_ms })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Outcome;

    fn entry(id: &str, at_ms: u64, actor: &str, outcome: Outcome, path: &str) -> AuditEntry {
        AuditEntry {
            id: id.into(),
            at_ms,
            actor: actor.into(),
            via: "token".into(),
            role: None,
            peer: None,
            replica: None,
            method: "PUT".into(),
            path: path.into(),
            outcome,
            status: 200,
            changes: vec![],
            note: None,
        }
    }

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        conn
    }

    #[test]
    fn entries_filter_page_and_are_never_updated() {
        let conn = db();
        for i in 0..10u64 {
            let actor = if i % 2 == 0 { "alice" } else { "bob" };
            insert(
                &conn,
                &entry(&format!("e{i}"), 1000 + i, actor, Outcome::Done, &format!("/admin/api/sources/s{i}")),
            )
            .unwrap();
        }
        insert(&conn, &entry("e0", 5, "mallory", Outcome::Done, "/x")).unwrap();
        let all = query(&conn, &AuditQuery::default()).unwrap();
        assert_eq!(all.entries.len(), 10, "a copy with the same id is stored once");
        assert_eq!(all.entries[0].id, "e9", "newest first");
        let alice = query(&conn, &AuditQuery { actor: Some("alice".into()), ..Default::default() }).unwrap();
        assert!(alice.entries.iter().all(|e| e.actor == "alice") && alice.entries.len() == 5);
        let by_path = query(&conn, &AuditQuery { path: Some("/s3".into()), ..Default::default() }).unwrap();
        assert_eq!(by_path.entries.len(), 1);
        let page = query(&conn, &AuditQuery { limit: Some(4), ..Default::default() }).unwrap();
        assert_eq!((page.entries.len(), page.next_until_ms), (4, Some(1006)));
        let next = query(&conn, &AuditQuery { limit: Some(4), until_ms: page.next_until_ms, ..Default::default() });
        assert_eq!(next.unwrap().entries[0].id, "e5");
        let updated = conn.execute("UPDATE audit SET actor = 'nobody'", []);
        assert!(updated.unwrap_err().to_string().contains("append-only"));
    }

    #[test]
    fn a_page_never_splits_one_millisecond() {
        let conn = db();
        for i in 0..5u64 {
            insert(&conn, &entry(&format!("a{i}"), 1000 + (i >= 2) as u64, "x", Outcome::Done, "/p")).unwrap();
        }
        // Newest first: three at 1001, then two at 1000, which a page of 4 would split.
        let page = query(&conn, &AuditQuery { limit: Some(4), ..Default::default() }).unwrap();
        assert_eq!((page.entries.len(), page.next_until_ms), (3, Some(1001)));
        let rest = query(&conn, &AuditQuery { limit: Some(4), until_ms: page.next_until_ms, ..Default::default() });
        let rest = rest.unwrap();
        assert_eq!(rest.entries.len(), 2);
    }

    #[test]
    fn pruning_keeps_the_newest_within_age_and_count() {
        let conn = db();
        for i in 0..20u64 {
            insert(&conn, &entry(&format!("p{i}"), 100 + i, "x", Outcome::Refused, "/p")).unwrap();
        }
        assert_eq!(prune(&conn, 105, 1000).unwrap(), 5);
        assert_eq!(prune(&conn, 0, 10).unwrap(), 5);
        let left = query(&conn, &AuditQuery::default()).unwrap();
        assert_eq!(left.entries.len(), 10);
        assert_eq!(left.entries.last().unwrap().id, "p10");
    }
}
