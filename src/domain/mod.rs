//! The bottom floor: plain types and policies every other module shares (names, time, quota
//! periods, slots, the scheduler's policies, sandbox limits). It imports nothing of ours.

mod clock;
mod names;
mod period;
mod policy;
mod sandbox;
mod slot;

pub use clock::{Clock, ManualClock, SystemClock, UnixMs};
pub use names::{
    AdapterName, GroupName, KeyName, MAX_MODEL_NAME_BYTES, Secret, SourceName, expose_secret,
    listed_model_name_problem, mask,
};
pub use period::{Period, PeriodName, Quota, Usage};
pub use policy::{AffinityPolicy, ChannelSelection, CooldownPolicy, ScoringPolicy};
pub use sandbox::{AdapterGrant, SandboxLimits};
pub use slot::SlotKey;

/// The model name that routes by the AUTO chains.
pub const AUTO: &str = "AUTO";
