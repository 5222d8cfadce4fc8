//! Detected models (`detect_models: true`): each protocol's model list (fixtures from the
//! providers' API references) asked through the source's adapter at start; the models appear
//! in `/v1/models` and the admin API marked as detected and serve requests; a failing list
//! keeps the configured models; `POST /admin/api/sources/{name}/detect` asks again.

use serde_json::{Value, json};

use crate::support::{MockUpstream, TestGateway, config_with};

const ADMIN: &str = "adm-detect-token-0001";

async fn gateway(mock: &MockUpstream) -> TestGateway {
    let sources = format!(
        "admin_token: {ADMIN}\nsources:\n\
         \x20 - {{name: oai, base_url: '{url}', detect_models: true, models: [{{name: gpt-4.1, upstream: fixture}}]}}\n\
         \x20 - {{name: claude, base_url: '{url}', adapter: anthropic, api_key: sk-ant-x, detect_models: true, models: []}}\n\
         \x20 - {{name: google, base_url: '{root}/v1beta', adapter: gemini, api_key: g-key, detect_models: true, models: []}}\n\
         \x20 - {{name: local, base_url: '{root}', adapter: ollama, detect_models: true, models: []}}\n\
         \x20 - {{name: broken, base_url: '{url}/nothing', detect_models: true, models: [{{name: kept}}]}}\n",
        url = mock.url,
        root = mock.url.trim_end_matches("/v1")
    );
    TestGateway::start(&config_with(&sources)).await
}

async fn listed(gw: &TestGateway) -> Vec<(String, String, bool)> {
    let list: Value = gw.get("/v1/models").send().await.unwrap().json().await.unwrap();
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (m["id"].as_str().unwrap().to_string(), m["owned_by"].as_str().unwrap().to_string(), m["detected"] == true)
        })
        .collect()
}

#[tokio::test]
async fn every_protocols_model_list_is_detected_at_start_and_serves() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let models = listed(&gw).await;
    let has = |id: &str, source: &str, detected: bool| models.contains(&(id.to_string(), source.to_string(), detected));
    assert!(has("gpt-4.1", "oai", false), "a configured model stays configured: {models:?}");
    assert!(has("gpt-4o-mini", "oai", true), "{models:?}");
    assert!(
        has("claude-sonnet-4-5-20250929", "claude", true) && has("claude-haiku-4-5-20251001", "claude", true),
        "{models:?}"
    );
    assert!(has("gemini-2.5-flash", "google", true), "{models:?}");
    assert!(!models.iter().any(|m| m.0 == "text-embedding-004"), "Gemini models that do not generate are left out");
    assert!(has("llama3.2:latest", "local", true), "{models:?}");
    assert!(has("kept", "broken", false), "a failed detection keeps the configured models: {models:?}");

    let asked = mock.state.requests().into_iter().filter(|r| r.body["call"] == "models").collect::<Vec<_>>();
    let anthropic = asked.iter().find(|r| r.headers.contains_key("x-api-key")).expect("Anthropic's list was asked");
    assert_eq!(anthropic.headers["x-api-key"], "sk-ant-x");
    assert!(anthropic.headers.contains_key("anthropic-version"));

    let answer = gw.chat(json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Hi"}]})).await;
    assert_eq!(answer.status(), 200, "a detected model serves");
    assert_eq!(mock.state.requests().pop().unwrap().body["model"], "gpt-4o-mini");

    assert!(!models.iter().any(|m| m.0 == "whisper-1"), "a speech model no door serves is left out");
    let embedded = gw
        .post("/v1/embeddings")
        .json(&json!({"model": "text-embedding-3-small", "input": "Hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(embedded.status(), 200, "a detected embeddings model serves embeddings");
    let chat =
        gw.chat(json!({"model": "text-embedding-3-small", "messages": [{"role": "user", "content": "Hi"}]})).await;
    assert_ne!(chat.status(), 200, "and is not offered for chat");

    let claude = gw.admin_json(ADMIN, "/admin/api/sources/claude").await;
    assert_eq!(claude["models"], json!([]), "the admin API keeps the configured list apart: {claude}");
    assert_eq!(claude["detected_models"], json!(["claude-sonnet-4-5-20250929", "claude-haiku-4-5-20251001"]));
}

#[tokio::test]
async fn detection_can_be_asked_again_and_says_why_it_failed() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let http = reqwest::Client::new();
    let detect =
        |name: &str| http.post(format!("{}/admin/api/sources/{name}/detect", gw.url)).bearer_auth(ADMIN).send();
    let again = detect("oai").await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(
        again.json::<Value>().await.unwrap()["detected_models"],
        json!(["gpt-4.1", "gpt-4o-mini", "text-embedding-3-small"])
    );
    let failed = detect("broken").await.unwrap();
    assert_eq!(failed.status(), 502);
    let failed: Value = failed.json().await.unwrap();
    assert_eq!(failed["error"]["code"], "detection_failed");
    assert!(failed["error"]["message"].as_str().unwrap().contains("404"), "{failed}");
    assert_eq!(detect("nosuch").await.unwrap().status(), 404);

    // A source added at run time with detect_models comes back with its upstream's list.
    let added = http
        .post(format!("{}/admin/api/sources", gw.url))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "late", "base_url": mock.url, "detect_models": true, "models": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(added.status(), 201);
    assert_eq!(
        added.json::<Value>().await.unwrap()["detected_models"],
        json!(["gpt-4.1", "gpt-4o-mini", "text-embedding-3-small"])
    );
    assert!(listed(&gw).await.iter().any(|m| m.0 == "kept"));
}
