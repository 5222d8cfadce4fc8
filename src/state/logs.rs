//! Request logs: one row per attempt (a fusion request writes one per candidate plus the
//! judge's, sharing a fusion id), written by the state writer, queried with filters and paging.

use rusqlite::{Connection, OptionalExtension, ToSql, params};
use serde::{Deserialize, Serialize};

use crate::domain::Usd;

// A plain INTEGER PRIMARY KEY (no AUTOINCREMENT) and a partial index on the rare fusion id keep
// an insert to three b-tree pages.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS request_logs (
    id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, request_id TEXT NOT NULL,
    key TEXT NOT NULL, route TEXT, mode TEXT NOT NULL, source TEXT NOT NULL, model TEXT NOT NULL,
    status INTEGER, error TEXT, message TEXT, first_byte_ms INTEGER, total_ms INTEGER NOT NULL,
    tokens_in INTEGER, tokens_out INTEGER, tokens_cached INTEGER, stream INTEGER NOT NULL,
    affinity_hit INTEGER NOT NULL, fusion_id TEXT, usage_estimated INTEGER NOT NULL DEFAULT 0)";

const COLUMNS_V5: &str = "id, at_ms, request_id, key, route, mode, source, model, status, error, message,
    first_byte_ms, total_ms, tokens_in, tokens_out, tokens_cached, stream, affinity_hit, fusion_id";

const INDEXES: &str = "CREATE INDEX IF NOT EXISTS request_logs_at ON request_logs (at_ms);
    CREATE INDEX IF NOT EXISTS request_logs_request ON request_logs (request_id);
    DROP INDEX IF EXISTS request_logs_fusion;
    CREATE INDEX IF NOT EXISTS request_logs_fusion_set ON request_logs (fusion_id) WHERE fusion_id IS NOT NULL;";

/// Creates the log table, or brings one from an earlier version (AUTOINCREMENT, a full
/// fusion index, no `usage_estimated`) to the current shape, keeping its rows and ids.
pub fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let existing: Option<String> = conn
        .query_row("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'request_logs'", [], |r| r.get(0))
        .optional()?;
    if existing.is_some_and(|sql| sql.contains("AUTOINCREMENT")) {
        conn.execute_batch(&format!(
            "BEGIN;
             ALTER TABLE request_logs RENAME TO request_logs_v4;
             DROP INDEX IF EXISTS request_logs_at; DROP INDEX IF EXISTS request_logs_request;
             DROP INDEX IF EXISTS request_logs_fusion;
             {TABLE};
             INSERT INTO request_logs ({COLUMNS_V5}) SELECT * FROM request_logs_v4;
             DROP TABLE request_logs_v4;
             DELETE FROM sqlite_sequence WHERE name IN ('request_logs', 'request_logs_v4');
             COMMIT;"
        ))?;
    }
    conn.execute_batch(TABLE)?;
    super::schema::add_column(conn, "request_logs", "usage_estimated", "INTEGER NOT NULL DEFAULT 0")?;
    super::schema::add_column(conn, "request_logs", "replica", "TEXT")?;
    super::schema::add_column(conn, "request_logs", "tokens_cache_write", "INTEGER")?;
    super::schema::add_column(conn, "request_logs", "cost_pico", "INTEGER")?;
    super::schema::add_column(conn, "request_logs", "cost_estimated", "INTEGER NOT NULL DEFAULT 0")?;
    super::schema::add_column(conn, "request_logs", "cost_unknown", "INTEGER NOT NULL DEFAULT 0")?;
    super::schema::add_column(conn, "request_logs", "cache_hit", "INTEGER NOT NULL DEFAULT 0")?;
    super::schema::add_column(conn, "request_logs", "policy", "TEXT")?;
    conn.execute_batch(INDEXES)
}

/// One attempt as it ended.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LogRow {
    #[serde(default)]
    pub id: i64,
    pub at_ms: u64,
    pub request_id: String,
    pub key: String,
    pub route: Option<String>,
    /// `model`, `auto`, or a route's mode: `direct`, `auto-select`, `adapter`, `fusion`.
    pub mode: String,
    pub source: String,
    pub model: String,
    /// What the attempt amounted to in HTTP terms (200 for an answer).
    pub status: Option<u16>,
    /// Error code (`rate_limited`, `upstream_timeout`, `stream_truncated`, `client_closed`...).
    pub error: Option<String>,
    pub message: Option<String>,
    pub first_byte_ms: Option<u64>,
    pub total_ms: u64,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    pub tokens_cached: Option<u64>,
    pub stream: bool,
    pub affinity_hit: bool,
    pub fusion_id: Option<String>,
    /// The tokens are the gateway's estimate: the upstream reported no usage (or the client
    /// hung up before it came).
    #[serde(default)]
    pub usage_estimated: bool,
    /// The replica that served it (`shared_state.replica`); none for a gateway on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Prompt tokens written to the upstream's cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_cache_write: Option<u64>,
    /// What the attempt cost, in USD (an exact decimal string); none for an unpriced model or
    /// an attempt that generated nothing billable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<Usd>,
    /// The cost is (partly) an estimate: estimated tokens, or an image variant without a price.
    #[serde(default)]
    pub cost_estimated: bool,
    /// The model has no price: what it cost is not known (never logged as $0).
    #[serde(default)]
    pub cost_unknown: bool,
    /// Answered from the response cache (source `cache`): nothing went upstream.
    #[serde(default)]
    pub cache_hit: bool,
    /// What policies did to it: `NAME:HOOK:ACTION` entries joined by `, ` (e.g.
    /// `pii:request:rewrite`); never the text they saw or changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

pub fn insert(conn: &Connection, r: &LogRow) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO request_logs (at_ms, request_id, key, route, mode, source, model, status, error, message,
             first_byte_ms, total_ms, tokens_in, tokens_out, tokens_cached, stream, affinity_hit, fusion_id,
             usage_estimated, replica, tokens_cache_write, cost_pico, cost_estimated, cost_unknown, cache_hit,
             policy)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22,
             ?23, ?24, ?25, ?26)",
    )?
    .execute(params![
        r.at_ms as i64,
        r.request_id,
        r.key,
        r.route,
        r.mode,
        r.source,
        r.model,
        r.status,
        r.error,
        r.message,
        r.first_byte_ms.map(|v| v as i64),
        r.total_ms as i64,
        r.tokens_in.map(|v| v as i64),
        r.tokens_out.map(|v| v as i64),
        r.tokens_cached.map(|v| v as i64),
        r.stream,
        r.affinity_hit,
        r.fusion_id,
        r.usage_estimated,
        r.replica,
        r.tokens_cache_write.map(|v| v as i64),
        r.cost_usd.map(Usd::pico),
        r.cost_estimated,
        r.cost_unknown,
        r.cache_hit,
        r.policy
    ])?;
    Ok(())
}

/// Filters of the log query; every one optional. Newest first.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    pub key: Option<String>,
    pub route: Option<String>,
    pub mode: Option<String>,
    pub source: Option<String>,
    pub model: Option<String>,
    pub status: Option<u16>,
    /// `true`: only rows with an error; `false`: only without.
    pub errors: Option<bool>,
    pub request_id: Option<String>,
    pub fusion_id: Option<String>,
    pub replica: Option<String>,
    /// `true`: only answers from the response cache; `false`: only the others.
    pub cache_hit: Option<bool>,
    /// `true`: only rows a policy acted on (rewrote, refused, or failed); `false`: the others.
    pub policy: Option<bool>,
    pub since_ms: Option<u64>,
    pub until_ms: Option<u64>,
    pub limit: Option<u32>,
    pub offset: Option<u32>,
}

pub const MAX_PAGE: u32 = 500;

/// A page of rows and how many match in all.
#[derive(Debug, Serialize)]
pub struct LogPage {
    pub total: u64,
    pub limit: u32,
    pub offset: u32,
    pub rows: Vec<LogRow>,
}

pub fn query(conn: &Connection, q: &LogQuery) -> rusqlite::Result<LogPage> {
    let mut clauses: Vec<&str> = Vec::new();
    let mut args: Vec<Box<dyn ToSql>> = Vec::new();
    let mut text = |clause: &'static str, value: &Option<String>, clauses: &mut Vec<&str>| {
        if let Some(v) = value {
            clauses.push(clause);
            args.push(Box::new(v.clone()));
        }
    };
    text("key = ?", &q.key, &mut clauses);
    text("route = ?", &q.route, &mut clauses);
    text("mode = ?", &q.mode, &mut clauses);
    text("source = ?", &q.source, &mut clauses);
    text("model = ?", &q.model, &mut clauses);
    text("request_id = ?", &q.request_id, &mut clauses);
    text("fusion_id = ?", &q.fusion_id, &mut clauses);
    text("replica = ?", &q.replica, &mut clauses);
    if let Some(status) = q.status {
        clauses.push("status = ?");
        args.push(Box::new(status));
    }
    match q.cache_hit {
        Some(true) => clauses.push("cache_hit = 1"),
        Some(false) => clauses.push("cache_hit = 0"),
        None => {}
    }
    match q.policy {
        Some(true) => clauses.push("policy IS NOT NULL"),
        Some(false) => clauses.push("policy IS NULL"),
        None => {}
    }
    match q.errors {
        Some(true) => clauses.push("error IS NOT NULL"),
        Some(false) => clauses.push("error IS NULL"),
        None => {}
    }
    if let Some(since) = q.since_ms {
        clauses.push("at_ms >= ?");
        args.push(Box::new(since as i64));
    }
    if let Some(until) = q.until_ms {
        clauses.push("at_ms < ?");
        args.push(Box::new(until as i64));
    }
    let filter = if clauses.is_empty() { String::new() } else { format!(" WHERE {}", clauses.join(" AND ")) };
    let refs: Vec<&dyn ToSql> = args.iter().map(|a| a.as_ref()).collect();
    let total: i64 =
        conn.query_row(&format!("SELECT COUNT(*) FROM request_logs{filter}"), refs.as_slice(), |r| r.get(0))?;
    let limit = q.limit.unwrap_or(100).clamp(1, MAX_PAGE);
    let offset = q.offset.unwrap_or(0);
    let sql = format!(
        "SELECT id, at_ms, request_id, key, route, mode, source, model, status, error, message, first_byte_ms,
             total_ms, tokens_in, tokens_out, tokens_cached, stream, affinity_hit, fusion_id, usage_estimated, replica,
             tokens_cache_write, cost_pico, cost_estimated, cost_unknown, cache_hit, policy
         FROM request_logs{filter} ORDER BY id DESC LIMIT {limit} OFFSET {offset}"
    );
    let mut stmt = conn.prepare(&sql)?;
    let opt = |v: Option<i64>| v.map(|v| v as u64);
    let rows = stmt
        .query_map(refs.as_slice(), |r| {
            Ok(LogRow {
                id: r.get(0)?,
                at_ms: r.get::<_, i64>(1)? as u64,
                request_id: r.get(2)?,
                key: r.get(3)?,
                route: r.get(4)?,
                mode: r.get(5)?,
                source: r.get(6)?,
                model: r.get(7)?,
                status: r.get(8)?,
                error: r.get(9)?,
                message: r.get(10)?,
                first_byte_ms: opt(r.get(11)?),
                total_ms: r.get::<_, i64>(12)? as u64,
                tokens_in: opt(r.get(13)?),
                tokens_out: opt(r.get(14)?),
                tokens_cached: opt(r.get(15)?),
                stream: r.get(16)?,
                affinity_hit: r.get(17)?,
                fusion_id: r.get(18)?,
                usage_estimated: r.get(19)?,
                replica: r.get(20)?,
                tokens_cache_write: opt(r.get(21)?),
                cost_usd: r.get::<_, Option<i64>>(22)?.map(Usd::from_pico),
                cost_estimated: r.get(23)?,
                cost_unknown: r.get(24)?,
                cache_hit: r.get(25)?,
                policy: r.get(26)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(LogPage { total: total as u64, limit, offset, rows })
}

/// Per (source, model) since a moment: requests, errors, tokens and latencies.
pub fn stats(conn: &Connection, since_ms: u64) -> rusqlite::Result<Vec<serde_json::Value>> {
    let mut stmt = conn.prepare(
        "SELECT source, model, COUNT(*), SUM(error IS NOT NULL), SUM(COALESCE(tokens_in, 0)),
             SUM(COALESCE(tokens_out, 0)), AVG(first_byte_ms), AVG(total_ms), SUM(COALESCE(cost_pico, 0)),
             SUM(cost_unknown), SUM(cost_estimated)
         FROM request_logs WHERE at_ms >= ?1 GROUP BY source, model ORDER BY source, model",
    )?;
    let rows = stmt.query_map([since_ms as i64], |r| {
        Ok(serde_json::json!({
            "source": r.get::<_, String>(0)?, "model": r.get::<_, String>(1)?,
            "requests": r.get::<_, i64>(2)?, "errors": r.get::<_, i64>(3)?,
            "tokens_in": r.get::<_, i64>(4)?, "tokens_out": r.get::<_, i64>(5)?,
            "avg_first_byte_ms": r.get::<_, Option<f64>>(6)?.map(f64::round),
            "avg_total_ms": r.get::<_, Option<f64>>(7)?.map(f64::round),
            "cost_usd": Usd::from_pico(r.get(8)?),
            "cost_unknown": r.get::<_, i64>(9)?, "cost_estimated": r.get::<_, i64>(10)?,
        }))
    })?;
    rows.collect()
}

/// What spend is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpendBy {
    Key,
    Source,
    Model,
    /// UTC days.
    Day,
}

/// Spend of one group (a key, a source, a model, a day) in a range of the logs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendRow {
    /// The key, source, `source/model`, or the day (`YYYY-MM-DD`).
    pub name: String,
    pub cost_usd: Usd,
    pub requests: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Attempts whose cost is (partly) an estimate.
    pub estimated: u64,
    /// Attempts of models without a price: not in `cost_usd`.
    pub unpriced: u64,
}

/// Spend in `[since, until)` grouped `by`, dearest first (days in order), summed exactly.
pub fn spend(conn: &Connection, by: SpendBy, since_ms: u64, until_ms: u64) -> rusqlite::Result<Vec<SpendRow>> {
    let group = match by {
        SpendBy::Key => "key",
        SpendBy::Source => "source",
        SpendBy::Model => "source || '/' || model",
        SpendBy::Day => "at_ms / 86400000",
    };
    let order = if by == SpendBy::Day { "1" } else { "2 DESC, 1" };
    let mut stmt = conn.prepare(&format!(
        "SELECT {group}, SUM(COALESCE(cost_pico, 0)), COUNT(*), SUM(COALESCE(tokens_in, 0)), SUM(COALESCE(tokens_out, 0)),
             SUM(cost_estimated), SUM(cost_unknown)
         FROM request_logs WHERE at_ms >= ?1 AND at_ms < ?2 GROUP BY 1 ORDER BY {order} LIMIT 1000"
    ))?;
    let rows = stmt.query_map([since_ms.min(i64::MAX as u64) as i64, until_ms.min(i64::MAX as u64) as i64], |r| {
        let name = match by {
            SpendBy::Day => {
                let day = r.get::<_, i64>(0)?;
                chrono::DateTime::from_timestamp(day * 86_400, 0)
                    .map_or(day.to_string(), |d| d.format("%Y-%m-%d").to_string())
            }
            _ => r.get(0)?,
        };
        Ok(SpendRow {
            name,
            cost_usd: Usd::from_pico(r.get(1)?),
            requests: r.get::<_, i64>(2)? as u64,
            tokens_in: r.get::<_, i64>(3)? as u64,
            tokens_out: r.get::<_, i64>(4)? as u64,
            estimated: r.get::<_, i64>(5)? as u64,
            unpriced: r.get::<_, i64>(6)? as u64,
        })
    })?;
    rows.collect()
}

/// Models without a price that served traffic since `since_ms`: (source, model, attempts, last).
pub fn unpriced(conn: &Connection, since_ms: u64) -> rusqlite::Result<Vec<(String, String, u64, u64)>> {
    let mut stmt = conn.prepare(
        "SELECT source, model, COUNT(*), MAX(at_ms) FROM request_logs WHERE cost_unknown = 1 AND at_ms >= ?1
         GROUP BY source, model ORDER BY 3 DESC LIMIT 500",
    )?;
    let rows = stmt.query_map([since_ms.min(i64::MAX as u64) as i64], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get::<_, i64>(2)? as u64, r.get::<_, i64>(3)? as u64))
    })?;
    rows.collect()
}

/// Most buckets one series answer may have.
pub const MAX_BUCKETS: u32 = 500;

/// One stretch of a time series of the logs (the WebUI's overview charts).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Bucket {
    pub at_ms: u64,
    pub requests: u64,
    pub errors: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub p50_ms: Option<u64>,
    pub p95_ms: Option<u64>,
}

/// Latencies read for the percentiles of one series at most: past this many attempts in the
/// range, an even sample of them (by row id) stands for the rest.
pub const MAX_PERCENTILE_ROWS: u64 = 100_000;

/// `[since, until)` cut into at most `count` equal buckets: attempts, errors and tokens of
/// each summed by SQLite over the time index, and the latency percentiles, exact up to
/// `MAX_PERCENTILE_ROWS` attempts in the range and from an even sample past that.
pub fn series(conn: &Connection, since_ms: u64, until_ms: u64, count: u32) -> rusqlite::Result<Vec<Bucket>> {
    let grid = Grid::new(since_ms, until_ms, count);
    let mut buckets = grid.empty();
    let (since, until, width) = (since_ms as i64, until_ms as i64, grid.width as i64);
    let mut sums = conn.prepare_cached(
        "SELECT (at_ms - ?1) / ?3, COUNT(*), SUM(error IS NOT NULL), SUM(COALESCE(tokens_in, 0)),
             SUM(COALESCE(tokens_out, 0))
         FROM request_logs WHERE at_ms >= ?1 AND at_ms < ?2 GROUP BY 1",
    )?;
    let mut attempts = 0u64;
    let rows = sums.query_map([since, until, width], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?, r.get::<_, i64>(4)?))
    })?;
    for row in rows {
        let (i, n, errors, tokens_in, tokens_out) = row?;
        if let Some(b) = buckets.get_mut(i as usize) {
            b.requests = n as u64;
            b.errors = errors as u64;
            b.tokens_in = tokens_in.max(0) as u64;
            b.tokens_out = tokens_out.max(0) as u64;
            attempts += n as u64;
        }
    }
    let every = attempts.div_ceil(MAX_PERCENTILE_ROWS).max(1) as i64;
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); buckets.len()];
    let mut times = conn.prepare_cached(
        "SELECT (at_ms - ?1) / ?3, total_ms FROM request_logs WHERE at_ms >= ?1 AND at_ms < ?2 AND id % ?4 = 0",
    )?;
    let rows = times.query_map([since, until, width, every], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?;
    for row in rows {
        let (i, ms) = row?;
        if let Some(l) = latencies.get_mut(i as usize) {
            l.push(ms.max(0) as u64);
        }
    }
    for (b, mut l) in buckets.iter_mut().zip(latencies) {
        l.sort_unstable();
        b.p50_ms = percentile(&l, 50);
        b.p95_ms = percentile(&l, 95);
    }
    Ok(buckets)
}

/// How `[since, until)` is cut: buckets of `width` ms, as many as cover the range (at most
/// the count asked for, at least one), the last one ending at or past `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    pub since: u64,
    pub width: u64,
    pub count: u64,
}

impl Grid {
    pub fn new(since_ms: u64, until_ms: u64, count: u32) -> Grid {
        let wanted = count.clamp(1, MAX_BUCKETS) as u64;
        let span = until_ms.saturating_sub(since_ms).max(1);
        let width = span.div_ceil(wanted);
        Grid { since: since_ms, width, count: span.div_ceil(width) }
    }

    fn empty(&self) -> Vec<Bucket> {
        (0..self.count)
            .map(|i| Bucket { at_ms: self.since.saturating_add(i * self.width), ..Bucket::default() })
            .collect()
    }
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[u64], p: u64) -> Option<u64> {
    let rank = (sorted.len() as u64 * p).div_ceil(100).max(1);
    sorted.get(rank as usize - 1).copied()
}

/// Deletes rows older than `before_ms`; returns how many.
pub fn prune(conn: &Connection, before_ms: u64) -> rusqlite::Result<usize> {
    conn.execute("DELETE FROM request_logs WHERE at_ms < ?1", [before_ms as i64])
}

#[cfg(test)]
mod series_tests {
    use super::*;

    fn db(rows: &[(u64, u64, bool)]) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        migrate(&conn).unwrap();
        for (i, (at_ms, total_ms, error)) in rows.iter().enumerate() {
            conn.execute(
                "INSERT INTO request_logs (at_ms, request_id, key, mode, source, model, status, error, total_ms,
                     tokens_in, tokens_out, stream, affinity_hit) VALUES (?1, ?2, 'k', 'model', 's', 'm', 200, ?3, ?4, 10, 5, 0, 0)",
                rusqlite::params![*at_ms as i64, format!("r{i}"), error.then_some("boom"), *total_ms as i64],
            )
            .unwrap();
        }
        conn
    }

    #[test]
    fn attempts_fall_into_their_bucket_with_exact_percentiles() {
        let mut rows: Vec<(u64, u64, bool)> = (1..=100).map(|ms| (1_000 + ms, ms, ms > 98)).collect();
        rows.push((1_999, 7, false));
        rows.push((999, 1, false)); // before the range
        rows.push((2_000, 1, false)); // its end is open
        let b = series(&db(&rows), 1_000, 2_000, 2).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].at_ms, b[1].at_ms), (1_000, 1_500));
        assert_eq!((b[0].requests, b[0].errors, b[0].tokens_in, b[0].tokens_out), (100, 2, 1_000, 500));
        assert_eq!((b[0].p50_ms, b[0].p95_ms), (Some(50), Some(95)));
        assert_eq!((b[1].requests, b[1].p50_ms, b[1].p95_ms), (1, Some(7), Some(7)));
    }

    #[test]
    fn buckets_cover_the_range_and_never_start_past_its_end() {
        for (since, until, count) in [(0, 10, 60), (0, 1_001, 500), (5, 5, 3), (0, 3_600_000, 60), (7, 8, 0)] {
            let grid = Grid::new(since, until, count);
            assert!(grid.count >= 1 && grid.count <= MAX_BUCKETS as u64, "{grid:?}");
            assert!(grid.count <= count.max(1) as u64, "never more than asked: {grid:?}");
            assert!(since + (grid.count - 1) * grid.width < until.max(since + 1), "{grid:?}");
            assert!(since + grid.count * grid.width >= until, "the range is covered: {grid:?}");
        }
        assert_eq!(Grid::new(0, 3_600_000, 60).width, 60_000);
        let b = series(&db(&[]), 0, 10, 60).unwrap();
        assert_eq!(b.len(), 10);
        assert!(b.iter().all(|b| b.requests == 0 && b.p50_ms.is_none()));
    }

    #[test]
    fn the_largest_ranges_neither_overflow_nor_wrap() {
        let top = i64::MAX as u64;
        let grid = Grid::new(top - 2, top, 3);
        assert_eq!((grid.width, grid.count), (1, 2));
        assert_eq!(series(&db(&[(top - 1, 5, false)]), top - 2, top, 3).unwrap()[1].requests, 1);
        assert_eq!(series(&db(&[(3, 5, false)]), 0, top, 500).unwrap()[0].requests, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_4_log_table_is_rebuilt_without_autoincrement_keeping_its_rows() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE request_logs (
                id INTEGER PRIMARY KEY AUTOINCREMENT, at_ms INTEGER NOT NULL, request_id TEXT NOT NULL,
                key TEXT NOT NULL, route TEXT, mode TEXT NOT NULL, source TEXT NOT NULL, model TEXT NOT NULL,
                status INTEGER, error TEXT, message TEXT, first_byte_ms INTEGER, total_ms INTEGER NOT NULL,
                tokens_in INTEGER, tokens_out INTEGER, tokens_cached INTEGER, stream INTEGER NOT NULL,
                affinity_hit INTEGER NOT NULL, fusion_id TEXT);
             CREATE INDEX request_logs_fusion ON request_logs (fusion_id);",
        )
        .unwrap();
        conn.execute_batch(
            "INSERT INTO request_logs (at_ms, request_id, key, mode, source, model, total_ms, stream, affinity_hit)
                 VALUES (5, 'r1', 'k', 'model', '', '', 0, 0, 0);
             INSERT INTO request_logs (at_ms, request_id, key, mode, source, model, total_ms, stream, affinity_hit,
                 fusion_id) VALUES (5, 'r1', 'k', 'model', '', '', 0, 0, 0, 'f1');",
        )
        .unwrap();
        let row =
            LogRow { at_ms: 5, request_id: "r1".into(), key: "k".into(), mode: "model".into(), ..LogRow::default() };

        migrate(&conn).unwrap();
        migrate(&conn).unwrap();

        let sql: String =
            conn.query_row("SELECT sql FROM sqlite_master WHERE name = 'request_logs'", [], |r| r.get(0)).unwrap();
        assert!(!sql.contains("AUTOINCREMENT"), "{sql}");
        let page = query(&conn, &LogQuery { fusion_id: Some("f1".into()), ..LogQuery::default() }).unwrap();
        assert_eq!((page.total, page.rows[0].id, page.rows[0].usage_estimated), (1, 2, false));
        insert(&conn, &LogRow { usage_estimated: true, ..row }).unwrap();
        assert!(query(&conn, &LogQuery::default()).unwrap().rows[0].usage_estimated);
        let ids: Vec<i64> = query(&conn, &LogQuery::default()).unwrap().rows.iter().map(|r| r.id).collect();
        assert_eq!(ids, vec![3, 2, 1]);
        let plan: String = conn
            .query_row("EXPLAIN QUERY PLAN SELECT id FROM request_logs WHERE fusion_id = 'f1'", [], |r| r.get(3))
            .unwrap();
        assert!(plan.contains("request_logs_fusion_set"), "{plan}");
    }
}
