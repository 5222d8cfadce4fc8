//! The adapter author's side: `switchyard adapter new|check|test` run as the real binary, the
//! built-in adapters' recorded cases, starting projects in every language built from scratch,
//! and per-adapter limits (`adapters.NAME`) that replace the sandbox's defaults.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::gateway::shared_cache;
use crate::support::{MockUpstream, TestGateway, chat_body, config_with, guest_wasm};

pub fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// Runs the real binary with `args`; (exit code, stdout, stderr).
pub fn switchyard(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard")).args(args).env("SWITCHYARD_LOG", "warn").output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `switchyard adapter test TARGET --cases DIR` with the tests' shared compile cache.
pub fn adapter_test(target: &str, cases: &Path) -> (i32, String) {
    let cache = shared_cache().display().to_string();
    let (code, out, err) =
        switchyard(&["adapter", "test", target, "--cases", &cases.display().to_string(), "--cache-dir", &cache]);
    (code, format!("{out}{err}"))
}

#[test]
fn the_built_in_adapters_pass_their_recorded_cases() {
    for name in ["openai", "anthropic", "gemini", "ollama", "deepseek"] {
        let cases = repo(&format!("plugins/{name}/cases"));
        let (code, out) = adapter_test(name, &cases);
        assert_eq!(code, 0, "{name}:\n{out}");
        let summary = out.lines().last().unwrap_or_default();
        let count: usize = summary.split(' ').next().unwrap().parse().unwrap_or(0);
        assert!(count >= 4 && summary.ends_with(" 0 failed"), "{name}: {summary}");
    }
}

#[test]
fn a_failing_case_names_each_difference_by_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let case = serde_json::json!({
        "about": "a deliberately wrong expectation",
        "request": {"model": "m", "messages": [{"role": "user", "content": "Hi"}]},
        "upstream_request": {"url": "https://api.example.com/v1/chat/completions",
                             "headers": {"authorization": "Bearer other-key"},
                             "body": {"model": "model-x", "messages": [{"role": "user", "content": "Hi"}], "extra": 1}},
        "upstream_response": {"status": 429, "headers": {"retry-after": "7"},
                              "body": {"error": {"message": "slow down", "type": "rate_limit_error"}}},
        "expect_error": {"kind": "overloaded", "retry_after_ms": 7000}
    });
    std::fs::write(dir.path().join("wrong.json"), case.to_string()).unwrap();
    std::fs::write(dir.path().join("broken.json"), "{\"request\": ").unwrap();
    let (code, out) = adapter_test("openai", dir.path());
    assert_eq!(code, 1, "{out}");
    for expected in [
        "FAIL",
        "broken.json: not a valid case",
        "wrong.json: a deliberately wrong expectation",
        "upstream url: expected https://api.example.com/v1/chat/completions, got https://api.example.com/chat/completions",
        "upstream header authorization: expected \"Bearer other-key\", got Bearer test-key",
        "upstream body $.extra: missing (expected 1)",
        "adapter error: kind rate-limit (expected overloaded)",
        "2 cases: 0 passed, 2 failed",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    assert!(!out.contains("retry_after_ms"), "the retry-after matched (7 s): {out}");
}

#[test]
fn check_loads_a_lua_script_as_the_gateway_would_and_names_its_problems() {
    let (code, out, err) = switchyard(&[
        "adapter",
        "check",
        &repo("tests/fixtures/lua/legacy.lua").display().to_string(),
        "--cache-dir",
        &shared_cache().display().to_string(),
    ]);
    assert_eq!(code, 1, "a problem is found: {out}{err}");
    for line in
        ["adapter   acme 2.3 (file name: legacy)", "protocol  lua:/chat/completions", "cold ", "per call ", "memory "]
    {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    assert!(
        out.contains(
            "problem   describe() names it `acme`, but the gateway knows an adapter by its file name (`legacy`)"
        ),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.lua");
    std::fs::write(&broken, "return { name = 'broken', transform_request = ").unwrap();
    let (code, out, err) = switchyard(&["adapter", "check", &broken.display().to_string()]);
    assert_ne!(code, 0, "{out}{err}");
    assert!(format!("{out}{err}").contains("syntax error: script:1"), "Lua's own error is passed on: {out}{err}");
}

#[test]
fn check_reports_shape_costs_and_problems() {
    let (code, out, err) = switchyard(&[
        "adapter",
        "check",
        "anthropic",
        "--cases",
        &repo("plugins/anthropic/cases").display().to_string(),
        "--cache-dir",
        &shared_cache().display().to_string(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "protocol  anthropic-messages",
        "native    forwards anthropic-messages, anthropic-count-tokens",
        "shape     core modules",
        "cold ",
        "per call ",
        "memory ",
        "per event ",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // A file named unlike what describe() says, with too little memory for what it starts with.
    let dir = tempfile::tempdir().unwrap();
    let misnamed = dir.path().join("renamed.wasm");
    std::fs::copy(guest_wasm("hostile"), &misnamed).unwrap();
    let (code, out, _) = switchyard(&["adapter", "check", &misnamed.display().to_string(), "--memory-mb", "2"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "problem   describe() names it `hostile`, but the gateway knows an adapter by its file name (`renamed`)"
        ),
        "{out}"
    );
    assert!(out.contains("over half the memory cap (2 MiB)"), "{out}");
    // Not a component at all.
    let module = dir.path().join("core.wasm");
    std::fs::write(&module, b"\0asm\x01\0\0\0").unwrap();
    let (code, _, err) = switchyard(&["adapter", "check", &module.display().to_string(), "--no-cache"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a valid WebAssembly component"), "{err}");
}

/// `switchyard check` on a config of `data_dir` plus `rest` fails, naming each of `expected`.
pub fn refused_config(rest: &str, expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, format!("data_dir: {}\n{rest}", dir.path().display())).unwrap();
    let (code, _, err) = switchyard(&["check", "--config", &file.display().to_string()]);
    assert_eq!(code, 2, "{err}");
    for expected in expected {
        assert!(err.contains(expected), "missing {expected:?} in:\n{err}");
    }
}

#[test]
fn adapter_limits_are_checked_by_field() {
    refused_config(
        "adapters:\n  slow:\n    memory_mb: 0\n    cpu_ms_per_call: 2000\n    wall_ms_per_call: 1000\n    max_instances: 0\n",
        &[
            "adapters.slow.memory_mb: must be between 1 and 4096",
            "adapters.slow.wall_ms_per_call: 1000 ms is less than this adapter's cpu_ms_per_call (2000 ms)",
            "adapters.slow.max_instances: must be at least 1",
        ],
    );
}

/// The hostile guest's failures on `grow` and `loop`, on a gateway with `grants` under `adapters:`.
async fn hostile_failures(mock: &MockUpstream, grants: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("adapters")).unwrap();
    std::fs::copy(guest_wasm("hostile"), dir.path().join("adapters/hostile.wasm")).unwrap();
    let yaml = config_with(&format!(
        "body_limit_mb: 1\nsandbox: {{memory_mb: 40, cpu_ms_per_call: 300}}\nadapters: {{{grants}}}\n\
         sources:\n  - {{name: evil, base_url: '{}', adapter: hostile, models: [{{name: grow}}, {{name: loop}}]}}\n",
        mock.url
    ));
    let gw = TestGateway::start_in(dir, &yaml).await;
    let mut seen = Vec::new();
    for model in ["grow", "loop"] {
        let response = gw.chat(chat_body(model, false)).await;
        assert_eq!(response.status(), 502, "{model}");
        let body: Value = response.json().await.unwrap();
        seen.push(body["error"]["message"].as_str().unwrap_or_default().to_string());
    }
    seen
}

#[tokio::test]
async fn an_adapters_own_limits_replace_the_sandbox_defaults() {
    let mock = MockUpstream::start().await;
    let defaults = hostile_failures(&mock, "").await;
    assert!(defaults[0].contains("memory cap of 40 MiB"), "{}", defaults[0]);
    assert!(defaults[1].contains("CPU bound of 300 ms"), "{}", defaults[1]);
    let granted = hostile_failures(&mock, "hostile: {memory_mb: 80, cpu_ms_per_call: 1000}").await;
    assert!(granted[0].contains("memory cap of 80 MiB"), "{}", granted[0]);
    assert!(granted[1].contains("CPU bound of 1000 ms"), "{}", granted[1]);
}

/// `adapter new` in every language writes a project that builds with that language's pinned
/// toolchain and passes its own case; the WIT it carries is the gateway's.
#[test]
fn new_projects_in_every_language_build_and_pass_their_case() {
    let wit = std::fs::read_to_string(repo("wit/adapter.wit")).unwrap();
    let root = tempfile::tempdir().unwrap();
    for lang in ["c", "js", "python", "rust"] {
        let dir = root.path().join(lang);
        let name = format!("starter-{lang}");
        let (code, out, err) =
            switchyard(&["adapter", "new", &name, "--lang", lang, "--dir", &dir.display().to_string()]);
        assert_eq!(code, 0, "{lang}: {out}{err}");
        assert_eq!(std::fs::read_to_string(dir.join("wit/adapter.wit")).unwrap(), wit, "{lang}");
        let build = Command::new(dir.join("build.sh"))
            // The Rust starter shares one target folder across runs; the others install their pinned tools.
            .env("CARGO_TARGET_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("starter-rust"))
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            // The C starter's bindings generator, installed by examples/adapters/build.sh.
            .env("WIT_BINDGEN", repo("target/tools/bin/wit-bindgen"))
            .output()
            .unwrap();
        assert!(
            build.status.success(),
            "{lang} build:\n{}{}",
            String::from_utf8_lossy(&build.stdout),
            String::from_utf8_lossy(&build.stderr)
        );
        let wasm = dir.join(format!("{name}.wasm"));
        assert!(wasm.exists(), "{lang}: {} was not built", wasm.display());
        let (code, out) = adapter_test(&wasm.display().to_string(), &dir.join("cases"));
        assert_eq!(code, 0, "{lang}:\n{out}");
    }
    let (code, _, err) = switchyard(&["adapter", "new", "Bad_Name", "--lang", "js"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot name an adapter"), "{err}");
}

/// `component` with a custom section holding `n`: another build of the same adapter (other
/// bytes, the same behaviour), as an author's rebuild gives.
fn rebuilt(component: &[u8], n: usize) -> Vec<u8> {
    let name = b"rebuild";
    let payload = n.to_string().into_bytes();
    let content_len = 1 + name.len() + payload.len();
    let mut out = component.to_vec();
    out.push(0); // a custom section
    out.push(u8::try_from(content_len).unwrap());
    out.push(u8::try_from(name.len()).unwrap());
    out.extend_from_slice(name);
    out.extend_from_slice(&payload);
    out
}

/// Issue 36's silent compiles: the author's tools say when they compile (size and time), the
/// compiled cache is the user's, shared with a gateway on the same machine, and it keeps only
/// an adapter's newest builds however often it is rebuilt.
#[test]
fn the_compile_cache_is_shared_said_and_bounded_across_twenty_rebuilds() {
    let home = tempfile::tempdir().unwrap();
    let cache = home.path().join("switchyard");
    let work = tempfile::tempdir().unwrap();
    let wasm = work.path().join("my-adapter.wasm");
    let original = std::fs::read(guest_wasm("openai")).unwrap();
    let check = || {
        let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["adapter", "check", &wasm.display().to_string()])
            .env("XDG_CACHE_HOME", home.path())
            .env_remove("SWITCHYARD_LOG")
            .output()
            .unwrap();
        // (It exits 1 for one problem: the built-in describes itself as `openai`.)
        let out = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.contains("\nload "), "{out}");
        out
    };
    let compiled_mine =
        |out: &str| out.lines().any(|l| l.contains("compiled") && l.contains("my-adapter") && l.contains("ms="));
    for n in 0..20 {
        std::fs::write(&wasm, rebuilt(&original, n)).unwrap();
        let out = check();
        assert!(compiled_mine(&out), "build {n}: the compile is said, with its time:\n{out}");
        let mine = std::fs::read_dir(&cache)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("-my-adapter-"))
            .count();
        assert!(mine <= 3, "build {n}: {mine} compiled builds of my-adapter kept");
    }
    let again = check();
    assert!(!compiled_mine(&again) && again.contains("read from the compile cache"), "{again}");

    // A gateway on this machine (no cache_dir) serves the same build without compiling it.
    let data = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(data.path().join("adapters")).unwrap();
    std::fs::copy(&wasm, data.path().join("adapters/my-adapter.wasm")).unwrap();
    let config = data.path().join("config.yaml");
    std::fs::write(&config, format!("listen: 127.0.0.1:0\ndata_dir: {}\n", data.path().display())).unwrap();
    let mut gateway = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["--config", &config.display().to_string()])
        .env("XDG_CACHE_HOME", home.path())
        .env("SWITCHYARD_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(gateway.stderr.take().unwrap()));
    let mut log = Vec::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        let listening = line.contains("listening on ");
        log.push(line);
        if listening {
            break;
        }
    }
    let _ = gateway.kill();
    let _ = gateway.wait();
    let log = log.join("\n");
    assert!(log.contains("listening on "), "{log}");
    assert!(
        !log.lines().any(|l| l.contains("compiling") && l.contains("my-adapter")),
        "the gateway compiled it again:\n{log}"
    );
}

/// A starter project in `lang` changed to throw: in transform-request on a message saying
/// "throw" (or the check's "one word"), in transform-response and in a stream chunk on "boom";
/// with three cases that meet each. Built with the language's real toolchain.
fn throwing_project(root: &Path, lang: &str) -> PathBuf {
    let dir = root.join(lang);
    let name = format!("throw-{lang}");
    let (code, out, err) = switchyard(&["adapter", "new", &name, "--lang", lang, "--dir", &dir.display().to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    let edit = |file: &str, edits: &[(&str, &str)]| {
        let path = dir.join(file);
        let mut text = std::fs::read_to_string(&path).unwrap();
        for (at, add) in edits {
            assert!(text.contains(at), "{file}: {at:?}");
            text = text.replacen(at, &format!("{at}{add}"), 1);
        }
        std::fs::write(path, text).unwrap();
    };
    match lang {
        "js" => edit(
            "adapter.js",
            &[
                (
                    "    body.model = ctx.upstreamModel;\n",
                    "    if (/throw|one word/.test(JSON.stringify(body.messages))) notDefinedAnywhere(body);\n",
                ),
                (
                    "    const text = decoder.decode(response.body);\n",
                    "    if (text.includes('boom')) JSON.parse('{ broken');\n",
                ),
                ("    const data = event.data.trim();\n", "    if (data.includes('boom')) null.boom();\n"),
            ],
        ),
        _ => edit(
            "app.py",
            &[
                ("import json\n", "import re\n"),
                (
                    "        body[\"model\"] = self.ctx.upstream_model\n",
                    "        if re.search(\"throw|one word\", json.dumps(body.get(\"messages\"))):\n            raise ValueError(\"the author's own mistake\")\n",
                ),
                (
                    "            raise upstream_error(response)\n",
                    "        if b\"boom\" in response.body:\n            {}[\"missing key\"]\n",
                ),
                ("        data = event.data.strip()\n", "        if \"boom\" in data:\n            1 / 0\n"),
            ],
        ),
    }
    let cases = dir.join("cases");
    let example = std::fs::read_to_string(cases.join("example.json")).unwrap();
    let stream = std::fs::read_to_string(cases.join("stream.json")).unwrap();
    std::fs::write(cases.join("throw-request.json"), example.replace("\"content\": \"Hi\"", "\"content\": \"throw\""))
        .unwrap();
    std::fs::write(
        cases.join("boom-response.json"),
        example.replace("\"content\": \"Hello!\"}, \"finish_reason\"", "\"content\": \"boom\"}, \"finish_reason\""),
    )
    .unwrap();
    std::fs::write(
        cases.join("boom-stream.json"),
        stream.replace("\\\"content\\\":\\\"Hel\\\"", "\\\"content\\\":\\\"boom\\\""),
    )
    .unwrap();
    let build = Command::new(dir.join("build.sh")).output().unwrap();
    assert!(build.status.success(), "{lang} build:\n{}", String::from_utf8_lossy(&build.stderr));
    dir.join(format!("{name}.wasm"))
}

/// Issue 36's invisible exceptions: what a JavaScript or Python adapter throws reaches the
/// author — `adapter test` per case and `adapter check` print the message and where it came
/// from — and the operator (the gateway's log), while a client gets the adapter's name and the
/// short reason only.
#[tokio::test]
async fn an_exception_in_a_javascript_or_python_adapter_says_what_and_where() {
    let root = tempfile::tempdir().unwrap();
    let mock = MockUpstream::start().await;
    for (lang, errors, place) in [
        (
            "js",
            ["ReferenceError: notDefinedAnywhere is not defined", "SyntaxError: JSON.parse", "TypeError:"],
            "@adapter.js:",
        ),
        (
            "python",
            ["ValueError: the author's own mistake", "KeyError: 'missing key'", "ZeroDivisionError: division by zero"],
            "app.py\", line ",
        ),
    ] {
        let wasm = throwing_project(root.path(), lang);
        let (code, out) = adapter_test(&wasm.display().to_string(), &wasm.parent().unwrap().join("cases"));
        assert_eq!(code, 1, "{lang}:\n{out}");
        // One block a case: its FAIL/ok line and the lines under it.
        let mut blocks: Vec<String> = Vec::new();
        for line in out.lines() {
            match blocks.last_mut() {
                Some(block) if !line.starts_with("FAIL ") && !line.starts_with("ok ") => {
                    block.push('\n');
                    block.push_str(line);
                }
                _ => blocks.push(line.to_string()),
            }
        }
        for (case, error) in ["throw-request", "boom-response", "boom-stream"].iter().zip(errors) {
            let report = blocks
                .iter()
                .find(|b| b.starts_with("FAIL ") && b.lines().next().unwrap().contains(&format!("{case}.json")))
                .unwrap_or_else(|| panic!("{lang}: {case} not reported as failing:\n{out}"));
            assert!(
                report.contains(error) && report.contains(place),
                "{lang} {case}: the exception and where:\n{report}"
            );
        }
        let (_, out, err) = switchyard(&[
            "adapter",
            "check",
            &wasm.display().to_string(),
            "--cache-dir",
            &shared_cache().display().to_string(),
        ]);
        assert!(format!("{out}{err}").contains(errors[0]), "{lang} check:\n{out}{err}");

        // Served by a gateway: the client gets the adapter and the reason; the log, where.
        let data = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(data.path().join("adapters")).unwrap();
        let name = format!("throw-{lang}");
        std::fs::copy(&wasm, data.path().join(format!("adapters/{name}.wasm"))).unwrap();
        let mut gw = crate::support::binary::Binary::start(
            data.path(),
            &format!(
                "sources:\n  - {{name: s, base_url: '{}', adapter: {name}, models: [{{name: m, upstream: 'say:boom'}}]}}\n",
                mock.url
            ),
        );
        let answer =
            gw.chat(&serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "throw"}]})).await;
        assert_eq!(answer.status(), 502);
        let text = answer.text().await.unwrap();
        assert!(
            text.contains(&name) && text.contains(errors[0]) && !text.contains(place),
            "{lang}: the client's answer: {text}"
        );
        let logged = loop {
            let line = tokio::time::timeout(std::time::Duration::from_secs(10), gw.log.recv()).await.unwrap().unwrap();
            if line.contains("adapter error") {
                break line;
            }
        };
        assert!(logged.contains(errors[0]) && logged.contains(place), "{lang}: the log: {logged}");
    }
}

/// `switchyard policy test TARGET --cases DIR` with the tests' shared compile cache.
fn policy_test(target: &str, cases: &Path) -> (i32, String) {
    let cache = shared_cache().display().to_string();
    let (code, out, err) =
        switchyard(&["policy", "test", target, "--cases", &cases.display().to_string(), "--cache-dir", &cache]);
    (code, format!("{out}{err}"))
}

#[test]
fn the_built_in_policies_pass_their_recorded_cases() {
    for name in ["redact-pii", "block-secrets", "deny-list", "limits"] {
        let cases = repo(&format!("plugins/{name}/cases"));
        let (code, out) = policy_test(name, &cases);
        assert_eq!(code, 0, "{name}:\n{out}");
        let summary = out.lines().last().unwrap_or_default();
        let count: usize = summary.split(' ').next().unwrap().parse().unwrap_or(0);
        assert!(count >= 3 && summary.ends_with(" 0 failed"), "{name}: {summary}");
    }
}

#[test]
fn a_failing_policy_case_names_its_difference() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, case: Value| std::fs::write(dir.path().join(name), case.to_string()).unwrap();
    write(
        "wrong-verdict.json",
        serde_json::json!({
            "about": "expects an allow where redact-pii rewrites",
            "hook": "request",
            "input": {"model": "m", "messages": [{"role": "user", "content": "mail me: a@b.io"}]},
            "expect": {"verdict": "allow"}
        }),
    );
    write(
        "wrong-rewrite.json",
        serde_json::json!({
            "about": "expects another replacement",
            "hook": "request",
            "input": {"model": "m", "messages": [{"role": "user", "content": "mail me: a@b.io"}]},
            "expect": {"verdict": "rewrite", "rewrite": {"messages": [{"content": "mail me: <email>"}]}}
        }),
    );
    write(
        "wrong-denial.json",
        serde_json::json!({
            "hook": "answer",
            "settings": {"action": "deny"},
            "input": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "a@b.io"}}]},
            "expect": {"verdict": "deny", "status": 403, "code": "pii_detected"}
        }),
    );
    write(
        "wrong-stream.json",
        serde_json::json!({
            "hook": "stream",
            "input": ["mail a@", "b.io now"],
            "expect": {"verdict": "rewrite", "rewrite": "mail a@b.io now"}
        }),
    );
    std::fs::write(dir.path().join("broken.json"), "{\"hook\": \"request\", ").unwrap();
    let (code, out) = policy_test("redact-pii", dir.path());
    assert_eq!(code, 1, "{out}");
    for expected in [
        "FAIL",
        "broken.json: not a valid policy case",
        "wrong-verdict.json: expects an allow where redact-pii rewrites (request: rewrite)",
        "verdict: expected allow, got rewrite",
        "rewrite $.messages[0].content: expected \"mail me: <email>\", got \"mail me: [EMAIL]\"",
        "denial: status 400 (expected 403)",
        "the policy said: deny 400 pii_detected: the answer carries personal data",
        "the client sees: expected \"mail a@b.io now\", got \"mail [EMAIL] now\"",
        "5 cases: 0 passed, 5 failed",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    // A hook the policy does not declare is never called: such a case cannot pass.
    write(
        "wrong-verdict.json",
        serde_json::json!({"hook": "answer", "input": {"choices": []}, "expect": {"verdict": "allow"}}),
    );
    let (code, out) = policy_test("limits", dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the policy has no answer hook (describe() declares request)"), "{out}");
}

#[test]
fn policy_check_prints_hooks_and_hold_back_and_names_a_trap() {
    let cache = shared_cache().display().to_string();
    let (code, out, err) = switchyard(&["policy", "check", "redact-pii", "--cache-dir", &cache]);
    assert_eq!(code, 0, "{out}{err}");
    for line in [
        "policy    redact-pii ",
        "hooks     request, answer, stream",
        "hold-back 64 characters",
        "load      ",
        "request   ",
        "answer    ",
        "stream    ",
        "no problems found",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    let (code, out, err) =
        switchyard(&["policy", "check", "limits", "--setting", "max_tokens=1", "--cache-dir", &cache]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("hooks     request\n") && out.contains("max_tokens_too_high"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let hostile = dir.path().join("hostile-policy.wasm");
    std::fs::copy(guest_wasm("hostile_policy"), &hostile).unwrap();
    let file = hostile.display().to_string();
    let (code, out, err) = switchyard(&["policy", "check", &file, "--setting", "mode=trap", "--cache-dir", &cache]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("problem   the request hook fails on a sample chat request"), "{out}");
    assert!(out.contains("hold-back 0 characters"), "{out}");
    let (code, out, _) = switchyard(&["policy", "check", &file, "--setting", "mode=not-json", "--cache-dir", &cache]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("rewrite of a sample chat request is not a JSON object"), "{out}");
    let (code, _, err) = switchyard(&["policy", "check", "no-such-policy"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("neither a .wasm file nor a built-in policy (redact-pii, "), "{err}");
}

/// `policy new` in Rust, JavaScript and Python writes a project that builds with that
/// language's pinned toolchain and passes its own cases; the WIT it carries is the gateway's.
#[test]
fn new_policy_projects_build_and_pass_their_cases() {
    let wit = std::fs::read_to_string(repo("wit/policy/policy.wit")).unwrap();
    let root = tempfile::tempdir().unwrap();
    for lang in ["js", "python", "rust"] {
        let dir = root.path().join(lang);
        let name = format!("policy-{lang}");
        let (code, out, err) =
            switchyard(&["policy", "new", &name, "--lang", lang, "--dir", &dir.display().to_string()]);
        assert_eq!(code, 0, "{lang}: {out}{err}");
        assert_eq!(std::fs::read_to_string(dir.join("wit/policy.wit")).unwrap(), wit, "{lang}");
        let build = Command::new(dir.join("build.sh"))
            .env("CARGO_TARGET_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("starter-rust"))
            .env_remove("CARGO_ENCODED_RUSTFLAGS")
            .env_remove("RUSTFLAGS")
            .env_remove("CARGO_BUILD_TARGET")
            .output()
            .unwrap();
        assert!(
            build.status.success(),
            "{lang} build:\n{}{}",
            String::from_utf8_lossy(&build.stdout),
            String::from_utf8_lossy(&build.stderr)
        );
        let wasm = dir.join(format!("{name}.wasm"));
        assert!(wasm.exists(), "{lang}: {} was not built", wasm.display());
        let (code, out) = policy_test(&wasm.display().to_string(), &dir.join("cases"));
        assert_eq!(code, 0, "{lang}:\n{out}");
        assert!(out.contains("2 cases: 2 passed, 0 failed"), "{lang}:\n{out}");
    }
    let (code, _, err) = switchyard(&["policy", "new", "Bad_Name", "--lang", "rust"]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot name a policy"), "{err}");
}
