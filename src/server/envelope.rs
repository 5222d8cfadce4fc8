//! The request envelope every front door shares: a fresh request id and span, refusals
//! logged and rendered in the door's protocol, the id stamped on the response.

use std::convert::Infallible;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use tracing::Instrument;

use super::error::ApiError;

/// How a front door names its request-id header and renders errors in its protocol.
pub struct FrontDoor {
    pub name: &'static str,
    pub id_header: &'static str,
    pub render_error: fn(ApiError) -> Response,
}

impl FrontDoor {
    /// The OpenAI endpoints: `x-request-id`, OpenAI error JSON.
    pub const OPENAI: &'static FrontDoor =
        &FrontDoor { name: "openai", id_header: "x-request-id", render_error: IntoResponse::into_response };
}

/// The request's id, made by the envelope (handlers take it as `Extension<RequestId>`).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The envelope of one front door, as a layer on its routes. A plain tower service rather
/// than `axum::middleware::from_fn`: that boxes a clone of the inner service and a second
/// future for every request, kilobytes held by each request in flight.
#[derive(Clone, Copy)]
pub struct Layer(&'static FrontDoor);

pub fn layer(door: &'static FrontDoor) -> Layer {
    Layer(door)
}

impl<S> tower::Layer<S> for Layer {
    type Service = Envelope<S>;

    fn layer(&self, inner: S) -> Envelope<S> {
        Envelope { door: self.0, inner }
    }
}

#[derive(Clone)]
pub struct Envelope<S> {
    door: &'static FrontDoor,
    inner: S,
}

impl<S> tower::Service<Request> for Envelope<S>
where
    S: tower::Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request) -> Self::Future {
        let started = Instant::now();
        // Time-ordered (UUIDv7): the log's request-id index then grows at its end, so a batch of
        // rows touches a few index pages instead of one random page each.
        let id = uuid::Uuid::now_v7().simple().to_string();
        request.extensions_mut().insert(RequestId(id.clone()));
        let door = self.door;
        let span = tracing::info_span!("request", door = door.name, id = %id, key = tracing::field::Empty, model = tracing::field::Empty);
        crate::telemetry::continue_from(&span, request.headers());
        let answer = span.in_scope(|| self.inner.call(request));
        Box::pin(async move {
            let response = answer.instrument(span.clone()).await?;
            Ok(finish(door, &span, started, &id, response))
        })
    }
}

/// A refusal (an `ApiError` the handler answered with) is logged and rendered in the front
/// door's protocol, and the id stamped on the answer.
fn finish(door: &FrontDoor, span: &tracing::Span, started: Instant, id: &str, mut response: Response) -> Response {
    if let Some(e) = response.extensions_mut().remove::<ApiError>() {
        span.in_scope(|| {
            let ms = started.elapsed().as_millis() as u64;
            tracing::info!(target: crate::logging::ACCESS, status = e.status.as_u16(), ms, kind = e.kind.as_str(), "refused: {}", e.message)
        });
        let retry_after = e.retry_after_header();
        let kind = e.kind;
        response = (door.render_error)(e);
        response.extensions_mut().insert(super::client_metrics::Refused(kind));
        if let Some(value) = retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, value);
        }
    }
    if let Ok(value) = HeaderValue::from_str(id) {
        response.headers_mut().insert(door.id_header, value);
    }
    response
}
