//! `POST /v1/chat/completions`: authenticate, validate, dispatch, and answer as JSON or as
//! SSE ending in `data: [DONE]`.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::value::RawValue;

use super::call::{Answer, Call, CallBody, Native, Protocol};
use super::dispatch::dispatch;
use super::envelope::RequestId;
use super::error::ApiError;
use super::request::{ChatRequest, Incoming, parse_json};
use crate::config::ModelKind;
use crate::provider::ChunkStream;

pub async fn chat_completions(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let started = std::time::Instant::now();
    let (runtime, key, bytes) = incoming.arrive().await?;
    let (gw, client_ip) = (&incoming.gw, incoming.client_ip);
    // The parsed request (the prompt's text copied into it) is let go before the upstream is
    // waited on: a request in flight keeps only the body as sent.
    let (model, stream, hide_usage, has_stream_options) = {
        let request: ChatRequest = parse_json(&bytes)?;
        tracing::Span::current().record("model", &*request.model);
        if request.messages.is_empty() {
            return Err(ApiError::invalid_request("`messages` must contain at least one message").param("messages"));
        }
        let (stream, wants_usage) = (request.streaming(), request.wants_stream_usage());
        (request.model, stream, stream && !wants_usage, request.stream_options.is_some())
    };
    // An OpenAI-compatible adapter forwards the body natively (with the client's headers it
    // names); others get it as the unified form, as sent (validated, not re-encoded), except
    // that a stream always asks for usage: the books need it whatever the client wants to see.
    let sent = std::str::from_utf8(&bytes).map_err(|_| ApiError::invalid_request("request body is not UTF-8"))?;
    let unified = if hide_usage { asking_for_usage(sent, has_stream_options)? } else { sent.into() };
    let call = Call {
        model: &model,
        body: CallBody::Unified(&unified),
        stream,
        kind: ModelKind::Chat,
        client_ip,
        request_id: &request_id,
        runtime: &runtime,
        depth: 0,
        fusion_id: None,
        cost: &Default::default(),
        max_price: crate::server::bill::MaxPrice::from_headers(&incoming.headers)?,
        policed: None,
        native: Some(Native { protocol: Protocol::OpenAiChat, body: &bytes, headers: &incoming.headers }),
    };
    let reply = dispatch(gw, &key, call).await?;
    let mut response = match reply.answer {
        Answer::Complete(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Answer::Native { body, .. } => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Answer::Stream(chunks) => sse_response(chunks.hiding_usage(hide_usage), started),
    };
    response.headers_mut().extend(reply.headers);
    Ok(response)
}

/// SSE to the client: one `data:` per unified chunk (a native session's frames as they are);
/// `[DONE]` only after a complete stream (from a native session, the upstream's own), an error
/// event (and no `[DONE]`) after a failed one.
fn sse_response(chunks: ChunkStream, started: std::time::Instant) -> Response {
    let span = tracing::Span::current();
    let native = chunks.is_native();
    let events = futures::stream::unfold((chunks, 0usize, false), move |(mut chunks, sent, ended)| {
        let span = span.clone();
        async move {
            if ended {
                return None;
            }
            let ms = started.elapsed().as_millis() as u64;
            let bytes = match chunks.next().await {
                Some(Ok(frame)) if native => {
                    return Some((Ok::<_, Infallible>(Bytes::from(frame)), (chunks, sent + 1, false)));
                }
                Some(Ok(chunk)) => {
                    return Some((Ok::<_, Infallible>(sse_data(&chunk)), (chunks, sent + 1, false)));
                }
                Some(Err(e)) => {
                    span.in_scope(|| tracing::warn!(chunks = sent, ms, "stream failed: {e}"));
                    sse_data(&ApiError::from(&e).body().to_string())
                }
                None if native => {
                    span.in_scope(|| tracing::debug!(chunks = sent, ms, "stream completed"));
                    return None;
                }
                None => {
                    span.in_scope(|| tracing::debug!(chunks = sent, ms, "stream completed"));
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

/// `body` (a validated JSON object) with `stream_options.include_usage` set. The other members
/// pass as the client wrote them (raw, never re-parsed into values): without a
/// `stream_options` of the client's the member is appended as text; with one, the object's
/// members are rewritten around the new `stream_options` (the client's other options kept).
fn asking_for_usage(body: &str, has_stream_options: bool) -> Result<Cow<'_, str>, ApiError> {
    if !has_stream_options {
        let close = body.rfind('}').ok_or_else(|| ApiError::invalid_request("request body must be a JSON object"))?;
        let empty = body[..close].trim_end().ends_with('{');
        let member = r#""stream_options":{"include_usage":true}"#;
        return Ok(format!("{}{}{member}}}", &body[..close], if empty { "" } else { "," }).into());
    }
    let invalid = |e: serde_json::Error| ApiError::invalid_request(format!("request body is not valid JSON: {e}"));
    let members: BTreeMap<String, &RawValue> = serde_json::from_str(body).map_err(invalid)?;
    let mut options: serde_json::Map<String, serde_json::Value> =
        members.get("stream_options").and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default();
    options.insert("include_usage".into(), true.into());
    let mut out = String::with_capacity(body.len() + 48);
    out.push('{');
    for (name, value) in members.iter().filter(|(name, _)| *name != "stream_options") {
        out.push_str(&serde_json::Value::from(name.as_str()).to_string());
        out.push(':');
        out.push_str(value.get());
        out.push(',');
    }
    out.push_str(&format!(r#""stream_options":{}}}"#, serde_json::Value::Object(options)));
    Ok(out.into())
}

fn sse_data(json: &str) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_always_asks_the_upstream_for_usage() {
        let asked = |body: &str, has: bool| -> serde_json::Value {
            serde_json::from_str(&asking_for_usage(body, has).unwrap()).unwrap()
        };
        let v = asked("{\"model\":\"m\",\"stream\":true}  \n", false);
        assert_eq!((v["model"].as_str(), v["stream_options"]["include_usage"].as_bool()), (Some("m"), Some(true)));
        let v = asked(r#"{"stream_options":{"include_usage":false,"x":1},"stream":true}"#, true);
        assert_eq!(v["stream_options"], serde_json::json!({"include_usage": true, "x": 1}));
        assert_eq!(asked("{}", false)["stream_options"]["include_usage"], true);
        assert_eq!(
            asked(r#"{"stream_options":[true]}"#, true)["stream_options"],
            serde_json::json!({"include_usage": true})
        );
        // Members pass raw: numbers out of f64's range and deep nesting are the upstream's to judge.
        let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
        let body = format!(r#"{{"x":1e400,"d":{deep},"stream_options":{{}}}}"#);
        let out = asking_for_usage(&body, true).unwrap();
        assert!(out.contains(r#""x":1e400"#) && out.contains(&deep), "{out}");
        assert!(out.ends_with(r#""stream_options":{"include_usage":true}}"#), "{out}");
    }
}
