//! The cap on requests in flight (`server.max_in_flight`) and the operator's pause: past the
//! cap, or while paused, a request is answered 503 with Retry-After at once, in its front
//! door's error format; a place is held until the response body (a stream) ends.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::future::{Either, Ready, ready as answer_now};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::{ApiError, ErrorType};
use super::guarded::Guarded;

/// The layer on the API routes. A plain tower service rather than `axum::middleware::from_fn`,
/// which boxes a clone of the inner service and a second future for every request in flight.
#[derive(Clone)]
pub struct Layer {
    places: Arc<Semaphore>,
    paused: Pause,
}

pub fn layer(places: Arc<Semaphore>, paused: Pause) -> Layer {
    Layer { places, paused }
}

impl<S> tower::Layer<S> for Layer {
    type Service = Limit<S>;

    fn layer(&self, inner: S) -> Limit<S> {
        Limit { places: self.places.clone(), paused: self.paused.clone(), inner }
    }
}

/// The operator's switch: while it is on, `/v1` requests are refused (the admin API, the
/// WebUI and `/health` go on); requests already in flight finish.
#[derive(Clone, Default)]
pub struct Pause(Arc<AtomicBool>);

impl Pause {
    pub fn set(&self, paused: bool) {
        self.0.store(paused, Ordering::Relaxed);
    }

    pub fn is_on(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Clone)]
pub struct Limit<S> {
    places: Arc<Semaphore>,
    paused: Pause,
    inner: S,
}

impl<S> tower::Service<Request> for Limit<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Either<Ready<Result<Response, Infallible>>, Placed<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        if self.paused.is_on() {
            return Either::Left(answer_now(Ok(refusal(&request, Refusal::Paused))));
        }
        match self.places.clone().try_acquire_owned() {
            Ok(place) => Either::Right(Placed { answer: self.inner.call(request), place: Some(place) }),
            Err(_) => Either::Left(answer_now(Ok(refusal(&request, Refusal::Full)))),
        }
    }
}

enum Refusal {
    Full,
    Paused,
}

/// 503 in the request's front door's format.
fn refusal(request: &Request, why: Refusal) -> Response {
    let (message, code, retry_after) = match why {
        Refusal::Full => (
            "the gateway is serving as many requests as it allows (server.max_in_flight); retry shortly",
            "too_many_requests_in_flight",
            "1",
        ),
        Refusal::Paused => ("the gateway's operator has paused serving; retry later", "serving_paused", "30"),
    };
    let error = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, ErrorType::Overloaded, message).code(code);
    let mut response = if request.uri().path().starts_with("/v1/messages") {
        super::messages::error_response(error)
    } else {
        error.into_response()
    };
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(retry_after));
    response.extensions_mut().insert(super::client_metrics::Refused(ErrorType::Overloaded));
    response
}

pin_project_lite::pin_project! {
    /// The inner answer; its place then goes with the body, so a stream keeps it until its
    /// last event.
    pub struct Placed<F> {
        #[pin]
        answer: F,
        place: Option<OwnedSemaphorePermit>,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Placed<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.answer.poll(cx))?;
        Poll::Ready(Ok(match this.place.take() {
            Some(place) => response.map(|body| Guarded::body(body, place)),
            None => response,
        }))
    }
}
