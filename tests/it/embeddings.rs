//! `/v1/embeddings` for `kind: embedding` models through the openai, gemini and ollama adapters.

use serde_json::{Value, json};

use crate::support::mock::OPENAI_EMBEDDINGS;
use crate::support::{MockUpstream, TestGateway, config_with};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    let root = mock.url.trim_end_matches("/v1");
    let sources = format!(
        "sources:\n  - name: oai\n    base_url: {url}\n    models: [{{name: text-embedding-3-small, kind: embedding}}, {{name: chatty}}]\n  - name: google\n    base_url: {root}/v1beta\n    adapter: gemini\n    models: [{{name: text-embedding-004, kind: embedding}}]\n  - name: local\n    base_url: {root}\n    adapter: ollama\n    models: [{{name: all-minilm, kind: embedding}}]\n",
        url = mock.url
    );
    TestGateway::start(&config_with(&sources)).await
}

async fn embed(gw: &TestGateway, body: Value) -> (u16, Value) {
    let response = gw.post("/v1/embeddings").json(&body).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn each_adapter_answers_in_openai_embedding_format() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;

    let response = gw
        .post("/v1/embeddings")
        .json(&json!({"model": "text-embedding-3-small", "input": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.text().await.unwrap(), OPENAI_EMBEDDINGS, "OpenAI passes through byte for byte");

    let (status, body) = embed(&gw, json!({"model": "text-embedding-004", "input": ["a", "b"], "dimensions": 3})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["object"], "list");
    assert_eq!(
        body["data"][1],
        json!({"object": "embedding", "index": 1, "embedding": [0.0084763, 0.021453, -0.0312087]})
    );
    let seen = mock.state.requests().pop().unwrap().body;
    assert_eq!(seen["call"], "text-embedding-004:batchEmbedContents");
    assert_eq!(
        seen["body"]["requests"][1],
        json!({"model": "models/text-embedding-004", "content": {"parts": [{"text": "b"}]}, "outputDimensionality": 3})
    );

    let (status, body) = embed(&gw, json!({"model": "all-minilm", "input": "hello"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"][0]["embedding"], json!([0.010071029, -0.0017594862, 0.05007221]));
    assert_eq!(body["usage"]["prompt_tokens"], 8);
    assert_eq!(mock.state.requests().pop().unwrap().body, json!({"model": "all-minilm", "input": ["hello"]}));
}

#[tokio::test]
async fn endpoints_refuse_models_of_the_wrong_kind_and_bad_input() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let (status, body) = embed(&gw, json!({"model": "chatty", "input": "x"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("wrong_model_kind")));
    let response = gw.chat(json!({"model": "all-minilm", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(response.status(), 400);
    let (status, body) = embed(&gw, json!({"model": "all-minilm", "input": 5})).await;
    assert_eq!((status, body["error"]["param"].as_str()), (400, Some("input")));
    assert!(mock.state.requests().is_empty());
}
