//! The request envelope every front door shares: a fresh request id and span, refusals
//! logged and rendered in the door's protocol, the id stamped on the response.

use std::time::Instant;

use axum::extract::{Request, State};
use axum::http::HeaderValue;
use axum::middleware::Next;
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

/// The envelope middleware as a plain function pointer (so the layer's type can be named).
type Envelope = fn(State<&'static FrontDoor>, Request, Next) -> BoxFuture<'static, Response>;

/// The envelope of one front door, as a layer on its routes.
pub fn layer(
    door: &'static FrontDoor,
) -> axum::middleware::FromFnLayer<Envelope, &'static FrontDoor, (State<&'static FrontDoor>, Request)> {
    axum::middleware::from_fn_with_state(door, |State(door), request, next| Box::pin(envelope(door, request, next)))
}

/// Runs one request under a fresh id and span: a refusal (an `ApiError` the handler answered
/// with) is logged and rendered in the front door's protocol, and the id stamped on the answer.
async fn envelope(door: &'static FrontDoor, mut request: Request, next: Next) -> Response {
    let started = Instant::now();
    // Time-ordered (UUIDv7): the log's request-id index then grows at its end, so a batch of
    // rows touches a few index pages instead of one random page each.
    let id = uuid::Uuid::now_v7().simple().to_string();
    request.extensions_mut().insert(RequestId(id.clone()));
    let span = tracing::info_span!("request", door = door.name, id = %id, key = tracing::field::Empty, model = tracing::field::Empty);
    crate::telemetry::continue_from(&span, request.headers());
    let mut response = next.run(request).instrument(span.clone()).await;
    if let Some(e) = response.extensions_mut().remove::<ApiError>() {
        span.in_scope(|| {
            let ms = started.elapsed().as_millis() as u64;
            tracing::info!(target: crate::logging::ACCESS, status = e.status.as_u16(), ms, kind = e.kind.as_str(), "refused: {}", e.message)
        });
        let retry_after = e.retry_after_header();
        response = (door.render_error)(e);
        if let Some(value) = retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, value);
        }
    }
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(door.id_header, value);
    }
    response
}
