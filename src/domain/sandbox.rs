//! What one adapter instance may use: memory, CPU and wall time per call, output size, and
//! the instance slots the engine reserves; the engine (plugin) enforces them.

use std::time::Duration;

/// Limits every guest runs under (config: `sandbox:`).
#[derive(Debug, Clone)]
pub struct SandboxLimits {
    /// Linear memory per instance.
    pub memory_bytes: usize,
    /// Wall-clock CPU bound for one guest call.
    pub cpu_per_call: Duration,
    /// Wall-clock bound for one guest call, time waiting in `fetch` included.
    pub wall_per_call: Duration,
    /// Largest body or chunk list a guest may hand back.
    pub max_output_bytes: usize,
    /// Instance slots the pooling allocator reserves address space for (not memory).
    pub pool_slots: u32,
    /// Sessions (requests in flight) one instance hosts at once; their calls take turns.
    pub sessions_per_instance: usize,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            memory_bytes: 64 << 20,
            cpu_per_call: Duration::from_millis(500),
            wall_per_call: Duration::from_secs(60),
            max_output_bytes: 32 << 20,
            pool_slots: 1000,
            sessions_per_instance: 256,
        }
    }
}

impl SandboxLimits {
    /// Memory an instance needs to translate a request body of `body_bytes`: the body as the
    /// guest receives it, parsed, rebuilt and serialised (with growth slack), plus the guest's
    /// own heap. The anthropic adapter needs about 7 times the body; tests/it/hostile.rs sends
    /// the largest body the default config accepts through each built-in.
    pub fn memory_to_translate(body_bytes: usize) -> usize {
        body_bytes.saturating_mul(8).saturating_add(32 << 20)
    }
}

/// What the operator grants one adapter beyond the defaults (`adapters.NAME`): hosts it may
/// fetch from, and limits that differ from `sandbox:` (a Python component needs more memory
/// and CPU per call than a Rust one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdapterGrant {
    pub allow_hosts: Vec<String>,
    pub memory_bytes: Option<usize>,
    pub cpu_per_call: Option<Duration>,
    pub wall_per_call: Option<Duration>,
    /// Most instances its pool keeps, whatever its sources' `max_concurrent` add up to.
    pub max_instances: Option<usize>,
    /// Sessions one of its instances hosts at once (an adapter whose calls wait in `fetch`
    /// wants fewer: the others on its instance wait with it).
    pub sessions_per_instance: Option<usize>,
}

impl SandboxLimits {
    /// These limits with an adapter's own in place of the defaults.
    pub fn granted(&self, grant: &AdapterGrant) -> SandboxLimits {
        SandboxLimits {
            memory_bytes: grant.memory_bytes.unwrap_or(self.memory_bytes),
            cpu_per_call: grant.cpu_per_call.unwrap_or(self.cpu_per_call),
            wall_per_call: grant.wall_per_call.unwrap_or(self.wall_per_call),
            sessions_per_instance: grant.sessions_per_instance.unwrap_or(self.sessions_per_instance),
            ..self.clone()
        }
    }
}
