//! The scheduler's plan over real config types and a hand-moved clock: tiers, probes after
//! the healthy, quotas, affinity, and the three channel selections.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::config::Config;
use crate::router::{Resolution, route};

const T0: u64 = 1_800_000_000_000;

fn config(extra: &str, runtime: &str) -> Config {
    let text = format!(
        "{extra}
sources:
  - {{name: a, base_url: 'http://127.0.0.1:1', models: [{{name: m}}, {{name: big}}]}}
  - {{name: b, base_url: 'http://127.0.0.1:2', models: [{{name: m}}, {{name: big}}]}}
  - {{name: c, base_url: 'http://127.0.0.1:3', models: [{{name: m}}]}}
"
    );
    let c = crate::config::load_str(&text, Path::new("c.yaml"), &|_| None, &["openai"]).unwrap();
    crate::config::load_runtime_str(runtime, Path::new("r.yaml"), &c, &["openai"]).unwrap()
}

fn scheduler(c: &Config) -> (Scheduler, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::at(T0));
    let policy = Policy { scoring: ScoringPolicy { exploration_rate: 0.0, ..Default::default() }, ..Policy::of(c) };
    (Scheduler::new(policy, clock.clone(), None).seeded(7), clock)
}

fn candidates<'a>(c: &'a Config, model: &'a str) -> Vec<Planned<'a>> {
    match route(c, model, crate::config::ModelKind::Chat, &crate::config::GroupName::default()) {
        Resolution::Auto { candidates, .. } => candidates,
        Resolution::Named(named) => {
            named.into_iter().map(|resolved| Planned { resolved, tier: 0, quota: None, price: None }).collect()
        }
        Resolution::Route { .. } | Resolution::Unknown => panic!("not a model: {model}"),
    }
}

fn order(s: &Scheduler, c: &Config, model: &str, fp: Option<&str>) -> Vec<String> {
    s.plan(candidates(c, model), model, fp)
        .candidates
        .iter()
        .map(|c| format!("{}{}", c.resolved.qualified(), if c.probe { "?" } else { "" }))
        .collect()
}

fn key(source: &str, model: &str) -> SlotKey {
    SlotKey { source: SourceName::new(source), model: model.into() }
}

#[test]
fn tiers_go_in_order_and_a_due_probe_leads_its_tier() {
    let c = config("channel_selection: order", "auto:\n  - {model: m, tier: 1}\n  - {model: big, tier: 2}\n");
    let (s, clock) = scheduler(&c);
    assert_eq!(order(&s, &c, "AUTO", None), ["a/m", "b/m", "c/m", "a/big", "b/big"]);

    s.record_failure(&key("a", "m"), Failure::Transient);
    s.record_failure(&key("a", "big"), Failure::Transient);
    let plan = s.plan(candidates(&c, "AUTO"), "AUTO", None);
    assert_eq!(plan.skipped.len(), 2, "first half of the window: left out");
    assert_eq!(plan.skipped[0].reason, SkipReason::Cooling { until: Some(UnixMs(T0 + 5_000)) });

    clock.advance(Duration::from_millis(2_500));
    assert_eq!(order(&s, &c, "AUTO", None), ["a/m?", "b/m", "c/m", "a/big?", "b/big"], "probes first in their tier");
    assert!(s.admit_probe(&key("a", "m"), 10));
    assert!(!s.admit_probe(&key("a", "m"), 10), "max_concurrent 10 → one probe at a time");
    assert_eq!(order(&s, &c, "AUTO", None), ["b/m", "c/m", "a/big?", "b/big"], "its probe place is taken");
    s.release_probe(&key("a", "m"));
    s.record_success(&key("a", "m"), Timing::default());
    assert_eq!(order(&s, &c, "AUTO", None), ["a/m", "b/m", "c/m", "a/big?", "b/big"], "a probe success heals at once");
}

#[test]
fn a_spent_slot_quota_falls_through_until_its_window_rolls_over() {
    let c = config(
        "channel_selection: order",
        "auto:\n  - {model: m, source: a, tier: 1, token_quota: 100, period: hour}\n  - {model: m, source: b, tier: 2}\n",
    );
    let (s, clock) = scheduler(&c);
    let periods = crate::router::quota_periods(&c, &key("a", "m"));
    assert_eq!(periods, [Period::Hour]);
    s.completed(&key("a", "m"), 60, &periods, None);
    assert_eq!(order(&s, &c, "AUTO", None), ["a/m", "b/m"], "60 of 100 used");
    s.completed(&key("a", "m"), 40, &periods, None);
    let plan = s.plan(candidates(&c, "AUTO"), "AUTO", None);
    assert_eq!(plan.candidates.len(), 1);
    assert_eq!(plan.candidates[0].resolved.qualified(), "b/m");
    let next_hour = Period::Hour.window(UnixMs(T0)).1;
    assert_eq!(plan.skipped[0].reason, SkipReason::QuotaSpent { used: 100, quota: 100, resets: next_hour });
    assert_eq!(s.health_of(&key("a", "m")), None, "a spent quota is not a failure");

    clock.advance(next_hour.unwrap().since(UnixMs(T0)));
    assert_eq!(order(&s, &c, "AUTO", None), ["a/m", "b/m"], "a new hour, a new quota");
    assert_eq!(s.quota_used(&key("a", "m"), Period::Hour), 0);
}

#[test]
fn the_bound_candidate_goes_first_unless_it_is_cooling() {
    let c = config("channel_selection: order", "");
    let (s, clock) = scheduler(&c);
    s.completed(&key("c", "m"), 10, &[], Some("fp1".into()));
    let plan = s.plan(candidates(&c, "m"), "m", Some("fp1"));
    assert!(plan.affinity_hit);
    assert_eq!(order(&s, &c, "m", Some("fp1")), ["c/m", "a/m", "b/m"]);
    assert_eq!(order(&s, &c, "m", Some("other")), ["a/m", "b/m", "c/m"]);

    s.record_failure(&key("c", "m"), Failure::Transient);
    clock.advance(Duration::from_millis(2_600));
    let plan = s.plan(candidates(&c, "m"), "m", Some("fp1"));
    assert!(!plan.affinity_hit, "a probe is not 'available': affinity never overrides a cooldown");
    assert_eq!(order(&s, &c, "m", Some("fp1")), ["c/m?", "a/m", "b/m"], "led as a probe, not as the binding");

    s.record_success(&key("c", "m"), Timing::default());
    clock.advance(Duration::from_secs(30 * 60));
    assert!(!s.plan(candidates(&c, "m"), "m", Some("fp1")).affinity_hit, "30 minutes: the binding expired");

    s.completed(&key("b", "m"), 10, &[], Some("fp2".into()));
    assert_eq!(s.clear_affinity(Some("b")), 1);
    assert!(s.bound("fp2").is_none());
}

#[test]
fn smart_orders_by_score_and_priority_by_the_users_list() {
    let c = config("channel_selection: smart", "");
    let (s, _) = scheduler(&c);
    s.record_success(&key("a", "m"), Timing { connect_ms: 40.0, first_byte_ms: 60.0 });
    s.record_success(&key("b", "m"), Timing { connect_ms: 20.0, first_byte_ms: 30.0 });
    assert_eq!(order(&s, &c, "m", None), ["b/m", "a/m", "c/m"], "50 ms, 100 ms, untried c at the default 3000");
    s.record_failure(&key("b", "m"), Failure::RateLimited { retry_after: None });
    s.clear(Some("b"), None);
    // b: 50 ms × (1 + (1 − 1/2) × 8) = 250 > a's 100: the faster but failing source drops back.
    assert_eq!(order(&s, &c, "m", None), ["a/m", "b/m", "c/m"]);
    assert_eq!(s.stats_of(&key("b", "m")).unwrap().total, 2);
    assert_eq!(s.reset_stats(Some("b"), None), 1);
    assert_eq!(order(&s, &c, "m", None), ["a/m", "b/m", "c/m"], "b forgotten: 3000, tied with c, config order");
    s.record_success(&key("c", "m"), Timing { connect_ms: 1.0, first_byte_ms: 1.0 });
    assert_eq!(order(&s, &c, "m", None), ["c/m", "a/m", "b/m"]);

    let c = config("channel_selection: priority\npriority_orders: {m: [c, a], '*': [b]}", "");
    let (s, _) = scheduler(&c);
    assert_eq!(order(&s, &c, "m", None), ["c/m", "a/m", "b/m"]);
    assert_eq!(order(&s, &c, "big", None), ["b/big", "a/big"], "`*` covers the other models");
}

#[test]
fn exploration_sometimes_puts_the_untried_candidate_first() {
    let c = config("channel_selection: smart", "");
    let clock = Arc::new(ManualClock::at(T0));
    let s = Scheduler::new(Policy::of(&c), clock, None).seeded(1);
    s.record_success(&key("a", "m"), Timing { connect_ms: 10.0, first_byte_ms: 10.0 });
    s.record_success(&key("b", "m"), Timing { connect_ms: 20.0, first_byte_ms: 20.0 });
    let firsts: Vec<String> = (0..1000).map(|_| order(&s, &c, "m", None)[0].clone()).collect();
    let explored = firsts.iter().filter(|f| *f == "c/m").count();
    assert!((120..280).contains(&explored), "about 20% of 1000 go to the untried c first, got {explored}");
    assert_eq!(firsts.len() - explored, firsts.iter().filter(|f| *f == "a/m").count(), "otherwise the best");
}
