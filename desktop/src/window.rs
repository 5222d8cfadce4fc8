//! The app's windows: the WebUI's (the gateway's loopback origin, the admin token handed to the
//! page before its scripts run, hidden rather than closed) and the one for the app's own pages.

use anyhow::Context;
use tauri::{AppHandle, Manager, Url, WebviewUrl, WebviewWindow, WebviewWindowBuilder, WindowEvent};
use tauri_plugin_opener::OpenerExt as _;

use crate::data_dir::Paths;
use crate::gateway::Running;
use crate::{pages, selftest};

/// The WebUI's window.
pub const MAIN: &str = "main";
/// The window of the app's own pages (first run, problem), until the WebUI's opens.
pub const LOCAL: &str = "local";
/// The windows' title (what `xdotool search --name` finds).
pub const TITLE: &str = "Switchyard";
/// Where the WebUI keeps its admin token: `webui/api.js`'s TOKEN, in the tab's sessionStorage.
const TOKEN_KEY: &str = "switchyard.admin_token";

/// The script WebKit runs in the window before any of the page's own, at every load: on the
/// gateway's origin only, the admin token into sessionStorage, where the WebUI's login would
/// have put it. The token lives in this process and that tab's memory: no URL, no file.
fn token_script(origin: &str, token: &str) -> String {
    let quoted = |s: &str| serde_json::Value::from(s).to_string();
    format!(
        "(function () {{\n  if (window.location.origin !== {origin}) return;\n  try {{ window.sessionStorage.setItem({key}, {token}); }} catch (_) {{}}\n  {locale}\n}})();",
        origin = quoted(origin),
        key = quoted(TOKEN_KEY),
        token = quoted(token),
        locale = LOCALE_FIX,
    )
}

/// WebKitGTK reports the process locale as the page's language: started with `LANG=C` (or
/// none) that is "C", which `Intl` refuses, and the WebUI's charts would not load. A language
/// `Intl` cannot take is read as "en-US".
const LOCALE_FIX: &str = "try { new Intl.NumberFormat(navigator.language); } catch (_) { \
    Object.defineProperty(Navigator.prototype, 'language', { get: () => 'en-US', configurable: true }); \
    Object.defineProperty(Navigator.prototype, 'languages', { get: () => ['en-US'], configurable: true }); }";

/// Opens the WebUI window, logged in (shown unless `visible` is false), and closes the app's
/// page window.
pub fn open_main(app: &AppHandle, running: &Running, paths: &Paths, visible: bool) -> anyhow::Result<()> {
    if let Some(window) = app.get_webview_window(MAIN) {
        return if visible { show_window(&window) } else { Ok(()) };
    }
    let origin = running.base_url();
    let url: Url = running.webui_url().parse().context("the WebUI's URL")?;
    let mut builder = WebviewWindowBuilder::new(app, MAIN, WebviewUrl::External(url))
        .title(TITLE)
        .inner_size(1280.0, 800.0)
        .min_inner_size(480.0, 400.0)
        .visible(visible)
        .data_directory(paths.webview());
    if let Some(token) = running.admin_token() {
        builder = builder.initialization_script(token_script(&origin, &token));
    }
    let opener = app.clone();
    let window = builder
        // The window shows the gateway and nothing else: other links open in the browser.
        .on_navigation(move |url| {
            if same_origin(url, &origin) || url.scheme() == "about" {
                return true;
            }
            if matches!(url.scheme(), "http" | "https")
                && let Err(e) = opener.opener().open_url(url.as_str(), None::<&str>)
            {
                tracing::warn!("cannot open {url} in the browser: {e}");
            }
            false
        })
        .on_page_load(selftest::on_page_load)
        .on_document_title_changed(|window, title| selftest::on_title(&window, &title))
        .build()
        .context("cannot open the WebUI's window")?;
    hide_on_close(&window);
    if let Some(local) = app.get_webview_window(LOCAL) {
        let _ = local.destroy();
    }
    Ok(())
}

/// Compared as origins, not strings (`http://h:80` and `http://h` are one origin).
fn same_origin(url: &Url, origin: &str) -> bool {
    Url::parse(origin).is_ok_and(|origin| origin.origin() == url.origin())
}

/// Shows one of the app's pages (`path` on `switchyard://localhost`): in its window if open,
/// else in a new one.
pub fn open_local(app: &AppHandle, path: &str) -> anyhow::Result<()> {
    let url: Url = format!("{}://localhost{path}", pages::SCHEME).parse().context("a page's URL")?;
    if let Some(window) = app.get_webview_window(LOCAL) {
        window.navigate(url)?;
        return show_window(&window);
    }
    let mut builder = WebviewWindowBuilder::new(app, LOCAL, WebviewUrl::CustomProtocol(url))
        .title(TITLE)
        .inner_size(760.0, 620.0)
        .min_inner_size(420.0, 360.0);
    if let Ok(paths) = crate::desktop(app).paths() {
        builder = builder.data_directory(paths.webview());
    }
    builder.build().context("cannot open the app's window")?;
    Ok(())
}

/// Shows and focuses the WebUI's window, else the app's page window, else the first-run or
/// problem page in a new one.
pub fn show(app: &AppHandle) -> anyhow::Result<()> {
    match app.get_webview_window(MAIN).or_else(|| app.get_webview_window(LOCAL)) {
        Some(window) => show_window(&window),
        None if crate::desktop(app).problem().is_some() => open_local(app, "/problem"),
        None => open_local(app, "/"),
    }
}

fn show_window(window: &WebviewWindow) -> anyhow::Result<()> {
    window.unminimize()?;
    window.show()?;
    window.set_focus()?;
    Ok(())
}

/// Closing the WebUI's window hides it: the gateway goes on serving, the tray (or another
/// launch) brings the window back.
fn hide_on_close(window: &WebviewWindow) {
    let hidden = window.clone();
    window.on_window_event(move |event| {
        if let WindowEvent::CloseRequested { api, .. } = event {
            api.prevent_close();
            match hidden.hide() {
                Ok(()) => tracing::info!("window closed: still serving (tray: Open, or launch the app again)"),
                Err(e) => tracing::warn!("cannot hide the window: {e}"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_script_quotes_what_it_is_given_and_checks_the_origin_first() {
        let script = token_script("http://127.0.0.1:8080", "sy-a\"b</script>\u{2028}");
        assert!(script.contains(r#"window.location.origin !== "http://127.0.0.1:8080""#), "{script}");
        assert!(script.contains(r#"setItem("switchyard.admin_token", "sy-a\"b</script>"#), "{script}");
        assert!(script.find("origin").unwrap() < script.find("setItem").unwrap());
    }

    #[test]
    fn only_the_gateways_origin_stays_in_the_window() {
        let origin = "http://127.0.0.1:8080";
        assert!(same_origin(&"http://127.0.0.1:8080/ui/#/keys".parse().unwrap(), origin));
        assert!(!same_origin(&"http://127.0.0.1:9090/ui/".parse().unwrap(), origin));
        assert!(!same_origin(&"http://localhost:8080/ui/".parse().unwrap(), origin));
    }
}
