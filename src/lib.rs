//! Switchyard: an LLM API gateway whose protocol adapters are sandboxed WebAssembly components.
//! server → router → scheduler → provider (adapter session in the plugin host → upstream); state in SQLite.

pub mod access;
pub mod alerts;
pub mod authoring;
pub mod config;
pub mod domain;
pub mod http_client;
pub mod logging;
pub mod logsafe;
pub mod plugin;
pub mod pricing;
pub mod private_fs;
pub mod provider;
pub mod router;
pub mod scheduler;
pub mod server;
pub mod shared;
pub mod startup;
pub mod state;
pub mod tasks;
pub mod telegram;
pub mod telemetry;
