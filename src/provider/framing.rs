//! Splits an upstream streaming body into events by the adapter's declared framing:
//! SSE (eventsource-stream) or NDJSON (one JSON document per line).

use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use tokio_util::codec::{FramedRead, LinesCodec};
use tokio_util::io::StreamReader;

use crate::plugin::{StreamEvent, StreamFraming};

/// Longest single NDJSON line accepted from an upstream.
const MAX_LINE_BYTES: usize = 16 << 20;

pub type EventStream = BoxStream<'static, Result<StreamEvent, String>>;

pub fn events(response: reqwest::Response, framing: StreamFraming) -> EventStream {
    let bytes = response.bytes_stream();
    match framing {
        StreamFraming::Sse => {
            use eventsource_stream::Eventsource;
            bytes
                .eventsource()
                .map_ok(|e| StreamEvent { event: e.event, data: e.data })
                .map_err(|e| e.to_string())
                .boxed()
        }
        StreamFraming::Ndjson => {
            let reader = StreamReader::new(bytes.map_err(std::io::Error::other));
            FramedRead::new(reader, LinesCodec::new_with_max_length(MAX_LINE_BYTES))
                .try_filter(|line| futures::future::ready(!line.trim().is_empty()))
                .map_ok(|line| StreamEvent { event: String::new(), data: line })
                .map_err(|e| e.to_string())
                .boxed()
        }
    }
}
