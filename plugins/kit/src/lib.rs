//! Shared by every built-in adapter: the generated WIT bindings (one copy, exported through
//! `adapter_kit::export!`, or `export_unified!` for adapters that forward nothing natively)
//! and the protocol-neutral helpers adapters would otherwise repeat.

pub mod bindings {
    wit_bindgen::generate!({
        world: "full-adapter-world",
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
pub use bindings::exports::switchyard::adapter::models::Guest as ModelsGuest;
pub use bindings::exports::switchyard::adapter::native::{
    ClientRequest, Guest as NativeGuest, GuestNativeSession, NativeOutput, NativeProtocol, NativeResponse,
};
pub use bindings::switchyard::adapter::host;
pub use bindings::switchyard::adapter::types::{
    AdapterError, ErrorKind, HttpRequest, HttpResponse, Metadata, Operation, SourceContext, StreamEvent, StreamFraming,
    StreamOutput,
};

/// The native session of an adapter that forwards no protocol natively: the host never opens
/// one (its `protocols()` is empty), and each call refuses if it did.
pub struct NoNative;

impl GuestNativeSession for NoNative {
    fn new(_context: SourceContext) -> Self {
        NoNative
    }

    fn transform_request(&self, _request: ClientRequest) -> Result<HttpRequest, AdapterError> {
        Err(NoNative::refusal())
    }

    fn transform_response(&self, _response: HttpResponse) -> Result<NativeResponse, AdapterError> {
        Err(NoNative::refusal())
    }

    fn transform_stream_chunk(&self, _event: StreamEvent) -> Result<NativeOutput, AdapterError> {
        Err(NoNative::refusal())
    }

    fn finish_stream(&self) -> Result<NativeOutput, AdapterError> {
        Err(NoNative::refusal())
    }
}

impl NoNative {
    fn refusal() -> AdapterError {
        errors::adapter_error(ErrorKind::Unsupported, "this adapter forwards no protocol natively")
    }
}

/// The client's request body for a native session of `protocol`: its JSON object, or the
/// refusal (another protocol, or a body that is not an object).
pub fn native_body(
    request: &ClientRequest,
    protocol: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, AdapterError> {
    if request.protocol != protocol {
        return Err(errors::adapter_error(
            ErrorKind::Unsupported,
            &format!("`{}` is not forwarded natively", request.protocol),
        ));
    }
    match serde_json::from_slice::<serde_json::Value>(&request.body) {
        Ok(serde_json::Value::Object(body)) => Ok(body),
        _ => Err(errors::adapter_error(ErrorKind::BadRequest, "request body must be a JSON object")),
    }
}

/// A native stream step that passes the upstream's `event` on as it came, with the unified
/// chunks the session's translation gave for the books.
pub fn passed_on(event: StreamEvent, books: StreamOutput) -> NativeOutput {
    NativeOutput { events: vec![event], chunks: books.chunks, done: books.done }
}

/// A native stream's end: no event of its own, the translation's trailing chunks for the books.
pub fn ended(books: StreamOutput) -> NativeOutput {
    NativeOutput { events: Vec::new(), chunks: books.chunks, done: books.done }
}

/// Declares that an adapter forwards no protocol natively.
#[macro_export]
macro_rules! no_native {
    ($adapter:ident) => {
        impl $crate::NativeGuest for $adapter {
            type NativeSession = $crate::NoNative;

            fn protocols() -> Vec<$crate::NativeProtocol> {
                Vec::new()
            }
        }
    };
}

/// Declares that an adapter cannot list its upstream's models.
#[macro_export]
macro_rules! no_models {
    ($adapter:ident) => {
        impl $crate::ModelsGuest for $adapter {
            fn list_request(_: $crate::SourceContext) -> Result<$crate::HttpRequest, $crate::AdapterError> {
                Err($crate::errors::adapter_error($crate::ErrorKind::Unsupported, "this adapter cannot list models"))
            }

            fn read_list(
                _: $crate::SourceContext,
                _: $crate::HttpResponse,
            ) -> Result<Vec<String>, $crate::AdapterError> {
                Err($crate::errors::adapter_error($crate::ErrorKind::Unsupported, "this adapter cannot list models"))
            }
        }
    };
}

/// Lists models as OpenAI's API does (`GET {base_url}/models`, `{data: [{id}]}`; see
/// `openai_compat::models_request`).
#[macro_export]
macro_rules! openai_models {
    ($adapter:ident) => {
        impl $crate::ModelsGuest for $adapter {
            fn list_request(ctx: $crate::SourceContext) -> Result<$crate::HttpRequest, $crate::AdapterError> {
                Ok($crate::openai_compat::models_request(&ctx))
            }

            fn read_list(
                _ctx: $crate::SourceContext,
                response: $crate::HttpResponse,
            ) -> Result<Vec<String>, $crate::AdapterError> {
                $crate::openai_compat::read_models(&response)
            }
        }
    };
}

/// Exports an adapter that only translates unified requests (no native protocol, no model list).
#[macro_export]
macro_rules! export_unified {
    ($adapter:ident) => {
        $crate::no_native!($adapter);
        $crate::no_models!($adapter);
        $crate::export!($adapter);
    };
}

/// The ids of an upstream's model list, read from `list` (e.g. `data`) of a 2xx JSON answer by
/// `id_of` each entry; at most [`MAX_MODELS`], each at most 200 bytes.
pub fn model_ids(
    response: &HttpResponse,
    list: &str,
    id_of: impl Fn(&serde_json::Value) -> Option<String>,
) -> Result<Vec<String>, AdapterError> {
    if !(200..300).contains(&response.status) {
        return Err(errors::upstream_error(response));
    }
    let body = parse_body(&response.body)?;
    let entries = body.get(list).and_then(serde_json::Value::as_array).ok_or_else(|| {
        errors::adapter_error(ErrorKind::InvalidResponse, &format!("the model list has no `{list}` array"))
    })?;
    Ok(entries.iter().filter_map(id_of).filter(|id| !id.is_empty() && id.len() <= 200).take(MAX_MODELS).collect())
}

/// Most model ids read from one list.
pub const MAX_MODELS: usize = 2000;

/// Parses the unified request JSON the host hands over as a map, for an adapter that passes it
/// on; it is always a JSON object.
pub fn parse_request(request: &str) -> Result<serde_json::Map<String, serde_json::Value>, AdapterError> {
    match serde_json::from_str::<serde_json::Value>(request) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err(errors::adapter_error(ErrorKind::BadRequest, "request body must be a JSON object")),
        Err(e) => Err(errors::adapter_error(ErrorKind::BadRequest, &format!("request body is not JSON: {e}"))),
    }
}

/// The unified chat request, typed, for an adapter that translates it.
pub fn parse_chat(request: &str) -> Result<unified::ChatRequest, AdapterError> {
    unified::ChatRequest::parse(request).map_err(|e| errors::adapter_error(ErrorKind::BadRequest, &e))
}

/// An embeddings request, typed.
pub fn parse_embeddings(request: &str) -> Result<unified::EmbeddingsRequest, AdapterError> {
    unified::EmbeddingsRequest::parse(request).map_err(|e| errors::adapter_error(ErrorKind::BadRequest, &e))
}

/// An images request, typed.
pub fn parse_images(request: &str) -> Result<unified::ImagesRequest, AdapterError> {
    unified::ImagesRequest::parse(request).map_err(|e| errors::adapter_error(ErrorKind::BadRequest, &e))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn list(body: String, status: u16) -> HttpResponse {
        HttpResponse { status, headers: vec![], body: body.into_bytes() }
    }

    #[test]
    fn a_hostile_model_list_is_bounded_in_count_and_name_length() {
        let mut ids: Vec<String> = (0..5000).map(|i| format!("{{\"id\":\"m{i}\"}}")).collect();
        ids.insert(0, format!("{{\"id\":\"{}\"}}", "x".repeat(300)));
        ids.insert(1, "{\"id\":\"\"}".into());
        ids.insert(2, "{\"id\":7}".into());
        let body = format!("{{\"data\":[{}]}}", ids.join(","));
        let id_of = |m: &serde_json::Value| m.get("id").and_then(serde_json::Value::as_str).map(str::to_string);
        let got = model_ids(&list(body, 200), "data", id_of).unwrap();
        assert_eq!((got.len(), got[0].as_str()), (MAX_MODELS, "m0"), "long, empty and non-string ids left out");
        assert_eq!(model_ids(&list("{}".into(), 200), "data", id_of).unwrap_err().kind, ErrorKind::InvalidResponse);
        assert_eq!(
            model_ids(&list("{\"error\":{\"message\":\"no\"}}".into(), 401), "data", id_of).unwrap_err().kind,
            ErrorKind::Auth
        );
    }
}
