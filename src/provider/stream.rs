//! A live upstream stream translated chunk by chunk: pulls one event at a time (so the
//! client's pace is the upstream's pace), cuts silence at the idle timeout, and ends with
//! the adapter's verdict on completeness.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::{BoxStream, Stream, StreamExt};

use super::framing::EventStream;
use super::{AttemptError, Target, TimeoutPhase, guest};
use crate::config::SourceConfig;
use crate::plugin::{AdapterSession, StreamOutput};

/// Unified chunks (`chat.completion.chunk` JSON); an `Err` item is final.
pub struct ChunkStream {
    /// The source's concurrency place; declared first so it is released before the upstream
    /// connection closes.
    permit: Option<super::SourcePermit>,
    inner: BoxStream<'static, Result<String, AttemptError>>,
}

struct State {
    session: AdapterSession,
    events: EventStream,
    source: SourceConfig,
    idle: Duration,
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
            Some(Ok(chunk)) => Ok(ChunkStream {
                inner: futures::stream::once(async { Ok(chunk) }).chain(self.inner).boxed(),
                permit: self.permit,
            }),
            None => Ok(ChunkStream { inner: futures::stream::empty().boxed(), permit: self.permit }),
        }
    }

    /// Keeps the source's concurrency place for as long as the stream lives.
    pub fn holding(mut self, permit: super::SourcePermit) -> ChunkStream {
        self.permit = Some(permit);
        self
    }

    pub(super) fn new(session: AdapterSession, events: EventStream, target: &Target<'_>) -> ChunkStream {
        let state = State {
            session,
            events,
            source: target.source.clone(),
            idle: target.source.idle_timeout(),
            pending: VecDeque::new(),
            finished: false,
        };
        ChunkStream { inner: futures::stream::unfold(state, next).boxed(), permit: None }
    }
}

impl Stream for ChunkStream {
    type Item = Result<String, AttemptError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.poll_next_unpin(cx)
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
    match tokio::time::timeout(st.idle, st.events.next()).await {
        Err(_) => {
            Err(AttemptError::Timeout { source_name: source.name.clone(), phase: TimeoutPhase::Idle, after: st.idle })
        }
        Ok(Some(Err(message))) => Err(AttemptError::Transport {
            source_name: source.name.clone(),
            message: format!("stream broke: {message}"),
        }),
        Ok(Some(Ok(event))) => guest(source, st.session.transform_stream_chunk(&event).await),
        Ok(None) => guest(source, st.session.finish_stream().await).map(|out| StreamOutput { done: true, ..out }),
    }
}
