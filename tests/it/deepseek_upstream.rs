//! DeepSeek through the built-in `deepseek` component: reasoning_content passes through,
//! cache hits become `prompt_tokens_details.cached_tokens`, complete bodies stay byte-exact.

use serde_json::json;

use crate::support::mock::DEEPSEEK_JSON;
use crate::support::{MockUpstream, TestGateway, assemble, config_with, openai_events};

async fn gateway(mock: &MockUpstream) -> TestGateway {
    // Whole answers asked as sent: these tests read each adapter's JSON path (the default,
    // a whole answer put together from a stream, is tests/it/whole_answers.rs).
    let sources = format!(
        "sources:\n  - name: ds\n    base_url: {}\n    stream_whole_answers: false\n    api_key: sk-ds-0123456789\n    adapter: deepseek\n    models: [{{name: deepseek-reasoner, upstream: deepseek-fixture}}]\n",
        mock.url
    );
    TestGateway::start(&config_with(&sources)).await
}

#[tokio::test]
async fn a_reply_with_cache_details_passes_through_byte_for_byte() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let request = json!({"model": "deepseek-reasoner", "messages": [{"role": "user", "content": "Hi"}]});
    assert_eq!(gw.chat(request).await.text().await.unwrap(), DEEPSEEK_JSON);
    assert_eq!(mock.state.requests()[0].headers["authorization"], "Bearer sk-ds-0123456789");
}

#[tokio::test]
async fn streamed_reasoning_and_cache_hits_reach_the_unified_form() {
    let mock = MockUpstream::start().await;
    let gw = gateway(&mock).await;
    let request =
        json!({"model": "deepseek-reasoner", "stream": true, "messages": [{"role": "user", "content": "Hi"}]});
    let (chunks, done) = openai_events(&gw.chat(request).await.text().await.unwrap());
    assert!(done);
    let all = assemble(&chunks);
    assert_eq!(all.reasoning, "Greeting, so greet back.");
    assert_eq!(all.content, "Hello!");
    let usage = all.usage.unwrap();
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 12);
    assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], 5);
}
