//! The bottom floor: plain types and policies every other module shares (names, time, money,
//! quota periods, slots, operators' roles, the scheduler's policies, what a failure means, sandbox limits). It imports nothing of ours.

mod account;
mod clock;
mod failure;
mod money;
mod names;
mod period;
mod policy;
mod role;
mod sandbox;
mod slot;

pub use account::{Account, Budget};
pub use clock::{Clock, ManualClock, SystemClock, UnixMs};
pub use failure::{Disposition, ErrorType, Failure, FailureKind, Verdict};
pub use money::{Change, Cost, Counts, MoneyError, PerMillion, Price, Rates, Tier, Usd};
pub use names::{
    AdapterName, GroupName, KeyName, MAX_MODEL_NAME_BYTES, PolicyName, Secret, SourceName, expose_secret,
    listed_model_name_problem, mask,
};
pub use period::{Period, PeriodName, Quota, Usage};
pub use policy::{AffinityPolicy, ChannelSelection, CooldownPolicy, ScoringPolicy};
pub use role::Role;
pub use sandbox::{AdapterGrant, SandboxLimits};
pub use slot::SlotKey;

/// The model name that routes by the AUTO chains.
pub const AUTO: &str = "AUTO";
