//! Adapter cost through the real pooled engine (run: `cargo bench --bench adapter`):
//! transform-request on a ~2 KB body with instance checkout, per stream chunk, a cold
//! instance (native and the bundled Lua anthropic script), and engine cold start with and
//! without the compiled-component cache.
#![allow(clippy::unwrap_used, reason = "a benchmark stops at its first failure")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard::config::AdapterName;
use switchyard::plugin::{Adapter, Operation, PluginHost, SandboxLimits, SourceContext, StreamEvent};

const ITERATIONS: usize = 20_000;

fn context() -> SourceContext {
    SourceContext {
        operation: Operation::Chat,
        source_name: "bench".into(),
        base_url: "https://api.example.com/v1".into(),
        api_key: "sk-bench-0000000000000000".into(),
        upstream_model: "gpt-4o-2024-08-06".into(),
        settings: vec![],
    }
}

/// A realistic ~2 KB chat request: system prompt, a few turns, one tool.
fn request_2kb() -> String {
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(12);
    let body = serde_json::json!({
        "model": "gpt-4o",
        "temperature": 0.2,
        "max_tokens": 512,
        "messages": [
            {"role": "system", "content": format!("You are a careful assistant. {filler}")},
            {"role": "user", "content": format!("First question. {filler}")},
            {"role": "assistant", "content": "First answer, short."},
            {"role": "user", "content": format!("Follow-up. {filler}")},
        ],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    });
    body.to_string()
}

struct Stats {
    samples: Vec<Duration>,
}

impl Stats {
    fn line(&mut self, name: &str) {
        self.samples.sort();
        let n = self.samples.len();
        let mean = self.samples.iter().sum::<Duration>() / n as u32;
        let pct = |p: f64| self.samples[((n as f64 * p) as usize).min(n - 1)];
        println!("{name:<48} {:>9.1} {:>9.1} {:>9.1} {:>8}", us(mean), us(pct(0.50)), us(pct(0.99)), n);
    }
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Warm pool: transform-request with checkout, then per stream chunk on one session.
async fn warm(
    adapter: &Arc<Adapter>,
    name: &str,
    ctx: &SourceContext,
    body: &str,
    chunk: &StreamEvent,
    stream_start: Option<&StreamEvent>,
) {
    adapter.set_pool_capacity(4);
    // Warm the pool and the caches.
    for _ in 0..500 {
        let mut s = adapter.open_session(ctx).await.unwrap();
        s.transform_request(body).await.unwrap().unwrap();
    }
    let mut checkout = Stats { samples: Vec::with_capacity(ITERATIONS) };
    let mut transform = Stats { samples: Vec::with_capacity(ITERATIONS) };
    let mut both = Stats { samples: Vec::with_capacity(ITERATIONS) };
    for _ in 0..ITERATIONS {
        let t0 = Instant::now();
        let mut session = adapter.open_session(ctx).await.unwrap();
        let t1 = Instant::now();
        let request = session.transform_request(body).await.unwrap().unwrap();
        let t2 = Instant::now();
        drop(session);
        std::hint::black_box(request);
        checkout.samples.push(t1 - t0);
        transform.samples.push(t2 - t1);
        both.samples.push(t2 - t0);
    }
    both.line(&format!("{name}: transform-request 2 KB, checkout incl."));
    checkout.line(&format!("{name}:   of which checkout + session open"));
    transform.line(&format!("{name}:   of which transform-request call"));

    let mut session = adapter.open_session(ctx).await.unwrap();
    session.transform_request(body).await.unwrap().unwrap();
    if let Some(start) = stream_start {
        session.transform_stream_chunk(start).await.unwrap().unwrap();
    }
    let mut per_chunk = Stats { samples: Vec::with_capacity(ITERATIONS) };
    for _ in 0..ITERATIONS {
        let t0 = Instant::now();
        let out = session.transform_stream_chunk(chunk).await.unwrap().unwrap();
        per_chunk.samples.push(t0.elapsed());
        std::hint::black_box(out);
    }
    per_chunk.line(&format!("{name}: transform-stream-chunk (one event)"));
}

/// Cold instances: every session is held, so each checkout instantiates afresh (for a Lua
/// adapter that includes starting Lua and loading the script).
async fn cold(adapter: &Arc<Adapter>, name: &str, ctx: &SourceContext, body: &str) {
    const COLD: usize = 200;
    adapter.set_pool_capacity(COLD + 4);
    let mut held = Vec::with_capacity(COLD);
    for _ in 0..4 {
        held.push(adapter.open_session(ctx).await.unwrap());
    }
    let mut cold = Stats { samples: Vec::with_capacity(COLD) };
    for _ in 0..COLD {
        let t0 = Instant::now();
        let mut s = adapter.open_session(ctx).await.unwrap();
        s.transform_request(body).await.unwrap().unwrap();
        cold.samples.push(t0.elapsed());
        held.push(s);
    }
    cold.line(&format!("{name}: cold instance + transform-request"));
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let body = request_2kb();
    println!("switchyard adapter benchmark (release, {ITERATIONS} iterations; request body {} bytes)", body.len());
    println!("{:<48} {:>9} {:>9} {:>9} {:>8}", "operation", "mean µs", "p50 µs", "p99 µs", "samples");

    let (host, _) = PluginHost::load(SandboxLimits::default(), None, None, Default::default()).await.unwrap();
    let ctx = context();
    let openai_chunk = StreamEvent {
        event: "message".into(),
        data: r#"{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}"#.into(),
    };
    let anthropic_chunk = StreamEvent {
        event: "content_block_delta".into(),
        data: r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}"#.into(),
    };
    let anthropic_start = StreamEvent {
        event: "message_start".into(),
        data: r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}"#.into(),
    };
    for (name, chunk) in [("openai", &openai_chunk), ("anthropic", &anthropic_chunk)] {
        let adapter = host.adapter(&AdapterName::new(name)).unwrap();
        warm(&adapter, name, &ctx, &body, chunk, (name == "anthropic").then_some(&anthropic_start)).await;
    }
    cold(&host.adapter(&AdapterName::new("openai")).unwrap(), "openai", &ctx, &body).await;

    // The bundled Lua anthropic script in the Lua-compat component, warm and cold.
    let scripts = tempfile::tempdir().unwrap();
    let (lua_host, _) =
        PluginHost::load(SandboxLimits::default(), None, Some(scripts.path()), Default::default()).await.unwrap();
    let lua = lua_host.adapter(&AdapterName::new("lua-anthropic")).unwrap();
    warm(&lua, "lua-anthropic", &ctx, &body, &anthropic_chunk, Some(&anthropic_start)).await;
    cold(&lua, "lua-anthropic", &ctx, &body).await;

    // Engine cold start: compile vs. compiled-component cache.
    let dir = tempfile::tempdir().unwrap();
    let mut uncached = Stats { samples: Vec::new() };
    let mut cached = Stats { samples: Vec::new() };
    for round in 0..5 {
        let cache = dir.path().join(format!("cache{round}"));
        let t0 = Instant::now();
        let (_h, report) =
            PluginHost::load(SandboxLimits::default(), Some(cache.clone()), None, Default::default()).await.unwrap();
        uncached.samples.push(t0.elapsed());
        assert_eq!(report.compiled, 5);
        drop(_h);
        let t0 = Instant::now();
        let (_h, report) =
            PluginHost::load(SandboxLimits::default(), Some(cache), None, Default::default()).await.unwrap();
        cached.samples.push(t0.elapsed());
        assert_eq!(report.cache_hits, 5);
    }
    uncached.line("engine start, compiling (no cache)");
    cached.line("engine start, compiled-component cache hit");
}
