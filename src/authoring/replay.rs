//! A stream replayed through a policy's `on-stream` the way the gateway drives it
//! (src/server/policy/stream.rs), for one choice of one policy alone: each delta is added to the
//! text held back, the whole is checked (`last: false`) and all but its last `hold_back`
//! characters are released; when the deltas are over, what is still held is checked once more
//! (`last: true`) and released. An empty delta is passed on unchecked, as the host does.

use std::future::Future;

/// What one `on-stream` call decided, for the replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamStep<D> {
    Allow,
    /// The held text, replaced.
    Rewrite(String),
    /// The stream ends here with an error event.
    Deny(D),
}

/// What the client would have seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed<D> {
    /// Every character released to the client, in order.
    pub seen: String,
    /// `on-stream` calls made (the final `last` one included).
    pub calls: usize,
    pub rewrites: usize,
    /// The denial that ended the stream, if one did (`seen` is what was sent before it).
    pub denied: Option<D>,
}

impl<D> Replayed<D> {
    /// Counts one call's step: a rewrite replaces the held text, a denial ends the replay (true).
    fn took(&mut self, step: StreamStep<D>, held: &mut String) -> bool {
        match step {
            StreamStep::Allow => false,
            StreamStep::Rewrite(text) => {
                self.rewrites += 1;
                *held = text;
                false
            }
            StreamStep::Deny(denial) => {
                self.denied = Some(denial);
                true
            }
        }
    }
}

/// Replays `deltas` through `check(text, last)` with `hold_back` characters held back. A
/// failed call (`Err`) ends the replay with that error.
pub async fn replay<D, E, F, Fut>(deltas: &[String], hold_back: usize, mut check: F) -> Result<Replayed<D>, E>
where
    F: FnMut(String, bool) -> Fut,
    Fut: Future<Output = Result<StreamStep<D>, E>>,
{
    let mut out = Replayed { seen: String::new(), calls: 0, rewrites: 0, denied: None };
    let mut held = String::new();
    for delta in deltas.iter().filter(|d| !d.is_empty()) {
        held.push_str(delta);
        out.calls += 1;
        if out.took(check(held.clone(), false).await?, &mut held) {
            return Ok(out);
        }
        out.seen.push_str(&crate::plugin::release_held(&mut held, hold_back));
    }
    if !held.is_empty() {
        out.calls += 1;
        if out.took(check(held.clone(), true).await?, &mut held) {
            return Ok(out);
        }
        out.seen.push_str(&held);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    fn deltas(parts: &[&str]) -> Vec<String> {
        parts.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_call_sees_the_held_text_plus_the_newest_delta() {
        let mut calls = Vec::new();
        let out = block_on(replay::<(), (), _, _>(&deltas(&["abcdef", "", "gh", "ij"]), 4, |text, last| {
            calls.push((text, last));
            std::future::ready(Ok(StreamStep::Allow))
        }))
        .unwrap();
        assert_eq!(
            calls,
            vec![
                ("abcdef".to_string(), false),
                ("cdefgh".to_string(), false),
                ("efghij".to_string(), false),
                ("ghij".to_string(), true)
            ]
        );
        assert_eq!(out, Replayed { seen: "abcdefghij".into(), calls: 4, rewrites: 0, denied: None });
    }

    #[test]
    fn a_rewrite_replaces_the_held_text_and_a_denial_ends_the_stream() {
        // Redacts "secret" once it is whole; held back 8, so "sec" + "ret" is never sent in part.
        let redact = |text: String, _last: bool| {
            std::future::ready(Ok::<_, ()>(if text.contains("secret") {
                StreamStep::<()>::Rewrite(text.replace("secret", "[X]"))
            } else {
                StreamStep::Allow
            }))
        };
        let out = block_on(replay(&deltas(&["the sec", "ret is out"]), 8, redact)).unwrap();
        assert_eq!((out.seen.as_str(), out.rewrites, out.calls), ("the [X] is out", 1, 3));

        let deny = |text: String, _last: bool| {
            std::future::ready(Ok::<_, ()>(if text.contains("STOP") {
                StreamStep::Deny("stopped")
            } else {
                StreamStep::Allow
            }))
        };
        let out = block_on(replay(&deltas(&["one two three ", "four STOP five"]), 0, deny)).unwrap();
        assert_eq!((out.seen.as_str(), out.denied), ("one two three ", Some("stopped")));
        let failed = block_on(replay::<(), _, _, _>(&deltas(&["x"]), 0, |_, _| std::future::ready(Err("trap"))));
        assert_eq!(failed, Err("trap"));
    }
}
