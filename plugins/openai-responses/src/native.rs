//! Responses client → Responses upstream, untranslated: the client's request goes on as sent
//! (only `model` and the credentials replaced), built-in tools, reasoning items and
//! `encrypted_content` included; the answer and each event come back as sent, the books get
//! unified copies. A `response.failed` ends the attempt as a classified error, so the door
//! sends exactly one terminal event of its own.

use std::cell::RefCell;

use adapter_kit::errors::upstream_error;
use adapter_kit::{
    AdapterError, ClientRequest, GuestNativeSession, HttpRequest, HttpResponse, NativeOutput, NativeResponse,
    SourceContext, StreamEvent,
};
use serde_json::Value;

use super::stream::StreamState;

pub const PROTOCOL: &str = "openai-responses";

/// Client headers that shape the answer and carry no credential.
pub const CLIENT_HEADERS: &[&str] = &["openai-beta"];

pub struct NativeSession {
    ctx: SourceContext,
    stream: RefCell<StreamState>,
}

impl GuestNativeSession for NativeSession {
    fn new(ctx: SourceContext) -> Self {
        let mut stream = StreamState::default();
        stream.include_usage = true;
        NativeSession { ctx, stream: RefCell::new(stream) }
    }

    fn transform_request(&self, request: ClientRequest) -> Result<HttpRequest, AdapterError> {
        let mut body = adapter_kit::native_body(&request, PROTOCOL)?;
        body.insert("model".into(), Value::String(self.ctx.upstream_model.clone()));
        let mut http = super::http(&self.ctx, Value::Object(body));
        for (name, value) in request.headers.into_iter().filter(|(k, _)| CLIENT_HEADERS.contains(&k.as_str())) {
            http.headers.push((name, value));
        }
        Ok(http)
    }

    fn transform_response(&self, response: HttpResponse) -> Result<NativeResponse, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        let body: Value = adapter_kit::parse_body(&response.body)?;
        let unified = super::unified_response(&body, &self.ctx.upstream_model)?;
        Ok(NativeResponse { body: response.body, unified })
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<NativeOutput, AdapterError> {
        let books = self.stream.borrow_mut().event(&event, &self.ctx.upstream_model)?;
        Ok(adapter_kit::passed_on(event, books))
    }

    fn finish_stream(&self) -> Result<NativeOutput, AdapterError> {
        Ok(adapter_kit::ended(adapter_kit::stream_end(self.stream.borrow().done, "response.completed")?))
    }
}
