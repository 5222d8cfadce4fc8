//! The cap on requests in flight (`server.max_in_flight`): past it a request is answered 503
//! with Retry-After at once, in its front door's error format; a place is held until the
//! response body (a stream) ends.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::{ApiError, ErrorType};
use super::guarded::Guarded;

pub async fn limit(State(places): State<Arc<Semaphore>>, request: Request, next: Next) -> Response {
    let Ok(place) = places.try_acquire_owned() else {
        let error = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Overloaded,
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
    next.run(request).await.map(|body| Guarded::body(body, place))
}
