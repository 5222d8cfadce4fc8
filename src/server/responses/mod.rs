//! `POST /v1/responses`: the OpenAI Responses front door (Codex, the Responses SDKs). The
//! request is translated to the unified form, dispatched like any chat request, and the answer
//! returned as a `response` object or its event stream; nothing is stored.

mod encode;
mod request;

use std::convert::Infallible;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use super::call::{Answer, Call};
use super::dispatch::dispatch;
use super::envelope::RequestId;
use super::error::{ApiError, ErrorType};
use super::request::{Incoming, parse_json};
use crate::config::ModelKind;
use crate::provider::ChunkStream;

pub async fn responses(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let (runtime, key, bytes) = incoming.arrive().await?;
    let (gw, client_ip) = (&incoming.gw, incoming.client_ip);
    let checked: request::ResponsesRequest = parse_json(&bytes)?;
    tracing::Span::current().record("model", &*checked.model);
    if checked.previous_response_id.is_some() {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorType::InvalidRequest,
            "previous_response_id: this gateway keeps no responses; send the whole conversation in `input` (as Codex does with store: false)",
        )
        .code("previous_response_not_found")
        .param("previous_response_id"));
    }
    let Value::Object(raw) =
        serde_json::from_slice::<Value>(&bytes).map_err(|e| ApiError::invalid_request(e.to_string()))?
    else {
        return Err(ApiError::invalid_request("request body must be a JSON object"));
    };
    let (unified, dropped) = request::to_unified(&raw)?;
    if !dropped.tools.is_empty() || !dropped.items.is_empty() {
        tracing::warn!(tools = ?dropped.tools, items = ?dropped.items, "responses: built-in tools and input items a chat upstream cannot take were left out");
    }
    let unified = unified.to_string();
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
        native: None,
    };
    let echo = encode::Echo {
        model: checked.model.to_string(),
        id: format!("resp_{request_id}"),
        created_at: gw.scheduler.now().0 / 1000,
        request: raw,
    };
    let reply = dispatch(gw, &key, call).await?;
    let mut response = match reply.answer {
        Answer::Complete(body) => {
            let unified: Value = serde_json::from_str(&body).map_err(|e| {
                ApiError::new(StatusCode::BAD_GATEWAY, ErrorType::Api, format!("adapter returned invalid JSON: {e}"))
            })?;
            axum::Json(encode::response_object(&echo, &unified)).into_response()
        }
        Answer::Native(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Answer::Stream(chunks) => sse_response(chunks, echo),
    };
    response.headers_mut().extend(reply.headers);
    Ok(response)
}

/// Responses SSE: `response.created` first, events as unified chunks arrive, and exactly one
/// terminal event — `response.completed`/`.incomplete` after a complete stream,
/// `response.failed` after a cut, timed-out or refused one.
fn sse_response(chunks: ChunkStream, echo: encode::Echo) -> Response {
    let span = tracing::Span::current();
    let mut encoder = encode::StreamEncoder::new(echo);
    let mut head = String::new();
    encoder.start(&mut head);
    let first = futures::stream::once(async move { Ok::<_, Infallible>(Bytes::from(head)) });
    let events = futures::stream::unfold((chunks, encoder, false), move |(mut chunks, mut encoder, ended)| {
        let span = span.clone();
        async move {
            if ended {
                return None;
            }
            let mut out = String::new();
            let ended = match chunks.next().await {
                Some(Ok(chunk)) => {
                    match serde_json::from_str::<Value>(&chunk) {
                        Ok(chunk) => encoder.chunk(&chunk, &mut out),
                        Err(e) => span.in_scope(|| tracing::warn!("skipping a unified chunk that is not JSON: {e}")),
                    }
                    false
                }
                Some(Err(e)) => {
                    span.in_scope(|| tracing::warn!("stream failed: {e}"));
                    let error = ApiError::from(&e);
                    let code = error.code.as_deref().unwrap_or(error.kind.as_str()).to_string();
                    encoder.fail(&code, &error.message, &mut out);
                    true
                }
                None => {
                    encoder.finish(&mut out);
                    true
                }
            };
            Some((Ok::<_, Infallible>(Bytes::from(out)), (chunks, encoder, ended)))
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(first.chain(events)))
        .expect("static headers are valid")
}
