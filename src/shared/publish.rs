//! Replicas' publishing: runtime edits and adapter uploads and deletions this replica's admin
//! API made, sent to Redis for the others, and the shared adapters and runtime file fetched back.

use std::collections::HashMap;
use std::sync::Arc;

use redis::aio::ConnectionManager;

use super::events::{Event, What};
use super::{Replica, Shared};

/// Most uploaded adapters taken from Redis in one catch-up.
const MAX_SHARED_ADAPTERS: usize = 256;

impl Shared {
    /// Sends a runtime file this replica's admin API made; the others adopt it.
    pub fn publish_runtime(self: &Arc<Self>, yaml: String) {
        use std::sync::atomic::Ordering::SeqCst;
        let shared = self.clone();
        let seq = self.publish_seq.fetch_add(1, SeqCst) + 1;
        crate::tasks::spawn("runtime publisher", async move {
            // One at a time, newest edit only: two quick edits cannot reach Redis out of order.
            let mut published = shared.published.lock().await;
            if *published >= seq {
                return;
            }
            *published = seq;
            let stored = match shared.conn.load_full() {
                Some(conn) => shared.store_runtime(&mut ConnectionManager::clone(&conn), &yaml).await,
                None => Err(redis::RedisError::from((redis::ErrorKind::Io, "not connected yet"))),
            };
            // The version is not taken as this replica's own: its next sync reads it back and
            // adopts it (a no-op when nothing came between), so if another replica's edit was
            // adopted meanwhile, every replica still ends on the same file.
            if let Err(e) = stored {
                // Sent when Redis answers again (see `resync`).
                shared.runtime_unsent.store(true, SeqCst);
                tracing::warn!(
                    "shared state unreachable: this runtime edit reaches the other replicas when it returns"
                );
                tracing::debug!("runtime edit not sent: {}", crate::logsafe::Escaped(&e.to_string()));
            }
        });
    }

    /// Sends an adapter this replica's admin API installed; the others install it too.
    pub fn publish_adapter(self: &Arc<Self>, name: &str, bytes: axum::body::Bytes) {
        let sha256 = hex_sha256(&bytes);
        self.adapters.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), sha256.clone());
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("HSET").arg(self.keys.adapters()).arg(name).arg(bytes.as_ref()).ignore();
        pipe.cmd("HSET").arg(self.keys.adapter_hashes()).arg(name).arg(&sha256).ignore();
        self.announce(pipe, What::Adapter { name: name.to_string(), sha256 }, "this adapter upload");
    }

    /// Sends an adapter deletion this replica's admin API made.
    pub fn publish_adapter_removed(self: &Arc<Self>, name: &str) {
        self.adapters.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("HDEL").arg(self.keys.adapters()).arg(name).ignore();
        pipe.cmd("HDEL").arg(self.keys.adapter_hashes()).arg(name).ignore();
        self.announce(pipe, What::AdapterRemoved { name: name.to_string() }, "this adapter deletion");
    }

    /// Sends an audit entry this replica wrote to the others' trails. One too large for an
    /// event goes without its objects' before and after (this replica's trail has them).
    pub fn publish_audit(self: &Arc<Self>, entry: &crate::access::AuditEntry) {
        let mut entry = entry.clone();
        if serde_json::to_string(&entry).map_or(0, |t| t.len()) > super::events::MAX_EVENT_BYTES - 1024 {
            for change in &mut entry.changes {
                change.before = None;
                change.after = None;
            }
            entry.note = Some(format!("before and after kept on replica {}", entry.replica.as_deref().unwrap_or("?")));
        }
        let mut pipe = redis::pipe();
        pipe.atomic();
        self.announce(pipe, What::Audit { entry: Box::new(entry) }, "this audit entry");
    }

    /// Runs `pipe` and then publishes `what`, in the background (see `send_later`).
    fn announce(self: &Arc<Self>, mut pipe: redis::Pipeline, what: What, about: &'static str) {
        let event = Event { from: self.instance.clone(), what };
        pipe.cmd("PUBLISH")
            .arg(self.keys.events())
            .arg(serde_json::to_string(&event).expect("an event serialises"))
            .ignore();
        self.send_later(pipe, about);
    }

    /// Runs `pipe` on Redis in the background; while Redis is away the edit stays local.
    fn send_later(self: &Arc<Self>, pipe: redis::Pipeline, what: &'static str) {
        let shared = self.clone();
        crate::tasks::spawn("redis write", async move {
            let Some(mut conn) = shared.conn.load_full().map(|c| ConnectionManager::clone(&c)) else {
                tracing::warn!("shared state unreachable: {what} stays on this replica");
                return;
            };
            if let Err(e) = pipe.query_async::<()>(&mut conn).await {
                tracing::warn!("{what} did not reach the other replicas: {}", crate::logsafe::Escaped(&e.to_string()));
            }
        });
    }

    /// Installs the adapter `name` from Redis unless this replica has those bytes already.
    pub(super) async fn fetch_adapter(
        &self,
        conn: &mut ConnectionManager,
        replica: &dyn Replica,
        name: &str,
        sha256: &str,
    ) -> redis::RedisResult<()> {
        if self.adapters.lock().unwrap_or_else(|p| p.into_inner()).get(name).is_some_and(|have| have == sha256) {
            return Ok(());
        }
        let bytes: Option<Vec<u8>> = redis::cmd("HGET").arg(self.keys.adapters()).arg(name).query_async(conn).await?;
        let Some(bytes) = bytes else { return Ok(()) };
        let got = hex_sha256(&bytes);
        if got != sha256 {
            // A newer upload replaced it meanwhile: its own event follows.
            return Ok(());
        }
        match replica.install_adapter(name.to_string(), bytes).await {
            Ok(()) => {
                self.adapters.lock().unwrap_or_else(|p| p.into_inner()).insert(name.to_string(), got);
                // A runtime file refused for want of this adapter is read again at once.
                *self.retry_runtime_at.lock().unwrap_or_else(|p| p.into_inner()) = None;
                tracing::info!(adapter = %crate::logsafe::Escaped(name), "installed an adapter another replica uploaded");
            }
            Err(why) => {
                tracing::warn!(adapter = %crate::logsafe::Escaped(name), "an adapter another replica uploaded was not installed: {why}")
            }
        }
        Ok(())
    }

    /// Every shared adapter this replica lacks (at start, and after Redis was away).
    pub(super) async fn fetch_adapters(
        &self,
        conn: &mut ConnectionManager,
        replica: &dyn Replica,
    ) -> redis::RedisResult<()> {
        let all: HashMap<String, String> =
            redis::cmd("HGETALL").arg(self.keys.adapter_hashes()).query_async(conn).await?;
        for (name, sha256) in all.into_iter().take(MAX_SHARED_ADAPTERS) {
            self.fetch_adapter(conn, replica, &name, &sha256).await?;
        }
        Ok(())
    }

    /// Writes a runtime file with the next version and announces it, in one step.
    /// The version is above this replica's own too, so a Redis restarted empty (counting from
    /// 1 again) still hands the others a version newer than theirs.
    pub(super) async fn store_runtime(&self, conn: &mut ConnectionManager, yaml: &str) -> redis::RedisResult<u64> {
        const SCRIPT: &str = "local v = redis.call('INCR', KEYS[1])
            local floor = tonumber(ARGV[3])
            if v <= floor then v = floor + 1 redis.call('SET', KEYS[1], v) end
            redis.call('SET', KEYS[2], ARGV[1]) redis.call('SET', KEYS[3], ARGV[2])
            redis.call('PUBLISH', KEYS[4], cjson.encode({from = ARGV[2], runtime = {version = v}}))
            return v";
        redis::cmd("EVAL")
            .arg(SCRIPT)
            .arg(4)
            .arg(self.keys.runtime_version())
            .arg(self.keys.runtime_file())
            .arg(self.keys.runtime_from())
            .arg(self.keys.events())
            .arg(yaml)
            .arg(&self.instance)
            .arg(self.runtime_version.load(std::sync::atomic::Ordering::SeqCst))
            .query_async(conn)
            .await
    }
}

pub fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
