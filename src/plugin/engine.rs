//! The process's one wasmtime `Engine` and every sandbox limit, set in one place:
//! pooled instances, memory cap, CPU deadline per call (epoch ticks), output cap.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::domain::SandboxLimits;

/// How often the epoch advances; a call's CPU bound is rounded up to whole ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(5);

/// CPU time a call is given on top of its bound per MiB of input (a large request or
/// response body): reading and rebuilding JSON costs about 25 ms a MiB; four times that.
pub const CPU_PER_INPUT_MIB: Duration = Duration::from_millis(100);

impl SandboxLimits {
    /// Epoch ticks to allow one call: the bound, rounded up, plus the tick already running.
    pub fn deadline_ticks(&self) -> u64 {
        self.deadline_ticks_for(0)
    }

    /// Epoch ticks for a call handed `input_bytes`: the bound plus [`CPU_PER_INPUT_MIB`] for
    /// each MiB it must read, so the largest body the gateway accepts can be translated.
    pub fn deadline_ticks_for(&self, input_bytes: usize) -> u64 {
        let tick = EPOCH_TICK.as_nanos();
        let extra = CPU_PER_INPUT_MIB.as_nanos() * input_bytes as u128 / (1 << 20);
        ((self.cpu_per_call.as_nanos() + extra).div_ceil(tick) as u64).max(1) + 1
    }
}

/// Epoch ticks in a span of wall time (rounded up).
pub fn ticks_in(span: std::time::Duration) -> u64 {
    span.as_millis().div_ceil(EPOCH_TICK.as_millis()) as u64 + 1
}

/// Builds the engine. The pool's per-component shape fits what real toolchains emit: a Rust
/// or C component has a few core instances, componentize-js 3, componentize-py 38 (CPython
/// and its extension modules, dynamically linked); tables and memories are counted per core
/// module, one each. `max_memory_bytes` is the largest cap any adapter is granted.
pub fn build_engine(limits: &SandboxLimits, max_memory_bytes: usize) -> wasmtime::Result<Engine> {
    let slots = limits.pool_slots;
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(slots)
        .max_core_instances_per_component(MAX_CORE_INSTANCES)
        // A counter, not a reservation: allow every slot a full component.
        .total_core_instances(slots.saturating_mul(MAX_CORE_INSTANCES))
        .max_memories_per_component(4)
        .total_memories(slots.saturating_mul(2))
        .max_tables_per_component(MAX_CORE_INSTANCES)
        .total_tables(slots.saturating_mul(4))
        .total_stacks(slots)
        .max_memory_size(max_memory_bytes);

    let mut config = Config::new();
    config
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        // Reserve just the cap: thousands of slots stay cheap in address space.
        .memory_reservation(max_memory_bytes as u64)
        .memory_reservation_for_growth(0)
        .max_wasm_stack(512 << 10)
        // Lua's error handling (setjmp/longjmp) compiles to wasm exceptions.
        .wasm_exceptions(true);
    Engine::new(&config)
}

/// Core instances one component may hold: componentize-py's 38 with room to spare.
pub const MAX_CORE_INSTANCES: u32 = 64;

/// Advances the engine's epoch on a background thread; stops when dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    pub fn start(engine: &Engine) -> EpochTicker {
        let stop = Arc::new(AtomicBool::new(false));
        let engine = engine.weak();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .expect("spawning the epoch thread");
        EpochTicker { stop, thread: Some(thread) }
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadline_rounds_up_and_allows_the_running_tick() {
        let mut limits = SandboxLimits { cpu_per_call: Duration::from_millis(500), ..Default::default() };
        assert_eq!(limits.deadline_ticks(), 101);
        limits.cpu_per_call = Duration::from_millis(7);
        assert_eq!(limits.deadline_ticks(), 3);
        limits.cpu_per_call = Duration::ZERO;
        assert_eq!(limits.deadline_ticks(), 2);
        assert_eq!(limits.deadline_ticks_for(32 << 20), 640 + 1, "100 ms a MiB of input");
    }
}
