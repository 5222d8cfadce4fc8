//! `POST /v1/chat/completions`: authenticate, validate, dispatch, and answer as JSON or as
//! SSE ending in `data: [DONE]`.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::dispatch::{Answer, Call, FrontDoor, dispatch, respond};
use super::error::ApiError;
use super::request::{ChatRequest, Incoming, parse_json};
use crate::config::ModelKind;
use crate::provider::ChunkStream;

pub async fn chat_completions(incoming: Incoming) -> Response {
    respond(FrontDoor::OPENAI, incoming, handle).await
}

async fn handle(mut incoming: Incoming, request_id: String) -> Result<Response, ApiError> {
    let started = std::time::Instant::now();
    let (runtime, key, bytes) = incoming.arrive().await?;
    let (gw, client_ip) = (&incoming.gw, incoming.client_ip);
    let request: ChatRequest = parse_json(&bytes)?;
    tracing::Span::current().record("model", &*request.model);
    if request.messages.is_empty() {
        return Err(ApiError::invalid_request("`messages` must contain at least one message").param("messages"));
    }
    // The adapter receives the client's body as sent: validated, never re-encoded.
    let unified = std::str::from_utf8(&bytes).map_err(|_| ApiError::invalid_request("request body is not UTF-8"))?;
    let call = Call {
        model: &request.model,
        unified,
        stream: request.streaming(),
        kind: ModelKind::Chat,
        client_ip,
        request_id: &request_id,
        runtime: &runtime,
        depth: 0,
        fusion_id: None,
    };
    let reply = dispatch(gw, &key, call).await?;
    let mut response = match reply.answer {
        Answer::Complete(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Answer::Stream(chunks) => sse_response(chunks, started),
    };
    response.headers_mut().extend(reply.headers);
    Ok(response)
}

/// SSE to the client: one `data:` per unified chunk; `[DONE]` only after a complete stream,
/// an error event (and no `[DONE]`) after a failed one.
fn sse_response(chunks: ChunkStream, started: std::time::Instant) -> Response {
    let span = tracing::Span::current();
    let events = futures::stream::unfold((chunks, 0usize, false), move |(mut chunks, sent, ended)| {
        let span = span.clone();
        async move {
            if ended {
                return None;
            }
            let ms = started.elapsed().as_millis() as u64;
            let bytes = match chunks.next().await {
                Some(Ok(chunk)) => {
                    return Some((Ok::<_, Infallible>(sse_data(&chunk)), (chunks, sent + 1, false)));
                }
                Some(Err(e)) => {
                    span.in_scope(|| tracing::warn!(chunks = sent, ms, "stream failed: {e}"));
                    sse_data(&ApiError::from(&e).body().to_string())
                }
                None => {
                    span.in_scope(|| tracing::info!(chunks = sent, ms, "stream completed"));
                    Bytes::from_static(b"data: [DONE]\n\n")
                }
            };
            Some((Ok(bytes), (chunks, sent, true)))
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .expect("static headers are valid")
}

fn sse_data(json: &str) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}
