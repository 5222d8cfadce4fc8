//! Shared by every built-in adapter: the generated WIT bindings (one copy, exported through
//! `adapter_kit::export!`) and the protocol-neutral helpers adapters would otherwise repeat.

pub mod bindings {
    wit_bindgen::generate!({
        world: "adapter-world",
        path: "../../wit",
        pub_export_macro: true,
        default_bindings_module: "adapter_kit::bindings",
        export_macro_name: "export",
    });
}

pub use bindings::export;

pub mod errors;
pub mod http;
pub mod openai_compat;
pub mod unified;

pub use bindings::exports::switchyard::adapter::adapter::{Guest, GuestSession, SessionBorrow};
pub use bindings::switchyard::adapter::host;
pub use bindings::switchyard::adapter::types::{
    AdapterError, ErrorKind, HttpRequest, HttpResponse, Metadata, Operation, SourceContext, StreamEvent, StreamFraming,
    StreamOutput,
};

/// Parses the unified request JSON the host hands over; it is always a JSON object.
pub fn parse_request(request: &str) -> Result<serde_json::Map<String, serde_json::Value>, AdapterError> {
    match serde_json::from_str::<serde_json::Value>(request) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(errors::adapter_error(ErrorKind::BadRequest, "request body must be a JSON object")),
        Err(e) => Err(errors::adapter_error(ErrorKind::BadRequest, &format!("request body is not JSON: {e}"))),
    }
}

/// Metadata for a built-in adapter (version = the workspace version).
pub fn metadata(name: &str, protocol: &str, stream_framing: StreamFraming) -> Metadata {
    Metadata { name: name.into(), version: env!("CARGO_PKG_VERSION").into(), protocol: protocol.into(), stream_framing }
}

/// Parses an upstream body that must be JSON.
pub fn parse_body(body: &[u8]) -> Result<serde_json::Value, AdapterError> {
    serde_json::from_slice(body)
        .map_err(|e| errors::adapter_error(ErrorKind::InvalidResponse, &format!("upstream body is not JSON: {e}")))
}

/// The verdict at the end of an upstream body: complete if the upstream signalled its end,
/// else `truncated`, naming the signal that never came.
pub fn stream_end(signalled: bool, missing: &str) -> Result<StreamOutput, AdapterError> {
    if signalled {
        Ok(StreamOutput { chunks: vec![], done: true })
    } else {
        Err(errors::adapter_error(ErrorKind::Truncated, &format!("upstream stream ended before {missing}")))
    }
}

/// A source setting by key, as written under the source's `settings:`.
pub fn setting<'a>(ctx: &'a SourceContext, key: &str) -> Option<&'a str> {
    ctx.settings.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}
