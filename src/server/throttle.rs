//! Wrong tokens per peer: after a few wrong admin or metrics tokens from one address within a
//! minute, that address is answered 429 until the minute ends, so guessing stays slow.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use crate::domain::UnixMs;

/// Wrong tokens one address may send per window before it is turned away.
pub const ALLOWED_FAILURES: u32 = 10;
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked at once; past it, windows that ended are forgotten first, then all.
const TRACKED: usize = 10_000;

#[derive(Default)]
pub struct AuthThrottle {
    peers: Mutex<HashMap<IpAddr, (UnixMs, u32)>>,
}

impl AuthThrottle {
    /// How long `peer` must wait before trying again, when it has used up its failures.
    pub fn wait(&self, peer: IpAddr, now: UnixMs) -> Option<Duration> {
        let peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let (since, failures) = *peers.get(&peer)?;
        let ends = since.0 + WINDOW.as_millis() as u64;
        (failures >= ALLOWED_FAILURES && now.0 < ends).then(|| Duration::from_millis(ends - now.0))
    }

    /// Counts one wrong token from `peer`.
    pub fn failed(&self, peer: IpAddr, now: UnixMs) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let window = WINDOW.as_millis() as u64;
        if peers.len() >= TRACKED && !peers.contains_key(&peer) {
            peers.retain(|_, (since, _)| now.0 < since.0 + window);
            if peers.len() >= TRACKED {
                peers.clear();
            }
        }
        let entry = peers.entry(peer).or_insert((now, 0));
        if now.0 >= entry.0.0 + window {
            *entry = (now, 0);
        }
        entry.1 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_turned_away_after_its_failures_until_the_window_ends() {
        let throttle = AuthThrottle::default();
        let (peer, other) = ("203.0.113.7".parse().unwrap(), "203.0.113.8".parse().unwrap());
        for i in 0..ALLOWED_FAILURES {
            assert_eq!(throttle.wait(peer, UnixMs(1000 + u64::from(i))), None);
            throttle.failed(peer, UnixMs(1000 + u64::from(i)));
        }
        assert_eq!(throttle.wait(peer, UnixMs(2000)), Some(Duration::from_millis(60_000 - 1000)));
        assert_eq!(throttle.wait(other, UnixMs(2000)), None, "another address is not held up");
        assert_eq!(throttle.wait(peer, UnixMs(61_000)), None, "the window ended");
        throttle.failed(peer, UnixMs(61_000));
        assert_eq!(throttle.wait(peer, UnixMs(61_001)), None, "a new window starts counting again");
    }

    #[test]
    fn the_table_stays_bounded() {
        let throttle = AuthThrottle::default();
        for i in 0..(TRACKED as u32 + 5) {
            throttle.failed(IpAddr::from(i.to_be_bytes()), UnixMs(1));
        }
        assert!(throttle.peers.lock().unwrap().len() <= TRACKED);
    }
}
