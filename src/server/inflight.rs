//! The cap on requests in flight (`server.max_in_flight`): past it a request is answered 503
//! with Retry-After at once, in its front door's error format; a place is held until the
//! response body (a stream) ends.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::ApiError;

pub async fn limit(State(places): State<Arc<Semaphore>>, request: Request, next: Next) -> Response {
    let Ok(place) = places.try_acquire_owned() else {
        let error = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "overloaded_error",
            "the gateway is serving as many requests as it allows (server.max_in_flight); retry shortly",
        )
        .code("too_many_requests_in_flight");
        let mut response = if request.uri().path().starts_with("/v1/messages") {
            super::messages::error_response(error)
        } else {
            error.into_response()
        };
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return response;
    };
    // The place goes with the body: a stream keeps it until its last event.
    next.run(request).await.map(|inner| Body::new(Holding { inner, _place: place }))
}

/// A response body that holds an in-flight place until it is dropped; size and end pass
/// through (a JSON answer keeps its content-length).
struct Holding {
    inner: Body,
    _place: OwnedSemaphorePermit,
}

impl http_body::Body for Holding {
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
