//! Replicas' event listener: the others' events as they happen (Redis pub/sub), applied to
//! this replica's scheduler, with the adapters and runtime files they announce fetched.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;

use super::events::{Event, What};
use super::{Replica, Shared};

impl Shared {
    /// Listens to the others' events as they happen; reconnects when the link drops.
    pub(super) async fn listen_loop(self: Arc<Self>, replica: Weak<dyn Replica>) {
        let mut listen_down = false;
        loop {
            if replica.strong_count() == 0 {
                return;
            }
            match self.client.get_async_pubsub().await {
                Ok(mut pubsub) => {
                    if pubsub.subscribe(self.keys.events()).await.is_ok() {
                        let mut messages = pubsub.on_message();
                        while let Some(message) = messages.next().await {
                            let Some(replica) = replica.upgrade() else { return };
                            let Ok(payload) = message.get_payload::<Vec<u8>>() else { continue };
                            self.apply(&payload, replica.as_ref()).await;
                        }
                    }
                }
                Err(e) => {
                    if !listen_down {
                        tracing::warn!(
                            "cannot listen to the other replicas' events (the sync still exchanges their state): {}",
                            crate::logsafe::Escaped(&e.to_string())
                        );
                    }
                    listen_down = true;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            }
            listen_down = false;
            // Reconnecting: the real clock, not the scheduler's (a test's clock stands still).
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn apply(&self, payload: &[u8], replica: &dyn Replica) {
        let Some(event) = Event::read(payload) else { return };
        if event.from == self.instance {
            return;
        }
        let scheduler = replica.scheduler();
        match event.what {
            // A change of this replica's own still to send is newer than what it hears.
            What::Health { slot, health } => {
                if !self.own().outbox.iter().any(|w| matches!(w, What::Health { slot: mine, .. } if *mine == slot)) {
                    scheduler.adopt_health(&slot, health)
                }
            }
            What::Bind { fingerprint, slot, at } => scheduler.adopt_binding(fingerprint, slot, at),
            What::Adapter { name, sha256 } => {
                if let Some(mut conn) = self.connection().await
                    && let Err(e) = self.fetch_adapter(&mut conn, replica, &name, &sha256).await
                {
                    // The next catch-up after the link returns takes it.
                    tracing::debug!("adapter not fetched: {}", crate::logsafe::Escaped(&e.to_string()));
                }
            }
            What::AdapterRemoved { name } => {
                self.adapters.lock().unwrap_or_else(|p| p.into_inner()).remove(&name);
                match replica.remove_adapter(&name) {
                    Ok(()) => {
                        tracing::info!(adapter = %crate::logsafe::Escaped(&name), "deleted an adapter another replica deleted")
                    }
                    Err(why) => {
                        tracing::warn!(adapter = %crate::logsafe::Escaped(&name), "an adapter another replica deleted stays here: {why}")
                    }
                }
            }
            What::Audit { entry } => replica.adopt_audit(*entry),
            What::Runtime { version } => {
                if version > self.runtime_version.load(std::sync::atomic::Ordering::SeqCst)
                    && let Some(mut conn) = self.connection().await
                    && let Err(e) = self.fetch_runtime(&mut conn, replica).await
                {
                    // The sync reads the version again.
                    tracing::debug!("runtime file not fetched: {}", crate::logsafe::Escaped(&e.to_string()));
                }
            }
        }
    }
}
