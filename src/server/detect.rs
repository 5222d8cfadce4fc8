//! Detected models (`detect_models: true`): a source's model list asked through its adapter at
//! start and on `POST /admin/api/sources/{name}/detect`; what it lists joins the source's
//! configured models (marked detected, their kind guessed from the name) until the next
//! detection.

use std::collections::BTreeMap;

use crate::config::{Config, ModelConfig, ModelKind, SourceName};

use super::Gateway;

/// How long start-up waits for every source's list, in all.
const AT_START: std::time::Duration = std::time::Duration::from_secs(10);

/// Each source's last detected list.
#[derive(Debug, Default, Clone)]
pub struct Detected(BTreeMap<SourceName, Vec<String>>);

impl Detected {
    /// `config` with each source's detected models after its configured ones (a name the
    /// config already has stays as configured). A detected name that another source is
    /// configured to serve is reached only as `source/model`, unless the detecting source says
    /// `detect_models_share_names`.
    pub fn apply(&self, mut config: Config) -> Config {
        let configured: Vec<(SourceName, String)> = config
            .sources
            .iter()
            .flat_map(|s| s.models.iter().filter(|m| !m.detected).map(|m| (s.name.clone(), m.name.clone())))
            .collect();
        for source in &mut config.sources {
            let Some(names) = self.0.get(&source.name) else { continue };
            for name in names {
                let kind = kind_by_name(name).unwrap_or_default();
                if !source.models.iter().any(|m| &m.name == name) {
                    let served_elsewhere = configured.iter().any(|(s, m)| s != &source.name && m == name);
                    let qualified_only = served_elsewhere && !source.detect_models_share_names;
                    source.models.push(ModelConfig {
                        name: name.clone(),
                        upstream: None,
                        kind,
                        detected: true,
                        qualified_only,
                    });
                }
            }
        }
        config
    }
}

/// Refused listed names logged one by one; the rest are counted.
const LOGGED_REFUSALS: usize = 10;

/// Models one source may add by detection; an upstream listing more is cut at this many.
const MAX_DETECTED: usize = 2000;

/// What an upstream's list may add: names a client could send and an operator can read safely
/// (see [`crate::domain::listed_model_name_problem`]), of a kind some door serves, at most [`MAX_DETECTED`];
/// each refused name is logged (escaped) with why.
fn admissible(source: &SourceName, mut listed: Vec<String>) -> Vec<String> {
    let mut refused = 0usize;
    listed.retain(|name| match crate::domain::listed_model_name_problem(name) {
        Some(why) => {
            refused += 1;
            // The first few by name; a hostile list of millions is one count, not a flood.
            if refused > LOGGED_REFUSALS {
                return false;
            }
            let shown: String = name.chars().take(80).collect();
            tracing::warn!(source = %source, name = %crate::logsafe::Escaped(&shown), "detected model name refused: {why}");
            false
        }
        None => kind_by_name(name).is_some(),
    });
    if refused > LOGGED_REFUSALS {
        tracing::warn!(source = %source, refused, "detected model names refused in all");
    }
    let mut seen = std::collections::HashSet::new();
    listed.retain(|name| seen.insert(name.clone()));
    if listed.len() > MAX_DETECTED {
        tracing::warn!(source = %source, listed = listed.len(), "the upstream listed more models than {MAX_DETECTED}; the rest are left out");
        listed.truncate(MAX_DETECTED);
    }
    listed
}

/// What a listed model is for, from its name as the providers name them: embeddings
/// (`text-embedding-3-small`, `nomic-embed-text`, `gemini-embedding-001`), images (`dall-e-3`,
/// `gpt-image-1`, `imagen-4`), else chat. `None` for what no door serves (speech, transcription,
/// moderation): left out.
fn kind_by_name(name: &str) -> Option<ModelKind> {
    let name = name.to_ascii_lowercase();
    let has = |parts: &[&str]| parts.iter().any(|p| name.contains(p));
    if has(&["whisper", "tts", "transcribe", "moderation", "-audio-", "realtime"]) {
        None
    } else if has(&["embed"]) {
        Some(ModelKind::Embedding)
    } else if has(&["dall-e", "gpt-image", "imagen"]) {
        Some(ModelKind::Image)
    } else {
        Some(ModelKind::Chat)
    }
}

impl Gateway {
    /// Asks every source with `detect_models` at once (within [`AT_START`] in all); a source
    /// that does not answer keeps its configured models, and the log says why.
    pub async fn detect_at_start(&self) {
        let runtime = self.runtime();
        let sources: Vec<SourceName> =
            runtime.config.sources.iter().filter(|s| s.detect_models).map(|s| s.name.clone()).collect();
        if sources.is_empty() {
            return;
        }
        let all = futures::future::join_all(sources.iter().map(|name| self.detect(name)));
        if tokio::time::timeout(AT_START, all).await.is_err() {
            tracing::warn!(
                "model detection took longer than {} s; the sources not yet answered keep their configured models",
                AT_START.as_secs()
            );
        }
    }

    /// Asks one source's upstream for its models and puts them in use; the error says why
    /// (the configured models stay).
    pub async fn detect(&self, name: &SourceName) -> Result<Vec<String>, String> {
        let runtime = self.runtime();
        let source = runtime.config.sources.iter().find(|s| &s.name == name).ok_or("no such source")?;
        let adapter = self.plugins.adapter(&source.adapter).ok_or("its adapter is not loaded")?;
        match runtime.provider.list_models(source, &adapter).await {
            Ok(names) => {
                let names = admissible(name, names);
                let before = self.detected.lock().expect("detected models").0.get(name).cloned().unwrap_or_default();
                let added: Vec<&String> = names.iter().filter(|n| !before.contains(n)).collect();
                tracing::info!(source = %name, models = names.len(), added = ?added, "detected the upstream's models");
                self.detected.lock().expect("detected models").0.insert(name.clone(), names.clone());
                self.reinstall().await;
                Ok(names)
            }
            Err(why) => {
                tracing::warn!(source = %name, "model detection failed, keeping the configured models: {why}");
                Err(why)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detected_models_follow_the_configured_ones_without_doubling_them() {
        let yaml = "sources:\n  - {name: s, base_url: 'http://x', models: [{name: a, upstream: a-1}]}\n";
        let config = crate::config::load_str(yaml, std::path::Path::new("t.yaml"), &|_| None, &["openai"]).unwrap();
        let mut detected = Detected::default();
        detected.0.insert(SourceName::new("s"), vec!["a".into(), "b".into()]);
        let models = &detected.apply(config).sources[0].models;
        let seen: Vec<(&str, &str, bool)> =
            models.iter().map(|m| (m.name.as_str(), m.upstream_name(), m.detected)).collect();
        assert_eq!(seen, [("a", "a-1", false), ("b", "b", true)]);
    }

    #[test]
    fn a_detected_name_another_source_serves_is_reached_only_qualified_unless_shared() {
        let yaml = "sources:\n  - {name: trusted, base_url: 'http://x', models: [{name: gpt-4o}]}\n  - {name: lister, base_url: 'http://y', models: [], detect_models: true}\n  - {name: sharer, base_url: 'http://z', models: [], detect_models: true, detect_models_share_names: true}\n";
        let config = crate::config::load_str(yaml, std::path::Path::new("t.yaml"), &|_| None, &["openai"]).unwrap();
        let mut detected = Detected::default();
        for source in ["lister", "sharer"] {
            detected.0.insert(SourceName::new(source), vec!["gpt-4o".into(), "llama-3".into()]);
        }
        let config = detected.apply(config);
        let only = |source: usize, name: &str| config.sources[source].model(name).unwrap().qualified_only;
        assert!(only(1, "gpt-4o"), "the trusted source's name stays its own");
        assert!(!only(1, "llama-3"), "a name nobody configures joins plain routing");
        assert!(!only(2, "gpt-4o"), "shared on purpose");
        let plain: Vec<&str> =
            crate::router::resolve(&config, "gpt-4o").iter().map(|r| r.source.name.as_str()).collect();
        assert_eq!(plain, ["trusted", "sharer"]);
        assert_eq!(crate::router::resolve(&config, "lister/gpt-4o").len(), 1, "still reachable qualified");
    }

    #[test]
    fn listed_names_that_would_mislead_are_refused() {
        let long = "x".repeat(300);
        let listed = [
            "ok-model",
            "a/b",
            "new\nline",
            "rtl\u{202e}txt",
            "",
            &long,
            "ok-model",
            "whisper-1",
            "gpt-4o\u{200b}",
            " gpt-4o",
            "line\u{2028}sep",
            "soft\u{ad}hyphen",
        ];
        let kept = admissible(&SourceName::new("s"), listed.iter().map(|s| s.to_string()).collect());
        assert_eq!(kept, ["ok-model"]);
    }

    #[test]
    fn a_listed_models_kind_follows_its_name() {
        for (name, kind) in [
            ("gpt-4o-mini", Some(ModelKind::Chat)),
            ("text-embedding-3-small", Some(ModelKind::Embedding)),
            ("nomic-embed-text:latest", Some(ModelKind::Embedding)),
            ("gemini-embedding-001", Some(ModelKind::Embedding)),
            ("dall-e-3", Some(ModelKind::Image)),
            ("gpt-image-1", Some(ModelKind::Image)),
            ("imagen-4.0-generate-001", Some(ModelKind::Image)),
            ("whisper-1", None),
            ("tts-1-hd", None),
            ("omni-moderation-latest", None),
            ("gpt-4o-realtime-preview", None),
        ] {
            assert_eq!(kind_by_name(name), kind, "{name}");
        }
    }
}
