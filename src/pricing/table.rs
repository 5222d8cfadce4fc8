//! The price table (`prices/prices.yaml`, shipped in the binary, or `pricing.table`): list
//! prices per provider and model, read once into `Price` values indexed by model id and alias.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::NaiveDate;
use serde::Deserialize;

use crate::domain::{Change, PerMillion, Price, Rates, Tier, UnixMs, Usd};

/// The table that ships in the binary.
pub const SHIPPED: &str = include_str!("../../prices/prices.yaml");

#[derive(Deserialize)]
struct TableFile {
    version: u32,
    #[serde(default)]
    updated: Option<String>,
    providers: BTreeMap<String, ProviderWire>,
}

#[derive(Deserialize)]
struct ProviderWire {
    #[serde(default)]
    source: Option<String>,
    #[serde(default)]
    checked: Option<String>,
    models: BTreeMap<String, EntryWire>,
}

/// One model as written; fields the gateway does not price by (notes, audio rates, off-peak
/// windows) are read past.
#[derive(Deserialize)]
struct EntryWire {
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    local: bool,
    #[serde(default)]
    checked: Option<String>,
    #[serde(default)]
    source: Option<String>,
    #[serde(flatten)]
    rates: RatesWire,
    #[serde(default)]
    tiers: Vec<TierWire>,
    #[serde(default)]
    changes: Vec<ChangeWire>,
    #[serde(default)]
    image: BTreeMap<String, Usd>,
    #[serde(default)]
    image_output: Option<PerMillion>,
}

#[derive(Deserialize, Default)]
struct RatesWire {
    #[serde(default)]
    input: Option<PerMillion>,
    #[serde(default)]
    cached_input: Option<PerMillion>,
    #[serde(default)]
    cache_write: Option<PerMillion>,
    #[serde(default)]
    output: Option<PerMillion>,
}

impl RatesWire {
    fn rates(&self) -> Rates {
        Rates { input: self.input, cached_input: self.cached_input, cache_write: self.cache_write, output: self.output }
    }
}

#[derive(Deserialize)]
struct TierWire {
    above_input_tokens: u64,
    #[serde(flatten)]
    rates: RatesWire,
}

#[derive(Deserialize)]
struct ChangeWire {
    from: String,
    #[serde(flatten)]
    rates: RatesWire,
}

/// One priced model of the table.
#[derive(Debug, Clone)]
pub struct Entry {
    pub provider: String,
    pub model: String,
    pub price: Arc<Price>,
    /// `chat`, `embedding` or `image`.
    pub kind: String,
    /// `active`, `legacy`, `retired`...
    pub status: String,
    /// Runs on the operator's machine: no charge.
    pub local: bool,
    /// When the price was last checked, and where.
    pub checked: Option<String>,
    pub source: Option<String>,
}

/// The whole table, indexed by every id (model names and aliases).
#[derive(Debug, Default)]
pub struct Table {
    pub updated: Option<String>,
    entries: Vec<Entry>,
    by_id: HashMap<String, Vec<usize>>,
}

/// Why a table cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("not a price table: {0}")]
    Yaml(#[from] serde_yaml::Error),
    #[error("version {0} is not one this gateway reads (1)")]
    Version(u32),
    #[error("{provider}/{model}: `{date}` is not a date (YYYY-MM-DD)")]
    Date { provider: String, model: String, date: String },
}

impl Table {
    /// The table shipped in the binary (checked by a test, so it always reads).
    pub fn shipped() -> Table {
        Table::parse(SHIPPED).expect("the shipped price table reads")
    }

    pub fn parse(text: &str) -> Result<Table, TableError> {
        let file: TableFile = serde_yaml::from_str(text)?;
        if file.version != 1 {
            return Err(TableError::Version(file.version));
        }
        let mut table = Table { updated: file.updated, ..Table::default() };
        for (provider, p) in file.providers {
            for (model, e) in p.models {
                let mut changes = Vec::new();
                for c in &e.changes {
                    let from = day_start(&c.from).ok_or_else(|| TableError::Date {
                        provider: provider.clone(),
                        model: model.clone(),
                        date: c.from.clone(),
                    })?;
                    changes.push(Change { from, rates: c.rates.rates() });
                }
                let mut rates = e.rates.rates();
                // An image model priced by its image tokens alone.
                if rates.output.is_none() && e.image.is_empty() {
                    rates.output = e.image_output;
                }
                let price = Price {
                    rates,
                    tiers: e
                        .tiers
                        .iter()
                        .map(|t| Tier { above_input_tokens: t.above_input_tokens, rates: t.rates.rates() })
                        .collect(),
                    changes,
                    images: e.image.into_iter().collect(),
                };
                let index = table.entries.len();
                for id in std::iter::once(&model).chain(&e.aliases) {
                    table.by_id.entry(id.clone()).or_default().push(index);
                }
                table.entries.push(Entry {
                    provider: provider.clone(),
                    model,
                    price: Arc::new(price),
                    kind: e.kind.unwrap_or_else(|| "chat".into()),
                    status: e.status.unwrap_or_else(|| "active".into()),
                    local: e.local,
                    checked: e.checked.or_else(|| p.checked.clone()),
                    source: e.source.or_else(|| p.source.clone()),
                });
            }
        }
        Ok(table)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry for model id `model` (a name or an alias; a `provider/` or `models/` prefix
    /// is read past), from `provider` when several providers list it. `None` when no entry
    /// has it, or several do and none is `provider`'s: a guess would be a wrong bill.
    pub fn lookup(&self, model: &str, provider: Option<&str>) -> Option<&Entry> {
        let ids = self.by_id.get(model).or_else(|| self.by_id.get(model.rsplit('/').next()?))?;
        let mut found = ids.iter().map(|&i| &self.entries[i]);
        if ids.len() == 1 {
            return found.next();
        }
        found.find(|e| Some(e.provider.as_str()) == provider)
    }
}

fn day_start(date: &str) -> Option<UnixMs> {
    let day = NaiveDate::parse_from_str(date.trim(), "%Y-%m-%d").ok()?;
    let ms = day.and_hms_opt(0, 0, 0)?.and_utc().timestamp_millis();
    Some(UnixMs(u64::try_from(ms).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Counts;

    #[test]
    fn the_shipped_table_reads_and_prices_the_example_configs_models() {
        let table = Table::shipped();
        assert!(table.len() >= 100, "{}", table.len());
        let mini = table.lookup("gpt-4o-mini", None).expect("gpt-4o-mini");
        assert_eq!(mini.price.rates.input.unwrap().to_string(), "0.15");
        assert_eq!(table.lookup("gpt-4o-2024-08-06", None).unwrap().model, "gpt-4o", "by alias");
        assert_eq!(table.lookup("openai/gpt-4o-mini", None).unwrap().model, "gpt-4o-mini", "a prefix is read past");
        let local = table.lookup("llama3.2", None).unwrap();
        assert!(local.local);
        assert!(table.lookup("no-such-model", None).is_none());
        // Every entry prices something: no silent $0 but the local ones.
        for e in &table.entries {
            let p = &e.price;
            let priced = p.rates.input.is_some() || p.rates.output.is_some() || !p.images.is_empty();
            assert!(priced, "{}/{} prices nothing", e.provider, e.model);
        }
    }

    #[test]
    fn tiers_and_dated_changes_come_through() {
        let table = Table::shipped();
        let astra = table.lookup("gpt-6.2-astra", Some("openai")).unwrap();
        let long = Counts { prompt: 300_000, ..Counts::default() };
        assert_eq!(astra.price.cost(UnixMs(0), &long, None).usd.to_string(), "4.8", "300k at the tier's $16");
        assert!(table.entries.iter().any(|e| !e.price.changes.is_empty()), "some model has a dated change");
    }

    #[test]
    fn a_model_two_providers_list_is_priced_only_for_the_one_named() {
        let text = r#"
version: 1
providers:
  a: {models: {m: {input: "1", output: "2"}}}
  b: {models: {m: {input: "3", output: "4"}}}
"#;
        let table = Table::parse(text).unwrap();
        assert!(table.lookup("m", None).is_none(), "ambiguous");
        assert_eq!(table.lookup("m", Some("b")).unwrap().price.rates.input.unwrap().to_string(), "3");
        assert!(Table::parse("version: 2\nproviders: {}").is_err());
        assert!(Table::parse("version: 1\nproviders: {a: {models: {m: {input: \"x\"}}}}").is_err());
    }
}
