//! The semantic cache: a request's last user message embedded through the configured model,
//! and the nearest earlier one of the same scope (tenant, model, protocol, every other field and
//! message matched exactly) whose answer is still kept, when similar enough (usearch's HNSW).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::Value;

use super::key::CacheKey;

/// Widths an embedding may have (the largest models give 4096).
const MAX_WIDTH: usize = 8192;

/// What a request is looked up by: its scope and its last user message's embedding.
#[derive(Debug, Clone)]
pub struct Probe {
    pub scope: CacheKey,
    pub vector: Vec<f32>,
}

/// The request split for the semantic cache: everything but the last message (matched
/// exactly: the scope's body) and that message's text (embedded). `None` when the last message
/// is not the user's or carries no text.
pub fn split(unified: &str, max_text: usize) -> Option<(String, String)> {
    let Ok(Value::Object(mut request)) = serde_json::from_str::<Value>(unified) else { return None };
    let Some(Value::Array(messages)) = request.get_mut("messages") else { return None };
    let last = messages.pop()?;
    if last.get("role").and_then(Value::as_str) != Some("user") {
        return None;
    }
    let text = match last.get("content")? {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            if parts.iter().any(|p| p.get("type").and_then(Value::as_str) != Some("text")) {
                return None; // an image or a file: its words alone do not say what is asked
            }
            parts.iter().filter_map(|p| p.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
        }
        _ => return None,
    };
    if text.trim().is_empty() || text.len() > max_text {
        return None;
    }
    Some((Value::Object(request).to_string(), text))
}

/// The vector of an OpenAI embeddings answer's first item; `None` unless it is 1 to
/// `MAX_WIDTH` finite numbers, not all zero.
pub fn vector_of(answer: &[u8]) -> Option<Vec<f32>> {
    #[derive(serde::Deserialize)]
    struct Item {
        embedding: Vec<f32>,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        data: Vec<Item>,
    }
    let vector = serde_json::from_slice::<Answer>(answer).ok()?.data.into_iter().next()?.embedding;
    let fine = (1..=MAX_WIDTH).contains(&vector.len())
        && vector.iter().all(|x| x.is_finite())
        && vector.iter().any(|x| *x != 0.0);
    fine.then_some(vector)
}

/// What a label in the index stands for.
struct Meta {
    width: usize,
    scope: CacheKey,
    key: CacheKey,
}

#[derive(Default)]
struct Inner {
    /// One index per embedding width (a model's vectors have one).
    indexes: HashMap<usize, usearch::Index>,
    labels: HashMap<u64, Meta>,
    /// Labels, oldest first: the first to go when the index is full.
    order: VecDeque<u64>,
    next: u64,
}

/// Earlier prompts' embeddings, at most `max_entries`, each naming the exact entry it answered.
pub struct SemanticIndex {
    inner: Mutex<Inner>,
    max_entries: usize,
}

impl SemanticIndex {
    pub fn new(max_entries: usize) -> SemanticIndex {
        SemanticIndex { inner: Mutex::default(), max_entries: max_entries.max(1) }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The exact key of the nearest earlier prompt of `probe`'s scope at least `threshold`
    /// similar (cosine), and the similarity.
    pub fn nearest(&self, probe: &Probe, threshold: f32) -> Option<(CacheKey, f32)> {
        let inner = self.inner();
        let index = inner.indexes.get(&probe.vector.len())?;
        let labels = &inner.labels;
        let found = index
            .filtered_search(&probe.vector, 1, |label| labels.get(&label).is_some_and(|m| m.scope == probe.scope))
            .ok()?;
        let (label, distance) = found.keys.first().zip(found.distances.first())?;
        let similarity = 1.0 - distance;
        (similarity >= threshold).then(|| (labels[label].key, similarity))
    }

    /// Remembers `probe` as answered by the entry under `key`; the oldest go past the bound.
    pub fn add(&self, probe: &Probe, key: CacheKey) {
        let width = probe.vector.len();
        let mut inner = self.inner();
        while inner.labels.len() >= self.max_entries {
            let Some(oldest) = inner.order.pop_front() else { break };
            if let Some(meta) = inner.labels.remove(&oldest)
                && let Some(index) = inner.indexes.get(&meta.width)
            {
                let _ = index.remove(oldest);
            }
        }
        if let std::collections::hash_map::Entry::Vacant(vacant) = inner.indexes.entry(width) {
            let options = usearch::IndexOptions {
                dimensions: width,
                metric: usearch::MetricKind::Cos,
                quantization: usearch::ScalarKind::F32,
                connectivity: 0,
                expansion_add: 0,
                expansion_search: 0,
                multi: false,
            };
            let Ok(index) = usearch::Index::new(&options) else { return };
            vacant.insert(index);
        }
        let label = inner.next;
        inner.next += 1;
        let index = &inner.indexes[&width];
        let grown = (index.capacity() * 2).max(64).min(self.max_entries.max(64));
        if index.size() >= index.capacity() && index.reserve(grown).is_err() {
            return;
        }
        if index.add(label, &probe.vector).is_ok() {
            inner.labels.insert(label, Meta { width, scope: probe.scope, key });
            inner.order.push_back(label);
        }
    }

    /// Forgets every prompt.
    pub fn clear(&self) {
        *self.inner() = Inner::default();
    }

    pub fn len(&self) -> usize {
        self.inner().labels.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> CacheKey {
        CacheKey([n; 32])
    }

    #[test]
    fn the_nearest_prompt_of_the_same_scope_answers_when_similar_enough() {
        let index = SemanticIndex::new(100);
        let probe = |scope: u8, vector: &[f32]| Probe { scope: key(scope), vector: vector.to_vec() };
        index.add(&probe(1, &[1.0, 0.0, 0.0]), key(10));
        index.add(&probe(1, &[0.0, 1.0, 0.0]), key(11));
        index.add(&probe(2, &[0.9, 0.1, 0.0]), key(12));
        let (found, similarity) = index.nearest(&probe(1, &[0.95, 0.05, 0.0]), 0.9).unwrap();
        assert_eq!(found, key(10));
        assert!(similarity > 0.99, "{similarity}");
        assert_eq!(index.nearest(&probe(1, &[0.7, 0.7, 0.0]), 0.9), None, "too far from both");
        assert_eq!(index.nearest(&probe(3, &[1.0, 0.0, 0.0]), 0.5), None, "another scope shares nothing");
        assert_eq!(index.nearest(&probe(1, &[1.0, 0.0]), 0.5), None, "another width");
    }

    #[test]
    fn the_index_keeps_at_most_its_bound_the_oldest_going_first() {
        let index = SemanticIndex::new(3);
        for n in 0..10u8 {
            let mut vector = vec![0.0f32; 16];
            vector[usize::from(n)] = 1.0;
            index.add(&Probe { scope: key(1), vector }, key(n));
        }
        assert_eq!(index.len(), 3);
        let mut newest = vec![0.0f32; 16];
        newest[9] = 1.0;
        assert_eq!(index.nearest(&Probe { scope: key(1), vector: newest }, 0.99).map(|f| f.0), Some(key(9)));
        let mut oldest = vec![0.0f32; 16];
        oldest[0] = 1.0;
        assert_eq!(index.nearest(&Probe { scope: key(1), vector: oldest }, 0.99), None);
        index.clear();
        assert_eq!(index.len(), 0);
    }

    #[test]
    fn only_a_last_user_message_with_text_is_embedded_and_the_rest_is_the_scope() {
        let (rest, text) = split(
            r#"{"model":"m","temperature":0,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the capital of France?"}]}"#,
            1000,
        )
        .unwrap();
        assert_eq!(text, "What is the capital of France?");
        let rest: Value = serde_json::from_str(&rest).unwrap();
        assert_eq!(rest["messages"], serde_json::json!([{"role": "system", "content": "be brief"}]));
        assert_eq!(rest["temperature"], 0);
        let parts =
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}"#;
        assert_eq!(split(parts, 1000).map(|s| s.1).as_deref(), Some("a\nb"));
        let image = r#"{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}]}"#;
        assert_eq!(split(image, 1000), None);
        assert_eq!(split(r#"{"messages":[{"role":"assistant","content":"a"}]}"#, 1000), None);
        assert_eq!(split(r#"{"messages":[{"role":"user","content":"long text"}]}"#, 4), None);
        assert_eq!(split(r#"{"messages":[]}"#, 1000), None);
    }

    #[test]
    fn an_embedding_is_read_only_when_it_is_a_usable_vector() {
        assert_eq!(vector_of(br#"{"data":[{"embedding":[0.5,-1]}]}"#), Some(vec![0.5, -1.0]));
        assert_eq!(vector_of(br#"{"data":[{"embedding":[0,0]}]}"#), None);
        assert_eq!(vector_of(br#"{"data":[{"embedding":[]}]}"#), None);
        assert_eq!(vector_of(br#"{"data":[]}"#), None);
        assert_eq!(vector_of(br#"{"error":{}}"#), None);
        let wide = format!(r#"{{"data":[{{"embedding":[{}1]}}]}}"#, "1,".repeat(MAX_WIDTH));
        assert_eq!(vector_of(wide.as_bytes()), None);
    }
}
