//! Checks of routes (aliases, providers, vision and judge aliases, fusion settings) and of the
//! AUTO chains, whose slots must name a source that serves their model.

use std::collections::HashSet;

use super::Collector;
use crate::config::runtime::{ChainSlot, SlotConfig};
use crate::config::{Config, ModelKind, RouteConfig, RouteMode, SourceConfig, SourceName};
use crate::domain::{AUTO, Quota};

impl Collector<'_> {
    /// Checks `routes`; their vision and judge aliases may name any of `all_routes`.
    pub(super) fn check_routes(
        &mut self,
        routes: &[RouteConfig],
        all_routes: &[RouteConfig],
        sources: &[SourceConfig],
    ) {
        let mut seen = HashSet::new();
        let serves =
            |source: &SourceName, model: &str| sources.iter().any(|s| &s.name == source && s.model(model).is_some());
        let known = |group: &crate::config::GroupName, alias: &str| {
            all_routes.iter().chain(routes).any(|r| &r.group == group && r.alias == alias)
                || sources.iter().any(|s| s.model(alias).is_some())
        };
        for (i, r) in routes.iter().enumerate() {
            let i = self.positions.get("routes").and_then(|p| p.get(i)).copied().unwrap_or(i);
            let at = |f: &str| format!("routes[{i}].{f}");
            if r.alias.is_empty() || r.alias == AUTO {
                self.error(&at("alias"), format!("`{}` cannot be a route alias", r.alias), "choose another name");
            } else if !seen.insert((r.group.clone(), r.alias.clone())) {
                self.error(
                    &at("alias"),
                    format!("alias `{}` is used twice in group `{}`", r.alias, r.group),
                    "give every route of a group its own alias",
                );
            }
            if r.providers.iter().all(|p| !p.enabled) {
                self.error(&at("providers"), "has no enabled provider", "add one: - {source: NAME, model: MODEL}");
            }
            for (j, p) in r.providers.iter().enumerate() {
                if !serves(&p.source, &p.model) {
                    self.error(
                        &at(&format!("providers[{j}]")),
                        format!("source `{}` does not serve model `{}`", p.source, p.model),
                        "name a source from `sources:` and one of its models",
                    );
                }
            }
            match &r.mode {
                RouteMode::Vision(v) if !known(&r.group, &v.vision_alias) => self.error(
                    &at("adapter_config.vision_alias"),
                    format!("no route or model named `{}`", v.vision_alias),
                    "name a route of the same group, or a model",
                ),
                RouteMode::Fusion(f) => {
                    if !known(&r.group, &f.judge_alias) {
                        self.error(
                            &at("fusion_config.judge_alias"),
                            format!("no route or model named `{}`", f.judge_alias),
                            "name a route of the same group, or a model",
                        );
                    }
                    if f.min_candidates == 0 {
                        self.error(&at("fusion_config.min_candidates"), "must be at least 1", "e.g. 2");
                    }
                }
                _ => {}
            }
        }
    }

    /// Validates one AUTO chain: each slot's source serves its model. Slots of the other kind
    /// are dropped (a chat chain ignores image slots and vice versa).
    pub(super) fn chain(
        &mut self,
        slots: &[SlotConfig],
        field: &str,
        config: &Config,
        kind: ModelKind,
    ) -> Vec<ChainSlot> {
        let mut out = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            let at = |f: &str| format!("{field}[{i}].{f}");
            let serving: Vec<&SourceConfig> = config
                .sources
                .iter()
                .filter(|s| slot.source.as_ref().is_none_or(|n| &s.name == n) && s.model(&slot.model).is_some())
                .collect();
            if let Some(name) = &slot.source
                && !config.sources.iter().any(|s| &s.name == name)
            {
                self.error(&at("source"), format!("no source named `{name}`"), "use a source name from config.yaml");
                continue;
            }
            if serving.is_empty() {
                let message = match &slot.source {
                    Some(source) => format!("source `{source}` does not serve model `{}`", slot.model),
                    None => format!("no source serves model `{}`", slot.model),
                };
                self.error(&at("model"), message, "use a model listed under a source's `models:`");
                continue;
            }
            let Some(period) = self.period(&format!("{field}[{i}]"), slot.period, slot.hours) else { continue };
            if serving.iter().all(|s| s.model(&slot.model).is_some_and(|m| m.kind != kind)) {
                tracing::warn!("{field}[{i}]: model `{}` is not a {kind:?} model; the slot is ignored", slot.model);
                continue;
            }
            let quota = slot.token_quota.filter(|t| *t > 0).map(|tokens| Quota { tokens, period });
            out.push(ChainSlot { model: slot.model.clone(), source: slot.source.clone(), tier: slot.tier, quota });
        }
        out
    }
}
