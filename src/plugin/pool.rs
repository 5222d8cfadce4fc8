//! Warm instances of one adapter: created on demand, reused after clean sessions, bounded by
//! a semaphore sized to the summed `max_concurrent` of the sources that use the adapter.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Store;

use super::bindings::{Exports, GuestState};

/// One live instance and the store that owns it.
pub struct Instance {
    pub store: Store<GuestState>,
    pub world: Exports,
    /// The previous session's guest resource, dropped at the next checkout (drops are async
    /// guest calls, which `Drop` cannot make).
    pub stale: Option<wasmtime::component::ResourceAny>,
}

pub struct InstancePool {
    idle: Mutex<Vec<Instance>>,
    permits: Arc<Semaphore>,
    size: Arc<Mutex<Size>>,
}

/// The bound, and the permits a shrink could not take back at once because sessions held
/// them: each is forgotten when its session gives it back, so the real bound reaches the
/// recorded one without a task waiting on the semaphore.
#[derive(Debug, Default)]
struct Size {
    capacity: usize,
    owed: usize,
}

/// A session's place in the pool; given back (or, while a shrink is owed, retired) on drop.
pub struct PoolPermit {
    permit: Option<OwnedSemaphorePermit>,
    size: Arc<Mutex<Size>>,
}

impl Drop for PoolPermit {
    fn drop(&mut self) {
        // Given back under the lock, so a shrink running now sees it either held or free.
        let mut size = self.size.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(permit) = self.permit.take() {
            if size.owed > 0 {
                size.owed -= 1;
                permit.forget();
            } else {
                drop(permit);
            }
        }
    }
}

impl InstancePool {
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        InstancePool {
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(capacity)),
            size: Arc::new(Mutex::new(Size { capacity, owed: 0 })),
        }
    }

    /// Resizes the bound (sources added or removed); sessions in flight keep their places.
    pub fn set_capacity(&self, capacity: usize) {
        let capacity = capacity.max(1);
        let mut size = self.size.lock().expect("pool lock");
        if capacity > size.capacity {
            // Growing first cancels what a shrink still owes.
            let grow = capacity - size.capacity;
            let cancelled = grow.min(size.owed);
            size.owed -= cancelled;
            self.permits.add_permits(grow - cancelled);
        } else {
            let shrink = size.capacity - capacity;
            let forgotten = self.permits.forget_permits(shrink);
            size.owed += shrink - forgotten;
        }
        size.capacity = capacity;
    }

    pub fn capacity(&self) -> usize {
        self.size.lock().expect("pool lock").capacity
    }

    /// Places free now (`capacity` minus those in use, once no shrink is owed).
    #[cfg(test)]
    fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// Sessions holding an instance now.
    pub fn in_use(&self) -> usize {
        let size = self.size.lock().expect("pool lock");
        (size.capacity + size.owed).saturating_sub(self.permits.available_permits())
    }

    pub fn idle_count(&self) -> usize {
        self.idle.lock().expect("pool lock").len()
    }

    /// Waits for a place; `None` when none frees up within `wait`.
    pub async fn acquire(&self, wait: Duration) -> Option<PoolPermit> {
        match tokio::time::timeout(wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(PoolPermit { permit: Some(permit), size: self.size.clone() }),
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

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Duration = Duration::ZERO;

    #[tokio::test]
    async fn a_shrink_while_places_are_held_lands_as_they_come_back_and_a_grow_cancels_it() {
        let pool = InstancePool::new(4);
        let held: Vec<PoolPermit> =
            futures::future::join_all((0..4).map(|_| pool.acquire(NOW))).await.into_iter().flatten().collect();
        assert_eq!(held.len(), 4);
        pool.set_capacity(2);
        assert_eq!(pool.capacity(), 2);
        let mut held = held.into_iter();
        drop(held.next());
        drop(held.next());
        assert_eq!(pool.available(), 0, "the first two back pay the shrink");
        // Grown to 3 while two places are held and nothing is owed: one more is free.
        pool.set_capacity(3);
        assert_eq!(pool.available(), 1);
        drop(held.next());
        drop(held.next());
        assert_eq!(pool.available(), 3, "real capacity equals the recorded one");
        let all: Vec<_> = futures::future::join_all((0..4).map(|_| pool.acquire(NOW))).await;
        assert_eq!(all.iter().filter(|p| p.is_some()).count(), 3);
    }

    #[tokio::test]
    async fn a_grow_while_a_shrink_is_owed_does_not_leave_capacity_below_the_record() {
        let pool = InstancePool::new(3);
        let a = pool.acquire(NOW).await.unwrap();
        let b = pool.acquire(NOW).await.unwrap();
        pool.set_capacity(1); // one free place forgotten, one owed
        pool.set_capacity(5); // cancels the debt, adds three
        drop(a);
        drop(b);
        assert_eq!(pool.available(), 5);
        assert_eq!(pool.capacity(), 5);
    }
}
