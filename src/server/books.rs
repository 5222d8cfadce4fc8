//! What an attempt leaves behind: a request-log row for every attempt, and for a served answer
//! its tokens against quotas and the binding of the conversation's next turn (or, for a stream
//! that broke after its first chunk, a cooled slot).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Gateway;
use super::error::ApiError;
use crate::config::KeyName;
use crate::provider::{AttemptError, Tally};
use crate::scheduler::{self, Period, SlotKey};
use crate::state::LogRow;

/// Who and what a request's attempts are logged under.
#[derive(Debug, Clone)]
pub struct LogContext {
    pub request_id: String,
    pub key: KeyName,
    /// The key's quota period: its tokens are counted there.
    pub key_period: Option<Period>,
    pub route: Option<String>,
    pub mode: &'static str,
    pub fusion_id: Option<String>,
    pub stream: bool,
}

impl LogContext {
    /// A row for an attempt at `slot` that started at `started`.
    pub fn row(&self, gw: &Gateway, slot: &SlotKey, started: Instant) -> LogRow {
        LogRow {
            at_ms: gw.scheduler.now().0,
            request_id: self.request_id.clone(),
            key: self.key.to_string(),
            route: self.route.clone(),
            mode: self.mode.to_string(),
            source: slot.source.to_string(),
            model: slot.model.clone(),
            total_ms: started.elapsed().as_millis() as u64,
            stream: self.stream,
            fusion_id: self.fusion_id.clone(),
            ..LogRow::default()
        }
    }

    /// Logs a failed attempt.
    pub fn failed(&self, gw: &Gateway, slot: &SlotKey, started: Instant, error: &AttemptError) {
        let mut row = self.row(gw, slot, started);
        fill_error(&mut row, error);
        gw.log(row);
    }
}

fn fill_error(row: &mut LogRow, error: &AttemptError) {
    let api = ApiError::from(error);
    row.status = Some(api.status.as_u16());
    row.error = Some(api.code.unwrap_or(api.kind).to_string());
    row.message = Some(api.message);
}

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
    closed: bool,
}

impl Books {
    #[allow(clippy::too_many_arguments)]
    pub fn open(
        gw: Arc<Gateway>,
        slot: SlotKey,
        periods: Vec<Period>,
        bind: Option<(KeyName, IpAddr, Value)>,
        log: LogContext,
        started: Instant,
        first_byte: Duration,
        affinity_hit: bool,
    ) -> Books {
        Books { gw, slot, periods, bind, log, started, first_byte, affinity_hit, closed: false }
    }

    /// Closes the books: usage, binding and the log row, journaled when this returns.
    pub fn close(mut self, end: Result<Tally, &AttemptError>) {
        self.closed = true;
        let mut row = self.log.row(&self.gw, &self.slot, self.started);
        row.first_byte_ms = Some(self.first_byte.as_millis() as u64);
        row.affinity_hit = self.affinity_hit;
        match end {
            Ok(tally) => {
                row.status = Some(200);
                row.tokens_in = Some(tally.prompt_tokens);
                row.tokens_out = Some(tally.completion_tokens);
                row.tokens_cached = tally.cached_tokens;
                let fingerprint = self.bind.take().map(|(key, ip, last)| {
                    scheduler::fingerprint(key.as_str(), &ip.to_string(), [&last, &tally.assistant_message()])
                });
                self.gw.scheduler.completed(&self.slot, tally.tokens(), &self.periods, fingerprint);
                if let Some(period) = self.log.key_period {
                    self.gw.scheduler.add_key_usage(&self.log.key, period, tally.tokens());
                }
            }
            Err(e) => {
                if let Some(failure) = scheduler::classify(e) {
                    tracing::warn!(slot = %self.slot, "stream broke after its first chunk: {e}");
                    self.gw.scheduler.record_failure(&self.slot, failure);
                }
                fill_error(&mut row, e);
            }
        }
        self.gw.log(row);
    }
}

impl Drop for Books {
    /// The client went away before the answer ended.
    fn drop(&mut self) {
        if !self.closed {
            let mut row = self.log.row(&self.gw, &self.slot, self.started);
            row.first_byte_ms = Some(self.first_byte.as_millis() as u64);
            row.affinity_hit = self.affinity_hit;
            row.status = Some(499);
            row.error = Some("client_closed".into());
            self.gw.log(row);
        }
    }
}
