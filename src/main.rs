//! The `switchyard` command: `switchyard [--config FILE]` serves; `switchyard check` validates;
//! `switchyard health` asks a running one; `switchyard adapter new|check|test` are the adapter
//! author's tools, `switchyard policy new|check|test` the policy author's.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use switchyard::authoring::{self, Language};
use switchyard::config::AdminToken;
use switchyard::startup;

// Thousands of small allocations a second: jemalloc spends ~6.5 % less CPU per request than
// glibc's malloc here (bench/ab.sh, docs/performance.md#scale-on-one-machine). One arena (the
// request work runs on few threads) keeps its idle memory at glibc's, and a purge thread hands
// back within a second what a burst freed, which glibc kept.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[expect(non_upper_case_globals, reason = "jemalloc reads this symbol by its C name")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static malloc_conf: &[u8] = b"narenas:1,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

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
    /// Ask the gateway the config describes for `GET /health`; exit 0 when it answers 200
    /// (a container's health check: an image from scratch has no curl).
    Health {
        /// Ask this base URL instead of the config's `listen` address (the config is then not read).
        #[arg(long)]
        url: Option<String>,
    },
    /// Tools for adapter authors: start a project, check a component, replay recorded cases.
    #[command(subcommand)]
    Adapter(AdapterCommand),
    /// Tools for policy authors: start a project, check a component, replay recorded cases.
    #[command(subcommand)]
    Policy(PolicyCommand),
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// Write a buildable starting project for policy NAME (the WIT included).
    New {
        name: String,
        #[arg(long, value_enum)]
        lang: Language,
        /// Where to write it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Load FILE (.wasm or a built-in's name) as the gateway would; print its hooks, costs and problems.
    Check {
        file: String,
        /// A policy setting the sample calls are made with, as KEY=VALUE (repeatable).
        #[arg(long = "setting", value_parser = key_value)]
        settings: Vec<(String, String)>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Replay the recorded policy cases in DIR through FILE (.wasm or a built-in's name), offline.
    Test {
        file: String,
        #[arg(long)]
        cases: PathBuf,
        #[command(flatten)]
        limits: LimitArgs,
    },
}

#[derive(Subcommand)]
enum AdapterCommand {
    /// Write a buildable starting project for adapter NAME (the WIT included).
    New {
        name: String,
        #[arg(long, value_enum)]
        lang: Language,
        /// Where to write it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Load FILE (.wasm or .lua) as the gateway would; print its shape, costs and problems.
    Check {
        file: String,
        /// Recorded cases; the first streamed one times the adapter per stream event.
        #[arg(long)]
        cases: Option<PathBuf>,
        /// A source setting the sample request is translated with, as KEY=VALUE (repeatable).
        #[arg(long = "setting", value_parser = key_value)]
        settings: Vec<(String, String)>,
        #[command(flatten)]
        limits: LimitArgs,
    },
    /// Replay the recorded cases in DIR through FILE (.wasm, .lua or a built-in's name), offline.
    Test {
        file: String,
        #[arg(long)]
        cases: PathBuf,
        #[command(flatten)]
        limits: LimitArgs,
    },
}

#[derive(clap::Args)]
struct LimitArgs {
    /// Memory cap per instance in MiB, as `adapters.NAME.memory_mb` (a policy's `memory_mb`) would set it.
    #[arg(long)]
    memory_mb: Option<u32>,
    /// CPU bound per call in ms, as `adapters.NAME.cpu_ms_per_call` (a policy's `cpu_ms`) would set it.
    #[arg(long)]
    cpu_ms: Option<u64>,
    /// Where compiled components are cached between runs (default: ~/.cache/switchyard).
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Compile without the cache (to time compiling).
    #[arg(long, conflicts_with = "cache_dir")]
    no_cache: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime");
    // An address given: the config is not read (a container's health check needs none of it).
    if let Some(Command::Health { url: Some(url) }) = &cli.command {
        return runtime.block_on(health(url));
    }
    if let Some(Command::Adapter(command)) = cli.command {
        // The author's tools say what they wait for (a compile) and nothing else unasked.
        switchyard::logging::init_at(Default::default(), None, "warn,switchyard::plugin::cache=info");
        return runtime.block_on(adapter_command(command));
    }
    if let Some(Command::Policy(command)) = cli.command {
        switchyard::logging::init_at(Default::default(), None, "warn,switchyard::plugin::cache=info");
        return runtime.block_on(policy_command(command));
    }
    let peek = switchyard::logging::peek(&cli.config);
    let exporter = match peek.telemetry.as_ref().map(|t| switchyard::telemetry::provider(t, runtime.handle().clone())) {
        None => None,
        Some(Ok(provider)) => Some(provider),
        Some(Err(e)) => {
            eprintln!("error: telemetry: cannot export traces: {e:#}");
            return ExitCode::from(2);
        }
    };
    switchyard::logging::init(&peek, exporter.as_ref().map(switchyard::telemetry::layer));
    let config = match startup::load_config(&cli.config) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match cli.command.unwrap_or(Command::Serve) {
        Command::Check => runtime.block_on(check(config)),
        Command::Health { url } => {
            let url = url.unwrap_or_else(|| format!("http://{}", loopback(config.settings().listen)));
            runtime.block_on(health(&url))
        }
        Command::Adapter(_) | Command::Policy(_) => unreachable!("handled before the config is read"),
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

async fn adapter_command(command: AdapterCommand) -> ExitCode {
    match command {
        AdapterCommand::New { name, lang, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            match authoring::new_project(&name, lang, &dir) {
                Ok(files) => {
                    for file in &files {
                        println!("wrote {}", file.display());
                    }
                    println!(
                        "next: cd {} && ./build.sh, then switchyard adapter test {name}.wasm --cases cases",
                        dir.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        AdapterCommand::Check { file, cases, settings, limits } => match load_for_author(&file, &limits).await {
            Ok(loaded) => {
                let shown =
                    std::path::Path::new(&file).file_name().map_or(file.clone(), |f| f.to_string_lossy().into());
                if authoring::check(&loaded, &shown, cases.as_deref(), settings).await {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }
            Err(code) => code,
        },
        AdapterCommand::Test { file, cases, limits } => match load_for_author(&file, &limits).await {
            Ok(loaded) => match authoring::test_cases(&loaded, &cases).await {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            },
            Err(code) => code,
        },
    }
}

async fn policy_command(command: PolicyCommand) -> ExitCode {
    match command {
        PolicyCommand::New { name, lang, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            match authoring::new_project_of(authoring::Kind::Policy, &name, lang, &dir) {
                Ok(files) => {
                    for file in &files {
                        println!("wrote {}", file.display());
                    }
                    println!(
                        "next: cd {} && ./build.sh, then switchyard policy test {name}.wasm --cases cases",
                        dir.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            }
        }
        PolicyCommand::Check { file, settings, limits } => match load_policy_for_author(&file, &limits).await {
            Ok(loaded) => {
                let shown =
                    std::path::Path::new(&file).file_name().map_or(file.clone(), |f| f.to_string_lossy().into());
                if authoring::check_policy(&loaded, &shown, settings).await {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }
            Err(code) => code,
        },
        PolicyCommand::Test { file, cases, limits } => match load_policy_for_author(&file, &limits).await {
            Ok(loaded) => match authoring::test_policy_cases(&loaded, &cases).await {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("error: {e}");
                    ExitCode::from(2)
                }
            },
            Err(code) => code,
        },
    }
}

async fn load_policy_for_author(file: &str, args: &LimitArgs) -> Result<authoring::LoadedPolicy, ExitCode> {
    let limits = authoring::AuthorLimits { memory_mb: args.memory_mb, cpu_ms_per_call: args.cpu_ms };
    let cache = if args.no_cache { None } else { args.cache_dir.clone().or_else(authoring::default_cache_dir) };
    authoring::load_policy(file, cache, &limits).await.map_err(|e| {
        eprintln!("error: {file} does not load: {e}");
        ExitCode::from(2)
    })
}

fn key_value(arg: &str) -> Result<(String, String), String> {
    arg.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())).ok_or_else(|| format!("`{arg}` is not KEY=VALUE"))
}

async fn load_for_author(file: &str, args: &LimitArgs) -> Result<authoring::Loaded, ExitCode> {
    let limits = authoring::AuthorLimits { memory_mb: args.memory_mb, cpu_ms_per_call: args.cpu_ms };
    let cache = if args.no_cache { None } else { args.cache_dir.clone().or_else(authoring::default_cache_dir) };
    authoring::load(file, cache, &limits).await.map_err(|e| {
        eprintln!("error: {file} does not load: {e}");
        ExitCode::from(2)
    })
}

async fn check(config: switchyard::config::LoadedConfig) -> ExitCode {
    let effective = &config.effective;
    let (sources, keys) = (effective.sources.len(), effective.keys.len() + effective.runtime_keys.len());
    match startup::build(config).await {
        Ok((gateway, report)) => {
            let mut adapters: Vec<String> = gateway.plugins.names();
            adapters.sort();
            println!("config OK: {sources} sources, {keys} keys, adapters: {}", adapters.join(", "));
            // Not an error (a model may be new, or served by a reseller at its own price), but
            // never a silent $0: each is named with the fix.
            let runtime = gateway.runtime();
            if gateway.settings.pricing.costs {
                for model in runtime.prices.unpriced(&runtime.config) {
                    println!(
                        "warning: {model} has no price: its cost is logged as unknown, and budgets cannot count it (fix: add it under `prices:`, see docs/costs.md)"
                    );
                }
            }
            if report.warnings.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

/// Where this host reaches a listener: an unspecified address (`0.0.0.0`, `::`) is reached on
/// loopback.
fn loopback(listen: std::net::SocketAddr) -> std::net::SocketAddr {
    match listen.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => (std::net::Ipv4Addr::LOCALHOST, listen.port()).into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => (std::net::Ipv6Addr::LOCALHOST, listen.port()).into(),
        _ => listen,
    }
}

async fn health(base: &str) -> ExitCode {
    let url = format!("{}/health", base.trim_end_matches('/'));
    let answer = match switchyard::http_client::builder().timeout(std::time::Duration::from_secs(5)).build() {
        Ok(client) => client.get(&url).send().await,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    match answer {
        Ok(answer) if answer.status().is_success() => {
            println!("{url}: {}", answer.status());
            ExitCode::SUCCESS
        }
        Ok(answer) => {
            eprintln!("{url}: {}", answer.status());
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("{url}: {e}");
            ExitCode::from(1)
        }
    }
}

async fn serve(config: switchyard::config::LoadedConfig) -> ExitCode {
    let shutdown = async {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        tracing::info!("shutting down: finishing open requests");
    };
    let serving = match startup::start(config, shutdown).await {
        Ok(serving) => serving,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    announce_webui(&serving.gateway.settings.admin_token, serving.addr);
    match serving.finish().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Where the operator logs in: the WebUI's address and where the admin token is (the token
/// itself never goes to the log).
fn announce_webui(token: &AdminToken, addr: std::net::SocketAddr) {
    let host = loopback(addr);
    match token {
        AdminToken::Stored(_, file) => {
            tracing::info!("WebUI: http://{host}/ui/ (log in with the admin token in {})", file.display())
        }
        AdminToken::Given(_) => tracing::info!("WebUI: http://{host}/ui/ (log in with the config's admin_token)"),
        AdminToken::Off | AdminToken::Auto => tracing::info!("WebUI and admin API off (admin_token is empty)"),
    }
}
