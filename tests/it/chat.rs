//! `/v1/chat/completions`, `/v1/models`, `/health` through the built-in openai adapter:
//! byte-exact pass-through, keys and scopes, model resolution, and every error shape.

use serde_json::{Value, json};

use crate::support::mock::{CHAT_JSON, CHAT_SSE};
use crate::support::{KEY, MockUpstream, TestGateway, body_text, chat_body, config_with, mock_source};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    TestGateway::start(&config_with(&mock_source(
        mock,
        &["fixture", "error-429", "error-401", "error-500", "not-json"],
    )))
    .await
}

#[tokio::test]
async fn json_completion_comes_back_byte_for_byte() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let response = gw.chat(chat_body("fixture", false)).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().contains_key("x-request-id"));
    assert_eq!(response.text().await.unwrap(), CHAT_JSON);

    let seen = mock.state.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["authorization"], "Bearer sk-upstream-secret-0123456789");
    assert_eq!(seen[0].body["model"], "fixture");
    assert_eq!(seen[0].body["messages"][0]["content"], "Hello!");
}

#[tokio::test]
async fn sse_stream_comes_back_byte_for_byte_and_asks_for_usage() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let response = gw.chat(chat_body("fixture", true)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(body_text(response).await, CHAT_SSE);
    let seen = mock.state.requests();
    assert_eq!(seen[0].body["stream_options"], json!({"include_usage": true}));
}

#[tokio::test]
async fn upstream_model_names_and_prefixes_resolve() {
    let mock = MockUpstream::start().await;
    let sources = format!(
        "sources:\n  - name: first\n    base_url: {url}\n    models: [{{name: gpt-4o, upstream: fixture}}]\n  - name: second\n    base_url: {url}\n    models: [{{name: gpt-4o, upstream: second-fixture}}]\n",
        url = mock.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    for (asked, upstream) in [
        ("gpt-4o", "fixture"),
        ("second/gpt-4o", "second-fixture"),
        ("second:gpt-4o", "second-fixture"),
        ("first/gpt-4o", "fixture"),
    ] {
        let response = gw.chat(chat_body(asked, false)).await;
        assert_eq!(response.status(), 200, "{asked}");
        let last = mock.state.requests().pop().unwrap();
        assert_eq!(last.body["model"], upstream, "{asked}");
    }
}

async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json::<Value>().await.expect("errors are JSON"))
}

#[tokio::test]
async fn keys_are_checked_and_scopes_enforced() {
    let mock = MockUpstream::start().await;
    let yaml = format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\nkeys:\n  - name: narrow\n    key: sk-narrow-key-000001\n    models: [\"fix*\"]\n{}",
        mock_source(&mock, &["fixture", "other"])
    );
    let gw = TestGateway::start(&yaml).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", gw.url);

    let (status, body) = error_of(client.post(&url).json(&chat_body("fixture", false)).send().await.unwrap()).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["type"], "authentication_error");
    let (status, _) =
        error_of(client.post(&url).bearer_auth("sk-wrong").json(&chat_body("fixture", false)).send().await.unwrap())
            .await;
    assert_eq!(status, 401);

    let narrow = |m: &str| client.post(&url).bearer_auth("sk-narrow-key-000001").json(&chat_body(m, false)).send();
    assert_eq!(narrow("fixture").await.unwrap().status(), 200);
    let (status, body) = error_of(narrow("other").await.unwrap()).await;
    assert_eq!(status, 403);
    assert_eq!(
        body,
        json!({"error": {"type": "model_not_allowed", "message": "model \"other\" is not allowed for this key", "param": null, "code": null}})
    );

    let models: Value = client
        .get(format!("{}/v1/models", gw.url))
        .bearer_auth("sk-narrow-key-000001")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["object"], "list");
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["fixture"]);
    assert_eq!(models["data"][0]["owned_by"], "mock");
}

#[tokio::test]
async fn bad_requests_get_openai_errors_naming_the_problem() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let send = |body: &'static str| {
        gw.post("/v1/chat/completions").header("content-type", "application/json").body(body).send()
    };

    let (status, body) = error_of(send("{\"model\": ").await.unwrap()).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("not valid JSON"), "{body}");

    let (status, body) = error_of(
        send(r#"{"model":"fixture","messages":[{"role":"user","content":"x"}],"temperature":"hot"}"#).await.unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "temperature");
    assert_eq!(body["error"]["type"], "invalid_request_error");

    let (status, body) = error_of(send(r#"{"model":"fixture","messages":"hi"}"#).await.unwrap()).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "messages");

    let (status, body) = error_of(send(r#"{"model":"fixture","messages":[]}"#).await.unwrap()).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["param"], "messages");

    let (status, body) = error_of(gw.chat(chat_body("no-such-model", false)).await).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "model_not_found");

    let (status, body) = error_of(gw.get("/v1/nothing-here").send().await.unwrap()).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "unknown_url");
    assert!(mock.state.requests().is_empty(), "no bad request reached the upstream");
}

#[tokio::test]
async fn oversized_bodies_are_refused_with_413() {
    let mock = MockUpstream::start().await;
    let yaml = config_with(&format!("body_limit_mb: 1\n{}", mock_source(&mock, &["fixture"])));
    let gw = TestGateway::start(&yaml).await;
    let big = "x".repeat(2 << 20);
    let (status, body) =
        error_of(gw.chat(json!({"model": "fixture", "messages": [{"role": "user", "content": big}]})).await).await;
    assert_eq!(status, 413);
    assert_eq!(body["error"]["code"], "request_too_large");
    assert!(mock.state.requests().is_empty());
}

#[tokio::test]
async fn upstream_errors_keep_their_status_and_never_leak_the_upstream_key() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;

    let response = gw.chat(chat_body("error-429", false)).await;
    assert_eq!(response.headers()["retry-after"], "20", "the upstream's Retry-After reaches the client");
    let (status, body) = error_of(response).await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert!(body["error"]["message"].as_str().unwrap().starts_with("Rate limit reached"), "{body}");

    let response = gw.chat(chat_body("error-401", true)).await;
    let (status, body) = error_of(response).await;
    assert_eq!(status, 401, "a stream refused before its first byte is a plain JSON error");
    let text = body.to_string();
    assert!(!text.contains("sk-upstream-secret-0123456789"), "{text}");
    assert!(text.contains("sk-…6789"), "{text}");

    let (status, body) = error_of(gw.chat(chat_body("error-500", false)).await).await;
    assert_eq!(status, 500);
    assert_eq!(body["error"]["message"], "upstream exploded");

    let (status, body) = error_of(gw.chat(chat_body("not-json", false)).await).await;
    assert_eq!(status, 502);
    assert_eq!(body["error"]["code"], "invalid_upstream_response");
}

#[tokio::test]
async fn unreachable_upstreams_are_502_and_health_stays_up() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = listener.local_addr().unwrap();
    drop(listener);
    let sources = format!("sources:\n  - name: dead\n    base_url: http://{dead}/v1\n    models: [{{name: m}}]\n");
    let gw = TestGateway::start(&config_with(&sources)).await;
    let (status, body) = error_of(gw.chat(chat_body("m", false)).await).await;
    assert_eq!(status, 502);
    assert_eq!(body["error"]["code"], "upstream_unreachable");
    let health: Value = reqwest::get(format!("{}/health", gw.url)).await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");
    let _ = KEY;
}
