//! The Lua-compat component: exports the adapter world and runs a legacy Lua adapter script
//! (the gopher-lua era contract, Lua 5.1) that the host hands it, so to the gateway a Lua
//! adapter is just an adapter, in the same sandbox and under the same limits.

mod legacy;
mod runtime;

use std::cell::RefCell;

use adapter_kit::errors::{adapter_error, upstream_error};
use adapter_kit::http::{header, join_url, setting_headers};
use adapter_kit::unified::{self, ChunkBuilder};
use adapter_kit::{
    AdapterError, ErrorKind, Guest, GuestSession, HttpRequest, HttpResponse, Metadata, Operation, SourceContext,
    StreamEvent, StreamFraming, StreamOutput, host, parse_request,
};
use serde_json::{Value, json};

struct LuaCompat;

impl Guest for LuaCompat {
    type Session = Session;

    fn describe() -> Metadata {
        let described = runtime::with(|s| {
            let framing = if s.meta.ndjson { StreamFraming::Ndjson } else { StreamFraming::Sse };
            Ok(Metadata {
                name: s.meta.name.clone(),
                version: s.meta.version.clone(),
                protocol: format!("lua:{}", s.meta.endpoint),
                stream_framing: framing,
            })
        });
        // A script that does not load has no metadata: trap, so the host refuses the adapter
        // with the reason (which it logs through `host::log` first).
        described.unwrap_or_else(|e| {
            host::log(host::LogLevel::Error, &e);
            panic!("{e}")
        })
    }
}

struct Session {
    ctx: SourceContext,
    stream: RefCell<legacy::StreamState>,
}

/// A script's own failure: the request cannot be translated.
fn script_error(message: String) -> AdapterError {
    adapter_error(ErrorKind::InvalidResponse, &format!("Lua adapter: {message}"))
}

impl GuestSession for Session {
    fn new(ctx: SourceContext) -> Self {
        Session { ctx, stream: RefCell::new(legacy::StreamState::default()) }
    }

    fn transform_request(&self, request: String) -> Result<HttpRequest, AdapterError> {
        if self.ctx.operation != Operation::Chat {
            return Err(adapter_error(ErrorKind::Unsupported, "Lua adapters translate chat requests only"));
        }
        let mut unified = parse_request(&request)?;
        unified.insert("model".into(), json!(self.ctx.upstream_model));
        let streaming = unified.get("stream").and_then(Value::as_bool) == Some(true);
        {
            let mut st = self.stream.borrow_mut();
            st.include_usage = unified::wants_stream_usage(&unified);
            st.chunks = ChunkBuilder {
                id: format!("chatcmpl-lua-{}", host::now_unix_ms()),
                model: self.ctx.upstream_model.clone(),
                created: host::now_unix_ms() / 1000,
            };
        }
        let request = Value::Object(unified).to_string();
        runtime::with(|s| {
            let transform = s.function("transform_request").expect("checked at load");
            let body = s.call_text(&transform, "transform_request", request)?;
            let endpoint = match (&s.meta.stream_endpoint, streaming) {
                (Some(stream_endpoint), true) => stream_endpoint,
                _ => &s.meta.endpoint,
            };
            let url = join_url(&self.ctx.base_url, &endpoint.replace("{model}", &self.ctx.upstream_model));
            let mut headers: Vec<(String, String)> = s.meta.headers.clone();
            let build_headers = s.function("build_headers");
            if let Some(build) = &build_headers {
                let meta = json!({
                    "url": url, "method": "POST", "body": body, "api_key": self.ctx.api_key,
                    "timestamp": host::now_unix_ms() / 1000, "source": {"name": self.ctx.source_name},
                });
                let built = build.call::<mlua::Value>(s.table_of(&meta)?).map_err(|e| format!("`build_headers` failed: {e}"))?;
                let mlua::Value::Table(built) = built else {
                    return Err(format!("`build_headers` must return a table of headers, it returned {}", built.type_name()));
                };
                for pair in built.pairs::<String, String>() {
                    let (name, value) = pair.map_err(|e| format!("`build_headers` must map names to strings: {e}"))?;
                    headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
                    headers.push((name, value));
                }
            }
            // Without build_headers: the static headers, plus the key as a Bearer token unless
            // one of them already authenticates.
            if build_headers.is_none() && header(&headers, "authorization").is_none() && !self.ctx.api_key.is_empty() {
                headers.push(("authorization".into(), format!("Bearer {}", self.ctx.api_key)));
            }
            if header(&headers, "content-type").is_none() {
                headers.push(("content-type".into(), "application/json".into()));
            }
            headers.extend(setting_headers(&self.ctx.settings));
            Ok(HttpRequest { method: "POST".into(), url, headers, body: body.into_bytes() })
        })
        .map_err(script_error)
    }

    fn transform_response(&self, response: HttpResponse) -> Result<String, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        let body = String::from_utf8_lossy(&response.body).into_owned();
        let chunks = self.stream.borrow().chunks.clone();
        let translated = runtime::with(|s| match s.function("transform_response") {
            None => Ok(None),
            Some(f) => s.call_text(&f, "transform_response", body.as_str()).map(Some),
        })
        .map_err(script_error)?;
        let Some(legacy) = translated else {
            // No transform_response: the upstream speaks OpenAI already.
            let value: Value = adapter_kit::parse_body(&response.body)?;
            if value.get("choices").and_then(Value::as_array).is_none() {
                return Err(adapter_error(ErrorKind::InvalidResponse, "upstream response has no `choices` array"));
            }
            return Ok(body);
        };
        let legacy: Value = serde_json::from_str(&legacy)
            .map_err(|e| script_error(format!("`transform_response` returned text that is not JSON: {e}")))?;
        if let Some(message) = legacy["error"].as_str() {
            return Err(adapter_error(ErrorKind::InvalidResponse, message));
        }
        Ok(legacy::response(&legacy, &chunks.id.replace("chatcmpl-lua", "chatcmpl-lua-r"), &chunks.model, chunks.created))
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<StreamOutput, AdapterError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(StreamOutput { chunks: vec![], done: false });
        }
        let translated = runtime::with(|s| match s.function("transform_stream_chunk") {
            None => Ok(None),
            // A Lua error forwards the raw line (the legacy contract).
            Some(f) => Ok(Some(s.call_text(&f, "transform_stream_chunk", data).unwrap_or_else(|e| {
                host::log(host::LogLevel::Debug, &format!("transform_stream_chunk: {e}; forwarding the line"));
                data.to_string()
            }))),
        })
        .map_err(script_error)?;
        let mut st = self.stream.borrow_mut();
        let text = match translated {
            Some(text) if text.is_empty() => return Ok(StreamOutput { chunks: vec![], done: false }),
            Some(text) if text != data => text,
            // No function, or a forwarded line: the upstream's own OpenAI chunk.
            _ => {
                if data == "[DONE]" {
                    st.done = true;
                    return Ok(StreamOutput { chunks: vec![], done: true });
                }
                let value: Value = serde_json::from_str(data)
                    .map_err(|e| adapter_error(ErrorKind::InvalidResponse, &format!("stream event is not JSON: {e}")))?;
                if value.get("choices").is_none() {
                    return Ok(StreamOutput { chunks: vec![], done: false });
                }
                st.started = true;
                st.finished |= value["choices"][0]["finish_reason"].is_string();
                return Ok(StreamOutput { chunks: vec![data.to_string()], done: false });
            }
        };
        let legacy: Value = serde_json::from_str(&text)
            .map_err(|e| script_error(format!("`transform_stream_chunk` returned text that is not JSON: {e}")))?;
        if let Some(message) = legacy["error"].as_str() {
            return Err(adapter_error(ErrorKind::Server, message));
        }
        let chunks = legacy::chunk(&legacy, &mut st);
        Ok(StreamOutput { chunks, done: st.done })
    }

    fn finish_stream(&self) -> Result<StreamOutput, AdapterError> {
        let st = self.stream.borrow();
        adapter_kit::stream_end(st.done || st.finished, "the end of the stream (`done` or a finish_reason)")
    }
}

adapter_kit::export_unified!(LuaCompat);
