//! Stored Responses (`store: true`): each turn's input and output items, linked to the turn
//! before by `previous_response_id`, kept per gateway key until their retention ends.

use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};

const TABLE: &str = "CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY, key TEXT NOT NULL, created_ms INTEGER NOT NULL, previous TEXT,
    items TEXT NOT NULL, response TEXT NOT NULL);
    CREATE INDEX IF NOT EXISTS responses_created ON responses (created_ms);";

pub fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(TABLE)
}

/// One turn as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The `response` id the client got.
    pub id: String,
    /// The gateway key that made it: only that key may read or continue it.
    pub key: String,
    pub created_ms: u64,
    /// The turn it continued.
    pub previous: Option<String>,
    /// This turn's input items then its output items (a JSON array of Responses items).
    pub items: String,
    /// The `response` object as answered (for `GET /v1/responses/{id}`).
    pub response: String,
}

pub fn insert(tx: &rusqlite::Transaction<'_>, r: &StoredResponse) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO responses (id, key, created_ms, previous, items, response) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT(id) DO UPDATE SET key = ?2, created_ms = ?3, previous = ?4, items = ?5, response = ?6",
    )?
    .execute(params![r.id, r.key, r.created_ms as i64, r.previous, r.items, r.response])?;
    Ok(())
}

pub fn delete(tx: &rusqlite::Transaction<'_>, id: &str) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM responses WHERE id = ?1")?.execute([id])?;
    Ok(())
}

pub fn prune(tx: &rusqlite::Transaction<'_>, before_ms: u64) -> rusqlite::Result<usize> {
    tx.prepare_cached("DELETE FROM responses WHERE created_ms < ?1")?.execute([before_ms as i64])
}

pub fn get(conn: &Connection, id: &str) -> rusqlite::Result<Option<StoredResponse>> {
    conn.query_row("SELECT id, key, created_ms, previous, items, response FROM responses WHERE id = ?1", [id], |r| {
        Ok(StoredResponse {
            id: r.get(0)?,
            key: r.get(1)?,
            created_ms: r.get::<_, i64>(2)? as u64,
            previous: r.get(3)?,
            items: r.get(4)?,
            response: r.get(5)?,
        })
    })
    .optional()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_stored_read_back_replaced_and_pruned() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        let turn = StoredResponse {
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
        tx.commit().unwrap();
        assert_eq!(get(&conn, "resp_1").unwrap(), Some(turn));
        assert_eq!(get(&conn, "resp_2").unwrap().unwrap().previous.as_deref(), Some("resp_1"));
        let tx = conn.transaction().unwrap();
        assert_eq!(prune(&tx, 2000).unwrap(), 1);
        delete(&tx, "resp_2").unwrap();
        tx.commit().unwrap();
        assert_eq!((get(&conn, "resp_1").unwrap(), get(&conn, "resp_2").unwrap()), (None, None));
    }
}
