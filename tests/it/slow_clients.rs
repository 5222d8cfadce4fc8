//! Clients that stop reading or flood: a stalled reader stalls its own upstream, nothing piles up
//! in the gateway and the others are served meanwhile; an HTTP/2 rapid-reset flood gets its
//! connection closed and leaves every in-flight place free.

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

use crate::support::faulty::{Answer, Behaviour, FaultyUpstream, Flood, FloodEnd, chunk_event};
use crate::support::{KEY, TestGateway, chat_body, config_with};

const ANSWER: Answer =
    Answer { model: "upstream-model", text: "Served meanwhile.", prompt_tokens: 7, completion_tokens: 3 };

/// The flooding upstream's answer: endless events of 16 KiB of text each.
const DELTA_BYTES: usize = 16 * 1024;
/// More than any buffer between the upstream and a stalled client could hold.
const FLOOD_LIMIT: usize = 512 << 20;
/// What may sit between a stalled client and its upstream: the loopback sockets' buffers of both
/// hops (receive buffers grow up to 32 MiB each on these machines) and the gateway's own.
const IN_TRANSIT_BOUND: usize = 128 << 20;
/// A write that waits this long means the reader has stopped pulling.
const STALL: Duration = Duration::from_secs(3);
const GUARD: Duration = Duration::from_secs(120);

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(GUARD, f).await.unwrap_or_else(|_| panic!("not within {GUARD:?}: {what}"))
}

/// A gateway with `flood` (model `endless`, its one answer a flood) and `calm` (model `calm`).
async fn gateway(flooding: &FaultyUpstream, calm: &FaultyUpstream, settings: &str) -> TestGateway {
    TestGateway::start(&config_with(&format!(
        "{settings}sources:
  - {{name: flood, base_url: '{}', models: [{{name: endless}}]}}
  - {{name: calm, base_url: '{}', models: [{{name: calm}}]}}
",
        flooding.url, calm.url
    )))
    .await
}

async fn flooding_upstream(flood: &Arc<Flood>) -> FaultyUpstream {
    let delta = serde_json::json!({ "content": "x".repeat(DELTA_BYTES) }).to_string();
    let event = chunk_event(ANSWER.model, &delta, None);
    let flood = flood.clone();
    FaultyUpstream::start(move |_| Behaviour::Flood { event: event.clone(), flood: flood.clone() }).await
}

/// The flood stalled with a bounded amount written: the gateway stopped pulling from the
/// upstream when its client stopped reading, instead of buffering the answer.
async fn assert_stalled_within_bound(flood: &Flood) {
    match within("the flood's end", flood.ended()).await {
        FloodEnd::Stalled(written) => assert!(
            written < IN_TRANSIT_BOUND,
            "{} MiB went upstream → gateway for a client reading nothing",
            written >> 20
        ),
        other => panic!("the upstream was never held back: {other:?}"),
    }
}

#[tokio::test]
async fn an_http1_client_that_stops_reading_holds_back_its_upstream_not_the_gateway() {
    let flood = Flood::new(FLOOD_LIMIT, STALL);
    let (flooding, calm) = (flooding_upstream(&flood).await, FaultyUpstream::healthy(ANSWER).await);
    let gw = gateway(&flooding, &calm, "").await;

    // A client that asks for a stream and never reads a byte of it.
    let addr = gw.url.trim_start_matches("http://").to_string();
    let mut stalled = TcpStream::connect(&addr).await.unwrap();
    let body = chat_body("endless", true).to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {KEY}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stalled.write_all(request.as_bytes()).await.unwrap();

    assert_stalled_within_bound(&flood).await;
    let served = within("a request while the other stalls", gw.chat(chat_body("calm", false))).await;
    assert_eq!(served.status(), 200);
    let answer: serde_json::Value = served.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], ANSWER.text);

    // The client leaves: the gateway lets go of the upstream.
    drop(stalled);
    within("the stalled upstream let go", flooding.until_ended(1)).await;
}

#[tokio::test]
async fn an_http2_stream_its_client_does_not_read_holds_back_its_upstream_not_the_connection() {
    let flood = Flood::new(FLOOD_LIMIT, STALL);
    let (flooding, calm) = (flooding_upstream(&flood).await, FaultyUpstream::healthy(ANSWER).await);
    let gw = gateway(&flooding, &calm, "").await;
    let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let url = format!("{}/v1/chat/completions", gw.url);

    // The head is read, the body never: h2's flow control holds the gateway back.
    let unread = client.post(&url).bearer_auth(KEY).json(&chat_body("endless", true)).send().await.unwrap();
    assert_eq!((unread.version(), unread.status().as_u16()), (reqwest::Version::HTTP_2, 200));
    assert_stalled_within_bound(&flood).await;

    // Another stream on the same connection is served meanwhile.
    let served = within("a stream beside the stalled one", async {
        client.post(&url).bearer_auth(KEY).json(&chat_body("calm", false)).send().await.unwrap()
    })
    .await;
    assert_eq!((served.version(), served.status().as_u16()), (reqwest::Version::HTTP_2, 200));
    let answer: serde_json::Value = served.json().await.unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], ANSWER.text);

    drop(unread);
    within("the stalled upstream let go", flooding.until_ended(1)).await;
}

#[tokio::test]
async fn an_http2_rapid_reset_flood_gets_goaway_and_leaves_every_place_free() {
    const PLACES: usize = 8;
    let gate = Arc::new(Semaphore::new(0));
    let gated = gate.clone();
    let calm = FaultyUpstream::start(move |arrival| Behaviour::Gated {
        gate: gated.clone(),
        then: Box::new(ANSWER.to(arrival)),
    })
    .await;
    let gw = gateway(&calm, &calm, &format!("server: {{max_in_flight: {PLACES}}}\n")).await;
    let addr = gw.url.trim_start_matches("http://").to_string();

    // Streams opened and reset at once, each HEADERS frame followed by its RST_STREAM, as the
    // attack (CVE-2023-44487) writes them: raw frames, no client library pacing them.
    let mut flood = TcpStream::connect(&addr).await.unwrap();
    let frames = rapid_reset_frames(&addr, 1000);
    let (mut from_gateway, mut to_gateway) = flood.split();
    let (wrote, goaway) = tokio::join!(to_gateway.write_all(&frames), async {
        within("the gateway's GOAWAY", goaway_code(&mut from_gateway)).await
    });
    // The gateway may close before reading all of it: a failed write is the expected end too.
    drop(wrote);
    assert_eq!(goaway, Some(ENHANCE_YOUR_CALM), "the gateway closes a connection flooding it with resets");

    // Every place is free: PLACES requests at once all reach the upstream (none is refused 503),
    // which holds them until all are in.
    let client = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let url = format!("{}/v1/chat/completions", gw.url);
    let requests = (0..PLACES).map(|_| client.post(&url).bearer_auth(KEY).json(&chat_body("calm", false)).send());
    let answers = tokio::spawn(join_all(requests));
    within("every place taken at once", calm.until_attempts(PLACES)).await;
    gate.add_permits(PLACES);
    for answer in within("the answers", answers).await.unwrap() {
        assert_eq!(answer.unwrap().status(), 200);
    }
    assert_eq!(calm.attempts(), PLACES, "no reset stream reached the upstream");
}

/// HTTP/2's GOAWAY error code for a peer making too much work.
const ENHANCE_YOUR_CALM: u32 = 0xb;

/// The client preface, empty SETTINGS, then `pairs` requests (odd stream ids from 1), each a
/// HEADERS frame (the head, no END_STREAM: a body would follow) and at once a RST_STREAM (CANCEL).
fn rapid_reset_frames(authority: &str, pairs: u32) -> Vec<u8> {
    fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
    }
    // HPACK, no Huffman, no dynamic table: indexed `:method: POST` (3) and `:scheme: http` (6);
    // `:path` (4) and `:authority` (1) as literals with an indexed name; new-name literals.
    fn literal(out: &mut Vec<u8>, name: Option<&str>, index: u8, value: &str) {
        out.push(index);
        if let Some(name) = name {
            out.push(name.len() as u8);
            out.extend_from_slice(name.as_bytes());
        }
        out.push(value.len() as u8);
        out.extend_from_slice(value.as_bytes());
    }
    let mut head = vec![0x83, 0x86];
    literal(&mut head, None, 0x04, "/v1/chat/completions");
    literal(&mut head, None, 0x01, authority);
    literal(&mut head, Some("authorization"), 0x00, &format!("Bearer {KEY}"));
    literal(&mut head, Some("content-type"), 0x00, "application/json");
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut out, 0x4, 0, 0, &[]);
    for stream in (0..pairs).map(|i| 2 * i + 1) {
        frame(&mut out, 0x1, 0x4, stream, &head);
        frame(&mut out, 0x3, 0, stream, &0x8u32.to_be_bytes());
    }
    out
}

/// Reads the gateway's frames until its GOAWAY, whose error code it returns; `None` if the
/// connection ends without one.
async fn goaway_code(from: &mut (impl tokio::io::AsyncRead + Unpin)) -> Option<u32> {
    let mut header = [0u8; 9];
    loop {
        from.read_exact(&mut header).await.ok()?;
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; length];
        from.read_exact(&mut payload).await.ok()?;
        if header[3] == 0x7 && length >= 8 {
            return Some(u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]));
        }
    }
}
