//! Checks of config.yaml's and the runtime file's sources: names, URLs, adapters, limits, timeouts
//! and each source's model list.

use std::collections::HashSet;

use super::{Collector, closest};
use crate::config::SourceConfig;

impl Collector<'_> {
    pub(super) fn check_sources(&mut self, sources: &[SourceConfig], adapters: &[String]) {
        let mut names = HashSet::new();
        for (i, s) in sources.iter().enumerate() {
            let at = |field: &str| format!("sources[{i}].{field}");
            let name = s.name.as_str();
            if name.is_empty() || name.contains(['/', ':', ' ']) {
                self.error(
                    &at("name"),
                    format!("`{name}` is not a usable source name"),
                    "use letters, digits, - and _ (clients write source/model)",
                );
            } else if !names.insert(name.to_string()) {
                self.error(
                    &at("name"),
                    format!("source name `{name}` is used twice"),
                    "give every source its own name",
                );
            }
            if !adapters.iter().any(|a| a == s.adapter.as_str()) {
                let known: Vec<&str> = adapters.iter().map(String::as_str).collect();
                let near =
                    closest(s.adapter.as_str(), &known).map(|n| format!("did you mean `{n}`? ")).unwrap_or_default();
                self.error(
                    &at("adapter"),
                    format!("no adapter named `{}`", s.adapter),
                    format!("{near}use one of: {}; or put {}.wasm in adapter_dir", adapters.join(", "), s.adapter),
                );
            }
            if s.max_concurrent == 0 {
                self.error(
                    &at("max_concurrent"),
                    "must be at least 1",
                    "write how many requests may run at once, e.g. 10",
                );
            }
            if s.rpm == Some(0) {
                self.error(&at("rpm"), "must be at least 1", "write requests per minute, or remove it for no limit");
            }
            if s.models.is_empty() && !s.detect_models {
                self.error(
                    &at("models"),
                    "is empty",
                    "list the models this source serves, e.g. - name: gpt-4o, or set detect_models: true",
                );
            }
            let mut models = HashSet::new();
            for (j, m) in s.models.iter().enumerate() {
                if m.name.is_empty() {
                    self.error(&at(&format!("models[{j}].name")), "is empty", "write the model name clients ask for");
                } else if !models.insert(m.name.as_str()) {
                    self.error(
                        &at(&format!("models[{j}].name")),
                        format!("model `{}` is listed twice in this source", m.name),
                        "list each model once",
                    );
                }
            }
        }
    }
}
