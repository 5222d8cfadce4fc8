//! Reading a client body: the size limit (413), JSON syntax (400), and the types of the
//! fields the gateway reads or forwards (400 naming the field), all as OpenAI errors.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{ConnectInfo, FromRequest, Request};
use axum::http::{HeaderMap, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::auth::KeyEntry;
use super::error::{ApiError, ErrorType};
use super::{Gateway, Runtime};
use crate::domain::MAX_MODEL_NAME_BYTES;

/// A request as every front door receives it, before anything is checked.
pub struct Incoming {
    pub gw: Arc<Gateway>,
    /// The client's address (part of the affinity fingerprint).
    pub client_ip: IpAddr,
    pub headers: HeaderMap,
    body: Body,
}

impl FromRequest<Arc<Gateway>> for Incoming {
    type Rejection = Infallible;

    async fn from_request(request: Request, gw: &Arc<Gateway>) -> Result<Self, Infallible> {
        let (parts, body) = request.into_parts();
        let client_ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |peer| peer.0.ip());
        Ok(Incoming { gw: Arc::clone(gw), client_ip, headers: parts.headers, body })
    }
}

impl Incoming {
    /// What every front door does first: take the runtime snapshot the request will use,
    /// authenticate the key (before reading the body), then read the body under the limit.
    pub async fn arrive(&mut self) -> Result<(Arc<Runtime>, KeyEntry, Bytes), ApiError> {
        let runtime = self.gw.runtime();
        let key = runtime.keys.authenticate(&self.headers)?.clone();
        tracing::Span::current().record("key", key.name.as_str());
        let limits = (self.gw.settings.body_limit_bytes, self.gw.settings.server.body_timeout());
        let bytes = read_body(std::mem::take(&mut self.body), limits).await?;
        Ok((runtime, key, bytes))
    }
}

/// Reads a body of at most `limit` bytes that must arrive within `within`.
pub async fn read_body(body: Body, (limit, within): (usize, std::time::Duration)) -> Result<Bytes, ApiError> {
    let Ok(read) = tokio::time::timeout(within, Limited::new(body, limit).collect()).await else {
        return Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorType::InvalidRequest,
            format!("the request body did not arrive within {} s (server.body_timeout_seconds)", within.as_secs_f64()),
        )
        .code("request_timeout"));
    };
    match read {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorType::InvalidRequest,
            format!("request body exceeds the gateway's limit of {} MiB (body_limit_mb)", limit >> 20),
        )
        .code("request_too_large")),
        Err(e) => Err(ApiError::invalid_request(format!("could not read the request body: {e}"))),
    }
}

/// Parses `bytes` as `T`, naming the offending field on type errors.
pub fn parse_json<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    // A struct would also take a JSON array; every request body is an object.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::invalid_request("request body must be a JSON object"));
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize::<_, T>(&mut de).map_err(field_error)?;
    de.end().map_err(|e| ApiError::invalid_request(format!("request body is not valid JSON: {e}")))?;
    Ok(value)
}

/// Type-checks an already parsed body as `T` (borrowing from it), naming the offending field:
/// a door that translates the body parses it once, as a value, and checks it with this.
pub fn check<'a, T: Deserialize<'a>>(body: &'a Map<String, Value>) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(body).map_err(field_error)
}

fn field_error(e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    let inner = e.into_inner();
    if inner.is_syntax() || inner.is_eof() {
        ApiError::invalid_request(format!("request body is not valid JSON: {inner}"))
    } else if path == "." {
        ApiError::invalid_request(format!("invalid request: {inner}"))
    } else {
        ApiError::invalid_request(format!("invalid `{path}`: {inner}")).param(path)
    }
}

/// A client's `model`, at most [`MAX_MODEL_NAME_BYTES`]: a longer one is refused at the door
/// (400 naming the field and the limit) before it can reach a log line or a metric label.
#[derive(Debug, Clone)]
pub struct ModelName<'a>(std::borrow::Cow<'a, str>);

impl ModelName<'_> {
    pub fn into_owned(self) -> String {
        self.0.into_owned()
    }
}

impl std::ops::Deref for ModelName<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for ModelName<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = std::borrow::Cow<'de, str>;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a model name (a string)")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(std::borrow::Cow::Borrowed(v))
            }

            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(std::borrow::Cow::Owned(v.to_string()))
            }

            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(std::borrow::Cow::Owned(v))
            }
        }
        let name = de.deserialize_str(Visit)?;
        if name.len() > MAX_MODEL_NAME_BYTES {
            return Err(serde::de::Error::custom(format!(
                "model names are at most {MAX_MODEL_NAME_BYTES} bytes (this one has {})",
                name.len()
            )));
        }
        Ok(ModelName(name))
    }
}

/// A field the gateway type-checks and never reads: the body passes on as the client sent
/// it, so a wrong type is refused here, naming the field, instead of by the upstream. A
/// `_`-named field of this type says so where it is declared.
#[derive(Debug, Clone, Copy, Default)]
pub struct Checked<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Checked<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(|_| Checked(std::marker::PhantomData))
    }
}

/// A part of a request the gateway reads if it can and passes over if not: anything that is
/// not a `T` (a wrong type, `null`) reads as `None` instead of failing the request, so a shape
/// only an upstream understands can still go to it as sent.
#[derive(Debug)]
pub struct Lenient<T>(pub Option<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either<T> {
            Read(T),
            Passed(serde::de::IgnoredAny),
        }
        Ok(Lenient(match Either::<T>::deserialize(deserializer)? {
            Either::Read(value) => Some(value),
            Either::Passed(_) => None,
        }))
    }
}

impl<T> Default for Lenient<T> {
    fn default() -> Self {
        Lenient(None)
    }
}

/// For `#[serde(deserialize_with)]`: `null` reads as the field's default, as leaving it out does.
pub fn null_is_default<'de, D: serde::Deserializer<'de>, T: Deserialize<'de> + Default>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// The Chat Completions fields the gateway checks before any adapter sees the request;
/// everything else passes through untouched.
#[derive(Debug, Deserialize)]
pub struct ChatRequest<'a> {
    #[serde(borrow)]
    pub model: ModelName<'a>,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    #[serde(rename = "temperature")]
    _temperature: Option<Checked<f64>>,
    #[serde(rename = "top_p")]
    _top_p: Option<Checked<f64>>,
    #[serde(rename = "max_tokens")]
    _max_tokens: Option<Checked<u64>>,
    #[serde(rename = "max_completion_tokens")]
    _max_completion_tokens: Option<Checked<u64>>,
    #[serde(rename = "n")]
    _n: Option<Checked<u32>>,
    #[serde(rename = "presence_penalty")]
    _presence_penalty: Option<Checked<f64>>,
    #[serde(rename = "frequency_penalty")]
    _frequency_penalty: Option<Checked<f64>>,
    #[serde(rename = "seed")]
    _seed: Option<Checked<i64>>,
    #[serde(rename = "stop")]
    _stop: Option<Checked<Stop>>,
    #[serde(rename = "tools")]
    _tools: Option<Checked<Vec<Tool>>>,
}

impl ChatRequest<'_> {
    pub fn streaming(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// Whether the client asked for the usage chunk at the end of its stream.
    pub fn wants_stream_usage(&self) -> bool {
        self.stream_options.as_ref().and_then(|o| o.include_usage) == Some(true)
    }
}

#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct Message {
    #[serde(rename = "role")]
    _role: Checked<Role>,
    #[serde(rename = "content", default)]
    _content: Option<Checked<Content>>,
}

#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
}

/// `content`: a string or a list of typed parts.
#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of content parts")]
pub enum Content {
    Text(Checked<String>),
    Parts(Checked<Vec<Part>>),
}

#[derive(Debug, Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    _kind: Checked<String>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of strings")]
pub enum Stop {
    One(Checked<String>),
    Many(Checked<Vec<String>>),
}

#[derive(Debug, Deserialize)]
pub struct Tool {
    #[serde(rename = "type")]
    _kind: Checked<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(body: &str) -> ApiError {
        parse_json::<ChatRequest>(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn names_the_field_with_the_wrong_type() {
        let e = err(r#"{"model":"m","messages":[],"temperature":"hot"}"#);
        assert_eq!(e.param.as_deref(), Some("temperature"));
        assert!(e.message.contains("invalid `temperature`"), "{}", e.message);
        let e = err(r#"{"model":"m","messages":[{"role":"robot","content":"x"}]}"#);
        assert_eq!(e.param.as_deref(), Some("messages[0].role"));
        let e = err(r#"{"model":"m","messages":[{"role":"user","content":5}]}"#);
        assert_eq!(e.param.as_deref(), Some("messages[0].content"));
    }

    #[test]
    fn reports_syntax_errors_and_missing_fields() {
        assert!(err(r#"{"model": "#).message.starts_with("request body is not valid JSON"));
        assert!(err(r#"{"model":"m","messages":[]} trailing"#).message.starts_with("request body is not valid JSON"));
        assert!(err(r#"{"messages":[]}"#).message.contains("missing field `model`"));
        assert_eq!(err(r#" ["m", []]"#).message, "request body must be a JSON object");
    }

    #[test]
    fn a_model_name_past_the_limit_is_refused_naming_the_field() {
        let long = "m".repeat(MAX_MODEL_NAME_BYTES + 1);
        let e = err(&format!(r#"{{"model":"{long}","messages":[]}}"#));
        assert_eq!(e.param.as_deref(), Some("model"));
        assert!(e.message.contains("at most 256 bytes"), "{}", e.message);
        let ok = "m".repeat(MAX_MODEL_NAME_BYTES);
        let body = format!(r#"{{"model":"{ok}","messages":[]}}"#);
        assert_eq!(parse_json::<ChatRequest>(body.as_bytes()).unwrap().model.len(), MAX_MODEL_NAME_BYTES);
        // An escaped name is read (owned) and checked the same way.
        let body = r#"{"model":"gpt\u002d4o","messages":[]}"#;
        assert_eq!(&*parse_json::<ChatRequest>(body.as_bytes()).unwrap().model, "gpt-4o");
    }

    #[test]
    fn accepts_parts_and_unknown_fields() {
        let body = r#"{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"logit_bias":{},"stream":true}"#;
        let req = parse_json::<ChatRequest>(body.as_bytes()).unwrap();
        assert!(req.streaming());
        assert_eq!(&*req.model, "m");
    }
}
