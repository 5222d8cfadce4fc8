//! `POST /v1/images/generations` through the openai and gemini adapters (Imagen `:predict` and
//! Gemini image output), the `auto_image` chain and its fallback, and the errors around it.

use serde_json::{Value, json};

use crate::support::mock::OPENAI_IMAGES;
use crate::support::{MockUpstream, TestGateway, config_with};

async fn gateway(mock: &MockUpstream, runtime: &str) -> TestGateway {
    let root = mock.url.trim_end_matches("/v1");
    let yaml = config_with(&format!(
        "sources:
  - name: google
    base_url: {root}/v1beta
    api_key: AIza-upstream-0123456789
    adapter: gemini
    models: [{{name: imagen-4, upstream: imagen-4.0-generate-001, kind: image}}, {{name: nano, upstream: gemini-image, kind: image}}, {{name: broke, upstream: gemini-quota, kind: image}}]
  - name: openai
    base_url: {url}
    models: [{{name: gpt-image-1, kind: image}}, {{name: chatty}}]
  - name: local
    base_url: {root}
    adapter: ollama
    models: [{{name: painter, kind: image}}]
",
        url = mock.url
    ));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("runtime.yaml"), runtime).unwrap();
    TestGateway::start_in(dir, &yaml).await
}

async fn generate(gw: &TestGateway, body: Value) -> reqwest::Response {
    gw.post("/v1/images/generations").json(&body).send().await.unwrap()
}

#[tokio::test]
async fn openai_images_pass_through_and_gemini_answers_in_the_same_shape() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock, "").await;

    let response =
        generate(&gw, json!({"model": "gpt-image-1", "prompt": "an otter", "size": "1024x1024", "n": 1})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), OPENAI_IMAGES, "byte for byte");
    let seen = mock.state.requests().pop().unwrap();
    assert_eq!(seen.body, json!({"model": "gpt-image-1", "prompt": "an otter", "size": "1024x1024", "n": 1}));

    let response =
        generate(&gw, json!({"model": "imagen-4", "prompt": "a lighthouse", "n": 2, "size": "1792x1024"})).await;
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["data"].as_array().unwrap().len(), 2);
    assert!(body["data"][0]["b64_json"].as_str().unwrap().starts_with("iVBORw0KGgo"));
    let seen = mock.state.requests().pop().unwrap();
    assert_eq!(seen.body["call"], "imagen-4.0-generate-001:predict");
    assert_eq!(
        seen.body["body"],
        json!({"instances": [{"prompt": "a lighthouse"}], "parameters": {"sampleCount": 2, "aspectRatio": "16:9"}})
    );

    let response = generate(&gw, json!({"model": "nano", "prompt": "a cat in a hat", "response_format": "url"})).await;
    let body: Value = response.json().await.unwrap();
    assert!(body["data"][0]["url"].as_str().unwrap().starts_with("data:image/png;base64,iVBOR"), "{body}");
    let seen = mock.state.requests().pop().unwrap();
    assert_eq!(seen.body["call"], "gemini-image:generateContent");
    assert_eq!(seen.body["body"]["generationConfig"]["responseModalities"], json!(["TEXT", "IMAGE"]));
}

#[tokio::test]
async fn auto_images_walk_the_auto_image_chain_or_every_image_model() {
    let mock = MockUpstream::start().await;
    // No chain: every image model in config order; Imagen answers first.
    let gw = gateway(&mock, "").await;
    let response = generate(&gw, json!({"prompt": "a boat"})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(mock.state.requests().pop().unwrap().body["call"], "imagen-4.0-generate-001:predict");

    // A chain whose first tier is out of quota falls through to the next.
    let gw = gateway(
        &mock,
        "auto_image:\n  - {model: broke, tier: 1}\n  - {model: gpt-image-1, tier: 2}\n  - {model: chatty}\n",
    )
    .await;
    let response = generate(&gw, json!({"model": "AUTO", "prompt": "a boat"})).await;
    assert_eq!(response.status(), 200);
    let calls: Vec<Value> = mock.state.requests().iter().rev().take(2).map(|r| r.body.clone()).collect();
    assert_eq!(calls[0]["model"], "gpt-image-1");
    assert_eq!(calls[1]["call"], "gemini-quota:generateContent");
}

#[tokio::test]
async fn wrong_kinds_bad_requests_and_adapters_without_images_are_refused_clearly() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock, "").await;
    let error =
        |r: reqwest::Response| async move { (r.status().as_u16(), r.json::<Value>().await.unwrap()["error"].clone()) };

    let (status, e) = error(generate(&gw, json!({"model": "chatty", "prompt": "x"})).await).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("wrong_model_kind")));
    let (status, e) =
        error(gw.chat(json!({"model": "gpt-image-1", "messages": [{"role": "user", "content": "hi"}]})).await).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("wrong_model_kind")));
    let (status, e) = error(generate(&gw, json!({"model": "gpt-image-1", "prompt": ""})).await).await;
    assert_eq!((status, e["param"].as_str()), (400, Some("prompt")));
    let (status, e) = error(generate(&gw, json!({"model": "gpt-image-1"})).await).await;
    assert_eq!(status, 400);
    assert!(e["message"].as_str().unwrap().contains("prompt"), "{e}");
    let (status, e) = error(generate(&gw, json!({"model": "painter", "prompt": "x"})).await).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("unsupported")));
    assert!(e["message"].as_str().unwrap().contains("Ollama has no image generation API"), "{e}");
}
