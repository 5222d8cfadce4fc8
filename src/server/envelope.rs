//! The request envelope every front door shares: a fresh request id and span, refusals
//! logged and rendered in the door's protocol, the id stamped on the response.

use std::time::Instant;

use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use super::error::ApiError;
use super::request::Incoming;

/// How a front door names its request-id header and renders errors in its protocol.
pub struct FrontDoor {
    pub name: &'static str,
    pub id_header: &'static str,
    pub render_error: fn(ApiError) -> Response,
}

impl FrontDoor {
    /// The OpenAI endpoints: `x-request-id`, OpenAI error JSON.
    pub const OPENAI: FrontDoor =
        FrontDoor { name: "openai", id_header: "x-request-id", render_error: IntoResponse::into_response };
}

/// Runs one request under a fresh id and span: logs a refusal, renders it in the front
/// door's protocol, and stamps the id on the response.
pub async fn respond<F>(door: FrontDoor, incoming: Incoming, handle: impl FnOnce(Incoming, String) -> F) -> Response
where
    F: Future<Output = Result<Response, ApiError>>,
{
    let started = Instant::now();
    let id = uuid::Uuid::new_v4().simple().to_string();
    let handle = handle(incoming, id.clone());
    let span = tracing::info_span!("request", door = door.name, id = %id, key = tracing::field::Empty, model = tracing::field::Empty);
    let mut response = match handle.instrument(span.clone()).await {
        Ok(response) => response,
        Err(e) => {
            span.in_scope(|| {
                let ms = started.elapsed().as_millis() as u64;
                tracing::info!(target: crate::logging::ACCESS, status = e.status.as_u16(), ms, kind = e.kind.as_str(), "refused: {}", e.message)
            });
            (door.render_error)(e)
        }
    };
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(door.id_header, value);
    }
    response
}
