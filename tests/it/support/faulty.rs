//! A scriptable faulty OpenAI upstream on raw TCP (127.0.0.1:0): per request it answers, resets,
//! stalls, cuts or delays as its script says, speaking Chat Completions byte for byte otherwise.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

/// `data: [DONE]`, the end of an OpenAI stream.
pub const DONE: &str = "data: [DONE]\n\n";

/// One request as the upstream received it.
#[derive(Debug, Clone)]
pub struct Arrival {
    /// 0 for the first request this upstream received.
    pub number: usize,
    pub at: Instant,
    pub body: Value,
}

impl Arrival {
    pub fn streaming(&self) -> bool {
        self.body["stream"].as_bool().unwrap_or(false)
    }
}

/// What the upstream does with one request.
pub enum Behaviour {
    /// A whole JSON answer: status, extra headers, body.
    Json { status: u16, headers: Vec<(String, String)>, body: String },
    /// A 200 SSE head at once, then `events` (each a whole `data: ...\n\n`), then `end`.
    Sse { events: Vec<String>, end: StreamEnd },
    /// The 200 SSE head at once, `events` only after `delay`, then a proper end.
    HeadThenDelay { delay: Duration, events: Vec<String> },
    /// Reads the request, then resets the connection (RST) before a byte of the answer.
    ResetBeforeHeaders,
    /// Reads the request and never answers; the connection stays open until the gateway leaves.
    NeverAnswer,
    /// Waits for a permit on `gate` (added by the test), then does `then`.
    Gated { gate: Arc<Semaphore>, then: Box<Behaviour> },
    /// The SSE head, then `event` again and again until `flood.limit` bytes are written or one
    /// write waits longer than `flood.stall` (the reader stopped pulling); `flood` tells which.
    Flood { event: String, flood: Arc<Flood> },
}

/// What a [`Behaviour::Flood`] got through, shared with the test.
pub struct Flood {
    pub limit: usize,
    pub stall: Duration,
    written: AtomicUsize,
    outcome: tokio::sync::watch::Sender<Option<FloodEnd>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FloodEnd {
    /// A write waited longer than `stall`, with this many body bytes written.
    Stalled(usize),
    /// All `limit` bytes went through.
    Finished,
    /// The gateway closed the connection, with this many written.
    Closed(usize),
}

impl Flood {
    pub fn new(limit: usize, stall: Duration) -> Arc<Flood> {
        Arc::new(Flood { limit, stall, written: AtomicUsize::new(0), outcome: tokio::sync::watch::channel(None).0 })
    }

    /// Waits until the flood has ended, one way or another.
    pub async fn ended(&self) -> FloodEnd {
        let mut outcome = self.outcome.subscribe();
        let end = *outcome.wait_for(Option::is_some).await.expect("the flood's sender lives in it");
        end.expect("waited for Some")
    }

    fn end(&self, end: FloodEnd) {
        self.outcome.send_if_modified(|o| o.is_none() && o.replace(end).is_none());
    }
}

/// How an SSE answer ends after its events.
pub enum StreamEnd {
    /// The body ends properly (its last chunk) and the connection closes.
    Close,
    /// The connection closes mid-body, without the body's last chunk.
    Cut,
    /// Nothing more is sent; the connection stays open until the gateway leaves.
    Stall,
}

impl Behaviour {
    pub fn json(status: u16, body: String) -> Behaviour {
        Behaviour::Json { status, headers: Vec::new(), body }
    }
}

/// A healthy upstream's answer: its model name, text and token counts.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub model: &'static str,
    pub text: &'static str,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Answer {
    /// Answered the way the request asks: JSON, or a stream ending in `[DONE]`.
    pub fn to(&self, arrival: &Arrival) -> Behaviour {
        if arrival.streaming() {
            Behaviour::Sse { events: self.events(), end: StreamEnd::Close }
        } else {
            Behaviour::json(200, completion_body(self.model, Some(self.text), "stop", &self.usage()))
        }
    }

    /// The whole stream: role, the text word by word, finish_reason, usage, `[DONE]`.
    pub fn events(&self) -> Vec<String> {
        let mut events = vec![chunk_event(self.model, r#"{"role":"assistant","content":""}"#, None)];
        for word in self.text.split_inclusive(' ') {
            events.push(chunk_event(self.model, &format!(r#"{{"content":{}}}"#, Value::from(word)), None));
        }
        events.push(chunk_event(self.model, "{}", Some("stop")));
        events.push(usage_event(self.model, &self.usage()));
        events.push(DONE.to_string());
        events
    }

    /// The `usage` object, as OpenAI sends it.
    pub fn usage(&self) -> String {
        let (p, c) = (self.prompt_tokens, self.completion_tokens);
        format!(
            r#"{{"prompt_tokens":{p},"completion_tokens":{c},"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":0}},"completion_tokens_details":{{"reasoning_tokens":0}}}}"#,
            p + c
        )
    }
}

/// A `chat.completion` body; `content: None` is a `null` content (a refusal by the filter).
pub fn completion_body(model: &str, content: Option<&str>, finish_reason: &str, usage: &str) -> String {
    format!(
        r#"{{"id":"chatcmpl-faulty","object":"chat.completion","created":1694268190,"model":"{model}","system_fingerprint":"fp_44709d6fcb","choices":[{{"index":0,"message":{{"role":"assistant","content":{},"refusal":null}},"logprobs":null,"finish_reason":"{finish_reason}"}}],"usage":{usage}}}"#,
        content.map_or(Value::Null, Value::from)
    )
}

/// An OpenAI error body; `None` fields are `null`.
pub fn error_body(message: &str, kind: Option<&str>, param: Option<&str>, code: Option<&str>) -> String {
    let [message, kind, param, code] = [Some(message), kind, param, code].map(Value::from);
    format!(r#"{{"error":{{"message":{message},"type":{kind},"param":{param},"code":{code}}}}}"#)
}

/// One `chat.completion.chunk` event of a single choice, OpenAI's key order included.
pub fn chunk_event(model: &str, delta: &str, finish_reason: Option<&str>) -> String {
    let finish = Value::from(finish_reason);
    chunk(model, &format!(r#"[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}]"#), "null")
}

/// The usage chunk a stream asked for with `include_usage` ends with: `choices: []`.
pub fn usage_event(model: &str, usage: &str) -> String {
    chunk(model, "[]", usage)
}

/// A `chat.completion.chunk` event with these `choices` and `usage` (JSON text).
fn chunk(model: &str, choices: &str, usage: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-faulty\",\"object\":\"chat.completion.chunk\",\"created\":1694268190,\"model\":\"{model}\",\"system_fingerprint\":\"fp_44709d6fcb\",\"choices\":{choices},\"usage\":{usage}}}\n\n"
    )
}

type Script = dyn Fn(&Arrival) -> Behaviour + Send + Sync;

pub struct FaultyUpstream {
    /// Base URL including `/v1`, as a source's `base_url`.
    pub url: String,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    progress: Arc<Progress>,
}

/// What tests can wait for: requests arriving, connections ending.
#[derive(Default)]
struct Progress {
    /// Connections whose behaviour has run to its end (answered, or left by the gateway).
    ended: AtomicUsize,
    changed: Notify,
}

impl Progress {
    /// Resolves once `done` holds, rechecked whenever something arrived or ended.
    async fn until(&self, done: impl Fn() -> bool) {
        loop {
            // Created before the check: a change in between still wakes it.
            let changed = self.changed.notified();
            if done() {
                return;
            }
            changed.await;
        }
    }

    fn note(&self) {
        self.changed.notify_waiters();
    }
}

impl FaultyUpstream {
    /// Listens on 127.0.0.1:0 and answers every request (one per connection) as `script` says.
    pub async fn start(script: impl Fn(&Arrival) -> Behaviour + Send + Sync + 'static) -> FaultyUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let arrivals = Arc::new(Mutex::new(Vec::new()));
        let progress = Arc::new(Progress::default());
        tokio::spawn(serve(listener, Arc::new(script), arrivals.clone(), progress.clone()));
        FaultyUpstream { url, arrivals, progress }
    }

    /// An upstream that answers every request well.
    pub async fn healthy(answer: Answer) -> FaultyUpstream {
        FaultyUpstream::start(move |arrival| answer.to(arrival)).await
    }

    pub fn arrivals(&self) -> Vec<Arrival> {
        self.arrivals.lock().unwrap().clone()
    }

    pub fn attempts(&self) -> usize {
        self.arrivals.lock().unwrap().len()
    }

    /// Waits until `n` requests have arrived.
    pub async fn until_attempts(&self, n: usize) {
        self.progress.until(|| self.attempts() >= n).await
    }

    /// Waits until `n` requests have been dealt with to the end: answered, or (for a stall or
    /// a request never answered) until the gateway closed the connection.
    pub async fn until_ended(&self, n: usize) {
        self.progress.until(|| self.progress.ended.load(Ordering::SeqCst) >= n).await
    }
}

async fn serve(
    listener: TcpListener,
    script: Arc<Script>,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    progress: Arc<Progress>,
) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(answer_connection(stream, script.clone(), arrivals.clone(), progress.clone()));
    }
}

async fn answer_connection(
    mut stream: TcpStream,
    script: Arc<Script>,
    arrivals: Arc<Mutex<Vec<Arrival>>>,
    progress: Arc<Progress>,
) {
    let Some(body) = read_request(&mut stream).await else { return };
    let arrival = {
        let mut arrivals = arrivals.lock().unwrap();
        let body = serde_json::from_slice(&body).expect("the gateway sends JSON upstream");
        let arrival = Arrival { number: arrivals.len(), at: Instant::now(), body };
        arrivals.push(arrival.clone());
        arrival
    };
    progress.note();
    // A write error means the gateway has gone: nothing left to do.
    let _ = perform(stream, script(&arrival)).await;
    progress.ended.fetch_add(1, Ordering::SeqCst);
    progress.note();
}

/// Reads one HTTP/1.1 request (head, then a `Content-Length` body) and returns its body.
async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    read_head_and_body(stream).await.map(|(_, body)| body)
}

/// Reads one HTTP/1.1 request: its head (as text) and its `Content-Length` body.
async fn read_head_and_body(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        read_more(stream, &mut buffer).await?;
    };
    let head = std::str::from_utf8(&buffer[..head_end]).ok()?.to_string();
    let length: usize = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .map_or(Some(0), |(_, value)| value.trim().parse().ok())?;
    while buffer.len() < head_end + length {
        read_more(stream, &mut buffer).await?;
    }
    Some((head, buffer[head_end..head_end + length].to_vec()))
}

/// Appends what the peer sent next; `None` once it has closed.
async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 8192];
    match stream.read(&mut chunk).await {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buffer.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}

/// Waits until the gateway closes its side.
async fn until_closed(stream: &mut TcpStream) {
    let mut ignored = Vec::new();
    while read_more(stream, &mut ignored).await.is_some() {}
}

async fn perform(mut stream: TcpStream, behaviour: Behaviour) -> std::io::Result<()> {
    match behaviour {
        Behaviour::Json { status, headers, body } => {
            let reason = axum::http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
            let mut head = format!(
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
            stream.write_all(format!("{head}\r\n{body}").as_bytes()).await?;
        }
        Behaviour::Sse { events, end } => {
            send_sse_head(&mut stream).await?;
            for event in &events {
                send_chunk(&mut stream, event).await?;
            }
            match end {
                StreamEnd::Close => send_chunk(&mut stream, "").await?,
                StreamEnd::Cut => {}
                StreamEnd::Stall => until_closed(&mut stream).await,
            }
        }
        Behaviour::HeadThenDelay { delay, events } => {
            send_sse_head(&mut stream).await?;
            tokio::time::sleep(delay).await;
            for event in events.iter().map(String::as_str).chain([""]) {
                send_chunk(&mut stream, event).await?;
            }
        }
        Behaviour::ResetBeforeHeaders => stream.set_zero_linger()?,
        Behaviour::NeverAnswer => until_closed(&mut stream).await,
        Behaviour::Flood { event, flood } => {
            send_sse_head(&mut stream).await?;
            let chunk = format!("{:x}\r\n{event}\r\n", event.len());
            while flood.written.load(Ordering::SeqCst) < flood.limit {
                match tokio::time::timeout(flood.stall, stream.write_all(chunk.as_bytes())).await {
                    Err(_) => {
                        flood.end(FloodEnd::Stalled(flood.written.load(Ordering::SeqCst)));
                        // Holds the stalled stream open until the gateway lets it go.
                        until_closed(&mut stream).await;
                        return Ok(());
                    }
                    Ok(Err(e)) => {
                        flood.end(FloodEnd::Closed(flood.written.load(Ordering::SeqCst)));
                        return Err(e);
                    }
                    Ok(Ok(())) => flood.written.fetch_add(event.len(), Ordering::SeqCst),
                };
            }
            flood.end(FloodEnd::Finished);
            send_chunk(&mut stream, "").await?;
        }
        Behaviour::Gated { gate, then } => {
            gate.acquire().await.expect("the gate stays open").forget();
            return Box::pin(perform(stream, *then)).await;
        }
    }
    Ok(())
}

async fn send_sse_head(stream: &mut TcpStream) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await
}

/// One chunk of a chunked body; the empty one is the body's last.
async fn send_chunk(stream: &mut TcpStream, data: &str) -> std::io::Result<()> {
    stream.write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes()).await?;
    stream.flush().await
}

/// A plain HTTP server on 127.0.0.1:0 that answers every request (one per connection) with one
/// canned response after `delay`, and notes every connection and request head it got: the far
/// end of a redirect (which must see nothing), the redirect itself, a slow token server.
pub struct Canned {
    /// `http://127.0.0.1:PORT`, no path.
    pub url: String,
    pub port: u16,
    connections: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Canned {
    pub async fn start(delay: Duration, status: u16, headers: &[(&str, &str)], body: &str) -> Canned {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let reason = axum::http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("");
        let mut response = format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
            body.len()
        );
        for (name, value) in headers {
            response.push_str(&format!("{name}: {value}\r\n"));
        }
        let response: Arc<str> = format!("{response}\r\n{body}").into();
        let (connections, heads) = (Arc::new(AtomicUsize::new(0)), Arc::new(Mutex::new(Vec::new())));
        let (counted, noted) = (connections.clone(), heads.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let (noted, response) = (noted.clone(), response.clone());
                tokio::spawn(async move {
                    let Some((head, _)) = read_head_and_body(&mut stream).await else { return };
                    noted.lock().unwrap().push(head);
                    tokio::time::sleep(delay).await;
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Canned { url: format!("http://127.0.0.1:{port}"), port, connections, heads }
    }

    /// Connections accepted, whether or not a whole request came on them.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// The request heads received (request line and headers).
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}
