//! Property tests (proptest, bounded case counts), each in a process of its own so an abort fails only it: adapters
//! fed mutated upstream answers, the books fed adapter output, front doors fed mutated bodies, the config loader.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config as Cases, TestCaseError, TestError, TestRunner};
use serde_json::{Value, json};
use switchyard::config::{AdapterName, Config, ConfigError};
use switchyard::plugin::{Adapter, AdapterSession, GuestResult, HttpResponse, Operation, PluginHost, SandboxLimits};
use switchyard::plugin::{SourceContext, StreamEvent, StreamFraming, StreamOutput};
use switchyard::provider::{Tally, prompt_estimate};
use switchyard::scheduler::{Clock, SystemClock};

use crate::support::gateway::shared_cache;
use crate::support::mock::*;
use crate::support::{KEY, MockUpstream, TestGateway, config_with};

// ---- running a property ------------------------------------------------------------------

/// Set in the child process a property runs in.
const CHILD: &str = "SWITCHYARD_FUZZ_CHILD";

/// Runs `body` in a child process (this test binary, this one test), so that an abort or a
/// stack overflow fails this test, showing the last case it printed, instead of the whole run.
fn isolated(test: &str, body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        return body();
    }
    let name = format!("{}::{test}", module_path!().split_once("::").map_or(module_path!(), |(_, m)| m));
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--include-ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&[out.stdout, out.stderr].concat()).into_owned();
    assert!(out.status.success(), "{name} failed in its own process ({}):\n{}", out.status, tail(&log, 8000));
}

/// The last `n` bytes of `text` (at a character boundary).
fn tail(text: &str, n: usize) -> &str {
    let mut start = text.len().saturating_sub(n);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The first `n` bytes of `bytes`, as text, for failure messages.
fn head(bytes: &[u8], n: usize) -> String {
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(n)]).into_owned();
    if bytes.len() > n { format!("{shown}… ({} bytes)", bytes.len()) } else { shown }
}

/// Checks `cases` inputs (`PROPTEST_CASES` overrides the count) and fails with the smallest
/// failing one. Each case is printed first: after an abort, the last one printed did it.
fn check_all<S: Strategy>(cases: u32, strategy: S, check: impl Fn(&S::Value) -> Result<(), String>)
where
    S::Value: Debug,
{
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() { Cases::default().cases } else { cases };
    let config =
        Cases { cases, failure_persistence: None, max_shrink_iters: 256, max_shrink_time: 60_000, ..Cases::default() };
    let outcome = TestRunner::new(config).run(&strategy, |input| {
        println!("case: {input:?}");
        check(&input).map_err(TestCaseError::fail)
    });
    match outcome {
        Err(TestError::Fail(reason, input)) => panic!("{reason}\nminimal failing input: {input:?}"),
        Err(abort) => panic!("{abort}"),
        Ok(()) => {}
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Runs `work` on a thread with the stack of a process's main thread (8 MiB), where the gateway
/// loads its config. A hang cannot be shrunk, only reported: past `HANG` the process ends (a
/// property runs in a child process of its own) after the case printed last.
fn unless_hung<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::Builder::new().stack_size(8 << 20);
    thread.spawn(move || tx.send(work())).expect("a thread");
    rx.recv_timeout(HANG).unwrap_or_else(|_| {
        eprintln!("the case printed last ran for over {HANG:?}: it hangs");
        std::process::exit(1)
    })
}

/// Past this, a synchronous call is taken to hang rather than to be slow.
const HANG: Duration = Duration::from_secs(120);

/// `work`'s value, or its panic as an error naming `input`.
fn no_panic<T>(input: &[u8], work: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|panic| {
        let message = panic.downcast_ref::<&str>().map(|s| s.to_string()).or(panic.downcast_ref::<String>().cloned());
        format!("panicked: {}\n  on the input {}", message.unwrap_or_default(), head(input, 3000))
    })
}

/// `work`, or an error once `limit` has passed: every call must end in bounded time.
async fn bounded<T>(limit: Duration, what: &str, work: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(limit, work).await.map_err(|_| format!("{what} took longer than {limit:?}"))
}

// ---- mutated documents ---------------------------------------------------------------------

/// Stands for a deep nesting, spliced in as text when rendered (a deep `Value` would overflow
/// this test's own stack when serialized or dropped).
const DEEP: &str = "@@deep:";

/// Field names the upstream protocols, the unified form and the config use: inserted anywhere.
const KEYS: &str = concat!(
    "index tool_calls choices delta message content usage type content_block partial_json candidates ",
    "parts functionCall done error finish_reason stop_reason prompt_tokens completion_tokens ",
    "total_tokens input_tokens output_tokens usageMetadata promptTokenCount data embedding id name ",
    "arguments text thinking model messages stream max_tokens tools sources models keys routes auto ",
    "hours period token_quota timeout_seconds listen",
);

/// Bytes spliced into a rendered document: broken UTF-8, JSON and YAML syntax, `${` expansions.
#[rustfmt::skip]
const TOKENS: &[&[u8]] = &[
    b"\xff", b"\xc3", b"\xed\xa0\x80", b"\"", b"\\", b"\\u", b"\\ud800", b"{", b"}", b"[", b"]", b",", b":",
    b"1e999", b"-", b"\0", b"\n", b"\n  ", b"\t", b"- ", b"&a ", b"*a", b"!!binary ", b"? ", b"|", b">", b"'", b"#",
    b"---\n", b"${", b"${A:-", b"<<: *a\n", b"~", b"%YAML 1.2\n",
];

/// A value that breaks assumptions: extreme numbers, wrong types, deep or long data.
#[derive(Debug, Clone)]
enum Nasty {
    Value(Value),
    Deep(usize),
    Long(usize, char),
}

impl Nasty {
    fn value(&self) -> Value {
        match self {
            Nasty::Value(v) => v.clone(),
            Nasty::Deep(depth) => Value::String(format!("{DEEP}{depth}@@")),
            Nasty::Long(n, c) => Value::String(std::iter::repeat_n(*c, *n).collect()),
        }
    }
}

/// A change to a document's tree; `usize`s pick a node (pre-order) or a key, modulo the count.
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, Nasty),
    /// Removes a member or an element of the picked node.
    Remove(usize, usize),
    /// Sets one of the document's keys, wherever it occurs (every `tool_calls[*].index`).
    Everywhere(usize, Nasty),
    Insert(usize, &'static str, Nasty),
}

/// Text-level damage to a rendered document.
#[derive(Debug, Clone)]
enum Damage {
    Cut(usize),
    Splice { at: usize, remove: usize, insert: Vec<u8> },
}

/// One input: a seed document mutated, a seed's text damaged, or arbitrary bytes.
#[derive(Debug, Clone)]
enum Input {
    Tree { seed: usize, edits: Vec<Edit>, damage: Option<Damage> },
    Text { seed: usize, damage: Vec<Damage> },
    Bytes(Vec<u8>),
}

/// A well-formed document and its original text.
#[derive(Clone)]
struct Seed {
    text: String,
    tree: Value,
}

impl Seed {
    fn json(text: &str) -> Seed {
        Seed { text: text.to_string(), tree: serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.into())) }
    }

    fn yaml(text: &str) -> Seed {
        Seed { text: text.to_string(), tree: serde_yaml::from_str(text).unwrap_or_else(|_| Value::String(text.into())) }
    }
}

impl Input {
    fn bytes(&self, seeds: &[Seed]) -> Vec<u8> {
        match self {
            Input::Tree { seed, edits, damage } => {
                let mut tree = seeds[seed % seeds.len()].tree.clone();
                for edit in edits {
                    apply(&mut tree, edit);
                }
                let mut bytes = render(&tree).into_bytes();
                damage.iter().for_each(|d| spoil(&mut bytes, d));
                bytes
            }
            Input::Text { seed, damage } => {
                let mut bytes = seeds[seed % seeds.len()].text.clone().into_bytes();
                damage.iter().for_each(|d| spoil(&mut bytes, d));
                bytes
            }
            Input::Bytes(bytes) => bytes.clone(),
        }
    }

    /// The same mutation, of seed `seed`.
    fn of_seed(self, seed: usize) -> Input {
        match self {
            Input::Tree { edits, damage, .. } => Input::Tree { seed, edits, damage },
            Input::Text { damage, .. } => Input::Text { seed, damage },
            bytes => bytes,
        }
    }
}

fn count(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(map) => map.values().map(count).sum(),
        _ => 0,
    }
}

fn nth<'a>(value: &'a mut Value, n: &mut usize) -> Option<&'a mut Value> {
    if *n == 0 {
        return Some(value);
    }
    *n -= 1;
    match value {
        Value::Array(items) => items.iter_mut().find_map(|v| nth(v, n)),
        Value::Object(map) => map.values_mut().find_map(|v| nth(v, n)),
        _ => None,
    }
}

fn node(tree: &mut Value, at: usize) -> &mut Value {
    let mut n = at % count(tree);
    nth(tree, &mut n).expect("n is below the node count")
}

fn keys_of(value: &Value, keys: &mut BTreeSet<String>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| keys_of(v, keys)),
        Value::Object(map) => map.iter().for_each(|(k, v)| {
            keys.insert(k.clone());
            keys_of(v, keys)
        }),
        _ => {}
    }
}

fn set_everywhere(value: &mut Value, key: &str, with: &Value) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|v| set_everywhere(v, key, with)),
        Value::Object(map) => map.iter_mut().for_each(|(k, v)| match k == key {
            true => *v = with.clone(),
            false => set_everywhere(v, key, with),
        }),
        _ => {}
    }
}

fn apply(tree: &mut Value, edit: &Edit) {
    match edit {
        Edit::Replace(at, with) => *node(tree, *at) = with.value(),
        Edit::Remove(at, which) => match node(tree, *at) {
            Value::Array(items) if !items.is_empty() => {
                items.remove(which % items.len());
            }
            Value::Object(map) if !map.is_empty() => {
                let key = map.keys().nth(which % map.len()).cloned().expect("in range");
                map.remove(&key);
            }
            _ => {}
        },
        Edit::Everywhere(pick, with) => {
            let mut keys = BTreeSet::new();
            keys_of(tree, &mut keys);
            if let Some(key) = keys.iter().nth(pick % keys.len().max(1)).cloned() {
                set_everywhere(tree, &key, &with.value());
            }
        }
        Edit::Insert(at, key, with) => {
            if let Value::Object(map) = node(tree, *at) {
                map.insert(key.to_string(), with.value());
            }
        }
    }
}

/// JSON text; a document that became a plain string is that text itself.
fn render(tree: &Value) -> String {
    let text = match tree {
        Value::String(raw) if !raw.starts_with(DEEP) => raw.clone(),
        other => other.to_string(),
    };
    let open = format!("\"{DEEP}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(start) = rest.find(&open) {
        let after = &rest[start + open.len()..];
        let Some((depth, next)) = after.split_once("@@\"").and_then(|(d, next)| Some((d.parse().ok()?, next))) else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str(&"[{\"a\":".repeat(depth));
        out.push('0');
        out.push_str(&"}]".repeat(depth));
        rest = next;
    }
    out.push_str(rest);
    out
}

fn spoil(bytes: &mut Vec<u8>, damage: &Damage) {
    match damage {
        Damage::Cut(at) => bytes.truncate(at % (bytes.len() + 1)),
        Damage::Splice { at, remove, insert } => {
            let at = at % (bytes.len() + 1);
            let end = (at + remove).min(bytes.len());
            bytes.splice(at..end, insert.iter().copied());
        }
    }
}

fn text() -> impl Strategy<Value = String> {
    vec(any::<char>(), 0..24).prop_map(String::from_iter)
}

/// Nasty values, nestings up to `deepest` levels.
fn nasty(deepest: usize) -> BoxedStrategy<Nasty> {
    let special = json!([
        u64::MAX, i64::MIN, -1, 100_000_000_000_000u64, 4_294_967_296u64, 1e300, -1e300, 0.5, null, true, "",
        "[DONE]", {}, [], [null, -1], {"type": null, "index": -1}, "${UNSET}", "${SET}", "${", "$${SET}",
        "\u{0}\u{feff}\u{1F4A5}", "127.0.0.1:99999", "*"
    ]);
    prop_oneof![
        8 => prop::sample::select(special.as_array().expect("a list").clone()).prop_map(Nasty::Value),
        2 => any::<i64>().prop_map(|n| Nasty::Value(n.into())),
        2 => any::<u64>().prop_map(|n| Nasty::Value(n.into())),
        1 => any::<f64>().prop_map(|n| Nasty::Value(n.into())),
        3 => text().prop_map(|s| Nasty::Value(s.into())),
        1 => (1..deepest).prop_map(Nasty::Deep),
        1 => (0usize..1 << 20, any::<char>()).prop_map(|(n, c)| Nasty::Long(n, c)),
    ]
    .boxed()
}

fn edit(deepest: usize) -> BoxedStrategy<Edit> {
    prop_oneof![
        3 => (any::<usize>(), nasty(deepest)).prop_map(|(at, with)| Edit::Replace(at, with)),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(at, which)| Edit::Remove(at, which)),
        3 => (any::<usize>(), nasty(deepest)).prop_map(|(key, with)| Edit::Everywhere(key, with)),
        1 => (any::<usize>(), prop::sample::select(KEYS.split(' ').collect::<Vec<_>>()), nasty(deepest))
            .prop_map(|(at, key, with)| Edit::Insert(at, key, with)),
    ]
    .boxed()
}

fn damage() -> BoxedStrategy<Damage> {
    let insert = prop_oneof![prop::sample::select(TOKENS).prop_map(<[u8]>::to_vec), vec(any::<u8>(), 0..8)];
    prop_oneof![
        any::<usize>().prop_map(Damage::Cut),
        (any::<usize>(), 0usize..16, insert).prop_map(|(at, remove, insert)| Damage::Splice { at, remove, insert }),
    ]
    .boxed()
}

/// Nesting deep enough for any JSON parser's recursion limit (serde_json stops at 128).
const DEEPEST: usize = 20_000;

/// A seed with 1 to `edits` tree edits (nestings up to `deepest` levels), now and then damaged as text.
fn mutated(edits: usize, deepest: usize) -> BoxedStrategy<Input> {
    (any::<usize>(), vec(edit(deepest), 1..=edits), prop::option::weighted(0.1, damage()))
        .prop_map(|(seed, edits, damage)| Input::Tree { seed, edits, damage })
        .boxed()
}

/// A seed with one or two of its fields, wherever they occur, set to an extreme number: documents
/// that mostly stay well-formed, so the numbers reach what is computed from them.
fn extremes() -> BoxedStrategy<Input> {
    let numbers = json!([u64::MAX, i64::MAX, 1u64 << 44, 1e300, 1e20, 86_401, 0.001, 0, -1]);
    let number = prop::sample::select(numbers.as_array().expect("a list").clone());
    (any::<usize>(), vec((any::<usize>(), number), 1..3))
        .prop_map(|(seed, edits)| Input::Tree {
            seed,
            edits: edits.into_iter().map(|(key, n)| Edit::Everywhere(key, Nasty::Value(n))).collect(),
            damage: None,
        })
        .boxed()
}

/// A seed as it is, mutated, damaged as text, or arbitrary bytes.
fn input(edits: usize, deepest: usize) -> BoxedStrategy<Input> {
    prop_oneof![
        1 => any::<usize>().prop_map(|seed| Input::Tree { seed, edits: vec![], damage: None }),
        6 => mutated(edits, deepest),
        2 => (any::<usize>(), vec(damage(), 1..4)).prop_map(|(seed, damage)| Input::Text { seed, damage }),
        1 => vec(any::<u8>(), 0..512).prop_map(Input::Bytes),
    ]
    .boxed()
}

// ---- adapters ------------------------------------------------------------------------------

/// Longest one guest call may take (its CPU bound is 500 ms).
const CALL_LIMIT: Duration = Duration::from_secs(10);

/// The built-in adapters and one bundled Lua script, by the upstream protocol each reads.
const ADAPTERS: &[(&str, Protocol)] = &[
    ("openai", Protocol::OpenAi),
    ("deepseek", Protocol::OpenAi),
    ("anthropic", Protocol::Anthropic),
    ("lua-anthropic", Protocol::Anthropic),
    ("gemini", Protocol::Gemini),
    ("ollama", Protocol::Ollama),
];

#[derive(Debug, Clone, Copy)]
enum Protocol {
    OpenAi,
    Anthropic,
    Gemini,
    Ollama,
}

/// A protocol's fixtures: whole responses (by the operation they answer; `None`: errors, any),
/// and streams as the events the host hands over.
struct Family {
    responses: Vec<(Option<Operation>, Seed)>,
    streams: Vec<Vec<(String, Seed)>>,
}

impl Family {
    /// The responses that answer `operation`.
    fn responses(&self, operation: Operation) -> Vec<Seed> {
        let fits = |op: &Option<Operation>| op.is_none_or(|op| op == operation);
        self.responses.iter().filter(|(op, _)| fits(op)).map(|(_, seed)| seed.clone()).collect()
    }
}

impl Protocol {
    fn family(self) -> Family {
        use Operation::{Chat, Embedding, Image};
        type Responses = &'static [(Option<Operation>, &'static str)];
        let (responses, streams): (Responses, &[&str]) = match self {
            Protocol::OpenAi => (
                &[
                    (Some(Chat), CHAT_JSON),
                    (Some(Chat), DEEPSEEK_JSON),
                    (Some(Embedding), OPENAI_EMBEDDINGS),
                    (Some(Image), OPENAI_IMAGES),
                    (None, ERROR_429),
                    (None, ERROR_401),
                ],
                &[CHAT_SSE, TOOLS_SSE, DEEPSEEK_SSE],
            ),
            Protocol::Anthropic => (
                &[(Some(Chat), CLAUDE_MESSAGE), (None, CLAUDE_ERROR_529)],
                &[CLAUDE_TEXT_SSE, CLAUDE_TOOLS_SSE, CLAUDE_THINKING_SSE, CLAUDE_MIDSTREAM_ERROR_SSE],
            ),
            Protocol::Gemini => (
                &[
                    (Some(Chat), GEMINI_JSON),
                    (Some(Embedding), GEMINI_BATCH_EMBED),
                    (Some(Image), IMAGEN_PREDICT),
                    (Some(Image), GEMINI_IMAGE),
                    (None, GEMINI_ERROR_429),
                ],
                &[GEMINI_SSE, GEMINI_TOOLS_SSE],
            ),
            Protocol::Ollama => (
                &[(Some(Chat), OLLAMA_CHAT), (Some(Embedding), OLLAMA_EMBED)],
                &[OLLAMA_NDJSON, OLLAMA_THINKING_NDJSON, OLLAMA_TOOLS_NDJSON],
            ),
        };
        let framing = if matches!(self, Protocol::Ollama) { StreamFraming::Ndjson } else { StreamFraming::Sse };
        Family {
            responses: responses.iter().map(|(op, text)| (*op, Seed::json(text))).collect(),
            streams: streams.iter().map(|text| events_of(text, framing)).collect(),
        }
    }
}

/// A fixture stream as (event name, data) pairs, as the host's framer would hand them over.
fn events_of(text: &str, framing: StreamFraming) -> Vec<(String, Seed)> {
    let text = text.replace("\r\n", "\n");
    if matches!(framing, StreamFraming::Ndjson) {
        return text.lines().filter(|l| !l.trim().is_empty()).map(|l| (String::new(), Seed::json(l))).collect();
    }
    let event = |block: &str| {
        let name = block.lines().find_map(|l| l.strip_prefix("event:")).map_or("message", str::trim);
        let data: Vec<&str> = block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
        (!data.is_empty()).then(|| (name.to_string(), Seed::json(&data.join("\n"))))
    };
    text.split("\n\n").filter_map(event).collect()
}

/// One upstream exchange for one adapter: a whole response, and a stream.
#[derive(Debug, Clone)]
struct Upstream {
    adapter: usize,
    operation: Operation,
    status: u16,
    headers: Vec<(String, String)>,
    body: Input,
    stream: usize,
    /// Events of the picked fixture stream (`seed` = its position), an event name override each.
    events: Vec<(Input, Option<&'static str>)>,
}

fn upstream() -> impl Strategy<Value = Upstream> {
    let status = prop_oneof![
        6 => Just(200u16),
        3 => prop::sample::select(vec![201u16, 204, 301, 400, 401, 402, 403, 404, 408, 422, 429, 500, 503, 529]),
        1 => any::<u16>(),
    ];
    let header_value = prop_oneof![
        prop::sample::select(vec![
            "application/json",
            "text/html",
            "0",
            "-1",
            "18446744073709551615",
            "99999999999999999999999",
            "1e308",
            "NaN",
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Fri, 31 Dec 9999 23:59:59 GMT",
            "",
        ])
        .prop_map(String::from),
        text(),
    ];
    let header_name = prop::sample::select(vec!["content-type", "retry-after", "retry-after-ms", "x-request-id"]);
    let name = prop::sample::select(vec!["message", "ping", "error", "content_block_delta", "message_stop", ""]);
    let event = (input(3, DEEPEST), prop::option::weighted(0.1, name.clone()));
    let events = prop_oneof![
        // The fixture stream in order, some events mutated, cut short or replayed past its end.
        vec(
            (
                prop::option::weighted(0.15, prop_oneof![mutated(2, DEEPEST), extremes()]),
                prop::option::weighted(0.03, name)
            ),
            1..24
        )
        .prop_map(|slots| {
            let plain = |i| Input::Tree { seed: i, edits: vec![], damage: None };
            slots.into_iter().enumerate().map(|(i, (m, name))| (m.map_or(plain(i), |m| m.of_seed(i)), name)).collect()
        }),
        // Events in any order, mutated.
        vec(event, 1..16),
    ];
    let operation =
        prop_oneof![6 => Just(Operation::Chat), 1 => Just(Operation::Embedding), 1 => Just(Operation::Image)];
    (
        0..ADAPTERS.len(),
        operation,
        status,
        vec((header_name, header_value), 0..3),
        prop_oneof![3 => input(4, DEEPEST), 1 => extremes()],
        any::<usize>(),
        events,
    )
        .prop_map(|(adapter, operation, status, headers, body, stream, events)| Upstream {
            adapter,
            operation,
            status,
            headers: headers.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
            body,
            stream,
            events,
        })
}

/// What an adapter handed back in one case, for the books.
#[derive(Debug, Default)]
struct Emitted {
    response: Option<String>,
    chunks: Vec<String>,
}

/// The loaded adapters with their protocol's fixtures.
struct Adapters {
    _dir: tempfile::TempDir,
    loaded: Vec<(Arc<Adapter>, Family)>,
}

async fn adapters() -> Adapters {
    let dir = tempfile::tempdir().unwrap();
    let (host, _) =
        PluginHost::load(SandboxLimits::default(), Some(shared_cache()), Some(dir.path()), Default::default())
            .await
            .unwrap();
    let loaded = ADAPTERS
        .iter()
        .map(|(name, protocol)| (host.adapter(&AdapterName::new(*name)).expect("loaded"), protocol.family()))
        .collect();
    Adapters { _dir: dir, loaded }
}

fn context(operation: Operation) -> SourceContext {
    SourceContext {
        operation,
        source_name: "fuzzed".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: "sk-upstream-0123456789".into(),
        upstream_model: "m".into(),
        settings: vec![],
    }
}

/// A unified request the adapter must accept, so the session is where the gateway's would be.
fn request_for(operation: Operation, stream: bool) -> String {
    match operation {
        Operation::Embedding => json!({"model": "m", "input": ["hello", "world"]}),
        Operation::Image => json!({"model": "m", "prompt": "a lighthouse", "n": 1}),
        Operation::Chat => json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "Hi"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}),
    }
    .to_string()
}

/// A guest call's verdict: the sandbox must hold (no trap, no limit hit) and any output be JSON.
fn verdict<T>(call: &str, result: GuestResult<T>, outputs: impl Fn(&T) -> Vec<&str>) -> Result<Option<T>, String> {
    let out = result.map_err(|e| format!("{call}: the sandbox failed instead of a classified error: {e}"))?;
    let Ok(out) = out else { return Ok(None) };
    for text in outputs(&out) {
        serde_json::from_str::<Value>(text)
            .map_err(|e| format!("{call} returned non-JSON ({e}): {}", head(text.as_bytes(), 300)))?;
    }
    Ok(Some(out))
}

fn chunks_of(out: &StreamOutput) -> Vec<&str> {
    out.chunks.iter().map(String::as_str).collect()
}

/// A session with the request translated, as the gateway's is when the answer comes; `None`
/// when the adapter does not do that operation.
async fn open(adapter: &Arc<Adapter>, operation: Operation, stream: bool) -> Result<Option<AdapterSession>, String> {
    let mut session = adapter.open_session(&context(operation)).await.map_err(|e| e.to_string())?;
    let request = session.transform_request(&request_for(operation, stream)).await;
    match verdict("transform-request", request, |_| vec![])? {
        Some(_) => Ok(Some(session)),
        None if !matches!(operation, Operation::Chat) => Ok(None),
        None => Err("the adapter refused a valid chat request".into()),
    }
}

/// One whole upstream answer through `transform-response`.
async fn whole_answer(adapter: &Arc<Adapter>, family: &Family, case: &Upstream) -> Result<Option<String>, String> {
    let Some(mut session) = open(adapter, case.operation, false).await? else { return Ok(None) };
    let body = case.body.bytes(&family.responses(case.operation));
    let response = HttpResponse { status: case.status, headers: case.headers.clone(), body: body.clone() };
    let out = bounded(CALL_LIMIT, "transform-response", session.transform_response(&response)).await?;
    let upstream = || format!("upstream answered {} {:?}: {}", case.status, case.headers, head(&body, 600));
    let answer =
        verdict("transform-response", out, |body| vec![body.as_str()]).map_err(|e| format!("{e}\n  {}", upstream()))?;
    if answer.is_some() && case.status >= 400 {
        return Err(format!("transform-response took an error for an answer: {}", upstream()));
    }
    Ok(answer)
}

/// One upstream stream through `transform-stream-chunk`, then `finish-stream` if it never said done.
async fn streamed_answer(adapter: &Arc<Adapter>, family: &Family, case: &Upstream) -> Result<Vec<String>, String> {
    let stream = &family.streams[case.stream % family.streams.len()];
    let seeds: Vec<Seed> = stream.iter().map(|(_, data)| data.clone()).collect();
    let mut session = open(adapter, Operation::Chat, true).await?.expect("chat is always done");
    let (mut chunks, mut fed) = (Vec::new(), Vec::new());
    for (event, name) in &case.events {
        let seed = match event {
            Input::Tree { seed, .. } | Input::Text { seed, .. } => seed % stream.len(),
            Input::Bytes(_) => 0,
        };
        let data = String::from_utf8_lossy(&event.bytes(&seeds)).into_owned();
        let event = StreamEvent { event: name.map_or_else(|| stream[seed].0.clone(), str::to_string), data };
        fed.push(format!("{}: {}", event.event, head(event.data.as_bytes(), 300)));
        let out = bounded(CALL_LIMIT, "transform-stream-chunk", session.transform_stream_chunk(&event)).await?;
        let out = verdict("transform-stream-chunk", out, chunks_of)
            .map_err(|e| format!("{e}\n  after the events\n    {}", fed.join("\n    ")))?;
        let Some(out) = out else { return Ok(chunks) };
        chunks.extend(out.chunks);
        if out.done {
            return Ok(chunks);
        }
    }
    let out = bounded(CALL_LIMIT, "finish-stream", session.finish_stream()).await?;
    let out = verdict("finish-stream", out, chunks_of)
        .map_err(|e| format!("{e}\n  after the events\n    {}", fed.join("\n    ")))?;
    chunks.extend(out.into_iter().flat_map(|o| o.chunks));
    Ok(chunks)
}

/// Drives one whole answer and one stream (chat only) through a fresh session each, as the gateway would.
async fn exercise(adapters: &Adapters, case: &Upstream) -> Result<Emitted, String> {
    let (adapter, family) = &adapters.loaded[case.adapter];
    let response = whole_answer(adapter, family, case).await?;
    let chunks = match case.operation {
        Operation::Chat => streamed_answer(adapter, family, case).await?,
        _ => Vec::new(),
    };
    Ok(Emitted { response, chunks })
}

#[test]
fn adapters_answer_mutated_upstream_json_and_bytes_with_json_or_a_classified_error() {
    isolated("adapters_answer_mutated_upstream_json_and_bytes_with_json_or_a_classified_error", || {
        let rt = runtime();
        let adapters = rt.block_on(adapters());
        check_all(192, upstream(), |case| rt.block_on(exercise(&adapters, case)).map(drop));
    });
}

// ---- the books -----------------------------------------------------------------------------

/// What the books may keep beyond 8 bytes per byte fed: one upstream number must not decide
/// how much memory an answer costs (a tool-call index is bounded, not allocated up to).
const BOOKS_SLACK: usize = 256 << 10;

/// Feeds a whole answer or stream chunks to the books as the gateway does (settled with the
/// estimate of `request` when no usage came), then reads them.
fn books(request: &str, response: Option<&str>, chunks: &[String]) -> Result<(), String> {
    let fed = response.into_iter().chain(chunks.iter().map(String::as_str)).collect::<Vec<_>>().join("\n");
    let kept = no_panic(fed.as_bytes(), || {
        let mut tally = response.map(Tally::of_response).unwrap_or_default();
        for chunk in chunks {
            tally.add_chunk(chunk);
        }
        tally.settle(prompt_estimate(request));
        let _ = tally.tokens();
        tally.assistant_message().to_string().len()
    })?;
    match kept <= 8 * fed.len() + BOOKS_SLACK {
        true => Ok(()),
        false => Err(format!("the books keep a {kept}-byte message for {}", head(fed.as_bytes(), 3000))),
    }
}

#[test]
fn the_books_stay_bounded_whatever_the_adapters_emit() {
    isolated("the_books_stay_bounded_whatever_the_adapters_emit", || {
        let rt = runtime();
        let adapters = rt.block_on(adapters());
        check_all(128, upstream(), |case| {
            // Contract violations are the property above's; here: whatever came out.
            let emitted = rt.block_on(exercise(&adapters, case)).unwrap_or_default();
            books(&request_for(case.operation, false), emitted.response.as_deref(), &[])?;
            books(&request_for(Operation::Chat, true), None, &emitted.chunks)
        });
    });
}

/// Unified answers as adapters emit them: whole responses and stream chunks.
fn unified_seeds() -> Vec<Seed> {
    let chunks = [CHAT_SSE, TOOLS_SSE, DEEPSEEK_SSE].into_iter().flat_map(|s| events_of(s, StreamFraming::Sse));
    [CHAT_JSON, DEEPSEEK_JSON, OPENAI_EMBEDDINGS].into_iter().map(Seed::json).chain(chunks.map(|(_, s)| s)).collect()
}

#[test]
fn the_books_stay_bounded_whatever_unified_json_they_are_fed() {
    isolated("the_books_stay_bounded_whatever_unified_json_they_are_fed", || {
        let seeds = unified_seeds();
        let unified = || prop_oneof![input(4, DEEPEST), extremes()];
        check_all(256, (unified(), vec(unified(), 0..12)), |(whole, chunks)| {
            let text = |i: &Input| String::from_utf8_lossy(&i.bytes(&seeds)).into_owned();
            let whole = text(whole);
            books(&whole, Some(&whole), &[])?;
            books(&whole, None, &chunks.iter().map(text).collect::<Vec<_>>())
        });
    });
}

// ---- the front doors -----------------------------------------------------------------------

/// Longest one request to the gateway may take (the mock answers at once).
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// One client-facing endpoint: its path, valid bodies (seed 0 is the known-good request) and
/// the error format its clients read.
struct Door {
    path: &'static str,
    anthropic: bool,
    seeds: Vec<Seed>,
}

/// Each valid body once per model (every adapter translates the requests that pass the door).
fn seeds(bodies: &[Value], models: &[&str]) -> Vec<Seed> {
    let with_model = |body: &Value, model: &str| {
        let mut body = body.clone();
        body["model"] = json!(model);
        Seed::json(&body.to_string())
    };
    bodies.iter().flat_map(|b| models.iter().map(move |m| with_model(b, m))).collect()
}

const CHAT_MODELS: &[&str] = &["gpt", "claude", "gemini", "llama"];

fn chat_door() -> Door {
    let tools = json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    let bodies = [
        json!({"messages": [{"role": "user", "content": "Hello!"}]}),
        json!({"stream": true, "max_tokens": 64, "temperature": 0.5, "top_p": 1, "n": 1, "seed": 7, "stop": ["x"],
            "presence_penalty": 0, "frequency_penalty": 0, "user": "u1", "stream_options": {"include_usage": true},
            "tools": tools, "tool_choice": "auto", "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18C"}]}),
        json!({"stream": false, "thinking": {"type": "enabled", "budget_tokens": 2048}, "reasoning_effort": "high",
            "max_completion_tokens": 4096, "parallel_tool_calls": false, "response_format": {"type": "json_object"},
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}, "tools": tools, "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Think."}]},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
            {"role": "assistant", "content": "Sure.", "reasoning_content": "hm"},
            {"role": "user", "content": "Why?"}]}),
    ];
    Door { path: "/v1/chat/completions", anthropic: false, seeds: seeds(&bodies, CHAT_MODELS) }
}

fn messages_door() -> Door {
    let bodies = [
        json!({"max_tokens": 64, "messages": [{"role": "user", "content": "Hello"}]}),
        json!({"max_tokens": 1024, "stream": true, "system": [{"type": "text", "text": "You are terse."}],
            "tools": [{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object",
                "properties": {"location": {"type": "string"}}}}],
            "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true},
            "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                "content": [{"type": "text", "text": "18C"}]}, {"type": "text", "text": "And now?"}]}]}),
        json!({"max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048}, "temperature": 1,
            "top_p": 0.9, "top_k": 40, "stop_sequences": ["END"], "metadata": {"user_id": "u1"}, "system": "Think.",
            "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                {"type": "text", "text": "What is this?"}]}]}),
    ];
    Door { path: "/v1/messages", anthropic: true, seeds: seeds(&bodies, CHAT_MODELS) }
}

fn embeddings_door() -> Door {
    let bodies = [
        json!({"input": "hello"}),
        json!({"input": ["a", "b"], "dimensions": 3, "encoding_format": "float", "user": "u1"}),
    ];
    Door { path: "/v1/embeddings", anthropic: false, seeds: seeds(&bodies, &["emb"]) }
}

impl Door {
    /// An error body in this door's protocol: OpenAI's or Anthropic's.
    fn check_error(&self, body: &[u8]) -> Result<(), String> {
        let body: Value = serde_json::from_slice(body).map_err(|e| format!("the error is not JSON: {e}"))?;
        let error = &body["error"];
        let typed = error["type"].is_string() && error["message"].is_string();
        let shaped = if self.anthropic { typed && body["type"] == "error" } else { typed };
        if shaped { Ok(()) } else { Err("the error is not in the client's format".into()) }
    }

    async fn post(&self, client: &reqwest::Client, gw: &TestGateway, body: Vec<u8>) -> Result<(u16, Vec<u8>), String> {
        let request = client.post(format!("{}{}", gw.url, self.path)).header("content-type", "application/json");
        let request = match self.anthropic {
            true => request.header("x-api-key", KEY).header("anthropic-version", "2023-06-01"),
            false => request.bearer_auth(KEY),
        };
        let response = bounded(REQUEST_LIMIT, "the answer", request.body(body).send())
            .await?
            .map_err(|e| format!("the request failed (did the gateway drop the connection?): {e}"))?;
        let status = response.status().as_u16();
        let body = bounded(REQUEST_LIMIT, "the answer's body", response.bytes())
            .await?
            .map_err(|e| format!("reading the answer failed: {e}"))?;
        Ok((status, body.to_vec()))
    }

    /// One malformed body, then the known-good one: the door answers the first in its error
    /// format without a 5xx unless the upstream was asked, and keeps serving the second.
    async fn case(
        &self,
        client: &reqwest::Client,
        gw: &TestGateway,
        mock: &MockUpstream,
        body: Vec<u8>,
    ) -> Result<(), String> {
        gw.gateway.scheduler.clear(None, None);
        let calls = || mock.state.requests.lock().unwrap().len();
        let before = calls();
        let (status, answer) = self.post(client, gw, body.clone()).await?;
        // The mock refuses bodies past axum's 2 MiB default at the socket, before recording them.
        let reached = calls() > before || body.len() > 2 << 20;
        let what = || format!("{status} {}\n  for the body {}", head(&answer, 600), head(&body, 1500));
        if status >= 500 && !reached {
            return Err(format!("a 5xx for a request that never reached the upstream: {}", what()));
        }
        if status >= 400 {
            self.check_error(&answer).map_err(|e| format!("{e}: {}", what()))?;
        }
        // An upstream failure may rest the source (the cooldown policy); a failure the door or
        // the adapter caused is the 5xx above.
        gw.gateway.scheduler.clear(None, None);
        let (status, answer) = self.post(client, gw, self.seeds[0].text.clone().into_bytes()).await?;
        match status {
            200 => Ok(()),
            _ => Err(format!("after it, the known-good request got {status} {}", head(&answer, 600))),
        }
    }
}

/// Sources for every adapter, on the mock: chat models gpt, claude, gemini, llama; `emb`.
fn door_sources(mock: &MockUpstream) -> String {
    let root = mock.url.trim_end_matches("/v1");
    format!(
        "sources:
  - {{name: oai, base_url: '{url}', models: [{{name: gpt, upstream: fixture}},
      {{name: emb, upstream: text-embedding-3-small, kind: embedding}}]}}
  - {{name: claude, adapter: anthropic, base_url: '{url}', models: [{{name: claude, upstream: claude-text}}]}}
  - {{name: google, adapter: gemini, base_url: '{root}/v1beta', models: [{{name: gemini, upstream: gemini-text}}]}}
  - {{name: local, adapter: ollama, base_url: '{root}', models: [{{name: llama}}]}}
",
        url = mock.url
    )
}

fn fuzz_door(door: Door, cases: u32) {
    let rt = runtime();
    let mock = rt.block_on(MockUpstream::start());
    let gw = rt.block_on(TestGateway::start(&config_with(&door_sources(&mock))));
    let client = reqwest::Client::new();
    let bodies = prop_oneof![3 => input(4, DEEPEST), 1 => extremes()];
    check_all(cases, bodies, |body| rt.block_on(door.case(&client, &gw, &mock, body.bytes(&door.seeds))));
}

#[test]
fn chat_completions_answers_malformed_bodies_in_openai_error_json_and_keeps_serving() {
    isolated("chat_completions_answers_malformed_bodies_in_openai_error_json_and_keeps_serving", || {
        fuzz_door(chat_door(), 128)
    });
}

#[test]
fn messages_answers_malformed_bodies_in_anthropic_error_json_and_keeps_serving() {
    isolated("messages_answers_malformed_bodies_in_anthropic_error_json_and_keeps_serving", || {
        fuzz_door(messages_door(), 128)
    });
}

#[test]
fn embeddings_answers_malformed_bodies_in_openai_error_json_and_keeps_serving() {
    isolated("embeddings_answers_malformed_bodies_in_openai_error_json_and_keeps_serving", || {
        fuzz_door(embeddings_door(), 64)
    });
}

// ---- the config loader ---------------------------------------------------------------------

/// Longest one config may take to load (a debug build).
const LOAD_LIMIT: Duration = Duration::from_secs(5);

/// Nesting the general loader properties go to: past the loader's cap (128), well short of what
/// costs time; deep nesting in every YAML style is the last test's property.
const YAML_DEEPEST: usize = 2_000;

/// A config using every section, valid as it is.
const FULL_CONFIG: &str = r#"
listen: 127.0.0.1:8080
admin_token: adm-secret-token-0001
data_dir: /nonexistent/switchyard-fuzz
adapter_dir: /nonexistent/switchyard-fuzz/adapters
body_limit_mb: 32
sandbox: {cpu_ms_per_call: 500, max_output_mb: 32, pool_slots: 100}
server: {max_connections: 10000, max_in_flight: 10000, header_timeout_seconds: 10, body_timeout_seconds: 60}
cooldown:
  transient_base_ms: 5000
  transient_cap_ms: 300000
  failure_threshold: 3
  ladder_ms: [60000, 0]
  auth_ms: 600000
  rate_limit_ms: 30000
  quota_cap_ms: 1800000
default_model: AUTO
channel_selection: priority
priority_orders: {"*": [b, a], gpt-4o: [a]}
scoring: {ema_alpha: 0.3, recent_window: 20, exploration_rate: 0.1, stale_minutes: 10, stale_full_decay_minutes: 60}
affinity: {enabled: true, ttl_minutes: 30}
log_retention_days: 30
adapters:
  lua-openai: {allow_hosts: [auth.example.com]}
keys:
  - {name: dev, key: "${SET}", models: ["*"]}
  - name: team
    key: sk-team-0123456789
    models: [gpt-4o, "claude-*", AUTO, smart]
    group: g1
    token_quota: 1000
    period: nhour
    hours: 5
sources:
  - name: a
    base_url: https://api.openai.com/v1
    api_key: ${UNSET:-sk-a-0123456789}
    adapter: openai
    max_concurrent: 10
    queue_timeout_seconds: 10
    rpm: 60
    timeout_seconds: 120
    first_byte_timeout_seconds: 60
    connect_timeout_seconds: 10
    idle_timeout_seconds: 0.5
    stream_timeout_seconds: 1800
    settings: {path: /chat/completions, header.x-team: blue}
    models:
      - {name: gpt-4o, upstream: gpt-4o-2024-08-06}
      - {name: emb, kind: embedding}
      - {name: dall-e-3, kind: image}
  - {name: b, base_url: "https://api.anthropic.com/v1", adapter: anthropic, models: [{name: claude-sonnet}]}
  - {name: z, base_url: "http://127.0.0.1:9/v1", models: [{name: spare}]}
routes:
  - alias: smart
    mode: auto-select
    providers: [{source: a, model: gpt-4o, priority: 0}, {source: b, model: claude-sonnet, priority: 1, enabled: true}]
  - {alias: eyes, providers: [{source: a, model: gpt-4o}]}
  - alias: seeing
    mode: adapter
    adapter_config: {vision_alias: eyes, fallback: skip-image}
    providers: [{source: b, model: claude-sonnet}]
  - alias: council
    group: g1
    mode: fusion
    fusion_config: {judge_alias: gpt-4o, strategy: ranked, min_candidates: 2, timeout_seconds: 30}
    providers: [{source: a, model: gpt-4o}, {source: b, model: claude-sonnet}]
"#;

/// Aliases of aliases, nine deep: a YAML document small as text and 9^9 strings expanded.
fn billion_laughs() -> String {
    let mut text = String::from("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..9 {
        let refs = vec![format!("*l{}", level - 1); 9].join(", ");
        text.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
    }
    text + "sources: [*l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8, *l8]\n"
}

/// A runtime file using every section, valid on top of `FULL_CONFIG`.
const FULL_RUNTIME: &str = r#"
sources:
  - {name: c, base_url: "http://127.0.0.1:11434", adapter: ollama, models: [{name: llama3.2}]}
deleted_sources: [z]
source_templates:
  - {name: groq, base_url: "https://api.groq.com/openai/v1", adapter: openai, models: [{name: llama-3.1-8b}]}
auto:
  - {model: gpt-4o, source: a, tier: 1, token_quota: 2000000, period: month}
  - {model: llama3.2, tier: 2, token_quota: 500000, period: nhour, hours: 5}
auto_image:
  - {model: dall-e-3, source: a}
routes:
  - {alias: fast, mode: auto-select, providers: [{source: c, model: llama3.2}]}
keys:
  - name: ci
    key_sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
    hint: "sk-…abcd"
    models: ["*"]
    token_quota: 100
    period: week
deleted_keys: [dev]
key_scopes: {team: [gpt-4o]}
"#;

fn env(name: &str) -> Option<String> {
    match name {
        "SET" => Some("sk-from-env-0123456789".into()),
        "EMPTY" => Some(String::new()),
        "NEWLINE" => Some("a\nb: [".into()),
        _ => None,
    }
}

fn builtins() -> Vec<&'static str> {
    switchyard::plugin::BUILTIN_ADAPTERS.iter().map(|(name, _)| *name).collect()
}

fn load_str(text: &str) -> Result<Config, ConfigError> {
    switchyard::config::load_str(text, Path::new("config.yaml"), &env, &builtins())
}

/// A refusal must name what is wrong.
fn named(refusal: ConfigError) -> Result<(), String> {
    let message = refusal.to_string();
    match &refusal {
        ConfigError::Invalid { errors, .. } if errors.is_empty() || errors.iter().any(|e| e.message.is_empty()) => {
            Err(format!("refused without naming each error: {message}"))
        }
        _ if message.trim().is_empty() => Err("refused with an empty message".into()),
        _ => Ok(()),
    }
}

/// Loads config text within `LOAD_LIMIT`: the config, or `None` for a refusal that names its errors.
fn load(text: String) -> Result<Option<Config>, String> {
    let started = Instant::now();
    let loaded = unless_hung(move || no_panic(text.as_bytes(), || load_str(&text)))?;
    if started.elapsed() > LOAD_LIMIT {
        return Err(format!("loading took {:?}", started.elapsed()));
    }
    match loaded {
        Ok(config) => Ok(Some(config)),
        Err(refusal) => named(refusal).map(|()| None),
    }
}

fn config_seeds() -> Vec<Seed> {
    [include_str!("../../config.example.yaml"), FULL_CONFIG, &billion_laughs()].into_iter().map(Seed::yaml).collect()
}

/// The most memory a sandbox instance may have: the loader's own bound on `sandbox.memory_mb`.
const MAX_SANDBOX_MEMORY: usize = 4096 << 20;

/// Every duration, quota window, policy and limit the gateway derives from a config, at start
/// or per request: a config the loader accepts must not make any of them panic, and its limits
/// must be the ones the loader checks (a body limit of at least 1 MiB, a bounded sandbox).
fn derive_everything(config: &Config) -> Result<(), String> {
    let limits = config.settings.sandbox.limits(config.settings.body_limit_bytes);
    limits.deadline_ticks_for(config.settings.body_limit_bytes);
    let _ = config.settings.affinity.ttl();
    let _ = switchyard::scheduler::Policy::of(config);
    let now = SystemClock.now();
    for s in &config.sources {
        let _ = (s.timeout(), s.connect_timeout(), s.queue_timeout(), s.idle_timeout(), s.first_byte_timeout());
        let _ = s.stream_timeout();
    }
    let slots = config.auto.chat.iter().chain(config.auto.image.iter().flatten());
    for quota in config.keys.iter().filter_map(|k| k.quota()).chain(slots.filter_map(|s| s.quota)) {
        quota.period.window(now);
    }
    // As the fusion mode turns it into its per-candidate bound.
    for fusion in config.routes.iter().filter_map(|r| r.mode.fusion()) {
        let _ = fusion.timeout_seconds.duration();
    }
    match (config.settings.body_limit_bytes, limits.memory_bytes) {
        (body, _) if body < 1 << 20 => Err(format!("accepted with a body limit of {body} bytes")),
        (_, memory) if memory > MAX_SANDBOX_MEMORY => Err(format!("accepted with sandboxes of {memory} bytes")),
        _ => Ok(()),
    }
}

#[test]
fn the_config_loader_answers_any_text_with_a_config_or_named_errors() {
    isolated("the_config_loader_answers_any_text_with_a_config_or_named_errors", || {
        let seeds = config_seeds();
        load_str(FULL_CONFIG).unwrap_or_else(|e| panic!("the seed config does not load: {e}"));
        check_all(256, input(6, YAML_DEEPEST), |config| {
            load(String::from_utf8_lossy(&config.bytes(&seeds)).into_owned()).map(drop)
        });
    });
}

#[test]
fn the_runtime_file_loader_answers_any_text_with_a_config_or_named_errors() {
    isolated("the_runtime_file_loader_answers_any_text_with_a_config_or_named_errors", || {
        let base = load_str(FULL_CONFIG).unwrap_or_else(|e| panic!("the base config does not load: {e}"));
        let seeds = [Seed::yaml(FULL_RUNTIME)];
        let runtime =
            |text: &str| switchyard::config::load_runtime_str(text, Path::new("runtime.yaml"), &base, &builtins());
        runtime(FULL_RUNTIME).unwrap_or_else(|e| panic!("the seed runtime file does not load: {e}"));
        check_all(192, input(6, YAML_DEEPEST), |file| {
            let text = file.bytes(&seeds);
            match no_panic(&text, || runtime(&String::from_utf8_lossy(&text)))? {
                Ok(_) => Ok(()),
                Err(refusal) => named(refusal),
            }
        });
    });
}

#[test]
fn accepted_configs_derive_their_durations_windows_and_limits_in_range() {
    isolated("accepted_configs_derive_their_durations_windows_and_limits_in_range", || {
        let seeds = [Seed::yaml(FULL_CONFIG)];
        check_all(1024, extremes(), |config| {
            let text = config.bytes(&seeds);
            match load(String::from_utf8_lossy(&text).into_owned())? {
                Some(config) => {
                    no_panic(&text, || derive_everything(&config))?.map_err(|e| format!("{e}: {}", head(&text, 3000)))
                }
                None => Ok(()),
            }
        });
    });
}

/// Deep nesting in each YAML style: flow sequences and mappings, compact block sequences
/// (`- - - 0`) and explicit keys (`? ? ? 0`), and flow behind a quote inside a plain scalar
/// (`[x', [[[0]]]]`). YAML parsers recurse once per level (thousands overflow the stack) and
/// serde_yaml takes time in the square of the depth, so the loader must refuse such text first.
#[test]
fn deeply_nested_config_text_is_refused_in_bounded_time_and_stack() {
    isolated("deeply_nested_config_text_is_refused_in_bounded_time_and_stack", || {
        let style = prop::sample::select(vec![
            ("", "[", "]", ""),
            ("", "{a: ", "}", ""),
            ("", "- ", "", ""),
            ("", "? ", "", ""),
            ("[x', ", "[", "]", "]"),
        ]);
        check_all(32, (1..60_000usize, style), |&(depth, (before, open, close, after))| {
            let nested = format!("{before}{}0{}{after}", open.repeat(depth), close.repeat(depth));
            load(format!("sources:\n  {nested}\n")).map(drop)
        });
    });
}
