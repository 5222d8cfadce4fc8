//! The response cache's entries in Redis, so replicas share hits: an entry per key with its
//! TTL, and an index by last use that keeps all entries under `cache.max_mb` (oldest out first).

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;

use super::Shared;
use crate::domain::UnixMs;

/// A lookup waits this long for Redis at most; past it, a miss.
const LOOKUP_TIMEOUT: Duration = Duration::from_millis(100);
/// Answers on their way to Redis at once, at most.
pub(super) const PUTS_IN_FLIGHT: usize = 64;

/// Stores an entry, counts its bytes, and evicts the least recently used until all fit.
/// KEYS: entry, index, sizes, bytes. ARGV: value, ttl ms, now ms, max bytes, id, entry prefix.
const PUT: &str = r"
local size = string.len(ARGV[1])
local old = redis.call('HGET', KEYS[3], ARGV[5])
if old then redis.call('DECRBY', KEYS[4], old) end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[5])
redis.call('HSET', KEYS[3], ARGV[5], size)
local total = redis.call('INCRBY', KEYS[4], size)
local max = tonumber(ARGV[4])
while total > max do
  local oldest = redis.call('ZPOPMIN', KEYS[2])
  if #oldest == 0 then break end
  local id = oldest[1]
  local held = tonumber(redis.call('HGET', KEYS[3], id) or '0')
  redis.call('HDEL', KEYS[3], id)
  redis.call('DEL', ARGV[6] .. id)
  total = redis.call('DECRBY', KEYS[4], held)
end
return total
";

/// Forgets every entry. KEYS: index, sizes, bytes. ARGV: entry prefix.
const PURGE: &str = r"
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
for _, id in ipairs(ids) do redis.call('DEL', ARGV[1] .. id) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
return #ids
";

impl Shared {
    async fn cache_connection(&self) -> Option<ConnectionManager> {
        self.conn.load_full().map(|c| ConnectionManager::clone(&c))
    }

    /// The entry stored under `id`, touched as just used; `None` on a miss, or when Redis does
    /// not answer in time (a cache that is away is a miss, never an error).
    pub async fn cache_get(&self, id: &str, now: UnixMs) -> Option<Vec<u8>> {
        let mut conn = self.cache_connection().await?;
        let mut pipe = redis::pipe();
        pipe.get(format!("{}{id}", self.keys.cache_entry_prefix()));
        pipe.cmd("ZADD").arg(self.keys.cache_index()).arg("XX").arg(now.0).arg(id).ignore();
        match tokio::time::timeout(LOOKUP_TIMEOUT, pipe.query_async::<(Option<Vec<u8>>,)>(&mut conn)).await {
            Ok(Ok((value,))) => value,
            Ok(Err(e)) => {
                tracing::debug!("cache lookup not answered: {}", crate::logsafe::Escaped(&e.to_string()));
                None
            }
            Err(_) => None,
        }
    }

    /// Stores `value` under `id` for `ttl`, evicting the least recently used entries past
    /// `max_bytes`; in the background (the answer does not wait for it).
    pub fn cache_put(self: &Arc<Self>, id: String, value: Vec<u8>, ttl: Duration, max_bytes: u64, now: UnixMs) {
        let Ok(place) = Arc::clone(&self.cache_puts).try_acquire_owned() else {
            tracing::debug!("cache entry not sent to Redis: {PUTS_IN_FLIGHT} are on their way already");
            return;
        };
        let shared = Arc::clone(self);
        crate::tasks::spawn("cache-put", async move {
            let _place = place;
            let Some(mut conn) = shared.cache_connection().await else { return };
            let keys = &shared.keys;
            let prefix = keys.cache_entry_prefix();
            let stored = redis::Script::new(PUT)
                .key(format!("{prefix}{id}"))
                .key(keys.cache_index())
                .key(keys.cache_sizes())
                .key(keys.cache_bytes())
                .arg(value)
                .arg(ttl.as_millis().max(1) as u64)
                .arg(now.0)
                .arg(max_bytes)
                .arg(&id)
                .arg(&prefix)
                .invoke_async::<i64>(&mut conn)
                .await;
            if let Err(e) = stored {
                tracing::debug!("cache entry not stored: {}", crate::logsafe::Escaped(&e.to_string()));
            }
        });
    }

    /// Forgets every shared entry; how many there were.
    pub async fn cache_purge(&self) -> Result<u64, String> {
        let mut conn = self.cache_connection().await.ok_or("Redis is not connected")?;
        let keys = &self.keys;
        redis::Script::new(PURGE)
            .key(keys.cache_index())
            .key(keys.cache_sizes())
            .key(keys.cache_bytes())
            .arg(keys.cache_entry_prefix())
            .invoke_async::<u64>(&mut conn)
            .await
            .map_err(|e| e.to_string())
    }

    /// (entries, bytes) in Redis, as its index counts them.
    pub async fn cache_size(&self) -> Option<(u64, u64)> {
        let mut conn = self.cache_connection().await?;
        let mut pipe = redis::pipe();
        pipe.zcard(self.keys.cache_index()).get(self.keys.cache_bytes());
        let read = pipe.query_async::<(u64, Option<u64>)>(&mut conn);
        match tokio::time::timeout(LOOKUP_TIMEOUT * 5, read).await {
            Ok(Ok((entries, bytes))) => Some((entries, bytes.unwrap_or(0))),
            _ => None,
        }
    }
}
