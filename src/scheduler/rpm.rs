//! A source's optional `rpm`: requests started in the last 60 seconds, sliding.

use std::collections::VecDeque;
use std::time::Duration;

use crate::domain::UnixMs;

const MINUTE: Duration = Duration::from_secs(60);

#[derive(Debug, Default)]
pub struct RpmWindow {
    starts: VecDeque<UnixMs>,
}

impl RpmWindow {
    /// Counts a request at `now` if fewer than `limit` started in the last minute.
    pub fn try_take(&mut self, now: UnixMs, limit: u32) -> bool {
        while self.starts.front().is_some_and(|t| now.since(*t) >= MINUTE) {
            self.starts.pop_front();
        }
        if self.starts.len() >= limit as usize {
            return false;
        }
        self.starts.push_back(now);
        true
    }

    /// When the next request may start (the oldest in the window turns a minute old).
    pub fn free_at(&self) -> Option<UnixMs> {
        self.starts.front().map(|t| t.plus(MINUTE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_rpm_requests_per_sliding_minute() {
        let mut w = RpmWindow::default();
        let t = UnixMs(1_000_000);
        assert!(w.try_take(t, 2));
        assert!(w.try_take(t.plus(Duration::from_secs(30)), 2));
        assert!(!w.try_take(t.plus(Duration::from_secs(59)), 2), "two in the last minute");
        assert_eq!(w.free_at(), Some(t.plus(MINUTE)));
        assert!(w.try_take(t.plus(MINUTE), 2), "the first one has left the window");
        assert!(!w.try_take(t.plus(Duration::from_secs(61)), 2));
    }
}
