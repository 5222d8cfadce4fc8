//! One attempt at one source: open an adapter session, let it build the upstream request,
//! send it (reqwest, or one shared HTTP/2 connection) under the source's timeouts, and
//! translate the answer back.

mod assemble;
mod error;
mod framing;
mod h2c;
mod stream;
mod tally;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use http_body_util::{BodyExt, Either};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub use assemble::as_chunks;
pub use error::{AttemptError, TimeoutPhase};
pub use framing::{FrameError, split as split_events};
pub use stream::{ChunkGuard, ChunkStream, OnEnd, OnWhole, Recorded, StreamEnd};
pub use tally::{PromptSize, Tally, prompt_estimate};

use crate::config::{Config, HttpVersion, ModelConfig, SourceConfig, SourceName};
use crate::domain::FailureKind;
use crate::plugin::{
    Adapter, AdapterSession, ClientRequest, GuestError, HttpRequest, HttpResponse, Operation, SourceContext,
};

/// Largest upstream response body read into memory (non-streaming answers, error bodies).
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// An upstream's answer, its body still to read: from reqwest, or from a source's own HTTP/2
/// connection.
type UpstreamResponse = http::Response<Either<reqwest::Body, h2c::H2Body>>;

/// Where an attempt goes: the source, the model entry, and the adapter that speaks to it.
pub struct Target<'a> {
    pub source: &'a SourceConfig,
    pub model: &'a ModelConfig,
    pub adapter: &'a Arc<Adapter>,
    pub operation: Operation,
    /// The client's request as sent, when this adapter forwards the client's protocol
    /// natively: the attempt then runs a native session and answers in that protocol.
    pub native: Option<&'a ClientRequest>,
}

/// A whole answer: unified, or (a native session's) in the client's protocol with a unified
/// copy for the books.
pub enum Completion {
    Unified(String),
    Native { body: Vec<u8>, unified: String },
}

impl Completion {
    /// The unified form, which the books read.
    pub fn unified(&self) -> &str {
        match self {
            Completion::Unified(unified) | Completion::Native { unified, .. } => unified,
        }
    }
}

impl Target<'_> {
    fn context(&self) -> SourceContext {
        SourceContext {
            operation: self.operation,
            source_name: self.source.name.to_string(),
            base_url: self.source.base_url.trimmed().to_string(),
            api_key: self.source.api_key.expose().to_string(),
            upstream_model: self.model.upstream_name().to_string(),
            settings: self.source.settings.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        }
    }
}

/// What a streaming request opened: its events, or (an upstream that ignored `stream` and
/// answered JSON, when a whole answer was wanted anyway) the whole answer.
enum Opened {
    Events(ChunkStream),
    Whole(Completion),
}

/// Per source: an HTTP client (own connect timeout and connection pool) and the
/// `max_concurrent` limit, a FIFO semaphore.
pub struct Provider {
    links: HashMap<SourceName, Arc<Link>>,
}

/// One source's client and limit, kept across runtime changes that leave them alike.
struct Link {
    client: reqwest::Client,
    /// `http_version: http2` on `http://`: the source's one connection, for requests to its origin.
    h2c: Option<h2c::H2c>,
    limit: Arc<Semaphore>,
    /// Requests waiting for a place under `max_concurrent`.
    waiting: std::sync::atomic::AtomicUsize,
    shape: Shape,
    /// The last URL an adapter asked for, parsed.
    last_url: UrlMemo,
}

/// A source's requests nearly always go to the same URL: it is parsed once, not for every
/// request (reqwest's redirect layer parses it twice more; the three cost ~1.8 % of a request).
#[derive(Default)]
struct UrlMemo(std::sync::Mutex<Option<reqwest::Url>>);

impl UrlMemo {
    /// `text` parsed, from the last one when it is the same.
    fn parse(&self, text: &str) -> Result<reqwest::Url, String> {
        let mut last = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(url) = last.as_ref().filter(|u| u.as_str() == text) {
            return Ok(url.clone());
        }
        let url = reqwest::Url::parse(text).map_err(|e| e.to_string())?;
        *last = Some(url.clone());
        Ok(url)
    }
}

/// What a source's link is built from: a change to any of it builds a new one.
#[derive(PartialEq)]
struct Shape {
    max_concurrent: u32,
    connect_timeout: crate::config::WholeSeconds,
    http_version: HttpVersion,
    h2c: Option<h2c::Origin>,
}

/// A place in a source's `max_concurrent`; held until the answer (or stream) is done.
pub type SourcePermit = OwnedSemaphorePermit;

impl Provider {
    pub fn new(config: &Config) -> anyhow::Result<Provider> {
        Provider { links: HashMap::new() }.rebuild(config)
    }

    /// The provider for a changed config: sources whose limit, connect timeout and HTTP are
    /// unchanged keep their client and semaphore (in-flight requests keep their places).
    pub fn rebuild(&self, config: &Config) -> anyhow::Result<Provider> {
        let mut links = HashMap::new();
        for source in &config.sources {
            let h2c = match source.http_version {
                HttpVersion::Http2 => h2c::Origin::of_plain(&source.base_url.url()),
                HttpVersion::Auto | HttpVersion::Http1 => None,
            };
            let shape = Shape {
                max_concurrent: source.max_concurrent,
                connect_timeout: source.connect_timeout_seconds,
                http_version: source.http_version,
                h2c,
            };
            let link = match self.links.get(&source.name) {
                Some(link) if link.shape == shape => link.clone(),
                _ => {
                    let client = crate::http_client::builder()
                        .connect_timeout(source.connect_timeout())
                        .pool_idle_timeout(Duration::from_secs(90))
                        .tcp_nodelay(true)
                        .redirect(same_origin_redirects());
                    let client = match source.http_version {
                        HttpVersion::Auto => client,
                        HttpVersion::Http1 => client.http1_only(),
                        // Not the adaptive window: it starts at 64 KiB, and thousands of
                        // answers at once then arrive in slivers h2 takes for a flood.
                        HttpVersion::Http2 => client.http2_prior_knowledge(),
                    }
                    .build()?;
                    let limit = Arc::new(Semaphore::new(source.max_concurrent as usize));
                    let h2c = shape.h2c.clone().map(|origin| h2c::H2c::new(origin, source.connect_timeout()));
                    Arc::new(Link {
                        client,
                        h2c,
                        limit,
                        waiting: Default::default(),
                        shape,
                        last_url: Default::default(),
                    })
                }
            };
            links.insert(source.name.clone(), link);
        }
        Ok(Provider { links })
    }

    /// Requests waiting now for a place under the source's `max_concurrent`.
    pub fn queued(&self, source: &SourceName) -> usize {
        self.links.get(source).map_or(0, |l| l.waiting.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Places taken now under the source's `max_concurrent` (0 for an unknown source).
    pub fn in_use(&self, source: &SourceName) -> usize {
        self.links
            .get(source)
            .map_or(0, |l| (l.shape.max_concurrent as usize).saturating_sub(l.limit.available_permits()))
    }

    fn link(&self, source: &SourceName) -> &Link {
        self.links.get(source).expect("a link exists for every configured source")
    }

    /// Waits (first come, first served) up to the source's `queue_timeout_seconds` for a place
    /// under its `max_concurrent`; `None` when it stays full.
    pub async fn admit(&self, source: &SourceConfig) -> Option<SourcePermit> {
        use std::sync::atomic::Ordering::Relaxed;
        let link = self.link(&source.name);
        let limit = link.limit.clone();
        if let Ok(permit) = limit.clone().try_acquire_owned() {
            return Some(permit);
        }
        link.waiting.fetch_add(1, Relaxed);
        let permit = tokio::time::timeout(source.queue_timeout(), limit.acquire_owned()).await;
        link.waiting.fetch_sub(1, Relaxed);
        permit.ok()?.ok()
    }

    /// Opens the attempt's session (native when the target says so) and lets it build the
    /// upstream request.
    async fn open(&self, target: &Target<'_>, unified: &str) -> Result<(AdapterSession, HttpRequest), AttemptError> {
        match target.native {
            Some(client) => {
                let mut session = target.adapter.open_native_session(&target.context()).await?;
                let request = translated(target, session.native_transform_request(client).await)?;
                Ok((session, request))
            }
            None => {
                let mut session = target.adapter.open_session(&target.context()).await?;
                let request = translated(target, session.transform_request(unified).await)?;
                Ok((session, request))
            }
        }
    }

    /// A non-streaming request: the answer, and how long the head took.
    ///
    /// The guest calls' futures are boxed: they live a few microseconds, while this future
    /// lives as long as the upstream takes, once for every request in flight (inline they made
    /// it 2.1 KB instead of 0.9).
    pub async fn complete(&self, target: &Target<'_>, unified: &str) -> Result<(Completion, Duration), AttemptError> {
        let (mut session, request) = Box::pin(self.open(target, unified)).await?;
        let timeout = target.source.timeout();
        let started = tokio::time::Instant::now();
        let exchange = async {
            let response = self.send(target, request).await?;
            let head = started.elapsed();
            read_response(target, response).await.map(|r| (r, head))
        };
        // Boxed: a future moved into another is otherwise kept twice (rust-lang/rust#62958).
        let (response, head) =
            tokio::time::timeout(timeout, Box::pin(exchange)).await.map_err(|_| AttemptError::Timeout {
                source_name: target.source.name.clone(),
                phase: TimeoutPhase::Total,
                after: timeout,
            })??;
        Box::pin(answer(target.source, &mut session, &response)).await.map(|body| (body, head))
    }

    /// A non-streaming chat request sent upstream as a stream (`unified`, or the native
    /// request in `target`, already asking for a stream with usage) and put back together as
    /// the whole answer: silence is bounded by the stream's first-byte and idle timeouts,
    /// the whole request by `timeout_seconds`; an incomplete stream is the attempt's error.
    pub async fn complete_by_stream(
        &self,
        target: &Target<'_>,
        unified: &str,
    ) -> Result<(Completion, Duration), AttemptError> {
        use futures::StreamExt;
        let timeout = target.source.timeout();
        let started = tokio::time::Instant::now();
        let whole = async {
            let mut chunks = match self.open_stream(target, unified, true).await? {
                Opened::Events(chunks) => chunks,
                Opened::Whole(completion) => return Ok((completion, started.elapsed())),
            };
            let head = started.elapsed();
            let native = chunks.is_native();
            let (mut assembler, mut read) = (assemble::Assembler::default(), 0usize);
            while let Some(item) = chunks.next().await {
                let item = item?;
                read += item.len();
                if read > MAX_RESPONSE_BYTES {
                    return Err(AttemptError::Transport {
                        source_name: target.source.name.clone(),
                        message: format!("response exceeds {} MiB", MAX_RESPONSE_BYTES >> 20),
                    });
                }
                if native {
                    // An OpenAI-compatible upstream's own SSE frames: their data is chunks too
                    // (an event's data lines joined, as SSE defines).
                    for event in item.split("\n\n") {
                        let data: Vec<&str> =
                            event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
                        assembler.chunk(&data.join("\n"));
                    }
                } else {
                    assembler.chunk(&item);
                }
            }
            if !assembler.is_whole() {
                return Err(AttemptError::Upstream {
                    source_name: target.source.name.clone(),
                    kind: FailureKind::Truncated,
                    status: None,
                    message: "the upstream's stream ended without a finished answer".into(),
                    retry_after: None,
                    code: None,
                });
            }
            let body = assembler.finish();
            let completion = match native {
                true => Completion::Native { body: body.clone().into_bytes(), unified: body },
                false => Completion::Unified(body),
            };
            Ok((completion, head))
        };
        tokio::time::timeout(timeout, Box::pin(whole)).await.map_err(|_| AttemptError::Timeout {
            source_name: target.source.name.clone(),
            phase: TimeoutPhase::Total,
            after: timeout,
        })?
    }

    /// A streaming request: resolves once the upstream answered 2xx; the stream then yields
    /// unified chunks as upstream events arrive, holding the adapter session to the end. The
    /// first event must come within the first-byte timeout of sending, the head included. The
    /// guest call is boxed, as in [`Provider::complete`].
    pub async fn stream(&self, target: &Target<'_>, unified: &str) -> Result<ChunkStream, AttemptError> {
        match self.open_stream(target, unified, false).await? {
            Opened::Events(chunks) => Ok(chunks),
            Opened::Whole(_) => unreachable!("a whole answer is taken only when asked for"),
        }
    }

    /// Sends a streaming request; with `whole_ok`, a 2xx JSON answer (an upstream that ignores
    /// `stream`) is read as the whole answer instead of as a stream.
    async fn open_stream(&self, target: &Target<'_>, unified: &str, whole_ok: bool) -> Result<Opened, AttemptError> {
        let (mut session, request) = Box::pin(self.open(target, unified)).await?;
        let timeout = target.source.first_byte_timeout();
        let first_event_by = tokio::time::Instant::now() + timeout;
        let late = |_| AttemptError::Timeout {
            source_name: target.source.name.clone(),
            phase: TimeoutPhase::FirstByte,
            after: timeout,
        };
        let response =
            tokio::time::timeout_at(first_event_by, Box::pin(self.send(target, request))).await.map_err(late)??;
        if !response.status().is_success() {
            // The error body is bounded by the same deadline as the first event would be.
            let response =
                tokio::time::timeout_at(first_event_by, read_response(target, response)).await.map_err(late)??;
            return Err(match Box::pin(answer(target.source, &mut session, &response)).await {
                Err(e) => e,
                Ok(_) => AttemptError::Upstream {
                    source_name: target.source.name.clone(),
                    kind: FailureKind::Server,
                    status: Some(response.status),
                    message: format!("upstream answered HTTP {}", response.status),
                    retry_after: None,
                    code: None,
                },
            });
        }
        let json = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().to_ascii_lowercase().starts_with(b"application/json"));
        if whole_ok && json {
            // Read whole within the same deadline, as an error body is.
            let response =
                tokio::time::timeout_at(first_event_by, read_response(target, response)).await.map_err(late)??;
            return Box::pin(answer(target.source, &mut session, &response)).await.map(Opened::Whole);
        }
        let framing = session.adapter().metadata().stream_framing;
        Ok(Opened::Events(ChunkStream::new(session, framing::events(response, framing), target, first_event_by)))
    }

    /// The source's model list, asked through its adapter's `models` interface within the
    /// source's `timeout_seconds`; the error says why in words for the log and the admin API.
    pub async fn list_models(&self, source: &SourceConfig, adapter: &Arc<Adapter>) -> Result<Vec<String>, String> {
        let model = ModelConfig {
            name: String::new(),
            upstream: None,
            kind: crate::config::ModelKind::Chat,
            detected: false,
            qualified_only: false,
        };
        let target = Target { source, model: &model, adapter, operation: Operation::Chat, native: None };
        let context = target.context();
        let request = match adapter.models_request(&context).await {
            None => {
                return Err(format!(
                    "adapter `{}` cannot list models (it exports no `models` interface)",
                    adapter.name()
                ));
            }
            Some(Err(sandbox)) => return Err(sandbox.to_string()),
            Some(Ok(Err(refused))) => return Err(scrub(source, &bounded(refused.message))),
            Some(Ok(Ok(request))) => request,
        };
        let exchange = async {
            let response = self.send(&target, request).await?;
            read_response(&target, response).await
        };
        let response = tokio::time::timeout(source.timeout(), exchange)
            .await
            .map_err(|_| format!("no model list within {} s", source.timeout().as_secs()))?
            .map_err(|e| e.to_string())?;
        match adapter.read_models(&context, &response).await {
            Ok(Ok(names)) => Ok(names),
            Ok(Err(verdict)) => Err(upstream(source, verdict).to_string()),
            Err(sandbox) => Err(sandbox.to_string()),
        }
    }

    /// Sends the adapter's request on the source's link. The request is built before this
    /// returns, and the future is made of combinators, not a generator: it lives as long as the
    /// upstream takes, once per request in flight, and a generator keeps the built request
    /// beside the send's own state.
    fn send<'a>(
        &'a self,
        target: &'a Target<'_>,
        request: HttpRequest,
    ) -> impl Future<Output = Result<UpstreamResponse, AttemptError>> + Send + 'a {
        use futures::future::{Either as Branch, ready};
        let link = self.link(&target.source.name);
        match outgoing(link, target, request) {
            Err(bad) => Branch::Left(ready(Err(bad))),
            Ok(Outgoing::Shared(request, h2c)) => {
                Branch::Right(Branch::Left(h2c.send(request).map(move |sent| {
                    sent.map(|response| response.map(Either::Right)).map_err(|e| transport(target, &e))
                })))
            }
            Ok(Outgoing::Pooled(request)) => {
                Branch::Right(Branch::Right(link.client.execute(request).map(move |sent| {
                    sent.map(|response| http::Response::from(response).map(Either::Left))
                        .map_err(|e| transport(target, &e))
                })))
            }
        }
    }
}

/// An upstream request ready to go: on the source's own HTTP/2 connection, or through reqwest.
enum Outgoing<'a> {
    Shared(http::Request<Bytes>, &'a h2c::H2c),
    Pooled(reqwest::Request),
}

/// The adapter's request as an HTTP request for `link`; a malformed method, URL or header is
/// the adapter's fault.
fn outgoing<'a>(link: &'a Link, target: &Target<'_>, request: HttpRequest) -> Result<Outgoing<'a>, AttemptError> {
    let bad = |message: String| AttemptError::BadAdapterOutput { adapter: target.adapter.name().to_string(), message };
    let method = reqwest::Method::from_bytes(request.method.as_bytes())
        .map_err(|_| bad(format!("`{}` is not an HTTP method", request.method)))?;
    let url = link.last_url.parse(&request.url).map_err(|e| bad(format!("`{}` is not a URL: {e}", request.url)))?;
    // Room for the content length and a traceparent, so the map never grows; it is moved
    // into the request whole (the builder's `headers` copies it into a second map).
    let mut headers = HeaderMap::with_capacity(request.headers.len() + 2);
    for (name, value) in request.headers {
        let name =
            HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(format!("`{name}` is not a header name")))?;
        let value =
            HeaderValue::from_str(&value).map_err(|_| bad(format!("the value of header `{name}` is not valid")))?;
        headers.append(name, value);
    }
    // The attempt's trace continues upstream (W3C `traceparent`, when traces are exported).
    crate::telemetry::propagate(&mut headers);
    match &link.h2c {
        Some(h2c) if h2c.serves(&url) => {
            let uri = url.as_str().parse().map_err(|_| bad(format!("`{url}` is not a URI")))?;
            let mut outgoing = http::Request::new(Bytes::from(request.body));
            *outgoing.method_mut() = method;
            *outgoing.uri_mut() = uri;
            *outgoing.headers_mut() = headers;
            Ok(Outgoing::Shared(outgoing, h2c))
        }
        _ => {
            let mut outgoing = reqwest::Request::new(method, url);
            *outgoing.headers_mut() = headers;
            *outgoing.body_mut() = Some(request.body.into());
            Ok(Outgoing::Pooled(outgoing))
        }
    }
}

/// Redirects are followed only within the origin the adapter addressed: the adapter's
/// credential headers (`x-api-key`, `x-goog-api-key`, custom ones) must never reach another host,
/// and reqwest strips only `Authorization` and cookies on a cross-origin hop.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let origin =
            |u: &reqwest::Url| (u.scheme().to_string(), u.host_str().map(str::to_string), u.port_or_known_default());
        let first = attempt.previous().first().map(origin);
        if attempt.previous().len() > 5 {
            attempt.error("more than 5 redirects")
        } else if first == Some(origin(attempt.url())) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

async fn read_response(target: &Target<'_>, response: UpstreamResponse) -> Result<HttpResponse, AttemptError> {
    let (head, mut incoming) = response.into_parts();
    let status = head.status.as_u16();
    let headers = head
        .headers
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str().to_string(), v.to_string())))
        .collect();
    let mut body = Vec::new();
    while let Some(frame) = incoming.frame().await {
        let Ok(chunk) = frame.map_err(|e| transport(target, &*e))?.into_data() else { continue };
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(AttemptError::Transport {
                source_name: target.source.name.clone(),
                message: format!("response body exceeds {} MiB", MAX_RESPONSE_BYTES >> 20),
            });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(HttpResponse { status, headers, body })
}

/// The adapter's translation of the client's request; its own refusal is [`AttemptError::Refused`].
fn translated(
    target: &Target<'_>,
    result: crate::plugin::GuestResult<HttpRequest>,
) -> Result<HttpRequest, AttemptError> {
    match result {
        Ok(Ok(request)) => Ok(request),
        Ok(Err(verdict)) => Err(AttemptError::Refused {
            adapter: target.adapter.name().clone(),
            kind: verdict.kind.into(),
            message: scrub(target.source, &bounded(reason(target.source, verdict.message))),
        }),
        Err(sandbox) => Err(AttemptError::Sandbox(sandbox)),
    }
}

/// The session's reading of a whole upstream response.
async fn answer(
    source: &SourceConfig,
    session: &mut AdapterSession,
    response: &HttpResponse,
) -> Result<Completion, AttemptError> {
    if session.is_native() {
        let native = guest(source, session.native_transform_response(response).await)?;
        Ok(Completion::Native { body: native.body, unified: native.unified })
    } else {
        guest(source, session.transform_response(response).await).map(Completion::Unified)
    }
}

/// Flattens a guest call: sandbox failures and the adapter's own verdict both become attempt errors.
fn guest<T>(
    source: &SourceConfig,
    result: Result<Result<T, GuestError>, crate::plugin::SandboxError>,
) -> Result<T, AttemptError> {
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(verdict)) => Err(upstream(source, verdict)),
        Err(sandbox) => Err(AttemptError::Sandbox(sandbox)),
    }
}

fn upstream(source: &SourceConfig, verdict: GuestError) -> AttemptError {
    AttemptError::Upstream {
        source_name: source.name.clone(),
        kind: verdict.kind.into(),
        status: verdict.status,
        message: scrub(source, &bounded(reason(source, verdict.message))),
        retry_after: verdict.retry_after_ms.map(Duration::from_millis),
        code: verdict.code.map(|code| scrub(source, &bounded(code))),
    }
}

fn transport(target: &Target<'_>, error: &(dyn std::error::Error + 'static)) -> AttemptError {
    // reqwest's Display names the URL only; walk the chain for the OS-level reason.
    let mut message = error.to_string();
    let mut local = false;
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        message.push_str(": ");
        message.push_str(&inner.to_string());
        local |= inner.downcast_ref::<std::io::Error>().is_some_and(out_of_local_resources);
        cause = inner.source();
    }
    let source_name = target.source.name.clone();
    let message = scrub(target.source, &bounded(message));
    if local {
        AttemptError::LocalResources { source_name, message }
    } else {
        AttemptError::Transport { source_name, message }
    }
}

/// This process or machine ran out of descriptors, local ports or buffers: the upstream was
/// never reached, so it must not be blamed (cooling it would turn a full gateway into 503s).
fn out_of_local_resources(error: &std::io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::EADDRNOTAVAIL | libc::ENOBUFS | libc::ENOMEM)
    )
}

/// Longest message from an upstream or adapter passed on (to the client, the log row, the
/// journal); the rest is cut.
const MAX_MESSAGE_BYTES: usize = 2048;

/// An adapter error's reason, its first line, which a client may see; the lines after it (where
/// an exception came from, as the templates write it) are the operator's: logged here, scrubbed
/// of the source's key, never answered.
fn reason(source: &SourceConfig, message: String) -> String {
    match message.split_once('\n') {
        Some((reason, detail)) if !detail.trim().is_empty() => {
            let detail: String = detail.chars().take(MAX_MESSAGE_BYTES).collect();
            let (reason_shown, detail) = (scrub(source, reason), scrub(source, &detail));
            tracing::warn!(adapter = %source.adapter, source = %source.name, reason = %reason_shown, detail = %detail, "adapter error");
            reason.to_string()
        }
        _ => message,
    }
}

/// `message` cut to [`MAX_MESSAGE_BYTES`] on a character boundary.
fn bounded(mut message: String) -> String {
    if message.len() > MAX_MESSAGE_BYTES {
        let mut cut = MAX_MESSAGE_BYTES;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push('…');
    }
    message
}

/// Upstream messages sometimes echo the key they were sent; never pass it on.
fn scrub(source: &SourceConfig, message: &str) -> String {
    source.api_key.scrub(message)
}

#[cfg(test)]
mod tests {
    use super::UrlMemo;

    #[test]
    fn a_remembered_url_is_only_reused_for_the_same_text() {
        let memo = UrlMemo::default();
        let a = "http://127.0.0.1:9100/v1/chat/completions";
        assert_eq!(memo.parse(a).unwrap().as_str(), a);
        assert_eq!(memo.parse(a).unwrap().as_str(), a, "reused");
        let b = "http://127.0.0.1:9100/v1/embeddings";
        assert_eq!(memo.parse(b).unwrap().as_str(), b, "another text is parsed anew");
        // A text the parser normalises is parsed each time (it never equals the stored form).
        assert_eq!(memo.parse("HTTP://Example.COM/x").unwrap().as_str(), "http://example.com/x");
        assert!(memo.parse("not a url").is_err());
        assert_eq!(memo.parse(b).unwrap().as_str(), b, "a failed parse leaves nothing stale behind");
    }
}
