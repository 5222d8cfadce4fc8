//! The cache key: a digest of the tenant's partition, the model asked for, the client's protocol
//! and a canonical form of the request (members sorted, fields that do not change the answer left out).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Top-level request fields that never change the answer: how it is delivered or labelled.
const IGNORED: &[&str] =
    &["stream", "stream_options", "user", "metadata", "store", "safety_identifier", "prompt_cache_key"];

/// What a cached answer is found by (a SHA-256 digest: a collision would serve another
/// request's answer, so a strong hash).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey(pub [u8; 32]);

impl CacheKey {
    /// As the replicas' shared store names it.
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// What identifies a request for the cache.
pub struct Request<'a> {
    /// Whose entries these are: a key's name, or a shared group's.
    pub partition: &'a str,
    pub model: &'a str,
    /// The client's protocol (`openai-chat`, `anthropic-messages`, `openai-responses`).
    pub protocol: &'a str,
    /// Request headers that change the answer (`anthropic-beta`), as (name, value).
    pub headers: &'a [(&'a str, &'a str)],
    /// The request body (a JSON object).
    pub body: &'a [u8],
}

impl Request<'_> {
    /// Its key; `None` when the body is not a JSON object (nothing a cache should keep).
    pub fn key(&self) -> Option<CacheKey> {
        let Ok(Value::Object(mut fields)) = serde_json::from_slice::<Value>(self.body) else { return None };
        fields.retain(|name, _| !IGNORED.contains(&name.as_str()));
        let mut canonical = Vec::with_capacity(self.body.len());
        write_canonical(&Value::Object(fields), &mut canonical);
        let mut hash = Sha256::new();
        // Each part length-prefixed: no two different requests write the same bytes.
        let mut part = |bytes: &[u8]| {
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        part(self.partition.as_bytes());
        part(self.model.as_bytes());
        part(self.protocol.as_bytes());
        for (name, value) in self.headers {
            part(name.as_bytes());
            part(value.as_bytes());
        }
        part(&canonical);
        Some(CacheKey(hash.finalize().into()))
    }
}

/// JSON with every object's members in name order (the order a client wrote them in does not
/// change the answer). Nesting is bounded by the parser's recursion limit.
fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(fields) => {
            let mut sorted: Vec<(&String, &Value)> = fields.iter().collect();
            sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (name, value)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, name).expect("a string serialises");
                out.push(b':');
                write_canonical(value, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar).expect("a scalar serialises"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(partition: &str, body: &str) -> Option<CacheKey> {
        Request { partition, model: "m", protocol: "openai-chat", headers: &[], body: body.as_bytes() }.key()
    }

    #[test]
    fn member_order_and_delivery_fields_do_not_change_the_key() {
        let a = key("k", r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0}"#);
        let b = key(
            "k",
            r#"{"temperature":0,"stream":true,"stream_options":{"include_usage":true},"user":"u","metadata":{"a":"b"},
               "messages":[{"content":"hi","role":"user"}],"model":"m"}"#,
        );
        assert!(a.is_some());
        assert_eq!(a, b);
    }

    #[test]
    fn what_changes_the_answer_changes_the_key() {
        let base = r#"{"messages":[{"role":"user","content":"hi"}],"temperature":0}"#;
        let k = key("k", base);
        assert_ne!(k, key("k", r#"{"messages":[{"role":"user","content":"hi!"}],"temperature":0}"#));
        assert_ne!(k, key("k", r#"{"messages":[{"role":"user","content":"hi"}],"temperature":1}"#));
        assert_ne!(k, key("k", r#"{"messages":[{"role":"user","content":"hi"}],"temperature":0,"tools":[]}"#));
        // Another tenant, model, protocol or header: another entry.
        assert_ne!(k, key("other", base));
        let with = |model: &str, protocol: &str, headers: &[(&str, &str)]| {
            Request { partition: "k", model, protocol, headers, body: base.as_bytes() }.key()
        };
        assert_eq!(k, with("m", "openai-chat", &[]));
        assert_ne!(k, with("n", "openai-chat", &[]));
        assert_ne!(k, with("m", "anthropic-messages", &[]));
        assert_ne!(k, with("m", "openai-chat", &[("anthropic-beta", "x")]));
        // Parts cannot run into each other: partition "k" + model "m" is not partition "km".
        assert_ne!(
            Request { partition: "km", model: "", protocol: "openai-chat", headers: &[], body: base.as_bytes() }.key(),
            k
        );
    }

    #[test]
    fn only_a_json_object_has_a_key() {
        assert_eq!(key("k", "[1]"), None);
        assert_eq!(key("k", "not json"), None);
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(key("k", &deep), None, "nesting past the parser's limit is refused, not recursed into");
    }
}
