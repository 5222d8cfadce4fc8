//! What an attempt leaves behind: a request-log row for every attempt, and for a served answer
//! its tokens against quotas (also when it broke or the client left) and the binding of the
//! conversation's next turn (or, for a stream that broke after its first chunk, a cooled slot).

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Gateway;
use super::admission::Reservation;
use super::error::ApiError;
use crate::config::{KeyName, RouteMode};
use crate::provider::{AttemptError, StreamEnd};
use crate::scheduler::{self, Period, SlotKey};
use crate::state::{Charge, LogRow};

/// How a request found its candidates: the log rows' `mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogMode {
    /// A model name (or `source/model`).
    Model,
    /// The AUTO chain (model `AUTO`, or `default_model`).
    Auto,
    /// A route alias, by its mode.
    Direct,
    AutoSelect,
    Vision,
    Fusion,
    /// `POST /v1/messages/count_tokens` asked of an upstream: nothing generated.
    CountTokens,
}

impl LogMode {
    pub fn of(mode: &RouteMode) -> LogMode {
        match mode {
            RouteMode::Direct => LogMode::Direct,
            RouteMode::AutoSelect => LogMode::AutoSelect,
            RouteMode::Vision(_) => LogMode::Vision,
            RouteMode::Fusion(_) => LogMode::Fusion,
        }
    }

    /// As the logs (and their filter) write it.
    pub fn as_str(self) -> &'static str {
        match self {
            LogMode::Model => "model",
            LogMode::Auto => "auto",
            LogMode::Direct => "direct",
            LogMode::AutoSelect => "auto-select",
            LogMode::Vision => "adapter",
            LogMode::Fusion => "fusion",
            LogMode::CountTokens => "count_tokens",
        }
    }
}

/// Who and what a request's attempts are logged under.
#[derive(Debug, Clone)]
pub struct LogContext {
    pub request_id: String,
    /// The model the client named, and what it asked for (the metrics' labels).
    pub requested_model: String,
    pub operation: &'static str,
    pub key: KeyName,
    pub route: Option<String>,
    pub mode: LogMode,
    pub fusion_id: Option<String>,
    pub stream: bool,
    /// What policies did to the request (shared by all its rows); `None` with no policies.
    pub trail: Option<std::sync::Arc<super::policy::Trail>>,
}

impl LogContext {
    /// The context of `call` on `key`'s behalf, through `route` when it named one, labelled in
    /// the metrics by `requested_model` (see [`super::scope::metric_label`]).
    pub fn of(
        call: &super::call::Call<'_>,
        key: &super::auth::KeyEntry,
        route: Option<String>,
        mode: LogMode,
        requested_model: &str,
    ) -> Self {
        LogContext {
            request_id: call.request_id.to_string(),
            requested_model: requested_model.to_string(),
            operation: call.kind.operation_name(),
            key: key.name.clone(),
            route,
            mode,
            fusion_id: call.fusion_id.map(str::to_string),
            stream: call.stream,
            trail: call.policed.map(|p| std::sync::Arc::clone(&p.trail)),
        }
    }

    /// A row for an attempt at `slot` that started at `started`.
    pub fn row(&self, gw: &Gateway, slot: &SlotKey, started: Instant) -> LogRow {
        LogRow {
            at_ms: gw.scheduler.now().0,
            request_id: self.request_id.clone(),
            key: self.key.to_string(),
            route: self.route.clone(),
            mode: self.mode.as_str().to_string(),
            source: slot.source.to_string(),
            model: slot.model.clone(),
            total_ms: started.elapsed().as_millis() as u64,
            stream: self.stream,
            fusion_id: self.fusion_id.clone(),
            replica: gw.shared.as_ref().map(|s| s.replica().to_string()),
            policy: self.trail.as_ref().and_then(|t| t.summary()),
            ..LogRow::default()
        }
    }

    /// Logs a request a policy refused before any attempt (source `policy`).
    pub fn refused(&self, gw: &Gateway, model: &str, started: Instant, error: &ApiError) {
        let slot = SlotKey { source: crate::config::SourceName::new(POLICY_SOURCE), model: model.to_string() };
        let mut row = self.row(gw, &slot, started);
        row.status = Some(error.status.as_u16());
        row.error = Some(error.code.as_deref().map_or_else(|| error.kind.as_str().to_string(), str::to_string));
        row.message = Some(error.message.clone());
        gw.log(row, self);
    }

    /// Logs a failed attempt.
    pub fn failed(&self, gw: &Gateway, slot: &SlotKey, started: Instant, error: &AttemptError) {
        let mut row = self.row(gw, slot, started);
        fill_error(&mut row, error);
        gw.log(row, self);
    }
}

fn fill_error(row: &mut LogRow, error: &AttemptError) {
    let api = ApiError::from(error);
    row.status = Some(api.status.as_u16());
    row.error = Some(api.code.map_or(api.kind.to_string(), Cow::into_owned));
    row.message = Some(api.message);
}

/// The source a row names when a policy refused the request before it went anywhere.
pub const POLICY_SOURCE: &str = "policy";

/// The books of one served answer, closed when it ends.
pub struct Books {
    pub gw: Arc<Gateway>,
    pub slot: SlotKey,
    pub periods: Vec<Period>,
    /// (key, client IP, the request's last message): what the next turn is bound by.
    pub bind: Option<(KeyName, IpAddr, Value)>,
    pub log: LogContext,
    pub started: Instant,
    pub first_byte: Duration,
    pub affinity_hit: bool,
    /// The request's prompt tokens as estimated, for when the upstream reports none.
    pub prompt_estimate: u64,
    /// The key's tokens set aside for this call, given back (dropped) once the real ones are
    /// counted.
    pub reservation: Reservation,
    /// The attempt's span: its usage is recorded when the answer ends, and so does the span.
    pub span: tracing::Span,
    /// How the answer is billed; `None` with `pricing.costs: false`.
    pub bill: Option<super::bill::Bill>,
    /// A policy refused the whole answer: the row says so (its tokens are still charged).
    pub refused: Option<ApiError>,
}

impl Books {
    /// Closes the books: tokens (the upstream's, or an estimate when it reported none) against
    /// the quotas, the binding of the next turn, and the log row, journaled when this returns.
    /// Whatever was generated is charged, also when the stream broke or the client left.
    pub fn close(mut self, end: StreamEnd<'_>) {
        let mut row = self.log.row(&self.gw, &self.slot, self.started);
        row.first_byte_ms = Some(self.first_byte.as_millis() as u64);
        row.affinity_hit = self.affinity_hit;
        let (mut tally, bind) = match end {
            StreamEnd::Complete(tally) => match self.refused.take() {
                None => {
                    row.status = Some(200);
                    (tally, self.bind.take())
                }
                Some(refusal) => {
                    row.status = Some(refusal.status.as_u16());
                    row.error = Some(refusal.code.map_or_else(|| refusal.kind.as_str().to_string(), Cow::into_owned));
                    row.message = Some(refusal.message);
                    (tally, None)
                }
            },
            StreamEnd::Abandoned(tally) => {
                row.status = Some(499);
                row.error = Some("client_closed".into());
                (tally, None)
            }
            StreamEnd::Failed(e, tally) => {
                if let Some(failure) = e.disposition().verdict.cooling() {
                    tracing::warn!(slot = %self.slot, "stream broke after its first chunk: {e}");
                    self.gw.scheduler.record_failure(&self.slot, failure);
                }
                fill_error(&mut row, e);
                (tally, None)
            }
        };
        tally.settle(self.prompt_estimate);
        // As i64: OTLP attributes are signed (a u64 would be exported as text).
        let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.span.record("gen_ai.usage.input_tokens", signed(tally.prompt_tokens));
        self.span.record("gen_ai.usage.output_tokens", signed(tally.completion_tokens));
        if let Some(cached) = tally.cached_tokens {
            self.span.record("gen_ai.usage.cache_read.input_tokens", signed(cached));
        }
        if let Some(reason) = &tally.finish_reason {
            self.span.record("gen_ai.response.finish_reasons", reason.as_str());
        }
        if let Some(error) = &row.error {
            self.span.record("error.type", error.as_str());
        }
        row.tokens_in = Some(tally.prompt_tokens);
        row.tokens_out = Some(tally.completion_tokens);
        row.tokens_cached = tally.cached_tokens;
        row.tokens_cache_write = tally.cache_write_tokens;
        row.usage_estimated = tally.estimated;
        let mut charges = Vec::new();
        let mut charged = None;
        if let Some(bill) = &self.bill {
            let now = self.gw.scheduler.now();
            let cost = bill.cost(&tally, now);
            match cost {
                Some(cost) => {
                    row.cost_usd = Some(cost.usd);
                    row.cost_estimated = cost.estimated;
                    self.span.record("switchyard.cost_usd", cost.usd.as_f64());
                    charged = Some(cost.usd.pico().max(0) as u64);
                    for (account, period) in self.reservation.budgets() {
                        let window_start = period.window(now).0;
                        charges.push(Charge { account: account.clone(), period, window_start });
                    }
                }
                None => row.cost_unknown = true,
            }
            bill.request.add(cost);
        }
        let fingerprint = bind.map(|(key, ip, last)| {
            scheduler::fingerprint(key.as_str(), &ip.to_string(), [&last, &tally.assistant_message()])
        });
        tracing::info!(
            target: crate::logging::ACCESS,
            id = %row.request_id,
            key = %row.key,
            mode = %row.mode,
            source = %row.source,
            model = %row.model,
            status = row.status,
            ms = row.total_ms,
            tokens_in = tally.prompt_tokens,
            tokens_out = tally.completion_tokens,
            estimated = tally.estimated,
            cost_usd = row.cost_usd.map(tracing::field::display),
            "answered"
        );
        self.gw.scheduler.completed(&self.slot, tally.tokens(), &self.periods, fingerprint);
        // The real tokens and cost are counted; what the call set aside goes back.
        self.reservation.settle(tally.tokens(), charged);
        self.gw.log_charged(row, &self.log, charges);
    }
}
