//! A gateway key's token quota at the door of every call (the client's and each one the
//! gateway makes on its behalf): refused once spent, tokens set aside while calls run.

use std::sync::Arc;

use axum::http::StatusCode;

use super::Gateway;
use super::auth::KeyEntry;
use super::error::ApiError;
use crate::provider::prompt_estimate;

/// Completion tokens set aside for a call that names no `max_tokens`: the books learn the
/// real figure when it ends; until then parallel calls cannot all slip under the quota.
pub const DEFAULT_COMPLETION_RESERVE: u64 = 1024;

/// Tokens set aside for one call in flight; given back when dropped (its books have counted
/// the real tokens by then).
pub struct Reservation {
    held: Option<(Arc<Gateway>, crate::config::KeyName, u64)>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some((gw, key, tokens)) = self.held.take() {
            gw.scheduler.release_key(&key, tokens);
        }
    }
}

/// Admits one call of `key` with request `unified`, setting aside its estimated tokens; a key
/// whose quota is spent (counting what its calls in flight set aside) gets 429.
pub fn admit(gw: &Arc<Gateway>, key: &KeyEntry, unified: &str) -> Result<Reservation, ApiError> {
    let Some(quota) = key.quota else { return Ok(Reservation { held: None }) };
    let tokens = prompt_estimate(unified).saturating_add(max_tokens(unified).unwrap_or(DEFAULT_COMPLETION_RESERVE));
    match gw.scheduler.reserve_key(&key.name, quota, tokens) {
        Ok(()) => Ok(Reservation { held: Some((gw.clone(), key.name.clone(), tokens)) }),
        Err((used, reserved)) => {
            let resets = match gw.scheduler.window_end(quota.period) {
                Some(end) => format!("; it resets in {} s", end.since(gw.scheduler.now()).as_secs().max(1)),
                None => String::new(),
            };
            let in_flight =
                if reserved > 0 { format!(", {reserved} more set aside for calls in flight") } else { String::new() };
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "insufficient_quota",
                format!(
                    "key `{}` has used its token quota ({used} of {} per {}{in_flight}){resets}",
                    key.name, quota.tokens, quota.period
                ),
            )
            .code("key_quota_exceeded"))
        }
    }
}

/// The request's `max_tokens` (or `max_completion_tokens`), found without parsing it whole.
fn max_tokens(unified: &str) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Limits {
        max_tokens: Option<u64>,
        max_completion_tokens: Option<u64>,
    }
    let limits: Limits = serde_json::from_str(unified).ok()?;
    limits.max_completion_tokens.or(limits.max_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_completion_limit_is_what_it_sets_aside() {
        assert_eq!(max_tokens(r#"{"model":"m","max_tokens":50,"messages":[]}"#), Some(50));
        assert_eq!(max_tokens(r#"{"max_tokens":50,"max_completion_tokens":20}"#), Some(20));
        assert_eq!(max_tokens(r#"{"messages":[{"content":"max_tokens"}]}"#), None);
        assert_eq!(max_tokens(r#"{"max_tokens":-1}"#), None);
    }
}
