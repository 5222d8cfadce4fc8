//! `GET /metrics` in Prometheus text: the OpenTelemetry GenAI metrics (as Prometheus names
//! them) observed from every attempt's log row, and Switchyard's own state read at scrape time.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::exponential_buckets;
use prometheus_client::registry::{Registry, Unit};

use super::Gateway;
use super::books::LogContext;
use super::error::{ApiError, ErrorType};
use crate::domain::SlotKey;
use crate::plugin::CallDurations;
use crate::scheduler::{Admission, probe_budget};
use crate::state::LogRow;
use crate::telemetry::{Histogram, SeriesCache};

/// The labels of one attempt, all from configured names (no request ids or user text).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AttemptLabels {
    gen_ai_operation_name: &'static str,
    /// The model the client named (only names the gateway resolved reach here).
    gen_ai_request_model: String,
    /// The source's model that answered.
    gen_ai_response_model: String,
    /// The adapter's protocol.
    gen_ai_provider_name: String,
    source: String,
    /// Empty when the attempt served.
    error_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TokenLabels {
    gen_ai_token_type: &'static str,
    gen_ai_operation_name: &'static str,
    gen_ai_request_model: String,
    gen_ai_response_model: String,
    gen_ai_provider_name: String,
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SlotLabels {
    source: String,
    model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    source: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModelLabels {
    gen_ai_request_model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KeyLabels {
    key: String,
    period: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CostLabels {
    key: String,
    source: String,
    model: String,
}

/// A budget's account: `key:NAME` or `group:NAME`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BudgetLabels {
    account: String,
    period: String,
}

type UsdCounter = Counter<f64, std::sync::atomic::AtomicU64>;
type UsdGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AdapterLabels {
    adapter: String,
}

/// A client request as OpenTelemetry's HTTP server metrics name it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HttpLabels {
    http_request_method: String,
    /// The route template (the front door), never the path as sent.
    http_route: String,
    http_response_status_code: String,
    /// Empty for a success; the error's type (`authentication_error`, …) or its status.
    error_type: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    /// `hit`, `miss` or `bypass`.
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    /// A `policies[].name` (the config bounds them).
    policy: String,
    /// `request`, `answer` or `stream`.
    hook: &'static str,
    /// `rewrite`, `deny`, `failed_open` or `failed_closed`.
    action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SavedLabels {
    gen_ai_token_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FoldedLabels {
    family: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

fn seconds_histogram() -> Histogram {
    // 5 ms to ~5.5 min.
    Histogram::new(exponential_buckets(0.005, 2.0, 17))
}

fn tokens_histogram() -> Histogram {
    // 1 to ~4 M tokens.
    Histogram::new(exponential_buckets(1.0, 4.0, 12))
}

/// Every series of one attempt label set, taken from the families once: an attempt then
/// touches atomics only. The series an attempt may not need are made on first use, so a label
/// set that never streamed has no time-to-first-token series.
struct AttemptSeries {
    labels: AttemptLabels,
    attempts: Counter,
    duration: Histogram,
    /// Input, then output.
    tokens: [OnceLock<Histogram>; 2],
    first_token: OnceLock<Histogram>,
    per_output_token: OnceLock<Histogram>,
}

/// Every metric, registered once; the per-attempt families are written from each log row.
/// The families written per request hold at most `metrics.max_label_sets` label sets each;
/// past that, new sets are counted in one `other` set and in `switchyard_metric_series_folded`.
pub struct Metrics {
    registry: Registry,
    series: SeriesCache<AttemptSeries>,
    failover_series: SeriesCache<Counter>,
    http_series: SeriesCache<Histogram>,
    http_duration: Histograms<HttpLabels>,
    folded: Family<FoldedLabels, Counter>,
    duration: Histograms<AttemptLabels>,
    tokens: Histograms<TokenLabels>,
    first_token: Histograms<AttemptLabels>,
    per_output_token: Histograms<AttemptLabels>,
    attempts: Family<AttemptLabels, Counter>,
    /// Scrape-time state, rebuilt on each scrape (one at a time).
    scrape: Mutex<()>,
    slot_state: Family<SlotLabels, Gauge>,
    cooldown_remaining: Family<SlotLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    slot_quota_used: Family<SlotLabels, Gauge>,
    key_quota_used: Family<KeyLabels, Gauge>,
    /// USD per key, source and model (for dashboards: the exact sums are the logs').
    cost: Family<CostLabels, UsdCounter>,
    cost_series: SeriesCache<UsdCounter>,
    /// Attempts of models without a price.
    unpriced: Family<CostLabels, Counter>,
    unpriced_series: SeriesCache<Counter>,
    budget_spent: Family<BudgetLabels, UsdGauge>,
    budget_limit: Family<BudgetLabels, UsdGauge>,
    in_flight: Gauge,
    source_in_flight: Family<SourceLabels, Gauge>,
    source_queued: Family<SourceLabels, Gauge>,
    failovers: Family<ModelLabels, Counter>,
    cache_requests: Family<CacheLabels, Counter>,
    cache_saved: Family<SavedLabels, Counter>,
    cache_saved_usd: UsdCounter,
    policy_decisions: Family<PolicyLabels, Counter>,
    journal_backlog: Gauge,
    pool_capacity: Family<AdapterLabels, Gauge>,
    pool_idle: Family<AdapterLabels, Gauge>,
    pool_in_use: Family<AdapterLabels, Gauge>,
    pool_instances: Family<AdapterLabels, Gauge>,
}

impl Metrics {
    /// The registry, with the plugin host's guest call durations in it.
    pub fn new(call_durations: CallDurations, max_label_sets: usize) -> Metrics {
        let mut registry = Registry::default();
        registry.register_with_unit(
            "switchyard_adapter_call_duration",
            "Time of each guest call, by adapter and call",
            Unit::Seconds,
            call_durations,
        );
        let duration: Histograms<AttemptLabels> = Family::new_with_constructor(seconds_histogram);
        registry.register_with_unit(
            "gen_ai_server_request_duration",
            "Time of each attempt at an upstream, to its last byte",
            Unit::Seconds,
            duration.clone(),
        );
        let tokens: Histograms<TokenLabels> = Family::new_with_constructor(tokens_histogram);
        registry.register("gen_ai_client_token_usage", "Tokens per attempt, input and output", tokens.clone());
        let first_token: Histograms<AttemptLabels> = Family::new_with_constructor(seconds_histogram);
        registry.register_with_unit(
            "gen_ai_server_time_to_first_token",
            "Time from sending a streamed request to its first chunk",
            Unit::Seconds,
            first_token.clone(),
        );
        let per_output_token: Histograms<AttemptLabels> = Family::new_with_constructor(seconds_histogram);
        registry.register_with_unit(
            "gen_ai_server_time_per_output_token",
            "Time per output token after the first, of streamed answers",
            Unit::Seconds,
            per_output_token.clone(),
        );
        let attempts = Family::<AttemptLabels, Counter>::default();
        registry.register("switchyard_attempts", "Attempts at upstreams, by outcome (error_type)", attempts.clone());
        let slot_state = Family::<SlotLabels, Gauge>::default();
        registry.register(
            "switchyard_slot_state",
            "Each (source, model): 0 ok, 1 cooling, 2 awaiting probe, 3 probing, 4 disabled",
            slot_state.clone(),
        );
        let cooldown_remaining = Family::<SlotLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register_with_unit(
            "switchyard_cooldown_remaining",
            "Time until a cooling slot recovers fully",
            Unit::Seconds,
            cooldown_remaining.clone(),
        );
        let slot_quota_used = Family::<SlotLabels, Gauge>::default();
        registry.register(
            "switchyard_slot_quota_used_tokens",
            "Tokens an AUTO slot with a quota used in its window",
            slot_quota_used.clone(),
        );
        let key_quota_used = Family::<KeyLabels, Gauge>::default();
        registry.register(
            "switchyard_key_quota_used_tokens",
            "Tokens a gateway key with a quota used in its window",
            key_quota_used.clone(),
        );
        let cost = Family::<CostLabels, UsdCounter>::default();
        registry.register("switchyard_cost_usd", "What answers cost in USD, by key, source and model", cost.clone());
        let unpriced = Family::<CostLabels, Counter>::default();
        registry.register(
            "switchyard_unpriced_attempts",
            "Answers of models without a price (their cost is unknown, not zero)",
            unpriced.clone(),
        );
        let budget_spent = Family::<BudgetLabels, UsdGauge>::default();
        registry.register(
            "switchyard_budget_spent_usd",
            "USD a key or group with a budget spent in its window (every replica's)",
            budget_spent.clone(),
        );
        let budget_limit = Family::<BudgetLabels, UsdGauge>::default();
        registry.register(
            "switchyard_budget_limit_usd",
            "The USD budget of a key or group per period",
            budget_limit.clone(),
        );
        let in_flight = Gauge::default();
        registry.register("switchyard_requests_in_flight", "Client requests being served", in_flight.clone());
        let source_in_flight = Family::<SourceLabels, Gauge>::default();
        registry.register(
            "switchyard_source_in_flight",
            "Places taken under each source's max_concurrent",
            source_in_flight.clone(),
        );
        let source_queued = Family::<SourceLabels, Gauge>::default();
        registry.register(
            "switchyard_source_queued",
            "Requests waiting for a place under each source's max_concurrent",
            source_queued.clone(),
        );
        let failovers = Family::<ModelLabels, Counter>::default();
        registry.register(
            "switchyard_failovers",
            "Requests served by a candidate after others failed",
            failovers.clone(),
        );
        let cache_requests = Family::<CacheLabels, Counter>::default();
        registry.register(
            "switchyard_cache_requests",
            "Requests the response cache was asked about, by result (hit, miss, bypass)",
            cache_requests.clone(),
        );
        let policy_decisions = Family::<PolicyLabels, Counter>::default();
        registry.register(
            "switchyard_policy_decisions",
            "What policies did other than allow, by policy, hook and action (rewrite, deny, failed_open, failed_closed)",
            policy_decisions.clone(),
        );
        let cache_saved = Family::<SavedLabels, Counter>::default();
        registry.register(
            "switchyard_cache_saved_tokens",
            "Tokens answered from the response cache instead of an upstream (input, output)",
            cache_saved.clone(),
        );
        let cache_saved_usd = UsdCounter::default();
        registry.register(
            "switchyard_cache_saved_usd",
            "What the answers given from the response cache cost when first asked upstream, in USD",
            cache_saved_usd.clone(),
        );
        let journal_backlog = Gauge::default();
        registry.register(
            "switchyard_state_journal_backlog",
            "Changes journaled and waiting for the database writer",
            journal_backlog.clone(),
        );
        let pool_capacity = Family::<AdapterLabels, Gauge>::default();
        registry.register(
            "switchyard_pool_capacity",
            "Sessions (requests in flight) each adapter's pool may hold",
            pool_capacity.clone(),
        );
        let pool_idle = Family::<AdapterLabels, Gauge>::default();
        registry.register("switchyard_pool_idle", "Warm instances of each adapter with no session", pool_idle.clone());
        let pool_in_use = Family::<AdapterLabels, Gauge>::default();
        registry.register("switchyard_pool_in_use", "Sessions open on each adapter's instances", pool_in_use.clone());
        let pool_instances = Family::<AdapterLabels, Gauge>::default();
        registry.register("switchyard_pool_instances", "Live instances of each adapter", pool_instances.clone());
        let http_duration: Histograms<HttpLabels> = Family::new_with_constructor(seconds_histogram);
        registry.register_with_unit(
            "http_server_request_duration",
            "Client requests at the API doors, to the end of the answer, by status and error type (refusals included)",
            Unit::Seconds,
            http_duration.clone(),
        );
        let folded = Family::<FoldedLabels, Counter>::default();
        registry.register(
            "switchyard_metric_series_folded",
            "Observations folded into a family's `other` label set because it held metrics.max_label_sets",
            folded.clone(),
        );
        let build = Family::<BuildLabels, Gauge>::default();
        build.get_or_create(&BuildLabels { version: env!("CARGO_PKG_VERSION") }).set(1);
        registry.register("switchyard_build_info", "The running version", build);
        Metrics {
            registry,
            series: SeriesCache::with_cap(max_label_sets),
            failover_series: SeriesCache::with_cap(max_label_sets),
            http_series: SeriesCache::with_cap(max_label_sets),
            http_duration,
            folded,
            duration,
            tokens,
            first_token,
            per_output_token,
            attempts,
            scrape: Mutex::new(()),
            slot_state,
            cooldown_remaining,
            slot_quota_used,
            key_quota_used,
            cost,
            cost_series: SeriesCache::with_cap(max_label_sets),
            unpriced,
            unpriced_series: SeriesCache::with_cap(max_label_sets),
            budget_spent,
            budget_limit,
            in_flight,
            source_in_flight,
            source_queued,
            failovers,
            cache_requests,
            cache_saved,
            cache_saved_usd,
            policy_decisions,
            journal_backlog,
            pool_capacity,
            pool_idle,
            pool_in_use,
            pool_instances,
        }
    }

    /// One attempt, as its log row records it. Its label set's handles are looked up once
    /// (lock-free, no allocation); after that an attempt touches atomics only.
    pub fn observe(&self, row: &LogRow, log: &LogContext, provider: &str) {
        let served = row.status == Some(200);
        let error = if served { "" } else { error_type(row.error.as_deref()) };
        let values = [log.operation, &log.requested_model, &row.model, provider, &row.source, error];
        let series = self.series.get(&values, || self.attempt_series(values)).unwrap_or_else(|| {
            self.fold("gen_ai_attempts");
            let other = [log.operation, OTHER, OTHER, OTHER, OTHER, error];
            self.series.get_or_insert(&other, || self.attempt_series(other))
        });
        series.attempts.inc();
        self.observe_cost(row);
        let total = row.total_ms as f64 / 1e3;
        series.duration.observe(total);
        if !served {
            return;
        }
        for (i, (kind, tokens)) in [("input", row.tokens_in), ("output", row.tokens_out)].into_iter().enumerate() {
            if let Some(tokens) = tokens {
                let histogram = series.tokens[i].get_or_init(|| {
                    let l = &series.labels;
                    let token_labels = TokenLabels {
                        gen_ai_token_type: kind,
                        gen_ai_operation_name: l.gen_ai_operation_name,
                        gen_ai_request_model: l.gen_ai_request_model.clone(),
                        gen_ai_response_model: l.gen_ai_response_model.clone(),
                        gen_ai_provider_name: l.gen_ai_provider_name.clone(),
                        source: l.source.clone(),
                    };
                    self.tokens.get_or_create(&token_labels).clone()
                });
                histogram.observe(tokens as f64);
            }
        }
        if row.stream
            && let Some(first) = row.first_byte_ms
        {
            let first = first as f64 / 1e3;
            series.first_token.get_or_init(|| self.first_token.get_or_create(&series.labels).clone()).observe(first);
            if let Some(out) = row.tokens_out.filter(|n| *n > 1) {
                let per_token = (total - first).max(0.0) / (out - 1) as f64;
                let histogram =
                    series.per_output_token.get_or_init(|| self.per_output_token.get_or_create(&series.labels).clone());
                histogram.observe(per_token);
            }
        }
    }

    /// The handles of one attempt label set: `[operation, requested, response model, provider,
    /// source, error type]`.
    fn attempt_series(&self, [operation, requested, model, provider, source, error]: [&str; 6]) -> AttemptSeries {
        let labels = AttemptLabels {
            gen_ai_operation_name: static_operation(operation),
            gen_ai_request_model: requested.to_string(),
            gen_ai_response_model: model.to_string(),
            gen_ai_provider_name: provider.to_string(),
            source: source.to_string(),
            error_type: error.to_string(),
        };
        AttemptSeries {
            attempts: self.attempts.get_or_create(&labels).clone(),
            duration: self.duration.get_or_create(&labels).clone(),
            labels,
            tokens: Default::default(),
            first_token: OnceLock::new(),
            per_output_token: OnceLock::new(),
        }
    }

    /// An attempt's cost, or its missing price, by key, source and model.
    fn observe_cost(&self, row: &LogRow) {
        let values = [row.key.as_str(), &row.source, &row.model];
        let labels = |[key, source, model]: [&str; 3]| CostLabels {
            key: key.to_string(),
            source: source.to_string(),
            model: model.to_string(),
        };
        if let Some(usd) = row.cost_usd {
            let counter = self.cost_series.get(&values, || self.cost.get_or_create(&labels(values)).clone());
            let counter = counter.unwrap_or_else(|| {
                self.fold("switchyard_cost_usd");
                self.cost_series.get_or_insert(&[OTHER; 3], || self.cost.get_or_create(&labels([OTHER; 3])).clone())
            });
            counter.inc_by(usd.as_f64());
        } else if row.cost_unknown {
            let counter = self.unpriced_series.get(&values, || self.unpriced.get_or_create(&labels(values)).clone());
            let counter = counter.unwrap_or_else(|| {
                self.fold("switchyard_unpriced_attempts");
                self.unpriced_series
                    .get_or_insert(&[OTHER; 3], || self.unpriced.get_or_create(&labels([OTHER; 3])).clone())
            });
            counter.inc();
        }
    }

    fn fold(&self, family: &'static str) {
        self.folded.get_or_create(&FoldedLabels { family }).inc();
    }

    fn budget(
        &self,
        scheduler: &crate::scheduler::Scheduler,
        account: &crate::domain::Account,
        budget: &crate::domain::Budget,
    ) {
        let name = match account {
            crate::domain::Account::KeyUsd(key) => format!("key:{key}"),
            crate::domain::Account::GroupUsd(group) => format!("group:{group}"),
            crate::domain::Account::Tokens(_) => return,
        };
        let labels = BudgetLabels { account: name, period: budget.period.to_string() };
        let spent = scheduler.key_used(account, budget.period).min(i64::MAX as u64) as i64;
        self.budget_spent.get_or_create(&labels).set(crate::domain::Usd::from_pico(spent).as_f64());
        self.budget_limit.get_or_create(&labels).set(budget.usd.as_f64());
    }

    /// A policy rewrote, refused or failed (see [`PolicyLabels`]).
    pub fn policy_decision(&self, policy: &str, hook: &'static str, action: &'static str) {
        self.policy_decisions.get_or_create(&PolicyLabels { policy: policy.to_string(), hook, action }).inc();
    }

    /// A request the response cache was asked about: `hit`, `miss` or `bypass`.
    pub fn cache_request(&self, result: &'static str) {
        self.cache_requests.get_or_create(&CacheLabels { result }).inc();
    }

    /// A hit's tokens and their first cost, which no upstream was paid for again.
    pub fn cache_saved(&self, input: u64, output: u64, pico: Option<i64>) {
        self.cache_saved.get_or_create(&SavedLabels { gen_ai_token_type: "input" }).inc_by(input);
        self.cache_saved.get_or_create(&SavedLabels { gen_ai_token_type: "output" }).inc_by(output);
        if let Some(pico) = pico.filter(|p| *p > 0) {
            self.cache_saved_usd.inc_by(crate::domain::Usd::from_pico(pico).as_f64());
        }
    }

    /// A request served after `failed` candidates failed before it.
    pub fn failed_over(&self, requested_model: &str, failed: usize) {
        if failed == 0 {
            return;
        }
        let make = |model: &str| {
            let labels = ModelLabels { gen_ai_request_model: model.to_string() };
            self.failovers.get_or_create(&labels).clone()
        };
        let counter = self.failover_series.get(&[requested_model], || make(requested_model)).unwrap_or_else(|| {
            self.fold("switchyard_failovers");
            self.failover_series.get_or_insert(&[OTHER], || make(OTHER))
        });
        counter.inc();
    }

    /// A client request at an API door, from its arrival to the end of its answer; the
    /// handle returned is observed when the answer ends.
    pub fn client_request(&self, method: &str, route: &str, status: u16, error_type: &str) -> Histogram {
        let status = status_label(status);
        let values = [method, route, status, error_type];
        let make = |[method, route, status, error_type]: [&str; 4]| {
            let labels = HttpLabels {
                http_request_method: method.to_string(),
                http_route: route.to_string(),
                http_response_status_code: status.to_string(),
                error_type: error_type.to_string(),
            };
            self.http_duration.get_or_create(&labels).clone()
        };
        let histogram = self.http_series.get(&values, || make(values)).unwrap_or_else(|| {
            self.fold("http_server_request_duration");
            let other = [OTHER, OTHER, status, error_type];
            self.http_series.get_or_insert(&other, || make(other))
        });
        Histogram::clone(&histogram)
    }

    /// The gauges read from the gateway's state now, then everything as Prometheus text.
    fn render(&self, gw: &Gateway, in_flight: i64) -> String {
        let _one_scrape = self.scrape.lock().unwrap_or_else(|p| p.into_inner());
        let runtime = gw.runtime();
        let config = &runtime.config;
        let scheduler = &gw.scheduler;
        let now = scheduler.now();
        let probe_after = scheduler.policy().cooldown.probe_after();
        for family in [&self.slot_state, &self.slot_quota_used] {
            family.clear();
        }
        self.cooldown_remaining.clear();
        self.key_quota_used.clear();
        self.budget_spent.clear();
        self.budget_limit.clear();
        self.source_in_flight.clear();
        self.source_queued.clear();
        for source in &config.sources {
            let held = runtime.provider.in_use(&source.name);
            let labels = SourceLabels { source: source.name.to_string() };
            self.source_in_flight.get_or_create(&labels).set(held as i64);
            self.source_queued.get_or_create(&labels).set(runtime.provider.queued(&source.name) as i64);
            for model in &source.models {
                let key = SlotKey { source: source.name.clone(), model: model.name.clone() };
                let labels = SlotLabels { source: key.source.to_string(), model: key.model.clone() };
                let health = scheduler.health_of(&key).unwrap_or_default();
                let state = match (health.admission(now, source.max_concurrent, probe_after), health.probes_in_flight) {
                    _ if !source.enabled => 4,
                    (_, n) if n > 0 && n <= probe_budget(source.max_concurrent) => 3,
                    (Admission::Healthy, _) => 0,
                    (Admission::Probe, _) => 2,
                    (Admission::Closed, _) => 1,
                };
                self.slot_state.get_or_create(&labels).set(state);
                if let Some(until) = health.window.and_then(|w| w.until).filter(|u| u.0 > now.0) {
                    self.cooldown_remaining.get_or_create(&labels).set(until.since(now).as_secs_f64());
                }
                for period in crate::router::quota_periods(config, &key) {
                    self.slot_quota_used.get_or_create(&labels).set(scheduler.quota_used(&key, period) as i64);
                }
            }
        }
        let keys = config.keys.iter().cloned().chain(config.runtime_keys.iter().map(|k| k.as_key_config()));
        for key in keys {
            if let Some(quota) = key.quota() {
                let used = scheduler.key_used(&crate::domain::Account::Tokens(key.name.clone()), quota.period) as i64;
                let labels = KeyLabels { key: key.name.to_string(), period: quota.period.to_string() };
                self.key_quota_used.get_or_create(&labels).set(used);
            }
            if let Some(budget) = key.budget {
                self.budget(scheduler, &crate::domain::Account::KeyUsd(key.name.clone()), &budget);
            }
        }
        for group in &config.budgets {
            self.budget(scheduler, &crate::domain::Account::GroupUsd(group.group.clone()), &group.budget());
        }
        self.in_flight.set(in_flight);
        self.journal_backlog.set(gw.state.backlog() as i64);
        self.pool_capacity.clear();
        self.pool_idle.clear();
        self.pool_in_use.clear();
        self.pool_instances.clear();
        for adapter in gw.plugins.adapters() {
            let pool = adapter.pool_stats();
            let labels = AdapterLabels { adapter: adapter.name().to_string() };
            self.pool_capacity.get_or_create(&labels).set(pool.capacity as i64);
            self.pool_idle.get_or_create(&labels).set(pool.idle as i64);
            self.pool_in_use.get_or_create(&labels).set(pool.sessions as i64);
            self.pool_instances.get_or_create(&labels).set(pool.instances as i64);
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("writing to a String");
        text
    }
}

/// The error codes a label may carry: the gateway's own and the upstream codes clients act on.
/// An upstream's other codes (any string it likes) are `other`, so they cannot grow the series.
const ERROR_TYPES: &[&str] = &[
    "bad_request",
    "upstream_auth",
    "upstream_permission",
    "upstream_not_found",
    "rate_limited",
    "insufficient_quota",
    "overloaded",
    "upstream_server_error",
    "content_policy_violation",
    "invalid_upstream_response",
    "stream_truncated",
    "unsupported",
    "upstream_unreachable",
    "upstream_timeout",
    "gateway_full",
    "client_closed",
    "context_length_exceeded",
    "content_filter",
    "adapter_error",
    "upstream_error",
];

/// The label value every set past a family's cap is folded into.
const OTHER: &str = "other";

/// The operation names attempts are made under (a fixed set); anything else reads `other`.
fn static_operation(name: &str) -> &'static str {
    ["chat", "embeddings", "generate_content", "count_tokens"].into_iter().find(|op| *op == name).unwrap_or(OTHER)
}

/// A status code as a label: one of the codes HTTP defines (100–599), else `other`.
fn status_label(status: u16) -> &'static str {
    static CODES: std::sync::LazyLock<Box<[String]>> =
        std::sync::LazyLock::new(|| (100..600).map(|code: u16| code.to_string()).collect());
    if (100..600).contains(&status) { &CODES[usize::from(status - 100)] } else { OTHER }
}

fn error_type(code: Option<&str>) -> &'static str {
    code.and_then(|code| ERROR_TYPES.iter().find(|known| **known == code)).copied().unwrap_or("other")
}

/// `GET /metrics` on the main listener: for scrapers with the metrics token or the admin
/// token. Being on loopback proves nothing there: a proxy on the same host makes every
/// internet client a loopback peer.
pub async fn scrape(
    State(gw): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(e) = authorize(&gw, &headers, peer.ip()) {
        return e.into_response();
    }
    answer(&gw)
}

/// `GET /metrics` on `metrics.listen`, an address the operator chose for scraping: no token
/// needed unless `metrics.token` is set. Without a token, a forwarded request (a proxy in
/// front) is refused, and `Host` must be an IP literal, `localhost` or one of `metrics.hosts`
/// (a web page that rebinds its own name to this address sends its name).
pub async fn scrape_own_listener(
    State(gw): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    let config = &gw.settings.metrics;
    if config.token.is_some() {
        if let Err(e) = authorize(&gw, &headers, peer.ip()) {
            return e.into_response();
        }
    } else if let Err(why) = tokenless_scrape_allowed(&headers, uri.authority().map(|a| a.as_str()), &config.hosts) {
        return ApiError::new(StatusCode::FORBIDDEN, ErrorType::Permission, why).code("scrape_refused").into_response();
    }
    answer(&gw)
}

/// The metrics token or the admin token, with wrong guesses throttled per client address (a
/// throttled address is turned away before any token is compared).
fn authorize(gw: &Gateway, headers: &HeaderMap, peer: std::net::IpAddr) -> Result<(), ApiError> {
    let bearer =
        headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let sent = bearer.is_some() || headers.contains_key("x-admin-token");
    let (client, now) = (super::throttle::client_of(peer, headers), gw.scheduler.now());
    if sent && let Some(wait) = gw.auth_failures.wait(client, now) {
        return Err(super::throttle::turned_away(wait));
    }
    let digest = |s: &str| <sha2::Sha256 as sha2::Digest>::digest(s.trim().as_bytes());
    let metrics_token = gw.settings.metrics.token.as_ref();
    if let (Some(token), Some(sent)) = (metrics_token, bearer)
        && digest(sent) == digest(token.expose())
    {
        return Ok(());
    }
    if super::admin::authenticate(gw, headers, None).is_ok() {
        return Ok(());
    }
    if sent {
        gw.auth_failures.failed(client, now);
    }
    Err(ApiError::new(
        StatusCode::UNAUTHORIZED,
        ErrorType::Authentication,
        "/metrics needs `Authorization: Bearer` with metrics.token or the admin token (or scrape it on metrics.listen)",
    ))
}

/// Why a scrape without a token is refused, if it is.
fn tokenless_scrape_allowed(headers: &HeaderMap, authority: Option<&str>, hosts: &[String]) -> Result<(), String> {
    for forwarded in
        ["forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip", "via", "cf-connecting-ip", "true-client-ip"]
    {
        if headers.contains_key(forwarded) {
            return Err(format!(
                "a forwarded request (`{forwarded}`) cannot scrape /metrics without a token: set metrics.token"
            ));
        }
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).or(authority).unwrap_or("");
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let known = name.parse::<std::net::IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || hosts.iter().any(|h| h.eq_ignore_ascii_case(name));
    if known {
        Ok(())
    } else {
        Err(format!("Host `{}` is not this scrape address: add it to metrics.hosts", crate::logsafe::Escaped(name)))
    }
}

fn answer(gw: &Gateway) -> Response {
    let taken = (gw.settings.server.max_in_flight as usize).saturating_sub(gw.in_flight.available_permits()) as i64;
    let text = gw.metrics.render(gw, taken);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (axum::http::HeaderName::from_static(k), v.parse().unwrap())).collect()
    }

    #[test]
    fn a_tokenless_scrape_needs_a_known_host_and_no_proxy_in_front() {
        let hosts = vec!["metrics.internal".to_string()];
        for ok in ["127.0.0.1:9090", "10.0.0.5", "[::1]:9090", "localhost:9090", "METRICS.internal:9090"] {
            assert!(tokenless_scrape_allowed(&headers(&[("host", ok)]), None, &hosts).is_ok(), "{ok}");
        }
        for refused in ["evil.example:9090", "", "localhost.evil.example"] {
            assert!(tokenless_scrape_allowed(&headers(&[("host", refused)]), None, &hosts).is_err(), "{refused}");
        }
        let forwarded = headers(&[("host", "127.0.0.1:9090"), ("x-forwarded-for", "198.51.100.1")]);
        assert!(tokenless_scrape_allowed(&forwarded, None, &hosts).unwrap_err().contains("x-forwarded-for"));
        // HTTP/2 names the host in the authority, not a Host header.
        assert!(tokenless_scrape_allowed(&HeaderMap::new(), Some("127.0.0.1:9464"), &hosts).is_ok());
        assert!(tokenless_scrape_allowed(&HeaderMap::new(), Some("evil.example:9464"), &hosts).is_err());
    }

    #[test]
    fn status_codes_are_labels_only_within_http_range() {
        assert_eq!(
            (status_label(200), status_label(599), status_label(600), status_label(42)),
            ("200", "599", OTHER, OTHER)
        );
    }
}
