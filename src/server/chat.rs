//! `POST /v1/chat/completions`: authenticate, validate, resolve, check scope, then one attempt
//! through the source's adapter, answered as JSON or as SSE ending in `data: [DONE]`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tracing::Instrument;

use super::Gateway;
use super::error::ApiError;
use super::request::{ChatRequest, parse_json, read_body};
use crate::config::ModelKind;
use crate::provider::{ChunkStream, Target};
use crate::router;

pub async fn chat_completions(
    State(gw): State<Arc<Gateway>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let request_id = uuid::Uuid::new_v4().simple().to_string();
    let span = tracing::info_span!("chat", id = %request_id, key = tracing::field::Empty, model = tracing::field::Empty);
    let result = handle(gw, headers, body).instrument(span.clone()).await;
    let mut response = match result {
        Ok(response) => response,
        Err(e) => {
            span.in_scope(|| {
                tracing::info!(
                    status = e.status.as_u16(),
                    kind = e.kind,
                    "request refused: {}",
                    e.message
                )
            });
            e.into_response()
        }
    };
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    response
}

async fn handle(gw: Arc<Gateway>, headers: HeaderMap, body: Body) -> Result<Response, ApiError> {
    let key = gw.keys.authenticate(&headers)?;
    tracing::Span::current().record("key", key.name.as_str());
    let bytes = read_body(body, gw.config.body_limit_bytes).await?;
    let request: ChatRequest = parse_json(&bytes)?;
    tracing::Span::current().record("model", &*request.model);
    if request.messages.is_empty() {
        return Err(
            ApiError::invalid_request("`messages` must contain at least one message")
                .param("messages"),
        );
    }

    let resolved = router::resolve(&gw.config, &request.model);
    let names: Vec<String> = match &resolved {
        Some(r) => vec![
            request.model.to_string(),
            r.qualified(),
            r.model.name.clone(),
        ],
        None => vec![request.model.to_string()],
    };
    if !key
        .scope
        .allows(&names.iter().map(String::as_str).collect::<Vec<_>>())
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "model_not_allowed",
            format!("model \"{}\" is not allowed for this key", request.model),
        ));
    }
    let resolved = resolved.ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!(
                "model \"{}\" does not exist; GET /v1/models lists the models this key may use",
                request.model
            ),
        )
        .code("model_not_found")
        .param("model")
    })?;
    if resolved.model.kind != ModelKind::Chat {
        return Err(ApiError::invalid_request(format!(
            "model \"{}\" is not a chat model",
            request.model
        ))
        .param("model")
        .code("wrong_model_kind"));
    }
    let adapter = gw
        .plugins
        .adapter(&resolved.source.adapter)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_GATEWAY,
                "adapter_error",
                format!("adapter `{}` is not loaded", resolved.source.adapter),
            )
        })?;
    let target = Target {
        source: resolved.source,
        model: resolved.model,
        adapter,
    };
    // The adapter receives the client's body as sent: validated, never re-encoded.
    let unified = std::str::from_utf8(&bytes)
        .map_err(|_| ApiError::invalid_request("request body is not UTF-8"))?;
    tracing::debug!(source = %resolved.source.name, upstream = resolved.model.upstream_name(), stream = request.streaming(), "dispatching");

    if request.streaming() {
        let chunks = gw
            .provider
            .stream(&target, unified)
            .await
            .map_err(|e| ApiError::from(&e))?;
        Ok(sse_response(chunks))
    } else {
        let body = gw
            .provider
            .complete(&target, unified)
            .await
            .map_err(|e| ApiError::from(&e))?;
        Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
    }
}

/// SSE to the client: one `data:` per unified chunk; `[DONE]` only after a complete stream,
/// an error event (and no `[DONE]`) after a failed one.
fn sse_response(chunks: ChunkStream) -> Response {
    let span = tracing::Span::current();
    let events = futures::stream::unfold((chunks, false), move |(mut chunks, ended)| {
        let span = span.clone();
        async move {
            if ended {
                return None;
            }
            let bytes = match chunks.next().await {
                Some(Ok(chunk)) => {
                    return Some((Ok::<_, Infallible>(sse_data(&chunk)), (chunks, false)));
                }
                Some(Err(e)) => {
                    span.in_scope(|| tracing::warn!("stream failed: {e}"));
                    sse_data(&ApiError::from(&e).body().to_string())
                }
                None => Bytes::from_static(b"data: [DONE]\n\n"),
            };
            Some((Ok(bytes), (chunks, true)))
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
