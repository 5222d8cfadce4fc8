//! Test fixture, never embedded: a deliberately hostile adapter for the sandbox tests.
//! The unified request's `model` picks the misbehaviour: loop, grow, trap, huge, snoop;
//! anything else behaves.

use adapter_kit::{
    AdapterError, Guest, GuestSession, HttpRequest, HttpResponse, Metadata, SourceContext, StreamEvent, StreamFraming,
    StreamOutput, parse_request,
};

struct Hostile;

impl Guest for Hostile {
    type Session = Session;

    fn describe() -> Metadata {
        Metadata {
            name: "hostile".into(),
            version: "0.0.0".into(),
            protocol: "openai-chat".into(),
            stream_framing: StreamFraming::Sse,
        }
    }
}

struct Session {
    ctx: SourceContext,
}

fn misbehave(model: &str) -> Option<Vec<u8>> {
    match model {
        "loop" => {
            let mut n: u64 = 0;
            loop {
                n = std::hint::black_box(n.wrapping_add(1));
            }
        }
        "grow" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "trap" => panic!("hostile adapter panics on purpose"),
        "huge" => Some(vec![b'x'; 6 << 20]),
        // Reports what the sandbox let it see; all of it should be nothing.
        "snoop" => Some(
            format!(
                r#"{{"env":{},"args":{},"read_file":{},"list_root":{},"connect":{}}}"#,
                std::env::vars().count(),
                std::env::args().count(),
                std::fs::read("/etc/passwd").is_ok(),
                std::fs::read_dir("/").is_ok(),
                std::net::TcpStream::connect("127.0.0.1:80").is_ok()
            )
            .into_bytes(),
        ),
        _ => None,
    }
}

impl GuestSession for Session {
    fn new(ctx: SourceContext) -> Self {
        Session { ctx }
    }

    fn transform_request(&self, request: String) -> Result<HttpRequest, AdapterError> {
        let body = parse_request(&request)?;
        let model = body.get("model").and_then(|m| m.as_str()).unwrap_or_default();
        let body = misbehave(model).unwrap_or_else(|| request.into_bytes());
        Ok(HttpRequest {
            method: "POST".into(),
            url: format!("{}/chat/completions", self.ctx.base_url),
            headers: vec![],
            body,
        })
    }

    fn transform_response(&self, response: HttpResponse) -> Result<String, AdapterError> {
        Ok(String::from_utf8_lossy(&response.body).into_owned())
    }

    fn transform_stream_chunk(&self, event: StreamEvent) -> Result<StreamOutput, AdapterError> {
        Ok(StreamOutput { chunks: vec![event.data], done: false })
    }

    fn finish_stream(&self) -> Result<StreamOutput, AdapterError> {
        Ok(StreamOutput { chunks: vec![], done: true })
    }
}

adapter_kit::export_unified!(Hostile);
