//! The hooks the desktop test drives, each reported on stdout as a `SELFTEST` line: what the
//! window shows once the WebUI loaded, and every tray action run through the tray's functions.

use std::time::Duration;

use anyhow::{Context, ensure};
use tauri::webview::{PageLoadEvent, PageLoadPayload};
use tauri::{AppHandle, Manager, WebviewWindow};
use tauri_plugin_autostart::ManagerExt as _;
use tauri_plugin_clipboard_manager::ClipboardExt as _;

use crate::gateway::Running;
use crate::{alerts, desktop, tray, window};

/// The page hands its report back as its title (the window's only channel out of the page that
/// needs no IPC): this prefix, then JSON.
const PROBE_TITLE: &str = "switchyard-probe:";

/// Looks at the page as a person would, then reports: whether the WebUI's shell (logged in) or
/// its login form shows, when it first showed, whether the tab holds a token, and what the admin
/// API answers to it.
const PROBE: &str = r#"(async () => {
  const wait = (ms) => new Promise((done) => setTimeout(done, ms));
  for (let i = 0; i < 200 && !document.querySelector('.shell, .login'); i++) await wait(50);
  const shown_at_ms = Date.now();
  const token = sessionStorage.getItem('switchyard.admin_token');
  let admin = 0;
  try {
    admin = (await fetch('/admin/api/settings', { headers: { Authorization: `Bearer ${token ?? ''}` } })).status;
  } catch { admin = -1; }
  // A refused token brings the login back as the first page's own calls return: give them time.
  await wait(1500);
  const report = {
    origin: location.origin,
    path: location.pathname + location.hash,
    shell: !!document.querySelector('.shell'),
    login: !!document.querySelector('.login'),
    token: !!token,
    // The first page's own error box (a page that could not load or fetch).
    errors: [...document.querySelectorAll('.errorbox')].map((e) => e.textContent.trim().slice(0, 200)),
    admin_status: admin,
    shown_at_ms,
    title: document.title,
  };
  const before = document.title;
  document.title = 'switchyard-probe:' + JSON.stringify(report);
  setTimeout(() => { document.title = before; }, 500);
})();"#;

/// Once the gateway serves (with `--self-test`): its address and how long the start took.
pub fn gateway_ready(app: &AppHandle, running: &Running) {
    let desktop = desktop(app);
    if desktop.cli.self_test || desktop.cli.self_test_actions {
        println!(
            "SELFTEST gateway base_url={} ms={} pid={}",
            running.base_url(),
            desktop.started.elapsed().as_millis(),
            std::process::id()
        );
    }
}

/// A page finished loading in the WebUI's window: with `--self-test`, probe it.
pub fn on_page_load(window: WebviewWindow, payload: PageLoadPayload<'_>) {
    if !matches!(payload.event(), PageLoadEvent::Finished) || !desktop(window.app_handle()).cli.self_test {
        return;
    }
    if let Err(e) = window.eval(PROBE) {
        println!("SELFTEST webui FAILED cannot run the probe: {e}");
    }
}

/// The page's title changed: a probe's report is printed, with `start_ms`, the time from the
/// process's start to the WebUI showing (`SELFTEST webui {...} start_ms=N`).
pub fn on_title(window: &WebviewWindow, title: &str) {
    let Some(report) = title.strip_prefix(PROBE_TITLE) else { return };
    let started = desktop(window.app_handle()).started_unix_ms;
    let shown = serde_json::from_str::<serde_json::Value>(report).ok().and_then(|r| r["shown_at_ms"].as_f64());
    let start_ms = shown.map_or(-1, |shown| shown as i64 - started as i64);
    println!("SELFTEST webui {report} start_ms={start_ms}");
}

/// Runs every tray action once, in the order a person would, through the functions the tray's
/// menu calls, checking each one's effect from outside (clipboard, HTTP); Quit last. On a
/// thread of its own: the actions block.
pub fn run_actions(app: AppHandle) {
    let spawned = std::thread::Builder::new().name("self-test".into()).spawn(move || {
        let mut failed = 0;
        let mut run = |name: &str, action: &dyn Fn() -> anyhow::Result<String>| match action() {
            Ok(what) => println!("SELFTEST action {name} ok {what}"),
            Err(e) => {
                failed += 1;
                println!("SELFTEST action {name} FAILED {e:#}");
            }
        };
        run("open", &|| open(&app));
        run("copy_base_url", &|| copy_base_url(&app));
        run("copy_client_key", &|| copy_client_key(&app));
        run("toggle_serving", &|| toggle_serving(&app));
        run("toggle_autostart", &|| toggle_autostart(&app));
        run("open_data_folder", &|| tray::open_data_folder(&app).map(|()| "opened".to_string()));
        run("notify", &|| {
            alerts::notify(&app, "Switchyard self-test: alerts reach the desktop").map(|()| "sent".to_string())
        });
        println!("SELFTEST actions done failed={failed}");
        println!("SELFTEST action quit ok quitting");
        tray::quit(&app);
    });
    if let Err(e) = spawned {
        println!("SELFTEST actions FAILED cannot start: {e}");
    }
}

fn open(app: &AppHandle) -> anyhow::Result<String> {
    let window = app.get_webview_window(window::MAIN).context("no WebUI window")?;
    window.hide()?;
    tray::open(app)?;
    ensure!(window.is_visible()?, "the window is still hidden");
    Ok("hidden window shown again".into())
}

fn copy_base_url(app: &AppHandle) -> anyhow::Result<String> {
    let url = tray::copy_base_url(app)?;
    let pasted = app.clipboard().read_text()?;
    ensure!(pasted == url, "the clipboard holds {pasted:?}, not {url:?}");
    let (status, _) = get(&format!("{url}/health"), None)?;
    ensure!(status == 200, "GET /health answered {status}");
    Ok(format!("{url} on the clipboard, /health 200"))
}

fn copy_client_key(app: &AppHandle) -> anyhow::Result<String> {
    let key = tray::copy_client_key(app)?;
    ensure!(app.clipboard().read_text()? == key, "the clipboard does not hold the key");
    let base = desktop(app).running()?.base_url();
    let (status, body) = get(&format!("{base}/v1/models"), Some(&key))?;
    ensure!(status == 200, "GET /v1/models with the key answered {status}: {body}");
    Ok(format!("{} on the clipboard, /v1/models 200", switchyard::config::mask(&key)))
}

fn toggle_serving(app: &AppHandle) -> anyhow::Result<String> {
    let running = desktop(app).running()?;
    let key = tray::copy_client_key(app)?;
    let models = format!("{}/v1/models", running.base_url());
    ensure!(tray::toggle_serving(app)?, "the first toggle did not pause");
    let (status, body) = get(&models, Some(&key))?;
    ensure!(status == 503 && body.contains("serving_paused"), "paused, /v1/models answered {status}: {body}");
    let (ui, _) = get(&running.webui_url(), None)?;
    ensure!(ui == 200, "paused, the WebUI answered {ui}");
    ensure!(!tray::toggle_serving(app)?, "the second toggle did not resume");
    let (status, body) = get(&models, Some(&key))?;
    ensure!(status == 200, "resumed, /v1/models answered {status}: {body}");
    Ok("paused: /v1 503 serving_paused, WebUI 200; resumed: /v1 200".into())
}

fn toggle_autostart(app: &AppHandle) -> anyhow::Result<String> {
    let before = app.autolaunch().is_enabled()?;
    let on = tray::toggle_autostart(app)?;
    ensure!(on != before && app.autolaunch().is_enabled()? == on, "the login item did not flip");
    let back = tray::toggle_autostart(app)?;
    ensure!(back == before, "the login item did not flip back");
    Ok(format!("flipped to {on} and back to {before}"))
}

/// GET `url` (loopback), with a gateway key when given: its status and body.
fn get(url: &str, key: Option<&str>) -> anyhow::Result<(u16, String)> {
    tauri::async_runtime::block_on(async {
        let client = switchyard::http_client::builder().timeout(Duration::from_secs(10)).build()?;
        let mut request = client.get(url);
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let body = String::from_utf8_lossy(&response.bytes().await?).into_owned();
        Ok::<_, anyhow::Error>((status, body))
    })
}
