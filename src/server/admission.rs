//! A gateway key's token quota and budgets (its own, its group's) at the door of every call
//! (the client's and each one the gateway makes on its behalf): refused once spent, tokens and
//! the call's worst-case cost set aside while it runs.

use std::sync::Arc;

use axum::http::StatusCode;

use super::Gateway;
use super::auth::KeyEntry;
use super::error::{ApiError, ErrorType};
use crate::domain::{Account, Budget, Period, Usd};
use crate::scheduler::{KeySettled, KeySpent};

/// Completion tokens set aside for a call that names no `max_tokens`: the books learn the
/// real figure when it ends; until then parallel calls cannot all slip under the quota.
pub const DEFAULT_COMPLETION_RESERVE: u64 = 1024;

/// What one call set aside (tokens, pico-dollars) on each account it is charged to; given
/// back when settled or dropped.
pub struct Reservation {
    gw: Option<Arc<Gateway>>,
    held: Vec<Held>,
}

/// One account's part of a [`Reservation`].
struct Held {
    account: Account,
    period: Period,
    amount: u64,
}

impl Drop for Reservation {
    /// A call that ends without being counted (it failed, or was refused on the way) only
    /// gives back what it set aside.
    fn drop(&mut self) {
        self.settle_with(|_| None);
    }
}

impl Reservation {
    fn new(gw: &Arc<Gateway>) -> Reservation {
        Reservation { gw: Some(gw.clone()), held: Vec::new() }
    }

    /// The budgets (money accounts) the call is charged to, with their periods.
    pub fn budgets(&self) -> impl Iterator<Item = (&Account, Period)> {
        self.held.iter().filter(|h| h.account.is_money()).map(|h| (&h.account, h.period))
    }

    /// Closes the call's accounts in one pass: what was set aside goes back, `tokens` are
    /// counted on the token quota and `pico` (`None`: the answer has no price) on the budgets.
    pub fn settle(mut self, tokens: u64, pico: Option<u64>) {
        self.settle_with(|account| if account.is_money() { pico } else { Some(tokens) });
    }

    fn settle_with(&mut self, used: impl Fn(&Account) -> Option<u64>) {
        let (Some(gw), false) = (&self.gw, self.held.is_empty()) else { return };
        let settled: Vec<_> = self
            .held
            .iter()
            .map(|h| KeySettled { account: &h.account, period: h.period, reserved: h.amount, used: used(&h.account) })
            .collect();
        gw.scheduler.settle_keys(&settled);
        self.held.clear();
    }
}

/// The money accounts a call of `key` is charged to: its own budget and its group's.
fn budgets<'c>(key: &KeyEntry, config: &'c crate::config::Config) -> impl Iterator<Item = (Account, Budget)> + 'c {
    let own = key.budget.map(|b| (Account::KeyUsd(key.name.clone()), b));
    let group =
        config.budgets.iter().find(|b| b.group == key.group).map(|b| (Account::GroupUsd(b.group.clone()), b.budget()));
    own.into_iter().chain(group)
}

/// Admits one call of `key`, setting aside `tokens` (its prompt estimate and the completion it
/// may ask for) against its token quota and `worst` (what it can cost at most) against its
/// budgets and its group's;
/// a key or group that has spent its allowance (counting what calls in flight set aside) gets
/// 429.
pub fn admit(
    gw: &Arc<Gateway>,
    key: &KeyEntry,
    config: &crate::config::Config,
    tokens: u64,
    worst: Usd,
) -> Result<Reservation, ApiError> {
    let mut held = admit_tokens(gw, key, tokens)?;
    if !gw.settings.pricing.costs {
        return Ok(held);
    }
    for (account, budget) in budgets(key, config) {
        refuse_blind(gw, &account, "a budget")?;
        let amount = worst.pico().max(0) as u64;
        match gw.scheduler.reserve_key(&account, budget.period, budget.limit(), amount) {
            Ok(()) => held.held.push(Held { account, period: budget.period, amount }),
            Err(KeySpent { used, reserved }) => {
                let resets = gw.scheduler.window_end(budget.period).map(|end| end.since(gw.scheduler.now()));
                let in_flight = if reserved > 0 {
                    format!(", ${} more set aside for calls in flight", Usd::from_pico(reserved as i64))
                } else {
                    String::new()
                };
                let when = resets.map_or(String::new(), |d| format!("; it resets in {} s", d.as_secs().max(1)));
                return Err(ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    ErrorType::InsufficientQuota,
                    format!(
                        "{account} has spent its budget (${} of ${} per {}{in_flight}){when}",
                        Usd::from_pico(used as i64),
                        budget.usd,
                        budget.period
                    ),
                )
                .code("budget_exceeded")
                .retry_after(resets));
            }
        }
    }
    Ok(held)
}

/// With replicas whose shared state is unreachable and `quotas_when_down: closed`, a call
/// that spends `what` is refused rather than counted blind.
fn refuse_blind(gw: &Gateway, account: &Account, what: &str) -> Result<(), ApiError> {
    if gw.shared.as_ref().is_some_and(|s| s.quotas_refused()) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Api,
            format!(
                "{account} has {what}, and the replicas' shared state is unreachable: quotas are not spent blind (shared_state.quotas_when_down: closed)"
            ),
        )
        .code("shared_state_unreachable"));
    }
    Ok(())
}

/// Admits one call of `key` that sets aside `tokens` (none for a call that generates nothing,
/// such as counting tokens: a spent key is still refused).
pub fn admit_tokens(gw: &Arc<Gateway>, key: &KeyEntry, tokens: u64) -> Result<Reservation, ApiError> {
    let mut held = Reservation::new(gw);
    let Some(quota) = key.quota else { return Ok(held) };
    let account = Account::Tokens(key.name.clone());
    refuse_blind(gw, &account, "a token quota")?;
    match gw.scheduler.reserve_key(&account, quota.period, quota.tokens, tokens) {
        Ok(()) => {
            held.held.push(Held { account, period: quota.period, amount: tokens });
            Ok(held)
        }
        Err(KeySpent { used, reserved }) => {
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
pub fn completion_reserve(unified: &str) -> u64 {
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
