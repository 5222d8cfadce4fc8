//! A source spoken to in clear-text HTTP/2 (`http_version: http2` on `http://`): one hyper
//! connection carries all its requests, and is opened again once it has ended.
//!
//! reqwest's pooled client keeps ~7 KB of futures for every request in flight (its own request
//! future, the pool's checkout and connect states); on a source meant for thousands of slow
//! requests at once that is most of what a request costs, so such a source gets hyper's
//! connection-level client, which keeps a channel's end per request.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::{BoxFuture, Either, ready};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http2::{self, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpStream;

/// The origin a source's `base_url` names: requests elsewhere do not go on its connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    host: String,
    port: u16,
}

impl Origin {
    /// The origin of an `http://` URL; `None` for any other scheme (TLS goes through reqwest).
    pub fn of_plain(url: &reqwest::Url) -> Option<Origin> {
        if url.scheme() != "http" {
            return None;
        }
        Some(Origin { host: url.host_str()?.to_string(), port: url.port_or_known_default()? })
    }
}

/// Why a request found no connection.
#[derive(Debug, thiserror::Error)]
pub enum H2cError {
    #[error("connecting to {0}:{1} failed: {2}")]
    Connect(String, u16, #[source] std::io::Error),
    #[error("connecting to {0}:{1} timed out after {2:?}")]
    ConnectTimeout(String, u16, Duration),
    #[error("the HTTP/2 handshake with {0}:{1} failed: {2}")]
    Handshake(String, u16, #[source] hyper::Error),
    #[error("HTTP/2: {0}")]
    Exchange(#[source] hyper::Error),
}

pub struct H2c {
    origin: Origin,
    connect_timeout: Duration,
    /// The open connection's sender; replaced when it has closed.
    sender: Mutex<Option<SendRequest<Full<Bytes>>>>,
    /// One connect at a time: requests that find no connection wait for the one being opened.
    connecting: tokio::sync::Mutex<()>,
}

impl H2c {
    pub fn new(origin: Origin, connect_timeout: Duration) -> H2c {
        H2c { origin, connect_timeout, sender: Mutex::new(None), connecting: tokio::sync::Mutex::new(()) }
    }

    pub fn serves(&self, url: &reqwest::Url) -> bool {
        Origin::of_plain(url).as_ref() == Some(&self.origin)
    }

    /// Sends `request` (an absolute URI on this origin) on the shared connection. A request the
    /// connection never took (none was open, or it closed in between) is sent once more on a
    /// new one.
    ///
    /// Built from combinators rather than an `async` block: this future lives as long as the
    /// upstream takes, once per request in flight, and a generator would keep both the request
    /// and the send's state (1.4 KB against ~0.3).
    pub fn send(
        &self,
        request: http::Request<Full<Bytes>>,
    ) -> impl Future<Output = Result<http::Response<Incoming>, H2cError>> + Send + '_ {
        match self.open() {
            Some(mut sender) => Either::Left(sender.try_send_request(request).then(move |sent| match sent {
                Ok(response) => Either::Left(ready(Ok(response))),
                Err(mut refused) => match refused.take_message() {
                    Some(request) => Either::Right(self.resend(request)),
                    None => Either::Left(ready(Err(H2cError::Exchange(refused.into_error())))),
                },
            })),
            None => Either::Right(self.resend(request)),
        }
    }

    /// Sends `request` on a new connection (or the one another request has just opened).
    fn resend(&self, request: http::Request<Full<Bytes>>) -> BoxFuture<'_, Result<http::Response<Incoming>, H2cError>> {
        Box::pin(async move {
            let mut sender = self.connect().await?;
            sender.send_request(request).await.map_err(H2cError::Exchange)
        })
    }

    fn open(&self) -> Option<SendRequest<Full<Bytes>>> {
        let slot = self.sender.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        slot.as_ref().filter(|sender| !sender.is_closed()).cloned()
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, H2cError> {
        let _one_at_a_time = self.connecting.lock().await;
        // Another request may have connected while this one waited.
        if let Some(open) = self.open() {
            return Ok(open);
        }
        let Origin { host, port } = &self.origin;
        let tcp = tokio::time::timeout(self.connect_timeout, TcpStream::connect((host.as_str(), *port)))
            .await
            .map_err(|_| H2cError::ConnectTimeout(host.clone(), *port, self.connect_timeout))?
            .map_err(|e| H2cError::Connect(host.clone(), *port, e))?;
        // Without it a request's small frames wait on the upstream's delayed ACK.
        let _ = tcp.set_nodelay(true);
        let (sender, connection) = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| H2cError::Handshake(host.clone(), *port, e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("an upstream HTTP/2 connection ended: {e}");
            }
        });
        *self.sender.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(sender.clone());
        Ok(sender)
    }
}
