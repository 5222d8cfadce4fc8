//! `POST /v1/messages`: the Anthropic front door. Anthropic clients reach any source: an
//! adapter that forwards Anthropic natively gets the request as sent and its answer goes back
//! untouched; for the others the request is translated to the unified form and the answer
//! (JSON or SSE) back. Every error is in Anthropic's format.

mod encode;
mod request;

pub(crate) use request::image_url;

pub use encode::error_response;

use std::convert::Infallible;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use super::call::{Answer, Call, Native};
use super::dispatch::dispatch;
use super::envelope::{FrontDoor, RequestId};
use super::error::{ApiError, ErrorType};
use super::request::{Incoming, parse_json};
use crate::config::ModelKind;
use crate::provider::ChunkStream;

/// The client protocol of this door, as adapters that forward it natively name it.
pub const PROTOCOL: &str = "anthropic-messages";

/// The Anthropic endpoint: `request-id`, Anthropic error JSON.
pub const ANTHROPIC: &FrontDoor =
    &FrontDoor { name: "anthropic", id_header: "request-id", render_error: encode::error_response };

pub async fn messages(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let (runtime, key, bytes) = incoming.arrive().await?;
    let (gw, client_ip) = (&incoming.gw, incoming.client_ip);
    let checked: request::MessagesRequest = parse_json(&bytes)?;
    tracing::Span::current().record("model", &*checked.model);
    if checked.messages.is_empty() {
        return Err(ApiError::invalid_request("messages: at least one message is required").param("messages"));
    }
    let Value::Object(raw) =
        serde_json::from_slice::<Value>(&bytes).map_err(|e| ApiError::invalid_request(e.to_string()))?
    else {
        return Err(ApiError::invalid_request("request body must be a JSON object"));
    };
    let unified = request::to_unified(&raw)?.to_string();
    let native = Native { protocol: PROTOCOL, body: &bytes, headers: &incoming.headers };
    let call = Call {
        model: &checked.model,
        unified: &unified,
        stream: checked.stream,
        kind: ModelKind::Chat,
        client_ip,
        request_id: &request_id,
        runtime: &runtime,
        depth: 0,
        fusion_id: None,
        native: Some(native),
    };
    let reply = dispatch(gw, &key, call).await?;
    let mut response = match reply.answer {
        // An Anthropic upstream's own answer, untouched (signatures, cache usage, new fields).
        Answer::Native(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Answer::Complete(body) => {
            let unified: Value = serde_json::from_str(&body).map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::BAD_GATEWAY,
                    ErrorType::Api,
                    format!("adapter returned invalid JSON: {e}"),
                )
            })?;
            axum::Json(encode::message(&unified)).into_response()
        }
        Answer::Stream(chunks) => sse_response(chunks),
    };
    response.headers_mut().extend(reply.headers);
    Ok(response)
}

/// `POST /v1/messages/count_tokens`: the request's input tokens as the gateway estimates them
/// (the estimate that prices requests whose upstream reports no usage), for any model this key
/// may use; the same checks and errors as `/v1/messages`, nothing sent upstream.
pub async fn count_tokens(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let (runtime, key, bytes) = incoming.arrive().await?;
    let checked: request::MessagesRequest = parse_json(&bytes)?;
    tracing::Span::current().record("model", &*checked.model);
    let Value::Object(raw) =
        serde_json::from_slice::<Value>(&bytes).map_err(|e| ApiError::invalid_request(e.to_string()))?
    else {
        return Err(ApiError::invalid_request("request body must be a JSON object"));
    };
    let unified = request::to_unified(&raw)?.to_string();
    let call = Call {
        model: &checked.model,
        unified: &unified,
        stream: false,
        kind: ModelKind::Chat,
        client_ip: incoming.client_ip,
        request_id: &request_id,
        runtime: &runtime,
        depth: 0,
        fusion_id: None,
        native: None,
    };
    super::scope::plan_candidates(&key, &call)?;
    let tokens = crate::provider::prompt_estimate(&unified);
    Ok(axum::Json(serde_json::json!({"input_tokens": tokens})).into_response())
}

/// Anthropic SSE: events as unified chunks arrive; `message_stop` only after a complete stream,
/// an `error` event after a failed one.
fn sse_response(chunks: ChunkStream) -> Response {
    let span = tracing::Span::current();
    let events = futures::stream::unfold(
        (chunks, encode::StreamEncoder::default(), false),
        move |(mut chunks, mut encoder, ended)| {
            let span = span.clone();
            async move {
                if ended {
                    return None;
                }
                let mut out = String::new();
                let native = chunks.is_native();
                let ended = match chunks.next().await {
                    // A native stream's items are the upstream's own SSE frames.
                    Some(Ok(frame)) if native => {
                        out = frame;
                        false
                    }
                    Some(Ok(chunk)) => {
                        match serde_json::from_str::<Value>(&chunk) {
                            Ok(chunk) => encoder.chunk(&chunk, &mut out),
                            Err(e) => {
                                span.in_scope(|| tracing::warn!("skipping a unified chunk that is not JSON: {e}"))
                            }
                        }
                        false
                    }
                    Some(Err(e)) => {
                        span.in_scope(|| tracing::warn!("stream failed: {e}"));
                        let error = ApiError::from(&e);
                        out.push_str(&encode::sse("error", &encode::error_body(error.status.as_u16(), &error.message)));
                        true
                    }
                    None => {
                        if !native {
                            encoder.finish(&mut out);
                        }
                        span.in_scope(|| tracing::debug!("stream completed"));
                        true
                    }
                };
                Some((Ok::<_, Infallible>(Bytes::from(out)), (chunks, encoder, ended)))
            }
        },
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .expect("static headers are valid")
}
