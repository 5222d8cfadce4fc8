//! A gateway key's token quota at the door of every call (the client's and each one the
//! gateway makes on its behalf): refused once spent, tokens set aside while calls run.

use std::sync::Arc;

use axum::http::StatusCode;

use super::Gateway;
use super::auth::KeyEntry;
use super::error::{ApiError, ErrorType};

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
pub fn admit(gw: &Arc<Gateway>, key: &KeyEntry, unified: &str, prompt_estimate: u64) -> Result<Reservation, ApiError> {
    admit_tokens(gw, key, prompt_estimate.saturating_add(completion_reserve(unified)))
}

/// Admits one call of `key` that sets aside `tokens` (none for a call that generates nothing,
/// such as counting tokens: a spent key is still refused).
pub fn admit_tokens(gw: &Arc<Gateway>, key: &KeyEntry, tokens: u64) -> Result<Reservation, ApiError> {
    let Some(quota) = key.quota else { return Ok(Reservation { held: None }) };
    if gw.shared.as_ref().is_some_and(|s| s.quotas_refused()) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Api,
            format!(
                "key `{}` has a token quota, and the replicas' shared state is unreachable: quotas are not spent blind (shared_state.quotas_when_down: closed)",
                key.name
            ),
        )
        .code("shared_state_unreachable"));
    }
    match gw.scheduler.reserve_key(&key.name, quota, tokens) {
        Ok(()) => Ok(Reservation { held: Some((gw.clone(), key.name.clone(), tokens)) }),
        Err(crate::scheduler::KeySpent { used, reserved }) => {
            let resets = match gw.scheduler.window_end(quota.period) {
                Some(end) => format!("; it resets in {} s", end.since(gw.scheduler.now()).as_secs().max(1)),
                None => String::new(),
            };
            let in_flight =
                if reserved > 0 { format!(", {reserved} more set aside for calls in flight") } else { String::new() };
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorType::InsufficientQuota,
                format!(
                    "key `{}` has used its token quota ({used} of {} per {}{in_flight}){resets}",
                    key.name, quota.tokens, quota.period
                ),
            )
            .code("key_quota_exceeded"))
        }
    }
}

/// Completion tokens to set aside: the request's `max_completion_tokens` (or `max_tokens`,
/// or [`DEFAULT_COMPLETION_RESERVE`]) for each of its `n` choices. The other fields are skipped
/// unread.
fn completion_reserve(unified: &str) -> u64 {
    #[derive(serde::Deserialize)]
    struct Limits {
        max_tokens: Option<u64>,
        max_completion_tokens: Option<u64>,
        n: Option<u64>,
    }
    let limits: Option<Limits> = serde_json::from_str(unified).ok();
    let per_choice =
        limits.as_ref().and_then(|l| l.max_completion_tokens.or(l.max_tokens)).unwrap_or(DEFAULT_COMPLETION_RESERVE);
    per_choice.saturating_mul(limits.and_then(|l| l.n).unwrap_or(1).clamp(1, 128))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_requests_completion_limit_is_what_it_sets_aside() {
        assert_eq!(completion_reserve(r#"{"model":"m","max_tokens":50,"messages":[]}"#), 50);
        assert_eq!(completion_reserve(r#"{"max_tokens":50,"max_completion_tokens":20}"#), 20);
        assert_eq!(completion_reserve(r#"{"max_tokens":50,"n":3}"#), 150, "per choice");
        assert_eq!(completion_reserve(r#"{"messages":[{"content":"max_tokens"}]}"#), DEFAULT_COMPLETION_RESERVE);
        assert_eq!(completion_reserve(r#"{"max_tokens":-1}"#), DEFAULT_COMPLETION_RESERVE);
    }
}
