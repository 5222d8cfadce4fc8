//! Accepting client connections: at most `server.max_connections` open (past it a 503 with
//! Retry-After, then close), silent and idle connections closed, a header read timeout against
//! slowloris, TCP_NODELAY, and a graceful shutdown that lets open requests finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::http::StatusCode;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tower::ServiceExt;

use super::Gateway;
use super::error::{ApiError, ErrorType};
use super::guarded::Guarded;

/// Longest a refused connection is given to take its 503.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// After a failed accept (out of file descriptors, say), wait before the next.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// HTTP/2: what a stream may buffer for a client that does not read.
const H2_SEND_BUFFER: usize = 64 * 1024;
/// HTTP/2: streams reset by the client before the gateway took them, at once, past which the
/// connection is closed.
const H2_MAX_PENDING_RESETS: usize = 20;
/// HTTP/2: the largest header block a request may send (decoded), hyper's default.
const H2_MAX_HEADER_LIST: u32 = 16 * 1024;

/// Binds `addr` and serves until `shutdown` resolves; returns the bound address at once.
pub async fn serve(
    gateway: Arc<Gateway>,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<std::io::Result<()>>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let limits = gateway.settings.server.clone();
    // `metrics.listen`: /metrics on an address of its own (an operations port).
    if let (true, Some(at)) = (gateway.settings.metrics.enabled, gateway.settings.metrics.listen) {
        let metrics = TcpListener::bind(at).await?;
        tracing::info!("metrics on http://{}/metrics", metrics.local_addr()?);
        let app = gateway.metrics_router().into_make_service_with_connect_info::<SocketAddr>();
        crate::tasks::spawn("metrics listener", async move {
            if let Err(e) = axum::serve(metrics, app).await {
                tracing::warn!("the metrics listener stopped: {e}");
            }
        });
    }
    let app = super::router(gateway);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_timeout());
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Duration::from_secs(30))
        .max_concurrent_streams(limits.http2_max_streams)
        // What one stream may hold unsent for a client that reads slowly (hyper's default is
        // 400 KiB, 80 MB for a connection's 200 streams); past it the stream stops pulling
        // from its upstream.
        .max_send_buf_size(H2_SEND_BUFFER)
        // Rapid reset (CVE-2023-44487): a connection that resets streams before they are
        // served faster than this is sent GOAWAY (h2's default, kept explicit).
        .max_pending_accept_reset_streams(H2_MAX_PENDING_RESETS)
        .max_header_list_size(H2_MAX_HEADER_LIST);
    let builder = Arc::new(builder);
    let connections = Arc::new(Semaphore::new(limits.max_connections as usize));
    let handle = crate::tasks::spawn("main listener", async move {
        let graceful = GracefulShutdown::new();
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        tracing::warn!("accepting a connection failed: {e}");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            // Without TCP_NODELAY a stream's small writes (headers, then each event) wait on
            // the client's delayed ACK.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY on a client connection: {e}");
            }
            let Ok(place) = connections.clone().try_acquire_owned() else {
                crate::tasks::spawn("connection refuser", refuse(stream, limits.max_connections));
                continue;
            };
            let app = app.clone();
            let activity = Arc::new(Activity::default());
            let seen = activity.clone();
            // Handlers read the client's address (session affinity) from ConnectInfo.
            let service = hyper::service::service_fn(move |mut request: hyper::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                let busy = Busy::start(seen.clone());
                let response = app.clone().oneshot(request);
                async move { response.await.map(|r| r.map(|body| Guarded::body(body, busy))) }
            });
            let (builder, watcher) = (builder.clone(), graceful.watcher());
            let idle = (limits.header_timeout(), limits.idle_timeout());
            crate::tasks::spawn("client connection", async move {
                let connection = watcher.watch(builder.serve_connection_with_upgrades(TokioIo::new(stream), service));
                tokio::select! {
                    ended = connection => {
                        if let Err(e) = ended {
                            tracing::debug!("client connection ended: {e}");
                        }
                    }
                    () = activity.idle(idle) => tracing::debug!("idle client connection closed"),
                }
                drop(place);
            });
        }
        drop(listener);
        graceful.shutdown().await;
        Ok(())
    });
    Ok((bound, handle))
}

/// What a connection is doing, for closing it when it does nothing: the count of requests in
/// flight on it (their bodies included) and whether one started or ended since the last look.
#[derive(Default)]
struct Activity {
    busy: AtomicUsize,
    touched: AtomicBool,
}

impl Activity {
    /// Resolves once the connection has been idle too long: no request by `first` after it
    /// opened (a silent socket, an HTTP/2 preface and nothing more), then none in flight and
    /// none started for a whole `keep_alive`.
    async fn idle(&self, (first, keep_alive): (Duration, Duration)) {
        let mut wait = first;
        loop {
            tokio::time::sleep(wait).await;
            let touched = self.touched.swap(false, Ordering::AcqRel);
            if self.busy.load(Ordering::Acquire) == 0 && !touched {
                return;
            }
            wait = keep_alive;
        }
    }
}

/// One request in flight on a connection, until its response body is dropped.
struct Busy(Arc<Activity>);

impl Busy {
    fn start(activity: Arc<Activity>) -> Busy {
        activity.busy.fetch_add(1, Ordering::AcqRel);
        activity.touched.store(true, Ordering::Release);
        Busy(activity)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
        self.0.touched.store(true, Ordering::Release);
    }
}

/// Answers a connection past `server.max_connections` with 503 (without reading it) and closes.
async fn refuse(mut stream: TcpStream, max: u32) {
    // Written by hand (no connection to serve it on), in the same error JSON as every answer.
    let body = ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorType::Overloaded,
        format!("the gateway has {max} connections open (server.max_connections); retry shortly"),
    )
    .code("too_many_connections")
    .body()
    .to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    // Then read what the client sent until it closes: closing with its request unread would
    // reset the connection, and the client might never see the 503.
    let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    })
    .await;
}
