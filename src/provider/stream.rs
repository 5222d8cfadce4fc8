//! A live upstream stream translated chunk by chunk: pulls one event at a time (so the
//! client's pace is the upstream's pace), cuts silence at the idle timeout, and ends with
//! the adapter's verdict on completeness.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::{BoxStream, Stream, StreamExt};

use super::framing::EventStream;
use super::tally::Tally;
use super::{AttemptError, Target, TimeoutPhase, guest};
use crate::config::SourceConfig;
use crate::plugin::{AdapterSession, StreamOutput};

/// Called once when the stream ends: with its tally when complete, with the error when it
/// broke (not when the client went away first), before the end reaches the client.
pub type OnEnd = Box<dyn FnOnce(Result<Tally, &AttemptError>) + Send>;

/// Unified chunks (`chat.completion.chunk` JSON); an `Err` item is final.
pub struct ChunkStream {
    /// The source's concurrency place; declared first so it is released before the upstream
    /// connection closes.
    permit: Option<super::SourcePermit>,
    inner: BoxStream<'static, Result<String, AttemptError>>,
    tally: Tally,
    on_end: Option<OnEnd>,
}

struct State {
    session: AdapterSession,
    events: EventStream,
    source: SourceConfig,
    idle: Duration,
    /// The stream's whole-run bound (`stream_timeout_seconds`).
    deadline: tokio::time::Instant,
    total: Duration,
    pending: VecDeque<String>,
    finished: bool,
}

impl ChunkStream {
    /// Waits for the first chunk. An error before any chunk is the attempt's error (the caller
    /// may still fail over: nothing has reached the client); otherwise the stream is returned
    /// with that chunk put back in front.
    pub async fn first_chunk(mut self) -> Result<ChunkStream, AttemptError> {
        match self.inner.next().await {
            Some(Err(e)) => Err(e),
            Some(Ok(chunk)) => {
                self.inner = futures::stream::once(async { Ok(chunk) }).chain(self.inner).boxed();
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

    /// A stream of chunks already in hand (an answer chosen after the fact, e.g. by a judge).
    pub fn replay(chunks: Vec<String>) -> ChunkStream {
        ChunkStream {
            inner: futures::stream::iter(chunks.into_iter().map(Ok)).boxed(),
            permit: None,
            tally: Tally::default(),
            on_end: None,
        }
    }

    /// Keeps the source's concurrency place for as long as the stream lives.
    pub fn holding(mut self, permit: super::SourcePermit) -> ChunkStream {
        self.permit = Some(permit);
        self
    }

    pub(super) fn new(session: AdapterSession, events: EventStream, target: &Target<'_>) -> ChunkStream {
        let total = target.source.stream_timeout();
        let state = State {
            session,
            events,
            source: target.source.clone(),
            idle: target.source.idle_timeout(),
            deadline: tokio::time::Instant::now() + total,
            total,
            pending: VecDeque::new(),
            finished: false,
        };
        ChunkStream {
            inner: futures::stream::unfold(state, next).boxed(),
            permit: None,
            tally: Tally::default(),
            on_end: None,
        }
    }
}

impl Stream for ChunkStream {
    type Item = Result<String, AttemptError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let item = std::task::ready!(self.inner.poll_next_unpin(cx));
        match &item {
            Some(Ok(chunk)) => self.tally.add_chunk(chunk),
            Some(Err(e)) => {
                if let Some(f) = self.on_end.take() {
                    f(Err(e));
                }
            }
            None => {
                if let Some(f) = self.on_end.take() {
                    f(Ok(std::mem::take(&mut self.tally)));
                }
            }
        }
        Poll::Ready(item)
    }
}

async fn next(mut st: State) -> Option<(Result<String, AttemptError>, State)> {
    loop {
        if let Some(chunk) = st.pending.pop_front() {
            return Some((Ok(chunk), st));
        }
        if st.finished {
            return None;
        }
        match step(&mut st).await {
            Ok(out) => {
                st.finished = out.done;
                st.pending.extend(out.chunks);
            }
            Err(e) => {
                st.finished = true;
                return Some((Err(e), st));
            }
        }
    }
}

/// Reads one upstream event (or the end) and translates it.
async fn step(st: &mut State) -> Result<StreamOutput, AttemptError> {
    let source = &st.source;
    let idle_at = tokio::time::Instant::now() + st.idle;
    match tokio::time::timeout_at(idle_at.min(st.deadline), st.events.next()).await {
        Err(_) => {
            let (phase, after) =
                if idle_at < st.deadline { (TimeoutPhase::Idle, st.idle) } else { (TimeoutPhase::Total, st.total) };
            Err(AttemptError::Timeout { source_name: source.name.clone(), phase, after })
        }
        Ok(Some(Err(message))) => Err(AttemptError::Transport {
            source_name: source.name.clone(),
            message: format!("stream broke: {message}"),
        }),
        Ok(Some(Ok(event))) => guest(source, st.session.transform_stream_chunk(&event).await),
        Ok(None) => guest(source, st.session.finish_stream().await).map(|out| StreamOutput { done: true, ..out }),
    }
}
