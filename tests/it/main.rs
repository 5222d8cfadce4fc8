//! Integration tests: one crate (links wasmtime once), real HTTP on loopback, the real
//! built adapters in the real engine.
#![allow(
    clippy::unwrap_used,
    clippy::disallowed_methods,
    clippy::large_futures,
    reason = "a test fails loudly at its first surprise, spawns its own servers and awaits each future once"
)]

mod support;

mod access;
mod admin;
mod anthropic_upstream;
mod authoring;
mod cache;
mod chat;
mod config_check;
mod costs;
mod deepseek_upstream;
mod detect;
mod embeddings;
mod examples;
mod failover;
mod faults;
mod fuzz;
mod gemini_upstream;
mod hostile;
mod http2;
mod images;
mod kill_restart;
mod layering;
mod logs;
mod lua;
mod messages;
mod metrics;
mod modes;
mod ollama_upstream;
mod openai_client;
mod packaging;
mod passthrough;
mod plugin_host;
mod policies;
mod replicas;
mod responses;
mod routing;
mod sandbox;
mod sdk;
mod sdk_python;
mod slow_clients;
mod sso;
mod streaming;
mod surfaces;
mod telegram;
mod telemetry;
mod webui;
mod whole_answers;
