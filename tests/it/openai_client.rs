//! The gateway driven by a real OpenAI client library (async-openai), as users would.

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{
    ChatCompletionRequestUserMessageArgs, ChatCompletionStreamOptions, CreateChatCompletionRequestArgs,
};
use futures::StreamExt;

use crate::support::{KEY, MockUpstream, TestGateway, config_with, mock_source};

fn client(gw: &TestGateway) -> Client<OpenAIConfig> {
    Client::with_config(OpenAIConfig::new().with_api_base(format!("{}/v1", gw.url)).with_api_key(KEY))
}

fn request(stream: bool) -> async_openai::types::chat::CreateChatCompletionRequest {
    CreateChatCompletionRequestArgs::default()
        .model("fixture")
        .stream(stream)
        .messages([ChatCompletionRequestUserMessageArgs::default().content("Hello!").build().unwrap().into()])
        .build()
        .unwrap()
}

#[tokio::test]
async fn async_openai_completes_and_lists_models() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config_with(&mock_source(&mock, &["fixture"]))).await;
    let client = client(&gw);

    let response = client.chat().create(request(false)).await.unwrap();
    assert_eq!(response.choices[0].message.content.as_deref(), Some("\n\nHello there, how may I assist you today?"));
    assert_eq!(response.usage.unwrap().total_tokens, 21);

    let models = client.models().list().await.unwrap();
    assert_eq!(models.data.iter().map(|m| m.id.as_str()).collect::<Vec<_>>(), ["fixture"]);
}

#[tokio::test]
async fn async_openai_streams_content_and_usage() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config_with(&mock_source(&mock, &["fixture"]))).await;
    let mut asking = request(true);
    asking.stream_options = Some(ChatCompletionStreamOptions { include_usage: Some(true), include_obfuscation: None });
    let mut stream = client(&gw).chat().create_stream(asking).await.unwrap();
    let mut text = String::new();
    let mut finish = None;
    let mut usage = None;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        for choice in &chunk.choices {
            text.push_str(choice.delta.content.as_deref().unwrap_or(""));
            finish = finish.or(choice.finish_reason);
        }
        usage = usage.or(chunk.usage);
    }
    assert_eq!(text, "Hello there!");
    assert!(finish.is_some());
    assert_eq!(usage.unwrap().total_tokens, 12);
}
