//! cargo-fuzz target: any bytes as unified adapter output into the books (the whole input as one
//! response, each line as a stream chunk); reading them must not panic, and they stay bounded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard::provider::Tally;

/// What the books may keep beyond 8 bytes per byte fed (as in tests/it/fuzz.rs).
const SLACK: usize = 256 << 10;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut streamed = Tally::default();
    for chunk in text.lines() {
        streamed.add_chunk(chunk);
    }
    for tally in [Tally::of_response(&text), streamed] {
        let _ = tally.tokens();
        let kept = tally.assistant_message().to_string().len();
        assert!(kept <= 8 * data.len() + SLACK, "the books keep {kept} bytes for {} bytes fed", data.len());
    }
});
