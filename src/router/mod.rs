//! Model resolution: what a client's `model` string names. `source/model` or `source:model`
//! first (when the prefix is a source that serves it), then every source with that exact model,
//! then the AUTO chain (model `AUTO`, or `default_model` for names nobody serves).

use crate::config::{Config, GroupName, ModelConfig, ModelKind, RouteConfig, RouteMode, SourceConfig};
use crate::domain::{Period, Quota, SlotKey};

/// The model name that selects the AUTO chain.
pub use crate::domain::AUTO;

// A slot is a resolved pair's identity: the scheduler's unit.
impl SlotKey {
    pub fn of(r: &Resolved<'_>) -> SlotKey {
        SlotKey { source: r.source.name.clone(), model: r.model.name.clone() }
    }
}

/// The source and model entry a request resolved to.
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'a> {
    pub source: &'a SourceConfig,
    pub model: &'a ModelConfig,
}

impl Resolved<'_> {
    /// `source/model`, the canonical name of this pair.
    pub fn qualified(&self) -> String {
        format!("{}/{}", self.source.name, self.model.name)
    }
}

/// A candidate as routing planned it: its tier (0 for a named model) and its slot's quota.
#[derive(Debug, Clone, Copy)]
pub struct Planned<'a> {
    pub resolved: Resolved<'a>,
    pub tier: u32,
    pub quota: Option<Quota>,
    /// Its price (1M input + 1M output tokens), once the door that knows prices set it.
    pub price: Option<crate::domain::Usd>,
}

/// What a request's model resolved to.
#[derive(Debug)]
pub enum Resolution<'a> {
    /// A model some source serves (one source when prefixed).
    Named(Vec<Resolved<'a>>),
    /// A route alias of the key's group: its providers by priority (a `direct` route: the
    /// first enabled one only), each priority a tier.
    Route {
        route: &'a RouteConfig,
        candidates: Vec<Planned<'a>>,
    },
    /// The AUTO chain: asked for by name, or reached through `default_model` from a name no
    /// source serves (`fallback_from`).
    Auto {
        candidates: Vec<Planned<'a>>,
        fallback_from: Option<&'a str>,
    },
    Unknown,
}

/// Resolves `requested` for an endpoint serving `kind`, for a key of `group`.
pub fn route<'a>(config: &'a Config, requested: &'a str, kind: ModelKind, group: &GroupName) -> Resolution<'a> {
    if requested == AUTO {
        return Resolution::Auto { candidates: auto_chain(config, kind), fallback_from: None };
    }
    let prefixed = resolve_prefixed(config, requested);
    if !prefixed.is_empty() {
        return Resolution::Named(prefixed);
    }
    if let Some(route) = config.route(group, requested) {
        return Resolution::Route { route, candidates: route_candidates(config, route) };
    }
    let named = resolve(config, requested);
    if !named.is_empty() {
        return Resolution::Named(named);
    }
    match config.settings.default_model.as_deref() {
        Some(AUTO) => Resolution::Auto { candidates: auto_chain(config, kind), fallback_from: Some(requested) },
        Some(default) if default != requested => match resolve(config, default) {
            named if named.is_empty() => Resolution::Unknown,
            named => Resolution::Named(named),
        },
        _ => Resolution::Unknown,
    }
}

/// The AUTO chain for `kind`, slot by slot in chain order (a slot without a source expands to
/// every source serving its model). Images without an `auto_image` chain: every source's image
/// models in config order.
pub fn auto_chain(config: &Config, kind: ModelKind) -> Vec<Planned<'_>> {
    let slots = match kind {
        ModelKind::Chat => Some(&config.auto.chat),
        ModelKind::Image => config.auto.image.as_ref(),
        ModelKind::Embedding => return Vec::new(),
    };
    let Some(slots) = slots else {
        return config
            .sources
            .iter()
            .flat_map(|source| source.models.iter().map(move |model| Resolved { source, model }))
            .filter(|r| r.model.kind == kind)
            .map(|resolved| Planned { resolved, tier: 1, quota: None, price: None })
            .collect();
    };
    let mut out = Vec::new();
    for slot in slots {
        for source in config.sources.iter().filter(|s| slot.source.as_ref().is_none_or(|n| &s.name == n)) {
            // A slot naming only a model takes the sources that serve that name plainly.
            let plain = |m: &&ModelConfig| slot.source.is_some() || !m.qualified_only;
            if let Some(model) = source.model(&slot.model).filter(|m| m.kind == kind).filter(plain) {
                out.push(Planned {
                    resolved: Resolved { source, model },
                    tier: slot.tier,
                    quota: slot.quota,
                    price: None,
                });
            }
        }
    }
    out
}

/// A route's enabled providers, lowest priority first, each priority its own tier.
pub fn route_candidates<'a>(config: &'a Config, route: &'a RouteConfig) -> Vec<Planned<'a>> {
    let mut out: Vec<Planned<'a>> = route
        .enabled_providers()
        .into_iter()
        .filter_map(|p| {
            let source = config.source(&p.source)?;
            let model = source.model(&p.model)?;
            Some(Planned { resolved: Resolved { source, model }, tier: p.priority, quota: None, price: None })
        })
        .collect();
    if matches!(route.mode, RouteMode::Direct) {
        out.truncate(1);
    }
    out
}

/// The quota periods `slot`'s token use is counted in: one per distinct period of the chain
/// slots (chat and image) that cover it.
pub fn quota_periods(config: &Config, slot: &SlotKey) -> Vec<Period> {
    let chains = config.auto.chat.iter().chain(config.auto.image.iter().flatten());
    let mut periods: Vec<Period> = chains
        .filter(|s| s.model == slot.model && s.source.as_ref().is_none_or(|n| *n == slot.source))
        .filter_map(|s| s.quota.map(|q| q.period))
        .collect();
    periods.sort();
    periods.dedup();
    periods
}

/// Every (source, model) `requested` names, in config order; empty when the gateway does not
/// know it. A prefix names one source; a plain name may be served by several (failover).
pub fn resolve<'a>(config: &'a Config, requested: &str) -> Vec<Resolved<'a>> {
    let prefixed = resolve_prefixed(config, requested);
    if !prefixed.is_empty() {
        return prefixed;
    }
    config
        .sources
        .iter()
        .filter_map(|source| {
            source.model(requested).filter(|m| !m.qualified_only).map(|model| Resolved { source, model })
        })
        .collect()
}

/// `source/model` or `source:model`. Model names may contain `/` (`meta-llama/...`) or `:`
/// (`llama3:8b`): a prefix only counts when it names a source that serves the rest.
fn resolve_prefixed<'a>(config: &'a Config, requested: &str) -> Vec<Resolved<'a>> {
    for sep in ['/', ':'] {
        if let Some((prefix, model)) = requested.split_once(sep)
            && let Some(source) = config.sources.iter().find(|s| s.name.as_str() == prefix)
            && let Some(model) = source.model(model)
        {
            return vec![Resolved { source, model }];
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    static G: std::sync::LazyLock<GroupName> = std::sync::LazyLock::new(GroupName::default);

    const SOURCES: &str = r#"
sources:
  - name: a
    base_url: http://127.0.0.1:1
    models: [{name: gpt-4o}, {name: "meta-llama/Llama-3"}, {name: dall-e-3, kind: image}]
  - name: b
    base_url: http://127.0.0.1:2
    models: [{name: gpt-4o}, {name: "llama3:8b"}, {name: mini}, {name: imagen, kind: image}]
"#;

    fn config() -> Config {
        crate::config::load_str(SOURCES, Path::new("t.yaml"), &|_| None, &["openai"]).unwrap()
    }

    fn with_runtime(extra: &str, runtime: &str) -> Config {
        let text = format!("{extra}\n{SOURCES}");
        let c = crate::config::load_str(&text, Path::new("t.yaml"), &|_| None, &["openai"]).unwrap();
        crate::config::load_runtime_str(runtime, Path::new("runtime.yaml"), &c, &["openai"]).unwrap()
    }

    fn auto_names(r: Resolution) -> Vec<String> {
        match r {
            Resolution::Auto { candidates, .. } => {
                candidates.iter().map(|p| format!("{}@{}", p.resolved.qualified(), p.tier)).collect()
            }
            other => panic!("not AUTO: {other:?}"),
        }
    }

    #[test]
    fn auto_expands_the_chain_in_order_and_ignores_slots_of_the_other_kind() {
        let c = with_runtime(
            "",
            "auto:\n  - {model: mini, source: b, tier: 1, token_quota: 1000, period: hour}\n  - {model: gpt-4o, tier: 2}\n  - {model: dall-e-3, source: a}\n",
        );
        assert_eq!(auto_names(route(&c, "AUTO", ModelKind::Chat, &G)), ["b/mini@1", "a/gpt-4o@2", "b/gpt-4o@2"]);
        let Resolution::Auto { candidates, .. } = route(&c, "AUTO", ModelKind::Chat, &G) else { unreachable!() };
        assert_eq!(candidates[0].quota, Some(Quota { tokens: 1000, period: crate::domain::Period::Hour }));
        assert_eq!(
            auto_names(route(&c, "AUTO", ModelKind::Image, &G)),
            ["a/dall-e-3@1", "b/imagen@1"],
            "no auto_image chain: every image model in config order"
        );
        let c = with_runtime("", "auto_image:\n  - {model: imagen, source: b}\n  - {model: gpt-4o, source: a}\n");
        assert_eq!(auto_names(route(&c, "AUTO", ModelKind::Image, &G)), ["b/imagen@1"], "chat slots are ignored");
    }

    #[test]
    fn default_model_auto_catches_unknown_names_only() {
        let c = with_runtime("default_model: AUTO", "auto:\n  - {model: mini}\n");
        assert!(matches!(route(&c, "gpt-4o", ModelKind::Chat, &G), Resolution::Named(v) if v.len() == 2));
        match route(&c, "gpt-9", ModelKind::Chat, &G) {
            Resolution::Auto { fallback_from, candidates } => {
                assert_eq!(fallback_from, Some("gpt-9"));
                assert_eq!(candidates.len(), 1);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(route(&config(), "gpt-9", ModelKind::Chat, &G), Resolution::Unknown));
        let c = with_runtime("default_model: mini", "");
        assert!(
            matches!(route(&c, "gpt-9", ModelKind::Chat, &G), Resolution::Named(v) if v[0].qualified() == "b/mini")
        );
    }

    #[test]
    fn route_aliases_come_after_prefixes_and_before_model_names_within_the_keys_group() {
        let routes = r#"
routes:
  - alias: gpt-4o
    mode: auto-select
    providers: [{source: b, model: mini, priority: 1}, {source: a, model: gpt-4o, priority: 0}, {source: b, model: gpt-4o, enabled: false}]
  - {alias: one, providers: [{source: b, model: mini, priority: 2}, {source: a, model: gpt-4o, priority: 1}]}
  - {alias: one, group: team, providers: [{source: b, model: gpt-4o}]}
"#;
        let c = with_runtime(routes, "");
        let names = |r: Resolution| match r {
            Resolution::Route { candidates, .. } => {
                candidates.iter().map(|p| format!("{}@{}", p.resolved.qualified(), p.tier)).collect::<Vec<_>>()
            }
            other => panic!("not a route: {other:?}"),
        };
        assert_eq!(
            names(route(&c, "gpt-4o", ModelKind::Chat, &G)),
            ["a/gpt-4o@0", "b/mini@1"],
            "the alias hides the model name"
        );
        assert!(matches!(route(&c, "b/gpt-4o", ModelKind::Chat, &G), Resolution::Named(v) if v.len() == 1));
        assert_eq!(
            names(route(&c, "one", ModelKind::Chat, &G)),
            ["a/gpt-4o@1"],
            "direct: the first enabled provider only"
        );
        let team = GroupName::new("team");
        assert_eq!(names(route(&c, "one", ModelKind::Chat, &team)), ["b/gpt-4o@0"]);
        assert!(
            matches!(route(&c, "gpt-4o", ModelKind::Chat, &team), Resolution::Named(v) if v.len() == 2),
            "another group's alias is invisible"
        );
    }

    #[test]
    fn route_errors_name_the_field() {
        let bad = r#"
routes:
  - {alias: x, mode: fusion, providers: [{source: a, model: gpt-4o}]}
  - {alias: y, mode: adapter, adapter_config: {vision_alias: nowhere}, providers: [{source: a, model: gpt-4o, enabled: false}]}
  - {alias: AUTO, providers: [{source: a, model: gpt-4o}]}
  - {alias: z, providers: [{source: a, model: mini}]}
"#;
        let e = crate::config::load_str(&format!("{bad}{SOURCES}"), Path::new("c.yaml"), &|_| None, &["openai"])
            .unwrap_err()
            .to_string();
        // A route that does not parse (a mode without its settings) is named once, and the
        // entries after it keep their own positions.
        assert!(e.contains("routes[3].providers[0]: source `a` does not serve model `mini`"), "{e}");
        assert!(e.contains("routes[0].fusion_config: mode fusion needs fusion_config"), "{e}");
        assert!(e.contains("routes[1].providers: has no enabled provider"), "{e}");
        assert!(e.contains("routes[1].adapter_config.vision_alias: no route or model named `nowhere`"), "{e}");
        assert!(e.contains("routes[2].alias: `AUTO` cannot be a route alias"), "{e}");
    }

    #[test]
    fn runtime_file_errors_name_the_file_line_and_fix() {
        let c = config();
        let bad = "auto:\n  - {model: mini, source: a}\n  - {model: nope}\n  - {model: mini, period: nhour}\n  - {model: mini, tier: high}\n";
        let e =
            crate::config::load_runtime_str(bad, Path::new("runtime.yaml"), &c, &["openai"]).unwrap_err().to_string();
        assert!(e.contains("runtime.yaml:2: auto[0].model: source `a` does not serve model `mini`"), "{e}");
        assert!(e.contains("runtime.yaml:3: auto[1].model: no source serves model `nope`"), "{e}");
        assert!(e.contains("auto[2].hours: period nhour needs hours"), "{e}");
        assert!(e.contains("auto[3].tier"), "{e}");
    }

    fn pick(c: &Config, m: &str) -> Option<String> {
        resolve(c, m).first().map(|r| r.qualified())
    }

    #[test]
    fn prefixes_pick_the_source() {
        let c = config();
        assert_eq!(pick(&c, "b/gpt-4o").as_deref(), Some("b/gpt-4o"));
        assert_eq!(pick(&c, "b:gpt-4o").as_deref(), Some("b/gpt-4o"));
        assert_eq!(pick(&c, "a/gpt-4o").as_deref(), Some("a/gpt-4o"));
    }

    #[test]
    fn exact_names_list_every_source_in_config_order() {
        let c = config();
        let all: Vec<String> = resolve(&c, "gpt-4o").iter().map(|r| r.qualified()).collect();
        assert_eq!(all, ["a/gpt-4o", "b/gpt-4o"]);
        assert_eq!(resolve(&c, "b/gpt-4o").len(), 1, "a prefix pins the source");
    }

    #[test]
    fn separators_inside_model_names_are_not_prefixes() {
        let c = config();
        assert_eq!(pick(&c, "meta-llama/Llama-3").as_deref(), Some("a/meta-llama/Llama-3"));
        assert_eq!(pick(&c, "llama3:8b").as_deref(), Some("b/llama3:8b"));
        assert_eq!(pick(&c, "b:llama3:8b").as_deref(), Some("b/llama3:8b"));
    }

    #[test]
    fn unknown_models_and_wrong_prefixes_resolve_to_nothing() {
        let c = config();
        assert!(pick(&c, "gpt-5").is_none());
        assert!(pick(&c, "a/llama3:8b").is_none());
        assert!(pick(&c, "nosuch/gpt-4o").is_none());
    }
}
