//! Route processing modes beyond plain failover: `adapter` (images described by a vision
//! route, then text only) and `fusion` (every candidate answers, a judge route decides).
//! Modes reach the gateway only through `Dispatcher`, never back into dispatch's module.

pub mod fusion;
pub mod vision;

use futures::future::BoxFuture;

use super::auth::KeyEntry;
use super::books::LogContext;
use super::call::{Call, Reply};
use super::error::ApiError;
use crate::router::Planned;

/// What a mode may ask of the gateway.
pub trait Dispatcher: Sync {
    /// A call of the mode's own (a vision or judge call), routed like a client's.
    fn dispatch<'a>(&'a self, key: &'a KeyEntry, call: Call<'a>) -> BoxFuture<'a, Result<Reply, ApiError>>;

    /// `candidates` tried in turn, as a client's request would be, logged under `log`.
    fn serve<'a>(
        &'a self,
        key: &'a KeyEntry,
        call: &'a Call<'a>,
        candidates: Vec<Planned<'a>>,
        log: LogContext,
    ) -> BoxFuture<'a, Result<Reply, ApiError>>;
}
