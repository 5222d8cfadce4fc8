//! The smart ordering score (Parrot's): latency EMA × error penalty, decaying back to the
//! default when stale, plus exploration that now and then tries an untried or stale slot.

use crate::domain::{ScoringPolicy, UnixMs};

/// What the scorer knows of one (source, model).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    pub total: u64,
    pub successes: u64,
    /// Attempts in the recent window (at most `recent_window`).
    pub recent: u32,
    /// Successes in the recent window; fractional once the window is full (sliding average).
    pub recent_successes: f64,
    pub avg_connect_ms: f64,
    pub avg_first_byte_ms: f64,
    pub last_updated: UnixMs,
}

impl Stats {
    pub fn record_success(&mut self, connect_ms: f64, first_byte_ms: f64, now: UnixMs, p: &ScoringPolicy) {
        let first = self.successes == 0;
        self.total += 1;
        self.successes += 1;
        self.slide(true, p);
        if first {
            (self.avg_connect_ms, self.avg_first_byte_ms) = (connect_ms, first_byte_ms);
        } else {
            self.avg_connect_ms = ema(self.avg_connect_ms, connect_ms, p.ema_alpha);
            self.avg_first_byte_ms = ema(self.avg_first_byte_ms, first_byte_ms, p.ema_alpha);
        }
        self.last_updated = now;
    }

    /// A failed attempt; `connect_ms` when the connection itself was timed.
    pub fn record_failure(&mut self, connect_ms: Option<f64>, now: UnixMs, p: &ScoringPolicy) {
        self.total += 1;
        self.slide(false, p);
        if let Some(ms) = connect_ms.filter(|_| self.total > 1) {
            self.avg_connect_ms = ema(self.avg_connect_ms, ms, p.ema_alpha);
        }
        self.last_updated = now;
    }

    /// The recent window: counts until full, then slides (one average attempt out, this one in).
    fn slide(&mut self, success: bool, p: &ScoringPolicy) {
        let hit = if success { 1.0 } else { 0.0 };
        if self.recent < p.recent_window {
            self.recent += 1;
            self.recent_successes += hit;
        } else {
            self.recent_successes += hit - self.recent_successes / p.recent_window as f64;
        }
    }

    fn stale_minutes(&self, now: UnixMs) -> f64 {
        now.since(self.last_updated).as_secs_f64() / 60.0
    }
}

fn ema(avg: f64, sample: f64, alpha: f64) -> f64 {
    avg + alpha * (sample - avg)
}

/// Lower is better.
pub fn score(stats: Option<&Stats>, now: UnixMs, p: &ScoringPolicy) -> f64 {
    let Some(s) = stats.filter(|s| s.total > 0) else { return p.default_score };
    let success_rate = if s.recent > 0 {
        s.recent_successes.min(s.recent as f64) / s.recent as f64
    } else {
        s.successes as f64 / s.total as f64
    };
    let latency = s.avg_connect_ms + s.avg_first_byte_ms;
    let raw = latency * (1.0 + (1.0 - success_rate) * p.error_penalty_factor);
    let stale = s.stale_minutes(now);
    if stale <= p.stale_minutes {
        return raw;
    }
    let span = (p.stale_full_decay_minutes - p.stale_minutes).max(f64::EPSILON);
    let progress = ((stale - p.stale_minutes) / span).min(1.0);
    raw * (1.0 - progress) + p.default_score * progress
}

/// How much a candidate is worth exploring: untried first, then little-used and stale.
pub fn exploration_priority(stats: Option<&Stats>, now: UnixMs, p: &ScoringPolicy) -> f64 {
    match stats.filter(|s| s.total > 0) {
        None => 1_000_000.0,
        Some(s) => (s.stale_minutes(now) + 1.0) / (s.recent.min(p.recent_window) as f64 + 1.0),
    }
}

/// Sorts `items` by score (stable, so ties keep their order); when `roll` falls under the
/// exploration rate, the most worth-exploring item is moved to the front.
pub fn order_by_score<T>(
    items: &mut Vec<T>,
    stats_of: impl Fn(&T) -> Option<Stats>,
    roll: f64,
    now: UnixMs,
    p: &ScoringPolicy,
) {
    if items.len() <= 1 {
        return;
    }
    let mut keyed: Vec<(f64, f64, T)> = items
        .drain(..)
        .map(|item| {
            let stats = stats_of(&item);
            (score(stats.as_ref(), now, p), exploration_priority(stats.as_ref(), now, p), item)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
    if roll < p.exploration_rate {
        let mut target = 0;
        for (i, entry) in keyed.iter().enumerate() {
            if entry.1 > keyed[target].1 {
                target = i;
            }
        }
        let chosen = keyed.remove(target);
        keyed.insert(0, chosen);
    }
    items.extend(keyed.into_iter().map(|(_, _, item)| item));
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const T0: UnixMs = UnixMs(1_000_000_000);
    fn p() -> ScoringPolicy {
        ScoringPolicy::default()
    }
    fn minutes(m: u64) -> Duration {
        Duration::from_secs(m * 60)
    }

    #[test]
    fn untried_slots_score_the_default() {
        assert_eq!(score(None, T0, &p()), 3000.0);
        assert_eq!(score(Some(&Stats::default()), T0, &p()), 3000.0);
    }

    #[test]
    fn latency_is_an_ema_and_failures_multiply_it() {
        let mut s = Stats::default();
        s.record_success(100.0, 300.0, T0, &p());
        assert_eq!(score(Some(&s), T0, &p()), 400.0, "the first sample is the average");
        s.record_success(200.0, 700.0, T0, &p());
        assert_eq!((s.avg_connect_ms, s.avg_first_byte_ms), (125.0, 400.0), "α = 0.25");
        assert_eq!(score(Some(&s), T0, &p()), 525.0);
        s.record_failure(None, T0, &p());
        s.record_failure(None, T0, &p());
        // 2 of 4 recent attempts failed: × (1 + 0.5 × 8) = × 5.
        assert_eq!(score(Some(&s), T0, &p()), 525.0 * 5.0);
    }

    #[test]
    fn the_recent_window_slides_after_fifty_attempts() {
        let mut s = Stats::default();
        for _ in 0..50 {
            s.record_success(10.0, 10.0, T0, &p());
        }
        assert_eq!((s.recent, s.recent_successes), (50, 50.0));
        s.record_failure(None, T0, &p());
        assert_eq!(s.recent, 50);
        assert!((s.recent_successes - 49.0).abs() < 1e-9, "one average success slid out");
        let rate = s.recent_successes / 50.0;
        assert!((score(Some(&s), T0, &p()) - 20.0 * (1.0 + (1.0 - rate) * 8.0)).abs() < 1e-9);
    }

    #[test]
    fn stale_scores_decay_to_the_default_between_15_and_30_minutes() {
        let mut s = Stats::default();
        s.record_success(500.0, 500.0, T0, &p());
        assert_eq!(score(Some(&s), T0.plus(minutes(15)), &p()), 1000.0, "fresh up to 15 min");
        assert_eq!(score(Some(&s), T0.plus(Duration::from_secs(22 * 60 + 30)), &p()), 2000.0, "halfway");
        assert_eq!(score(Some(&s), T0.plus(minutes(30)), &p()), 3000.0);
        assert_eq!(score(Some(&s), T0.plus(minutes(90)), &p()), 3000.0);
    }

    #[test]
    fn ordering_is_by_score_and_exploration_prefers_untried_then_stale() {
        let fast = {
            let mut s = Stats::default();
            s.record_success(10.0, 10.0, T0, &p());
            s
        };
        let slow = {
            let mut s = Stats::default();
            s.record_success(400.0, 400.0, T0, &p());
            s
        };
        let stats = |name: &&str| match *name {
            "fast" => Some(fast.clone()),
            "slow" => Some(slow.clone()),
            _ => None,
        };
        let mut items = vec!["untried", "slow", "fast"];
        order_by_score(&mut items, stats, 0.99, T0, &p());
        assert_eq!(items, ["fast", "slow", "untried"], "no exploration above the rate");
        order_by_score(&mut items, stats, 0.1, T0, &p());
        assert_eq!(items, ["untried", "fast", "slow"], "exploration tries the untried one first");

        // All tried: the stalest, least-used one is explored, even when it scores worse.
        let later = T0.plus(minutes(10));
        let mut fresh_fast = fast.clone();
        fresh_fast.last_updated = later;
        let stats = |name: &&str| match *name {
            "fast" => Some(fresh_fast.clone()),
            _ => Some(slow.clone()),
        };
        let mut items = vec!["slow", "fast"];
        order_by_score(&mut items, stats, 0.0, later, &p());
        assert_eq!(items, ["slow", "fast"], "slow has rested 10 minutes: explored first");
        let mut items = vec!["fast", "slow"];
        let p_never = ScoringPolicy { exploration_rate: 0.0, ..p() };
        order_by_score(&mut items, stats, 0.0, later, &p_never);
        assert_eq!(items, ["fast", "slow"], "rate 0 never explores");
    }
}
