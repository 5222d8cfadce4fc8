//! Route processing modes beyond plain failover: `adapter` (images described by a vision
//! route, then text only) and `fusion` (every candidate answers, a judge route decides).

pub mod fusion;
pub mod vision;
