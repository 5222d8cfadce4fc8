//! `POST /v1/messages`: the Anthropic front door. Anthropic clients reach any source: an
//! adapter that forwards Anthropic natively gets the request as sent and its answer goes back
//! untouched; for the others the request is translated to the unified form and the answer
//! (JSON or SSE) back. Every error is in Anthropic's format.

mod encode;
mod request;

pub use encode::error_response;

use std::convert::Infallible;

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::books::{LogContext, LogMode};
use super::call::{Answer, Call, CallBody, Native, Protocol};
use super::dispatch::dispatch;
use super::envelope::{FrontDoor, RequestId};
use super::error::{ApiError, ErrorType};
use super::request::{Incoming, parse_json};
use super::ticket::Ticket;
use crate::config::ModelKind;
use crate::plugin::Operation;
use crate::provider::{ChunkStream, Completion, Target};
use crate::scheduler::SlotKey;

/// Says an answer is the gateway's estimate, not the upstream's count.
const ESTIMATE_HEADER: &str = "x-switchyard-estimate";

/// The Anthropic endpoint: `request-id`, Anthropic error JSON.
pub const ANTHROPIC: &FrontDoor =
    &FrontDoor { name: "anthropic", id_header: "request-id", render_error: encode::error_response };

pub async fn messages(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let (runtime, key, bytes) = incoming.arrive().await?;
    let (gw, client_ip) = (&incoming.gw, incoming.client_ip);
    // The parsed request (larger than its text) is let go before the upstream is waited on:
    // a request in flight keeps only the text and its unified form.
    let (model, stream, unified, unified_error) = {
        let request = parsed(&bytes)?;
        let (unified, unified_error) = translated(&request, &bytes);
        (request.model.into_owned(), request.stream, unified, unified_error)
    };
    let native = Native { protocol: Protocol::AnthropicMessages, body: &bytes, headers: &incoming.headers };
    let call = Call {
        model: &model,
        body: CallBody::translated(&unified, unified_error.as_deref()),
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
        native: Some(native),
    };
    let reply = dispatch(gw, &key, call).await?;
    let mut response = match reply.answer {
        // An Anthropic upstream's own answer, untouched (signatures, cache usage, new fields).
        Answer::Native { body, .. } => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Answer::Complete(body) => {
            let unified: switchyard_unified::Reply = serde_json::from_str(&body).map_err(|e| {
                ApiError::new(
                    axum::http::StatusCode::BAD_GATEWAY,
                    ErrorType::Api,
                    format!("adapter returned invalid JSON: {e}"),
                )
            })?;
            axum::Json(encode::message(&unified)).into_response()
        }
        Answer::Stream(chunks) => sse_response(chunks, crate::provider::prompt_estimate(&unified)),
    };
    response.headers_mut().extend(reply.headers);
    Ok(response)
}

/// The body parsed once into the fields the gateway reads, each type-checked.
fn parsed(bytes: &[u8]) -> Result<request::MessagesRequest<'_>, ApiError> {
    let request: request::MessagesRequest = parse_json(bytes)?;
    tracing::Span::current().record("model", &*request.model);
    if request.messages.is_empty() {
        return Err(ApiError::invalid_request("messages: at least one message is required").param("messages"));
    }
    Ok(request)
}

/// The unified form of a Messages request; when it has none (a block the gateway cannot
/// translate, such as a PDF `document`), the client's body and why: it may still go, as sent,
/// to an upstream that speaks Anthropic.
fn translated(request: &request::MessagesRequest<'_>, bytes: &[u8]) -> (String, Option<String>) {
    match request::to_unified(request) {
        Ok(unified) => (unified.to_string(), None),
        Err(e) => (String::from_utf8_lossy(bytes).into_owned(), Some(e.message.to_string())),
    }
}

/// `POST /v1/messages/count_tokens`: counted by the first Anthropic upstream serving the model
/// (the request forwarded as sent); where none does, or it fails, the gateway's own estimate
/// (the one that prices answers without usage), marked `x-switchyard-estimate: true`. The same
/// checks and errors as `/v1/messages`, and the same gates as any attempt: a spent key is
/// refused, cooling sources are skipped, a source's rpm and `max_concurrent` hold; each
/// upstream call is logged (mode `count_tokens`, 0 tokens) and counted in the metrics.
pub async fn count_tokens(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let (runtime, key, bytes) = incoming.arrive().await?;
    let gw = &incoming.gw;
    let request = parsed(&bytes)?;
    let (unified, unified_error) = translated(&request, &bytes);
    let call = Call {
        model: &request.model,
        body: CallBody::Unified(&unified),
        stream: false,
        kind: ModelKind::Chat,
        client_ip: incoming.client_ip,
        request_id: &request_id,
        runtime: &runtime,
        depth: 0,
        fusion_id: None,
        cost: &Default::default(),
        max_price: crate::server::bill::MaxPrice::from_headers(&incoming.headers)?,
        policed: None,
        native: None,
    };
    let (route, candidates, mode) = super::scope::plan_candidates(&key, &call)?;
    let label = super::scope::metric_label(&call, mode, &candidates).to_string();
    // Counting generates nothing, but it is an upstream call on the operator's account.
    let _admitted = super::admission::admit_tokens(gw, &key, 0)?;
    let log = LogContext {
        operation: COUNT_TOKENS_OPERATION,
        ..LogContext::of(&call, &key, route.map(|r| r.alias.clone()), LogMode::CountTokens, &label)
    };
    let native = Native { protocol: Protocol::AnthropicCountTokens, body: &bytes, headers: &incoming.headers };
    let plan = gw.scheduler.plan(candidates, call.model, None);
    // Under policies the prompt is not sent anywhere unchecked: the gateway's estimate answers.
    let policed = !runtime.policies.is_empty();
    // A cooling source is not asked: a count proves nothing about its health either way.
    for candidate in plan.candidates.iter().filter(|c| !policed && !c.probe && c.resolved.source.enabled) {
        let source = candidate.resolved.source;
        let Some(adapter) = gw.plugins.adapter(&source.adapter) else { continue };
        let Some(names) = adapter.native_headers(Protocol::AnthropicCountTokens.as_str()) else { continue };
        let slot = SlotKey::of(&candidate.resolved);
        let _ticket = match Ticket::admit(gw, &runtime.provider, candidate, &slot).await {
            Ok(ticket) => ticket,
            Err(not_now) => {
                tracing::debug!(source = %source.name, "count_tokens: {not_now}");
                continue;
            }
        };
        let client = native.for_adapter(names, source);
        let target = Target {
            source,
            model: candidate.resolved.model,
            adapter: &adapter,
            operation: Operation::Chat,
            native: Some(&client),
        };
        let started = std::time::Instant::now();
        match runtime.provider.complete(&target, "").await {
            Ok((Completion::Native { body, .. }, _)) => {
                let mut row = log.row(gw, &slot, started);
                (row.status, row.tokens_in, row.tokens_out) = (Some(200), Some(0), Some(0));
                gw.log(row, &log);
                return Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response());
            }
            Ok(_) => {}
            Err(e) => {
                log.failed(gw, &slot, started, &e);
                tracing::warn!(source = %source.name, "count_tokens upstream failed, estimating: {e}");
                break;
            }
        }
    }
    if let Some(why) = unified_error {
        return Err(ApiError::invalid_request(why));
    }
    let tokens = crate::provider::prompt_estimate(&unified);
    Ok(([(ESTIMATE_HEADER, "true")], axum::Json(serde_json::json!({"input_tokens": tokens}))).into_response())
}

/// The operation count_tokens attempts are logged and measured under.
const COUNT_TOKENS_OPERATION: &str = "count_tokens";

/// Anthropic SSE: events as unified chunks arrive; `message_stop` only after a complete stream,
/// an `error` event after a failed one.
fn sse_response(chunks: ChunkStream, input_estimate: u64) -> Response {
    let span = tracing::Span::current();
    let events = futures::stream::unfold(
        (chunks, encode::StreamEncoder::estimating(input_estimate), false),
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
                        match serde_json::from_str(&chunk) {
                            Ok(chunk) => encoder.chunk(chunk, &mut out),
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

#[cfg(test)]
mod tests;
