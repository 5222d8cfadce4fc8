//! The HTTP front door: shared gateway state, the axum router, and serving it.

mod admin;
mod auth;
mod books;
mod chat;
mod dispatch;
mod embeddings;
mod error;
mod images;
mod messages;
mod models;
mod modes;
mod request;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::response::IntoResponse;
use axum::routing::{get, post};

pub use auth::{KeyTable, ModelScope};
pub use error::ApiError;

use crate::config::Config;
use crate::plugin::PluginHost;
use crate::provider::Provider;
use crate::scheduler::Scheduler;
use crate::state::{LogRow, StateStore};

/// Everything a request handler needs, shared read-only.
pub struct Gateway {
    pub config: Config,
    pub plugins: PluginHost,
    pub provider: Provider,
    pub scheduler: Scheduler,
    pub keys: KeyTable,
    /// The state database (request logs, and the scheduler's state).
    pub state: Option<Arc<StateStore>>,
}

impl Gateway {
    pub fn new(
        config: Config,
        plugins: PluginHost,
        scheduler: Scheduler,
        state: Option<Arc<StateStore>>,
    ) -> anyhow::Result<Gateway> {
        for adapter in plugins.adapters() {
            adapter.set_pool_capacity(config.adapter_concurrency(adapter.name()));
        }
        let keys = KeyTable::new(&config.keys);
        Ok(Gateway { provider: Provider::new(&config)?, keys, scheduler, config, plugins, state })
    }

    /// Queues a request-log row.
    pub fn log(&self, row: LogRow) {
        if let Some(state) = &self.state {
            drop(state.log(row));
        }
    }

    /// Queues a request-log row; the receiver hears once it is on disk.
    pub fn log_confirmed(&self, row: LogRow) -> tokio::sync::oneshot::Receiver<()> {
        match &self.state {
            Some(state) => state.log(row),
            None => {
                let (done, committed) = tokio::sync::oneshot::channel();
                let _ = done.send(());
                committed
            }
        }
    }
}

pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat::chat_completions))
        .route("/v1/messages", post(messages::messages))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .route("/v1/images/generations", post(images::images))
        .route("/v1/models", get(models::list_models))
        .route("/health", get(models::health))
        .route("/admin/api/health", get(admin::health))
        .route("/admin/api/cooldowns/clear", post(admin::clear_cooldowns))
        .route("/admin/api/affinity/clear", post(admin::clear_affinity))
        .route("/admin/api/stats/reset", post(admin::reset_stats))
        .route("/admin/api/logs", get(admin::logs))
        .route("/admin/api/stats", get(admin::stats))
        .fallback(not_found)
        .with_state(gateway)
}

async fn not_found(uri: axum::http::Uri) -> impl IntoResponse {
    ApiError::new(axum::http::StatusCode::NOT_FOUND, "invalid_request_error", format!("no route for {}", uri.path()))
        .code("unknown_url")
}

/// Binds `addr` and serves until `shutdown` resolves; returns the bound address at once.
pub async fn serve(
    gateway: Arc<Gateway>,
    addr: SocketAddr,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(gateway);
    // Connect info gives handlers the client's address (session affinity).
    let app = app.into_make_service_with_connect_info::<SocketAddr>();
    let handle = tokio::spawn(async move { axum::serve(listener, app).with_graceful_shutdown(shutdown).await });
    Ok((bound, handle))
}
