//! Starts a real gateway (real config parsing, plugin host, adapters, axum) on 127.0.0.1:0
//! in a temporary data_dir.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use switchyard::plugin::LoadReport;
use switchyard::server::Gateway;
use tokio::sync::oneshot;

pub const KEY: &str = "sk-test-gateway-key-0001";

pub struct TestGateway {
    pub url: String,
    pub gateway: Arc<Gateway>,
    pub report: LoadReport,
    dir: tempfile::TempDir,
    _shutdown: oneshot::Sender<()>,
}

/// Where the build put the guest components (hostile.wasm lives here too).
pub fn guest_wasm(name: &str) -> PathBuf {
    Path::new(env!("SWITCHYARD_GUEST_DIR")).join(format!("{name}.wasm"))
}

/// One compiled-component cache for every test gateway: each compiles the built-ins once.
pub fn shared_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache")
}

/// A config with one key (`KEY`, all models) and the given `sources:` YAML block.
/// `{data}` in the YAML becomes the data_dir path.
pub fn config_with(extra: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\nkeys:\n  - name: tester\n    key: {KEY}\n    models: [\"*\"]\n{extra}",
        cache = shared_cache().display()
    )
}

impl TestGateway {
    pub async fn start(yaml: &str) -> TestGateway {
        Self::start_in(tempfile::tempdir().unwrap(), yaml).await
    }

    pub async fn start_in(dir: tempfile::TempDir, yaml: &str) -> TestGateway {
        Self::start_with_clock(dir, yaml, Arc::new(switchyard::scheduler::SystemClock)).await
    }

    /// A gateway whose scheduler runs on `clock`.
    pub async fn start_with_clock(
        dir: tempfile::TempDir,
        yaml: &str,
        clock: Arc<dyn switchyard::scheduler::Clock>,
    ) -> TestGateway {
        let text = yaml.replace("{data}", &dir.path().display().to_string());
        let file = dir.path().join("config.yaml");
        std::fs::write(&file, &text).unwrap();
        let config = switchyard::startup::load_config(&file).unwrap_or_else(|e| panic!("{e}"));
        let listen = config.base.settings.listen;
        let (gateway, report) = switchyard::startup::build_with_clock(config, clock).await.unwrap();
        gateway.start_shared();
        gateway.detect_at_start().await;
        let (tx, rx) = oneshot::channel::<()>();
        let (addr, _handle) = switchyard::server::serve(gateway.clone(), listen, async {
            let _ = rx.await;
        })
        .await
        .unwrap();
        TestGateway { url: format!("http://{addr}"), gateway, report, dir, _shutdown: tx }
    }

    /// Stops this gateway and starts a new one on the same data_dir (state, cache, adapters).
    pub async fn restart(self, yaml: &str, clock: Arc<dyn switchyard::scheduler::Clock>) -> TestGateway {
        let TestGateway { dir, _shutdown, .. } = self;
        drop(_shutdown);
        Self::start_with_clock(dir, yaml, clock).await
    }

    pub fn post(&self, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new().post(format!("{}{path}", self.url)).bearer_auth(KEY)
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new().get(format!("{}{path}", self.url)).bearer_auth(KEY)
    }

    /// An admin API path read with `token`, as JSON; anything but 200 fails the test.
    pub async fn admin_json(&self, token: &str, path: &str) -> serde_json::Value {
        let response =
            reqwest::Client::new().get(format!("{}{path}", self.url)).bearer_auth(token).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.json().await.unwrap()
    }

    /// The gateway's data_dir.
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The admin token in use (configured, or made into data_dir at start).
    pub fn admin_token(&self) -> String {
        use switchyard::config::AdminToken;
        match &self.gateway.settings.admin_token {
            AdminToken::Given(token) | AdminToken::Stored(token, _) => token.expose().to_string(),
            other => panic!("no admin token: {other:?}"),
        }
    }

    /// `GET /metrics` with the admin token, as a scraper with credentials sends it.
    pub async fn scrape_metrics(&self) -> reqwest::Response {
        reqwest::Client::new()
            .get(format!("{}/metrics", self.url))
            .bearer_auth(self.admin_token())
            .send()
            .await
            .unwrap()
    }

    pub async fn chat(&self, body: serde_json::Value) -> reqwest::Response {
        self.post("/v1/chat/completions").json(&body).send().await.unwrap()
    }
}

/// A single-message chat body; a stream asks for the usage chunk, as the fixtures have it.
pub fn chat_body(model: &str, stream: bool) -> serde_json::Value {
    let mut body =
        serde_json::json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "Hello!"}]});
    if stream {
        body["stream_options"] = serde_json::json!({"include_usage": true});
    }
    body
}
