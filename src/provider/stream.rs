//! A live upstream stream translated chunk by chunk: pulls one event at a time (so the
//! client's pace is the upstream's pace), cuts silence at the idle timeout, and ends with
//! the adapter's verdict on completeness.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{BoxStream, Stream, StreamExt};

use super::framing::{EventStream, FrameError};
use super::tally::Tally;
use super::{AttemptError, Target, TimeoutPhase, guest};
use crate::config::SourceConfig;
use crate::plugin::{AdapterSession, StreamEvent};

/// How a stream ended, for the books.
pub enum StreamEnd<'a> {
    /// The upstream signalled a complete end; its tally.
    Complete(Tally),
    /// It broke after its first chunk; what was generated up to then.
    Failed(&'a AttemptError, Tally),
    /// The client went away first; what was generated up to then.
    Abandoned(Tally),
}

/// Called exactly once when the stream ends (see [`StreamEnd`]), before the end reaches the
/// client; when the client hangs up, as the stream is dropped.
pub type OnEnd = Box<dyn FnOnce(StreamEnd<'_>) + Send>;

/// A stage between the upstream and the client that may hold back, rewrite or end a stream's
/// unified chunks (the policies); it sees every chunk, then the end, in order.
pub trait ChunkGuard: Send + 'static {
    /// One unified chunk: what to pass on now (nothing while text is held).
    fn chunk(&mut self, chunk: String) -> BoxFuture<'_, Result<Vec<String>, AttemptError>>;
    /// The upstream signalled its end: what is still held.
    fn end(&mut self) -> BoxFuture<'_, Result<Vec<String>, AttemptError>>;
    /// The upstream failed: nothing more comes.
    fn failed(&mut self);
}

/// Given what a stream added up to, once it completed (never a cut, failed or abandoned one).
pub type OnWhole = Box<dyn FnOnce(Recorded) + Send>;

/// A completed stream as recorded: its whole answer, and a native session's own frames.
pub struct Recorded {
    /// The unified `chat.completion` the chunks add up to.
    pub unified: String,
    /// The SSE frames in the client's protocol, as sent (a native session's only).
    pub frames: Option<Vec<String>>,
}

/// A stream's unified chunks put together (and a native session's frames kept) as they pass,
/// up to `limit` bytes of text and frames.
struct Recording {
    assembler: super::assemble::Assembler,
    frames: Vec<String>,
    frame_bytes: usize,
    limit: usize,
    done: OnWhole,
}

/// What a stream carries: unified chunks (`chat.completion.chunk` JSON) or, from a native
/// session, the client's own SSE frames; an `Err` item is final.
pub struct ChunkStream {
    /// The source's concurrency place; declared first so it is released before the upstream
    /// connection closes.
    permit: Option<super::SourcePermit>,
    inner: BoxStream<'static, Result<Piece, AttemptError>>,
    /// Items are SSE frames in the client's protocol (a native session), not unified chunks.
    native: bool,
    tally: Tally,
    on_end: Option<OnEnd>,
    /// Usage-only chunks are counted but not passed on (the client did not ask for them).
    hide_usage: bool,
    /// Boxed: most streams record nothing, and a stream is moved about whole.
    recording: Option<Box<Recording>>,
}

/// A stream's pieces as they come out of its guard.
struct Guarded {
    inner: BoxStream<'static, Result<Piece, AttemptError>>,
    guard: Box<dyn ChunkGuard>,
    out: VecDeque<Piece>,
    done: bool,
}

impl Guarded {
    async fn next(mut self) -> Option<(Result<Piece, AttemptError>, Guarded)> {
        loop {
            if let Some(piece) = self.out.pop_front() {
                return Some((Ok(piece), self));
            }
            if self.done {
                return None;
            }
            let passed = match self.inner.next().await {
                Some(Ok(Piece::Chunk(chunk))) => self.guard.chunk(chunk).await,
                Some(Ok(other)) => {
                    self.out.push_back(other);
                    continue;
                }
                Some(Err(e)) => {
                    self.done = true;
                    self.guard.failed();
                    return Some((Err(e), self));
                }
                None => {
                    self.done = true;
                    self.guard.end().await
                }
            };
            match passed {
                Ok(chunks) => self.out.extend(chunks.into_iter().map(Piece::Chunk)),
                Err(e) => {
                    self.done = true;
                    self.out.clear();
                    return Some((Err(e), self));
                }
            }
        }
    }
}

/// One item of the inner stream.
enum Piece {
    /// A unified chunk: counted, and passed on.
    Chunk(String),
    /// A unified chunk a native session gave for the books: counted, not passed on.
    Book(String),
    /// An SSE frame in the client's protocol: passed on as it is.
    Wire(String),
}

struct State {
    session: AdapterSession,
    events: EventStream,
    source: SourceConfig,
    idle: Duration,
    /// The stream's whole-run bound (`stream_timeout_seconds`).
    deadline: tokio::time::Instant,
    total: Duration,
    /// Until the first event has come, it must come by then (`first_byte_timeout_seconds`).
    first_event_by: Option<(tokio::time::Instant, Duration)>,
    pending: VecDeque<Piece>,
    finished: bool,
}

impl ChunkStream {
    /// Waits for the first chunk. An error before any chunk is the attempt's error (the caller
    /// may still fail over: nothing has reached the client); otherwise the stream is returned
    /// with that chunk put back in front.
    pub async fn first_chunk(mut self) -> Result<ChunkStream, AttemptError> {
        match self.inner.next().await {
            Some(Err(e)) => Err(e),
            Some(Ok(piece)) => {
                let rest = std::mem::replace(&mut self.inner, futures::stream::empty().boxed());
                self.inner = futures::stream::once(async { Ok(piece) }).chain(rest).boxed();
                Ok(self)
            }
            None => {
                self.inner = futures::stream::empty().boxed();
                Ok(self)
            }
        }
    }

    /// Runs `f` once the stream ends (see [`OnEnd`]).
    pub fn on_end(mut self, f: OnEnd) -> ChunkStream {
        self.on_end = Some(f);
        self
    }

    /// Counts usage-only chunks without passing them on: the gateway always asks the upstream
    /// for usage (the books need it), a client gets the chunk only when it asked too.
    pub fn hiding_usage(mut self, hide: bool) -> ChunkStream {
        self.hide_usage = hide;
        self
    }

    /// Passes its unified chunks through `guard` before anything else sees them (the books,
    /// the recording, the client); a guard's error ends the stream as an upstream's would.
    pub fn guarded(mut self, guard: Box<dyn ChunkGuard>) -> ChunkStream {
        let inner = std::mem::replace(&mut self.inner, futures::stream::empty().boxed());
        let state = Guarded { inner, guard, out: VecDeque::new(), done: false };
        self.inner = futures::stream::unfold(state, Guarded::next).boxed();
        self
    }

    /// Puts the whole answer together (and keeps a native session's frames) as the stream
    /// passes, for `done` once it completes; past `limit` bytes it stops (`done` is never called).
    pub fn recording(mut self, limit: usize, done: OnWhole) -> ChunkStream {
        self.recording = Some(Box::new(Recording {
            assembler: Default::default(),
            frames: Vec::new(),
            frame_bytes: 0,
            limit,
            done,
        }));
        self
    }

    fn record(&mut self, chunk: &str) {
        let Some(recording) = &mut self.recording else { return };
        recording.assembler.chunk(chunk);
        if recording.assembler.held() > recording.limit {
            self.recording = None;
        }
    }

    fn record_frame(&mut self, frame: &str) {
        let Some(recording) = &mut self.recording else { return };
        recording.frame_bytes += frame.len();
        if recording.frame_bytes > recording.limit {
            self.recording = None;
            return;
        }
        recording.frames.push(frame.to_string());
    }

    /// A native session's frames already in hand (a kept answer), passed on as they are.
    pub fn replay_frames(frames: Vec<String>) -> ChunkStream {
        let mut stream = ChunkStream::replay_pieces(frames.into_iter().map(Piece::Wire).collect());
        stream.native = true;
        stream
    }

    /// A stream of chunks already in hand (an answer chosen after the fact, e.g. by a judge).
    pub fn replay(chunks: Vec<String>) -> ChunkStream {
        ChunkStream::replay_pieces(chunks.into_iter().map(Piece::Chunk).collect())
    }

    fn replay_pieces(pieces: Vec<Piece>) -> ChunkStream {
        ChunkStream {
            inner: futures::stream::iter(pieces.into_iter().map(Ok)).boxed(),
            permit: None,
            native: false,
            tally: Tally::default(),
            on_end: None,
            hide_usage: false,
            recording: None,
        }
    }

    /// Whether its items are SSE frames in the client's protocol (from a native session)
    /// rather than unified chunks.
    pub fn is_native(&self) -> bool {
        self.native
    }

    /// Keeps the source's concurrency place for as long as the stream lives.
    pub fn holding(mut self, permit: super::SourcePermit) -> ChunkStream {
        self.permit = Some(permit);
        self
    }

    pub(super) fn new(
        session: AdapterSession,
        events: EventStream,
        target: &Target<'_>,
        first_event_by: tokio::time::Instant,
    ) -> ChunkStream {
        let total = target.source.stream_timeout();
        let native = session.is_native();
        let state = State {
            session,
            events,
            source: target.source.clone(),
            idle: target.source.idle_timeout(),
            deadline: tokio::time::Instant::now() + total,
            total,
            first_event_by: Some((first_event_by, target.source.first_byte_timeout())),
            pending: VecDeque::new(),
            finished: false,
        };
        ChunkStream {
            inner: futures::stream::unfold(state, next).boxed(),
            permit: None,
            native,
            tally: Tally::default(),
            on_end: None,
            hide_usage: false,
            recording: None,
        }
    }
}

impl Stream for ChunkStream {
    type Item = Result<String, AttemptError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let item = match std::task::ready!(self.inner.poll_next_unpin(cx)) {
                Some(Ok(Piece::Chunk(chunk))) => {
                    self.record(&chunk);
                    let usage_only = self.tally.add_chunk(&chunk);
                    if usage_only && self.hide_usage {
                        continue;
                    }
                    Some(Ok(chunk))
                }
                Some(Ok(Piece::Book(chunk))) => {
                    self.record(&chunk);
                    self.tally.add_chunk(&chunk);
                    continue;
                }
                Some(Ok(Piece::Wire(frame))) => {
                    self.record_frame(&frame);
                    Some(Ok(frame))
                }
                Some(Err(e)) => {
                    self.recording = None;
                    if let Some(f) = self.on_end.take() {
                        f(StreamEnd::Failed(&e, std::mem::take(&mut self.tally)));
                    }
                    Some(Err(e))
                }
                None => {
                    if let Some(f) = self.on_end.take() {
                        f(StreamEnd::Complete(std::mem::take(&mut self.tally)));
                    }
                    if let Some(recording) = self.recording.take()
                        && recording.assembler.is_whole()
                    {
                        let frames = self.native.then_some(recording.frames);
                        (recording.done)(Recorded { unified: recording.assembler.finish(), frames });
                    }
                    None
                }
            };
            return Poll::Ready(item);
        }
    }
}

impl Drop for ChunkStream {
    fn drop(&mut self) {
        if let Some(f) = self.on_end.take() {
            f(StreamEnd::Abandoned(std::mem::take(&mut self.tally)));
        }
    }
}

async fn next(mut st: State) -> Option<(Result<Piece, AttemptError>, State)> {
    loop {
        if let Some(piece) = st.pending.pop_front() {
            return Some((Ok(piece), st));
        }
        if st.finished {
            return None;
        }
        match step(&mut st).await {
            Ok(out) => {
                st.finished = out.done;
                st.pending.extend(out.pieces);
            }
            Err(e) => {
                st.finished = true;
                return Some((Err(e), st));
            }
        }
    }
}

/// What one step gave: pieces in order, and whether the upstream signalled its end.
struct Step {
    pieces: Vec<Piece>,
    done: bool,
}

/// One event in SSE form: `event:` unless it is the default `message`, a `data:` line per line.
pub fn sse_frame(event: &StreamEvent) -> String {
    let mut frame = String::with_capacity(event.data.len() + event.event.len() + 16);
    if !event.event.is_empty() && event.event != "message" {
        frame.push_str("event: ");
        frame.push_str(&event.event);
        frame.push('\n');
    }
    for line in event.data.split('\n') {
        frame.push_str("data: ");
        frame.push_str(line.strip_suffix('\r').unwrap_or(line));
        frame.push('\n');
    }
    frame.push('\n');
    frame
}

/// Reads one upstream event (or the end) and translates it.
async fn step(st: &mut State) -> Result<Step, AttemptError> {
    let source = &st.source;
    let idle_at = tokio::time::Instant::now() + st.idle;
    let mut limit = if idle_at < st.deadline {
        (idle_at, TimeoutPhase::Idle, st.idle)
    } else {
        (st.deadline, TimeoutPhase::Total, st.total)
    };
    if let Some((by, after)) = st.first_event_by.take()
        && by <= limit.0
    {
        limit = (by, TimeoutPhase::FirstByte, after);
    }
    let (at, phase, after) = limit;
    match tokio::time::timeout_at(at, st.events.next()).await {
        Err(_) => Err(AttemptError::Timeout { source_name: source.name.clone(), phase, after }),
        Ok(Some(Err(e @ FrameError::Transport(_)))) => {
            Err(AttemptError::Transport { source_name: source.name.clone(), message: e.to_string() })
        }
        Ok(Some(Err(e @ FrameError::Invalid(_)))) => Err(AttemptError::Upstream {
            source_name: source.name.clone(),
            kind: crate::domain::FailureKind::InvalidResponse,
            status: None,
            message: e.to_string(),
            retry_after: None,
            code: None,
        }),
        Ok(Some(Ok(event))) if st.session.is_native() => {
            guest(source, st.session.native_stream_chunk(&event).await).map(native_step)
        }
        Ok(Some(Ok(event))) => guest(source, st.session.transform_stream_chunk(&event).await)
            .map(|out| Step { pieces: out.chunks.into_iter().map(Piece::Chunk).collect(), done: out.done }),
        Ok(None) if st.session.is_native() => {
            guest(source, st.session.native_finish_stream().await).map(|out| Step { done: true, ..native_step(out) })
        }
        Ok(None) => guest(source, st.session.finish_stream().await)
            .map(|out| Step { pieces: out.chunks.into_iter().map(Piece::Chunk).collect(), done: true }),
    }
}

/// A native session's output: the client's frames, then the books' chunks.
fn native_step(out: crate::plugin::NativeOutput) -> Step {
    let frames = out.events.iter().map(|event| Piece::Wire(sse_frame(event)));
    Step { pieces: frames.chain(out.chunks.into_iter().map(Piece::Book)).collect(), done: out.done }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_name_their_event_and_split_data_lines() {
        let event = |event: &str, data: &str| StreamEvent { event: event.into(), data: data.into() };
        assert_eq!(sse_frame(&event("message_stop", "{}")), "event: message_stop\ndata: {}\n\n");
        assert_eq!(sse_frame(&event("message", "[DONE]")), "data: [DONE]\n\n");
        assert_eq!(sse_frame(&event("", "a\r\nb")), "data: a\ndata: b\n\n");
    }
}
