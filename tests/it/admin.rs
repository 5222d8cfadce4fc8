//! The admin API end to end: refused without the token on every path it documents; sources,
//! templates, AUTO chains, routes (also at Keyway's paths), keys and adapters change live,
//! are checked before anything changes, never show a secret, and survive a restart.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use switchyard::scheduler::SystemClock;

use crate::support::{KEY, MockUpstream, TestGateway, chat_body, guest_wasm};

const ADMIN: &str = "adm-crud-token-0001";
const UPSTREAM_KEY: &str = "sk-upstream-secret-key-9876543210";

fn yaml(mock: &MockUpstream) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\nadmin_token: {ADMIN}\nchannel_selection: order
keys:
  - {{name: tester, key: {KEY}, models: ['*']}}
sources:
  - {{name: base, base_url: '{url}', api_key: {UPSTREAM_KEY}, models: [{{name: m, upstream: 'say:from base'}}]}}
routes:
  - {{alias: pair, mode: auto-select, providers: [{{source: base, model: m, priority: 1}}]}}
",
        cache = crate::support::gateway::shared_cache().display(),
        url = mock.url
    )
}

struct Admin<'a> {
    gw: &'a TestGateway,
}

impl Admin<'_> {
    fn call(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        reqwest::Client::new().request(method, format!("{}{path}", self.gw.url)).bearer_auth(ADMIN)
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.call(method, path);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        assert!(!text.contains(UPSTREAM_KEY) && !text.contains(ADMIN), "a secret leaked: {text}");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.send(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        body
    }
}

/// A chat request for `m` with the tester's key, answered.
async fn chat_m(gw: &TestGateway) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(KEY)
        .json(&chat_body("m", false))
        .send()
        .await
        .unwrap()
}

async fn answer(gw: &TestGateway, key: &str, model: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", gw.url))
        .bearer_auth(key)
        .json(&chat_body(model, false))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    let text = body["choices"][0]["message"]["content"].as_str().map(str::to_string);
    (status, text.unwrap_or_else(|| body["error"]["message"].as_str().unwrap_or_default().to_string()))
}

#[tokio::test]
async fn every_documented_path_exists_and_needs_the_token() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let doc = admin.get("/admin/api/openapi.json").await;
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 25, "{}", paths.len());
    for (path, methods) in paths {
        let concrete = path.replace("{name}", "x").replace("{id}", "x").replace("{provider}", "x");
        for method in methods.as_object().unwrap().keys() {
            let method = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let response =
                reqwest::Client::new().request(method.clone(), format!("{}{concrete}", gw.url)).send().await.unwrap();
            // 401, not 404: the path is routed (unrouted paths never reach the token check).
            assert_eq!(response.status(), 401, "{method} {path} without the token");
            let wrong = reqwest::Client::new()
                .request(method.clone(), format!("{}{concrete}", gw.url))
                .bearer_auth(KEY)
                .send()
                .await
                .unwrap();
            // Wrong tokens from one address are throttled after ten (429 `too_many_failed_logins`).
            assert!(matches!(wrong.status().as_u16(), 401 | 429), "{method} {path} with a gateway key");
        }
    }
    let (status, _) = admin.send(reqwest::Method::GET, "/admin/api/nothing-here", None).await;
    assert_eq!(status, 404, "an unknown admin path is a plain 404");
}

#[tokio::test]
async fn sources_change_live_keep_their_keys_masked_and_persist() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let new_source = json!({"name": "extra", "base_url": mock.url, "api_key": "sk-extra-upstream-0000000001",
        "models": [{"name": "fresh", "upstream": "say:fresh answer"}]});
    let (status, created) = admin.send(reqwest::Method::POST, "/admin/api/sources", Some(new_source.clone())).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["api_key"], "sk-…0001");
    assert_eq!(created["origin"], "runtime");
    assert_eq!(answer(&gw, KEY, "fresh").await, (200, "fresh answer".into()), "live without a restart");
    let (status, _) = admin.send(reqwest::Method::POST, "/admin/api/sources", Some(new_source)).await;
    assert_eq!(status, 409);

    // Invalid changes are refused whole, naming the field, and change nothing.
    let (status, error) = admin
        .send(
            reqwest::Method::POST,
            "/admin/api/sources",
            Some(json!({"name": "bad", "base_url": "ftp://x", "models": [{"name": "q"}]})),
        )
        .await;
    assert_eq!(status, 400);
    assert!(
        error["error"]["message"].as_str().unwrap().contains("invalid `base_url`: `ftp://x` is not an http(s) URL"),
        "{error}"
    );
    assert_eq!(admin.get("/admin/api/sources").await["sources"].as_array().unwrap().len(), 2);

    // A replace without api_key keeps the key the source had.
    let (status, replaced) = admin
        .send(
            reqwest::Method::PUT,
            "/admin/api/sources/base",
            Some(json!({"base_url": mock.url, "models": [{"name": "m", "upstream": "say:changed base"}]})),
        )
        .await;
    assert_eq!(status, 200, "{replaced}");
    assert_eq!(replaced["origin"], "config, changed at run time");
    assert_eq!(answer(&gw, KEY, "m").await, (200, "changed base".into()));
    let sent = mock.state.requests().pop().unwrap();
    assert_eq!(sent.headers["authorization"], format!("Bearer {UPSTREAM_KEY}"));

    // The base source's route uses it: deleting it is refused until the route lets go.
    let (status, error) = admin.send(reqwest::Method::DELETE, "/admin/api/sources/base", None).await;
    assert_eq!(status, 400, "{error}");
    assert!(
        error["error"]["message"].as_str().unwrap().contains("uses source `base`, which no longer exists"),
        "{error}"
    );
    let route_id = admin.get("/admin/api/routes").await["routes"][0]["id"].as_str().unwrap().to_string();
    let (status, _) = admin.send(reqwest::Method::DELETE, &format!("/admin/api/routes/{route_id}"), None).await;
    assert_eq!(status, 204);
    let (status, _) = admin.send(reqwest::Method::DELETE, "/admin/api/sources/base", None).await;
    assert_eq!(status, 204);
    assert_eq!(answer(&gw, KEY, "m").await.0, 404, "the base source is gone");
    let listed = admin.get("/admin/api/sources").await;
    assert_eq!(listed["sources"][1]["deleted"], true, "its tombstone is listed: {listed}");

    // A restart keeps the runtime source and the tombstone.
    let gw = gw.restart(&yaml(&mock), Arc::new(SystemClock)).await;
    let admin = Admin { gw: &gw };
    assert_eq!(answer(&gw, KEY, "fresh").await.0, 200);
    assert_eq!(answer(&gw, KEY, "m").await.0, 404);
    // Re-adding the base source by name brings it back.
    let (status, _) = admin
        .send(reqwest::Method::POST, "/admin/api/sources", Some(json!({"name": "base", "base_url": mock.url, "api_key": "sk-readded-0000000002", "models": [{"name": "m", "upstream": "say:back again"}]})))
        .await;
    assert_eq!(status, 201);
    assert_eq!(answer(&gw, KEY, "m").await, (200, "back again".into()));

    // Deleted again and restored without a key (the WebUI's Restore): the config key comes back.
    let (status, _) = admin.send(reqwest::Method::DELETE, "/admin/api/sources/base", None).await;
    assert_eq!(status, 204);
    let restored = json!({"name": "base", "base_url": mock.url, "models": [{"name": "m", "upstream": "say:restored"}]});
    let (status, _) = admin.send(reqwest::Method::POST, "/admin/api/sources", Some(restored)).await;
    assert_eq!(status, 201);
    assert_eq!(answer(&gw, KEY, "m").await, (200, "restored".into()));
    let sent = mock.state.requests().pop().unwrap();
    assert_eq!(sent.headers["authorization"], format!("Bearer {UPSTREAM_KEY}"));
}

#[tokio::test]
async fn templates_make_sources_that_differ_only_in_their_key() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let template = json!({"name": "shared", "base_url": mock.url, "max_concurrent": 3, "models": [{"name": "pooled", "upstream": "say:pooled"}]});
    assert_eq!(admin.send(reqwest::Method::POST, "/admin/api/source-templates", Some(template)).await.0, 201);
    let (status, error) = admin
        .send(
            reqwest::Method::POST,
            "/admin/api/source-templates",
            Some(json!({"name": "t2", "api_key": "x", "base_url": mock.url, "models": [{"name": "a"}]})),
        )
        .await;
    assert_eq!(status, 400, "{error}");
    for (name, key) in [("pool-1", "sk-pool-key-0000000001"), ("pool-2", "sk-pool-key-0000000002")] {
        let (status, source) = admin
            .send(
                reqwest::Method::POST,
                "/admin/api/source-templates/shared/sources",
                Some(json!({"name": name, "api_key": key})),
            )
            .await;
        assert_eq!(status, 201, "{source}");
        assert_eq!(source["max_concurrent"], 3);
    }
    assert_eq!(answer(&gw, KEY, "pooled").await, (200, "pooled".into()));
    let sent = mock.state.requests().pop().unwrap();
    assert_eq!(sent.headers["authorization"], "Bearer sk-pool-key-0000000001", "each source has its own key");
    let sources = Admin { gw: &gw }.get("/admin/api/sources").await;
    let pool_2 = sources["sources"].as_array().unwrap().iter().find(|s| s["name"] == "pool-2").unwrap().clone();
    assert_eq!((pool_2["api_key"].as_str(), pool_2["base_url"].as_str()), (Some("sk-…0002"), Some(mock.url.as_str())));
}

#[tokio::test]
async fn chains_and_routes_change_live_also_through_keyways_paths() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    assert_eq!(answer(&gw, KEY, "AUTO").await.0, 404, "no chain yet");
    let (status, error) = admin
        .send(reqwest::Method::PUT, "/admin/api/auto", Some(json!({"slots": [{"model": "m", "source": "nowhere"}]})))
        .await;
    assert_eq!(status, 400);
    assert!(
        error["error"]["message"].as_str().unwrap().contains("auto[0].source: no source named `nowhere`"),
        "{error}"
    );
    let (status, chain) =
        admin.send(reqwest::Method::PUT, "/admin/api/auto", Some(json!({"slots": [{"model": "m", "tier": 1}]}))).await;
    assert_eq!(status, 200);
    assert_eq!(chain["slots"][0]["model"], "m");
    assert_eq!(answer(&gw, KEY, "AUTO").await, (200, "from base".into()));

    // A second source and a provider for the base route, added at Keyway's path.
    let (status, _) = admin
        .send(reqwest::Method::POST, "/admin/api/sources", Some(json!({"name": "backup", "base_url": mock.url, "models": [{"name": "m2", "upstream": "say:from backup"}, {"name": "down", "upstream": "flaky"}]})))
        .await;
    assert_eq!(status, 201);
    let route = admin.get("/admin/api/routes").await["routes"][0].clone();
    let id = route["id"].as_str().unwrap();
    let (status, provider) = admin
        .send(
            reqwest::Method::POST,
            &format!("/admin/llm/routes/{id}/providers"),
            Some(json!({"provider_id": "backup", "upstream_model": "down", "priority": 0})),
        )
        .await;
    assert_eq!(status, 201, "{provider}");
    let provider_id = provider["id"].as_str().unwrap().to_string();
    let listed = admin.get(&format!("/admin/api/routes/{id}/providers")).await;
    assert_eq!(listed["providers"].as_array().unwrap().len(), 2);
    assert_eq!(answer(&gw, KEY, "pair").await, (200, "from base".into()), "backup/down failed over to base");
    let health = admin.get("/admin/llm/health").await;
    let down = health["slots"].as_array().unwrap().iter().find(|s| s["model"] == "down").unwrap().clone();
    assert_eq!(down["state"], "cooling");
    let reset = admin.send(reqwest::Method::POST, "/admin/llm/health/backup/reset", None).await;
    assert_eq!(reset, (200, json!({"cleared": 1})));

    // Point the provider at the healthy model and make it first; then remove it.
    let (status, _) = admin
        .send(
            reqwest::Method::PATCH,
            &format!("/admin/llm/route-providers/{provider_id}"),
            Some(json!({"upstream_model": "m2"})),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(answer(&gw, KEY, "pair").await, (200, "from backup".into()));
    let new_id = admin.get(&format!("/admin/api/routes/{id}/providers")).await["providers"][1]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(admin.send(reqwest::Method::DELETE, &format!("/admin/api/route-providers/{new_id}"), None).await.0, 204);
    assert_eq!(answer(&gw, KEY, "pair").await, (200, "from base".into()));

    // A new route, and the changes survive a restart.
    let (status, _) = admin
        .send(
            reqwest::Method::POST,
            "/admin/api/routes",
            Some(json!({"alias": "spare", "providers": [{"source": "backup", "model": "m2"}]})),
        )
        .await;
    assert_eq!(status, 201);
    let gw = gw.restart(&yaml(&mock), Arc::new(SystemClock)).await;
    assert_eq!(answer(&gw, KEY, "spare").await, (200, "from backup".into()));
    assert_eq!(answer(&gw, KEY, "AUTO").await.0, 200);
}

#[tokio::test]
async fn keys_are_shown_once_scoped_metered_and_revoked() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let (status, created) = admin
        .send(
            reqwest::Method::POST,
            "/admin/api/keys",
            Some(json!({"name": "bob", "models": ["m"], "token_quota": 20, "period": "hour"})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let secret = created["key"].as_str().unwrap().to_string();
    assert!(secret.starts_with("sk-sy-") && secret.len() > 40, "{secret}");
    let listed = admin.get("/admin/api/keys").await.to_string();
    assert!(!listed.contains(&secret), "the secret is shown once only");
    assert!(!listed.contains(KEY), "config keys are masked too");

    assert_eq!(answer(&gw, &secret, "m").await, (200, "from base".into()));
    assert_eq!(answer(&gw, &secret, "AUTO").await.0, 403, "out of its scope");
    let bob = admin.get("/admin/api/keys/bob").await;
    assert_eq!(
        (bob["used"].as_u64(), bob["token_quota"].as_u64()),
        (Some(12), Some(20)),
        "say: answers cost 12 tokens"
    );
    assert_eq!(answer(&gw, &secret, "m").await.0, 200);
    let (status, message) = answer(&gw, &secret, "m").await;
    assert_eq!(status, 429);
    assert!(message.starts_with("key `bob` has used its token quota (24 of 20 per hour); it resets in "), "{message}");

    let (status, changed) =
        admin.send(reqwest::Method::PATCH, "/admin/api/keys/bob", Some(json!({"token_quota": 1000}))).await;
    assert_eq!((status, changed["token_quota"].as_u64()), (200, Some(1000)));
    assert_eq!(answer(&gw, &secret, "m").await.0, 200, "a raised quota applies at once");
    let (status, _) =
        admin.send(reqwest::Method::PATCH, "/admin/api/keys/tester", Some(json!({"token_quota": 5}))).await;
    assert_eq!(status, 400, "config keys change only their scope here");
    assert_eq!(
        admin.send(reqwest::Method::PATCH, "/admin/api/keys/tester", Some(json!({"models": ["m"]}))).await.0,
        200
    );
    assert_eq!(answer(&gw, KEY, "AUTO").await.0, 403, "the narrowed scope applies at once");

    let gw = gw.restart(&yaml(&mock), Arc::new(SystemClock)).await;
    let admin = Admin { gw: &gw };
    assert_eq!(answer(&gw, &secret, "m").await.0, 200, "the digest survived the restart");
    assert_eq!(admin.send(reqwest::Method::DELETE, "/admin/api/keys/bob", None).await.0, 204);
    assert_eq!(answer(&gw, &secret, "m").await.0, 401, "revoked");
}

#[tokio::test]
async fn adapters_upload_checked_swap_live_and_leave_open_streams_alone() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let upload = |name: &str, bytes: Vec<u8>| {
        admin
            .call(reqwest::Method::PUT, &format!("/admin/api/adapters/{name}"))
            .header("content-type", "application/wasm")
            .body(bytes)
            .send()
    };
    let response = upload("broken", b"\0asm\x01\0\0\0garbage".to_vec()).await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("adapter `broken` was not installed"));
    let response = upload("scripted", b"return { name = 'x' }".to_vec()).await.unwrap();
    assert_eq!(response.status(), 400);
    let text = response.text().await.unwrap();
    assert!(text.contains("has no `transform_request` function"), "a Lua script is checked before use: {text}");
    assert!(!gw.gateway.plugins.names().contains(&"broken".to_string()), "nothing was installed");

    let wasm = std::fs::read(guest_wasm("openai")).unwrap();
    let response = upload("mine?rename=true", wasm.clone()).await.unwrap();
    assert_eq!(response.status(), 201);
    let (status, _) = admin
        .send(reqwest::Method::POST, "/admin/api/sources", Some(json!({"name": "own", "base_url": mock.url, "adapter": "mine", "models": [{"name": "gated-model", "upstream": "gated"}, {"name": "quick", "upstream": "say:via mine"}]})))
        .await;
    assert_eq!(status, 201);
    assert_eq!(answer(&gw, KEY, "quick").await, (200, "via mine".into()));

    // A stream is open on `mine` when a new version of it arrives: it finishes on the old one.
    let stream =
        gw.chat(json!({"model": "gated-model", "stream": true, "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(stream.status(), 200);
    assert_eq!(upload("mine?rename=true", wasm).await.unwrap().status(), 200, "replaced");
    mock.state.gate.add_permits(10);
    let body = stream.text().await.unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert_eq!(answer(&gw, KEY, "quick").await.0, 200);

    let listed = admin.get("/admin/api/adapters").await;
    let mine = listed["adapters"].as_array().unwrap().iter().find(|a| a["name"] == "mine").unwrap().clone();
    assert_eq!((mine["origin"].as_str(), mine["used_by"][0].as_str()), (Some("file"), Some("own")));
    assert_eq!(admin.send(reqwest::Method::DELETE, "/admin/api/adapters/mine", None).await.0, 409, "still in use");
    assert_eq!(admin.send(reqwest::Method::DELETE, "/admin/api/adapters/openai", None).await.0, 400, "built in");
    assert_eq!(admin.send(reqwest::Method::DELETE, "/admin/api/sources/own", None).await.0, 204);
    assert_eq!(admin.send(reqwest::Method::DELETE, "/admin/api/adapters/mine", None).await.0, 204);
    assert!(!gw.gateway.plugins.names().contains(&"mine".to_string()));
}

#[tokio::test]
async fn operators_switch_channel_selection_and_disable_sources_live_and_the_answer_names_its_source() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    assert_eq!(admin.get("/admin/api/settings").await["channel_selection"], "order");
    let (status, changed) =
        admin.send(reqwest::Method::PUT, "/admin/api/settings", Some(json!({"channel_selection": "smart"}))).await;
    assert_eq!((status, &changed["channel_selection"]), (200, &json!("smart")));
    assert_eq!(gw.gateway.scheduler.selection(), switchyard::config::ChannelSelection::Smart, "in force at once");
    let (status, refused) =
        admin.send(reqwest::Method::PUT, "/admin/api/settings", Some(json!({"channel_selection": "random"}))).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("channel_selection"), "{refused}");

    // The answer names the source that served it.
    let served = chat_m(&gw).await;
    assert_eq!(served.headers()["x-switchyard-source"], "base");

    // A disabled source serves nothing and says so; enabled again, it serves.
    let mut source = admin.get("/admin/api/sources/base").await;
    assert_eq!(source["enabled"], true);
    source["enabled"] = json!(false);
    source.as_object_mut().unwrap().remove("api_key");
    let (status, body) = admin.send(reqwest::Method::PUT, "/admin/api/sources/base", Some(source.clone())).await;
    assert_eq!(status, 200, "{body}");
    let (status, text) = answer(&gw, KEY, "m").await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("disabled by an operator"), "{text}");
    let listed = admin.get("/admin/api/sources").await;
    assert_eq!(listed["sources"][0]["enabled"], false);
    let health = admin.get("/admin/api/health").await;
    assert_eq!(health["slots"][0]["state"], "disabled", "{health}");
    let models: Value = gw.get("/v1/models").send().await.unwrap().json().await.unwrap();
    assert!(models["data"].as_array().unwrap().is_empty(), "a disabled source's models are not offered: {models}");
    source["enabled"] = json!(true);
    admin.send(reqwest::Method::PUT, "/admin/api/sources/base", Some(source)).await;
    assert_eq!(answer(&gw, KEY, "m").await, (200, "from base".into()));

    // Kept across a restart: the selection lives in the runtime file.
    let gw = gw.restart(&yaml(&mock), Arc::new(SystemClock)).await;
    assert_eq!(Admin { gw: &gw }.get("/admin/api/settings").await["channel_selection"], "smart");
}

#[tokio::test]
async fn a_source_test_makes_one_real_request_and_reports_latency_answer_or_error_without_cooling() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let (status, tested) = admin.send(reqwest::Method::POST, "/admin/api/sources/base/test", None).await;
    assert_eq!(status, 200, "{tested}");
    assert_eq!((&tested["ok"], &tested["model"], &tested["answer"]), (&json!(true), &json!("m"), &json!("from base")));
    assert!(tested["latency_ms"].is_u64() && tested["error"].is_null(), "{tested}");
    let sent = mock.state.requests().pop().unwrap();
    assert_eq!(sent.body["max_tokens"], 16, "a test costs a few tokens");

    let broken = json!({"name": "down", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-down-0000000000001",
        "models": [{"name": "m2"}]});
    admin.send(reqwest::Method::POST, "/admin/api/sources", Some(broken)).await;
    let (status, failed) =
        admin.send(reqwest::Method::POST, "/admin/api/sources/down/test", Some(json!({"model": "m2"}))).await;
    assert_eq!(status, 200);
    assert_eq!(failed["ok"], false);
    assert!(failed["error"]["message"].as_str().unwrap().contains("could not be reached"), "{failed}");
    let health = admin.get("/admin/api/health").await;
    let down = health["slots"].as_array().unwrap().iter().find(|s| s["source"] == "down").unwrap().clone();
    assert_eq!(down["state"], "healthy", "a test cools nothing: {down}");

    let (status, _) =
        admin.send(reqwest::Method::POST, "/admin/api/sources/base/test", Some(json!({"model": "nope"}))).await;
    assert_eq!(status, 400);
    let (status, _) = admin.send(reqwest::Method::POST, "/admin/api/sources/ghost/test", None).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_series_buckets_the_logs_with_exact_percentiles() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    for _ in 0..3 {
        assert_eq!(answer(&gw, KEY, "m").await.0, 200);
    }
    let series = admin.get("/admin/api/stats/series?buckets=6").await;
    let buckets = series["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 6);
    assert_eq!(series["bucket_ms"], 600_000, "an hour in six");
    let total: u64 = buckets.iter().map(|b| b["requests"].as_u64().unwrap()).sum();
    assert_eq!(total, 3);
    let last = &buckets[5];
    assert_eq!(last["requests"], 3, "the newest bucket holds them: {series}");
    assert!(last["p50_ms"].is_u64() && last["p95_ms"].as_u64() >= last["p50_ms"].as_u64(), "{last}");
    let (status, _) = admin.send(reqwest::Method::GET, "/admin/api/stats/series?since_ms=10&until_ms=5", None).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_lua_adapters_script_can_be_read_back_a_component_has_none() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let script =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/lua/legacy.lua")).unwrap();
    let uploaded =
        admin.call(reqwest::Method::PUT, "/admin/api/adapters/upper").body(script.clone()).send().await.unwrap();
    assert_eq!(uploaded.status(), 201);
    let read = admin.call(reqwest::Method::GET, "/admin/api/adapters/upper/source").send().await.unwrap();
    assert_eq!(read.status(), 200);
    assert!(read.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
    assert_eq!(read.text().await.unwrap(), script);
    let (status, error) = admin.send(reqwest::Method::GET, "/admin/api/adapters/openai/source", None).await;
    assert_eq!(status, 400);
    assert!(error["error"]["message"].as_str().unwrap().contains("not a Lua script"), "{error}");
}

#[tokio::test]
async fn a_route_added_at_run_time_may_name_a_config_route_as_its_judge() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let fused = json!({"alias": "fused", "mode": "fusion", "fusion_config": {"judge_alias": "pair"},
        "providers": [{"source": "base", "model": "m"}]});
    let (status, body) = admin.send(reqwest::Method::POST, "/admin/api/routes", Some(fused)).await;
    assert_eq!(status, 201, "{body}");
    let nowhere = json!({"alias": "lost", "mode": "fusion", "fusion_config": {"judge_alias": "nowhere"},
        "providers": [{"source": "base", "model": "m"}]});
    let (status, body) = admin.send(reqwest::Method::POST, "/admin/api/routes", Some(nowhere)).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("no route or model named `nowhere`"), "{body}");
}

/// Issue 36's uploads accepted but wrong: what was uploaded is named before it is parsed (a
/// JSON file, a core module), and a component installed under another name than its own says so.
#[tokio::test]
async fn an_upload_is_recognised_and_a_name_other_than_the_components_own_is_said() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    let upload = |name: &str, bytes: Vec<u8>| {
        admin.call(reqwest::Method::PUT, &format!("/admin/api/adapters/{name}")).body(bytes).send()
    };
    let case = br#"{"request": {"model": "m"}, "expect": {}}"#.to_vec();
    let response = upload("oops", case).await.unwrap();
    assert_eq!(response.status(), 400);
    let text = response.text().await.unwrap();
    assert!(text.contains("the body is JSON") && !text.contains("Lua syntax"), "{text}");
    let response = upload("core", b"\0asm\x01\0\0\0".to_vec()).await.unwrap();
    assert_eq!(response.status(), 400);
    assert!(response.text().await.unwrap().contains("a core WebAssembly module, not a component"));

    let openai = std::fs::read(guest_wasm("openai")).unwrap();
    let response = upload("mine", openai.clone()).await.unwrap();
    assert_eq!(response.status(), 400, "a component under another name than its own is refused");
    let refused: Value = response.json().await.unwrap();
    assert_eq!(refused["error"]["code"], "adapter_name_mismatch");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("describes itself as `openai`") && message.contains("?rename=true"), "{message}");
    assert!(!gw.gateway.plugins.names().contains(&"mine".to_string()), "nothing was installed");
    let response = upload("mine?rename=true", openai).await.unwrap();
    assert_eq!(response.status(), 201);
    let installed: Value = response.json().await.unwrap();
    assert_eq!(installed["name"], "mine");
    let note = installed["note"].as_str().unwrap();
    assert!(note.contains("describes itself as `openai`") && note.contains("installed as `mine`"), "{note}");

    // A wrong token is told where a made one lives (here it was written in the config).
    let refused =
        reqwest::Client::new().get(format!("{}/admin/api/keys", gw.url)).bearer_auth("nope").send().await.unwrap();
    assert!(refused.text().await.unwrap().contains("the config's `admin_token`"));
    let made = TestGateway::start(&yaml(&mock).replace(&format!("admin_token: {ADMIN}\n"), "")).await;
    let refused = reqwest::Client::new().get(format!("{}/admin/api/keys", made.url)).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    assert!(refused.text().await.unwrap().contains("`admin_token` in its data_dir"));
}

#[tokio::test]
async fn a_paused_gateway_refuses_v1_in_each_doors_format_and_resumes() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&yaml(&mock)).await;
    let admin = Admin { gw: &gw };
    assert_eq!(admin.get("/admin/api/serving").await, json!({"paused": false}));
    assert_eq!(answer(&gw, KEY, "m").await.0, 200);

    let (status, body) = admin.send(reqwest::Method::PUT, "/admin/api/serving", Some(json!({"paused": true}))).await;
    assert_eq!((status, body), (200, json!({"paused": true})));
    let refused = chat_m(&gw).await;
    assert_eq!((refused.status().as_u16(), refused.headers()["retry-after"].to_str().unwrap()), (503, "30"));
    let error: Value = refused.json().await.unwrap();
    assert_eq!(error["error"]["code"], "serving_paused", "{error}");
    let anthropic = reqwest::Client::new()
        .post(format!("{}/v1/messages", gw.url))
        .header("x-api-key", KEY)
        .json(&json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(anthropic.status(), 503);
    let error: Value = anthropic.json().await.unwrap();
    assert_eq!((error["type"].as_str(), error["error"]["type"].as_str()), (Some("error"), Some("overloaded_error")));
    // The operator's side goes on while paused.
    assert_eq!(reqwest::get(format!("{}/health", gw.url)).await.unwrap().status(), 200);
    assert_eq!(admin.get("/admin/api/serving").await, json!({"paused": true}));
    let (status, _) = admin.send(reqwest::Method::PUT, "/admin/api/serving", Some(json!({"paused": "yes"}))).await;
    assert_eq!(status, 400, "a pause is a boolean");

    admin.send(reqwest::Method::PUT, "/admin/api/serving", Some(json!({"paused": false}))).await;
    assert_eq!(answer(&gw, KEY, "m").await.0, 200);
}
