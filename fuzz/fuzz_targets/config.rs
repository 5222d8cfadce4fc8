//! cargo-fuzz target: any bytes as config.yaml text through the loader; a config it accepts must
//! give every duration, window, policy and limit the gateway derives from it, in range, no panic.
#![no_main]

use std::path::Path;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use switchyard::config::{Config, load_str};
use switchyard::plugin::BUILTIN_ADAPTERS;
use switchyard::scheduler::{Clock, Policy, SystemClock};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let adapters: Vec<&str> = BUILTIN_ADAPTERS.iter().map(|(name, _)| *name).collect();
    let env = |name: &str| (name == "SET").then(|| "sk-from-env-0123456789".to_string());
    if let Ok(config) = load_str(&text, Path::new("config.yaml"), &env, &adapters) {
        derive_everything(&config);
    }
});

/// The most memory a sandbox instance may have: the loader's own bound on `sandbox.memory_mb`.
const MAX_SANDBOX_MEMORY: usize = 4096 << 20;

/// What the gateway computes from a config at start and per request (as in tests/it/fuzz.rs).
fn derive_everything(config: &Config) {
    let limits = config.sandbox.limits(config.body_limit_bytes);
    limits.deadline_ticks_for(config.body_limit_bytes);
    let _ = config.affinity.ttl();
    let _ = Policy::of(config);
    let now = SystemClock.now();
    for s in &config.sources {
        let _ = (s.timeout(), s.connect_timeout(), s.queue_timeout(), s.idle_timeout(), s.first_byte_timeout());
        let _ = s.stream_timeout();
    }
    let slots = config.auto.chat.iter().chain(config.auto.image.iter().flatten());
    for quota in config.keys.iter().filter_map(|k| k.quota()).chain(slots.filter_map(|s| s.quota)) {
        quota.period.window(now);
    }
    // As the fusion mode turns it into its per-candidate bound.
    for fusion in config.routes.iter().filter_map(|r| r.mode.fusion()) {
        let _ = Duration::from_secs_f64(fusion.timeout_seconds);
    }
    assert!(config.body_limit_bytes >= 1 << 20, "accepted with a body limit of {} bytes", config.body_limit_bytes);
    assert!(limits.memory_bytes <= MAX_SANDBOX_MEMORY, "accepted with sandboxes of {} bytes", limits.memory_bytes);
}
