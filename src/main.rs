//! The `switchyard` command: `switchyard [--config FILE]` serves; `switchyard check` validates.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use switchyard::config::AdminToken;
use switchyard::startup;

#[derive(Parser)]
#[command(version, about = "LLM API gateway with sandboxed WebAssembly adapters")]
struct Cli {
    /// Config file.
    #[arg(long, short, global = true, default_value = "config.yaml")]
    config: PathBuf,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the gateway (the default).
    Serve,
    /// Validate the config and load every adapter, then exit.
    Check,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    let peek = switchyard::logging::peek(&cli.config);
    let exporter = match peek.telemetry.as_ref().map(|t| switchyard::telemetry::provider(t, runtime.handle().clone())) {
        None => None,
        Some(Ok(provider)) => Some(provider),
        Some(Err(e)) => {
            eprintln!("error: telemetry: cannot export traces: {e:#}");
            return ExitCode::from(2);
        }
    };
    switchyard::logging::init(peek.format, exporter.as_ref().map(switchyard::telemetry::layer));
    let config = match startup::load_config(&cli.config) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Check => runtime.block_on(check(config)),
        Command::Serve => {
            if let Some(t) = &peek.telemetry {
                tracing::info!(endpoint = %t.otlp_endpoint, "exporting traces over OTLP");
            }
            let code = runtime.block_on(serve(config));
            // Spans still batched go out before the process ends.
            if let Some(provider) = exporter {
                let _ = runtime.block_on(tokio::task::spawn_blocking(move || provider.shutdown()));
            }
            code
        }
    }
}

async fn check(config: switchyard::config::LoadedConfig) -> ExitCode {
    let effective = &config.effective;
    let (sources, keys) = (effective.sources.len(), effective.keys.len() + effective.runtime_keys.len());
    match startup::build(config).await {
        Ok((gateway, report)) => {
            let mut adapters: Vec<String> = gateway.plugins.names();
            adapters.sort();
            println!("config OK: {sources} sources, {keys} keys, adapters: {}", adapters.join(", "));
            if report.warnings.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

async fn serve(config: switchyard::config::LoadedConfig) -> ExitCode {
    let listen = config.base.listen;
    let started = std::time::Instant::now();
    let (gateway, report) = match startup::build(config).await {
        Ok(built) => built,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(1);
        }
    };
    tracing::info!(
        compiled = report.compiled,
        cache_hits = report.cache_hits,
        warnings = report.warnings.len(),
        "adapters ready in {} ms",
        started.elapsed().as_millis()
    );
    startup::return_freed_memory();
    let runtime = gateway.runtime();
    if runtime.config.keys.is_empty() && runtime.config.runtime_keys.is_empty() {
        tracing::warn!("no gateway keys are configured: every /v1 request will be refused (add keys: to the config)");
    }
    let shutdown = async {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down: finishing open requests");
    };
    match switchyard::server::serve(Arc::clone(&gateway), listen, shutdown).await {
        Ok((addr, handle)) => {
            tracing::info!("switchyard listening on http://{addr}");
            announce_webui(&gateway.base.admin_token, addr);
            let served = handle.await;
            // What the writer has not committed yet is in the journal anyway; committing it
            // now spares the next start a replay.
            gateway.scheduler.flush();
            match served {
                Ok(Ok(())) => ExitCode::SUCCESS,
                Ok(Err(e)) => {
                    eprintln!("error: server failed: {e}");
                    ExitCode::from(1)
                }
                Err(e) => {
                    eprintln!("error: server task failed: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!(
                "error: cannot listen on {listen}: {e}\n    fix: choose a free address under `listen:` in the config"
            );
            ExitCode::from(1)
        }
    }
}

/// Where the operator logs in: the WebUI's address and where the admin token is (the token
/// itself never goes to the log).
fn announce_webui(token: &AdminToken, addr: std::net::SocketAddr) {
    let host = if addr.ip().is_unspecified() { format!("127.0.0.1:{}", addr.port()) } else { addr.to_string() };
    match token {
        AdminToken::Stored(_, file) => {
            tracing::info!("WebUI: http://{host}/ui/ (log in with the admin token in {})", file.display())
        }
        AdminToken::Given(_) => tracing::info!("WebUI: http://{host}/ui/ (log in with the config's admin_token)"),
        AdminToken::Off | AdminToken::Auto => tracing::info!("WebUI and admin API off (admin_token is empty)"),
    }
}
