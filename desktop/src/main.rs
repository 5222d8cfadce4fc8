//! Switchyard's desktop app: the gateway in this process on loopback, its WebUI in a window, a
//! tray icon. This file wires them: the command line, the plugins, the app's state, the start.

mod alerts;
mod data_dir;
mod first_run;
mod gateway;
mod pages;
mod selftest;
mod tray;
mod window;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use clap::Parser;
use tauri::{AppHandle, Manager, RunEvent};

// The gateway's allocator, set as its binary sets it (jemalloc, one arena, freed memory handed
// back within a second): the gateway's share of the app's memory stays what it is headless.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[expect(non_upper_case_globals, reason = "jemalloc reads this symbol by its C name")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static malloc_conf: &[u8] = b"narenas:1,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// Longest wait for open requests when the app quits.
pub const STOP_WAIT: Duration = Duration::from_secs(10);

#[derive(Parser, Clone, Debug, Default)]
#[command(version, about = "Switchyard desktop: the gateway and its WebUI in one app, with a tray icon")]
pub struct Cli {
    /// With no config.yaml in the data folder yet, start from this template without asking
    /// (example, local, empty).
    #[arg(long, value_name = "TEMPLATE")]
    pub first_run: Option<String>,
    /// Start in the tray, the window hidden (how the app starts at login).
    #[arg(long)]
    pub hidden: bool,
    /// Report on stdout what the window shows once the WebUI has loaded (`SELFTEST webui {...}`).
    #[arg(long)]
    pub self_test: bool,
    /// Run every tray action once, through the tray's own functions, report each on stdout
    /// (`SELFTEST action ...`), then quit. Given to a second launch, the running app does it.
    #[arg(long)]
    pub self_test_actions: bool,
}

/// What the app shares between its parts (managed as `Arc<Desktop>`).
pub struct Desktop {
    pub cli: Cli,
    /// When the process started (the start time the self-test reports).
    pub started: Instant,
    /// The same, in ms since the Unix epoch (what a page's `Date.now()` compares with).
    pub started_unix_ms: u64,
    /// The runtime the gateway's tasks run on (Tauri's async runtime too).
    pub tokio: tokio::runtime::Handle,
    paths: OnceLock<data_dir::Paths>,
    running: OnceLock<Arc<gateway::Running>>,
    /// Why the gateway did not start, for the problem page.
    problem: Mutex<Option<String>>,
    launching: AtomicBool,
}

impl Desktop {
    pub fn paths(&self) -> anyhow::Result<&data_dir::Paths> {
        self.paths.get().ok_or_else(|| anyhow!("the data folder is not ready yet"))
    }

    /// The gateway, once it serves.
    pub fn running(&self) -> anyhow::Result<Arc<gateway::Running>> {
        self.running.get().cloned().ok_or_else(|| match self.problem() {
            Some(why) => anyhow!("the gateway is not running: {why}"),
            None => anyhow!("the gateway is not running yet (first run: choose a starting config in the window)"),
        })
    }

    pub fn problem(&self) -> Option<String> {
        self.problem.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The app's shared state, from anything that has the app.
pub fn desktop(app: &AppHandle) -> Arc<Desktop> {
    app.state::<Arc<Desktop>>().inner().clone()
}

/// The app's context from tauri.conf.json and the icons, made by Tauri's macro.
#[expect(clippy::disallowed_methods, reason = "tauri's generated context may exit on a broken asset; ours has none")]
fn context() -> tauri::Context {
    tauri::generate_context!()
}

fn main() -> ExitCode {
    let started = Instant::now();
    let started_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX));
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // One runtime for the gateway and for Tauri's own tasks.
    tauri::async_runtime::set(runtime.handle().clone());
    switchyard::logging::init(&Default::default(), None);
    let desktop = Arc::new(Desktop {
        cli,
        started,
        started_unix_ms,
        tokio: runtime.handle().clone(),
        paths: OnceLock::new(),
        running: OnceLock::new(),
        problem: Mutex::new(None),
        launching: AtomicBool::new(false),
    });
    let app = tauri::Builder::default()
        // First: a second launch hands its arguments to the first and exits here, before
        // anything below (the gateway included) starts.
        .plugin(tauri_plugin_single_instance::init(|app, argv, _cwd| second_launch(app, argv)))
        .plugin(tauri_plugin_notification::init())
        .plugin(tauri_plugin_clipboard_manager::init())
        // The WebUI gets no Tauri API: no script of the opener's in its page either.
        .plugin(tauri_plugin_opener::Builder::new().open_js_links_on_click(false).build())
        .plugin(tauri_plugin_autostart::Builder::new().arg("--hidden").build())
        .register_uri_scheme_protocol(pages::SCHEME, |ctx, request| pages::answer(ctx.app_handle(), &request))
        .manage(desktop.clone())
        .setup(|app| setup(app.handle()).map_err(Into::into))
        .build(context());
    let app = match app {
        Ok(app) => app,
        Err(e) => {
            eprintln!("error: the desktop app did not start: {e}");
            return ExitCode::from(1);
        }
    };
    let code = app.run_return(|_app, event| {
        // The last window closed (it is hidden, not closed, but a first-run page can close):
        // the tray keeps the app. Quit (tray) exits with a code, which is let through.
        if let RunEvent::ExitRequested { code: None, api, .. } = event {
            api.prevent_exit();
        }
    });
    // Quit stopped the gateway already; any other way out stops it here.
    if let Some(running) = desktop.running.get() {
        runtime.block_on(running.stop(STOP_WAIT));
    }
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The data folder, the tray, then the gateway and its window (or the first-run page).
fn setup(app: &AppHandle) -> anyhow::Result<()> {
    let desktop = desktop(app);
    let paths = data_dir::prepare(app)?;
    tracing::info!(data = %paths.root.display(), "data folder");
    let _ = desktop.paths.set(paths.clone());
    // A desktop without a tray host still has the window and a second launch to bring it back.
    if let Err(e) = tray::build(app) {
        tracing::warn!("no tray icon: {e:#}");
    }
    if first_run::needed(&paths) {
        match &desktop.cli.first_run {
            Some(template) => first_run::write(&paths, template)?,
            None => {
                window::open_local(app, "/")?;
                return Ok(());
            }
        }
    }
    launch(app);
    Ok(())
}

/// Starts the gateway from the data folder's config.yaml and opens the WebUI window; a failure
/// opens the problem page (with Retry) instead. Blocks until the gateway serves: call it from
/// the main thread or a thread of its own, never from an async task.
pub fn launch(app: &AppHandle) {
    let desktop = desktop(app);
    if desktop.running.get().is_some() {
        if let Err(e) = window::show(app) {
            tracing::warn!("cannot show the window: {e:#}");
        }
        return;
    }
    if desktop.launching.swap(true, Ordering::AcqRel) {
        return;
    }
    let started = (|| -> anyhow::Result<Arc<gateway::Running>> {
        let paths = desktop.paths()?;
        let running = Arc::new(tauri::async_runtime::block_on(gateway::start(&paths.config()))?);
        let _ = desktop.running.set(running.clone());
        tracing::info!(
            "serving on {} (WebUI in the window), {} ms after start",
            running.base_url(),
            desktop.started.elapsed().as_millis()
        );
        selftest::gateway_ready(app, &running);
        tray::follow(app, &desktop.tokio);
        alerts::spawn(app, &running, &desktop.tokio);
        window::open_main(app, &running, paths, !desktop.cli.hidden)?;
        Ok(running)
    })();
    desktop.launching.store(false, Ordering::Release);
    match started {
        Ok(_) => {
            *desktop.problem.lock().unwrap_or_else(|p| p.into_inner()) = None;
            if desktop.cli.self_test_actions {
                selftest::run_actions(app.clone());
            }
        }
        Err(e) => {
            let why = format!("{e:#}");
            tracing::error!("the gateway did not start: {why}");
            *desktop.problem.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
            if let Err(e) = window::open_local(app, "/problem") {
                tracing::warn!("cannot show the problem page: {e:#}");
            }
        }
    }
}

/// Another launch of the app, handed over by the single-instance plugin: it shows the window,
/// or, asked to (`--self-test-actions`) when this instance runs `--self-test`, runs the tray's
/// actions here.
fn second_launch(app: &AppHandle, argv: Vec<String>) {
    let asked = Cli::try_parse_from(argv).unwrap_or_default();
    // Only an app started for a test obeys: any process of the user's could send the flag, and
    // the actions quit the app, make a key and fill the clipboard.
    if asked.self_test_actions && desktop(app).cli.self_test {
        tracing::info!("launched again with --self-test-actions: running them in this instance");
        selftest::run_actions(app.clone());
        return;
    }
    tracing::info!("launched again: showing the window");
    if let Err(e) = tray::open(app) {
        tracing::warn!("cannot show the window: {e:#}");
    }
}
