//! What deserves an operator's attention, looked for on demand: the gateway's health, keys and
//! notices read through the admin API in-process and put through the alert rules; the Telegram
//! bot sends what it finds to its chats, the desktop app shows it as notifications.

mod rules;

use std::sync::{Arc, Mutex};

use serde_json::Value;

pub use rules::{Alerts, BUDGET_LEVELS, BudgetView, FLAP_SPAN, FLAP_WINDOWS, KeyView, MUTE, SlotView};

use crate::server::{Gateway, InProcess};

/// One watcher's memory of what it already alerted on; each look returns only what is new.
pub struct Watch {
    gateway: Arc<Gateway>,
    admin: InProcess,
    alerts: Mutex<Alerts>,
    notices_seen: Mutex<u64>,
}

impl Watch {
    pub fn new(gateway: Arc<Gateway>) -> Watch {
        let token = gateway.settings.admin_token.secret().map(|s| s.expose().to_string()).unwrap_or_default();
        Watch {
            admin: InProcess::new(crate::server::admin_service(gateway.clone()), token),
            alerts: Mutex::new(Alerts::default()),
            // Failures from before the watch began are not news.
            notices_seen: Mutex::new(gateway.notices.since(u64::MAX).1),
            gateway,
        }
    }

    /// Looks at the gateway once: the alerts due now (empty when nothing is new).
    pub async fn look(&self) -> Vec<String> {
        let now = self.gateway.scheduler.now();
        let slots = self.admin.get("/health").await.map(|h| slot_views(&h)).unwrap_or_default();
        let keys = self.admin.get("/keys").await.map(|k| key_views(&k)).unwrap_or_default();
        let budgets = self.admin.get("/budgets").await.map(|b| budget_views(&b)).unwrap_or_default();
        let notices = {
            let mut seen = self.notices_seen.lock().unwrap_or_else(|p| p.into_inner());
            let (notices, next) = self.gateway.notices.since(*seen);
            *seen = next;
            notices
        };
        let mut alerts = self.alerts.lock().unwrap_or_else(|p| p.into_inner());
        let mut messages = alerts.on_health(now, &slots);
        messages.extend(alerts.on_failures(now, &notices));
        messages.extend(alerts.on_keys(&keys));
        messages.extend(alerts.on_budgets(&budgets));
        messages
    }
}

fn slot_views(health: &Value) -> Vec<SlotView> {
    health["slots"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| SlotView {
            source: s["source"].as_str().unwrap_or_default().to_string(),
            model: s["model"].as_str().unwrap_or_default().to_string(),
            window_start: s["window_start_ms"].as_u64(),
        })
        .collect()
}

fn key_views(keys: &Value) -> Vec<KeyView> {
    keys["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| KeyView {
            name: k["name"].as_str().unwrap_or_default().to_string(),
            used: k["used"].as_u64().unwrap_or(0),
            quota: k["token_quota"].as_u64(),
        })
        .collect()
}

fn budget_views(budgets: &Value) -> Vec<BudgetView> {
    let view = |kind: &str, field: &str, b: &Value| BudgetView {
        account: format!("{kind} {}", b[field].as_str().unwrap_or_default()),
        percent: b["percent"].as_u64().unwrap_or(0),
        spent_usd: b["spent_usd"].as_str().unwrap_or_default().to_string(),
        usd: b["usd"].as_str().unwrap_or_default().to_string(),
        period: b["period"].as_str().unwrap_or_default().to_string(),
    };
    let keys = budgets["keys"].as_array().into_iter().flatten().map(|b| view("key", "key", b));
    let groups = budgets["groups"].as_array().into_iter().flatten().map(|b| view("group", "group", b));
    keys.chain(groups).collect()
}
