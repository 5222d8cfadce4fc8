//! The path every front door shares once it has a unified request: resolve the model to its
//! candidates, check scope and kind, apply the route's mode, let the scheduler order the
//! candidates, and try them in turn until one serves.

use std::sync::Arc;
use std::time::Instant;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use futures::future::BoxFuture;
use tracing::Instrument;

use super::Gateway;
use super::admission;
use super::auth::KeyEntry;
use super::books::{Books, LogContext};
use super::call::{Answer, Call, Reply};
use super::conversation::Conversation;
use super::error::{ApiError, ErrorType};
use super::modes;
use super::report::Report;
use super::scope::plan_candidates;
use super::ticket::Ticket;
use crate::config::{ModelKind, RouteMode};
use crate::plugin::Operation;
use crate::provider::{AttemptError, ChunkStream, Completion, StreamEnd, Tally, Target};
use crate::router::{self, Planned};
use crate::scheduler::{self, Candidate, Failure, SlotKey, Timing, UnixMs, Verdict};

/// Names the source that answered (the WebUI's playground shows it).
pub const SOURCE_HEADER: &str = "x-switchyard-source";

/// Route calls deeper than this (a vision route whose vision route is...) are refused.
const MAX_DEPTH: u8 = 3;

/// Resolves, applies the route's mode, and serves. Boxed: modes call back into it.
pub fn dispatch<'a>(gw: &'a Arc<Gateway>, key: &'a KeyEntry, call: Call<'a>) -> BoxFuture<'a, Result<Reply, ApiError>> {
    Box::pin(async move {
        if call.depth > MAX_DEPTH {
            return Err(ApiError::new(
                StatusCode::LOOP_DETECTED,
                ErrorType::InvalidRequest,
                format!(
                    "route calls nest deeper than {MAX_DEPTH} at model \"{}\": check the vision_alias and judge_alias settings for a loop",
                    call.model
                ),
            ));
        }
        let (route, candidates, mode) = plan_candidates(key, &call)?;
        let log = LogContext {
            request_id: call.request_id.to_string(),
            requested_model: call.model.to_string(),
            operation: call.kind.operation_name(),
            key: key.name.clone(),
            key_period: key.quota.map(|q| q.period),
            route: route.map(|r| r.alias.clone()),
            mode,
            fusion_id: call.fusion_id.map(str::to_string),
            stream: call.stream,
        };
        if let (Some(why), Some(RouteMode::Vision(_) | RouteMode::Fusion(_))) =
            (call.unified_error, route.map(|r| &r.mode))
        {
            return Err(ApiError::invalid_request(why.to_string()));
        }
        match route.map(|r| (r, &r.mode)) {
            Some((_, RouteMode::Vision(vision))) => {
                match modes::vision::describe_images(&Gate(gw), key, &call, vision).await? {
                    Some(unified) => {
                        serve(gw, key, &Call { unified: &unified, native: None, ..call }, candidates, log).await
                    }
                    None => serve(gw, key, &call, candidates, log).await,
                }
            }
            Some((r, RouteMode::Fusion(fusion))) => {
                modes::fusion::fuse(&Gate(gw), key, &call, r, fusion, candidates).await
            }
            _ => serve(gw, key, &call, candidates, log).await,
        }
    })
}

/// The gateway as the modes see it.
struct Gate<'g>(&'g Arc<Gateway>);

impl modes::Dispatcher for Gate<'_> {
    fn dispatch<'a>(&'a self, key: &'a KeyEntry, call: Call<'a>) -> BoxFuture<'a, Result<Reply, ApiError>> {
        dispatch(self.0, key, call)
    }

    fn serve<'a>(
        &'a self,
        key: &'a KeyEntry,
        call: &'a Call<'a>,
        candidates: Vec<Planned<'a>>,
        log: LogContext,
    ) -> BoxFuture<'a, Result<Reply, ApiError>> {
        Box::pin(serve(self.0, key, call, candidates, log))
    }
}

/// Tries `candidates` in the scheduler's order until one serves; logs every attempt.
async fn serve(
    gw: &Arc<Gateway>,
    key: &KeyEntry,
    call: &Call<'_>,
    candidates: Vec<Planned<'_>>,
    log: LogContext,
) -> Result<Reply, ApiError> {
    let operation = match call.kind {
        ModelKind::Chat => Operation::Chat,
        ModelKind::Embedding => Operation::Embedding,
        ModelKind::Image => Operation::Image,
    };
    // Every call counts against the key, the ones the gateway makes on its behalf too.
    let prompt_estimate = crate::provider::prompt_estimate(call.unified);
    let mut reservation = Some(admission::admit(gw, key, call.unified, prompt_estimate)?);
    // A request with no unified form goes only to adapters that take it as sent.
    if let (Some(why), Some(native)) = (call.unified_error, call.native) {
        let takes_it = |p: &Planned<'_>| {
            gw.plugins.adapter(&p.resolved.source.adapter).is_some_and(|a| a.native_headers(native.protocol).is_some())
        };
        if !candidates.iter().any(takes_it) {
            return Err(ApiError::invalid_request(why.to_string()));
        }
    }
    let conversation = Conversation::of(&key.name, call, gw.scheduler.policy().affinity.enabled);
    let plan = gw.scheduler.plan(candidates, call.model, conversation.query.as_deref());
    if plan.affinity_hit {
        tracing::debug!("affinity: the conversation goes back to its last source");
    }

    let mut report = Report::new(plan.skipped);
    let mut untranslatable = Vec::new();
    for (attempt, candidate) in plan.candidates.into_iter().enumerate() {
        let slot = SlotKey::of(&candidate.resolved);
        let source = candidate.resolved.source;
        let Some(adapter) = gw.plugins.adapter(&source.adapter) else { continue };
        if !source.enabled {
            report.note(&candidate, "disabled by an operator".into());
            continue;
        }
        if untranslatable.contains(adapter.name()) {
            report.note(&candidate, format!("adapter `{}` could not translate this request", adapter.name()));
            continue;
        }
        let native = call.native.and_then(|n| adapter.native_headers(n.protocol).map(|names| n.for_adapter(names)));
        if let (None, Some(why)) = (&native, call.unified_error) {
            report.note(
                &candidate,
                format!("adapter `{}` takes only translated requests, and this one cannot be: {why}", adapter.name()),
            );
            continue;
        }
        let provider = &call.runtime.provider;
        let mut ticket = match Ticket::admit(gw, provider, &candidate, &slot).await {
            Ok(ticket) => ticket,
            Err(not_now) => {
                report.note(&candidate, not_now.to_string());
                continue;
            }
        };
        let target =
            Target { source, model: candidate.resolved.model, adapter: &adapter, operation, native: native.as_ref() };
        let name = &source.name;
        tracing::debug!(source = %name, upstream = target.model.upstream_name(), probe = candidate.probe, "attempt");
        // One span per attempt (exported as an OTLP span when traces are on; debug in the log).
        let span = tracing::debug_span!(
            "attempt",
            otel.name = %format_args!("{} {}", call.kind.operation_name(), call.model),
            gen_ai.operation.name = call.kind.operation_name(),
            gen_ai.request.model = call.model,
            gen_ai.response.model = target.model.upstream_name(),
            gen_ai.provider.name = %adapter.metadata().protocol,
            switchyard.source = %name,
            switchyard.probe = candidate.probe,
            gen_ai.usage.input_tokens = tracing::field::Empty,
            gen_ai.usage.output_tokens = tracing::field::Empty,
            gen_ai.usage.cache_read.input_tokens = tracing::field::Empty,
            gen_ai.response.finish_reasons = tracing::field::Empty,
            error.type = tracing::field::Empty,
            switchyard.failover_reason = tracing::field::Empty,
        );
        let started = Instant::now();
        let outcome = async {
            if call.stream {
                // Fail over until the first chunk is in hand: before it, the client has seen nothing.
                match provider.stream(&target, call.unified).await {
                    Ok(chunks) => {
                        let head = started.elapsed();
                        chunks.first_chunk().await.map(|c| (Done::Stream(c.holding(ticket.take_permit())), head))
                    }
                    Err(e) => Err(e),
                }
            } else {
                provider.complete(&target, call.unified).await.map(|(body, head)| (Done::Whole(body), head))
            }
        }
        .instrument(span.clone())
        .await;
        let elapsed = started.elapsed();
        match outcome {
            Ok((answer, head)) => {
                let timing = Timing {
                    connect_ms: head.as_secs_f64() * 1e3,
                    first_byte_ms: (elapsed - head).as_secs_f64() * 1e3,
                };
                ticket.succeeded(timing);
                let ms = elapsed.as_millis() as u64;
                tracing::debug!(source = %name, ms, probe = candidate.probe, after_failures = report.failures, "head answered");
                gw.metrics.failed_over(call.model, report.failures);
                let books = Books::open(
                    Arc::clone(gw),
                    slot.clone(),
                    router::quota_periods(&call.runtime.config, &slot),
                    conversation.last.map(|last| (key.name.clone(), call.client_ip, last)),
                    log,
                    started,
                    elapsed,
                    plan.affinity_hit && attempt == 0,
                    prompt_estimate,
                    reservation.take().expect("one answer per request"),
                    span,
                );
                let mut headers = HeaderMap::new();
                if let Ok(value) = HeaderValue::from_str(name.as_str()) {
                    headers.insert(SOURCE_HEADER, value);
                }
                let answer = match answer {
                    Done::Whole(completion) => {
                        // Booked (journaled) before the answer leaves.
                        books.close(StreamEnd::Complete(Tally::of_response(completion.unified())));
                        match completion {
                            Completion::Unified(body) => Answer::Complete(body),
                            Completion::Native { body, .. } => Answer::Native(body),
                        }
                    }
                    Done::Stream(chunks) => Answer::Stream(chunks.on_end(Box::new(move |end| books.close(end)))),
                };
                return Ok(Reply { answer, headers });
            }
            // Out of the gateway's own instance capacity: busy, like a full source; nothing cools.
            Err(AttemptError::Sandbox(e)) if e.cause.is_capacity() => {
                report.note(&candidate, e.to_string());
            }
            Err(e) => {
                span.record("error.type", ApiError::from(&e).code.as_deref().unwrap_or("error"));
                span.record("switchyard.failover_reason", tracing::field::display(&e));
                log.failed(gw, &slot, started, &e);
                match scheduler::verdict(&e) {
                    // The request itself is wrong: no other source would take it either.
                    Verdict::Client => {
                        return Err(ApiError::from(&e));
                    }
                    // This adapter cannot translate this request: the other candidates it
                    // serves would fail alike (and cost as much); nothing cools.
                    Verdict::OtherAdapter => {
                        tracing::warn!(adapter = %adapter.name(), "translation failed, trying other adapters: {e}");
                        untranslatable.push(adapter.name().clone());
                        report.failed(&candidate, e);
                    }
                    Verdict::Cool(failure) => {
                        let failure = align_quota_failure(failure, &candidate, gw.scheduler.now());
                        let ms = elapsed.as_millis() as u64;
                        tracing::warn!(source = %name, ms, "attempt failed, trying the next candidate: {e}");
                        ticket.failed(failure);
                        report.failed(&candidate, e);
                    }
                }
            }
        }
    }
    let error = report.into_error(call.model, gw.scheduler.now());
    if error.code.as_deref() == Some(super::report::ALL_FAILED) {
        gw.notices.push(gw.scheduler.now(), call.model, &error.message);
    }
    Err(error)
}

/// What an attempt that served brought back, before its books are opened.
enum Done {
    Whole(Completion),
    Stream(ChunkStream),
}

/// A quota error from an upstream rests the slot until its quota window ends (when it has one).
fn align_quota_failure(failure: Failure, candidate: &Candidate<'_>, now: UnixMs) -> Failure {
    match (failure, candidate.quota.and_then(|q| q.period.window(now).1)) {
        (Failure::QuotaExhausted { .. }, Some(end)) => Failure::QuotaExhausted { window_ends_in: Some(end.since(now)) },
        _ => failure,
    }
}
