//! Test fixture, never embedded: a deliberately failing policy for the sandbox tests. Its
//! `mode` setting picks the misbehaviour: trap, loop, grow, not-json, stop-stream, or allow.

use policy_kit::{Context, Finish, Guest, Hooks, Metadata, Verdict, deny, setting};

struct Hostile;

fn misbehave(context: &Context) -> Verdict {
    match setting(&context.settings, "mode").unwrap_or("allow") {
        "trap" => panic!("a policy that traps"),
        "loop" => loop {
            std::hint::black_box(());
        },
        "grow" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1; 1 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "not-json" => Verdict::Rewrite("this is not JSON".into()),
        _ => Verdict::Allow,
    }
}

impl Guest for Hostile {
    fn describe() -> Metadata {
        policy_kit::metadata("hostile-policy", Hooks::REQUEST | Hooks::STREAM, 0)
    }

    fn on_request(context: Context, _request: String) -> Verdict {
        match setting(&context.settings, "mode") {
            Some("stop-stream") => Verdict::Allow,
            _ => misbehave(&context),
        }
    }

    fn on_answer(_context: Context, _answer: String) -> Verdict {
        Verdict::Allow
    }

    /// `stop-stream`: lets the first text through, ends the stream at the first text after it.
    fn on_stream(context: Context, text: String, _last: bool) -> Verdict {
        match setting(&context.settings, "mode") {
            Some("stop-stream") if text.contains("STOP") => {
                deny(451, "stopped_by_policy", "the policy ended this answer")
            }
            _ => Verdict::Allow,
        }
    }

    fn on_finish(_context: Context, _finish: Finish) {}
}

policy_kit::export!(Hostile);
