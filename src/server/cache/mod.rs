//! The response cache: which requests it answers and keeps (the key's, route's or sources'
//! say, then the client's `cache-control`), a hit's reply and log row, and a miss's answer kept.

mod key;
mod semantic;
mod store;

pub use key::CacheKey;
pub use semantic::vector_of;
pub use store::{Entry, MemoryStore};

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, HeaderValue};

use super::Gateway;
use super::attempt::SOURCE_HEADER;
use super::auth::KeyEntry;
use super::bill::RequestCost;
use super::books::LogContext;
use super::call::{Answer, Call, Protocol, Reply};
use super::error::ApiError;
use crate::config::{CacheConfig, ModelKind, RouteConfig};
use crate::domain::{SlotKey, SourceName, UnixMs};
use crate::provider::{ChunkStream, Tally};
use crate::router::Planned;

/// Says what the cache did: `hit`, `miss` (asked upstream; kept if it completes) or `bypass`.
pub const CACHE_HEADER: &str = "x-switchyard-cache";
/// A client's own time to keep its answer, in seconds (at most `cache.ttl_seconds`; 0 keeps nothing).
pub const TTL_HEADER: &str = "x-switchyard-cache-ttl";
/// A semantic hit's cosine similarity to the request it was kept for.
pub const SIMILARITY_HEADER: &str = "x-switchyard-cache-similarity";
/// The source of a hit's log row.
pub const CACHE_SOURCE: &str = "cache";

/// Request headers that change an answer as much as its body does.
const ANSWER_HEADERS: &[&str] = &["anthropic-beta", "anthropic-version"];

pub struct ResponseCache {
    config: CacheConfig,
    memory: MemoryStore,
    /// Earlier prompts' embeddings (`cache.semantic`).
    semantic: Option<semantic::SemanticIndex>,
    /// The replicas' shared entries (`shared_state`): looked up when this process has none.
    shared: Option<Arc<crate::shared::Shared>>,
}

/// What the cache does for one request.
pub enum Plan {
    /// Not cached here: no header, no work.
    Off,
    /// Cached here, but not this request (the client's `no-store`, a body with no key).
    Bypass,
    Use(Lookup),
}

/// A cached request: its key, whether an entry may answer it, and how long its answer is kept.
pub struct Lookup {
    key: CacheKey,
    /// `false` after the client's `no-cache`: asked upstream, and the answer kept.
    read: bool,
    /// The oldest entry the client takes (`max-age`).
    max_age: Option<Duration>,
    /// `None`: the answer is not kept.
    ttl: Option<Duration>,
    /// For a route with `semantic_cache`: the scope of everything but the last user message,
    /// and that message's text (to embed), until its embedding is in `probe`.
    semantic: Option<(CacheKey, String)>,
    probe: Option<semantic::Probe>,
    /// What the request had cost before its answer was asked (the semantic cache's embedding),
    /// so the entry keeps the answer's own cost.
    spent_before: Option<i64>,
}

impl Lookup {
    /// The text the semantic cache would embed, when it applies and has not yet.
    pub fn to_embed(&self) -> Option<&str> {
        self.semantic.as_ref().filter(|_| self.read && self.probe.is_none()).map(|(_, text)| text.as_str())
    }

    /// `entry` as this request's answer in the mode asked for, unless it is older than the
    /// client takes or has no form for that mode.
    fn answered_by(&self, entry: Arc<Entry>, now: UnixMs, stream: bool, similarity: Option<f32>) -> Option<Found> {
        if self.max_age.is_some_and(|max_age| now.since(entry.stored_at) > max_age) {
            return None;
        }
        let answer = entry.answer(stream)?;
        Some(Found { entry, answer, similarity })
    }

    /// Marks what the request has cost so far: the entry's cost is what the answer adds.
    pub fn spent_before(&mut self, pico: Option<i64>) {
        self.spent_before = pico;
    }

    /// The last user message's embedding: the semantic cache looks with it, and keeps it with
    /// the answer.
    pub fn embedded(&mut self, vector: Vec<f32>) {
        if let Some((scope, _)) = &self.semantic {
            self.probe = Some(semantic::Probe { scope: *scope, vector });
        }
    }
}

/// What a client said of caching in its request headers.
#[derive(Debug, Default, PartialEq)]
struct Directives {
    no_store: bool,
    no_cache: bool,
    max_age: Option<u64>,
    ttl: Option<u64>,
}

fn directives(headers: &HeaderMap) -> Result<Directives, ApiError> {
    let mut said = Directives::default();
    for value in headers.get_all(axum::http::header::CACHE_CONTROL).iter().filter_map(|v| v.to_str().ok()) {
        for directive in value.split(',').map(str::trim) {
            let (name, arg) = directive.split_once('=').unwrap_or((directive, ""));
            match name.to_ascii_lowercase().as_str() {
                "no-store" => said.no_store = true,
                "no-cache" => said.no_cache = true,
                "max-age" => said.max_age = arg.trim_matches('"').parse().ok(),
                _ => {}
            }
        }
    }
    if let Some(value) = headers.get(TTL_HEADER) {
        let ttl = value.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()).ok_or_else(|| {
            ApiError::invalid_request(format!("{TTL_HEADER} must be a whole number of seconds")).param(TTL_HEADER)
        })?;
        said.ttl = Some(ttl);
    }
    Ok(said)
}

impl ResponseCache {
    pub fn new(config: &CacheConfig, shared: Option<Arc<crate::shared::Shared>>) -> ResponseCache {
        ResponseCache {
            memory: MemoryStore::new(config.max_bytes(), config.max_entry_bytes() as u64),
            semantic: config.semantic.as_ref().map(|s| semantic::SemanticIndex::new(s.max_entries)),
            config: config.clone(),
            shared,
        }
    }

    /// Whether and how `call` goes through the cache: a client's own request for a chat
    /// answer, cached when its key says so, else its route, else every candidate's source.
    pub fn plan(
        &self,
        key: &KeyEntry,
        call: &Call<'_>,
        route: Option<&RouteConfig>,
        candidates: &[Planned<'_>],
    ) -> Result<Plan, ApiError> {
        if call.depth != 0 || call.kind != ModelKind::Chat {
            return Ok(Plan::Off);
        }
        let on = key.cache.or(route.and_then(|r| r.cache)).unwrap_or_else(|| {
            !candidates.is_empty() && candidates.iter().all(|p| p.resolved.source.cache == Some(true))
        });
        if !on {
            return Ok(Plan::Off);
        }
        let empty = HeaderMap::new();
        let (protocol, body, headers) = match call.native {
            Some(native) => (native.protocol.as_str(), native.body, native.headers),
            None => ("unified", call.body.text().as_bytes(), &empty),
        };
        let said = directives(headers)?;
        if said.no_store {
            return Ok(Plan::Bypass);
        }
        let answer_headers: Vec<(&str, &str)> = ANSWER_HEADERS
            .iter()
            .flat_map(|name| headers.get_all(*name).iter().filter_map(|v| v.to_str().ok()).map(|v| (*name, v)))
            .collect();
        // Never across tenants: a key's own entries, unless its group is shared.
        let partition = if self.config.shared_groups.contains(&key.group) {
            format!("group:{}", key.group)
        } else {
            format!("key:{}", key.id)
        };
        let request =
            key::Request { partition: &partition, model: call.model, protocol, headers: &answer_headers, body };
        let Some(key) = request.key() else { return Ok(Plan::Bypass) };
        let ttl = said.ttl.map_or(self.config.ttl_seconds, |asked| asked.min(self.config.ttl_seconds));
        let semantic = match (&self.config.semantic, route, call.body.unified()) {
            (Some(config), Some(route), Some(unified)) if route.semantic_cache => {
                semantic::split(unified, config.max_prompt_kb << 10).and_then(|(rest, text)| {
                    // The client's protocol stays in the scope: an entry may hold a native answer.
                    let mut headers = answer_headers.clone();
                    headers.push(("x-switchyard-semantic-scope", "1"));
                    let scope = key::Request { body: rest.as_bytes(), headers: &headers, ..request };
                    scope.key().map(|scope| (scope, text))
                })
            }
            _ => None,
        };
        Ok(Plan::Use(Lookup {
            key,
            read: !said.no_cache,
            max_age: said.max_age.map(Duration::from_secs),
            ttl: (ttl > 0).then(|| Duration::from_secs(ttl)),
            semantic,
            probe: None,
            spent_before: None,
        }))
    }

    /// The entry that answers `lookup` at `now` and its answer in the mode asked for (`stream`),
    /// if any: this process's, else the replicas' (kept here from then on). An entry in Redis
    /// that does not read is a miss.
    pub async fn find(&self, lookup: &Lookup, now: UnixMs, stream: bool) -> Option<Found> {
        if !lookup.read {
            return None;
        }
        let entry = match self.memory.get(&lookup.key, now) {
            Some(entry) => entry,
            None => {
                let bytes = self.shared.as_ref()?.cache_get(&lookup.key.hex(), now).await?;
                let entry: Entry = serde_json::from_slice(&bytes).ok().filter(|e: &Entry| e.expires_at > now)?;
                self.memory.put(lookup.key, entry.clone());
                Arc::new(entry)
            }
        };
        lookup.answered_by(entry, now, stream, None)
    }

    /// The kept answer of the nearest earlier prompt like `lookup`'s (its embedding in hand),
    /// in the mode asked for, and how similar the two are.
    pub fn find_similar(&self, lookup: &Lookup, now: UnixMs, stream: bool) -> Option<Found> {
        let (index, probe) = (self.semantic.as_ref()?, lookup.probe.as_ref()?);
        let threshold = self.config.semantic.as_ref()?.threshold;
        let (key, similarity) = index.nearest(probe, threshold)?;
        lookup.answered_by(self.memory.get(&key, now)?, now, stream, Some(similarity))
    }

    /// The embeddings model of the semantic cache.
    pub fn semantic_model(&self) -> Option<&str> {
        self.config.semantic.as_ref().map(|s| s.model.as_str())
    }

    /// Keeps a whole answer (a complete one only: every choice finished) from `source`. A
    /// native session's answer in the other mode that the entry already has is kept with it.
    fn keep(&self, key: CacheKey, ttl: Duration, kept: Kept, source: &str, now: UnixMs) {
        if kept.unified.len() > self.config.max_entry_bytes() || !finished(&kept.unified) {
            return;
        }
        let tally = Tally::of_response(&kept.unified);
        if !kept.cross_mode && kept.native_whole.is_none() && kept.native_frames.is_none() {
            return; // a native answer that did not read as text: nothing to replay it from
        }
        let mut entry = Entry {
            // Served only in its native forms: the unified copy would double its weight.
            unified: if kept.cross_mode { kept.unified } else { String::new() },
            native_whole: kept.native_whole,
            native_frames: kept.native_frames,
            cross_mode: kept.cross_mode,
            source: source.to_string(),
            stored_at: now,
            expires_at: now.plus(ttl),
            tokens_in: tally.prompt_tokens,
            tokens_out: tally.completion_tokens,
            cost_pico: kept.cost_pico,
        };
        if !entry.cross_mode
            && let Some(before) = self.memory.get(&key, now).filter(|b| !b.cross_mode)
        {
            entry.native_whole = entry.native_whole.or_else(|| before.native_whole.clone());
            entry.native_frames = entry.native_frames.or_else(|| before.native_frames.clone());
        }
        if let Some(shared) = &self.shared
            && let Ok(bytes) = serde_json::to_vec(&entry)
        {
            shared.cache_put(key.hex(), bytes, ttl, self.config.max_bytes(), now);
        }
        // The semantic cache remembers only prompts whose answer is kept.
        if self.memory.put(key, entry)
            && let (Some(index), Some(probe)) = (&self.semantic, &kept.probe)
        {
            index.add(probe, key);
        }
    }

    /// Forgets every entry, the replicas' shared ones too; how many this process held.
    pub async fn purge(&self) -> Result<usize, String> {
        let (held, _) = self.memory.size();
        self.memory.purge();
        if let Some(index) = &self.semantic {
            index.clear();
        }
        if let Some(shared) = &self.shared {
            shared.cache_purge().await?;
        }
        Ok(held)
    }

    /// (entries, bytes) this process holds.
    pub fn size(&self) -> (usize, u64) {
        self.memory.size()
    }

    /// Prompts the semantic cache remembers (`None`: it is off).
    pub fn semantic_size(&self) -> Option<usize> {
        self.semantic.as_ref().map(semantic::SemanticIndex::len)
    }

    /// (entries, bytes) the replicas share in Redis; `None` alone or when Redis is away.
    pub async fn shared_size(&self) -> Option<(u64, u64)> {
        self.shared.as_ref()?.cache_size().await
    }

    pub fn config(&self) -> &CacheConfig {
        &self.config
    }
}

/// A kept answer found for a request: its entry, the answer in the mode asked for and, from
/// the semantic cache, how similar the request it was kept for is.
pub struct Found {
    entry: Arc<Entry>,
    answer: Answer,
    similarity: Option<f32>,
}

/// What a miss's answer leaves to keep.
struct Kept {
    unified: String,
    native_whole: Option<String>,
    native_frames: Option<Vec<String>>,
    cross_mode: bool,
    /// The request's embedding, remembered with the entry (the semantic cache).
    probe: Option<semantic::Probe>,
    cost_pico: Option<i64>,
}

impl Kept {
    /// A native session's answer from `protocol`'s upstream, or a translated one (`None`).
    fn new(unified: String, native: Option<Protocol>, probe: Option<semantic::Probe>) -> Kept {
        let cross_mode = native.is_none_or(|p| p == Protocol::OpenAiChat);
        Kept { unified, native_whole: None, native_frames: None, cross_mode, probe, cost_pico: None }
    }
}

impl Entry {
    /// The answer in the mode the client asked for: a native session's own in that mode, else
    /// rendered from the unified form where that stands for it; `None` when it does not.
    fn answer(&self, stream: bool) -> Option<Answer> {
        match (stream, &self.native_frames, &self.native_whole) {
            (true, Some(frames), _) => Some(Answer::Stream(ChunkStream::replay_frames(frames.clone()))),
            (false, _, Some(body)) => Some(Answer::Native { body: body.clone().into_bytes(), unified: String::new() }),
            _ if !self.cross_mode => None,
            (true, ..) => {
                let chunks = crate::provider::as_chunks(&self.unified).unwrap_or_default();
                Some(Answer::Stream(ChunkStream::replay(chunks)))
            }
            (false, ..) => Some(Answer::Complete(self.unified.clone())),
        }
    }
}

/// Whether a unified answer is whole: choices, each with its finish reason.
fn finished(unified: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Choice {
        finish_reason: Option<serde::de::IgnoredAny>,
    }
    #[derive(serde::Deserialize)]
    struct Whole {
        choices: Vec<Choice>,
    }
    serde_json::from_str::<Whole>(unified)
        .is_ok_and(|w| !w.choices.is_empty() && w.choices.iter().all(|c| c.finish_reason.is_some()))
}

/// A hit: the entry as a whole answer or as a stream, with its log row (source `cache`, the
/// tokens the client got, no cost) and, when hits count, its tokens against the key's quota.
pub fn hit(
    gw: &Arc<Gateway>,
    key: &KeyEntry,
    call: &Call<'_>,
    log: &LogContext,
    found: Found,
    started: Instant,
) -> Result<Reply, ApiError> {
    let Found { entry, answer, similarity } = found;
    let tokens = entry.tokens_in.saturating_add(entry.tokens_out);
    if gw.cache.config.hits_count_against_quotas {
        super::admission::admit_tokens(gw, key, tokens)?.settle(tokens, None);
    }
    let now = gw.scheduler.now();
    let mut headers = HeaderMap::new();
    headers.insert(CACHE_HEADER, HeaderValue::from_static("hit"));
    headers.insert(axum::http::header::AGE, HeaderValue::from(now.since(entry.stored_at).as_secs()));
    if let Ok(source) = HeaderValue::from_str(&entry.source) {
        headers.insert(SOURCE_HEADER, source);
    }
    if let Some(similarity) = similarity
        && let Ok(value) = HeaderValue::from_str(&format!("{similarity:.4}"))
    {
        headers.insert(SIMILARITY_HEADER, value);
    }
    let slot = SlotKey { source: SourceName::new(CACHE_SOURCE), model: call.model.to_string() };
    let mut row = log.row(gw, &slot, started);
    row.status = Some(200);
    row.first_byte_ms = Some(row.total_ms);
    row.tokens_in = Some(entry.tokens_in);
    row.tokens_out = Some(entry.tokens_out);
    row.cache_hit = true;
    let saved = entry.cost_pico.map(|pico| format!("saved ${}", crate::domain::Usd::from_pico(pico)));
    let similar = similarity.map(|s| format!("semantic cache: a request {s:.4} similar"));
    row.message = match (similar, saved) {
        (Some(similar), Some(saved)) => Some(format!("{similar}; {saved}")),
        (similar, saved) => similar.or(saved),
    };
    gw.state.log(row);
    gw.metrics.cache_request(if similarity.is_some() { "semantic_hit" } else { "hit" });
    gw.metrics.cache_saved(entry.tokens_in, entry.tokens_out, entry.cost_pico);
    Ok(Reply { answer, headers })
}

/// A miss's reply, marked, with its answer kept once whole: a JSON answer at once, a stream
/// when it completes (never a cut, failed or abandoned one, nor one past the entry bound).
pub fn missed(
    gw: &Arc<Gateway>,
    plan: Plan,
    protocol: Option<Protocol>,
    cost: &Arc<RequestCost>,
    mut reply: Reply,
) -> Reply {
    let lookup = match plan {
        Plan::Off => return reply,
        Plan::Bypass => {
            gw.metrics.cache_request("bypass");
            reply.headers.insert(CACHE_HEADER, HeaderValue::from_static("bypass"));
            return reply;
        }
        Plan::Use(lookup) => lookup,
    };
    gw.metrics.cache_request("miss");
    reply.headers.insert(CACHE_HEADER, HeaderValue::from_static("miss"));
    let Some(ttl) = lookup.ttl else { return reply };
    // A native answer comes only from a call that carried the client's protocol.
    let protocol = protocol.unwrap_or(Protocol::OpenAiChat);
    let source = reply.headers.get(SOURCE_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
    let now = gw.scheduler.now();
    let before = lookup.spent_before;
    // The answer's own cost, once its books are closed (a stream's when it ends).
    let answer_cost = move |cost: &RequestCost| cost.pico().map(|after| after - before.unwrap_or(0));
    reply.answer = match reply.answer {
        Answer::Complete(unified) => {
            let mut kept = Kept::new(unified.clone(), None, lookup.probe);
            kept.cost_pico = answer_cost(cost);
            gw.cache.keep(lookup.key, ttl, kept, &source, now);
            Answer::Complete(unified)
        }
        Answer::Native { body, unified } => {
            // An OpenAI-compatible upstream's own answer is the unified shape: kept as sent, it
            // is both the JSON hit (byte for byte) and what a stream hit is rendered from.
            let mut kept = match (protocol, String::from_utf8(body.clone())) {
                (Protocol::OpenAiChat, Ok(own)) => Kept::new(own, None, lookup.probe),
                (_, own) => Kept { native_whole: own.ok(), ..Kept::new(unified, Some(protocol), lookup.probe) },
            };
            kept.cost_pico = answer_cost(cost);
            gw.cache.keep(lookup.key, ttl, kept, &source, now);
            Answer::Native { body, unified: String::new() }
        }
        Answer::Stream(chunks) => {
            let gw = Arc::clone(gw);
            let limit = gw.cache.config.max_entry_bytes();
            let native = chunks.is_native().then_some(protocol);
            let cost = Arc::clone(cost);
            Answer::Stream(chunks.recording(
                limit,
                Box::new(move |recorded| {
                    let mut kept = Kept::new(recorded.unified, native, lookup.probe);
                    // Frames are kept where the unified form cannot stand for them.
                    kept.native_frames = recorded.frames.filter(|_| !kept.cross_mode);
                    kept.cost_pico = answer_cost(&cost);
                    let now = gw.scheduler.now();
                    gw.cache.keep(lookup.key, ttl, kept, &source, now);
                }),
            ))
        }
    };
    reply
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        map
    }

    #[test]
    fn the_clients_cache_control_and_ttl_are_read() {
        assert_eq!(directives(&headers(&[])).unwrap(), Directives::default());
        let said = directives(&headers(&[("cache-control", "No-Cache, max-age=60"), (TTL_HEADER, " 30 ")])).unwrap();
        assert_eq!(said, Directives { no_store: false, no_cache: true, max_age: Some(60), ttl: Some(30) });
        assert!(directives(&headers(&[("cache-control", "private"), ("cache-control", "no-store")])).unwrap().no_store);
        let refused = directives(&headers(&[(TTL_HEADER, "soon")])).unwrap_err();
        assert_eq!(refused.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(refused.message.contains(TTL_HEADER), "{}", refused.message);
    }

    fn entry(native_whole: Option<&str>, native_frames: Option<Vec<String>>, cross_mode: bool) -> Entry {
        Entry {
            unified: r#"{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#.into(),
            native_whole: native_whole.map(str::to_string),
            native_frames,
            cross_mode,
            source: "s".into(),
            stored_at: UnixMs(0),
            expires_at: UnixMs(1),
            tokens_in: 1,
            tokens_out: 1,
            cost_pico: None,
        }
    }

    #[test]
    fn a_native_answer_is_replayed_in_its_own_mode_and_crosses_only_where_the_unified_form_stands_for_it() {
        let kind = |answer: Option<Answer>| match answer {
            None => "none",
            Some(Answer::Complete(_)) => "unified json",
            Some(Answer::Native { .. }) => "native json",
            Some(Answer::Stream(s)) if s.is_native() => "native stream",
            Some(Answer::Stream(_)) => "unified stream",
        };
        let translated = entry(None, None, true);
        assert_eq!((kind(translated.answer(false)), kind(translated.answer(true))), ("unified json", "unified stream"));
        let anthropic_stream = entry(None, Some(vec!["event: message_stop\ndata: {}\n\n".into()]), false);
        assert_eq!(
            (kind(anthropic_stream.answer(false)), kind(anthropic_stream.answer(true))),
            ("none", "native stream")
        );
        let anthropic_both = entry(Some("{}"), Some(vec![]), false);
        assert_eq!(
            (kind(anthropic_both.answer(false)), kind(anthropic_both.answer(true))),
            ("native json", "native stream")
        );
        let openai_whole = entry(Some("{}"), None, true);
        assert_eq!(
            (kind(openai_whole.answer(false)), kind(openai_whole.answer(true))),
            ("native json", "unified stream")
        );
    }

    #[test]
    fn only_an_answer_whose_every_choice_finished_is_whole() {
        assert!(finished(r#"{"choices":[{"index":0,"message":{},"finish_reason":"stop"}]}"#));
        assert!(finished(r#"{"choices":[{"finish_reason":"length"},{"finish_reason":"stop"}]}"#));
        assert!(!finished(r#"{"choices":[{"finish_reason":"stop"},{"finish_reason":null}]}"#));
        assert!(!finished(r#"{"choices":[]}"#));
        assert!(!finished(r#"{"error":{"message":"x"}}"#));
    }
}
