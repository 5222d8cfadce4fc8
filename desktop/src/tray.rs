//! The tray icon and its menu. Each entry is a plain function here (`open`, `copy_base_url`, ...)
//! that the menu calls: a second launch and the self-test run exactly what a click runs.

use anyhow::Context;
use tauri::image::Image;
use tauri::menu::{CheckMenuItem, Menu, MenuItem, PredefinedMenuItem};
use tauri::tray::TrayIconBuilder;
use tauri::{AppHandle, Manager, Wry};
use tauri_plugin_autostart::ManagerExt as _;
use tauri_plugin_clipboard_manager::ClipboardExt as _;
use tauri_plugin_opener::OpenerExt as _;

use crate::{STOP_WAIT, desktop, window};

const TRAY: &str = "main";
/// Set to a program (a file manager, a test's recorder) to open the data folder with it.
const OPEN_WITH: &str = "SWITCHYARD_DESKTOP_OPEN_WITH";

/// The entries whose label or check mark follows the app's state.
struct Items {
    serving: MenuItem<Wry>,
    autostart: CheckMenuItem<Wry>,
}

fn icon(paused: bool) -> Image<'static> {
    if paused { tauri::include_image!("icons/tray-paused.png") } else { tauri::include_image!("icons/tray.png") }
}

/// Puts the icon in the tray, with its menu.
pub fn build(app: &AppHandle) -> anyhow::Result<()> {
    let open_item = MenuItem::with_id(app, "open", "Open Switchyard", true, None::<&str>)?;
    let base_url = MenuItem::with_id(app, "copy_base_url", "Copy base URL", true, None::<&str>)?;
    let client_key = MenuItem::with_id(app, "copy_client_key", "Copy a client key", true, None::<&str>)?;
    let serving = MenuItem::with_id(app, "toggle_serving", "Pause serving", true, None::<&str>)?;
    let enabled = app.autolaunch().is_enabled().unwrap_or(false);
    let autostart = CheckMenuItem::with_id(app, "toggle_autostart", "Start at login", true, enabled, None::<&str>)?;
    let folder = MenuItem::with_id(app, "open_data_folder", "Open data folder", true, None::<&str>)?;
    let quit_item = MenuItem::with_id(app, "quit", "Quit", true, None::<&str>)?;
    let (one, two, three) =
        (PredefinedMenuItem::separator(app)?, PredefinedMenuItem::separator(app)?, PredefinedMenuItem::separator(app)?);
    let menu = Menu::with_items(
        app,
        &[&open_item, &one, &base_url, &client_key, &serving, &two, &autostart, &folder, &three, &quit_item],
    )?;
    TrayIconBuilder::with_id(TRAY)
        .icon(icon(false))
        .tooltip("Switchyard")
        .menu(&menu)
        .show_menu_on_left_click(true)
        .on_menu_event(|app, event| on_menu(app, event.id().as_ref()))
        .build(app)?;
    app.manage(Items { serving, autostart });
    Ok(())
}

/// A click on an entry: its function; a failure is logged and shown as a notification.
fn on_menu(app: &AppHandle, id: &str) {
    let done = match id {
        "open" => open(app).map(|()| "window shown".to_string()),
        "copy_base_url" => copy_base_url(app).map(|url| format!("copied {url}")),
        "copy_client_key" => copy_client_key(app).map(|_| "copied a client key".to_string()),
        "toggle_serving" => toggle_serving(app).map(|paused| if paused { "paused" } else { "serving" }.to_string()),
        "toggle_autostart" => toggle_autostart(app).map(|on| format!("start at login: {on}")),
        "open_data_folder" => open_data_folder(app).map(|()| "data folder opened".to_string()),
        "quit" => {
            quit(app);
            Ok("quitting".to_string())
        }
        _ => return,
    };
    match done {
        Ok(what) => tracing::info!(action = id, "tray: {what}"),
        Err(e) => {
            tracing::warn!(action = id, "tray: {e:#}");
            let _ = crate::alerts::notify(app, &format!("{e:#}"));
        }
    }
}

/// Open: the WebUI window (or, before the gateway runs, the app's page), shown and focused.
pub fn open(app: &AppHandle) -> anyhow::Result<()> {
    window::show(app)
}

/// Copy base URL: what clients put before `/v1`, to the clipboard; returns it.
pub fn copy_base_url(app: &AppHandle) -> anyhow::Result<String> {
    let url = desktop(app).running()?.base_url();
    app.clipboard().write_text(url.clone()).context("cannot write to the clipboard")?;
    Ok(url)
}

/// Copy a client key: a gateway key clients can send as Bearer, to the clipboard; returns it.
/// Blocks on the admin API when a key must be made: not from an async task.
pub fn copy_client_key(app: &AppHandle) -> anyhow::Result<String> {
    let desktop = desktop(app);
    let (running, saved) = (desktop.running()?, desktop.paths()?.client_key());
    let key = tauri::async_runtime::block_on(running.client_key(&saved))?;
    app.clipboard().write_text(key.clone()).context("cannot write to the clipboard")?;
    Ok(key)
}

/// Pause serving / Resume serving: flips whether `/v1` answers 503; returns whether it is
/// paused now.
pub fn toggle_serving(app: &AppHandle) -> anyhow::Result<bool> {
    let running = desktop(app).running()?;
    running.set_paused(!running.paused());
    refresh(app);
    Ok(running.paused())
}

/// Start at login: flips the login item (Linux: ~/.config/autostart/Switchyard.desktop,
/// starting the app `--hidden`); returns whether it is on now.
pub fn toggle_autostart(app: &AppHandle) -> anyhow::Result<bool> {
    let launcher = app.autolaunch();
    let on = !launcher.is_enabled()?;
    if on {
        launcher.enable()?;
    } else {
        launcher.disable()?;
    }
    if let Some(items) = app.try_state::<Items>() {
        items.autostart.set_checked(on)?;
    }
    Ok(on)
}

/// Open data folder: the app's data folder in the file manager (or `$SWITCHYARD_DESKTOP_OPEN_WITH`).
pub fn open_data_folder(app: &AppHandle) -> anyhow::Result<()> {
    let folder = desktop(app).paths()?.root.to_string_lossy().into_owned();
    app.opener()
        .open_path(folder.clone(), std::env::var(OPEN_WITH).ok())
        .with_context(|| format!("cannot open {folder}"))
}

/// Quit: hides the windows, stops the gateway (open requests get up to 10 s), and exits.
pub fn quit(app: &AppHandle) {
    for window in app.webview_windows().into_values() {
        let _ = window.hide();
    }
    let handle = app.clone();
    // Not on the caller's thread: the menu's is the UI's, and stopping waits on requests.
    let stopping = std::thread::Builder::new().name("quit".into()).spawn(move || {
        if let Ok(running) = desktop(&handle).running() {
            tauri::async_runtime::block_on(running.stop(STOP_WAIT));
        }
        handle.exit(0);
    });
    if let Err(e) = stopping {
        // main() stops the gateway after the loop ends.
        tracing::warn!("cannot stop the gateway in the background ({e}): exiting first");
        app.exit(0);
    }
}

/// Keeps the tray in step with a pause made elsewhere (the WebUI, `PUT /admin/api/serving`).
pub fn follow(app: &AppHandle, tokio: &tokio::runtime::Handle) {
    let app = app.clone();
    let _inside = tokio.enter();
    switchyard::tasks::spawn("tray follower", async move {
        let mut shown = None;
        let mut every = tokio::time::interval(std::time::Duration::from_secs(2));
        loop {
            every.tick().await;
            let paused = desktop(&app).running().map(|r| r.paused()).ok();
            if paused != shown {
                refresh(&app);
                shown = paused;
            }
        }
    });
}

/// The Pause/Resume label, the icon and the tooltip, after the gateway's state.
pub fn refresh(app: &AppHandle) {
    let Ok(running) = desktop(app).running() else { return };
    let paused = running.paused();
    if let Some(items) = app.try_state::<Items>() {
        let _ = items.serving.set_text(if paused { "Resume serving" } else { "Pause serving" });
    }
    if let Some(tray) = app.tray_by_id(TRAY) {
        let _ = tray.set_icon(Some(icon(paused)));
        let state = if paused { "paused" } else { "serving" };
        let _ = tray.set_tooltip(Some(format!("Switchyard: {state} on {}", running.base_url())));
    }
}
