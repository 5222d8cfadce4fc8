//! Lua adapters in the Lua-compat component: the bundled legacy built-ins produce the same
//! unified output as the native adapters on the same fixtures; a legacy-style script dropped
//! into adapter_dir serves a source; hostile scripts fail their attempt with a clear error and
//! leave the gateway serving; http is denied unless allowed; an upload during a stream leaves
//! the stream alone.

use serde_json::{Value, json};

use crate::support::{MockUpstream, TestGateway, assemble, config_with, openai_events};

/// One source per (adapter flavour, protocol): native `NAME` and Lua `lua-NAME` side by side.
fn pairs_yaml(mock: &MockUpstream) -> String {
    let root = mock.url.trim_end_matches("/v1");
    let mut out = String::from("sources:\n");
    type Models = &'static [(&'static str, &'static str)];
    let protocols: [(&str, &str, Models); 5] = [
        ("openai", mock.url.as_str(), &[("o-text", "fixture"), ("o-tools", "tools")]),
        (
            "anthropic",
            mock.url.as_str(),
            &[("a-text", "claude-text"), ("a-tools", "claude-tools"), ("a-think", "claude-thinking")],
        ),
        ("deepseek", mock.url.as_str(), &[("d-text", "deepseek-fixture")]),
        ("ollama", root, &[("l-text", "llama"), ("l-tools", "llama-tools"), ("l-think", "llama-think")]),
        ("gemini", &format!("{root}/v1beta"), &[("g-text", "gemini-text"), ("g-tools", "gemini-tools")]),
    ];
    for (adapter, url, models) in protocols {
        for prefix in ["", "lua-"] {
            let models: Vec<String> = models.iter().map(|(n, u)| format!("{{name: {n}, upstream: {u}}}")).collect();
            out.push_str(&format!(
                "  - {{name: {prefix}{adapter}, adapter: {prefix}{adapter}, base_url: '{url}', stream_whole_answers: false, api_key: sk-upstream-0123456789, models: [{}]}}\n",
                models.join(", ")
            ));
        }
    }
    out
}

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "stream_options": {"include_usage": true},
           "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
           "messages": [{"role": "user", "content": "Hello"}]})
}

/// What a unified answer adds up to, comparable across adapters (ids and key order aside).
fn essence_of_response(body: &Value) -> Value {
    let message = &body["choices"][0]["message"];
    let calls: Vec<Value> = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!([
                c["function"]["name"],
                serde_json::from_str::<Value>(c["function"]["arguments"].as_str().unwrap_or("null")).unwrap()
            ])
        })
        .collect();
    json!({
        "content": message["content"].as_str().unwrap_or_default(), "reasoning": message["reasoning_content"].as_str().unwrap_or_default(),
        "calls": calls, "finish": body["choices"][0]["finish_reason"],
        "usage": [body["usage"]["prompt_tokens"], body["usage"]["completion_tokens"], body["usage"]["total_tokens"]],
    })
}

fn essence_of_stream(sse: &str) -> Value {
    let (events, done) = openai_events(sse);
    assert!(done, "complete stream: {sse}");
    let a = assemble(&events);
    let calls: Vec<Value> = a
        .tool_calls
        .iter()
        .map(|(_, name, args)| json!([name, serde_json::from_str::<Value>(args).unwrap()]))
        .collect();
    let usage = a.usage.unwrap_or_default();
    json!({
        "content": a.content, "reasoning": a.reasoning, "calls": calls, "finish": a.finish,
        "usage": [usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]],
    })
}

#[tokio::test]
async fn bundled_lua_built_ins_match_the_native_adapters_on_the_same_fixtures() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&config_with(&pairs_yaml(&mock))).await;
    let cases = [
        ("openai", "o-text"),
        ("openai", "o-tools"),
        ("anthropic", "a-text"),
        ("anthropic", "a-tools"),
        ("anthropic", "a-think"),
        ("deepseek", "d-text"),
        ("ollama", "l-text"),
        ("ollama", "l-tools"),
        ("ollama", "l-think"),
        ("gemini", "g-text"),
        ("gemini", "g-tools"),
    ];
    for (adapter, model) in cases {
        for stream in [false, true] {
            let mut seen = Vec::new();
            for source in [adapter.to_string(), format!("lua-{adapter}")] {
                let response = gw.chat(ask(&format!("{source}/{model}"), stream)).await;
                assert_eq!(response.status(), 200, "{source}/{model} stream={stream}");
                let text = response.text().await.unwrap();
                seen.push(if stream {
                    essence_of_stream(&text)
                } else {
                    essence_of_response(&serde_json::from_str(&text).unwrap())
                });
            }
            assert_eq!(seen[1], seen[0], "lua-{adapter} vs {adapter} on {model}, stream={stream}");
        }
    }
}

const LEGACY: &str = include_str!("../fixtures/lua/legacy.lua");

async fn with_scripts(mock: &MockUpstream, scripts: &[(&str, &str)], extra: &str) -> TestGateway {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("adapters")).unwrap();
    for (name, script) in scripts {
        std::fs::write(dir.path().join(format!("adapters/{name}.lua")), script).unwrap();
    }
    let mut models = String::new();
    for (name, _) in scripts {
        models.push_str(&format!(
            "  - {{name: {name}, adapter: {name}, base_url: '{}', stream_whole_answers: false, api_key: sk-acme-secret-0001, models: [{{name: {name}-m, upstream: 'say:hello there'}}, {{name: {name}-g, upstream: gated}}]}}\n",
            mock.url
        ));
    }
    let yaml = config_with(&format!("admin_token: adm-lua-token-0001\n{extra}sources:\n{models}"));
    TestGateway::start_in(dir, &yaml).await
}

#[tokio::test]
async fn a_legacy_script_dropped_into_adapter_dir_serves_a_source_stream_and_not() {
    let mock = MockUpstream::start().await;
    let gw = with_scripts(&mock, &[("acme", LEGACY)], "").await;
    let body: Value = gw
        .chat(json!({"model": "acme-m", "messages": [{"role": "user", "content": "hi"}]}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "HELLO THERE");
    assert_eq!(body["usage"]["prompt_tokens"], 10);
    let sent = mock.state.requests().pop().unwrap();
    assert!(sent.headers["x-acme-timestamp"].to_str().unwrap().parse::<u64>().is_ok());
    assert_eq!(sent.body["prompt"], "hi");
    assert_eq!(sent.headers["x-acme-source"], "acme");
    assert!(sent.headers.get("authorization").is_none(), "build_headers decides the headers");
    let signature = sent.headers["x-acme-signature"].to_str().unwrap();
    assert!(signature.len() == 64 && signature.bytes().all(|b| b.is_ascii_hexdigit()), "{signature}");

    let sse = gw
        .chat(json!({"model": "acme-m", "stream": true, "messages": [{"role": "user", "content": "hi"}]}))
        .await
        .text()
        .await
        .unwrap();
    let (events, done) = openai_events(&sse);
    assert!(done);
    assert_eq!(assemble(&events).content, "HELLO THERE");
    let adapters: Vec<String> = gw.gateway.plugins.names();
    assert!(adapters.contains(&"acme".to_string()));
    let acme = gw.gateway.plugins.adapter(&switchyard::config::AdapterName::new("acme")).unwrap();
    assert_eq!((acme.metadata().name.as_str(), acme.metadata().version.as_str()), ("acme", "2.3"));
}

#[tokio::test]
async fn hostile_scripts_fail_their_attempt_clearly_and_the_gateway_keeps_serving() {
    let mock = MockUpstream::start().await;
    let body = |code: &str| format!("return {{ name = 'x', transform_request = function(raw) {code} end }}");
    let scripts = [
        ("spin", body("while true do end")),
        // Distinct 8 MB strings (equal ones would be interned once): the 32 MiB cap in a few steps.
        ("hog", body("local t = {} while true do t[#t + 1] = string.rep(tostring(#t), 4194304) end")),
        ("boom", body("error('boom at the gate')")),
        ("wrong", body("return { not_a = 'string' }")),
        ("snoop", body("return io.open('/etc/passwd'):read('*a')")),
        ("shell", body("return os.execute('id')")),
        ("fine", body("return raw")),
        (
            "everywhere",
            "return { name = 'e', transform_request = function(raw) return raw end,
                      transform_response = function() error('no response for you') end,
                      transform_stream_chunk = function() error('no chunks either') end }"
                .to_string(),
        ),
    ];
    let scripts: Vec<(&str, &str)> = scripts.iter().map(|(n, s)| (*n, s.as_str())).collect();
    // The CPU bound is wall time in epochs: a generous one keeps a loaded CI machine from
    // stopping the memory bomb before its memory cap does; the endless loop still hits it.
    let gw = with_scripts(&mock, &scripts, "sandbox: {cpu_ms_per_call: 2000}\n").await;
    let expect = [
        ("spin", "exceeded its CPU bound of 2000 ms per call"),
        ("hog", "memory"),
        ("boom", "Lua adapter: `transform_request` failed: runtime error: script:1: boom at the gate"),
        ("wrong", "must return a string, it returned table"),
        ("snoop", "attempt to index global 'io' (a nil value)"),
        ("shell", "attempt to call field 'execute' (a nil value)"),
    ];
    for (name, why) in expect {
        let response =
            gw.chat(json!({"model": format!("{name}-m"), "messages": [{"role": "user", "content": "x"}]})).await;
        assert_eq!(response.status(), 502, "{name}");
        let message = response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(why), "{name}: {message}");
        let adapter = gw.gateway.plugins.adapter(&switchyard::config::AdapterName::new(name)).unwrap();
        assert_eq!(adapter.pool_stats().instances, 0, "{name}: the instance that failed was let go, not pooled");
        // The gateway is unharmed: a good script still answers, and keeps its warm instance.
        let ok = gw.chat(json!({"model": "fine-m", "messages": [{"role": "user", "content": "x"}]})).await;
        assert_eq!(ok.status(), 200, "after {name}");
    }
    let fine = gw.gateway.plugins.adapter(&switchyard::config::AdapterName::new("fine")).unwrap();
    assert_eq!(
        (fine.pool_stats().instances, fine.pool_stats().idle),
        (1, 1),
        "one warm instance, reused by every request"
    );

    // Errors in every function: a stream chunk's error forwards the upstream's own line (the
    // legacy contract), so the stream still arrives whole; a response fails clearly.
    let sse =
        gw.chat(json!({"model": "everywhere-m", "stream": true, "messages": [{"role": "user", "content": "x"}]})).await;
    let (events, done) = openai_events(&sse.text().await.unwrap());
    assert!(done);
    assert_eq!(assemble(&events).content, "hello there");
    let response = gw.chat(json!({"model": "everywhere-m", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(response.status(), 502);
    let message = response.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("`transform_response` failed: runtime error: script:2: no response for you"), "{message}");
}

// Two workers: the script's request blocks one while the mock answers on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_from_scripts_is_denied_unless_the_host_is_allowed() {
    let mock = MockUpstream::start().await;
    let fetching = r#"return { name = 'f', transform_request = function(raw)
        local got = json.decode(http_post(TOKEN_URL, '{"grant":"x"}'))
        local req = json.decode(raw)
        req.messages = { { role = 'user', content = got.error or ('token status ' .. got.status) } }
        return json.encode(req)
      end }"#
        .replace("TOKEN_URL", &format!("'{}/chat/completions'", mock.url));
    let port = reqwest::Url::parse(&mock.url).unwrap().port().unwrap();
    let gw = with_scripts(&mock, &[("fetcher", &fetching)], "").await;
    assert_eq!(
        gw.chat(json!({"model": "fetcher-m", "messages": [{"role": "user", "content": "x"}]})).await.status(),
        200
    );
    let requests: Vec<_> = mock.state.requests.lock().unwrap().drain(..).collect();
    assert_eq!(requests.len(), 1, "nothing but the chat request reached the mock");
    let said = requests[0].body["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(said.starts_with(&format!("HTTP to 127.0.0.1 port {port} is denied")), "{said}");

    // A host allowed without a port is allowed on 80 and 443 only.
    let gw =
        with_scripts(&mock, &[("fetcher", &fetching)], "adapters: {fetcher: {allow_hosts: ['127.0.0.1']}}\n").await;
    gw.chat(json!({"model": "fetcher-m", "messages": [{"role": "user", "content": "x"}]})).await;
    let requests: Vec<_> = mock.state.requests.lock().unwrap().drain(..).collect();
    let said = requests[0].body["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(said.starts_with(&format!("HTTP to 127.0.0.1 port {port} is denied")), "{said}");

    let allowed = format!("adapters: {{fetcher: {{allow_hosts: ['127.0.0.1:{port}']}}}}\n");
    let gw = with_scripts(&mock, &[("fetcher", &fetching)], &allowed).await;
    assert_eq!(
        gw.chat(json!({"model": "fetcher-m", "messages": [{"role": "user", "content": "x"}]})).await.status(),
        200
    );
    let requests = mock.state.requests();
    assert_eq!(requests.len(), 2, "the script's own request, then the chat request");
    assert_eq!(requests[0].body, json!({"grant": "x"}));
    assert_eq!(requests[1].body["messages"][0]["content"], "token status 200");
}

#[tokio::test]
async fn a_script_uploaded_while_a_stream_is_in_flight_leaves_the_stream_alone() {
    let mock = MockUpstream::start().await;
    let gw = with_scripts(&mock, &[("acme", LEGACY)], "").await;
    // The script skips the role-only first event: let the second ("Hello") through too.
    mock.state.gate.add_permits(1);
    let stream =
        gw.chat(json!({"model": "acme-g", "stream": true, "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(stream.status(), 200);
    let upload = |script: &str| {
        reqwest::Client::new()
            .put(format!("{}/admin/api/adapters/acme", gw.url))
            .bearer_auth("adm-lua-token-0001")
            .body(script.to_string())
            .send()
    };
    let broken = upload("return 42").await.unwrap();
    assert_eq!(broken.status(), 400);
    let text = broken.text().await.unwrap();
    assert!(text.contains("must return a table"), "{text}");
    let lower = LEGACY.replace("string.upper", "string.lower").replace("version = \"2.3\"", "version = \"2.4\"");
    assert_eq!(upload(&lower).await.unwrap().status(), 200);
    mock.state.gate.add_permits(10);
    let sse = stream.text().await.unwrap();
    let (events, done) = openai_events(&sse);
    assert!(done);
    assert_eq!(assemble(&events).content, "HELLO THERE!", "the open stream finished on the script it started with");
    let body: Value =
        gw.chat(json!({"model": "acme-m", "messages": [{"role": "user", "content": "x"}]})).await.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "hello there", "new requests get the new script");
}

#[tokio::test]
async fn a_trap_in_a_shared_instance_ends_the_streams_on_it_clearly_and_cools_nothing() {
    let mock = MockUpstream::start().await;
    let script = "return { name = 'mux', transform_request = function(raw) \
        if raw:find('spin') then while true do end end return raw end }";
    let gw = with_scripts(&mock, &[("mux", script)], "sandbox: {cpu_ms_per_call: 300}\n").await;
    let adapter = gw.gateway.plugins.adapter(&switchyard::config::AdapterName::new("mux")).unwrap();
    // A stream open on the adapter's one instance: its first event arrived, the rest are held.
    let stream =
        gw.chat(json!({"model": "mux-g", "stream": true, "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(stream.status(), 200);
    assert_eq!((adapter.pool_stats().instances, adapter.pool_stats().sessions), (1, 1));

    // Another request, seated on the same instance, traps it.
    let spin = gw.chat(json!({"model": "mux-m", "messages": [{"role": "user", "content": "spin"}]})).await;
    assert_eq!(spin.status(), 502);
    let message = spin.json::<Value>().await.unwrap()["error"]["message"].as_str().unwrap().to_string();
    assert!(message.contains("exceeded its CPU bound"), "{message}");

    // The stream's next event meets the lost instance: it ends in an error that says so.
    mock.state.gate.add_permits(100);
    let text = stream.text().await.unwrap();
    assert!(text.contains("failed in another request's call"), "{text}");
    let (_, done) = openai_events(&text);
    assert!(!done, "a cut stream is never reported complete");
    assert!(gw.gateway.scheduler.health().is_empty(), "neither the source nor the stream's request was at fault");

    // A fresh instance serves the next request.
    let ok = gw.chat(json!({"model": "mux-m", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(ok.status(), 200);
}
