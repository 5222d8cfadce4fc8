//! Stored Responses (`store: true`): each turn's input and output items, linked to the turn
//! before by `previous_response_id`, kept per gateway key (by its id) until their retention ends.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

// Turns are owned by the key's id (from its secret), not its name: a new key given an old
// key's name reads nothing of the old one's. `responses`, keyed by the turn id alone and owned
// by a name, is what earlier versions kept: dropped.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS stored_turns (
    owner TEXT NOT NULL, id TEXT NOT NULL, key TEXT NOT NULL, created_ms INTEGER NOT NULL,
    previous TEXT, items TEXT NOT NULL, response TEXT NOT NULL, bytes INTEGER NOT NULL,
    PRIMARY KEY (owner, id));
    CREATE INDEX IF NOT EXISTS stored_turns_created ON stored_turns (created_ms);
    CREATE INDEX IF NOT EXISTS stored_turns_owner ON stored_turns (owner, created_ms);
    DROP TABLE IF EXISTS responses;";

pub fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(TABLE)
}

/// One turn as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The id of the gateway key that made it: only that key may read or continue it.
    pub owner: String,
    /// The `response` id the client got (unique per owner).
    pub id: String,
    /// The key's name when it was stored (for operators).
    pub key: String,
    pub created_ms: u64,
    /// The turn it continued.
    pub previous: Option<String>,
    /// This turn's input items then its output items (a JSON array of Responses items).
    pub items: String,
    /// The `response` object as answered (for `GET /v1/responses/{id}`).
    pub response: String,
}

impl StoredResponse {
    /// What it takes on disk, as counted against its key's stored bytes.
    pub fn bytes(&self) -> u64 {
        (self.items.len() + self.response.len()) as u64
    }
}

pub fn insert(tx: &rusqlite::Transaction<'_>, r: &StoredResponse) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO stored_turns (owner, id, key, created_ms, previous, items, response, bytes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT(owner, id) DO UPDATE SET key = ?3, created_ms = ?4, previous = ?5, items = ?6, response = ?7, bytes = ?8",
    )?
    .execute(params![r.owner, r.id, r.key, r.created_ms as i64, r.previous, r.items, r.response, r.bytes() as i64])?;
    Ok(())
}

pub fn delete(tx: &rusqlite::Transaction<'_>, owner: &str, id: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM stored_turns WHERE owner = ?1 AND id = ?2")?.execute([owner, id])?;
    Ok(())
}

/// Every turn of one key (the key was deleted).
pub fn delete_owner(tx: &rusqlite::Transaction<'_>, owner: &str) -> rusqlite::Result<usize> {
    tx.prepare_cached("DELETE FROM stored_turns WHERE owner = ?1")?.execute([owner])
}

pub fn prune(tx: &rusqlite::Transaction<'_>, before_ms: u64) -> rusqlite::Result<usize> {
    tx.prepare_cached("DELETE FROM stored_turns WHERE created_ms < ?1")?.execute([before_ms as i64])
}

pub fn get(conn: &Connection, owner: &str, id: &str) -> rusqlite::Result<Option<StoredResponse>> {
    conn.query_row(
        "SELECT owner, id, key, created_ms, previous, items, response FROM stored_turns WHERE owner = ?1 AND id = ?2",
        [owner, id],
        |r| {
            Ok(StoredResponse {
                owner: r.get(0)?,
                id: r.get(1)?,
                key: r.get(2)?,
                created_ms: r.get::<_, i64>(3)? as u64,
                previous: r.get(4)?,
                items: r.get(5)?,
                response: r.get(6)?,
            })
        },
    )
    .optional()
}

/// Bytes each owner stored since `since_ms`.
pub fn stored_bytes(conn: &Connection, since_ms: u64) -> rusqlite::Result<Vec<(String, u64)>> {
    let mut query = conn.prepare("SELECT owner, SUM(bytes) FROM stored_turns WHERE created_ms >= ?1 GROUP BY owner")?;
    let rows =
        query.query_map([since_ms as i64], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.max(0) as u64)))?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_stored_read_back_replaced_and_pruned() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        let turn = StoredResponse {
            owner: "k1".into(),
            id: "resp_1".into(),
            key: "alice".into(),
            created_ms: 1000,
            previous: None,
            items: "[]".into(),
            response: "{}".into(),
        };
        let tx = conn.transaction().unwrap();
        insert(&tx, &turn).unwrap();
        insert(
            &tx,
            &StoredResponse { id: "resp_2".into(), created_ms: 5000, previous: Some("resp_1".into()), ..turn.clone() },
        )
        .unwrap();
        // The same id under another owner is another turn: it moves nothing.
        insert(&tx, &StoredResponse { owner: "k2".into(), key: "bob".into(), ..turn.clone() }).unwrap();
        tx.commit().unwrap();
        assert_eq!(get(&conn, "k1", "resp_1").unwrap(), Some(turn.clone()));
        assert_eq!(get(&conn, "k2", "resp_1").unwrap().unwrap().key, "bob");
        assert_eq!(get(&conn, "k2", "resp_2").unwrap(), None, "another owner's id");
        assert_eq!(get(&conn, "k1", "resp_2").unwrap().unwrap().previous.as_deref(), Some("resp_1"));
        let mut bytes = stored_bytes(&conn, 0).unwrap();
        bytes.sort();
        assert_eq!(bytes, [("k1".to_string(), 2 * turn.bytes()), ("k2".to_string(), turn.bytes())]);
        assert_eq!(stored_bytes(&conn, 2000).unwrap(), [("k1".to_string(), turn.bytes())]);
        let tx = conn.transaction().unwrap();
        assert_eq!(prune(&tx, 2000).unwrap(), 2);
        delete(&tx, "k1", "resp_2").unwrap();
        tx.commit().unwrap();
        assert_eq!((get(&conn, "k1", "resp_1").unwrap(), get(&conn, "k1", "resp_2").unwrap()), (None, None));
        let tx = conn.transaction().unwrap();
        insert(&tx, &turn).unwrap();
        assert_eq!(delete_owner(&tx, "k1").unwrap(), 1);
    }
}
