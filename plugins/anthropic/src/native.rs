//! Anthropic client → Anthropic upstream, untranslated: the client's Messages request goes on
//! as sent (only `model` and the credentials replaced, its betas kept), and the answer and
//! every stream event come back as the upstream sent them; the books get unified copies.

use std::cell::RefCell;

use adapter_kit::errors::{adapter_error, upstream_error};
use adapter_kit::{
    AdapterError, ClientRequest, ErrorKind, GuestNativeSession, HttpRequest, HttpResponse, NativeOutput,
    NativeResponse, SourceContext, StreamEvent, setting,
};
use serde_json::Value;

use super::stream::StreamState;

/// The client protocols this adapter forwards: Messages, and counting a Messages request's
/// tokens (`/v1/messages/count_tokens`, answered by the upstream itself).
pub const PROTOCOL: &str = "anthropic-messages";
pub const COUNT_TOKENS: &str = "anthropic-count-tokens";

/// Client headers that shape the upstream's answer and carry no credential.
pub const CLIENT_HEADERS: &[&str] = &["anthropic-version", "anthropic-beta"];

pub struct NativeSession {
    ctx: SourceContext,
    stream: RefCell<StreamState>,
    /// This session counts tokens rather than asks for a message.
    counting: std::cell::Cell<bool>,
}

impl GuestNativeSession for NativeSession {
    fn new(ctx: SourceContext) -> Self {
        // The books always need the usage chunk.
        let mut stream = StreamState::default();
        stream.include_usage = true;
        NativeSession { ctx, stream: RefCell::new(stream), counting: Default::default() }
    }

    fn transform_request(&self, request: ClientRequest) -> Result<HttpRequest, AdapterError> {
        let counting = match request.protocol.as_str() {
            PROTOCOL => false,
            COUNT_TOKENS => true,
            other => {
                return Err(adapter_error(ErrorKind::Unsupported, &format!("`{other}` is not forwarded natively")));
            }
        };
        self.counting.set(counting);
        let mut body = match serde_json::from_slice::<Value>(&request.body) {
            Ok(Value::Object(body)) => body,
            _ => return Err(adapter_error(ErrorKind::BadRequest, "request body must be a JSON object")),
        };
        body.insert("model".into(), Value::String(self.ctx.upstream_model.clone()));
        let client = |name: &str| request.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let mut http = super::request::http(&self.ctx, Value::Object(body))?;
        if counting {
            let path = setting(&self.ctx, "count_tokens_path").unwrap_or("/messages/count_tokens");
            http.url = adapter_kit::http::join_url(&self.ctx.base_url, path);
        }
        // The client's protocol version and betas are its own to choose; the source's
        // configured betas are added to them.
        if let Some(version) = client("anthropic-version") {
            set_header(&mut http.headers, "anthropic-version", version.to_string());
        }
        let betas = merged_betas(client("anthropic-beta"), setting(&self.ctx, "anthropic_beta"));
        if !betas.is_empty() {
            set_header(&mut http.headers, "anthropic-beta", betas);
        }
        Ok(http)
    }

    fn transform_response(&self, response: HttpResponse) -> Result<NativeResponse, AdapterError> {
        if !(200..300).contains(&response.status) {
            return Err(upstream_error(&response));
        }
        let message: Value = adapter_kit::parse_body(&response.body)?;
        if self.counting.get() {
            if message.get("input_tokens").and_then(Value::as_u64).is_none() {
                return Err(adapter_error(ErrorKind::InvalidResponse, "count_tokens answer has no `input_tokens`"));
            }
            // Nothing was generated: the books have nothing to count.
            return Ok(NativeResponse { body: response.body, unified: "{}".into() });
        }
        let unified = super::unified_message(&message, &self.ctx.upstream_model)?;
        Ok(NativeResponse { body: response.body, unified })
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<NativeOutput, AdapterError> {
        let books = self.stream.borrow_mut().event(&event, &self.ctx.upstream_model)?;
        Ok(adapter_kit::passed_on(event, books))
    }

    fn finish_stream(&self) -> Result<NativeOutput, AdapterError> {
        Ok(adapter_kit::ended(adapter_kit::stream_end(self.stream.borrow().done, "message_stop")?))
    }
}

fn set_header(headers: &mut Vec<(String, String)>, name: &str, value: String) {
    headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
    headers.push((name.to_string(), value));
}

/// The client's betas, then the source's that the client did not name; comma-separated.
fn merged_betas(client: Option<&str>, configured: Option<&str>) -> String {
    let mut betas: Vec<&str> = Vec::new();
    for beta in client.into_iter().chain(configured).flat_map(|list| list.split(',')).map(str::trim) {
        if !beta.is_empty() && !betas.contains(&beta) {
            betas.push(beta);
        }
    }
    betas.join(",")
}

#[cfg(test)]
mod tests {
    use super::merged_betas;

    #[test]
    fn betas_keep_the_clients_order_and_add_the_sources_once() {
        assert_eq!(merged_betas(Some("a, b"), Some("b,c")), "a,b,c");
        assert_eq!(merged_betas(None, None), "");
        assert_eq!(merged_betas(None, Some("x")), "x");
    }
}
