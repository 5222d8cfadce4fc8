//! What the gateway tells its operators about as it happens (today: a model no source could
//! serve), kept in a small ring that watchers (the Telegram bot) read from where they left off.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::domain::UnixMs;

/// Notices kept for readers that fall behind; older ones are dropped (and counted as missed).
const KEPT: usize = 256;

/// A model that no candidate could serve: the client got the 503 summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub seq: u64,
    pub at: UnixMs,
    pub model: String,
    pub message: String,
}

#[derive(Default)]
pub struct Notices {
    ring: Mutex<(u64, VecDeque<Notice>)>,
}

impl Notices {
    pub fn push(&self, at: UnixMs, model: &str, message: &str) {
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.0 += 1;
        let seq = ring.0;
        if ring.1.len() == KEPT {
            ring.1.pop_front();
        }
        // Bounded: a summary names every candidate, but a notice needs the gist.
        let message: String = message.chars().take(500).collect();
        ring.1.push_back(Notice { seq, at, model: model.chars().take(200).collect(), message });
    }

    /// Notices after `seq` (0: all kept), and the sequence number to ask from next time.
    pub fn since(&self, seq: u64) -> (Vec<Notice>, u64) {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        (ring.1.iter().filter(|n| n.seq > seq).cloned().collect(), ring.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_get_what_came_after_them_and_the_ring_stays_bounded() {
        let notices = Notices::default();
        notices.push(UnixMs(1), "m", "no source could serve");
        let (first, seq) = notices.since(0);
        assert_eq!((first.len(), seq), (1, 1));
        assert!(notices.since(seq).0.is_empty());
        for i in 0..1000 {
            notices.push(UnixMs(i), "m", &"x".repeat(2000));
        }
        let (all, seq) = notices.since(0);
        assert_eq!((all.len(), seq), (KEPT, 1001));
        assert_eq!(all[0].message.len(), 500);
    }
}
