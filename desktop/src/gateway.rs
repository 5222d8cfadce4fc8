//! The gateway in this process: started from the data folder's config.yaml, served on loopback
//! (the config's port, or a free one), paused, resumed and stopped; its URLs, token and client key.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use sha2::{Digest, Sha256};
use switchyard::server::Gateway;
use switchyard::startup::Serving;
use tokio::sync::oneshot;

/// A gateway serving in this process.
pub struct Running {
    pub gateway: Arc<Gateway>,
    /// The loopback address it listens on.
    pub addr: SocketAddr,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    serving: Mutex<Option<Serving>>,
}

/// Boots the gateway as `switchyard --config FILE` does (`startup::start`: state database,
/// adapters, replicas, model detection, the Telegram bot when configured), on loopback.
pub async fn start(config_file: &Path) -> anyhow::Result<Running> {
    let mut config = switchyard::startup::load_config(config_file).map_err(|e| anyhow!("{e}"))?;
    let listen = free_loopback(config.settings().listen);
    config.update_settings(|settings| {
        settings.listen = listen;
        // A scrape address of its own serves /metrics without a token: on loopback too.
        if let Some(metrics) = settings.metrics.listen.as_mut() {
            metrics.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
        }
    });
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async move {
        let _ = stopped.await;
        tracing::info!("shutting down: finishing open requests");
    };
    let serving = switchyard::startup::start(config, shutdown).await.map_err(|e| anyhow!("{e}"))?;
    if serving.gateway.settings.admin_token.secret().is_none() {
        tracing::warn!("admin_token is '' in config.yaml: the WebUI and the admin API are off, the window shows 404");
    }
    Ok(Running {
        gateway: serving.gateway.clone(),
        addr: serving.addr,
        stop: Mutex::new(Some(stop)),
        serving: Mutex::new(Some(serving)),
    })
}

/// The config's address when it is a loopback one, else its port on 127.0.0.1 (the desktop
/// app serves this machine only); port 0 (any free one) when that port is taken, by a headless
/// gateway say: the window and the tray's "Copy base URL" follow the port the gateway gets.
fn free_loopback(listen: SocketAddr) -> SocketAddr {
    let wanted = if listen.ip().is_loopback() {
        listen
    } else {
        tracing::warn!("listen: {listen} is not loopback: the desktop app serves 127.0.0.1:{} instead", listen.port());
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), listen.port())
    };
    match std::net::TcpListener::bind(wanted) {
        Ok(_free) => wanted,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::warn!("{wanted} is taken: serving on a free loopback port instead");
            SocketAddr::new(wanted.ip(), 0)
        }
        // Anything else the gateway's own bind reports, with its fix.
        Err(_) => wanted,
    }
}

impl Running {
    /// What clients put before `/v1` (`http://127.0.0.1:8080`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn webui_url(&self) -> String {
        format!("{}/ui/", self.base_url())
    }

    /// The admin token (config.yaml's, or the one kept in data/admin_token); None when the
    /// admin API is off.
    pub fn admin_token(&self) -> Option<String> {
        self.gateway.settings.admin_token.secret().map(|s| s.expose().to_string())
    }

    pub fn paused(&self) -> bool {
        self.gateway.paused()
    }

    /// Pauses or resumes serving: while paused `/v1` answers 503 `serving_paused`; the WebUI,
    /// the admin API and `/health` go on (as `PUT /admin/api/serving` does).
    pub fn set_paused(&self, paused: bool) {
        self.gateway.set_paused(paused);
    }

    /// Stops listening, waits up to `wait` for open requests, commits the state and leaves the
    /// other replicas. Once: later calls return at once.
    pub async fn stop(&self, wait: Duration) {
        let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() else { return };
        let _ = stop.send(());
        let serving = self.serving.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(serving) = serving else { return };
        match tokio::time::timeout(wait, serving.finish()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("{e}"),
            Err(_) => {
                tracing::warn!("requests still open after {} s: leaving them", wait.as_secs());
                self.gateway.scheduler.flush();
                self.gateway.stop_shared().await;
            }
        }
    }

    /// A client key to hand out: config.yaml's first key with a secret (one allowed every model
    /// first); else the key this app made before, if the gateway still has it; else a new key
    /// `desktop` made through the admin API, its secret kept in `saved` (600).
    pub async fn client_key(&self, saved: &Path) -> anyhow::Result<String> {
        let runtime = self.gateway.runtime();
        let keys = &runtime.config.keys;
        let configured = keys
            .iter()
            .find(|k| !k.key.is_empty() && k.models.iter().any(|m| m == "*"))
            .or_else(|| keys.iter().find(|k| !k.key.is_empty()));
        if let Some(key) = configured {
            return Ok(key.key.expose().to_string());
        }
        if let Ok(text) = std::fs::read_to_string(saved) {
            let secret = text.trim();
            let digest: String = Sha256::digest(secret.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
            if !secret.is_empty() && runtime.config.runtime_keys.iter().any(|k| k.key_sha256 == digest) {
                return Ok(secret.to_string());
            }
        }
        let secret = self.make_key().await?;
        crate::data_dir::write_private(saved, format!("{secret}\n"))?;
        Ok(secret)
    }

    /// `POST /admin/api/keys` on the loopback listener: a key for every model, named `desktop`
    /// (or `desktop-N` when that name is taken); its secret, which the answer shows once.
    async fn make_key(&self) -> anyhow::Result<String> {
        let token = self.admin_token().context("admin_token is '' in config.yaml: the app cannot make a key")?;
        let client = switchyard::http_client::builder().build()?;
        for n in 0..5 {
            let name = if n == 0 { "desktop".to_string() } else { format!("desktop-{n}") };
            let response = client
                .post(format!("{}/admin/api/keys", self.base_url()))
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .body(serde_json::json!({"name": name, "models": ["*"]}).to_string())
                .send()
                .await?;
            let status = response.status();
            let answer: serde_json::Value = serde_json::from_slice(&response.bytes().await?).unwrap_or_default();
            if status == reqwest::StatusCode::CONFLICT {
                continue;
            }
            if !status.is_success() {
                bail!("the admin API did not make a key ({status}): {}", answer["error"]["message"]);
            }
            tracing::info!(key = %name, "made a client key for the tray's Copy a client key");
            return answer["key"].as_str().map(str::to_string).context("the admin API's answer has no key");
        }
        bail!(
            "keys desktop to desktop-4 exist already, made by another copy of the app: delete one in the WebUI (Keys)"
        )
    }
}
