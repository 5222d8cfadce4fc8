//! What flows through dispatch: one unified request (`Call`), and what comes back (`Reply`
//! with its `Answer`, JSON whole or a stream of chunks, and the headers the gateway adds).

use std::net::IpAddr;
use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};

use super::Runtime;
use super::error::{ApiError, ErrorType};
use super::passthrough;
pub use super::passthrough::Protocol;
use crate::config::{ModelKind, SourceConfig};
use crate::provider::ChunkStream;

/// What the upstream gave back: in the unified form, or (from a native session) in the
/// client's own protocol. A stream says which with [`ChunkStream::is_native`].
pub enum Answer {
    Complete(String),
    /// A whole answer in the client's protocol, as the upstream sent it, and its unified form.
    Native {
        body: Vec<u8>,
        unified: String,
    },
    Stream(ChunkStream),
}

/// The client's request as it arrived, offered to adapters that forward its protocol
/// natively (see `wit/adapter.wit`, interface `native`).
#[derive(Clone, Copy)]
pub struct Native<'a> {
    pub protocol: Protocol,
    pub body: &'a [u8],
    pub headers: &'a HeaderMap,
}

/// Headers never handed to an adapter, whatever it asks for: the client's credentials.
const CREDENTIALS: &[&str] =
    &["authorization", "proxy-authorization", "cookie", "x-api-key", "api-key", "x-goog-api-key"];

impl Native<'_> {
    /// The request for `source`'s adapter, which forwards this protocol and asked for `names`
    /// headers: never the client's credentials, and only the fields and betas the source's
    /// pass-through allows (what is left out is logged).
    pub fn for_adapter(&self, names: &[String], source: &SourceConfig) -> crate::plugin::ClientRequest {
        let policy = &source.passthrough;
        let mut left = passthrough::Left::default();
        let headers = names
            .iter()
            .filter(|name| !CREDENTIALS.iter().any(|c| name.eq_ignore_ascii_case(c)))
            .flat_map(|name| {
                let name = name.to_ascii_lowercase();
                let values: Vec<&str> =
                    self.headers.get_all(name.as_str()).iter().filter_map(|v| v.to_str().ok()).collect();
                values
                    .into_iter()
                    .filter_map(|v| match name.as_str() {
                        "anthropic-beta" => passthrough::betas(v, policy, &mut left),
                        _ => Some(v.to_string()),
                    })
                    .map(|v| (name.clone(), v))
                    .collect::<Vec<_>>()
            })
            .collect();
        let body = passthrough::body(self.protocol, self.body, policy, &mut left).into_owned();
        if !left.is_empty() {
            // The first few by name: a body of a million junk fields is not a million-name line.
            let (fields, betas) = (left.fields.len(), left.betas.len());
            left.fields.truncate(10);
            left.betas.truncate(10);
            left.tools.truncate(10);
            tracing::info!(source = %source.name, fields, betas, first_fields = ?left.fields, first_betas = ?left.betas, tools = ?left.tools, "pass-through: left out what the source does not allow (sources[].passthrough)");
        }
        crate::plugin::ClientRequest { protocol: self.protocol.as_str().to_string(), body, headers }
    }
}

/// An answer and the headers the gateway adds to it (fusion names its providers).
pub struct Reply {
    pub answer: Answer,
    pub headers: HeaderMap,
}

/// One unified request, ready to route.
#[derive(Clone, Copy)]
pub struct Call<'a> {
    /// The runtime this request started on (config, upstream clients, keys); kept to its end.
    pub runtime: &'a Runtime,
    pub request_id: &'a str,
    pub model: &'a str,
    /// What adapters are handed: the unified form, or only the client's own body.
    pub body: CallBody<'a>,
    pub stream: bool,
    /// The kind of model the endpoint serves.
    pub kind: ModelKind,
    /// The client's address (part of the affinity fingerprint).
    pub client_ip: IpAddr,
    /// 0 for a client's request; +1 for each route call made on its behalf.
    pub depth: u8,
    /// Set on the calls of one fusion request: their log rows share it.
    pub fusion_id: Option<&'a str>,
    /// The client's request as sent, for adapters that forward its protocol untranslated;
    /// `None` once the gateway has changed the request (vision, fusion, judges).
    pub native: Option<Native<'a>>,
    /// What the client's request has cost so far, over every call made for it.
    pub cost: &'a Arc<super::bill::RequestCost>,
    /// The most the client will pay per token (`x-switchyard-max-price`).
    pub max_price: Option<super::bill::MaxPrice>,
    /// The policies over this request and what they did; set once the client's request has
    /// passed its request hooks (calls made on its behalf keep it).
    pub policed: Option<&'a super::policy::Policed>,
}

/// A call's request: the unified form, or (when the gateway cannot translate it) only the
/// client's own body, which only adapters that take `native` may serve.
#[derive(Clone, Copy)]
pub enum CallBody<'a> {
    /// Unified request JSON (OpenAI Chat Completions or Embeddings shape, by the call's `kind`).
    Unified(&'a str),
    /// No unified form: `why` says what could not be translated.
    ClientOnly { client: &'a str, why: &'a str },
}

impl<'a> CallBody<'a> {
    /// A translated request's body: its unified form, or, when the translation failed (`why`),
    /// the client's own text.
    pub fn translated(text: &'a str, why: Option<&'a str>) -> CallBody<'a> {
        match why {
            None => CallBody::Unified(text),
            Some(why) => CallBody::ClientOnly { client: text, why },
        }
    }

    /// The unified form, when there is one.
    pub fn unified(self) -> Option<&'a str> {
        match self {
            CallBody::Unified(unified) => Some(unified),
            CallBody::ClientOnly { .. } => None,
        }
    }

    /// Why there is no unified form, when there is none.
    pub fn untranslatable(self) -> Option<&'a str> {
        match self {
            CallBody::Unified(_) => None,
            CallBody::ClientOnly { why, .. } => Some(why),
        }
    }

    /// The request's text, for what reads any form of it: token estimates, the affinity
    /// fingerprint, an adapter that forwards the client's body anyway.
    pub fn text(self) -> &'a str {
        match self {
            CallBody::Unified(text) | CallBody::ClientOnly { client: text, .. } => text,
        }
    }
}

/// Route calls deeper than this (a vision route whose vision route is...) are refused.
const MAX_DEPTH: u8 = 3;

impl Call<'_> {
    /// Refuses a route call nested past `MAX_DEPTH` (a loop of aliases).
    pub fn check_depth(&self) -> Result<(), ApiError> {
        if self.depth <= MAX_DEPTH {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::LOOP_DETECTED,
            ErrorType::InvalidRequest,
            format!(
                "route calls nest deeper than {MAX_DEPTH} at model \"{}\": check the vision_alias and judge_alias settings for a loop",
                self.model
            ),
        ))
    }
}
