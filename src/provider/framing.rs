//! Splits an upstream streaming body into events by the adapter's declared framing: SSE
//! (`event:`/`data:` lines ended by a blank line) or NDJSON (one JSON document per line).
//! Upstream bytes are hostile: lines and events are capped and every byte is scanned once.

use bytes::{Buf, Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt};

use crate::plugin::{StreamEvent, StreamFraming};

/// Longest line accepted from an upstream (an SSE field line or one NDJSON document).
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// Largest SSE event (its `data:` lines joined) accepted from an upstream.
pub const MAX_EVENT_BYTES: usize = 16 << 20;

/// Why the event stream ended early.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Reading the body failed (reset, closed mid-chunk).
    #[error("stream broke: {0}")]
    Transport(String),
    /// The upstream sent something no well-behaved stream contains (an endless line).
    #[error("the upstream's stream is malformed: {0}")]
    Invalid(String),
}

pub type EventStream = BoxStream<'static, Result<StreamEvent, FrameError>>;

pub fn events(response: super::UpstreamResponse, framing: StreamFraming) -> EventStream {
    let decoder = Decoder::new(framing, MAX_LINE_BYTES, MAX_EVENT_BYTES);
    let body = http_body_util::BodyDataStream::new(response.into_body()).map(|r| r.map_err(|e| e.to_string())).boxed();
    futures::stream::unfold((body, decoder, false), |(mut body, mut decoder, mut ended)| async move {
        loop {
            match decoder.next_event(ended) {
                Err(e) => return Some((Err(e), (body, decoder.fused(), true))),
                Ok(Some(event)) => return Some((Ok(event), (body, decoder, ended))),
                Ok(None) if ended => return None,
                Ok(None) => {}
            }
            match body.next().await {
                Some(Ok(bytes)) => decoder.push(bytes),
                Some(Err(e)) => return Some((Err(FrameError::Transport(e)), (body, decoder.fused(), true))),
                None => ended = true,
            }
        }
    })
    .boxed()
}

/// Splits a whole recorded body into events, as `events` would while it arrived.
pub fn split(body: &[u8], framing: StreamFraming) -> Result<Vec<StreamEvent>, FrameError> {
    let mut decoder = Decoder::new(framing, MAX_LINE_BYTES, MAX_EVENT_BYTES);
    decoder.push(Bytes::copy_from_slice(body));
    let mut out = Vec::new();
    while let Some(event) = decoder.next_event(true)? {
        out.push(event);
    }
    Ok(out)
}

/// Incremental, linear-time line splitter and SSE event assembler.
pub struct Decoder {
    framing: StreamFraming,
    max_line: usize,
    max_event: usize,
    buf: BytesMut,
    /// Bytes of `buf` already searched for a line end.
    scanned: usize,
    /// The last line ended in `\r`: a `\n` that follows belongs to it.
    skip_lf: bool,
    event: String,
    data: String,
    has_data: bool,
    /// After an error nothing more is produced.
    failed: bool,
}

impl Decoder {
    pub fn new(framing: StreamFraming, max_line: usize, max_event: usize) -> Decoder {
        Decoder {
            framing,
            max_line,
            max_event,
            buf: BytesMut::new(),
            scanned: 0,
            skip_lf: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            failed: false,
        }
    }

    fn fused(mut self) -> Decoder {
        self.failed = true;
        self
    }

    pub fn push(&mut self, bytes: Bytes) {
        if !self.failed {
            self.buf.extend_from_slice(&bytes);
        }
    }

    /// The next complete event, if the bytes so far hold one. `ended`: the body is over, so an
    /// SSE event without its blank line still counts (its lines complete), and so does a last
    /// NDJSON line without its line end; an SSE line cut short does not.
    pub fn next_event(&mut self, ended: bool) -> Result<Option<StreamEvent>, FrameError> {
        if self.failed {
            return Ok(None);
        }
        while let Some(line) = self.next_line(ended)? {
            if let Some(event) = self.take_line(&line)? {
                return Ok(Some(event));
            }
        }
        if ended && self.framing == StreamFraming::Sse {
            return Ok(self.dispatch());
        }
        Ok(None)
    }

    /// Cuts the next line off the buffer; scanning resumes where the last search stopped.
    fn next_line(&mut self, ended: bool) -> Result<Option<String>, FrameError> {
        if self.skip_lf && !self.buf.is_empty() {
            if self.buf[0] == b'\n' {
                self.buf.advance(1);
            }
            self.skip_lf = false;
        }
        let found = self.buf[self.scanned..].iter().position(|b| *b == b'\n' || *b == b'\r');
        let (line, ending) = match found {
            Some(at) => {
                let end = self.scanned + at;
                let line = self.buf.split_to(end);
                let ending = self.buf[0];
                self.buf.advance(1);
                (line, Some(ending))
            }
            // An SSE stream cut inside a line is cut: the spec drops an unfinished event, and a
            // half line read as data would be an "invalid" chunk rather than a truncated stream.
            None if ended && !self.buf.is_empty() && self.framing == StreamFraming::Sse => {
                self.buf.clear();
                self.scanned = 0;
                return Ok(None);
            }
            None if ended && !self.buf.is_empty() => (self.buf.split(), None),
            None => {
                self.scanned = self.buf.len();
                if self.scanned > self.max_line {
                    return Err(self.invalid(format!("a line is longer than {} MiB", self.max_line >> 20)));
                }
                return Ok(None);
            }
        };
        self.scanned = 0;
        if line.len() > self.max_line {
            return Err(self.invalid(format!("a line is longer than {} MiB", self.max_line >> 20)));
        }
        if ending == Some(b'\r') {
            self.skip_lf = true;
            if let Some(b'\n') = self.buf.first() {
                self.buf.advance(1);
                self.skip_lf = false;
            }
        }
        Ok(Some(String::from_utf8_lossy(&line).into_owned()))
    }

    /// Applies one line; an event when it completed one.
    fn take_line(&mut self, line: &str) -> Result<Option<StreamEvent>, FrameError> {
        if self.framing == StreamFraming::Ndjson {
            return Ok((!line.trim().is_empty()).then(|| StreamEvent { event: String::new(), data: line.to_string() }));
        }
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                if self.data.len() + value.len() + 1 > self.max_event {
                    return Err(self.invalid(format!("an event is larger than {} MiB", self.max_event >> 20)));
                }
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            _ => {}
        }
        Ok(None)
    }

    /// The event the lines so far make, as SSE dispatches it (none without `data:`).
    fn dispatch(&mut self) -> Option<StreamEvent> {
        let event = std::mem::take(&mut self.event);
        let mut data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        data.pop();
        let event = if event.is_empty() { "message".to_string() } else { event };
        Some(StreamEvent { event, data })
    }

    fn invalid(&mut self, message: String) -> FrameError {
        self.failed = true;
        self.buf = BytesMut::new();
        self.data = String::new();
        FrameError::Invalid(message)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Feeds `body` in the given pieces; every event, then the error if one ended it.
    fn decode(framing: StreamFraming, pieces: &[&[u8]], max: usize) -> (Vec<(String, String)>, Option<FrameError>) {
        let mut decoder = Decoder::new(framing, max, max);
        let mut out = Vec::new();
        let mut drain = |decoder: &mut Decoder, ended: bool| -> Option<FrameError> {
            loop {
                match decoder.next_event(ended) {
                    Ok(Some(e)) => out.push((e.event, e.data)),
                    Ok(None) => return None,
                    Err(e) => return Some(e),
                }
            }
        };
        for piece in pieces {
            decoder.push(Bytes::copy_from_slice(piece));
            if let Some(e) = drain(&mut decoder, false) {
                return (out, Some(e));
            }
        }
        let error = drain(&mut decoder, true);
        (out, error)
    }

    fn whole(framing: StreamFraming, body: &str) -> Vec<(String, String)> {
        decode(framing, &[body.as_bytes()], MAX_LINE_BYTES).0
    }

    #[test]
    fn sse_fields_comments_and_line_endings() {
        let body = ": keep-alive\r\nevent: ping\r\ndata: {}\r\n\r\ndata: a\ndata:b\n\nid: 7\nretry: 10\n\ndata: c\r\rdata: last\n";
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(
            whole(StreamFraming::Sse, body),
            pairs(&[("ping", "{}"), ("message", "a\nb"), ("message", "c"), ("message", "last")])
        );
    }

    #[test]
    fn an_sse_stream_cut_inside_a_line_drops_the_half_line() {
        let events = whole(StreamFraming::Sse, "data: {\"a\":1}\n\ndata: {\"type\":\"message_del");
        assert_eq!(events.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(), ["{\"a\":1}"]);
        let events = whole(StreamFraming::Sse, "data: one\ndata: two\ndata: thr");
        assert_eq!(events.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(), ["one\ntwo"], "complete lines still count");
    }

    #[test]
    fn ndjson_skips_blank_lines_and_keeps_a_last_line_without_newline() {
        let events = whole(StreamFraming::Ndjson, "{\"a\":1}\n\n  \n{\"b\":2}");
        assert_eq!(events.iter().map(|e| e.1.as_str()).collect::<Vec<_>>(), ["{\"a\":1}", "{\"b\":2}"]);
    }

    #[test]
    fn an_endless_line_or_event_fails_once_past_the_cap() {
        let line = vec![b'x'; 100];
        let (events, error) = decode(StreamFraming::Sse, &[b"data: ok\n\ndata: ", &line, &line], 64);
        assert_eq!(events.len(), 1);
        assert!(matches!(error, Some(FrameError::Invalid(m)) if m.contains("line")));
        let lines: Vec<&[u8]> = vec![b"data: 0123456789\n"; 10];
        let (_, error) = decode(StreamFraming::Sse, &lines, 64);
        assert!(matches!(error, Some(FrameError::Invalid(m)) if m.contains("event")));
        let (_, error) = decode(StreamFraming::Ndjson, &[&[b'{'; 65]], 64);
        assert!(error.is_some());
    }

    #[test]
    fn scanning_a_long_line_in_tiny_pieces_stays_linear() {
        // 4 MiB in 1-byte pushes would take hours if each push rescanned the buffer.
        let mut decoder = Decoder::new(StreamFraming::Sse, MAX_LINE_BYTES, MAX_EVENT_BYTES);
        decoder.push(Bytes::from_static(b"data: "));
        let piece = Bytes::from(vec![b'y'; 64]);
        for _ in 0..(4 << 20) / 64 {
            decoder.push(piece.clone());
            assert!(matches!(decoder.next_event(false), Ok(None)));
        }
        decoder.push(Bytes::from_static(b"\n\n"));
        assert_eq!(decoder.next_event(false).ok().flatten().unwrap().data.len(), 4 << 20);
    }

    fn sse_event() -> impl Strategy<Value = (String, Vec<String>)> {
        ("[a-z_]{0,8}", proptest::collection::vec("[^\r\n]{0,20}", 1..4))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn sse_events_survive_any_split_and_line_ending(
            events in proptest::collection::vec(sse_event(), 0..8),
            ending in prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let mut body = String::new();
            let mut expected = Vec::new();
            for (name, lines) in &events {
                if !name.is_empty() {
                    body.push_str(&format!("event: {name}{ending}"));
                }
                for line in lines {
                    body.push_str(&format!("data: {line}{ending}"));
                }
                body.push_str(ending);
                let name = if name.is_empty() { "message" } else { name };
                expected.push((name.to_string(), lines.join("\n")));
            }
            let bytes = body.as_bytes();
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            at.sort();
            let mut pieces = Vec::new();
            let mut from = 0;
            for cut in at {
                pieces.push(&bytes[from..cut]);
                from = cut;
            }
            pieces.push(&bytes[from..]);
            let (got, error) = decode(StreamFraming::Sse, &pieces, MAX_LINE_BYTES);
            prop_assert_eq!(error, None);
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn arbitrary_bytes_decode_the_same_however_split(
            body in proptest::collection::vec(any::<u8>(), 0..512),
            cut in any::<prop::sample::Index>(),
            ndjson in any::<bool>(),
        ) {
            let framing = if ndjson { StreamFraming::Ndjson } else { StreamFraming::Sse };
            let cut = cut.index(body.len() + 1);
            let split = decode(framing, &[&body[..cut], &body[cut..]], 64);
            let one = decode(framing, &[&body], 64);
            // Where an error lands may differ with the split; the events before it may not.
            if split.1.is_none() && one.1.is_none() {
                prop_assert_eq!(split.0, one.0);
            }
        }
    }
}
