//! Deciding what to alert on, from what the gateway shows at each look (pure, on the caller's
//! clock): a source entering cooldown again and again, a model no source could serve, a key
//! past 80 % or 100 % of its quota, a key or group past 50, 80 or 100 % of its budget. Grouped and muted, so a flapping source sends one message.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use crate::domain::UnixMs;
use crate::server::Notice;

/// Cooldown windows within `FLAP_SPAN` that make a source flapping.
pub const FLAP_WINDOWS: usize = 3;
pub const FLAP_SPAN: Duration = Duration::from_secs(600);
/// After an alert about one source or model, it stays quiet this long.
pub const MUTE: Duration = Duration::from_secs(1800);
/// Windows remembered per slot (bounded whatever the upstream does).
const REMEMBERED: usize = 64;

/// One slot as `GET /admin/api/health` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotView {
    pub source: String,
    pub model: String,
    /// When its current cooldown window began; None when healthy.
    pub window_start: Option<u64>,
}

/// One key's quota use as `GET /admin/api/keys` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyView {
    pub name: String,
    pub used: u64,
    pub quota: Option<u64>,
}

/// One budget as `GET /admin/api/budgets` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetView {
    /// `key NAME` or `group NAME`.
    pub account: String,
    pub percent: u64,
    pub spent_usd: String,
    pub usd: String,
    pub period: String,
}

/// The shares of a budget that alert, each once per window.
pub const BUDGET_LEVELS: [u64; 3] = [50, 80, 100];

#[derive(Default)]
pub struct Alerts {
    /// Cooldown windows already counted: (source, model, window start).
    counted: HashSet<(String, String, u64)>,
    /// When each source entered a new window, newest last.
    entered: HashMap<String, VecDeque<UnixMs>>,
    muted_sources: HashMap<String, UnixMs>,
    muted_models: HashMap<String, UnixMs>,
    /// The quota level (0, 80, 100) last alerted per key.
    key_levels: HashMap<String, u8>,
    /// The budget level (0, 50, 80, 100) last alerted per account.
    budget_levels: HashMap<String, u64>,
}

impl Alerts {
    /// New cooldown windows seen in `slots`; a message per source that entered
    /// [`FLAP_WINDOWS`] of them within [`FLAP_SPAN`] and is not muted.
    pub fn on_health(&mut self, now: UnixMs, slots: &[SlotView]) -> Vec<String> {
        let mut out = Vec::new();
        for slot in slots {
            let Some(start) = slot.window_start else { continue };
            if !self.counted.insert((slot.source.clone(), slot.model.clone(), start)) {
                continue;
            }
            let entered = self.entered.entry(slot.source.clone()).or_default();
            entered.push_back(now);
            while entered.len() > REMEMBERED || entered.front().is_some_and(|t| now.since(*t) > FLAP_SPAN) {
                entered.pop_front();
            }
            let count = entered.len();
            if count >= FLAP_WINDOWS && !muted(&self.muted_sources, &slot.source, now) {
                self.muted_sources.insert(slot.source.clone(), now.plus(MUTE));
                out.push(format!(
                    "⚠️ source {} entered cooldown {count} times in the last {} min (latest: {}). Muted for {} min; /health {} shows it.",
                    slot.source,
                    FLAP_SPAN.as_secs() / 60,
                    slot.model,
                    MUTE.as_secs() / 60,
                    slot.source
                ));
            }
        }
        // Windows long over cannot be seen again: forget them, so memory stays bounded.
        if self.counted.len() > 10_000 {
            let current: HashSet<(String, String, u64)> =
                slots.iter().filter_map(|s| s.window_start.map(|w| (s.source.clone(), s.model.clone(), w))).collect();
            self.counted.retain(|k| current.contains(k));
        }
        out
    }

    /// One message per model that no source could serve since the last look, unless muted.
    pub fn on_failures(&mut self, now: UnixMs, notices: &[Notice]) -> Vec<String> {
        let mut by_model: Vec<(&str, usize, &str)> = Vec::new();
        for notice in notices {
            match by_model.iter_mut().find(|(m, _, _)| *m == notice.model) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 = &notice.message;
                }
                None => by_model.push((&notice.model, 1, &notice.message)),
            }
        }
        let mut out = Vec::new();
        for (model, count, last) in by_model {
            if muted(&self.muted_models, model, now) {
                continue;
            }
            self.muted_models.insert(model.to_string(), now.plus(MUTE));
            let times = if count == 1 { "once".to_string() } else { format!("{count} times") };
            out.push(format!(
                "🚨 model {model}: every candidate failed ({times}); clients got 503. Latest: {last}. Muted for {} min.",
                MUTE.as_secs() / 60
            ));
        }
        out
    }

    /// A message for each key that reached 80 % or 100 % of its quota since the last look.
    pub fn on_keys(&mut self, keys: &[KeyView]) -> Vec<String> {
        let mut out = Vec::new();
        for key in keys {
            let Some(quota) = key.quota.filter(|q| *q > 0) else { continue };
            let level = match key.used.saturating_mul(100) / quota {
                p if p >= 100 => 100,
                p if p >= 80 => 80,
                _ => 0,
            };
            let last = self.key_levels.insert(key.name.clone(), level).unwrap_or(0);
            if level > last {
                out.push(format!(
                    "🔑 key {} has used {} of {} tokens ({level} %){}",
                    key.name,
                    key.used,
                    quota,
                    if level == 100 { ": further requests are refused until its window resets" } else { "" }
                ));
            }
        }
        out
    }
}

impl Alerts {
    /// A message for each budget that crossed a higher level of [`BUDGET_LEVELS`] since the
    /// last look (once per level and window: a budget back under a level alerts again).
    pub fn on_budgets(&mut self, budgets: &[BudgetView]) -> Vec<String> {
        let mut out = Vec::new();
        for b in budgets {
            let level = BUDGET_LEVELS.iter().rev().copied().find(|l| b.percent >= *l).unwrap_or(0);
            let last = self.budget_levels.insert(b.account.clone(), level).unwrap_or(0);
            if level > last {
                out.push(format!(
                    "💰 {} has spent ${} of its ${} budget per {} ({level} %){}",
                    b.account,
                    b.spent_usd,
                    b.usd,
                    b.period,
                    if level >= 100 { ": further requests are refused until its window resets" } else { "" }
                ));
            }
        }
        out
    }
}

fn muted(map: &HashMap<String, UnixMs>, name: &str, now: UnixMs) -> bool {
    map.get(name).is_some_and(|until| now < *until)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(source: &str, start: Option<u64>) -> SlotView {
        SlotView { source: source.into(), model: "m".into(), window_start: start }
    }

    const MIN: u64 = 60_000;

    #[test]
    fn a_flapping_source_alerts_once_then_is_muted() {
        let mut alerts = Alerts::default();
        let t = |m: u64| UnixMs(1_000_000 + m * MIN);
        assert!(alerts.on_health(t(0), &[slot("a", Some(1))]).is_empty());
        assert!(alerts.on_health(t(1), &[slot("a", Some(1))]).is_empty(), "the same window counts once");
        assert!(alerts.on_health(t(2), &[slot("a", None)]).is_empty());
        assert!(alerts.on_health(t(3), &[slot("a", Some(2))]).is_empty());
        let third = alerts.on_health(t(4), &[slot("a", Some(3)), slot("b", Some(9))]);
        assert_eq!(third.len(), 1, "{third:?}");
        assert!(third[0].contains("source a entered cooldown 3 times"), "{}", third[0]);
        for (i, start) in (4..20).enumerate() {
            assert!(alerts.on_health(t(5 + i as u64), &[slot("a", Some(start))]).is_empty(), "muted");
        }
        // The mute (30 min from t(4)) is over; windows from before it have left the span.
        assert!(alerts.on_health(t(40), &[slot("a", Some(100))]).is_empty(), "one window in the span");
        assert!(alerts.on_health(t(41), &[slot("a", Some(101))]).is_empty(), "two windows in the span");
        assert_eq!(alerts.on_health(t(42), &[slot("a", Some(102))]).len(), 1, "after the mute, flapping again");
    }

    #[test]
    fn windows_spread_over_more_than_the_span_do_not_alert() {
        let mut alerts = Alerts::default();
        for (i, start) in [1u64, 2, 3, 4].iter().enumerate() {
            let now = UnixMs(1_000_000 + i as u64 * 6 * MIN);
            assert!(alerts.on_health(now, &[slot("a", Some(*start))]).is_empty(), "window {i}");
        }
    }

    #[test]
    fn failed_models_are_grouped_and_muted() {
        let mut alerts = Alerts::default();
        let notice =
            |seq, model: &str| Notice { seq, at: UnixMs(0), model: model.into(), message: format!("summary {seq}") };
        let out = alerts.on_failures(UnixMs(10), &[notice(1, "gpt"), notice(2, "gpt"), notice(3, "claude")]);
        assert_eq!(out.len(), 2);
        assert!(
            out[0].contains("model gpt") && out[0].contains("2 times") && out[0].contains("summary 2"),
            "{}",
            out[0]
        );
        assert!(alerts.on_failures(UnixMs(20), &[notice(4, "gpt")]).is_empty(), "muted");
    }

    #[test]
    fn keys_alert_at_80_and_100_percent_once_each() {
        let mut alerts = Alerts::default();
        let key = |used| KeyView { name: "team".into(), used, quota: Some(1000) };
        assert!(alerts.on_keys(&[key(500)]).is_empty());
        assert!(alerts.on_keys(&[key(800)])[0].contains("(80 %)"));
        assert!(alerts.on_keys(&[key(900)]).is_empty());
        assert!(alerts.on_keys(&[key(1200)])[0].contains("(100 %)"));
        assert!(alerts.on_keys(&[key(1300)]).is_empty());
        assert!(alerts.on_keys(&[key(10)]).is_empty(), "a new window");
        let budget = |percent| BudgetView {
            account: "key team".into(),
            percent,
            spent_usd: "4".into(),
            usd: "8".into(),
            period: "day".into(),
        };
        assert!(alerts.on_budgets(&[budget(49)]).is_empty());
        assert!(alerts.on_budgets(&[budget(55)])[0].contains("(50 %)"));
        assert!(alerts.on_budgets(&[budget(60)]).is_empty(), "once per level");
        let crossed = alerts.on_budgets(&[budget(101)]);
        assert!(crossed.len() == 1 && crossed[0].contains("(100 %): further requests are refused"), "{crossed:?}");
        assert!(alerts.on_budgets(&[budget(3)]).is_empty(), "a new window");
        assert_eq!(alerts.on_budgets(&[budget(85)]).len(), 1, "and 80 % again in it");
        assert_eq!(alerts.on_keys(&[key(850)]).len(), 1, "and 80 % again in it");
        assert!(alerts.on_keys(&[KeyView { name: "free".into(), used: 5, quota: None }]).is_empty());
    }
}
