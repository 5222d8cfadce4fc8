//! The WebUI in a real browser: the real binary on loopback in front of scripted
//! upstreams, driven by `tests/browser/webui.mjs` (playwright-core + Debian's chromium).
//! Also the UI's serving rules (headers, hashed assets, off with the admin API) over HTTP.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::post;

use crate::support::KEY;
use crate::support::binary::Binary;
use crate::support::faulty::{Answer, Behaviour, FaultyUpstream, error_body};

const ADMIN: &str = "webui-test-admin-token-0123456789";
/// The whole browser run; each step inside waits on what it needs, this only stops a hang.
const BROWSER_GUARD: Duration = Duration::from_secs(420);

const ANSWER: Answer =
    Answer { model: "gpt-4o-mini", text: "Hello from the mock upstream.", prompt_tokens: 12, completion_tokens: 6 };

/// An upstream that answers well until the browser test tells it to fail (`POST /fail`,
/// `POST /recover` on the control address); its errors carry HTML, to be shown as text.
async fn switchable_upstream() -> (FaultyUpstream, String) {
    let failing = Arc::new(AtomicBool::new(false));
    let seen = failing.clone();
    let upstream = FaultyUpstream::start(move |arrival| {
        if seen.load(Ordering::SeqCst) {
            let message = "upstream broke: <script>alert('log')</script><b>bold</b>";
            Behaviour::json(500, error_body(message, Some("server_error"), None, None))
        } else {
            ANSWER.to(arrival)
        }
    })
    .await;
    let control = Router::new()
        .route("/fail", post(|State(f): State<Arc<AtomicBool>>| async move { f.store(true, Ordering::SeqCst) }))
        .route("/recover", post(|State(f): State<Arc<AtomicBool>>| async move { f.store(false, Ordering::SeqCst) }))
        .with_state(failing);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let control_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, control).await.unwrap() });
    (upstream, control_url)
}

fn gateway_config(dir: &std::path::Path, upstream: &str) -> String {
    std::fs::write(
        dir.join("runtime.yaml"),
        "auto:\n  - {model: gpt-4o-mini, source: alpha, tier: 1}\n  - {model: gpt-4o-mini, source: beta, tier: 2}\n",
    )
    .unwrap();
    format!(
        "admin_token: {ADMIN}\nruntime_file: {dir}/runtime.yaml\nadapter_dir: {dir}/adapters\n\
         channel_selection: order\n\
         policies: [{{name: secrets, plugin: block-secrets}}]\n\
         sources:\n\
         \x20 - {{name: alpha, base_url: '{upstream}', api_key: sk-alpha-secret-0123456789, models: [{{name: gpt-4o-mini}}]}}\n\
         \x20 - {{name: beta, base_url: '{upstream}', api_key: sk-beta-secret-0123456789, models: [{{name: gpt-4o-mini}}]}}\n",
        dir = dir.display()
    )
}

pub(crate) fn browser_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_run_the_gateway_from_the_webui_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let (upstream, control) = switchable_upstream().await;
    let mut gateway = Binary::start(dir.path(), &gateway_config(dir.path(), &upstream.url));
    let node_modules = browser_dir().join("node_modules/playwright-core");
    assert!(
        node_modules.is_dir(),
        "playwright-core is missing: run `npm ci --prefix tests/browser` (and `apt-get install chromium`), as .ci/run does"
    );
    let shots = std::env::var_os("SWITCHYARD_SHOTS").map(PathBuf::from).unwrap_or_else(|| dir.path().join("shots"));
    let mut node = tokio::process::Command::new("node");
    node.arg(browser_dir().join("webui.mjs"))
        .env("GATEWAY_URL", &gateway.url)
        .env("ADMIN_TOKEN", ADMIN)
        .env("GATEWAY_KEY", KEY)
        .env("CONTROL_URL", &control)
        .env("SHOT_DIR", &shots)
        .env("LUA_FIXTURE", PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lua/legacy.lua"))
        .env("WASM_FIXTURE", crate::support::guest_wasm("openai"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(flows) = std::env::var_os("SWITCHYARD_FLOWS") {
        node.env("FLOWS", flows);
    }
    let run = node.spawn().expect("node runs (install nodejs)");
    let output = tokio::time::timeout(BROWSER_GUARD, run.wait_with_output())
        .await
        .expect("the browser flows end in time")
        .expect("node's output");
    let mut log = Vec::new();
    while let Ok(line) = gateway.log.try_recv() {
        log.push(line);
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "browser flows failed:\n{stdout}\n{stderr}\n--- gateway log (last 60 lines) ---\n{}",
        log[log.len().saturating_sub(60)..].join("\n")
    );
    gateway.assert_alive("the browser flows").await;
}

#[tokio::test]
async fn the_ui_is_served_with_strict_headers_and_hashed_assets() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = FaultyUpstream::healthy(ANSWER).await;
    let gateway = Binary::start(dir.path(), &gateway_config(dir.path(), &upstream.url));
    let index = reqwest::get(format!("{}/ui/", gateway.url)).await.unwrap();
    assert_eq!(index.status(), 200);
    let headers = index.headers().clone();
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["cache-control"], "no-cache");
    let html = index.text().await.unwrap();
    assert!(!html.contains("{{BASE}}"), "every asset path is filled in");
    assert!(!html.contains("<script>") && !html.contains("style="), "no inline script or style: {html}");
    let app = html.split('"').find(|s| s.starts_with("/ui/a/") && s.ends_with("/app.js")).expect("app.js by hash");
    let asset = reqwest::get(format!("{}{app}", gateway.url)).await.unwrap();
    assert_eq!(asset.status(), 200);
    assert_eq!(asset.headers()["cache-control"], "public, max-age=31536000, immutable");
    assert!(asset.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    let stale = reqwest::get(format!("{}/ui/a/0000000000000000/app.js", gateway.url)).await.unwrap();
    assert_eq!(stale.status(), 404, "another version's files are not mixed with this one's");
    for path in ["/ui/a/x/../../../Cargo.toml", "/ui/a/x/nope.js", "/ui/a/x/index.html"] {
        let status = reqwest::get(format!("{}{path}", gateway.url)).await.unwrap().status();
        assert_eq!(status, 404, "{path}");
    }
    let redirect = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let bare = redirect.get(format!("{}/ui", gateway.url)).send().await.unwrap();
    assert_eq!(bare.headers()["location"], "/ui/");
}

#[tokio::test]
async fn without_an_admin_token_in_the_config_the_gateway_keeps_its_own_and_an_empty_one_turns_the_ui_off() {
    let dir = tempfile::tempdir().unwrap();
    let upstream = FaultyUpstream::healthy(ANSWER).await;
    let config = gateway_config(dir.path(), &upstream.url).replace(&format!("admin_token: {ADMIN}\n"), "");
    let mut gateway = Binary::start(dir.path(), &config);
    let file = dir.path().join("admin_token");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the generated token is the owner's alone");
    let token = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert!(token.len() >= 40, "{token}");
    let announce = loop {
        let line = gateway.log.recv().await.expect("the gateway logs the WebUI address");
        if line.contains("WebUI: ") {
            break line;
        }
    };
    assert!(announce.contains("/ui/") && announce.contains("admin_token"), "{announce}");
    assert!(!announce.contains(&token), "the token itself never goes to the log: {announce}");
    let settings = reqwest::Client::new()
        .get(format!("{}/admin/api/settings", gateway.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(settings.status(), 200);
    assert_eq!(reqwest::get(format!("{}/ui/", gateway.url)).await.unwrap().status(), 200);
    drop(gateway);
    // The same token on the next start.
    let gateway = Binary::start(dir.path(), &config);
    let again = reqwest::Client::new()
        .get(format!("{}/admin/api/settings", gateway.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200, "the stored token is kept across restarts");
    drop(gateway);

    let off = tempfile::tempdir().unwrap();
    let config = gateway_config(off.path(), &upstream.url).replace(ADMIN, "''");
    let gateway = Binary::start(off.path(), &config);
    assert!(!off.path().join("admin_token").exists());
    for path in ["/ui/", "/admin/api/settings"] {
        assert_eq!(reqwest::get(format!("{}{path}", gateway.url)).await.unwrap().status(), 404, "{path}");
    }
}
