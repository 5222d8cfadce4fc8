//! The path every front door shares once it has a unified request: resolve the model to its
//! candidates, check scope and kind, apply the route's mode, let the scheduler order the
//! candidates, and try them in turn until one serves.

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use tracing::Instrument;

use super::Gateway;
use super::admission;
use super::attempt;
use super::auth::KeyEntry;
use super::bill;
use super::books::{Books, LogContext};
use super::cache;
use super::call::{Call, CallBody, Reply};
use super::conversation::Conversation;
use super::error::ApiError;
use super::modes;
use super::policy;
use super::policy::{Chain, Origin, Policed};
use super::report::Report;
use super::scope::plan_candidates;
use super::ticket::Ticket;
use crate::config::{ModelKind, RouteMode};
use crate::domain::{Failure, Verdict};
use crate::plugin::Outcome;
use crate::provider::{AttemptError, Completion, Target};
use crate::router::{self, Planned};
use crate::scheduler::{Candidate, SlotKey, Timing, UnixMs};

/// Resolves, applies the route's mode, and serves. Boxed: modes call back into it.
pub fn dispatch<'a>(gw: &'a Arc<Gateway>, key: &'a KeyEntry, call: Call<'a>) -> BoxFuture<'a, Result<Reply, ApiError>> {
    Box::pin(async move {
        call.check_depth()?;
        let (cost, client_request) = (call.cost, call.depth == 0);
        let mut reply = route_and_serve(gw, key, call).await?;
        // A whole answer says what it cost (every call made for it); a stream cannot: its
        // head leaves before its last token.
        if client_request && !matches!(reply.answer, super::call::Answer::Stream(_)) {
            cost.headers(&mut reply.headers);
        }
        Ok(reply)
    })
}

/// Resolves, answers from the cache when it can, applies the route's mode, and serves.
async fn route_and_serve<'a>(gw: &'a Arc<Gateway>, key: &'a KeyEntry, call: Call<'a>) -> Result<Reply, ApiError> {
    let started = Instant::now();
    let (route, candidates, mode) = plan_candidates(key, &call)?;
    let label = super::scope::metric_label(&call, mode, &candidates);
    // The client's chat request passes its policies before anything else: a refused one is
    // answered from nowhere, not even the cache.
    let (policed, rewritten);
    let mut call = call;
    if call.depth == 0 && call.kind == ModelKind::Chat && !call.runtime.policies.is_empty() {
        let chain = call.runtime.policies.chain(key, route);
        policed = Policed::new(chain, call.request_id, key, route.map(|r| r.alias.as_str()), call.model);
        // What policies check is the unified form, and what they let through is translated.
        let native = if policed.chain.is_empty() { call.native } else { None };
        call = Call { policed: Some(&policed), native, ..call };
    }
    let log = LogContext::of(&call, key, route.map(|r| r.alias.clone()), mode, label);
    if let Some(policed) = call.policed.filter(|p| call.depth == 0 && !p.chain.is_empty()) {
        let checked = match call.body.unified() {
            Some(unified) => policed.check_request(gw, &policed.chain, None, unified).await,
            None => Err(ApiError::invalid_request(format!(
                "this request cannot be put in the form the gateway's policies check: {}",
                call.body.untranslatable().unwrap_or_default()
            ))
            .code("policy_unsupported_request")),
        };
        match checked {
            Ok(Some(text)) => {
                rewritten = text;
                call = Call { body: CallBody::Unified(&rewritten), ..call };
            }
            Ok(None) => {}
            Err(refusal) => {
                log.refused(gw, call.model, started, &refusal);
                return Err(refusal);
            }
        }
    }
    if let (Some(why), Some(RouteMode::Vision(_) | RouteMode::Fusion(_))) =
        (call.body.untranslatable(), route.map(|r| &r.mode))
    {
        return Err(ApiError::invalid_request(why.to_string()));
    }
    let mut cached = gw.cache.plan(key, &call, route, &candidates)?;
    if let cache::Plan::Use(lookup) = &mut cached {
        let now = gw.scheduler.now();
        if let Some(found) = gw.cache.find(lookup, now, call.stream).await {
            return cache::hit(gw, key, &call, &log, found, started);
        }
        if let Some(text) = lookup.to_embed()
            && let Some(vector) = embed(gw, key, &call, text).await
        {
            lookup.embedded(vector);
            if let Some(found) = gw.cache.find_similar(lookup, now, call.stream) {
                return cache::hit(gw, key, &call, &log, found, started);
            }
        }
        lookup.spent_before(call.cost.pico());
    }
    let reply = match route.map(|r| (r, &r.mode)) {
        Some((_, RouteMode::Vision(vision))) => {
            match modes::vision::describe_images(&Gate(gw), key, &call, vision).await? {
                Some(unified) => {
                    let described = Call { body: CallBody::Unified(&unified), native: None, ..call };
                    serve(gw, key, &described, candidates, log).await
                }
                None => serve(gw, key, &call, candidates, log).await,
            }
        }
        Some((r, RouteMode::Fusion(fusion))) => modes::fusion::fuse(&Gate(gw), key, &call, r, fusion, candidates).await,
        _ => serve(gw, key, &call, candidates, log).await,
    }?;
    Ok(cache::missed(gw, cached, call.native.map(|n| n.protocol), call.cost, reply))
}

/// The embedding of `text` through the semantic cache's model, asked on the key's behalf (its
/// tokens and cost counted with the request's); `None` when that fails (the cache then misses).
async fn embed(gw: &Arc<Gateway>, key: &KeyEntry, call: &Call<'_>, text: &str) -> Option<Vec<f32>> {
    let model = gw.cache.semantic_model()?;
    let body = serde_json::json!({"model": model, "input": text}).to_string();
    let asked = Call {
        model,
        body: CallBody::Unified(&body),
        stream: false,
        kind: crate::config::ModelKind::Embedding,
        depth: call.depth + 1,
        fusion_id: None,
        native: None,
        ..*call
    };
    match dispatch(gw, &key.internal(), asked).await {
        Ok(Reply { answer: super::call::Answer::Complete(body), .. }) => cache::vector_of(body.as_bytes()),
        Ok(Reply { answer: super::call::Answer::Native { body, .. }, .. }) => cache::vector_of(&body),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(model, "semantic cache: the prompt could not be embedded: {}", e.message);
            None
        }
    }
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
    let operation = attempt::operation(call.kind);
    // Every call counts against the key, the ones the gateway makes on its behalf too.
    let prompt = crate::provider::PromptSize::of(call.body.text());
    let prompt_estimate = prompt.estimate();
    let now = gw.scheduler.now();
    let (candidates, priced) = price_candidates(gw, call, candidates, prompt_estimate, now)?;
    let asked = bill::Asked::of(call.body.text(), call.kind);
    // The most the call can cost on any candidate, set aside against the key's budgets until
    // its books are closed.
    let worst = asked.worst_case(priced.iter().filter_map(|(_, p)| p.as_deref()), prompt.upper_bound(), now);
    let costs = gw.settings.pricing.costs;
    let mut reservation =
        Some(admission::admit(gw, key, &call.runtime.config, prompt_estimate.saturating_add(asked.completion), worst)?);
    attempt::some_adapter_takes(gw, call, &candidates)?;
    let conversation = Conversation::of(&key.name, call, gw.scheduler.policy().affinity.enabled);
    let plan = gw.scheduler.plan(candidates, call.model, conversation.query.as_deref());
    if plan.affinity_hit {
        tracing::debug!("affinity: the conversation goes back to its last source");
    }

    let mut report = Report::new(plan.skipped);
    let mut untranslatable = Vec::new();
    // The last source whose policies refused the request: the client's answer if no source took it.
    let mut refusal = None;
    for (attempt, candidate) in plan.candidates.into_iter().enumerate() {
        let slot = SlotKey::of(&candidate.resolved);
        let source = candidate.resolved.source;
        let Some(adapter) = gw.plugins.adapter(&source.adapter) else { continue };
        let origin = Origin { source: source.name.as_str(), model: candidate.resolved.model.upstream_name() };
        // The source's own policies: on the request before it goes there, on the answer after.
        let (source_chain, checked) = match police_for_source(gw, call, source, origin).await {
            Ok(checked) => checked,
            Err(refused) => {
                report.note(&candidate, format!("its policies refused the request: {}", refused.message));
                refusal = Some(refused);
                continue;
            }
        };
        let policed_call;
        let call = match &checked {
            Some(body) => {
                policed_call = Call { body: CallBody::Unified(body), native: None, ..*call };
                &policed_call
            }
            None if !source_chain.is_empty() => {
                policed_call = Call { native: None, ..*call };
                &policed_call
            }
            None => call,
        };
        let native = match attempt::fit(call, source, &adapter, &untranslatable) {
            Ok(native) => native,
            Err(why) => {
                report.note(&candidate, why);
                continue;
            }
        };
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
        let span = attempt::span(call, &target, candidate.probe);
        let started = Instant::now();
        // Boxed: moved into `instrument`, it was otherwise kept twice in this future
        // (rust-lang/rust#62958), 5.8 KB held by every request in flight instead of 1.5.
        let outcome =
            Box::pin(attempt::call_upstream(provider, &target, call, &mut ticket)).instrument(span.clone()).await;
        let elapsed = started.elapsed();
        match outcome {
            Ok((done, head)) => {
                ticket.succeeded(Timing {
                    connect_ms: head.as_secs_f64() * 1e3,
                    first_byte_ms: (elapsed - head).as_secs_f64() * 1e3,
                });
                let ms = elapsed.as_millis() as u64;
                tracing::debug!(source = %name, ms, probe = candidate.probe, after_failures = report.failures, "head answered");
                gw.metrics.failed_over(&log.requested_model, report.failures);
                let books = Books {
                    gw: Arc::clone(gw),
                    periods: router::quota_periods(&call.runtime.config, &slot),
                    slot: slot.clone(),
                    bind: conversation.last.map(|last| (key.name.clone(), call.client_ip, last)),
                    log,
                    started,
                    first_byte: elapsed,
                    affinity_hit: plan.affinity_hit && attempt == 0,
                    prompt_estimate,
                    reservation: reservation.take().expect("one answer per request"),
                    span,
                    bill: costs.then(|| bill::Bill {
                        price: priced
                            .iter()
                            .find(|(model, _)| std::ptr::eq(*model, candidate.resolved.model))
                            .and_then(|(_, p)| p.clone()),
                        image_variant: asked.image_variant.clone(),
                        request: call.cost.clone(),
                    }),
                    refused: None,
                };
                return match call.policed.filter(|_| call.kind == ModelKind::Chat) {
                    Some(policed) => police_answer(gw, call, policed, &source_chain, origin, done, books).await,
                    None => Ok(attempt::reply(name, call.kind, done, books)),
                };
            }
            Err(e) => {
                let disposition = e.disposition();
                if disposition.verdict != Verdict::GatewayFull {
                    span.record("error.type", disposition.code.as_deref().unwrap_or("error"));
                    span.record("switchyard.failover_reason", tracing::field::display(&e));
                    log.failed(gw, &slot, started, &e);
                }
                match disposition.verdict {
                    // The gateway's own capacity, instance or descriptors failed it: busy, like
                    // a full source; nothing cools.
                    Verdict::GatewayFull => {
                        if matches!(e, AttemptError::LocalResources { .. }) {
                            tracing::warn!(source = %name, "{e}");
                        }
                        report.note(&candidate, e.to_string());
                    }
                    // The request itself is wrong: no other source would take it either.
                    Verdict::Client => return Err(ApiError::from(&e)),
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
    if let Some(refusal) = refusal.filter(|_| report.failures == 0) {
        return Err(refusal);
    }
    let error = report.into_error(call.model, gw.scheduler.now());
    if error.code.as_deref() == Some(super::report::ALL_FAILED) {
        gw.notices.push(gw.scheduler.now(), call.model, &error.message);
    }
    Err(error)
}

/// The policies of `source` for this call, and the request they let go there (`None`:
/// unchanged); their refusal when they refuse it.
async fn police_for_source(
    gw: &Gateway,
    call: &Call<'_>,
    source: &crate::config::SourceConfig,
    origin: Origin<'_>,
) -> Result<(Chain, Option<String>), ApiError> {
    // Policies check chat: embeddings and images pass them by.
    let Some(policed) = call.policed.filter(|_| call.kind == ModelKind::Chat) else {
        return Ok((Chain::default(), None));
    };
    let chain = call.runtime.policies.of_source(source);
    if chain.is_empty() {
        return Ok((chain, None));
    }
    let Some(unified) = call.body.unified() else {
        return Err(ApiError::invalid_request(format!(
            "this request cannot be put in the form source `{}`'s policies check: {}",
            source.name,
            call.body.untranslatable().unwrap_or_default()
        ))
        .code("policy_unsupported_request"));
    };
    let checked = policed.check_request(gw, &chain, Some(origin), unified).await?;
    Ok((chain, checked))
}

/// An answer through the policies over it (the source's, then the route's, the key's and the
/// global ones): a stream passes their guard; a whole answer is checked before it is given,
/// and one they refuse is still booked (its tokens were spent) but never reaches the client.
async fn police_answer(
    gw: &Arc<Gateway>,
    call: &Call<'_>,
    policed: &Policed,
    source_chain: &Chain,
    origin: Origin<'_>,
    done: attempt::Done,
    mut books: Books,
) -> Result<Reply, ApiError> {
    let chain = source_chain.then(&policed.chain);
    let name = books.slot.source.clone();
    match done {
        // No hook of the chain reads this kind of answer: it passes untouched (and unparsed).
        done if !chain.reads(matches!(done, attempt::Done::Stream(_))) => {
            Ok(attempt::reply(&name, call.kind, done, books))
        }
        attempt::Done::Stream(chunks) => {
            let guarded = chunks.guarded(Box::new(policed.guard(gw, chain, origin)));
            Ok(attempt::reply(&name, call.kind, attempt::Done::Stream(guarded), books))
        }
        attempt::Done::Whole(Completion::Unified(body)) => {
            let checked = policed.check_answer(gw, &chain, origin, &body).await;
            let tally = crate::provider::Tally::of_response(&body);
            let outcome = if checked.is_ok() { Outcome::Complete } else { Outcome::Failed };
            policed.finished(gw, &chain, origin, policy::finish(outcome, tally.prompt_tokens, tally.completion_tokens));
            match checked {
                Ok(rewritten) => {
                    let body = rewritten.unwrap_or(body);
                    Ok(attempt::reply(&name, call.kind, attempt::Done::Whole(Completion::Unified(body)), books))
                }
                Err(refusal) => {
                    books.refused = Some(refusal.clone());
                    drop(attempt::reply(&name, call.kind, attempt::Done::Whole(Completion::Unified(body)), books));
                    Err(refusal)
                }
            }
        }
        // Never under policies (they turn pass-through off); given as it came.
        whole @ attempt::Done::Whole(Completion::Native { .. }) => Ok(attempt::reply(&name, call.kind, whole, books)),
    }
}

/// Each candidate's model entry (its identity: one entry per source and model) and price
/// (`None`: unpriced).
type ModelPrices<'a> = Vec<(&'a crate::config::ModelConfig, Option<Arc<crate::domain::Price>>)>;

/// Each candidate's price (when costs are kept, or the client set a maximum): candidates over
/// the client's `x-switchyard-max-price` are left out (refused when none is left), and each
/// keeps its price for `cheapest` ordering.
fn price_candidates<'a>(
    gw: &Gateway,
    call: &Call<'a>,
    mut candidates: Vec<Planned<'a>>,
    prompt: u64,
    now: UnixMs,
) -> Result<(Vec<Planned<'a>>, ModelPrices<'a>), ApiError> {
    if !gw.settings.pricing.costs && call.max_price.is_none() {
        return Ok((candidates, Vec::new()));
    }
    let prices = &call.runtime.prices;
    let mut priced = Vec::with_capacity(candidates.len());
    let mut refused = Vec::new();
    candidates.retain_mut(|p| {
        let price = prices.rate(p.resolved.source, p.resolved.model);
        if let Some(why) = call.max_price.and_then(|limit| limit.refuses(price.as_deref(), prompt, now)) {
            refused.push(format!("{}: {why}", p.resolved.qualified()));
            return false;
        }
        p.price = price.as_ref().map(|p| p.blended(now));
        priced.push((p.resolved.model, price));
        true
    });
    if candidates.is_empty() && !refused.is_empty() {
        return Err(ApiError::invalid_request(format!(
            "no candidate for `{}` is within {}: {}",
            call.model,
            bill::MAX_PRICE_HEADER,
            refused.join("; ")
        ))
        .param(bill::MAX_PRICE_HEADER)
        .code("no_candidate_under_max_price"));
    }
    Ok((candidates, priced))
}

/// A quota error from an upstream rests the slot until its quota window ends (when it has one).
fn align_quota_failure(failure: Failure, candidate: &Candidate<'_>, now: UnixMs) -> Failure {
    match (failure, candidate.quota.and_then(|q| q.period.window(now).1)) {
        (Failure::QuotaExhausted { .. }, Some(end)) => Failure::QuotaExhausted { window_ends_in: Some(end.since(now)) },
        _ => failure,
    }
}
