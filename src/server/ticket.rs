//! One attempt's admission: the gates a candidate passes before its request is sent (a probe
//! place when it is cooling, the source's rpm, a place under `max_concurrent`), held by a
//! ticket that reports the upstream's verdict and gives back what it holds when dropped.

use std::fmt;

use super::Gateway;
use crate::provider::{Provider, SourcePermit};
use crate::scheduler::{Candidate, Failure, SlotKey, Timing};

/// Why a candidate was not tried now: not a failure, nothing cools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotNow {
    /// Cooling, and the probe places it admits are taken.
    ProbesTaken,
    /// Its source's `rpm` is reached.
    Rpm(u32),
    /// Its source's `max_concurrent` places stayed full past the queue timeout.
    Busy(u32),
}

impl fmt::Display for NotNow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotNow::ProbesTaken => f.write_str("cooling down (its probe places are taken)"),
            NotNow::Rpm(rpm) => write!(f, "rpm limit reached ({rpm} requests per minute)"),
            NotNow::Busy(n) => write!(f, "busy (all {n} of max_concurrent in use)"),
        }
    }
}

/// An admitted attempt. Its probe place (when it holds one) is given back on every path that
/// ends without the upstream's verdict, a client hanging up mid-probe included; a verdict
/// (`succeeded`, `failed`) settles it.
pub struct Ticket<'a> {
    gw: &'a Gateway,
    slot: &'a SlotKey,
    probe: bool,
    permit: Option<SourcePermit>,
    /// Holds the replicas' one probe claim for the slot (`shared_state`).
    claimed: bool,
}

impl<'a> Ticket<'a> {
    /// Passes `candidate` through the gates in order; waits (up to the source's queue
    /// timeout) for a place under `max_concurrent`.
    pub async fn admit(
        gw: &'a Gateway,
        provider: &Provider,
        candidate: &Candidate<'_>,
        slot: &'a SlotKey,
    ) -> Result<Ticket<'a>, NotNow> {
        let source = candidate.resolved.source;
        if candidate.probe && !gw.scheduler.admit_probe(slot, source.max_concurrent) {
            return Err(NotNow::ProbesTaken);
        }
        // From here the probe place is held: dropping the ticket gives it back.
        let mut ticket = Ticket { gw, slot, probe: candidate.probe, permit: None, claimed: false };
        // With replicas, one probe across all of them.
        if let Some(shared) = gw.shared.as_ref().filter(|_| candidate.probe) {
            // Marked before the claim is asked: a request cancelled while Redis answers still
            // gives back a claim that landed (the release removes this process's claim only).
            ticket.claimed = true;
            if !shared.claim_probe(slot, source.timeout()).await {
                return Err(NotNow::ProbesTaken);
            }
        }
        if let Some(rpm) = source.rpm {
            if gw.scheduler.take_rpm(&source.name, rpm).is_err() {
                return Err(NotNow::Rpm(rpm));
            }
            if let Some(shared) = &gw.shared {
                shared.rpm_taken(&source.name, gw.scheduler.now());
            }
        }
        ticket.permit = Some(provider.admit(source).await.ok_or(NotNow::Busy(source.max_concurrent))?);
        Ok(ticket)
    }

    /// The place under `max_concurrent`, to be held by the answer until it ends.
    pub fn take_permit(&mut self) -> SourcePermit {
        self.permit.take().expect("a ticket holds its permit until taken once")
    }

    /// The upstream served: the slot heals and is scored.
    pub fn succeeded(mut self, timing: Timing) {
        self.gw.scheduler.record_success(self.slot, timing);
        self.probe = false;
    }

    /// The upstream failed: the slot cools by the failure's rule (a failed probe's place is
    /// freed with the new window it opens).
    pub fn failed(mut self, failure: Failure) {
        self.gw.scheduler.record_failure(self.slot, failure);
        self.probe = false;
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.probe {
            self.gw.scheduler.release_probe(self.slot);
        }
        // Whatever the verdict, the probe is over: the slot's new health reaches the others.
        if let (true, Some(shared)) = (self.claimed, &self.gw.shared) {
            shared.release_probe(self.slot);
        }
    }
}
