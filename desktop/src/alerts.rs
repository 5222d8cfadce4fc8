//! The operators' alerts as desktop notifications: the watch the Telegram bot runs (a flapping
//! source, a model no source could serve, a key past 80 % or 100 % of its quota), looked at often.

use std::time::Duration;

use tauri::AppHandle;
use tauri_plugin_notification::NotificationExt as _;

use crate::gateway::Running;

/// How often the gateway is looked at, unless `telegram.alert_check_seconds` says otherwise.
const EVERY: Duration = Duration::from_secs(30);
/// Seconds between looks, for tests (overrides the config).
const EVERY_VAR: &str = "SWITCHYARD_DESKTOP_ALERT_SECONDS";

/// Starts looking at `running` for alerts, each shown once as a notification.
pub fn spawn(app: &AppHandle, running: &Running, tokio: &tokio::runtime::Handle) {
    let every = std::env::var(EVERY_VAR)
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
        .or_else(|| {
            running.gateway.settings.telegram.as_ref().map(|t| Duration::from_secs(t.alert_check_seconds.get()))
        })
        .unwrap_or(EVERY);
    let watch = switchyard::alerts::Watch::new(running.gateway.clone());
    let app = app.clone();
    let _inside = tokio.enter();
    switchyard::tasks::spawn("desktop alerts", async move {
        let mut looks = tokio::time::interval(every);
        looks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            looks.tick().await;
            for message in watch.look().await {
                if let Err(e) = notify(&app, &message) {
                    tracing::warn!("alert not shown as a notification: {e:#}");
                }
            }
        }
    });
}

/// Shows `message` as a desktop notification (through the desktop's notification service, on
/// D-Bus on Linux), and logs it.
pub fn notify(app: &AppHandle, message: &str) -> anyhow::Result<()> {
    tracing::info!(target: "switchyard_desktop::alerts", "{message}");
    app.notification().builder().title("Switchyard").body(message).show()?;
    Ok(())
}
