//! A source spoken to in clear-text HTTP/2 (`http_version: http2` on `http://`): one h2
//! connection carries all its requests, and is opened again once it has ended.
//!
//! Spoken with the h2 crate itself, because this path exists for thousands of slow requests at
//! once and what each holds while it waits is the cost: reqwest's pool keeps ~7 KB of futures
//! per request, and hyper's connection-level client spawns a task per request sized for its
//! connection task (3.3 KB). Here a request in flight holds h2's stream handles and a small
//! future.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use futures::future::{BoxFuture, Either};
use h2::client::SendRequest;
use http::header::{CONNECTION, CONTENT_LENGTH, HeaderName, TE, TRANSFER_ENCODING, UPGRADE};
use http::request::Parts;
use http_body::Frame;
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

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum H2cError {
    #[error("connecting to {0}:{1} failed: {2}")]
    Connect(String, u16, #[source] std::io::Error),
    #[error("connecting to {0}:{1} timed out after {2:?}")]
    ConnectTimeout(String, u16, Duration),
    #[error("the HTTP/2 handshake with {0}:{1} failed: {2}")]
    Handshake(String, u16, #[source] h2::Error),
    #[error("HTTP/2: {0}")]
    Exchange(#[source] h2::Error),
}

// The windows and buffers hyper's client uses: a fixed 5 MiB connection window (an adaptive one
// starts at 64 KiB, and thousands of answers arriving at once in slivers trip h2's flood guard).
const CONNECTION_WINDOW: u32 = 5 << 20;
const STREAM_WINDOW: u32 = 2 << 20;
const MAX_SEND_BUFFER: usize = 1 << 20;
const MAX_HEADER_LIST: u32 = 16 << 10;

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2); h2 refuses a request carrying one, so an
/// adapter's `connection: keep-alive` is dropped here, as hyper does.
const CONNECTION_SPECIFIC: [HeaderName; 4] =
    [CONNECTION, TRANSFER_ENCODING, UPGRADE, HeaderName::from_static("keep-alive")];

pub struct H2c {
    origin: Origin,
    connect_timeout: Duration,
    /// The open connection; replaced when it has ended or refuses new streams.
    current: Mutex<Option<Connection>>,
    /// One connect at a time: requests that find no connection wait for the one being opened.
    connecting: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct Connection {
    sender: SendRequest<Bytes>,
    /// Set when the connection's task has ended.
    ended: Arc<AtomicBool>,
}

impl H2c {
    pub fn new(origin: Origin, connect_timeout: Duration) -> H2c {
        H2c { origin, connect_timeout, current: Mutex::new(None), connecting: tokio::sync::Mutex::new(()) }
    }

    pub fn serves(&self, url: &reqwest::Url) -> bool {
        Origin::of_plain(url).as_ref() == Some(&self.origin)
    }

    /// Sends `request` (an absolute URI on this origin) on the shared connection. A request the
    /// connection cannot take (none is open, or it has ended or received a GOAWAY) goes on a
    /// new one; a request it took and then lost fails, as over HTTP/1.1.
    ///
    /// Built from combinators rather than an `async` block: this future lives as long as the
    /// upstream takes, once per request in flight, and a generator would keep the request's
    /// parts beside the response future.
    pub fn send(
        &self,
        request: http::Request<Bytes>,
    ) -> impl Future<Output = Result<http::Response<H2Body>, H2cError>> + Send + '_ {
        let (mut head, body) = request.into_parts();
        for name in &CONNECTION_SPECIFIC {
            head.headers.remove(name);
        }
        if head.headers.get(TE).is_some_and(|te| te != "trailers") {
            head.headers.remove(TE);
        }
        if !body.is_empty() && !head.headers.contains_key(CONTENT_LENGTH) {
            head.headers.insert(CONTENT_LENGTH, body.len().into());
        }
        match self.open() {
            Some(open) => Either::Left(open.sender.ready().then(move |ready| match ready {
                Ok(sender) => Either::Left(exchange(sender, head, body)),
                // It has ended or been told to go away since: the request was not sent.
                Err(_) => Either::Right(self.resend(head, body)),
            })),
            None => Either::Right(self.resend(head, body)),
        }
    }

    /// Sends the request on a new connection (or one another request has just opened).
    fn resend(&self, head: Parts, body: Bytes) -> BoxFuture<'_, Result<http::Response<H2Body>, H2cError>> {
        Box::pin(async move {
            let sender = self.connect().await?;
            let sender = sender.ready().await.map_err(H2cError::Exchange)?;
            exchange(sender, head, body).await
        })
    }

    /// The open connection, unless it has ended.
    fn open(&self) -> Option<Connection> {
        let slot = self.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        slot.as_ref().filter(|open| !open.ended.load(Ordering::Acquire)).cloned()
    }

    async fn connect(&self) -> Result<SendRequest<Bytes>, H2cError> {
        let _one_at_a_time = self.connecting.lock().await;
        // Another request may have connected while this one waited: take its connection if it
        // takes new streams.
        if let Some(open) = self.open()
            && let Ok(sender) = open.sender.ready().await
        {
            return Ok(sender);
        }
        let Origin { host, port } = &self.origin;
        let tcp = tokio::time::timeout(self.connect_timeout, TcpStream::connect((host.as_str(), *port)))
            .await
            .map_err(|_| H2cError::ConnectTimeout(host.clone(), *port, self.connect_timeout))?
            .map_err(|e| H2cError::Connect(host.clone(), *port, e))?;
        // Without it a request's small frames wait on the upstream's delayed ACK.
        let _ = tcp.set_nodelay(true);
        let (sender, connection) = h2::client::Builder::new()
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_send_buffer_size(MAX_SEND_BUFFER)
            .max_header_list_size(MAX_HEADER_LIST)
            .enable_push(false)
            .handshake::<_, Bytes>(tcp)
            .await
            .map_err(|e| H2cError::Handshake(host.clone(), *port, e))?;
        let ended = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ended);
        crate::tasks::spawn("upstream h2c connection", async move {
            if let Err(e) = connection.await {
                tracing::debug!("an upstream HTTP/2 connection ended: {e}");
            }
            flag.store(true, Ordering::Release);
        });
        *self.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) =
            Some(Connection { sender: sender.clone(), ended });
        Ok(sender)
    }
}

/// Opens the stream, hands h2 the whole body (already in memory, bounded by the body limit; h2
/// sends it as the upstream's window allows) and waits for the answer's head.
fn exchange(
    mut sender: SendRequest<Bytes>,
    head: Parts,
    body: Bytes,
) -> impl Future<Output = Result<http::Response<H2Body>, H2cError>> + Send {
    let end_of_stream = body.is_empty();
    let opened =
        sender.send_request(http::Request::from_parts(head, ()), end_of_stream).and_then(|(answer, mut stream)| {
            if !end_of_stream {
                stream.send_data(body, true)?;
            }
            Ok(answer)
        });
    match opened {
        Ok(answer) => Either::Left(answer.map(|answered| match answered {
            Ok(response) => Ok(response.map(|recv| H2Body { recv, data_done: false })),
            Err(e) => Err(H2cError::Exchange(e)),
        })),
        Err(e) => Either::Right(futures::future::ready(Err(H2cError::Exchange(e)))),
    }
}

/// An answer's body as it arrives. Each chunk read is given back to the upstream's window, so
/// a client that stops reading stops the upstream (and nothing piles up here).
pub struct H2Body {
    recv: h2::RecvStream,
    data_done: bool,
}

impl http_body::Body for H2Body {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        let this = &mut *self;
        if !this.data_done {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Fails only once the stream is closed, when there is no window to give back.
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => this.data_done = true,
            }
        }
        match ready!(this.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(e))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }
}
