//! Model resolution: what a client's `model` string names. `source/model` or `source:model`
//! first (when the prefix is a source that serves it), then every source with that exact model.

use crate::config::{Config, ModelConfig, SourceConfig};

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

/// Every (source, model) `requested` names, in config order; empty when the gateway does not
/// know it. A prefix names one source; a plain name may be served by several (failover).
pub fn resolve<'a>(config: &'a Config, requested: &str) -> Vec<Resolved<'a>> {
    // Model names may contain `/` (`meta-llama/...`) or `:` (`llama3:8b`): a prefix only counts
    // when it names a source that serves the rest.
    for sep in ['/', ':'] {
        if let Some((prefix, model)) = requested.split_once(sep)
            && let Some(source) = config.sources.iter().find(|s| s.name.as_str() == prefix)
            && let Some(model) = source.model(model)
        {
            return vec![Resolved { source, model }];
        }
    }
    config.sources.iter().filter_map(|source| source.model(requested).map(|model| Resolved { source, model })).collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn config() -> Config {
        let text = r#"
sources:
  - name: a
    base_url: http://127.0.0.1:1
    models: [{name: gpt-4o}, {name: "meta-llama/Llama-3"}]
  - name: b
    base_url: http://127.0.0.1:2
    models: [{name: gpt-4o}, {name: "llama3:8b"}]
"#;
        crate::config::load_str(text, Path::new("t.yaml"), &|_| None, &["openai"]).unwrap()
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
