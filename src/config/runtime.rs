//! The runtime file (`runtime_file`, edited through the admin API and WebUI): runtime sources,
//! tombstones of deleted base sources, source templates, the AUTO chains, routes, keys and key
//! scopes. Merged with config.yaml by name into the effective configuration.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    ChannelSelection, Config, GroupName, KeyConfig, KeyName, PriceOverride, RouteConfig, Secret, SourceConfig,
    SourceName,
};
use crate::domain::{Budget, PeriodName, Quota};

/// One AUTO slot as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SlotConfig {
    pub model: String,
    /// Unset: every source serving `model`, in config order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceName>,
    /// Lower tiers are tried first; slots of one tier are ordered by `channel_selection`.
    #[serde(default = "default_tier")]
    pub tier: u32,
    /// Tokens this slot may use per `period`; unset or 0 = unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_quota: Option<u64>,
    #[serde(default)]
    pub period: PeriodName,
    /// For `period: nhour`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<u32>,
}

fn default_tier() -> u32 {
    1
}

/// A validated slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSlot {
    pub model: String,
    pub source: Option<SourceName>,
    pub tier: u32,
    pub quota: Option<Quota>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AutoChains {
    pub chat: Vec<ChainSlot>,
    /// Absent: AUTO images go to every source with an image model, in config order.
    pub image: Option<Vec<ChainSlot>>,
}

/// Every source field but `name` and `api_key`: many sources that differ only in their key.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct SourceTemplate {
    pub name: String,
    #[serde(flatten)]
    pub fields: BTreeMap<String, Value>,
}

impl SourceTemplate {
    /// A source from this template, checked like a source in config.yaml.
    pub fn instantiate(&self, name: &SourceName, api_key: &Secret) -> Result<SourceConfig, String> {
        let mut fields: serde_json::Map<String, Value> = self.fields.clone().into_iter().collect();
        fields.insert("name".into(), Value::String(name.to_string()));
        fields.insert("api_key".into(), Value::String(api_key.expose().to_string()));
        serde_path_to_error::deserialize(Value::Object(fields)).map_err(|e| format!("{}: {}", e.path(), e.inner()))
    }
}

/// A key created through the admin API: only its digest is kept; the secret was shown once.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeKey {
    pub name: KeyName,
    /// sha256 of the secret, hex.
    pub key_sha256: String,
    /// The secret masked (`sk-…abcd`), to recognise it by.
    #[serde(default)]
    pub hint: String,
    pub models: Vec<String>,
    #[serde(default)]
    pub group: GroupName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_quota: Option<u64>,
    #[serde(default)]
    pub period: PeriodName,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<u32>,
    #[serde(default)]
    pub created_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<crate::config::PolicyName>,
}

impl RuntimeKey {
    pub fn as_key_config(&self) -> KeyConfig {
        KeyConfig {
            name: self.name.clone(),
            key: Secret::default(),
            models: self.models.clone(),
            group: self.group.clone(),
            token_quota: self.token_quota,
            period: self.period,
            hours: self.hours,
            budget: self.budget,
            cache: self.cache,
            policies: self.policies.clone(),
        }
    }
}

/// The runtime file as written.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeFile {
    /// Sources added at run time; one named like a base source replaces it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceConfig>,
    /// Base sources (config.yaml) deleted at run time; re-adding one by name brings it back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted_sources: Vec<SourceName>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub source_templates: Vec<SourceTemplate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub auto: Vec<SlotConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_image: Option<Vec<SlotConfig>>,
    /// Routes added or changed at run time; one with a base route's group and alias replaces it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteConfig>,
    /// Base routes deleted at run time, by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted_routes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<RuntimeKey>,
    /// Base keys deleted at run time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deleted_keys: Vec<KeyName>,
    /// Model scopes of base keys, changed at run time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub key_scopes: BTreeMap<KeyName, Vec<String>>,
    /// Budgets of base keys, set (or lifted: `null`) at run time.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub key_budgets: BTreeMap<KeyName, Option<Budget>>,
    /// config.yaml's `channel_selection`, changed at run time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_selection: Option<ChannelSelection>,
    /// Prices set at run time; one for the same source and model replaces config.yaml's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prices: Vec<PriceOverride>,
    /// Policies defined at run time (an uploaded component, or a built-in with other settings);
    /// one named like a config.yaml policy replaces it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<crate::config::PolicyConfig>,
    /// Personal admin tokens, by digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub admin_tokens: Vec<crate::config::AdminTokenRecord>,
}

/// config.yaml's sources, routes and keys with the runtime file's on top, by name. (The AUTO
/// chains are validated separately: see `load::with_runtime`.)
pub fn merge(base: &Config, rf: &RuntimeFile) -> Config {
    let mut config = base.clone();
    config.channel_selection = rf.channel_selection.unwrap_or(base.channel_selection);
    config.sources =
        overlay(base.sources.iter().filter(|s| !rf.deleted_sources.contains(&s.name)), &rf.sources, |a, b| {
            a.name == b.name
        });
    config.routes = overlay(base.routes.iter().filter(|r| !rf.deleted_routes.contains(&r.id())), &rf.routes, |a, b| {
        a.group == b.group && a.alias == b.alias
    });
    config.prices = overlay(base.prices.iter(), &rf.prices, |a, b| a.source == b.source && a.model == b.model);
    config.policies = overlay(base.policies.iter(), &rf.policies, |a, b| a.name == b.name);
    config.keys = base
        .keys
        .iter()
        .filter(|k| !rf.deleted_keys.contains(&k.name) && !rf.keys.iter().any(|r| r.name == k.name))
        .map(|k| {
            let mut k = k.clone();
            if let Some(models) = rf.key_scopes.get(&k.name) {
                k.models = models.clone();
            }
            if let Some(budget) = rf.key_budgets.get(&k.name) {
                k.budget = *budget;
            }
            k
        })
        .collect();
    config
}

/// `base` in order with same-named entries replaced from `extra`, then the rest of `extra`.
fn overlay<'a, T: Clone + 'a>(base: impl Iterator<Item = &'a T>, extra: &[T], same: impl Fn(&T, &T) -> bool) -> Vec<T> {
    let mut out: Vec<T> = base.map(|b| extra.iter().find(|e| same(b, e)).unwrap_or(b).clone()).collect();
    for e in extra {
        if !out.iter().any(|o| same(o, e)) {
            out.push(e.clone());
        }
    }
    out
}
