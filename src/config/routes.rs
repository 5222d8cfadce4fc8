//! `routes:` — aliases with a processing mode (Keyway's): `direct`, `auto-select`, `adapter`
//! (vision: images described as text) and `fusion` (candidates in parallel, a judge answers).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{GroupName, PolicyName, SourceName};

/// A route: what clients send as `model`, what it does with the request, and its providers.
/// Written as config.yaml writes it (`mode` plus `adapter_config` / `fusion_config`): see
/// `RouteWire`; a mode without its settings never gets this far.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(try_from = "RouteWire", into = "RouteWire")]
pub struct RouteConfig {
    pub alias: String,
    pub group: GroupName,
    pub mode: RouteMode,
    pub providers: Vec<RouteProvider>,
    /// Whether this route's answers are cached (over its sources' say; a key's own wins).
    pub cache: Option<bool>,
    /// Whether a request like an earlier one (by its last user message's embedding) is
    /// answered with the earlier one's kept answer (`cache.semantic`).
    pub semantic_cache: bool,
    /// Policies (`policies[].name`) its requests pass, after the global and the key's.
    pub policies: Vec<PolicyName>,
}

/// A route as config.yaml, the runtime file and the admin API write it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RouteWire {
    /// What clients send as `model`.
    alias: String,
    #[serde(default)]
    group: GroupName,
    #[serde(default)]
    mode: ModeName,
    #[serde(default)]
    providers: Vec<RouteProvider>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adapter_config: Option<VisionConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fusion_config: Option<FusionConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cache: Option<bool>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    semantic_cache: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    policies: Vec<PolicyName>,
}

impl TryFrom<RouteWire> for RouteConfig {
    /// `FIELD: what is wrong`, the field under the route (the config loader reads it so).
    type Error = String;

    fn try_from(w: RouteWire) -> Result<RouteConfig, String> {
        let mode = match (w.mode, w.adapter_config, w.fusion_config) {
            (ModeName::Direct, ..) => RouteMode::Direct,
            (ModeName::AutoSelect, ..) => RouteMode::AutoSelect,
            (ModeName::Adapter, Some(vision), _) => RouteMode::Vision(vision),
            (ModeName::Adapter, None, _) => return Err("adapter_config: mode adapter needs adapter_config".into()),
            (ModeName::Fusion, _, Some(fusion)) => RouteMode::Fusion(fusion),
            (ModeName::Fusion, _, None) => return Err("fusion_config: mode fusion needs fusion_config".into()),
        };
        Ok(RouteConfig {
            alias: w.alias,
            group: w.group,
            mode,
            providers: w.providers,
            cache: w.cache,
            semantic_cache: w.semantic_cache,
            policies: w.policies,
        })
    }
}

impl From<RouteConfig> for RouteWire {
    fn from(r: RouteConfig) -> RouteWire {
        let name = r.mode.name();
        let (adapter_config, fusion_config) = match r.mode {
            RouteMode::Vision(v) => (Some(v), None),
            RouteMode::Fusion(f) => (None, Some(f)),
            RouteMode::Direct | RouteMode::AutoSelect => (None, None),
        };
        RouteWire {
            alias: r.alias,
            group: r.group,
            mode: name,
            providers: r.providers,
            adapter_config,
            fusion_config,
            cache: r.cache,
            semantic_cache: r.semantic_cache,
            policies: r.policies,
        }
    }
}

impl RouteConfig {
    /// A stable id for the admin API: derived from group and alias.
    pub fn id(&self) -> String {
        short_id(&[self.group.as_str(), &self.alias])
    }

    /// A stable id for one provider of this route.
    pub fn provider_id(&self, p: &RouteProvider) -> String {
        short_id(&[self.group.as_str(), &self.alias, p.source.as_str(), &p.model])
    }

    /// Enabled providers, lowest `priority` first (config order among equals).
    pub fn enabled_providers(&self) -> Vec<&RouteProvider> {
        let mut providers: Vec<&RouteProvider> = self.providers.iter().filter(|p| p.enabled).collect();
        providers.sort_by_key(|p| p.priority);
        providers
    }
}

/// What a route does with a request, with the settings that mode needs.
#[derive(Debug, Clone)]
pub enum RouteMode {
    /// The alias names its first enabled provider; no failover.
    Direct,
    /// Providers by priority, failing over through the scheduler.
    AutoSelect,
    /// Images are described by the vision route and replaced by text, then auto-select
    /// (written `mode: adapter`, Keyway's name, with `adapter_config`).
    Vision(VisionConfig),
    /// Every provider answers; the judge route makes the final answer.
    Fusion(FusionConfig),
}

impl RouteMode {
    fn name(&self) -> ModeName {
        match self {
            RouteMode::Direct => ModeName::Direct,
            RouteMode::AutoSelect => ModeName::AutoSelect,
            RouteMode::Vision(_) => ModeName::Adapter,
            RouteMode::Fusion(_) => ModeName::Fusion,
        }
    }

    /// A fusion route's settings.
    pub fn fusion(&self) -> Option<&FusionConfig> {
        match self {
            RouteMode::Fusion(f) => Some(f),
            _ => None,
        }
    }

    /// The mode as config.yaml writes it (and request logs show it).
    pub fn as_str(&self) -> &'static str {
        match self.name() {
            ModeName::Direct => "direct",
            ModeName::AutoSelect => "auto-select",
            ModeName::Adapter => "adapter",
            ModeName::Fusion => "fusion",
        }
    }
}

/// `mode:` as written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
enum ModeName {
    #[default]
    Direct,
    AutoSelect,
    #[serde(alias = "vision")]
    Adapter,
    Fusion,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteProvider {
    pub source: SourceName,
    /// The model as the source lists it (its `name`).
    pub model: String,
    /// Lower goes first; equal priorities are ordered by `channel_selection`.
    #[serde(default)]
    pub priority: u32,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VisionConfig {
    /// The route (or model) that describes images.
    pub vision_alias: String,
    #[serde(default)]
    pub fallback: VisionFallback,
    /// Images one request may carry: each is a call to the vision route (fan-out), so past
    /// this the request is refused with 400.
    #[serde(default = "default_max_images")]
    pub max_images: u32,
}

fn default_max_images() -> u32 {
    8
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VisionFallback {
    /// A failed description becomes a placeholder.
    SkipImage,
    /// A failed description fails the request.
    #[default]
    Error,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FusionConfig {
    /// The route (or model) that judges the candidates.
    pub judge_alias: String,
    #[serde(default)]
    pub strategy: FusionStrategy,
    #[serde(default = "two")]
    pub min_candidates: usize,
    /// Per candidate.
    #[serde(default = "thirty")]
    pub timeout_seconds: super::Seconds,
}

fn two() -> usize {
    2
}
fn thirty() -> super::Seconds {
    super::Seconds::from_secs(30)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FusionStrategy {
    /// The judge takes the best of each answer and writes one.
    #[default]
    CompareAndSynthesize,
    /// The judge gives the answer most candidates agree on.
    MajorityVote,
    /// The judge ranks the answers; the best is returned verbatim.
    Ranked,
}

/// 12 hex characters of sha256 over the parts (NUL-separated).
fn short_id(parts: &[&str]) -> String {
    let digest = Sha256::digest(parts.join("\0").as_bytes());
    digest[..6].iter().map(|b| format!("{b:02x}")).collect()
}
