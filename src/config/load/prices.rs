//! Checks of `prices:` (a price must price something and name a source that exists) and of
//! `budgets:` (one per group).

use super::Collector;
use crate::config::{GroupBudget, PriceOverride, SourceConfig};

impl Collector<'_> {
    pub(super) fn check_prices(&mut self, prices: &[PriceOverride], at: &str, sources: &[SourceConfig]) {
        for (i, p) in prices.iter().enumerate() {
            if p.is_incomplete() {
                self.error(
                    &format!("{at}[{i}]"),
                    format!("the price of `{}` sets no input or no output price (and no image price)", p.model),
                    "set input and output (USD per 1M tokens), e.g. input: \"0.15\", output: \"0.60\"; \"0\" for a free model",
                );
            }
            if let Some(source) = &p.source
                && !sources.iter().any(|s| &s.name == source)
            {
                self.error(
                    &format!("{at}[{i}].source"),
                    format!("no source named `{source}`"),
                    "name a source from `sources:`",
                );
            }
            if p.model == "*" && p.source.is_none() {
                self.error(
                    &format!("{at}[{i}].model"),
                    "`*` without a source would price every model of every source alike",
                    "name the source whose models all cost this (e.g. a local one at \"0\")",
                );
            }
        }
    }

    pub(super) fn check_budgets(&mut self, budgets: &[GroupBudget]) {
        for (i, b) in budgets.iter().enumerate() {
            if budgets[..i].iter().any(|o| o.group == b.group) {
                self.error(
                    &format!("budgets[{i}].group"),
                    format!("group `{}` has a budget already", b.group),
                    "keep one budget per group",
                );
            }
        }
    }
}
