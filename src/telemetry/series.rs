//! A read-mostly map from label values to a metric's series handles, holding at most a cap of
//! label sets. A lookup is lock-free (an `ArcSwap` snapshot) and allocates nothing; only a new
//! label set takes the writers' mutex and publishes a copy of the map with it.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

type Entries<V> = HashMap<u64, Vec<(Box<[String]>, Arc<V>)>>;

pub struct SeriesCache<V> {
    map: ArcSwap<Entries<V>>,
    grow: Mutex<usize>,
    hasher: RandomState,
    cap: usize,
}

impl<V> SeriesCache<V> {
    /// A cache that makes at most `cap` label sets through [`SeriesCache::get`].
    pub fn with_cap(cap: usize) -> Self {
        SeriesCache { map: ArcSwap::from_pointee(HashMap::new()), grow: Mutex::new(0), hasher: RandomState::new(), cap }
    }

    /// The handles for `labels`, made by `make` the first time these labels are seen; `None`
    /// for a new label set once the cap is reached (the caller folds it into its overflow set).
    pub fn get(&self, labels: &[&str], make: impl FnOnce() -> V) -> Option<Arc<V>> {
        self.lookup(labels, make, true)
    }

    /// The handles for `labels`, made past the cap too: for the one overflow set of a family.
    pub fn get_or_insert(&self, labels: &[&str], make: impl FnOnce() -> V) -> Arc<V> {
        self.lookup(labels, make, false).expect("made past the cap")
    }

    fn lookup(&self, labels: &[&str], make: impl FnOnce() -> V, capped: bool) -> Option<Arc<V>> {
        let hash = self.hasher.hash_one(labels);
        if let Some(found) = find(&self.map.load(), hash, labels) {
            return Some(found);
        }
        let mut held = self.grow.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.map.load_full();
        if let Some(found) = find(&current, hash, labels) {
            return Some(found);
        }
        if capped && *held >= self.cap {
            return None;
        }
        *held += 1;
        let made = Arc::new(make());
        let mut next = Entries::clone(&current);
        next.entry(hash).or_default().push((labels.iter().map(|l| l.to_string()).collect(), made.clone()));
        self.map.store(Arc::new(next));
        Some(made)
    }

    /// How many label sets it holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.load().values().map(Vec::len).sum()
    }
}

fn find<V>(map: &Entries<V>, hash: u64, labels: &[&str]) -> Option<Arc<V>> {
    let same = |held: &[String]| held.len() == labels.len() && held.iter().zip(labels).all(|(a, b)| a == b);
    map.get(&hash)?.iter().find(|(held, _)| same(held)).map(|(_, v)| v.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn each_label_set_is_made_once_and_found_after() {
        let cache = SeriesCache::with_cap(10);
        let made = AtomicUsize::new(0);
        let make = || made.fetch_add(1, Ordering::SeqCst);
        let a = cache.get(&["chat", "gpt", ""], make).unwrap();
        let again = cache.get(&["chat", "gpt", ""], make).unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        // Same characters, other split: another set.
        let b = cache.get(&["chat", "gp", "t"], make).unwrap();
        assert!(!Arc::ptr_eq(&a, &b));
        assert_eq!((made.load(Ordering::SeqCst), cache.len()), (2, 2));
    }

    #[test]
    fn past_the_cap_new_label_sets_are_refused_and_known_ones_still_found() {
        let cache = SeriesCache::with_cap(2);
        let a = cache.get(&["a"], || 1).unwrap();
        cache.get(&["b"], || 2).unwrap();
        assert!(cache.get(&["c"], || 3).is_none(), "a third set past a cap of 2");
        assert!(Arc::ptr_eq(&a, &cache.get(&["a"], || 9).unwrap()));
        let other = cache.get_or_insert(&["other"], || 4);
        assert!(Arc::ptr_eq(&other, &cache.get_or_insert(&["other"], || 5)));
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn concurrent_first_lookups_agree_on_one_entry() {
        let cache = SeriesCache::with_cap(10);
        let made = AtomicUsize::new(0);
        let found: Vec<Arc<usize>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| cache.get_or_insert(&["x"], || made.fetch_add(1, Ordering::SeqCst))))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        assert_eq!(made.load(Ordering::SeqCst), 1);
        assert!(found.windows(2).all(|w| Arc::ptr_eq(&w[0], &w[1])));
    }
}
