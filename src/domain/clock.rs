//! Wall-clock time as the scheduler sees it, injected so every window and backoff is testable
//! (and persistable: cooldowns survive restarts as Unix milliseconds).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct UnixMs(pub u64);

impl UnixMs {
    pub fn plus(self, d: Duration) -> UnixMs {
        UnixMs(self.0.saturating_add(d.as_millis() as u64))
    }

    pub fn since(self, earlier: UnixMs) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

pub trait Clock: Send + Sync {
    fn now(&self) -> UnixMs;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> UnixMs {
        let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64);
        UnixMs(ms.unwrap_or(0))
    }
}

/// A clock tests move by hand.
#[derive(Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn at(ms: u64) -> Self {
        ManualClock(AtomicU64::new(ms))
    }

    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMs {
        UnixMs(self.0.load(Ordering::SeqCst))
    }
}
