//! Latency probe with microsecond resolution, one request at a time:
//!   probe latency URL N BODY   whole responses: p50 / p99 / p99.9 of the time to the full answer
//!   probe stream URL N BODY    streams: time to the first chunk and gaps between chunks
//! Prints JSON (microseconds). Sends `Authorization: Bearer $PROBE_KEY` (default sk-bench) and
//! any `PROBE_HEADERS` ("name: value|name: value").

use std::time::Instant;

use futures::StreamExt;

fn pct(v: &mut [u64], p: f64) -> u64 {
    v.sort_unstable();
    v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1))).copied().unwrap_or(0)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: probe latency|stream URL N BODY";
    let (mode, url) = (args.get(1).expect(usage).clone(), args.get(2).expect(usage).clone());
    let n: usize = args.get(3).and_then(|v| v.parse().ok()).expect(usage);
    let body = args.get(4).expect(usage).clone();
    let key = std::env::var("PROBE_KEY").unwrap_or_else(|_| "sk-bench".into());
    let mut headers = reqwest::header::HeaderMap::new();
    for pair in std::env::var("PROBE_HEADERS").unwrap_or_default().split('|').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once(':').expect("PROBE_HEADERS: name: value|name: value");
        headers.insert(reqwest::header::HeaderName::from_bytes(k.trim().as_bytes()).unwrap(), v.trim().parse().unwrap());
    }
    let client = reqwest::Client::builder().default_headers(headers).build().unwrap();
    let (mut firsts, mut gaps, mut errors) = (Vec::new(), Vec::new(), 0usize);
    for _ in 0..n {
        let started = Instant::now();
        let request = client.post(&url).bearer_auth(&key).header("content-type", "application/json").body(body.clone());
        let response = match request.send().await {
            Ok(r) if r.status().is_success() => r,
            _ => {
                errors += 1;
                continue;
            }
        };
        if mode == "latency" {
            match response.bytes().await {
                Ok(_) => firsts.push(started.elapsed().as_micros() as u64),
                Err(_) => errors += 1,
            }
            continue;
        }
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
    let (p50, p99, p999) = (pct(&mut firsts, 0.5), pct(&mut firsts, 0.99), pct(&mut firsts, 0.999));
    println!(
        "{}",
        serde_json::json!({
            "requests": n, "errors": errors, "p50_us": p50, "p99_us": p99, "p999_us": p999,
            "gap_p50_us": pct(&mut gaps, 0.5), "gap_p99_us": pct(&mut gaps, 0.99),
        })
    );
}
