//! `POST /v1/responses`: the OpenAI Responses front door (Codex, the Responses SDKs). An
//! upstream that speaks Responses gets the request as sent (its adapter's native session);
//! any other gets it translated to the unified form, and the answer comes back as a
//! `response` object or its event stream. `previous_response_id` continues a stored turn.

mod encode;
mod request;
mod store;

use std::convert::Infallible;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Map, Value};

use super::call::{Answer, Call, CallBody, Native, Protocol};
use super::dispatch::dispatch;
use super::envelope::RequestId;
use super::error::{ApiError, ErrorType};
use super::request::{Incoming, check, parse_json};
use crate::config::ModelKind;
use crate::provider::ChunkStream;
pub use store::StoredBudget;
use store::Turn;

pub async fn responses(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let (runtime, key, bytes) = incoming.arrive().await?;
    let gw = incoming.gw.clone();
    let mut raw: Map<String, Value> = parse_json(&bytes)?;
    // The body read once, typed (borrowing from it); translated now unless a stored history
    // is to be replayed into it first.
    let (checked, input, mut translated) = {
        let request: request::ResponsesRequest = check(&raw)?;
        let translated = request.previous_response_id.is_none().then(|| translate(&request));
        (request::Kept::from(&request), request::input_items(&raw), translated)
    };
    tracing::Span::current().record("model", &*checked.model);
    // A continued conversation is replayed whole: the upstream never needs to have kept it.
    let mut forwarded = bytes.clone();
    // Stored unless the client says `store: false`; a turn that cannot be stored (too large,
    // or the key's bytes for today are spent) is refused when the client asked for it
    // explicitly, and otherwise served unstored, the answer saying why.
    let mut store = checked.store.unwrap_or(true);
    let mut not_stored = None;
    if store && let Some(refused) = store::refusal(&gw, &key.id, bytes.len()).await {
        if checked.store == Some(true) {
            return Err(refused);
        }
        tracing::info!("responses: this turn is not stored: {}", refused.message);
        (store, not_stored) = (false, Some(refused.code.unwrap_or_default()));
    }
    if let Some(previous) = &checked.previous_response_id {
        let mut items = store::history(&gw, &key.id, previous, gw.settings.body_limit_bytes).await?;
        items.extend(input.iter().cloned());
        raw.insert("input".into(), Value::Array(items));
        raw.remove("previous_response_id");
        forwarded = Bytes::from(serde_json::to_vec(&raw).expect("a JSON map serialises"));
        translated = Some(check::<request::ResponsesRequest>(&raw).map_or_else(|e| Err(e.message), |r| translate(&r)));
    }
    // What the unified form cannot carry (`input_file`, say) may still go to a Responses upstream.
    let (unified, dropped, namespaces, unified_error) = match translated.expect("translated above") {
        Ok((unified, dropped, namespaces)) => (unified, dropped, namespaces, None),
        Err(why) => (Value::Null, request::Dropped::default(), request::Namespaces::default(), Some(why)),
    };

    let unified = match unified {
        Value::Null => String::from_utf8_lossy(&forwarded).into_owned(),
        unified => unified.to_string(),
    };
    let mut turn = Turn {
        gw: gw.clone(),
        owner: key.id.clone(),
        key: key.name.to_string(),
        previous: checked.previous_response_id.clone(),
        input,
        store,
        translated: true,
    };
    let call = Call {
        model: &checked.model,
        body: CallBody::translated(&unified, unified_error.as_deref()),
        stream: checked.stream,
        kind: ModelKind::Chat,
        client_ip: incoming.client_ip,
        request_id: &request_id,
        runtime: &runtime,
        depth: 0,
        fusion_id: None,
        cost: &Default::default(),
        max_price: crate::server::bill::MaxPrice::from_headers(&incoming.headers)?,
        policed: None,
        native: Some(Native { protocol: Protocol::OpenAiResponses, body: &forwarded, headers: &incoming.headers }),
    };
    let echo = encode::Echo {
        model: checked.model.clone(),
        id: format!("resp_{request_id}"),
        created_at: gw.scheduler.now().0 / 1000,
        previous_response_id: checked.previous_response_id.clone(),
        store: turn.store,
        namespaces,
        request: raw,
    };
    let reply = dispatch(&gw, &key, call).await?;
    // Only a translated answer lost them; a Responses upstream got the request whole.
    let native =
        matches!(&reply.answer, Answer::Native { .. }) || matches!(&reply.answer, Answer::Stream(c) if c.is_native());
    turn.translated = !native;
    if !native && (!dropped.tools.is_empty() || !dropped.items.is_empty()) {
        tracing::warn!(tools = ?dropped.tools, items = ?dropped.items, "responses: built-in tools and input items a chat upstream cannot take were left out");
    }
    let mut response = match reply.answer {
        Answer::Complete(body) => {
            let unified: switchyard_unified::Reply = serde_json::from_str(&body).map_err(|e| {
                ApiError::new(StatusCode::BAD_GATEWAY, ErrorType::Api, format!("adapter returned invalid JSON: {e}"))
            })?;
            let object = encode::response_object(&echo, &unified);
            turn.save(&object);
            axum::Json(object).into_response()
        }
        // A Responses upstream's own answer, untouched (encrypted reasoning, built-in tool calls).
        Answer::Native { body, .. } => {
            if let Ok(object) = serde_json::from_slice::<Value>(&body) {
                turn.save(&object);
            }
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Answer::Stream(chunks) if chunks.is_native() => native_sse(chunks, echo, turn),
        Answer::Stream(chunks) => sse_response(chunks, echo, turn),
    };
    response.headers_mut().extend(reply.headers);
    if let Some(why) = not_stored.and_then(|code| axum::http::HeaderValue::from_str(&code).ok()) {
        response.headers_mut().insert(NOT_STORED_HEADER, why);
    }
    Ok(response)
}

/// The unified form of a checked request, what it left out and its namespaced functions; or
/// why it has none.
fn translate(
    request: &request::ResponsesRequest<'_>,
) -> Result<(Value, request::Dropped, request::Namespaces), String> {
    let (unified, dropped) = request::to_unified(request).map_err(|e| e.message)?;
    Ok((unified, dropped, request::Namespaces::of(request)))
}

/// Says a turn asked to be stored (by default) was not, and why (the refusal's code).
const NOT_STORED_HEADER: &str = "x-switchyard-not-stored";

/// `GET /v1/responses/{id}`: a stored response, to the key that made it.
pub async fn retrieve(Path(id): Path<String>, mut incoming: Incoming) -> Result<Response, ApiError> {
    let (_, key, _) = incoming.arrive().await?;
    let stored = store::owned(&incoming.gw, &key.id, &id).await?;
    Ok(([(header::CONTENT_TYPE, "application/json")], stored.response).into_response())
}

/// `DELETE /v1/responses/{id}`: forgets a stored response (the key that made it only).
pub async fn delete(Path(id): Path<String>, mut incoming: Incoming) -> Result<Response, ApiError> {
    let (_, key, _) = incoming.arrive().await?;
    store::owned(&incoming.gw, &key.id, &id).await?;
    incoming.gw.state.delete_response(&key.id, &id);
    // Gone once this answers: a read right after must not find it.
    let state = incoming.gw.state.clone();
    let _ = tokio::task::spawn_blocking(move || state.flush()).await;
    Ok(axum::Json(serde_json::json!({"id": id, "object": "response", "deleted": true})).into_response())
}

/// Responses SSE: `response.created` first, events as unified chunks arrive, and exactly one
/// terminal event — `response.completed`/`.incomplete` after a complete stream,
/// `response.failed` after a cut, timed-out or refused one.
fn sse_response(chunks: ChunkStream, echo: encode::Echo, turn: Turn) -> Response {
    let span = tracing::Span::current();
    let mut encoder = encode::StreamEncoder::new(echo);
    let mut head = String::new();
    encoder.start(&mut head);
    let first = futures::stream::once(async move { Ok::<_, Infallible>(Bytes::from(head)) });
    let events = futures::stream::unfold((chunks, encoder, Some(turn)), move |(mut chunks, mut encoder, mut turn)| {
        let span = span.clone();
        async move {
            let keep = turn.take()?;
            let mut out = String::new();
            let next = match chunks.next().await {
                Some(Ok(chunk)) => {
                    match serde_json::from_str(&chunk) {
                        Ok(chunk) => encoder.chunk(chunk, &mut out),
                        Err(e) => span.in_scope(|| tracing::warn!("skipping a unified chunk that is not JSON: {e}")),
                    }
                    Some(keep)
                }
                Some(Err(e)) => {
                    span.in_scope(|| tracing::warn!("stream failed: {e}"));
                    let error = ApiError::from(&e);
                    encoder.fail(error.code.as_deref().unwrap_or(error.kind.as_str()), &error.message, &mut out);
                    None
                }
                None => {
                    keep.save(&encoder.finish(&mut out));
                    None
                }
            };
            Some((Ok::<_, Infallible>(Bytes::from(out)), (chunks, encoder, next)))
        }
    });
    event_stream(first.chain(events))
}

/// A Responses upstream's own events, passed on as they come; stored when it completes. When
/// the upstream fails, is cut or times out, the one terminal event is ours: `response.failed`,
/// numbered after the last event passed on.
fn native_sse(chunks: ChunkStream, echo: encode::Echo, turn: Turn) -> Response {
    let span = tracing::Span::current();
    let events = futures::stream::unfold(
        (chunks, encode::NativeTracker::new(echo), Some(turn), false),
        move |(mut chunks, mut tracker, mut turn, ended)| {
            let span = span.clone();
            async move {
                if ended {
                    return None;
                }
                // Polled to its end even after the completion: the books close there.
                match chunks.next().await {
                    Some(Ok(frame)) => {
                        if let Some(response) = tracker.observe(&frame)
                            && let Some(turn) = turn.take()
                        {
                            turn.save(&response);
                        }
                        Some((Ok::<_, Infallible>(Bytes::from(frame)), (chunks, tracker, turn, false)))
                    }
                    Some(Err(e)) => {
                        span.in_scope(|| tracing::warn!("stream failed: {e}"));
                        let error = ApiError::from(&e);
                        let code = error.code.as_deref().unwrap_or(error.kind.as_str());
                        let failed = tracker.fail(code, &error.message);
                        Some((Ok(Bytes::from(failed)), (chunks, tracker, turn, true)))
                    }
                    None => None,
                }
            }
        },
    );
    event_stream(events)
}

fn event_stream(events: impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .expect("static headers are valid")
}

#[cfg(test)]
mod tests;
