//! Whether Redis answers: the first failure is logged once (with why), the return once; a
//! return asks the sync to resynchronise what it may have missed.

use std::sync::Mutex;

#[derive(Debug, Default)]
pub struct Link {
    /// Why the last exchange failed, while it is down.
    down: Mutex<Option<String>>,
}

impl Link {
    pub fn is_down(&self) -> bool {
        self.down.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// An exchange failed; logs only the first of a run of failures.
    pub fn failed(&self, why: &str) {
        let mut down = self.down.lock().unwrap_or_else(|p| p.into_inner());
        if down.is_none() {
            tracing::warn!(
                "shared state unreachable, serving from this replica's own state until it returns: {}",
                crate::logsafe::Escaped(why)
            );
            *down = Some(why.to_string());
        }
    }

    /// An exchange succeeded; true when it had been down (so a resync is due).
    pub fn succeeded(&self) -> bool {
        let was_down = self.down.lock().unwrap_or_else(|p| p.into_inner()).take().is_some();
        if was_down {
            tracing::info!("shared state reachable again: resynchronising");
        }
        was_down
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_return_after_failures_asks_for_one_resync() {
        let link = Link::default();
        assert!(!link.succeeded(), "never down: nothing to resync");
        link.failed("refused");
        link.failed("refused again");
        assert!(link.is_down());
        assert!(link.succeeded());
        assert!(!link.is_down() && !link.succeeded());
    }
}
