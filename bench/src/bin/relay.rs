//! The calibration hop: a do-nothing HTTP relay (axum in, pooled reqwest out, body streamed
//! back untouched) run where a gateway runs. What it adds over `direct` is what the machine
//! charges for one more process and two more loopback hops between cores; what a gateway adds
//! over it is the gateway's own work.
//! Usage: relay PORT UPSTREAM_BASE   (e.g. relay 9150 http://127.0.0.1:9100)

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;

// The gateway's allocator and its settings (src/main.rs): the hop compared on the same stack.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[allow(non_upper_case_globals)]
#[unsafe(export_name = "_rjem_malloc_conf")]
static malloc_conf: &[u8] = b"narenas:1,background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

#[derive(Clone)]
struct Upstream {
    client: reqwest::Client,
    base: String,
}

async fn forward(State(up): State<Upstream>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let mut request = up.client.post(format!("{}{}", up.base, uri.path())).body(body);
    for name in [header::CONTENT_TYPE, header::AUTHORIZATION] {
        if let Some(value) = headers.get(&name) {
            request = request.header(name, value);
        }
    }
    match request.send().await {
        Ok(answer) => {
            let status = answer.status();
            let kind = answer.headers().get(header::CONTENT_TYPE).cloned();
            let mut response = Response::new(Body::from_stream(answer.bytes_stream()));
            *response.status_mut() = status;
            if let Some(kind) = kind {
                response.headers_mut().insert(header::CONTENT_TYPE, kind);
            }
            response
        }
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}

#[tokio::main]
async fn main() {
    let usage = "usage: relay PORT UPSTREAM_BASE";
    let port: u16 = std::env::args().nth(1).and_then(|p| p.parse().ok()).expect(usage);
    let base = std::env::args().nth(2).expect(usage);
    let client = reqwest::Client::builder().tcp_nodelay(true).build().unwrap();
    let app = Router::new().fallback(forward).with_state(Upstream { client, base });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("binding the relay's port");
    let listener = listener.tap_io(|s| {
        let _ = s.set_nodelay(true);
    });
    axum::serve(listener, app).await.unwrap();
}
