//! `switchyard adapter check`: what an adapter is (metadata, imports, shape), what it costs
//! (load, cold instance, a call on a sample request) and every problem found, with its fix.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use super::Loaded;
use crate::plugin::{Operation, SourceContext};

/// Warm calls timed on the sample request; the median is reported.
const SAMPLE_CALLS: usize = 21;

/// What the component holds, read from its bytes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Shape {
    pub imports: Vec<String>,
    pub core_modules: usize,
    /// Module instantiations (what the engine's per-component limit counts).
    pub core_instances: usize,
    pub memories: usize,
    /// Initial size of all memories the modules define, in bytes.
    pub initial_memory: u64,
    pub tables: usize,
    pub largest_table: u64,
}

/// Reads a component's shape; an error says why the bytes are not a component.
pub fn shape(wasm: &[u8]) -> Result<Shape, String> {
    use wasmparser::{Encoding, Parser, Payload};
    let mut shape = Shape::default();
    // Depth of nesting, so only the outer component's imports are listed.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(wasm) {
        match payload.map_err(|e| format!("not a WebAssembly component: {e}"))? {
            Payload::Version { encoding, .. } => {
                depth += 1;
                if depth == 1 && encoding == Encoding::Module {
                    return Err("this is a core module, not a component: build it as a component \
                                (wasm32-wasip2, componentize-js, componentize-py, or `wasm-tools component new`)"
                        .into());
                }
            }
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ModuleSection { .. } => shape.core_modules += 1,
            // Only instantiations count against the engine's limit, not bags of exports.
            Payload::InstanceSection(reader) => {
                for instance in reader {
                    if let wasmparser::Instance::Instantiate { .. } = instance.map_err(|e| e.to_string())? {
                        shape.core_instances += 1;
                    }
                }
            }
            Payload::ComponentImportSection(reader) if depth == 1 => {
                for import in reader {
                    let import = import.map_err(|e| e.to_string())?;
                    shape.imports.push(import.name.name.to_string());
                }
            }
            Payload::MemorySection(reader) => {
                for memory in reader {
                    let memory = memory.map_err(|e| e.to_string())?;
                    shape.memories += 1;
                    let page = 1u64 << memory.page_size_log2.unwrap_or(16);
                    shape.initial_memory = shape.initial_memory.saturating_add(memory.initial.saturating_mul(page));
                }
            }
            Payload::TableSection(reader) => {
                for table in reader {
                    let table = table.map_err(|e| e.to_string())?;
                    shape.tables += 1;
                    shape.largest_table = shape.largest_table.max(table.ty.initial);
                }
            }
            _ => {}
        }
    }
    Ok(shape)
}

/// A chat request every adapter can translate.
fn sample_request() -> String {
    json!({
        "model": "sample",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello in one word."}
        ],
        "max_tokens": 16,
        "temperature": 0.2
    })
    .to_string()
}

fn sample_context() -> SourceContext {
    SourceContext {
        operation: Operation::Chat,
        source_name: "check".into(),
        base_url: "https://api.example.com".into(),
        api_key: "check-key".into(),
        upstream_model: "model-x".into(),
        settings: Vec::new(),
    }
}

/// Prints the report; true when no problem was found. With `cases`, the first streamed case
/// there also times the adapter per stream event.
pub async fn check(loaded: &Loaded, file_name: &str, cases: Option<&Path>, settings: Vec<(String, String)>) -> bool {
    let context = SourceContext { settings, ..sample_context() };
    let adapter = &loaded.adapter;
    let meta = adapter.metadata();
    let limits = adapter.limits();
    let mut problems: Vec<String> = Vec::new();
    println!("adapter   {} {} (file name: {})", meta.name, meta.version, adapter.name());
    let framing = match meta.stream_framing {
        crate::plugin::StreamFraming::Sse => "server-sent events",
        crate::plugin::StreamFraming::Ndjson => "NDJSON",
    };
    println!("protocol  {}, streams framed as {framing}", meta.protocol);
    let native: Vec<&str> = adapter.native_protocols().collect();
    if !native.is_empty() {
        println!("native    forwards {} as sent (interface `native`)", native.join(", "));
    }
    if meta.name != adapter.name().as_str() {
        problems.push(format!(
            "describe() names it `{}`, but the gateway knows an adapter by its file name (`{}`): sources \
             write `adapter: {}`. Rename the file or the name in describe() so they agree",
            meta.name,
            adapter.name(),
            adapter.name()
        ));
    }
    if meta.protocol.trim().is_empty() {
        problems.push("describe() gives no protocol: write the upstream protocol it speaks, e.g. `cohere-v2`".into());
    }
    if let Some(wasm) = &loaded.wasm {
        println!("size      {} KiB", wasm.len() / 1024);
        match shape(wasm) {
            Ok(shape) => report_shape(&shape, limits.memory_bytes, &mut problems),
            Err(e) => problems.push(e),
        }
    }
    println!(
        "limits    memory {} MiB, CPU {} ms and wall {} ms per call (set per adapter: adapters.{}.memory_mb, cpu_ms_per_call)",
        limits.memory_bytes >> 20,
        limits.cpu_per_call.as_millis(),
        limits.wall_per_call.as_millis(),
        adapter.name()
    );
    let load = if loaded.from_cache { "read from the compile cache" } else { "compiled" };
    println!("load      {} ms ({load})", loaded.load_time.as_millis());
    match adapter.cold_start(&context).await {
        Ok(cold) => println!("cold      {:.2} ms to a new instance with an open session", ms(cold)),
        Err(e) => problems.push(format!("a new instance cannot open a session: {e}")),
    }
    match time_calls(adapter, &context).await {
        Ok(per_call) => {
            println!(
                "per call  {:.1} µs median transform-request on a sample chat request (warm instance)",
                us(per_call)
            );
            if per_call * 4 > limits.cpu_per_call {
                problems.push(format!(
                    "a sample call takes {:.1} ms, over a quarter of the CPU bound ({} ms): raise \
                     adapters.{}.cpu_ms_per_call, or larger requests will be cut off",
                    ms(per_call),
                    limits.cpu_per_call.as_millis(),
                    adapter.name()
                ));
            }
        }
        Err(e) => problems.push(e),
    }
    match memory_held(adapter, &context).await {
        Ok(bytes) => {
            println!("memory    {:.1} MiB held by a pooled instance after a request", bytes as f64 / (1 << 20) as f64)
        }
        Err(e) => problems.push(e),
    }
    if let Some(dir) = cases {
        match time_stream(adapter, dir).await {
            Ok(Some((case, events, per_event))) => println!(
                "per event {:.1} µs mean transform-stream-chunk over the {events} events of {}",
                us(per_event),
                case.display()
            ),
            Ok(None) => println!("per event (no streamed case with a 2xx upstream answer in {})", dir.display()),
            Err(e) => problems.push(e),
        }
    }
    if problems.is_empty() {
        println!("no problems found: put {file_name} in adapter_dir or upload it (docs/adapters.md)");
        true
    } else {
        for problem in &problems {
            println!("problem   {problem}");
        }
        false
    }
}

fn report_shape(shape: &super::check::Shape, memory_cap: usize, problems: &mut Vec<String>) {
    println!(
        "shape     core modules {}, instances {}, memories {} ({:.1} MiB at start), tables {} (largest {} elements)",
        shape.core_modules,
        shape.core_instances,
        shape.memories,
        shape.initial_memory as f64 / (1 << 20) as f64,
        shape.tables,
        shape.largest_table
    );
    let (ours, wasi): (Vec<&String>, Vec<&String>) =
        shape.imports.iter().partition(|name| name.starts_with("switchyard:adapter/"));
    let ours: Vec<&str> = ours.iter().map(|s| s.as_str()).collect();
    println!("imports   {}", if ours.is_empty() { "none of the host's".into() } else { ours.join(", ") });
    if !wasi.is_empty() {
        let names: Vec<&str> = wasi.iter().map(|s| s.as_str()).collect();
        println!("          and {} (linked empty: no files, environment, arguments or sockets)", names.join(", "));
    }
    let max_instances = crate::plugin::MAX_CORE_INSTANCES as usize;
    if shape.core_instances > max_instances {
        problems.push(format!(
            "{} core instances: the engine allows {max_instances} per component. Link fewer modules",
            shape.core_instances
        ));
    }
    if shape.initial_memory as usize > memory_cap / 2 {
        problems.push(format!(
            "its memories start at {} MiB, over half the memory cap ({} MiB): requests will run out. Raise \
             adapters.NAME.memory_mb in the gateway's config (test with --memory-mb)",
            shape.initial_memory >> 20,
            memory_cap >> 20
        ));
    }
}

async fn time_calls(
    adapter: &std::sync::Arc<crate::plugin::Adapter>,
    context: &SourceContext,
) -> Result<Duration, String> {
    let request = sample_request();
    let mut times = Vec::with_capacity(SAMPLE_CALLS);
    for _ in 0..SAMPLE_CALLS {
        let mut session = adapter.open_session(context).await.map_err(|e| format!("a session does not open: {e}"))?;
        let started = Instant::now();
        let result = session.transform_request(&request).await;
        times.push(started.elapsed());
        match result {
            Err(e) => return Err(format!("the sample request traps: {e}")),
            Ok(Err(e)) => {
                return Err(format!(
                    "transform-request refuses a plain chat request ({}: {}); an adapter should translate it \
                     (give the settings it needs with --setting KEY=VALUE)",
                    e.kind.wit_name(),
                    e.message
                ));
            }
            Ok(Ok(_)) => {}
        }
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// Linear memory an instance holds once it has served the sample request.
async fn memory_held(
    adapter: &std::sync::Arc<crate::plugin::Adapter>,
    context: &SourceContext,
) -> Result<usize, String> {
    let mut session = adapter.open_session(context).await.map_err(|e| format!("a session does not open: {e}"))?;
    let _ = session.transform_request(&sample_request()).await;
    Ok(session.memory_bytes())
}

/// Times `transform-stream-chunk` over the events of the longest streamed case in `dir` that
/// has a 2xx upstream answer: (its file, events, mean time per event).
async fn time_stream(
    adapter: &std::sync::Arc<crate::plugin::Adapter>,
    dir: &Path,
) -> Result<Option<(std::path::PathBuf, usize, Duration)>, String> {
    let mut longest: Option<(std::path::PathBuf, super::Case, Vec<crate::plugin::StreamEvent>)> = None;
    for file in super::case_files(dir)? {
        let Ok(case) = super::read_case(&file) else { continue };
        let streamed = case.request.get("stream").and_then(serde_json::Value::as_bool) == Some(true);
        let Some(upstream) = case.upstream_response.as_ref().filter(|u| streamed && (200..300).contains(&u.status))
        else {
            continue;
        };
        let body = super::cases::response_body(upstream, dir)?;
        let events = crate::provider::split_events(&body, adapter.metadata().stream_framing)
            .map_err(|e| format!("{}: the recorded stream does not split into events: {e}", file.display()))?;
        if events.len() > longest.as_ref().map_or(0, |(_, _, e)| e.len()) {
            longest = Some((file, case, events));
        }
    }
    let Some((file, case, events)) = longest else {
        return Ok(None);
    };
    let mut total = Duration::ZERO;
    let mut timed = 0u32;
    // A few rounds, so one slow first call does not decide the figure.
    for _ in 0..5 {
        let mut session = adapter
            .open_session_at(&case.context.source_context(), Some(case.now_unix_ms), false)
            .await
            .map_err(|e| format!("a session does not open: {e}"))?;
        let _ = session.transform_request(&case.request.to_string()).await;
        for event in &events {
            let started = Instant::now();
            let out = session.transform_stream_chunk(event).await;
            total += started.elapsed();
            timed += 1;
            match out {
                Ok(Ok(o)) if !o.done => {}
                _ => break,
            }
        }
    }
    Ok(Some((file, events.len(), total / timed.max(1))))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_module_is_told_to_become_a_component() {
        // The smallest core module: magic and version 1.
        let module = b"\0asm\x01\0\0\0";
        assert!(shape(module).unwrap_err().contains("core module, not a component"));
        assert!(shape(b"not wasm").unwrap_err().contains("not a WebAssembly component"));
    }

    #[test]
    fn the_builtin_components_shape_is_read() {
        let (_, wasm) = crate::plugin::BUILTIN_ADAPTERS.iter().find(|(name, _)| *name == "openai").unwrap();
        let shape = shape(wasm).unwrap();
        assert!(shape.core_modules >= 1 && shape.core_instances >= 1, "{shape:?}");
        assert_eq!(shape.memories, 1, "{shape:?}");
        assert!(shape.imports.iter().any(|i| i.starts_with("switchyard:adapter/")), "{shape:?}");
    }
}
