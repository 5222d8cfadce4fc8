//! The process's log on stderr: text lines (every field escaped, ANSI colours only on a
//! terminal) or one JSON object a line (`log_format: json`), filtered by `SWITCHYARD_LOG`.

use std::io::IsTerminal;
use std::path::Path;

use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, Registry};

use crate::config::{LogFormat, TelemetryConfig};

/// The target of the one line each answered or refused request writes (`switchyard::access`).
pub const ACCESS: &str = "switchyard::access";

/// Installs the process's subscriber: the log on stderr (filtered by `SWITCHYARD_LOG`; without
/// it, `info` with the access lines and the request spans on its lines only when `access_log`
/// asks for them), and the trace exporter's layer when there is one (it sees the gateway's own
/// spans only, debug level included: the attempt spans).
pub fn init(peek: &Peek, traces: Option<Box<dyn Layer<Registry> + Send + Sync>>) {
    let asked = peek.access_log || std::env::var_os("SWITCHYARD_LOG").is_some();
    let level = if peek.access_log { "info".to_string() } else { format!("info,{ACCESS}=off") };
    install(peek.format, traces, &level, asked)
}

/// `init` with another level when `SWITCHYARD_LOG` is not set (the author's tools print their
/// own report and log only warnings).
pub fn init_at(format: LogFormat, traces: Option<Box<dyn Layer<Registry> + Send + Sync>>, default_level: &str) {
    install(format, traces, default_level, true)
}

/// `spans`: whether lines carry the request's span. A span the log records costs every request
/// (its fields formatted, entered on every poll: ~4 % of the CPU at full load); without an
/// access line there is little to carry it on.
fn install(
    format: LogFormat,
    traces: Option<Box<dyn Layer<Registry> + Send + Sync>>,
    default_level: &str,
    spans: bool,
) {
    let ours = tracing_subscriber::filter::Targets::new().with_target("switchyard", tracing::Level::DEBUG);
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG").unwrap_or_else(|_| default_level.into());
    let filter = filter.and(tracing_subscriber::filter::filter_fn(move |meta| spans || !meta.is_span()));
    let log = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let log: Box<dyn Layer<_> + Send + Sync> = match format {
        LogFormat::Text => {
            Box::new(log.with_ansi(std::io::stderr().is_terminal()).fmt_fields(crate::logsafe::fields()))
        }
        // JSON escapes control characters itself.
        LogFormat::Json => Box::new(log.json().with_current_span(true).with_span_list(false)),
    };
    tracing_subscriber::registry().with(traces.map(|t| t.with_filter(ours))).with(log.with_filter(filter)).init();
}

/// What the log needs of the config before the config is loaded (loading logs as it goes):
/// its format, and where traces go, `${VAR}` expanded (the full load checks both again).
#[derive(Debug, Default)]
pub struct Peek {
    pub format: LogFormat,
    pub access_log: bool,
    pub telemetry: Option<TelemetryConfig>,
}

/// The config file's `log_format`, `access_log` and `telemetry`, read before the log exists;
/// the defaults (text, no traces) when they cannot be read (the full load then names the problem).
pub fn peek(config: &Path) -> Peek {
    #[derive(serde::Deserialize)]
    struct Fields {
        #[serde(default)]
        log_format: LogFormat,
        #[serde(default)]
        access_log: bool,
        #[serde(default)]
        telemetry: Option<serde_yaml::Value>,
    }
    let Some(fields) = std::fs::read_to_string(config).ok().and_then(|t| serde_yaml::from_str::<Fields>(&t).ok())
    else {
        return Peek::default();
    };
    let env = |name: &str| std::env::var(name).ok();
    let telemetry = fields
        .telemetry
        .and_then(|value| serde_yaml::to_string(&value).ok())
        .and_then(|text| crate::config::expand_env(&text, &env).ok())
        .and_then(|text| serde_yaml::from_str::<TelemetryConfig>(&text).ok());
    Peek { format: fields.log_format, access_log: fields.access_log, telemetry }
}
