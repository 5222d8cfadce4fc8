//! One attempt at one candidate, as the dispatch loop runs it: its span, the upstream call
//! (for a stream, up to the first chunk), and for an answer, the reply with its books.

use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue};

use super::Gateway;
use super::books::Books;
use super::call::{Answer, Call, Protocol, Reply};
use super::error::ApiError;
use super::ticket::Ticket;
use crate::config::{AdapterName, ModelKind, SourceConfig, SourceName};
use crate::plugin::{Adapter, ClientRequest, Operation};
use crate::provider::{AttemptError, ChunkStream, Completion, Provider, StreamEnd, Tally, Target};
use crate::router::Planned;

/// Names the source that answered (the WebUI's playground shows it).
pub const SOURCE_HEADER: &str = "x-switchyard-source";

/// What an attempt that served brought back, before its books are opened.
pub enum Done {
    Whole(Completion),
    Stream(ChunkStream),
}

/// The adapter operation serving an endpoint's kind of model.
pub fn operation(kind: ModelKind) -> Operation {
    match kind {
        ModelKind::Chat => Operation::Chat,
        ModelKind::Embedding => Operation::Embedding,
        ModelKind::Image => Operation::Image,
    }
}

/// A request with no unified form goes only to adapters that take it as sent: refused when
/// none of the candidates' adapters does.
pub fn some_adapter_takes(gw: &Gateway, call: &Call<'_>, candidates: &[Planned<'_>]) -> Result<(), ApiError> {
    let (Some(why), Some(native)) = (call.body.untranslatable(), call.native) else { return Ok(()) };
    let takes_it = |p: &Planned<'_>| {
        gw.plugins
            .adapter(&p.resolved.source.adapter)
            .is_some_and(|a| a.native_headers(native.protocol.as_str()).is_some())
    };
    if candidates.iter().any(takes_it) { Ok(()) } else { Err(ApiError::invalid_request(why.to_string())) }
}

/// Whether `adapter` at `source` may take this call, and if so the client's request as that
/// adapter forwards it (`None`: translated); else why the candidate is passed over.
pub fn fit(
    call: &Call<'_>,
    source: &SourceConfig,
    adapter: &Adapter,
    untranslatable: &[AdapterName],
) -> Result<Option<ClientRequest>, String> {
    if !source.enabled {
        return Err("disabled by an operator".into());
    }
    if untranslatable.contains(adapter.name()) {
        return Err(format!("adapter `{}` could not translate this request", adapter.name()));
    }
    let native =
        call.native.and_then(|n| adapter.native_headers(n.protocol.as_str()).map(|names| n.for_adapter(names, source)));
    match (native, call.body.untranslatable()) {
        (None, Some(why)) => {
            Err(format!("adapter `{}` takes only translated requests, and this one cannot be: {why}", adapter.name()))
        }
        (native, _) => Ok(native),
    }
}

/// One span per attempt (exported as an OTLP span when traces are on; debug in the log), with
/// the GenAI attributes the books fill in when the answer ends.
pub fn span(call: &Call<'_>, target: &Target<'_>, probe: bool) -> tracing::Span {
    tracing::debug_span!(
        "attempt",
        otel.name = %format_args!("{} {}", call.kind.operation_name(), call.model),
        gen_ai.operation.name = call.kind.operation_name(),
        gen_ai.request.model = call.model,
        gen_ai.response.model = target.model.upstream_name(),
        gen_ai.provider.name = %target.adapter.metadata().protocol,
        switchyard.source = %target.source.name,
        switchyard.probe = probe,
        gen_ai.usage.input_tokens = tracing::field::Empty,
        gen_ai.usage.output_tokens = tracing::field::Empty,
        gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
        switchyard.cost_usd = tracing::field::Empty,
        gen_ai.response.finish_reasons = tracing::field::Empty,
        error.type = tracing::field::Empty,
        switchyard.failover_reason = tracing::field::Empty,
    )
}

/// Calls the upstream: a whole answer, or a stream up to its first chunk (before it the client
/// has seen nothing, so a failure can still fail over). Also says how long the head took.
pub async fn call_upstream(
    provider: &Provider,
    target: &Target<'_>,
    call: &Call<'_>,
    ticket: &mut Ticket<'_>,
) -> Result<(Done, Duration), AttemptError> {
    let started = Instant::now();
    if call.stream {
        let chunks = provider.stream(target, call.body.text()).await?;
        let head = started.elapsed();
        let first = chunks.first_chunk().await?;
        Ok((Done::Stream(first.holding(ticket.take_permit())), head))
    } else if streams_whole_answer(call, target)
        && let Some(unified) = asking_for_a_stream(call.body.text().as_bytes())
    {
        // Sent as a stream, answered whole: an upstream gone silent is given up on at the
        // stream's first-byte or idle timeout instead of the whole request's.
        let native = target.native.map(|n| ClientRequest {
            body: asking_for_a_stream(&n.body).map_or_else(|| n.body.clone(), String::into_bytes),
            ..n.clone()
        });
        let streamed = Target { native: native.as_ref(), ..*target };
        provider.complete_by_stream(&streamed, &unified).await.map(|(body, head)| (Done::Whole(body), head))
    } else {
        provider.complete(target, call.body.text()).await.map(|(body, head)| (Done::Whole(body), head))
    }
}

/// Whether a whole answer is asked of the upstream as a stream: chat (what streams), when the
/// source lets it (`stream_whole_answers`), through a built-in adapter, in the unified form or an OpenAI-compatible
/// pass-through, whose chunks are the unified shape (an Anthropic or Responses pass-through
/// answers whole in its own protocol, as sent).
fn streams_whole_answer(call: &Call<'_>, target: &Target<'_>) -> bool {
    call.kind == ModelKind::Chat
        && target.source.stream_whole_answers
        // A built-in's stream reading is the gateway's own; an author's adapter (a Lua script
        // above all) may treat a whole answer in ways its stream path does not.
        && matches!(target.adapter.origin(), crate::plugin::AdapterOrigin::Builtin)
        // Without usage on its streams the books would have to estimate what the JSON says.
        && target.source.settings.get("stream_usage").map(String::as_str) != Some("false")
        && target.native.is_none_or(|n| n.protocol == Protocol::OpenAiChat.as_str())
}

/// A chat request (JSON) asking for a stream with its usage; `None` when it is not a JSON
/// object, or asks for what a stream carries otherwise than a whole answer (log
/// probabilities, audio, legacy `functions`): such a request is sent as asked.
fn asking_for_a_stream(body: &[u8]) -> Option<String> {
    let mut request: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body).ok()?;
    let asks = |field: &str| request.get(field).is_some_and(|v| !v.is_null() && *v != serde_json::Value::Bool(false));
    let audio = request.get("modalities").and_then(|m| m.as_array()).is_some_and(|m| m.iter().any(|m| m == "audio"));
    if audio || ["logprobs", "top_logprobs", "audio", "functions", "function_call"].into_iter().any(asks) {
        return None;
    }
    request.insert("stream".into(), serde_json::Value::Bool(true));
    request.insert("stream_options".into(), serde_json::json!({"include_usage": true}));
    Some(serde_json::Value::Object(request).to_string())
}

/// The client's reply for an answer from `source`: a whole answer is booked (journaled) before
/// it leaves; a stream's books close when it ends.
pub fn reply(source: &SourceName, kind: ModelKind, done: Done, books: Books) -> Reply {
    let mut headers = HeaderMap::new();
    if let Ok(value) = HeaderValue::from_str(source.as_str()) {
        headers.insert(SOURCE_HEADER, value);
    }
    let answer = match done {
        Done::Whole(completion) => {
            let mut tally = Tally::of_response(completion.unified());
            if kind == ModelKind::Image {
                tally.read_images(completion.unified());
            }
            books.close(StreamEnd::Complete(tally));
            match completion {
                Completion::Unified(body) => Answer::Complete(body),
                Completion::Native { body, unified } => Answer::Native { body, unified },
            }
        }
        Done::Stream(chunks) => Answer::Stream(chunks.on_end(Box::new(move |end| books.close(end)))),
    };
    Reply { answer, headers }
}
