//! A response body that holds a guard until it is dropped: an in-flight place, a connection's
//! busy mark. A stream keeps it to its last event; size and end pass through unchanged.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};

pub struct Guarded<G> {
    inner: Body,
    _guard: G,
}

impl<G: Send + Unpin + 'static> Guarded<G> {
    /// `body`, holding `guard` until it is done.
    pub fn body(inner: Body, guard: G) -> Body {
        Body::new(Guarded { inner, _guard: guard })
    }
}

impl<G: Unpin> http_body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
