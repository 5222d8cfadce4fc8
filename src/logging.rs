//! The process's log on stderr: text lines (every field escaped, ANSI colours only on a
//! terminal) or one JSON object a line (`log_format: json`), filtered by `SWITCHYARD_LOG`.

use std::io::IsTerminal;
use std::path::Path;

use crate::config::LogFormat;

/// The target of the one line each answered or refused request writes (`switchyard::access`).
pub const ACCESS: &str = "switchyard::access";

/// Installs the process's subscriber.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SWITCHYARD_LOG").unwrap_or_else(|_| "info".into());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        LogFormat::Text => {
            builder.with_ansi(std::io::stderr().is_terminal()).fmt_fields(crate::logsafe::fields()).init()
        }
        // JSON escapes control characters itself.
        LogFormat::Json => builder.json().with_current_span(true).with_span_list(false).init(),
    }
}

/// The config file's `log_format`, read before the log exists (the full load logs as it goes);
/// text when the file or the field cannot be read (the full load then names the problem).
pub fn format_of(config: &Path) -> LogFormat {
    #[derive(serde::Deserialize)]
    struct Peek {
        #[serde(default)]
        log_format: LogFormat,
    }
    std::fs::read_to_string(config)
        .ok()
        .and_then(|text| serde_yaml::from_str::<Peek>(&text).ok())
        .map_or(LogFormat::Text, |peek| peek.log_format)
}
