//! What flows through dispatch: one unified request (`Call`), and what comes back (`Reply`
//! with its `Answer`, JSON whole or a stream of chunks, and the headers the gateway adds).

use std::net::IpAddr;

use axum::http::HeaderMap;

use super::Runtime;
use crate::config::ModelKind;
use crate::provider::ChunkStream;

/// What the upstream gave back, still in the unified form.
pub enum Answer {
    Complete(String),
    Stream(ChunkStream),
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
    /// Unified request JSON (OpenAI Chat Completions or Embeddings shape, by `kind`).
    pub unified: &'a str,
    pub stream: bool,
    /// The kind of model the endpoint serves.
    pub kind: ModelKind,
    /// The client's address (part of the affinity fingerprint).
    pub client_ip: IpAddr,
    /// 0 for a client's request; +1 for each route call made on its behalf.
    pub depth: u8,
    /// Set on the calls of one fusion request: their log rows share it.
    pub fusion_id: Option<&'a str>,
}
