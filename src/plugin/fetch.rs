//! The one network path a guest has: an HTTP request the operator allowed for its adapter
//! (a legacy script fetching a token, say), bounded to 30 s and 4 MiB. The guest's call is
//! suspended meanwhile (an async import), so the runtime worker keeps serving others.

use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(30);
const MAX_BODY: usize = 4 << 20;

/// (status, body) or why it failed.
pub async fn run(method: &str, url: &str, body: Option<String>) -> Result<(u16, String), String> {
    let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| format!("`{method}` is not a method"))?;
    let client = reqwest::Client::builder().timeout(TIMEOUT).build().map_err(|e| e.to_string())?;
    let mut request = client.request(method, url);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body);
    }
    let mut response = request.send().await.map_err(|e| format!("request failed: {e}"))?;
    let status = response.status().as_u16();
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("reading the body failed: {e}"))? {
        if bytes.len() + chunk.len() > MAX_BODY {
            return Err(format!("the response is larger than {} MiB", MAX_BODY >> 20));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}
