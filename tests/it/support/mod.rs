//! Real parts for the integration tests: mock upstreams and a gateway harness.

pub mod gateway;
pub mod mock;

pub use gateway::{KEY, TestGateway, chat_body, config_with, guest_wasm};
pub use mock::MockUpstream;

/// A `sources:` block with one source `mock` (openai adapter) serving the given upstream models.
pub fn mock_source(mock: &MockUpstream, models: &[&str]) -> String {
    let mut out = format!(
        "sources:\n  - name: mock\n    base_url: {}\n    api_key: sk-upstream-secret-0123456789\n    idle_timeout_seconds: 0.5\n    models:\n",
        mock.url
    );
    for m in models {
        out.push_str(&format!("      - name: {m}\n"));
    }
    out
}

/// Reads an SSE body to its end as text.
pub async fn body_text(response: reqwest::Response) -> String {
    response.text().await.unwrap()
}
