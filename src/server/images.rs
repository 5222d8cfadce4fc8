//! `POST /v1/images/generations`: OpenAI's image endpoint for `kind: image` models and the
//! `auto_image` chain, through the source's adapter (openai, gemini).

use axum::Extension;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::call::{Answer, Call, CallBody};
use super::dispatch::dispatch;
use super::envelope::RequestId;
use super::error::ApiError;
use super::request::{Checked, Incoming, check, parse_json};
use crate::config::ModelKind;
use crate::router::AUTO;

/// The fields checked (and the few read) before the request goes on in the unified form.
#[derive(Debug, Deserialize)]
struct ImagesRequest<'a> {
    /// Absent: `AUTO` (the `auto_image` chain).
    #[serde(borrow)]
    model: Option<super::request::ModelName<'a>>,
    prompt: String,
    n: Option<u32>,
    stream: Option<bool>,
    #[serde(rename = "size")]
    _size: Option<Checked<String>>,
    #[serde(rename = "quality")]
    _quality: Option<Checked<String>>,
    #[serde(rename = "style")]
    _style: Option<Checked<String>>,
    #[serde(rename = "response_format")]
    _response_format: Option<Checked<String>>,
}

pub async fn images(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let (runtime, key, bytes) = incoming.arrive().await?;
    let (gw, client_ip) = (&incoming.gw, incoming.client_ip);
    let mut unified: Map<String, Value> = parse_json(&bytes)?;
    let request: ImagesRequest = check(&unified)?;
    if request.prompt.trim().is_empty() {
        return Err(ApiError::invalid_request("`prompt` must not be empty").param("prompt"));
    }
    if request.stream == Some(true) {
        return Err(ApiError::invalid_request("streaming image generation is not supported").param("stream"));
    }
    if let Some(n) = request.n
        && !(1..=10).contains(&n)
    {
        return Err(ApiError::invalid_request("`n` must be between 1 and 10").param("n"));
    }
    let model = request.model.map_or_else(|| AUTO.to_string(), super::request::ModelName::into_owned);
    tracing::Span::current().record("model", &*model);
    // The adapter gets the body with the model it resolved to filled in.
    unified.insert("model".into(), Value::String(model.clone()));
    let unified = Value::Object(unified).to_string();
    let call = Call {
        model: &model,
        body: CallBody::Unified(&unified),
        stream: false,
        kind: ModelKind::Image,
        client_ip,
        request_id: &request_id,
        runtime: &runtime,
        depth: 0,
        fusion_id: None,
        cost: &Default::default(),
        max_price: crate::server::bill::MaxPrice::from_headers(&incoming.headers)?,
        policed: None,
        native: None,
    };
    match dispatch(gw, &key, call).await?.answer {
        Answer::Complete(body) => Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response()),
        Answer::Native { body, .. } => Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response()),
        Answer::Stream(_) => Err(ApiError::invalid_request("image generation cannot be streamed")),
    }
}
