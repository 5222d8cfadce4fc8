//! Replicas sharing one state through a real `redis-server` (`shared_state:`): two gateway
//! processes (the real binary) on the same scripted upstreams. A cooling source, a key's quota,
//! an rpm window, the one probe, affinity bindings, runtime edits and uploaded adapters hold
//! across both; without Redis both keep serving and share again once it is back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::support::binary::Binary;
use crate::support::mock::CHAT_JSON;
use crate::support::redis::RedisServer;
use crate::support::{KEY, chat_body};

const ADMIN: &str = "replica-tests-admin-token-0123456789abcdef";
/// A key with a token quota of 30 an hour: one fixture answer (21 tokens) fits, two do not.
const CAPPED: &str = "sk-capped-replica-key-0123456789";
/// A key with a budget of $0.03 a day: at $1000 per 1M tokens one fixture answer costs $0.021.
const BUDGETED: &str = "sk-budgeted-replica-key-0123456";
const PRICED: &str = "prices: [{model: m, input: '1000', output: '1000'}]";
/// How long a condition the replicas should reach may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(20);

const OK: u8 = 0;
const FAIL: u8 = 1;
const HOLD: u8 = 2;

/// An OpenAI-compatible upstream that answers the chat fixture, fails with 500 or holds each
/// request until released, as the test says; it counts what reaches it.
struct Upstream {
    url: String,
    mode: Arc<AtomicU8>,
    hits: Arc<AtomicUsize>,
    release: Arc<Semaphore>,
}

#[derive(Clone)]
struct UpstreamState {
    mode: Arc<AtomicU8>,
    hits: Arc<AtomicUsize>,
    release: Arc<Semaphore>,
}

impl Upstream {
    async fn start() -> Upstream {
        let state = UpstreamState {
            mode: Arc::new(AtomicU8::new(OK)),
            hits: Arc::new(AtomicUsize::new(0)),
            release: Arc::new(Semaphore::new(0)),
        };
        let app = Router::new().route("/v1/chat/completions", post(answer)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Upstream { url, mode: state.mode, hits: state.hits, release: state.release }
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

async fn answer(State(state): State<UpstreamState>) -> Response {
    state.hits.fetch_add(1, Ordering::SeqCst);
    match state.mode.load(Ordering::SeqCst) {
        FAIL => (StatusCode::INTERNAL_SERVER_ERROR, "upstream exploded").into_response(),
        mode => {
            if mode == HOLD {
                state.release.acquire().await.unwrap().forget();
            }
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], CHAT_JSON).into_response()
        }
    }
}

/// One replica's config: sources `first` (on `up1`) and `second` (on `up2`) serving model `m`
/// in the order given, and `extra` settings.
fn config(redis: &RedisServer, name: &str, prefix: &str, sources: &[(&str, &Upstream)], extra: &str) -> String {
    let mut yaml = format!(
        "admin_token: {ADMIN}\nchannel_selection: order\nshared_state: {{url: \"{}\", replica: {name}, sync_ms: 50, prefix: {prefix}}}\n{extra}\nsources:\n",
        redis.url()
    );
    for (source, upstream) in sources {
        yaml.push_str(&format!(
            "  - {{name: {source}, base_url: \"{}\", api_key: sk-upstream-secret-0123456789, models: [{{name: m}}]}}\n",
            upstream.url
        ));
    }
    yaml
}

fn keys() -> String {
    format!(
        "  - {{name: tester, key: {KEY}, models: ['*']}}\n  - {{name: capped, key: {CAPPED}, models: ['*'], token_quota: 30, period: hour}}\n  - {{name: budgeted, key: {BUDGETED}, models: ['*'], budget: {{usd: '0.03', period: day}}}}\n"
    )
}

/// A fresh Redis name prefix, so tests sharing nothing cannot meet in one server.
fn prefix() -> String {
    format!("t{}", std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos())
}

struct Pair {
    a: Binary,
    b: Binary,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn pair(redis: &RedisServer, a_sources: &[(&str, &Upstream)], b_sources: &[(&str, &Upstream)], extra: &str) -> Pair {
    pair_edited(redis, a_sources, b_sources, extra, |yaml| yaml)
}

/// Two replicas, each config passed through `edit` before it is written.
fn pair_edited(
    redis: &RedisServer,
    a_sources: &[(&str, &Upstream)],
    b_sources: &[(&str, &Upstream)],
    extra: &str,
    edit: impl Fn(String) -> String,
) -> Pair {
    let prefix = prefix();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Binary::start_with_keys(da.path(), &keys(), &edit(config(redis, "a", &prefix, a_sources, extra)));
    let b = Binary::start_with_keys(db.path(), &keys(), &edit(config(redis, "b", &prefix, b_sources, extra)));
    Pair { a, b, _dirs: (da, db) }
}

async fn admin(gw: &Binary, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
    let mut request = reqwest::Client::new().request(method, format!("{}{path}", gw.url)).bearer_auth(ADMIN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// Two replicas, `a` and `b`, of the shipped settings (the default sync interval) with one
/// source, sharing state through `redis` under a prefix of their own.
struct Shipped {
    a: Binary,
    b: Binary,
    dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Shipped {
    fn start(redis: &RedisServer, up: &Upstream) -> Shipped {
        let prefix = prefix();
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let config = |name: &str| {
            format!(
                "admin_token: {ADMIN}\nshared_state: {{url: \"{}\", replica: {name}, prefix: {prefix}}}\nsources:\n  - {{name: first, base_url: \"{}\", models: [{{name: m}}]}}\n",
                redis.url(),
                up.url
            )
        };
        let a = Binary::start_with_keys(da.path(), &keys(), &config("a"));
        let b = Binary::start_with_keys(db.path(), &keys(), &config("b"));
        Shipped { a, b, dirs: (da, db) }
    }
}

async fn health(gw: &Binary) -> Value {
    admin(gw, reqwest::Method::GET, "/admin/api/health", None).await.1
}

fn slot_state(health: &Value, source: &str) -> String {
    let slots = health["slots"].as_array().unwrap();
    let slot = slots.iter().find(|s| s["source"] == source && s["model"] == "m").expect("the slot is listed");
    slot["state"].as_str().unwrap().to_string()
}

/// Waits until `check` holds, failing the test after `PATIENCE`.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + PATIENCE;
    while !check().await {
        assert!(Instant::now() < deadline, "waited {PATIENCE:?} for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits for two more completed exchanges of `gw` with Redis: whatever it had to send before
/// the call has been sent, and what Redis held then has been read.
async fn synced(gw: &Binary) {
    let syncs = |h: &Value| h["replica"]["syncs"].as_u64().expect("the replica's status");
    let before = syncs(&health(gw).await);
    until("two exchanges with Redis", || async { syncs(&health(gw).await) >= before + 2 }).await;
}

/// A chat for model `m` with `key`: the status and the source that served it.
async fn chat(gw: &Binary, key: &str, body: &Value) -> (u16, String, Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let source = response.headers().get("x-switchyard-source").map_or(String::new(), |v| v.to_str().unwrap().into());
    (status, source, response.json().await.unwrap_or(Value::Null))
}

async fn served_by(gw: &Binary) -> String {
    let (status, source, body) = chat(gw, KEY, &chat_body("m", false)).await;
    assert_eq!(status, 200, "{body}");
    source
}

#[tokio::test]
async fn a_source_failing_through_one_replica_is_skipped_by_the_other() {
    let redis = RedisServer::start();
    let (up1, up2) = (Upstream::start().await, Upstream::start().await);
    let sources = [("first", &up1), ("second", &up2)];
    let p = pair(&redis, &sources, &sources, "");
    up1.set(FAIL);

    assert_eq!(served_by(&p.a).await, "second", "A fails over");
    assert_eq!(up1.hits(), 1);
    until("B knows `first` cools", || async { slot_state(&health(&p.b).await, "first") == "cooling" }).await;
    assert_eq!(served_by(&p.b).await, "second");
    assert_eq!(up1.hits(), 1, "B never tried the failing source");

    // Each replica's log rows and stats name it.
    let (_, logs) = admin(&p.a, reqwest::Method::GET, "/admin/api/logs", None).await;
    let rows = logs["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{logs}");
    assert!(rows.iter().all(|r| r["replica"] == "a"), "{logs}");
    let (_, logs) = admin(&p.b, reqwest::Method::GET, "/admin/api/logs?replica=b", None).await;
    assert_eq!(logs["total"], 1, "{logs}");
    let (_, stats) = admin(&p.b, reqwest::Method::GET, "/admin/api/stats", None).await;
    assert_eq!(stats["replica"]["name"], "b", "{stats}");
    assert_eq!(stats["replica"]["reachable"], true, "{stats}");
}

#[tokio::test]
async fn a_keys_quota_and_a_sources_rpm_hold_across_both_replicas() {
    let redis = RedisServer::start();
    let (up1, up2) = (Upstream::start().await, Upstream::start().await);
    let sources = [("first", &up1)];
    let p = pair(&redis, &sources, &sources, "");
    let capped = chat_body("m", false);

    let (status, _, body) = chat(&p.a, CAPPED, &capped).await;
    assert_eq!(status, 200, "{body}");
    synced(&p.a).await;
    synced(&p.b).await;
    let (_, key) = admin(&p.b, reqwest::Method::GET, "/admin/api/keys/capped", None).await;
    assert_eq!(key["used"], 21, "B counts what A spent: {key}");
    let (status, _, body) = chat(&p.b, CAPPED, &capped).await;
    assert_eq!(status, 200, "21 of 30 used: one more call is admitted ({body})");
    synced(&p.b).await;
    synced(&p.a).await;
    for gw in [&p.a, &p.b] {
        let (status, _, body) = chat(gw, CAPPED, &capped).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "key_quota_exceeded", "{body}");
    }
    assert_eq!(up1.hits(), 2);
    drop(p);

    // `first` takes 3 requests a minute, whichever replica starts them.
    let sources = [("first", &up2)];
    let p = pair_edited(&redis, &sources, &sources, "", |yaml| {
        yaml.replace("models: [{name: m}]", "rpm: 3, models: [{name: m}]")
    });
    assert_eq!(served_by(&p.a).await, "first");
    assert_eq!(served_by(&p.a).await, "first");
    synced(&p.a).await;
    synced(&p.b).await;
    assert_eq!(served_by(&p.b).await, "first", "the third request of the minute");
    synced(&p.b).await;
    synced(&p.a).await;
    for gw in [&p.a, &p.b] {
        let (status, _, body) = chat(gw, KEY, &chat_body("m", false)).await;
        assert_ne!(status, 200, "the minute's 3 requests are spent across both: {body}");
    }
    assert_eq!(up2.hits(), 3);
}

#[tokio::test]
async fn a_keys_budget_holds_across_both_replicas() {
    let redis = RedisServer::start();
    let up = Upstream::start().await;
    let sources = [("first", &up)];
    let p = pair(&redis, &sources, &sources, PRICED);
    let ask = chat_body("m", false);
    let (status, _, body) = chat(&p.a, BUDGETED, &ask).await;
    assert_eq!(status, 200, "{body}");
    synced(&p.a).await;
    synced(&p.b).await;
    let (_, key) = admin(&p.b, reqwest::Method::GET, "/admin/api/keys/budgeted", None).await;
    assert_eq!(key["budget"]["spent_usd"], "0.021", "B counts what A spent: {key}");
    let (status, _, body) = chat(&p.b, BUDGETED, &ask).await;
    assert_eq!(status, 200, "$0.021 of $0.03 spent: one more call is admitted ({body})");
    synced(&p.b).await;
    synced(&p.a).await;
    for gw in [&p.a, &p.b] {
        let (status, _, body) = chat(gw, BUDGETED, &ask).await;
        assert_eq!(status, 429, "{body}");
        assert_eq!(body["error"]["code"], "budget_exceeded", "{body}");
        let (_, budgets) = admin(gw, reqwest::Method::GET, "/admin/api/budgets", None).await;
        assert_eq!(budgets["keys"][0]["spent_usd"], "0.042", "both replicas' spend: {budgets}");
    }
    assert_eq!(up.hits(), 2);
}

#[tokio::test]
async fn a_replica_stopped_between_syncs_sends_its_last_counts_first() {
    let redis = RedisServer::start();
    let up1 = Upstream::start().await;
    let sources = [("first", &up1)];
    // A exchanges only every second: its last request's tokens would wait for the next sync.
    let mut p = pair_edited(&redis, &sources, &sources, "", |yaml| {
        if yaml.contains("replica: a,") { yaml.replace("sync_ms: 50", "sync_ms: 1000") } else { yaml }
    });
    let (status, _, body) = chat(&p.a, CAPPED, &chat_body("m", false)).await;
    assert_eq!(status, 200, "{body}");
    assert!(p.a.terminate(), "A stops cleanly");
    synced(&p.b).await;
    let (_, key) = admin(&p.b, reqwest::Method::GET, "/admin/api/keys/capped", None).await;
    assert_eq!(key["used"], 21, "A's last 21 tokens reached B as it stopped: {key}");
}

#[tokio::test]
async fn a_replica_restarted_on_an_empty_redis_sends_the_usage_its_database_kept() {
    let mut redis = RedisServer::start();
    let up1 = Upstream::start().await;
    let sources = [("first", &up1)];
    let prefix = prefix();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a_config = config(&redis, "a", &prefix, &sources, "");
    let mut a = Binary::start_with_keys(da.path(), &keys(), &a_config);
    let b = Binary::start_with_keys(db.path(), &keys(), &config(&redis, "b", &prefix, &sources, ""));
    assert_eq!(chat(&a, CAPPED, &chat_body("m", false)).await.0, 200);
    assert!(a.terminate());
    // Redis loses everything (no persistence); A comes back on its own database.
    redis.restart();
    let a = Binary::start_with_keys(da.path(), &keys(), &a_config);
    synced(&a).await;
    synced(&b).await;
    let (_, key) = admin(&b, reqwest::Method::GET, "/admin/api/keys/capped", None).await;
    assert_eq!(key["used"], 21, "A's usage from its SQLite reached B again: {key}");
    let (_, key) = admin(&a, reqwest::Method::GET, "/admin/api/keys/capped", None).await;
    assert_eq!(key["used"], 21, "and A does not count it twice: {key}");
}

#[tokio::test]
async fn one_probe_is_admitted_across_both_replicas() {
    let redis = RedisServer::start();
    let (up1, up2) = (Upstream::start().await, Upstream::start().await);
    let sources = [("first", &up1), ("second", &up2)];
    // A long window whose probe is due 100 ms after it opens.
    let p = pair(&redis, &sources, &sources, "cooldown: {transient_base_ms: 600000, probe_after_ms: 100}");
    up1.set(FAIL);
    assert_eq!(served_by(&p.a).await, "second");
    for gw in [&p.a, &p.b] {
        until("the probe is due", || async { slot_state(&health(gw).await, "first") == "awaiting probe" }).await;
    }

    up1.set(HOLD);
    let a = p.a.url.clone();
    let probe = tokio::spawn(async move {
        let response = reqwest::Client::new()
            .post(format!("{a}/v1/chat/completions"))
            .bearer_auth(KEY)
            .json(&chat_body("m", false))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.headers()["x-switchyard-source"].to_str().unwrap().to_string())
    });
    until("A's probe reaches `first`", || async { up1.hits() == 2 }).await;
    assert_eq!(served_by(&p.b).await, "second", "B's scheduler would probe too, but A holds the one probe");
    assert_eq!(up1.hits(), 2, "one probe across both replicas");

    up1.set(OK);
    up1.release.add_permits(1);
    assert_eq!(probe.await.unwrap(), (200, "first".to_string()));
    until("B learns the probe healed `first`", || async { slot_state(&health(&p.b).await, "first") == "healthy" })
        .await;
    assert_eq!(served_by(&p.b).await, "first");
}

#[tokio::test]
async fn an_affinity_binding_made_on_one_replica_routes_the_next_turn_on_the_other() {
    let redis = RedisServer::start();
    let (up1, up2) = (Upstream::start().await, Upstream::start().await);
    // The replicas list the sources in opposite orders: without the binding, B would answer
    // the next turn from `first`.
    let p = pair(&redis, &[("second", &up2), ("first", &up1)], &[("first", &up1), ("second", &up2)], "");
    let turn = json!({"model": "m", "messages": [{"role": "user", "content": "hello"}]});
    let (status, source, body) = chat(&p.a, KEY, &turn).await;
    assert_eq!((status, source.as_str()), (200, "second"), "{body}");
    let said = body["choices"][0]["message"]["content"].clone();
    synced(&p.a).await;
    synced(&p.b).await;

    let next = json!({"model": "m", "messages": [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": said},
        {"role": "user", "content": "and then?"}]});
    let (status, source, body) = chat(&p.b, KEY, &next).await;
    assert_eq!((status, source.as_str()), (200, "second"), "B follows A's binding: {body}");
    let (_, logs) = admin(&p.b, reqwest::Method::GET, "/admin/api/logs", None).await;
    assert_eq!(logs["rows"][0]["affinity_hit"], true, "{logs}");
    let (status, source, _) = chat(&p.b, KEY, &turn).await;
    assert_eq!((status, source.as_str()), (200, "first"), "a new conversation takes B's own order");
}

#[tokio::test]
async fn runtime_edits_and_uploaded_adapters_reach_the_other_replica_and_a_revoked_key_is_refused_within_a_second() {
    let redis = RedisServer::start();
    let up1 = Upstream::start().await;
    // The default sync interval: the second asked for holds with what ships.
    let Shipped { a, b, dirs: _dirs } = Shipped::start(&redis, &up1);

    // A key made on A works on B.
    let (status, made) =
        admin(&a, reqwest::Method::POST, "/admin/api/keys", Some(json!({"name": "temp", "models": ["*"]}))).await;
    assert_eq!(status, 201, "{made}");
    let temp = made["key"].as_str().unwrap().to_string();
    until("B accepts the new key", || async { chat(&b, &temp, &chat_body("m", false)).await.0 == 200 }).await;

    // Revoked on A: refused by B within a second.
    let (status, _) = admin(&a, reqwest::Method::DELETE, "/admin/api/keys/temp", None).await;
    assert_eq!(status, 204);
    let revoked = Instant::now();
    loop {
        let (status, _, body) = chat(&b, &temp, &chat_body("m", false)).await;
        if status == 401 {
            assert_eq!(body["error"]["type"], "authentication_error", "{body}");
            break;
        }
        assert!(revoked.elapsed() < Duration::from_secs(1), "B still served the revoked key after a second");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("a key revoked on A was refused by B after {:?}", revoked.elapsed());

    // An adapter uploaded on A and a source on A using it: B installs the one and serves the other.
    let script = include_str!("../../adapters-lua-compat/scripts/openai.lua");
    let response = reqwest::Client::new()
        .put(format!("{}/admin/api/adapters/team-openai", a.url))
        .bearer_auth(ADMIN)
        .body(script)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let source = json!({"name": "scripted", "adapter": "team-openai", "base_url": up1.url,
        "models": [{"name": "lua-m", "upstream": "m"}]});
    let (status, body) = admin(&a, reqwest::Method::POST, "/admin/api/sources", Some(source)).await;
    assert_eq!(status, 201, "{body}");
    until("B serves the new source through the uploaded adapter", || async {
        chat(&b, KEY, &chat_body("lua-m", false)).await.1 == "scripted"
    })
    .await;
    let (_, adapters) = admin(&b, reqwest::Method::GET, "/admin/api/adapters", None).await;
    assert!(adapters.to_string().contains("team-openai"), "{adapters}");
}

#[tokio::test]
async fn both_replicas_keep_serving_without_redis_and_share_again_when_it_returns() {
    let mut redis = RedisServer::start();
    let (up1, up2) = (Upstream::start().await, Upstream::start().await);
    let sources = [("first", &up1), ("second", &up2)];
    let prefix = prefix();
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Binary::start_with_keys(da.path(), &keys(), &config(&redis, "a", &prefix, &sources, ""));
    // B refuses quota-spending requests while Redis is away; A serves them (the default).
    let b_config = config(&redis, "b", &prefix, &sources, "");
    let b = Binary::start_with_keys(
        db.path(),
        &keys(),
        &b_config.replace("sync_ms: 50,", "sync_ms: 50, quotas_when_down: closed,"),
    );
    synced(&a).await;
    synced(&b).await;

    redis.kill();
    for gw in [&a, &b] {
        until("the replica notices Redis is gone", || async { health(gw).await["replica"]["reachable"] == false })
            .await;
        assert_eq!(served_by(gw).await, "first", "served from its own state");
    }
    assert_eq!(chat(&a, CAPPED, &chat_body("m", false)).await.0, 200, "quotas_when_down: open");
    let (status, _, body) = chat(&b, CAPPED, &chat_body("m", false)).await;
    assert_eq!(status, 503, "quotas_when_down: closed ({body})");
    assert_eq!(body["error"]["code"], "shared_state_unreachable", "{body}");

    // A key made and a source failing on A while Redis is away: B learns both once it is back.
    let (status, made) =
        admin(&a, reqwest::Method::POST, "/admin/api/keys", Some(json!({"name": "offline", "models": ["*"]}))).await;
    assert_eq!(status, 201, "{made}");
    let offline = made["key"].as_str().unwrap().to_string();
    assert_eq!(chat(&b, &offline, &chat_body("m", false)).await.0, 401, "not on B while Redis is away");
    up1.set(FAIL);
    assert_eq!(served_by(&a).await, "second");
    let failed_hits = up1.hits();
    redis.restart();
    for gw in [&a, &b] {
        until("the replica is back in touch", || async { health(gw).await["replica"]["reachable"] == true }).await;
    }
    until("B learns what A saw while Redis was away", || async { slot_state(&health(&b).await, "first") == "cooling" })
        .await;
    assert_eq!(served_by(&b).await, "second");
    assert_eq!(up1.hits(), failed_hits, "B skipped the source A found failing");
    assert_eq!(chat(&b, CAPPED, &chat_body("m", false)).await.0, 200, "quotas are spent again");
    until("B takes the key A made while Redis was away", || async {
        chat(&b, &offline, &chat_body("m", false)).await.0 == 200
    })
    .await;
}

#[test]
fn a_bad_shared_state_is_named_with_its_field_and_fix_and_never_shows_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let yaml = format!(
        "data_dir: {}\nshared_state: {{url: \"http://gw:hunter2-secret@redis.internal:6379/0\", sync_ms: 5, quotas_when_down: maybe}}\n",
        dir.path().display()
    );
    std::fs::write(&file, yaml).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["check", "--config", &file.display().to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("shared_state.quotas_when_down: unknown variant `maybe`"), "{err}");
    std::fs::write(
        &file,
        format!(
            "data_dir: {}\nshared_state: {{url: \"http://gw:hunter2-secret@redis.internal:6379/0\", sync_ms: 5}}\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["check", "--config", &file.display().to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("shared_state.url: `…redis.internal:6379/0` is not a redis:// or rediss:// URL"), "{err}");
    assert!(err.contains("shared_state.sync_ms: must be a whole number from 20 to 1000, not 5"), "{err}");
    assert!(!err.contains("hunter2"), "the password stays out of the message: {err}");
}

#[tokio::test]
async fn a_cached_answer_is_shared_by_both_replicas_and_a_bad_or_absent_redis_is_a_miss() {
    let mut redis = RedisServer::start();
    let up = Upstream::start().await;
    let sources = [("first", &up)];
    let cached = |yaml: String| yaml.replace("models: [{name: m}]}", "cache: true, models: [{name: m}]}");
    let p = pair_edited(&redis, &sources, &sources, "cache: {ttl_seconds: 300}", cached);
    let ask = |text: &str| json!({"model": "m", "messages": [{"role": "user", "content": text}]});
    let cache_says = |gw: &Binary, text: &str| {
        let request = reqwest::Client::new().post(format!("{}/v1/chat/completions", gw.url)).bearer_auth(KEY);
        let body = ask(text);
        async move {
            let response = request.json(&body).send().await.unwrap();
            assert_eq!(response.status(), 200);
            response.headers()["x-switchyard-cache"].to_str().unwrap().to_string()
        }
    };
    let shared_entries = |gw: &Binary| {
        let gw_url = gw.url.clone();
        async move {
            let response = reqwest::Client::new()
                .get(format!("{gw_url}/admin/api/cache"))
                .bearer_auth(ADMIN)
                .send()
                .await
                .unwrap();
            response.json::<Value>().await.unwrap()["shared"]["entries"].as_u64().unwrap_or(0)
        }
    };

    assert_eq!(cache_says(&p.a, "one").await, "miss");
    until("A's entry reaches Redis", || async { shared_entries(&p.a).await == 1 }).await;
    assert_eq!(cache_says(&p.b, "one").await, "hit", "B answers with what A kept");
    assert_eq!(up.hits(), 1);

    // An entry that does not read is a miss, never an error (and the fresh answer replaces it).
    assert_eq!(cache_says(&p.a, "two").await, "miss");
    until("the second entry reaches Redis", || async { shared_entries(&p.a).await == 2 }).await;
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let entries: Vec<String> = redis::cmd("KEYS").arg("*:cache:e:*").query_async(&mut conn).await.unwrap();
    for key in &entries {
        let _: () = redis::cmd("SET").arg(key).arg("not an entry").query_async(&mut conn).await.unwrap();
    }
    assert_eq!(cache_says(&p.b, "two").await, "miss");
    assert_eq!(up.hits(), 3);

    // Without Redis a replica still serves: a miss, then its own entry.
    redis.kill();
    assert_eq!(cache_says(&p.b, "three").await, "miss");
    assert_eq!(cache_says(&p.b, "three").await, "hit");
    assert_eq!(up.hits(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_uploaded_on_one_replica_acts_on_the_other() {
    let redis = RedisServer::start();
    let up = Upstream::start().await;
    let Shipped { a, b, dirs: (_da, db) } = Shipped::start(&redis, &up);
    let greedy = json!({"model": "m", "max_tokens": 500, "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(chat(&b, KEY, &greedy).await.0, 200);

    // The limits component uploaded on A as a global policy, then given its cap there.
    let wasm = std::fs::read(crate::support::gateway::guest_wasm("limits")).unwrap();
    let uploaded = reqwest::Client::new()
        .put(format!("{}/admin/api/policies/caps/component?global=true", a.url))
        .bearer_auth(ADMIN)
        .body(wasm)
        .send()
        .await
        .unwrap();
    assert_eq!(uploaded.status(), 201);
    let (status, body) = admin(
        &a,
        reqwest::Method::PUT,
        "/admin/api/policies/caps",
        Some(json!({"plugin": "uploaded:caps", "global": true, "settings": {"max_tokens": "50"}})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(chat(&a, KEY, &greedy).await.0, 400);
    until("B refuses what the policy uploaded on A refuses", || async { chat(&b, KEY, &greedy).await.0 == 400 }).await;
    assert!(db.path().join("policies/caps.wasm").exists(), "B keeps the component in its own data_dir");

    // Deleted on A: B lets the request through again.
    let (status, _) = admin(&a, reqwest::Method::DELETE, "/admin/api/policies/caps", None).await;
    assert_eq!(status, 204);
    until("B serves again", || async { chat(&b, KEY, &greedy).await.0 == 200 }).await;
}

#[tokio::test]
async fn a_personal_token_made_on_one_replica_works_on_the_other_and_both_trails_hold_its_changes() {
    let redis = RedisServer::start();
    let up = Upstream::start().await;
    let Shipped { a, b, dirs: _dirs } = Shipped::start(&redis, &up);

    // An operator's token made on A acts on B once the runtime file reached it.
    let made = json!({"name": "laptop", "owner": "olivia", "role": "operator"});
    let (status, token) = admin(&a, reqwest::Method::POST, "/admin/api/tokens", Some(made)).await;
    assert_eq!(status, 201, "{token}");
    let secret = token["token"].as_str().unwrap().to_string();
    let disable = || async {
        reqwest::Client::new()
            .post(format!("{}/admin/api/sources/first/disable", b.url))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    // Waited for with the admin token: wrong tokens would get this address throttled.
    let id = token["id"].as_str().unwrap().to_string();
    until("B knows the token made on A", || async {
        let (_, listed) = admin(&b, reqwest::Method::GET, "/admin/api/tokens", None).await;
        listed["tokens"].as_array().is_some_and(|t| t.iter().any(|t| t["id"] == id.as_str()))
    })
    .await;
    assert_eq!(disable().await, 200);

    // The switch made on B is in A's trail, with its actor, replica and change.
    let on_a = || async {
        let (_, page) = admin(&a, reqwest::Method::GET, "/admin/api/audit?actor=olivia", None).await;
        page["entries"].as_array().cloned().unwrap_or_default()
    };
    until("A's trail has B's change", || async { !on_a().await.is_empty() }).await;
    let entries = on_a().await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(
        (entries[0]["replica"].as_str(), entries[0]["path"].as_str()),
        (Some("b"), Some("/admin/api/sources/first/disable"))
    );
    assert_eq!(entries[0]["changes"][0]["after"]["enabled"], false);
    // And A's own entry (the token made there) reached B's trail.
    until("B's trail has A's entry", || async {
        let (_, page) = admin(&b, reqwest::Method::GET, "/admin/api/audit?path=/admin/api/tokens", None).await;
        page["entries"].as_array().is_some_and(|e| e.iter().any(|e| e["replica"] == "a" && e["outcome"] == "done"))
    })
    .await;

    // Revoked on B: refused on A.
    let (status, _) = admin(&b, reqwest::Method::DELETE, &format!("/admin/api/tokens/{id}"), None).await;
    assert_eq!(status, 204);
    until("A refuses the revoked token", || async {
        let response =
            reqwest::Client::new().get(format!("{}/admin/api/me", a.url)).bearer_auth(&secret).send().await.unwrap();
        response.status() == 401
    })
    .await;
}
