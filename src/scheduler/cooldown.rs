//! Cooldowns per (source, model): how long a failing slot rests, when probes may test it in the
//! second half of its window, and when it is healthy again. Pure logic over an injected time.

use std::time::Duration;

use crate::domain::{CooldownPolicy, Failure, UnixMs};

/// Where a slot stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Healthy,
    /// Cooling, in the second half: this request may probe it (after every healthy candidate).
    Probe,
    /// Cooling: skip it.
    Closed,
}

/// A cooldown window: silent from `start` to the midpoint, probes allowed after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Window {
    pub start: UnixMs,
    /// `None`: until cleared.
    pub until: Option<UnixMs>,
    /// No probe before this (an upstream's Retry-After is honoured to the end).
    #[serde(default)]
    pub no_probe_before: Option<UnixMs>,
}

impl Window {
    /// When the window admits probes: halfway through, or `probe_after` in if sooner (a
    /// window without an end too).
    pub fn probe_from(&self, probe_after: Duration) -> UnixMs {
        let half = self.until.map_or(u64::MAX, |until| until.0.saturating_sub(self.start.0) / 2);
        let from = UnixMs(self.start.0.saturating_add(half.min(probe_after.as_millis() as u64)));
        self.no_probe_before.map_or(from, |t| from.max(t))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SlotHealth {
    pub failures: u32,
    pub window: Option<Window>,
    /// Probes admitted and not yet answered (memory only).
    pub probes_in_flight: u32,
}

/// How many probes a cooling slot admits at once: clamp(max_concurrent / 10, 1, 2).
pub fn probe_budget(max_concurrent: u32) -> u32 {
    (max_concurrent / 10).clamp(1, 2)
}

impl SlotHealth {
    pub fn admission(&self, now: UnixMs, max_concurrent: u32, probe_after: Duration) -> Admission {
        let Some(window) = self.window else { return Admission::Healthy };
        match window.until {
            Some(until) if now >= until => Admission::Healthy,
            _ if now >= window.probe_from(probe_after) && self.probes_in_flight < probe_budget(max_concurrent) => {
                Admission::Probe
            }
            _ => Admission::Closed,
        }
    }

    pub fn on_success(&mut self) {
        *self = SlotHealth::default();
    }

    pub fn on_failure(&mut self, failure: Failure, now: UnixMs, policy: &CooldownPolicy) {
        // An upstream's Retry-After is honoured up to the longest rest there is.
        let failure = match failure {
            Failure::RateLimited { retry_after } => Failure::RateLimited {
                retry_after: retry_after.map(|d| d.min(Duration::from_millis(policy.quota_cap_ms))),
            },
            other => other,
        };
        let rest = match failure {
            Failure::Transient => {
                self.failures = self.failures.saturating_add(1);
                // Below the threshold nothing opens, unless a window is open already (a failed
                // probe): that one is replaced, so its probe place is freed.
                if self.failures < policy.failure_threshold && self.window.is_none() {
                    return;
                }
                let step = self.failures.saturating_sub(policy.failure_threshold);
                if policy.ladder_ms.is_empty() {
                    let ms = policy.transient_base_ms.saturating_mul(1u64 << step.min(20));
                    Some(ms.min(policy.transient_cap_ms))
                } else {
                    let ms = policy.ladder_ms[(step as usize).min(policy.ladder_ms.len() - 1)];
                    (ms > 0).then_some(ms)
                }
            }
            Failure::Auth => {
                self.failures = self.failures.saturating_add(1);
                Some(policy.auth_ms)
            }
            Failure::RateLimited { retry_after } => {
                self.failures = self.failures.saturating_add(1);
                Some(policy.rate_limit_ms.max(retry_after.map_or(0, |d| d.as_millis() as u64)))
            }
            Failure::QuotaExhausted { window_ends_in } => {
                let ms = window_ends_in.map_or(policy.quota_cap_ms, |d| d.as_millis() as u64);
                Some(ms.min(policy.quota_cap_ms))
            }
        };
        let no_probe_before = match failure {
            Failure::RateLimited { retry_after: Some(wait) } => Some(now.plus(wait)),
            _ => None,
        };
        self.window =
            Some(Window { start: now, until: rest.map(|ms| now.plus(Duration::from_millis(ms))), no_probe_before });
        self.probes_in_flight = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMs = UnixMs(1_000_000);
    const P: Duration = Duration::from_secs(15);
    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }
    fn until(h: &SlotHealth) -> u64 {
        h.window.unwrap().until.unwrap().since(h.window.unwrap().start).as_secs()
    }

    #[test]
    fn transient_failures_double_from_five_seconds_up_to_five_minutes() {
        let policy = CooldownPolicy::default();
        let mut h = SlotHealth::default();
        let mut seen = Vec::new();
        for _ in 0..9 {
            h.on_failure(Failure::Transient, T0, &policy);
            seen.push(until(&h));
        }
        assert_eq!(seen, [5, 10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn auth_rate_limit_and_quota_have_their_own_rests() {
        let policy = CooldownPolicy::default();
        let mut h = SlotHealth::default();
        h.on_failure(Failure::Auth, T0, &policy);
        assert_eq!(until(&h), 600);
        h.on_failure(Failure::RateLimited { retry_after: None }, T0, &policy);
        assert_eq!(until(&h), 30);
        h.on_failure(Failure::RateLimited { retry_after: Some(s(90)) }, T0, &policy);
        assert_eq!(until(&h), 90, "a longer Retry-After wins");
        h.on_failure(Failure::RateLimited { retry_after: Some(s(5)) }, T0, &policy);
        assert_eq!(until(&h), 30, "a shorter one does not");
        let failures = h.failures;
        h.on_failure(Failure::QuotaExhausted { window_ends_in: Some(s(600)) }, T0, &policy);
        assert_eq!(until(&h), 600);
        h.on_failure(Failure::QuotaExhausted { window_ends_in: Some(s(7200)) }, T0, &policy);
        assert_eq!(until(&h), 1800, "capped at 30 minutes");
        assert_eq!(h.failures, failures, "quota does not count as a failure");
    }

    #[test]
    fn the_first_half_is_silent_and_the_second_admits_a_bounded_number_of_probes() {
        let policy = CooldownPolicy::default();
        let mut h = SlotHealth::default();
        h.on_failure(Failure::RateLimited { retry_after: None }, T0, &policy);
        assert_eq!(h.admission(T0.plus(s(14)), 10, P), Admission::Closed);
        assert_eq!(h.admission(T0.plus(s(15)), 10, P), Admission::Probe);
        h.probes_in_flight = 1;
        assert_eq!(h.admission(T0.plus(s(16)), 10, P), Admission::Closed, "max_concurrent 10 → 1 probe");
        assert_eq!(h.admission(T0.plus(s(16)), 25, P), Admission::Probe, "max_concurrent 25 → 2 probes");
        h.probes_in_flight = 2;
        assert_eq!(h.admission(T0.plus(s(16)), 100, P), Admission::Closed, "never more than 2");
        assert_eq!(h.admission(T0.plus(s(30)), 10, P), Admission::Healthy, "the window has passed");
        assert_eq!(
            (probe_budget(1), probe_budget(10), probe_budget(19), probe_budget(20), probe_budget(500)),
            (1, 1, 1, 2, 2)
        );
    }

    #[test]
    fn a_probe_success_clears_and_a_probe_failure_opens_a_longer_window() {
        let policy = CooldownPolicy::default();
        let mut h = SlotHealth::default();
        h.on_failure(Failure::Transient, T0, &policy);
        let probe_at = T0.plus(s(3));
        assert_eq!(h.admission(probe_at, 10, P), Admission::Probe);
        h.on_failure(Failure::Transient, probe_at, &policy);
        assert_eq!(h.window.unwrap().start, probe_at);
        assert_eq!(until(&h), 10);
        h.on_success();
        assert_eq!(h, SlotHealth::default());
        assert_eq!(h.admission(probe_at, 10, P), Admission::Healthy);
    }

    #[test]
    fn a_long_window_admits_a_probe_after_probe_after_not_halfway() {
        let policy = CooldownPolicy::default();
        let mut h = SlotHealth::default();
        for _ in 0..7 {
            h.on_failure(Failure::Transient, T0, &policy);
        }
        assert_eq!(until(&h), 300);
        assert_eq!(h.admission(T0.plus(s(14)), 10, P), Admission::Closed);
        assert_eq!(h.admission(T0.plus(s(15)), 10, P), Admission::Probe, "not at 150 s");
    }

    #[test]
    fn a_failed_probe_below_the_threshold_still_frees_its_place_and_retry_after_is_capped() {
        let keyway = CooldownPolicy { failure_threshold: 3, ladder_ms: vec![60_000], ..Default::default() };
        let mut h = SlotHealth::default();
        h.on_failure(Failure::RateLimited { retry_after: None }, T0, &keyway);
        h.probes_in_flight = 1;
        h.on_failure(Failure::Transient, T0.plus(s(20)), &keyway);
        assert_eq!((h.failures, h.probes_in_flight), (2, 0), "a new window replaced the probed one");
        assert_eq!(h.window.unwrap().start, T0.plus(s(20)));

        let mut h = SlotHealth::default();
        h.on_failure(Failure::RateLimited { retry_after: Some(s(u64::MAX / 2_000)) }, T0, &keyway);
        assert_eq!(until(&h), 1800, "capped at the longest rest");
        assert_eq!(h.admission(T0.plus(s(1800)), 10, P), Admission::Healthy);
    }

    #[test]
    fn keyways_breaker_and_parrots_ladder_are_settings() {
        let keyway = CooldownPolicy { failure_threshold: 3, ladder_ms: vec![60_000], ..Default::default() };
        let mut h = SlotHealth::default();
        h.on_failure(Failure::Transient, T0, &keyway);
        h.on_failure(Failure::Transient, T0, &keyway);
        assert_eq!(h.admission(T0, 10, P), Admission::Healthy, "two failures do not trip it");
        h.on_failure(Failure::Transient, T0, &keyway);
        assert_eq!(until(&h), 60);

        let parrot =
            CooldownPolicy { ladder_ms: [1, 3, 5, 10, 15, 0].map(|m| m * 60_000).to_vec(), ..Default::default() };
        let mut h = SlotHealth::default();
        let mut seen = Vec::new();
        for _ in 0..5 {
            h.on_failure(Failure::Transient, T0, &parrot);
            seen.push(until(&h) / 60);
        }
        assert_eq!(seen, [1, 3, 5, 10, 15]);
        h.on_failure(Failure::Transient, T0, &parrot);
        assert_eq!(h.window.unwrap().until, None, "0 = until cleared");
        assert_eq!(h.admission(T0.plus(s(14)), 10, P), Admission::Closed);
        assert_eq!(h.admission(T0.plus(s(86_400)), 10, P), Admission::Probe, "cleared by a probe");
    }
}
