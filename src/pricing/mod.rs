//! What models cost: the price table, the operator's prices over it, and the price each
//! source's model is billed at (with where that price came from).

mod table;

use std::sync::Arc;

pub use table::{Entry, SHIPPED, Table, TableError};

use crate::config::{Config, ModelConfig, PriceOverride, SourceConfig};
use crate::domain::Price;

/// The table `pricing` names (its `table` file, else the shipped one).
pub fn load_table(pricing: &crate::config::PricingConfig) -> anyhow::Result<Table> {
    let Some(path) = &pricing.table else { return Ok(Table::shipped()) };
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow::anyhow!(
            "pricing.table: cannot read {}: {e} (fix: point it at a price table, or remove it for the shipped one)",
            path.display()
        )
    })?;
    Table::parse(&text).map_err(|e| {
        anyhow::anyhow!("pricing.table: {}: {e} (fix: start from prices/prices.yaml of this version)", path.display())
    })
}

/// Where a price came from.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum Origin {
    /// The price table's entry of `provider`'s `model` (checked on `checked`).
    Table { provider: String, model: String, status: String, checked: Option<String> },
    /// `prices:` in config.yaml.
    Config,
    /// Set at run time (admin API, WebUI).
    Runtime,
}

/// A model's price and its origin.
#[derive(Debug, Clone)]
pub struct Priced {
    pub price: Arc<Price>,
    pub origin: Origin,
}

/// The prices in force for one runtime: the operator's over the table's.
#[derive(Debug)]
pub struct PriceBook {
    table: Arc<Table>,
    overrides: Vec<(PriceOverride, Arc<Price>, Origin)>,
}

impl PriceBook {
    /// `config`'s prices (runtime ones marked as such) over `table`.
    pub fn new(table: Arc<Table>, config: &Config, runtime: &[PriceOverride]) -> PriceBook {
        let overrides = config
            .prices
            .iter()
            .map(|p| {
                let origin = if runtime.contains(p) { Origin::Runtime } else { Origin::Config };
                (p.clone(), Arc::new(p.price()), origin)
            })
            .collect();
        PriceBook { table, overrides }
    }

    /// `config`'s models that have no price: `source/model` (their cost would be unknown).
    pub fn unpriced(&self, config: &Config) -> Vec<String> {
        let mut out = Vec::new();
        for source in &config.sources {
            for model in source.models.iter().filter(|m| self.price(source, m).is_none()) {
                out.push(format!("{}/{}", source.name, model.name));
            }
        }
        out
    }

    pub fn table(&self) -> &Table {
        &self.table
    }

    /// The price of `model` at `source`: the most specific operator's price, else the table's
    /// entry for the model the upstream is sent (by the source's provider when several list
    /// it). `None`: unpriced, never taken as free.
    pub fn price(&self, source: &SourceConfig, model: &ModelConfig) -> Option<Priced> {
        Some(match self.find(source, model)? {
            Found::Operator(price, origin) => Priced { price: price.clone(), origin: origin.clone() },
            Found::Table(entry) => Priced {
                price: entry.price.clone(),
                origin: Origin::Table {
                    provider: entry.provider.clone(),
                    model: entry.model.clone(),
                    status: entry.status.clone(),
                    checked: entry.checked.clone(),
                },
            },
        })
    }

    /// The price alone, as a request needs it (nothing copied but a reference count).
    pub fn rate(&self, source: &SourceConfig, model: &ModelConfig) -> Option<Arc<Price>> {
        Some(match self.find(source, model)? {
            Found::Operator(price, _) => price.clone(),
            Found::Table(entry) => entry.price.clone(),
        })
    }

    fn find(&self, source: &SourceConfig, model: &ModelConfig) -> Option<Found<'_>> {
        let operator =
            self.overrides.iter().filter(|(o, ..)| o.matches(&source.name, &model.name)).max_by_key(|(o, ..)| o.rank());
        if let Some((_, price, origin)) = operator {
            return Some(Found::Operator(price, origin));
        }
        self.table.lookup(model.upstream_name(), provider_of(source)).map(Found::Table)
    }
}

/// Where [`PriceBook::find`] found a price.
enum Found<'a> {
    Operator(&'a Arc<Price>, &'a Origin),
    Table(&'a Entry),
}

/// The table's provider a source bills as: by its host first (an OpenAI-compatible adapter
/// may front Groq or DeepSeek), then by its adapter.
pub fn provider_of(source: &SourceConfig) -> Option<&'static str> {
    let url = source.base_url.as_str();
    let host = url.split("://").nth(1).unwrap_or(url).split(['/', ':']).next().unwrap_or_default();
    if let Some(provider) = provider_by_host(host) {
        return Some(provider);
    }
    if matches!(host, "127.0.0.1" | "localhost" | "::1" | "[::1]") || source.adapter.as_str() == "ollama" {
        return Some("ollama");
    }
    match source.adapter.as_str() {
        "openai" | "openai-responses" => Some("openai"),
        "anthropic" => Some("anthropic"),
        "gemini" => Some("gemini"),
        "deepseek" => Some("deepseek"),
        _ => None,
    }
}

/// The provider whose API `host` is (the host itself or one under it), allocation-free: it
/// runs for every priced request.
fn provider_by_host(host: &str) -> Option<&'static str> {
    const HOSTS: &[(&str, &str)] = &[
        ("api.openai.com", "openai"),
        ("anthropic.com", "anthropic"),
        ("generativelanguage.googleapis.com", "gemini"),
        ("deepseek.com", "deepseek"),
        ("mistral.ai", "mistral"),
        ("groq.com", "groq"),
        ("cohere.com", "cohere"),
        ("cohere.ai", "cohere"),
    ];
    let under = |h: &str| host.strip_suffix(h).is_some_and(|rest| rest.is_empty() || rest.ends_with('.'));
    HOSTS.iter().find(|(h, _)| under(h)).map(|(_, provider)| *provider)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_host_bills_as_its_provider_and_only_under_its_domain() {
        let of = super::provider_by_host;
        assert_eq!(of("api.openai.com"), Some("openai"));
        assert_eq!(of("eu.api.openai.com"), Some("openai"));
        assert_eq!(of("api.anthropic.com"), Some("anthropic"));
        assert_eq!(of("evilanthropic.com"), None, "a look-alike domain is not the provider");
        assert_eq!(of("myapi.openai.com.example"), None);
        assert_eq!(of("127.0.0.1"), None);
    }
}
