//! `POST /v1/embeddings`: OpenAI's embeddings endpoint for `kind: embedding` models, through
//! the source's adapter (openai, gemini, ollama).

use axum::Extension;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::call::{Answer, Call, CallBody};
use super::dispatch::dispatch;
use super::envelope::RequestId;
use super::error::ApiError;
use super::request::{Checked, Incoming, parse_json};
use crate::config::ModelKind;

/// The fields checked before the body passes on as sent.
#[derive(Debug, Deserialize)]
struct EmbeddingsRequest<'a> {
    #[serde(borrow)]
    model: super::request::ModelName<'a>,
    input: Input,
    #[serde(rename = "dimensions")]
    _dimensions: Option<Checked<u32>>,
    #[serde(rename = "encoding_format")]
    _encoding_format: Option<Checked<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged, expecting = "a string or an array of strings")]
enum Input {
    One(Checked<String>),
    Many(Vec<Checked<String>>),
}

pub async fn embeddings(
    Extension(RequestId(request_id)): Extension<RequestId>,
    mut incoming: Incoming,
) -> Result<Response, ApiError> {
    let (runtime, key, bytes) = incoming.arrive().await?;
    let (gw, client_ip) = (&incoming.gw, incoming.client_ip);
    let request: EmbeddingsRequest = parse_json(&bytes)?;
    if matches!(&request.input, Input::Many(items) if items.is_empty()) {
        return Err(ApiError::invalid_request("`input` must not be empty").param("input"));
    }
    let unified = std::str::from_utf8(&bytes).map_err(|_| ApiError::invalid_request("request body is not UTF-8"))?;
    let call = Call {
        model: &request.model,
        body: CallBody::Unified(unified),
        stream: false,
        kind: ModelKind::Embedding,
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
        Answer::Stream(_) => Err(ApiError::invalid_request("embeddings cannot be streamed")),
    }
}
