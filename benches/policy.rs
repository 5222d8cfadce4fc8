//! Policy cost through the real engine (run: `cargo bench --bench policy`): the request hook
//! on a ~1 KB prompt and the stream hook per chunk, for the built-in redaction, an empty Rust
//! policy, and the JavaScript and Python example policies when examples/policies is built.
#![allow(clippy::unwrap_used, reason = "a benchmark stops at its first failure")]

use std::path::Path;
use std::time::{Duration, Instant};

use switchyard::plugin::{BUILTIN_POLICIES, Hooks, PluginHost, PolicyContext, PolicyPlugin, SandboxLimits};

const ITERATIONS: usize = 5_000;

/// A ~1 KB chat request carrying an email address and a card number among ordinary text.
fn request_1kb() -> String {
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(9);
    serde_json::json!({
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": format!("You are a careful assistant. {filler}")},
            {"role": "user", "content": format!("Mail bob@example.com about card 4111 1111 1111 1111. {filler}")},
        ],
    })
    .to_string()
}

fn context(settings: &[(&str, &str)]) -> PolicyContext {
    PolicyContext {
        request_id: "bench".into(),
        key: "bench".into(),
        route: None,
        requested_model: "gpt-4o".into(),
        source: Some("openai".into()),
        resolved_model: Some("gpt-4o".into()),
        settings: settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    }
}

fn line(name: &str, samples: &mut [Duration]) {
    samples.sort();
    let n = samples.len();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean = samples.iter().sum::<Duration>() / n as u32;
    let pct = |p: f64| samples[((n as f64 * p) as usize).min(n - 1)];
    println!("{name:<52} {:>9.1} {:>9.1} {:>9.1} {:>8}", us(mean), us(pct(0.50)), us(pct(0.99)), n);
}

async fn measure(name: &str, policy: &PolicyPlugin, settings: &[(&str, &str)], body: &str) {
    let ctx = context(settings);
    let iterations = if policy.metadata().name.contains("names") { ITERATIONS / 5 } else { ITERATIONS };
    if policy.has(Hooks::REQUEST) {
        for _ in 0..200 {
            policy.on_request(&ctx, body).await.unwrap();
        }
        let mut samples = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let t0 = Instant::now();
            std::hint::black_box(policy.on_request(&ctx, body).await.unwrap());
            samples.push(t0.elapsed());
        }
        line(&format!("{name}: request hook, 1 KB prompt"), &mut samples);
    }
    if policy.has(Hooks::STREAM) {
        // What the host hands over per chunk: the held-back tail plus a typical delta.
        let held = format!("{}{}", "x".repeat(policy.hold_back()), " and then the next few words");
        let mut samples = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            let t0 = Instant::now();
            std::hint::black_box(policy.on_stream(&ctx, &held, false).await.unwrap());
            samples.push(t0.elapsed());
        }
        line(&format!("{name}: stream hook, per chunk"), &mut samples);
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(run());
}

async fn run() {
    let body = request_1kb();
    println!("switchyard policy benchmark (release; request body {} bytes)", body.len());
    println!("{:<52} {:>9} {:>9} {:>9} {:>8}", "operation", "mean µs", "p50 µs", "p99 µs", "samples");
    let (host, _) = PluginHost::load(SandboxLimits::default(), None, None, Default::default()).await.unwrap();
    let load = |name: &'static str, wasm: Vec<u8>| {
        let host = &host;
        async move { host.load_policy(name, &wasm, SandboxLimits::default()).await.unwrap() }
    };
    let builtin = |name: &str| BUILTIN_POLICIES.iter().find(|(n, _)| *n == name).unwrap().1.to_vec();

    let pii = load("redact-pii", builtin("redact-pii")).await;
    measure("redact-pii (Rust, built in)", &pii, &[], &body).await;
    let secrets = load("block-secrets", builtin("block-secrets")).await;
    measure("block-secrets (Rust, built in)", &secrets, &[("action", "redact")], &body).await;
    let empty = Path::new(env!("SWITCHYARD_GUEST_DIR")).join("hostile_policy.wasm");
    let empty = load("empty", std::fs::read(empty).unwrap()).await;
    measure("empty (Rust: allows everything)", &empty, &[("mode", "allow")], &body).await;

    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/policies");
    for (name, file, settings) in [
        ("injection (JavaScript example)", "injection-js/injection.wasm", &[][..]),
        ("names (Python example)", "names-python/names.wasm", &[("names", "Alice Smith")][..]),
    ] {
        match std::fs::read(examples.join(file)) {
            Ok(wasm) => {
                measure(
                    name,
                    &load(if file.contains("names") { "names" } else { "injection" }, wasm).await,
                    settings,
                    &body,
                )
                .await
            }
            Err(_) => println!("{name}: not built (run examples/policies/build.sh)"),
        }
    }
}
