//! Streaming probe: runs N streaming chat requests one after another and reports, as JSON,
//! the time to the first chunk and the gaps between chunks (p50, p99), in microseconds.
//! Usage: probe URL N [BEARER]   (URL of a /v1/chat/completions endpoint)

use std::time::Instant;

use futures::StreamExt;

fn pct(v: &mut [u64], p: f64) -> u64 {
    v.sort_unstable();
    v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1))).copied().unwrap_or(0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).expect("usage: probe URL N [BEARER]").clone();
    let n: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(100);
    let bearer = args.get(3).cloned().unwrap_or_else(|| "sk-bench".into());
    let client = reqwest::Client::new();
    let body = serde_json::json!({"model": "bench", "stream": true, "messages": [{"role": "user", "content": "Hello"}]});
    let (mut firsts, mut gaps, mut errors) = (Vec::new(), Vec::new(), 0usize);
    for _ in 0..n {
        let started = Instant::now();
        let response = match client.post(&url).bearer_auth(&bearer).json(&body).send().await {
            Ok(r) if r.status().is_success() => r,
            _ => {
                errors += 1;
                continue;
            }
        };
        let mut stream = response.bytes_stream();
        let mut buffer = Vec::new();
        let mut last: Option<Instant> = None;
        while let Some(Ok(bytes)) = stream.next().await {
            let now = Instant::now();
            buffer.extend_from_slice(&bytes);
            // Each complete SSE event that arrived in this read counts at this instant.
            while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
                buffer.drain(..end + 2);
                match last {
                    None => firsts.push(now.duration_since(started).as_micros() as u64),
                    Some(prev) => gaps.push(now.duration_since(prev).as_micros() as u64),
                }
                last = Some(now);
            }
        }
    }
    println!(
        "{}",
        serde_json::json!({
            "streams": n, "errors": errors,
            "first_chunk_p50_us": pct(&mut firsts, 0.5), "first_chunk_p99_us": pct(&mut firsts, 0.99),
            "gap_p50_us": pct(&mut gaps, 0.5), "gap_p99_us": pct(&mut gaps, 0.99),
        })
    );
}
