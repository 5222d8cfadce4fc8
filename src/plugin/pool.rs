//! Warm instances of one adapter: created on demand, reused after clean sessions, bounded by
//! a semaphore sized to the summed `max_concurrent` of the sources that use the adapter.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Store;

use super::bindings::{AdapterWorld, GuestState};

/// One live instance and the store that owns it.
pub struct Instance {
    pub store: Store<GuestState>,
    pub world: AdapterWorld,
    /// The previous session's guest resource, dropped at the next checkout (drops are async
    /// guest calls, which `Drop` cannot make).
    pub stale: Option<wasmtime::component::ResourceAny>,
}

pub struct InstancePool {
    idle: Mutex<Vec<Instance>>,
    permits: Arc<Semaphore>,
    capacity: Mutex<usize>,
}

impl InstancePool {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        InstancePool {
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(capacity)),
            capacity: Mutex::new(capacity),
        }
    }

    /// Resizes the bound (sources added or removed); sessions in flight keep their permits.
    pub fn set_capacity(&self, capacity: usize) {
        let capacity = capacity.max(1);
        let mut current = self.capacity.lock().expect("pool lock");
        if capacity > *current {
            self.permits.add_permits(capacity - *current);
        } else {
            let shrink = *current - capacity;
            let forgotten = self.permits.forget_permits(shrink);
            // Permits held by running sessions are dropped later; take them as they come back.
            if forgotten < shrink {
                let permits = self.permits.clone();
                let owed = (shrink - forgotten) as u32;
                tokio::spawn(async move {
                    if let Ok(p) = permits.acquire_many_owned(owed).await {
                        p.forget();
                    }
                });
            }
        }
        *current = capacity;
    }

    pub fn capacity(&self) -> usize {
        *self.capacity.lock().expect("pool lock")
    }

    pub fn idle_count(&self) -> usize {
        self.idle.lock().expect("pool lock").len()
    }

    /// Waits for a slot; `None` when none frees up within `wait`.
    pub async fn acquire(&self, wait: Duration) -> Option<OwnedSemaphorePermit> {
        match tokio::time::timeout(wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(permit),
            _ => None,
        }
    }

    pub fn take_idle(&self) -> Option<Instance> {
        self.idle.lock().expect("pool lock").pop()
    }

    pub fn put_back(&self, instance: Instance) {
        self.idle.lock().expect("pool lock").push(instance);
    }
}
