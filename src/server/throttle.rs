//! Wrong tokens per client: after a few wrong admin or metrics tokens from one address within a
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

/// The address a request is throttled by: the peer's, or — for a loopback peer, a proxy on the
/// same host — the last `X-Forwarded-For` entry, which that proxy appended (otherwise one
/// guesser behind the proxy would lock every operator out). IPv6 counts by its /64, what one
/// host is usually given.
pub fn client_of(peer: IpAddr, headers: &axum::http::HeaderMap) -> IpAddr {
    let forwarded = || {
        let value = headers.get_all("x-forwarded-for").iter().next_back()?.to_str().ok()?;
        value.rsplit(',').next()?.trim().parse::<IpAddr>().ok()
    };
    let client = if peer.is_loopback() { forwarded().unwrap_or(peer) } else { peer };
    match client {
        IpAddr::V6(v6) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        v4 => v4,
    }
}

/// The answer to a token from an address that is waiting out its window.
pub fn turned_away(wait: Duration) -> crate::server::ApiError {
    crate::server::ApiError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        crate::server::ErrorType::RateLimit,
        "too many wrong tokens from this address; wait before trying again",
    )
    .code("too_many_failed_logins")
    .retry_after(Some(wait))
}

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
    fn a_same_host_proxy_is_seen_through_and_ipv6_counts_by_its_64() {
        let headers = |xff: &str| {
            let mut h = axum::http::HeaderMap::new();
            h.insert("x-forwarded-for", xff.parse().unwrap());
            h
        };
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let remote: IpAddr = "203.0.113.9".parse().unwrap();
        // The proxy appends the real client; what the client wrote before it is ignored.
        assert_eq!(client_of(loopback, &headers("10.9.9.9, 198.51.100.4")), "198.51.100.4".parse::<IpAddr>().unwrap());
        assert_eq!(client_of(remote, &headers("198.51.100.4")), remote, "a remote peer cannot pick its address");
        assert_eq!(client_of(loopback, &axum::http::HeaderMap::new()), loopback);
        let v6: IpAddr = "2001:db8:1:2:aaaa:bbbb:cccc:dddd".parse().unwrap();
        assert_eq!(client_of(v6, &axum::http::HeaderMap::new()), "2001:db8:1:2::".parse::<IpAddr>().unwrap());
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
