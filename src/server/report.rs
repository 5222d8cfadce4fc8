//! The answer when no candidate served: what each one got, tier by tier (503), or the only
//! upstream's own error when it was the sole candidate tried.

use std::collections::BTreeMap;

use axum::http::StatusCode;

use super::error::{ApiError, ErrorType};
use crate::provider::AttemptError;
use crate::scheduler::{Candidate, SkipReason, Skipped, UnixMs};

/// What every candidate got, by tier, for the answer when none served.
pub struct Report {
    lines: BTreeMap<u32, Vec<String>>,
    only_error: Option<AttemptError>,
    pub failures: usize,
    others: usize,
    skipped: Vec<Skipped>,
}

impl Report {
    pub fn new(skipped: Vec<Skipped>) -> Report {
        Report { lines: BTreeMap::new(), only_error: None, failures: 0, others: 0, skipped }
    }

    pub fn note(&mut self, c: &Candidate<'_>, what: String) {
        self.others += 1;
        self.lines.entry(c.tier).or_default().push(format!("{}: {what}", c.resolved.qualified()));
    }

    pub fn failed(&mut self, c: &Candidate<'_>, e: AttemptError) {
        self.failures += 1;
        self.lines.entry(c.tier).or_default().push(format!("{}: {e}", c.resolved.qualified()));
        self.only_error = (self.failures == 1).then_some(e);
    }

    /// The upstream's own error when it was the only candidate and nothing else was left
    /// out; otherwise 503 with what each candidate got, tier by tier.
    pub fn into_error(mut self, model: &str, now: UnixMs) -> ApiError {
        if self.failures == 1
            && self.others == 0
            && self.skipped.is_empty()
            && let Some(e) = self.only_error.take()
        {
            return ApiError::from(&e);
        }
        for s in std::mem::take(&mut self.skipped) {
            let what = match s.reason {
                SkipReason::Cooling { until: Some(until) } => {
                    format!("cooling down for another {} s", until.since(now).as_secs().max(1))
                }
                SkipReason::Cooling { until: None } => "cooling down until cleared".to_string(),
                SkipReason::QuotaSpent { used, quota, resets } => {
                    let resets =
                        resets.map_or(String::new(), |r| format!(", resets in {} s", r.since(now).as_secs().max(1)));
                    format!("token quota spent ({used} of {quota}{resets})")
                }
            };
            self.lines.entry(s.tier).or_default().push(format!("{}: {what}", s.key));
        }
        let tiered = self.lines.keys().any(|t| *t > 0);
        let parts: Vec<String> = self
            .lines
            .into_iter()
            .map(|(tier, lines)| if tiered { format!("tier {tier}: {}", lines.join("; ")) } else { lines.join("; ") })
            .collect();
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Upstream,
            format!("no source could serve model \"{model}\": {}", parts.join(" | ")),
        )
        .code(ALL_FAILED)
    }
}

/// The code of the 503 that says no candidate could serve the model.
pub const ALL_FAILED: &str = "all_candidates_failed";
