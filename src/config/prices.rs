//! `prices:` (config.yaml and the runtime file) — a model's price set by the operator, for one
//! source or every source serving it — and `budgets:`, the USD limits of route groups.

use serde::{Deserialize, Serialize};

use super::{GroupName, SourceName};
use crate::domain::{Budget, PerMillion, Period, Price, Rates, Tier, Usd};

/// One price set by the operator: USD per 1M tokens (and per image), replacing the shipped
/// table's entry (or giving one a model the table lacks).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PriceOverride {
    /// Only this source's model; unset: every source serving `model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceName>,
    /// The model as the source names it in `models:` (`*`: every model of `source`).
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<PerMillion>,
    /// USD per generated image (an image model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Usd>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<TierConfig>,
}

/// A long-context tier as written.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    pub above_input_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<PerMillion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<PerMillion>,
}

impl PriceOverride {
    /// Whether it is the price of `model` at `source`.
    pub fn matches(&self, source: &SourceName, model: &str) -> bool {
        self.source.as_ref().is_none_or(|s| s == source) && (self.model == model || self.model == "*")
    }

    /// How specific it is: a source and model beat a model alone, which beats `*`.
    pub fn rank(&self) -> u8 {
        u8::from(self.source.is_some()) * 2 + u8::from(self.model != "*")
    }

    /// Whether it leaves a kind of token unpriced (input or output, for a model not priced per
    /// image): refused, the tokens left out would silently cost $0.
    pub fn is_incomplete(&self) -> bool {
        self.image.is_none() && (self.input.is_none() || self.output.is_none())
    }

    pub fn price(&self) -> Price {
        Price {
            rates: Rates {
                input: self.input,
                cached_input: self.cached_input,
                cache_write: self.cache_write,
                output: self.output,
            },
            tiers: self
                .tiers
                .iter()
                .map(|t| Tier {
                    above_input_tokens: t.above_input_tokens,
                    rates: Rates {
                        input: t.input,
                        cached_input: t.cached_input,
                        cache_write: t.cache_write,
                        output: t.output,
                    },
                })
                .collect(),
            changes: Vec::new(),
            images: self.image.map(|p| vec![("default".to_string(), p)]).unwrap_or_default(),
        }
    }
}

/// `budgets:` — every key of a route group together may spend this much per period.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GroupBudget {
    pub group: GroupName,
    pub usd: Usd,
    #[serde(default = "month")]
    pub period: Period,
}

fn month() -> Period {
    Period::Month
}

impl GroupBudget {
    pub fn budget(&self) -> Budget {
        Budget { usd: self.usd, period: self.period }
    }
}

/// `pricing:` — where prices come from and whether costs are kept at all.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PricingConfig {
    /// A price table to use instead of the shipped one (same format as `prices/prices.yaml`).
    #[serde(default)]
    pub table: Option<std::path::PathBuf>,
    /// `false`: no costs, no budgets (for measuring what the bookkeeping costs).
    #[serde(default = "yes")]
    pub costs: bool,
}

fn yes() -> bool {
    true
}

impl Default for PricingConfig {
    fn default() -> Self {
        PricingConfig { table: None, costs: true }
    }
}
