//! The openai Python SDK's typed models (tests/sdk-python: pinned, hashed, in a venv made once)
//! take every Responses body the gateway gives, translated and native: whole and streamed.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::support::{MockUpstream, TestGateway, config_with};

fn here(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Runs `command` to success, or fails the test with what it printed.
fn run(command: &mut Command, what: &str) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{stderr}");
}

/// The python of a venv holding tests/sdk-python/requirements.txt: made once per process
/// (OnceLock) and one process at a time (a file lock), made again when the requirements change.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(venv)
}

fn venv() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(tmp).unwrap();
    let venv = tmp.join("sdk-python-venv");
    let requirements = here("tests/sdk-python/requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).unwrap();
    let lock = File::create(tmp.join("sdk-python-venv.lock")).unwrap();
    lock.lock().unwrap();
    let (python, stamp) = (venv.join("bin/python"), venv.join("requirements.installed"));
    if !python.exists() || std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        let _ = std::fs::remove_dir_all(&venv);
        run(Command::new("python3").args(["-m", "venv"]).arg(&venv), "python3 -m venv (install python3-venv)");
        run(
            Command::new(&python).args(["-m", "pip", "install", "-q", "--require-hashes", "-r"]).arg(&requirements),
            "pip install --require-hashes -r tests/sdk-python/requirements.txt",
        );
        std::fs::write(&stamp, &wanted).unwrap();
    }
    python
}

/// What validate.py says against `{"response": …, "events": […]}`: `None` when the SDK's
/// models take all of it.
fn refused(document: &Value) -> Option<String> {
    let mut child = Command::new(python())
        .arg(here("tests/sdk-python/validate.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the venv's python runs");
    // validate.py reads all of stdin before it writes anything.
    child.stdin.take().unwrap().write_all(document.to_string().as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (!out.status.success()).then_some(said)
}

/// The JSON of each event (its `data:` lines) of a Responses SSE body.
fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|frame| {
            let data: Vec<&str> = frame.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
            (!data.is_empty()).then(|| data.join("\n"))
        })
        .map(|data| serde_json::from_str(&data).unwrap_or_else(|e| panic!("an event that is not JSON ({e}): {data}")))
        .collect()
}

/// Whether anything in `value` has `"type": kind`.
fn has_type(value: &Value, kind: &str) -> bool {
    match value {
        Value::Object(o) => {
            o.get("type").and_then(Value::as_str) == Some(kind) || o.values().any(|v| has_type(v, kind))
        }
        Value::Array(a) => a.iter().any(|v| has_type(v, kind)),
        _ => false,
    }
}

fn request(model: &str, stream: bool) -> Value {
    json!({
        "model": model, "stream": stream, "instructions": "You are terse.", "max_output_tokens": 200,
        "metadata": {"case": "sdk-python"},
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]}],
        "tools": [{"type": "function", "name": "get_weather", "description": "Today's weather", "strict": false,
                   "parameters": {"type": "object", "properties": {"location": {"type": "string"}}}}],
    })
}

#[tokio::test]
async fn the_openai_python_sdk_models_take_every_responses_body_and_event_the_gateway_gives() {
    python(); // pip first, before anything waits on the gateway
    let mock = MockUpstream::start().await;
    let sources = format!(
        "sources:\n  - {{name: oai, base_url: '{url}', models: [{{name: gpt, upstream: fixture}}, {{name: gpt-tools, upstream: tools}}, {{name: gpt-call, upstream: call-last-tool}}, {{name: gpt-cut, upstream: cut}}]}}\n\
         \x20 - {{name: ds, base_url: '{url}', adapter: deepseek, api_key: sk-ds-0123456789, models: [{{name: ds, upstream: deepseek-fixture}}]}}\n\
         \x20 - {{name: codex, base_url: '{url}', adapter: openai-responses, api_key: sk-upstream-responses-0001, models: [{{name: codex, upstream: resp-tools}}, {{name: codex-cut, upstream: resp-cut}}]}}\n",
        url = mock.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;

    // (case, model, stream, an item type the answer must hold, a stream's last event)
    let cases = [
        ("translated", "gpt", false, "output_text", ""),
        ("translated, a tool call", "gpt-call", false, "function_call", ""),
        ("translated, reasoning", "ds", false, "reasoning", ""),
        ("native", "codex", false, "output_text", ""),
        ("translated stream", "gpt", true, "output_text", "response.completed"),
        ("translated stream, tool calls", "gpt-tools", true, "function_call", "response.completed"),
        ("translated stream, reasoning", "ds", true, "reasoning", "response.completed"),
        ("translated stream, upstream cut", "gpt-cut", true, "output_text", "response.failed"),
        ("native stream", "codex", true, "function_call", "response.completed"),
        ("native stream, upstream cut", "codex-cut", true, "function_call", "response.failed"),
    ];
    let mut failures = Vec::new();
    let mut stored = None;
    for (case, model, stream, holds, last) in cases {
        let response = gw.post("/v1/responses").json(&request(model, stream)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{case}");
        let body = response.text().await.unwrap();
        let document = if stream {
            let events = events(&body);
            assert_eq!(events.last().and_then(|e| e["type"].as_str()), Some(last), "{case}: {body}");
            json!({"response": null, "events": events})
        } else {
            let response: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{case}: {e}: {body}"));
            stored = stored.or_else(|| response["id"].as_str().map(str::to_string));
            json!({"response": response, "events": []})
        };
        assert!(has_type(&document, holds), "{case}: no `{holds}` in {body}");
        if let Some(why) = refused(&document) {
            failures.push(format!("{case} ({model}):\n{why}"));
        }
    }

    // A stored turn read back is the same kind of object.
    let id = stored.expect("a translated response is stored");
    let back: Value = gw.get(&format!("/v1/responses/{id}")).send().await.unwrap().json().await.unwrap();
    if let Some(why) = refused(&json!({"response": back, "events": []})) {
        failures.push(format!("GET /v1/responses/{id}:\n{why}"));
    }
    assert!(failures.is_empty(), "the openai SDK's models refuse what the gateway gave:\n\n{}", failures.join("\n"));
}
