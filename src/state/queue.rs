//! The state writer's queue: changes pile up and the writer takes the whole pile when its
//! batch window ends; an urgent item (a flush someone waits on) ends the window at once, and
//! a pile grown past its bound makes its senders wait until the writer takes it.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub struct Queue<T> {
    inner: Mutex<Inner<T>>,
    wake: Condvar,
    /// The writer took a pile.
    taken: Condvar,
    /// How long a pile with nothing urgent in it may wait.
    deferred_for: Duration,
}

struct Inner<T> {
    items: Vec<T>,
    urgent: bool,
    closed: bool,
    /// When the oldest item of the pile arrived.
    oldest: Option<Instant>,
}

impl<T> Queue<T> {
    pub fn new(deferred_for: Duration) -> Queue<T> {
        let inner = Inner { items: Vec::new(), urgent: false, closed: false, oldest: None };
        Queue { inner: Mutex::new(inner), wake: Condvar::new(), taken: Condvar::new(), deferred_for }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Items waiting for the writer.
    pub fn len(&self) -> usize {
        self.lock().items.len()
    }

    /// Adds a change that may wait (up to `deferred_for`) for company. Only the first of a
    /// pile wakes the writer, to start its clock.
    pub fn push(&self, item: T) {
        let mut inner = self.lock();
        let first = inner.oldest.is_none();
        inner.oldest.get_or_insert_with(Instant::now);
        inner.items.push(item);
        drop(inner);
        if first {
            self.wake.notify_one();
        }
    }

    /// Adds a change someone waits for, and wakes the writer.
    pub fn push_urgent(&self, item: T) {
        let mut inner = self.lock();
        inner.oldest.get_or_insert_with(Instant::now);
        inner.items.push(item);
        let was_urgent = std::mem::replace(&mut inner.urgent, true);
        drop(inner);
        if !was_urgent {
            self.wake.notify_one();
        }
    }

    /// Blocks while more than `bound` items wait, the writer woken to take them at once.
    pub fn wait_below(&self, bound: usize) {
        let mut inner = self.lock();
        while inner.items.len() > bound && !inner.closed {
            if !std::mem::replace(&mut inner.urgent, true) {
                self.wake.notify_one();
            }
            inner = self.taken.wait(inner).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The writer ends once what is queued is taken.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// Blocks until the pile is urgent, due or closing, then takes all of it; `None` once
    /// closed and empty.
    pub fn next_batch(&self) -> Option<Vec<T>> {
        let mut inner = self.lock();
        loop {
            if inner.urgent || inner.closed {
                break;
            }
            match inner.oldest {
                Some(oldest) => {
                    let due = oldest + self.deferred_for;
                    let now = Instant::now();
                    if now >= due {
                        break;
                    }
                    inner = self.wake.wait_timeout(inner, due - now).unwrap_or_else(|p| p.into_inner()).0;
                }
                None => inner = self.wake.wait(inner).unwrap_or_else(|p| p.into_inner()),
            }
        }
        if inner.items.is_empty() && inner.closed {
            return None;
        }
        inner.urgent = false;
        inner.oldest = None;
        let pile = std::mem::take(&mut inner.items);
        drop(inner);
        self.taken.notify_all();
        Some(pile)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn an_urgent_item_takes_the_deferred_ones_along_in_order() {
        let queue = Queue::new(Duration::from_secs(3600));
        queue.push(1);
        queue.push(2);
        queue.push_urgent(3);
        queue.push(4);
        assert_eq!(queue.next_batch(), Some(vec![1, 2, 3, 4]));
    }

    #[test]
    fn deferred_items_wait_for_company_until_they_are_due() {
        let queue = Queue::new(Duration::from_millis(20));
        queue.push("stats");
        let started = Instant::now();
        assert_eq!(queue.next_batch(), Some(vec!["stats"]));
        assert!(started.elapsed() >= Duration::from_millis(15), "a deferred item was taken early");
    }

    #[test]
    fn a_writer_already_waiting_on_an_empty_queue_hears_of_a_deferred_item() {
        let queue = Arc::new(Queue::new(Duration::from_millis(5)));
        let writer = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || queue.next_batch())
        };
        // Whether the writer is already waiting or not, the item must reach it.
        queue.push("stats");
        assert_eq!(writer.join().unwrap(), Some(vec!["stats"]));
    }

    #[test]
    fn the_writer_is_woken_by_an_urgent_item_from_another_thread() {
        let queue = Arc::new(Queue::new(Duration::from_secs(3600)));
        let writer = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || queue.next_batch())
        };
        queue.push("usage");
        queue.push_urgent("log");
        assert_eq!(writer.join().unwrap(), Some(vec!["usage", "log"]));
    }

    #[test]
    fn a_sender_past_the_bound_waits_until_the_writer_takes_the_pile() {
        let queue = Arc::new(Queue::new(Duration::from_secs(3600)));
        for i in 0..3 {
            queue.push(i);
        }
        let (sent, done) = std::sync::mpsc::channel();
        let sender = {
            let queue = Arc::clone(&queue);
            std::thread::spawn(move || {
                queue.push(3);
                queue.wait_below(2);
                sent.send(()).unwrap();
            })
        };
        // The deferred pile is due in an hour: only the bound wakes the writer now.
        assert_eq!(queue.next_batch(), Some(vec![0, 1, 2, 3]));
        done.recv().unwrap();
        sender.join().unwrap();
        assert_eq!(queue.len(), 0);
    }

    #[test]
    fn closing_hands_over_what_is_left_then_ends() {
        let queue = Queue::new(Duration::from_secs(3600));
        queue.push(7);
        queue.close();
        assert_eq!(queue.next_batch(), Some(vec![7]));
        assert_eq!(queue.next_batch(), None);
    }
}
