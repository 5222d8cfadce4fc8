//! Single sign-on's server-side state: sign-ins in progress (state → nonce and PKCE verifier,
//! for ten minutes) and open WebUI sessions (a random id's digest → who, role, CSRF token,
//! expiry). Both bounded; time comes from the caller's clock.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::domain::Role;

/// How long a sign-in may take at the provider.
pub const PENDING_MS: u64 = 10 * 60_000;
/// Sign-ins in progress at once; past it the oldest is dropped for a new one.
const MAX_PENDING: usize = 10_000;
/// Open sessions at once; past it the one closest to expiry goes.
const MAX_SESSIONS: usize = 100_000;

/// A sign-in sent to the provider, waiting for its callback.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub nonce: String,
    pub verifier: String,
    pub redirect_uri: String,
    pub started_ms: u64,
}

/// A signed-in person's WebUI session.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    pub name: String,
    pub role: Role,
    /// Sent back in `x-csrf-token` on every write the cookie authenticates.
    pub csrf: String,
    pub expires_ms: u64,
}

#[derive(Default)]
pub struct Sessions {
    pending: Mutex<HashMap<String, Pending>>,
    open: Mutex<HashMap<[u8; 32], Session>>,
}

/// A new random secret (256 bits), URL- and cookie-safe.
pub fn random_secret() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    /// Keeps a sign-in under its `state`. When too many are in progress, the expired ones go,
    /// then the oldest: a flood of sign-ins started and never finished cannot lock people out,
    /// only push its own out.
    pub fn start(&self, state: String, pending: Pending, now_ms: u64) {
        let mut map = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_PENDING {
            map.retain(|_, p| now_ms < p.started_ms.saturating_add(PENDING_MS));
        }
        if map.len() >= MAX_PENDING
            && let Some(oldest) = map.iter().min_by_key(|(_, p)| p.started_ms).map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(state, pending);
    }

    /// The sign-in with this `state`, taken (a callback is used once), unless it is too old.
    pub fn finish(&self, state: &str, now_ms: u64) -> Option<Pending> {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(state)?;
        (now_ms < pending.started_ms.saturating_add(PENDING_MS)).then_some(pending)
    }

    /// Opens a session; returns its id (the cookie's value).
    pub fn open(&self, session: Session, now_ms: u64) -> String {
        let id = random_secret();
        let mut map = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_SESSIONS {
            map.retain(|_, s| now_ms < s.expires_ms);
            if map.len() >= MAX_SESSIONS
                && let Some(oldest) = map.iter().min_by_key(|(_, s)| s.expires_ms).map(|(k, _)| *k)
            {
                map.remove(&oldest);
            }
        }
        map.insert(digest(&id), session);
        id
    }

    /// The open session with this id, unless it expired (then it is closed).
    pub fn get(&self, id: &str, now_ms: u64) -> Option<Session> {
        let key = digest(id);
        let mut map = self.open.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&key) {
            Some(s) if now_ms < s.expires_ms => Some(s.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    pub fn close(&self, id: &str) -> Option<Session> {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&digest(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(at: u64) -> Pending {
        Pending { nonce: "n".into(), verifier: "v".into(), redirect_uri: "r".into(), started_ms: at }
    }

    #[test]
    fn a_sign_in_is_finished_once_and_only_in_time() {
        let sessions = Sessions::default();
        sessions.start("s1".into(), pending(1000), 1000);
        sessions.start("s2".into(), pending(1000), 1000);
        assert_eq!(sessions.finish("s1", 2000), Some(pending(1000)));
        assert_eq!(sessions.finish("s1", 2000), None, "a state is used once");
        assert_eq!(sessions.finish("s2", 1000 + PENDING_MS), None, "too late");
        assert_eq!(sessions.finish("unknown", 0), None);
    }

    #[test]
    fn sign_ins_in_progress_are_bounded_and_the_oldest_make_room() {
        let sessions = Sessions::default();
        sessions.start("first".into(), pending(0), 0);
        for i in 1..MAX_PENDING {
            sessions.start(format!("s{i}"), pending(1), 1);
        }
        sessions.start("one more".into(), pending(2), 2);
        assert_eq!(sessions.pending.lock().unwrap().len(), MAX_PENDING);
        assert_eq!(sessions.finish("first", 2), None, "the oldest went");
        assert!(sessions.finish("one more", 2).is_some(), "the newest is kept");
        sessions.start("refill".into(), pending(2), 2);
        sessions.start("later".into(), pending(PENDING_MS + 2), PENDING_MS + 2);
        assert_eq!(sessions.pending.lock().unwrap().len(), 1, "the expired ones all went");
    }

    #[test]
    fn a_session_lasts_until_it_expires_or_is_closed() {
        let sessions = Sessions::default();
        let session = Session { name: "ann".into(), role: Role::Viewer, csrf: "c".into(), expires_ms: 5000 };
        let id = sessions.open(session.clone(), 0);
        assert_eq!(sessions.get(&id, 4999), Some(session.clone()));
        assert_eq!(sessions.get(&id, 5000), None);
        assert_eq!(sessions.get(&id, 0), None, "an expired session is gone");
        let id = sessions.open(session.clone(), 0);
        assert_eq!(sessions.close(&id), Some(session));
        assert_eq!(sessions.get(&id, 0), None);
        assert_eq!(sessions.get("guess", 0), None);
    }
}
