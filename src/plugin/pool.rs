//! One adapter's instances: sessions are multiplexed onto a few shared instances (calls to one
//! instance take turns), created on demand, retired when they fail or bloat, shrunk when idle.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Store;
use wasmtime::component::ResourceAny;

use super::bindings::{Exports, GuestState};

/// How long an instance with no session stays warm before the pool lets it go.
pub const IDLE_INSTANCE_TTL: Duration = Duration::from_secs(60);

/// A live store and the component instance in it; reached only through [`Shared::live`].
pub struct Instance {
    pub store: Store<GuestState>,
    pub world: Exports,
}

/// Where an instance stands: open to new sessions, retiring (serves the sessions it has,
/// takes no more), or failed (its store trapped: every session on it is lost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Standing {
    Open = 0,
    Retiring = 1,
    Failed = 2,
}

/// One instance shared by many sessions.
pub struct Shared {
    /// The store; a guest call holds it from entry to return, so calls take turns.
    pub live: Arc<tokio::sync::Mutex<Instance>>,
    sessions: AtomicUsize,
    standing: AtomicU8,
    /// Guest resources of sessions that ended, dropped at the instance's next call
    /// (a drop is an async guest call, which `Drop` cannot make).
    stale: Mutex<Vec<ResourceAny>>,
    /// When its last session left (`None` while one is open).
    idle_since: Mutex<Option<Instant>>,
}

impl Shared {
    fn new(instance: Instance) -> Arc<Shared> {
        Arc::new(Shared {
            live: Arc::new(tokio::sync::Mutex::new(instance)),
            sessions: AtomicUsize::new(0),
            standing: AtomicU8::new(Standing::Open as u8),
            stale: Mutex::new(Vec::new()),
            idle_since: Mutex::new(Some(Instant::now())),
        })
    }

    fn standing(&self) -> Standing {
        match self.standing.load(Ordering::Acquire) {
            0 => Standing::Open,
            1 => Standing::Retiring,
            _ => Standing::Failed,
        }
    }

    /// Its store trapped or was abandoned mid-call: no call may enter it again.
    pub fn fail(&self) {
        self.standing.store(Standing::Failed as u8, Ordering::Release);
    }

    pub fn has_failed(&self) -> bool {
        self.standing() == Standing::Failed
    }

    /// Takes no new session; let go once the ones it has end.
    pub fn retire(&self) {
        let _ = self.standing.compare_exchange(
            Standing::Open as u8,
            Standing::Retiring as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// Leaves a finished session's guest resource to be dropped at the next call.
    pub fn leave_stale(&self, resource: ResourceAny) {
        self.stale.lock().unwrap_or_else(|p| p.into_inner()).push(resource);
    }

    /// The resources waiting to be dropped (the caller holds the store).
    pub fn take_stale(&self) -> Vec<ResourceAny> {
        std::mem::take(&mut *self.stale.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn sessions(&self) -> usize {
        self.sessions.load(Ordering::Acquire)
    }
}

/// The instances and the places sessions take.
pub struct InstancePool {
    instances: Mutex<Vec<Arc<Shared>>>,
    /// One opener at a time makes a new instance, so a burst makes one, not one each.
    making: tokio::sync::Mutex<()>,
    places: Arc<Semaphore>,
    size: Arc<Mutex<Size>>,
    per_instance: usize,
}

/// The bound on sessions, and the places a shrink could not take back at once because
/// sessions held them: each is forgotten when its session gives it back.
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

/// A session's seat on one shared instance; leaving it on drop lets an idle or retired
/// instance go.
pub struct Seat {
    pub instance: Arc<Shared>,
    pool: Arc<InstancePool>,
    _place: PoolPermit,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.pool.leave(&self.instance);
    }
}

/// What the pool holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Sessions it may hold at once.
    pub capacity: usize,
    /// Live instances (retiring ones included).
    pub instances: usize,
    /// Instances with no session.
    pub idle: usize,
    /// Sessions open now.
    pub sessions: usize,
}

impl InstancePool {
    /// A pool for `capacity` sessions at once, at most `per_instance` of them on one instance.
    pub fn new(capacity: usize, per_instance: usize) -> Self {
        let capacity = capacity.max(1);
        InstancePool {
            instances: Mutex::new(Vec::new()),
            making: tokio::sync::Mutex::new(()),
            places: Arc::new(Semaphore::new(capacity)),
            size: Arc::new(Mutex::new(Size { capacity, owed: 0 })),
            per_instance: per_instance.max(1),
        }
    }

    /// Resizes the bound on sessions (sources added or removed); sessions in flight keep
    /// their places.
    pub fn set_capacity(&self, capacity: usize) {
        let capacity = capacity.max(1);
        let mut size = self.size.lock().unwrap_or_else(|p| p.into_inner());
        if capacity > size.capacity {
            // Growing first cancels what a shrink still owes.
            let grow = capacity - size.capacity;
            let cancelled = grow.min(size.owed);
            size.owed -= cancelled;
            self.places.add_permits(grow - cancelled);
        } else {
            let shrink = size.capacity - capacity;
            let forgotten = self.places.forget_permits(shrink);
            size.owed += shrink - forgotten;
        }
        size.capacity = capacity;
    }

    pub fn stats(&self) -> PoolStats {
        let capacity = self.size.lock().unwrap_or_else(|p| p.into_inner()).capacity;
        let instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        PoolStats {
            capacity,
            instances: instances.len(),
            idle: instances.iter().filter(|i| i.sessions() == 0).count(),
            sessions: instances.iter().map(|i| i.sessions()).sum(),
        }
    }

    /// Places free now (`capacity` minus those in use, once no shrink is owed).
    #[cfg(test)]
    fn available(&self) -> usize {
        self.places.available_permits()
    }

    /// Waits for a place; `None` when none frees up within `wait`.
    pub async fn acquire(&self, wait: Duration) -> Option<PoolPermit> {
        match tokio::time::timeout(wait, self.places.clone().acquire_owned()).await {
            Ok(Ok(permit)) => Some(PoolPermit { permit: Some(permit), size: self.size.clone() }),
            _ => None,
        }
    }

    /// A seat on an open instance with room, or on a new one `make` builds.
    pub async fn seat<E, F>(self: &Arc<Self>, place: PoolPermit, make: impl FnOnce() -> F) -> Result<Seat, E>
    where
        F: Future<Output = Result<Instance, E>>,
    {
        if let Some(instance) = self.pick() {
            return Ok(Seat { instance, pool: self.clone(), _place: place });
        }
        let _making = self.making.lock().await;
        // Someone else's new instance may have room by now.
        if let Some(instance) = self.pick() {
            return Ok(Seat { instance, pool: self.clone(), _place: place });
        }
        let shared = Shared::new(make().await?);
        shared.sessions.store(1, Ordering::Release);
        *shared.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.instances.lock().unwrap_or_else(|p| p.into_inner()).push(shared.clone());
        Ok(Seat { instance: shared, pool: self.clone(), _place: place })
    }

    /// Takes a seat on the fullest open instance that still has room (packing sessions
    /// lets the others go idle and shrink); drops failed instances from the list.
    fn pick(&self) -> Option<Arc<Shared>> {
        let mut instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        instances.retain(|i| !i.has_failed());
        let chosen = instances
            .iter()
            .filter(|i| i.standing() == Standing::Open && i.sessions() < self.per_instance)
            .max_by_key(|i| i.sessions())?
            .clone();
        chosen.sessions.fetch_add(1, Ordering::AcqRel);
        *chosen.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = None;
        Some(chosen)
    }

    /// A session left `instance`: a failed or retiring one goes once it is empty.
    fn leave(&self, instance: &Arc<Shared>) {
        let mut instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        if instance.sessions.fetch_sub(1, Ordering::AcqRel) == 1 {
            *instance.idle_since.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
            if instance.standing() != Standing::Open {
                instances.retain(|i| !Arc::ptr_eq(i, instance));
            }
        }
    }

    /// Lets go of instances idle since before `now - IDLE_INSTANCE_TTL`, keeping the one
    /// used last warm. Returns how many went.
    pub fn shrink_idle(&self, now: Instant) -> usize {
        let mut instances = self.instances.lock().unwrap_or_else(|p| p.into_inner());
        let before = instances.len();
        let idle_since = |i: &Shared| *i.idle_since.lock().unwrap_or_else(|p| p.into_inner());
        let keep = instances.iter().filter_map(|i| idle_since(i).map(|t| (t, i.clone()))).max_by_key(|(t, _)| *t);
        instances.retain(|i| match idle_since(i) {
            Some(since) if now.saturating_duration_since(since) >= IDLE_INSTANCE_TTL => {
                keep.as_ref().is_some_and(|(_, kept)| Arc::ptr_eq(kept, i))
            }
            _ => true,
        });
        before - instances.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: Duration = Duration::ZERO;

    #[tokio::test]
    async fn a_shrink_while_places_are_held_lands_as_they_come_back_and_a_grow_cancels_it() {
        let pool = InstancePool::new(4, 1);
        let held: Vec<PoolPermit> =
            futures::future::join_all((0..4).map(|_| pool.acquire(NOW))).await.into_iter().flatten().collect();
        assert_eq!(held.len(), 4);
        pool.set_capacity(2);
        assert_eq!(pool.stats().capacity, 2);
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
        let pool = InstancePool::new(3, 1);
        let a = pool.acquire(NOW).await.unwrap();
        let b = pool.acquire(NOW).await.unwrap();
        pool.set_capacity(1); // one free place forgotten, one owed
        pool.set_capacity(5); // cancels the debt, adds three
        drop(a);
        drop(b);
        assert_eq!(pool.available(), 5);
        assert_eq!(pool.stats().capacity, 5);
    }
}
