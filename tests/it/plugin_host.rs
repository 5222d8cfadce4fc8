//! The plugin host directly: compiled-component cache across restarts, lazy pools bounded by
//! the summed max_concurrent, a stream-long session holding its instance.

use switchyard::config::AdapterName;
use switchyard::plugin::{Operation, PluginHost, SandboxLimits, SourceContext};

fn context() -> SourceContext {
    SourceContext {
        operation: Operation::Chat,
        source_name: "s".into(),
        base_url: "http://127.0.0.1:9/v1".into(),
        api_key: "sk-x".into(),
        upstream_model: "m".into(),
        settings: vec![],
    }
}

#[tokio::test]
async fn a_restart_reuses_the_compiled_cache() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let (_, first) =
        PluginHost::load(SandboxLimits::default(), Some(cache.clone()), None, Default::default()).await.unwrap();
    assert_eq!((first.compiled, first.cache_hits), (6, 0));
    let entries = std::fs::read_dir(&cache).unwrap().count();
    assert_eq!(entries, 6);
    let (host, second) =
        PluginHost::load(SandboxLimits::default(), Some(cache.clone()), None, Default::default()).await.unwrap();
    assert_eq!((second.compiled, second.cache_hits), (0, 6));
    assert_eq!(host.adapter(&AdapterName::new("openai")).unwrap().metadata().protocol, "openai-chat");

    // A corrupt entry is recompiled, not trusted.
    for entry in std::fs::read_dir(&cache).unwrap() {
        std::fs::write(entry.unwrap().path(), b"garbage").unwrap();
    }
    let (_, third) = PluginHost::load(SandboxLimits::default(), Some(cache), None, Default::default()).await.unwrap();
    assert_eq!((third.compiled, third.cache_hits), (6, 0));
}

#[tokio::test]
async fn pools_grow_lazily_and_wait_at_their_bound() {
    let (host, _) = PluginHost::load(SandboxLimits::default(), None, None, Default::default()).await.unwrap();
    let adapter = host.adapter(&AdapterName::new("openai")).unwrap().clone();
    adapter.set_pool_capacity(1);
    assert_eq!((adapter.pool_stats().capacity, adapter.pool_stats().instances), (1, 0), "nothing is preallocated");

    let ctx = context();
    let first = adapter.open_session(&ctx).await.unwrap();
    let mut second = Box::pin(adapter.open_session(&ctx));
    assert!(futures::poll!(&mut second).is_pending(), "the bound holds while a session is open");
    drop(first);
    assert_eq!(adapter.pool_stats().idle, 1, "a clean session leaves its instance warm");
    let second = second.await.unwrap();
    assert_eq!(adapter.pool_stats().idle, 0, "the waiting session got the warm instance");
    drop(second);

    adapter.set_pool_capacity(3);
    let sessions: Vec<_> = futures::future::join_all((0..3).map(|_| adapter.open_session(&ctx))).await;
    assert!(sessions.iter().all(Result::is_ok));
    let stats = adapter.pool_stats();
    assert_eq!((stats.instances, stats.sessions), (1, 3), "three sessions share the one instance");
    drop(sessions);
    let stats = adapter.pool_stats();
    assert_eq!((stats.capacity, stats.instances, stats.idle, stats.sessions), (3, 1, 1, 0));
}

#[tokio::test]
async fn pool_capacity_is_the_summed_max_concurrent_of_its_sources() {
    let yaml = crate::support::config_with(
        "sources:\n  - name: a\n    base_url: http://127.0.0.1:9\n    max_concurrent: 3\n    models: [{name: m1}]\n  - name: b\n    base_url: http://127.0.0.1:9\n    max_concurrent: 4\n    models: [{name: m2}]\n",
    );
    let gw = crate::support::TestGateway::start(&yaml).await;
    let adapter = gw.gateway.plugins.adapter(&AdapterName::new("openai")).unwrap();
    assert_eq!((adapter.pool_stats().capacity, adapter.pool_stats().instances), (7, 0));
}

#[tokio::test]
async fn a_session_transforms_a_request_through_the_real_component() {
    let (host, _) = PluginHost::load(SandboxLimits::default(), None, None, Default::default()).await.unwrap();
    let adapter = host.adapter(&AdapterName::new("openai")).unwrap();
    let mut session = adapter.open_session(&context()).await.unwrap();
    let request = session
        .transform_request(
            r#"{"model":"alias","messages":[{"role":"user","content":"hi"}],"stream":true,"disable_thinking":true}"#,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(request.url, "http://127.0.0.1:9/v1/chat/completions");
    assert!(request.headers.contains(&("authorization".into(), "Bearer sk-x".into())));
    let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["model"], "m");
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert!(body.get("disable_thinking").is_none());
    let verdict = session.transform_request("[1,2]").await.unwrap().unwrap_err();
    assert_eq!(verdict.kind, switchyard::plugin::ErrorKind::BadRequest);
}

/// A Lua adapter that passes requests through, and spins past its CPU bound on one that says
/// "spin" (the epoch deadline traps the instance).
const SPIN_ON_REQUEST: &str = "return { name = 'mux', transform_request = function(raw) if raw:find('spin') then while true do end end return raw end }";

const UNIFIED: &str = r#"{"model":"alias","messages":[{"role":"user","content":"hi"}]}"#;

#[tokio::test]
async fn sessions_share_instances_up_to_their_bound_and_idle_ones_shrink_back() {
    let limits = SandboxLimits { sessions_per_instance: 4, ..Default::default() };
    let (host, _) = PluginHost::load(limits, None, None, Default::default()).await.unwrap();
    let adapter = host.adapter(&AdapterName::new("openai")).unwrap();
    adapter.set_pool_capacity(100);
    let ctx = context();
    let mut sessions: Vec<_> = futures::future::join_all((0..10).map(|_| adapter.open_session(&ctx)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let stats = adapter.pool_stats();
    assert_eq!((stats.instances, stats.sessions), (3, 10), "four sessions an instance: 4 + 4 + 2");
    // Every session translates, two at once on one instance taking turns.
    let (first, rest) = sessions.split_at_mut(1);
    let (a, b) = futures::join!(first[0].transform_request(UNIFIED), rest[0].transform_request(UNIFIED));
    assert!(a.unwrap().is_ok() && b.unwrap().is_ok());
    for session in &mut sessions {
        assert!(session.transform_request(UNIFIED).await.unwrap().is_ok());
    }
    drop(sessions);
    let stats = adapter.pool_stats();
    assert_eq!((stats.instances, stats.idle, stats.sessions), (3, 3, 0));

    // Within the idle time nothing goes; past it all but one warm instance do.
    let now = std::time::Instant::now();
    assert_eq!(adapter.shrink_idle_pool(now), 0);
    assert_eq!(adapter.shrink_idle_pool(now + switchyard::plugin::IDLE_INSTANCE_TTL), 2);
    assert_eq!(adapter.pool_stats().instances, 1);
    let mut again = adapter.open_session(&ctx).await.unwrap();
    assert!(again.transform_request(UNIFIED).await.unwrap().is_ok());
    assert_eq!(adapter.pool_stats().instances, 1, "the warm one serves the next session");
}

#[tokio::test]
async fn a_trap_loses_the_sessions_on_its_instance_with_a_clear_error_and_no_other() {
    let cpu = std::time::Duration::from_millis(300);
    let limits = SandboxLimits { cpu_per_call: cpu, sessions_per_instance: 3, ..Default::default() };
    let (host, _) = PluginHost::load(limits, None, None, Default::default()).await.unwrap();
    let origin = switchyard::plugin::AdapterOrigin::Builtin;
    let adapter = host.check_lua(&AdapterName::new("mux"), origin, SPIN_ON_REQUEST).await.unwrap();
    adapter.set_pool_capacity(10);
    let ctx = context();
    let mut sessions: Vec<_> = futures::future::join_all((0..5).map(|_| adapter.open_session(&ctx)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(adapter.pool_stats().instances, 2, "3 + 2");

    // The first session's own call traps its instance: it is told why.
    let trapped = sessions[0].transform_request(r#"{"spin":1}"#).await.unwrap_err();
    assert!(matches!(trapped.cause, switchyard::plugin::SandboxCause::CpuLimit(_)), "{trapped}");
    // The two that shared it are lost, named as another request's doing; the two on the other
    // instance go on.
    for lost in &mut sessions[1..3] {
        let error = lost.transform_request(UNIFIED).await.unwrap_err();
        assert!(matches!(error.cause, switchyard::plugin::SandboxCause::InstanceLost), "{error}");
        assert!(error.cause.is_gateways_own());
    }
    for fine in &mut sessions[3..] {
        assert!(fine.transform_request(UNIFIED).await.unwrap().is_ok());
    }
    // The failed instance takes no new session: a new one lands beside the survivors.
    let mut next = adapter.open_session(&ctx).await.unwrap();
    assert!(next.transform_request(UNIFIED).await.unwrap().is_ok());
    drop(sessions);
    drop(next);
    assert_eq!(adapter.pool_stats().instances, 1, "the failed instance was let go");
}

/// A WIT file as `wit/released.txt` digests it: comments and white space removed.
fn wit_digest(text: &str) -> String {
    use sha2::{Digest, Sha256};
    let code: String = text.lines().map(|line| line.split("//").next().unwrap_or_default()).collect();
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    Sha256::digest(code.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn released_wit_versions_never_change_in_place() {
    let wit = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("wit");
    let released = std::fs::read_to_string(wit.join("released.txt")).unwrap();
    let entries: Vec<Vec<&str>> = released
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(' ').collect())
        .collect();
    assert!(entries.len() >= 2, "the adapter and policy packages are released");
    for entry in entries {
        let [package, file, digest] = entry[..] else { panic!("a line of wit/released.txt: {entry:?}") };
        let text = std::fs::read_to_string(wit.join(file)).unwrap();
        let version = package.rsplit_once('@').unwrap().1;
        assert!(text.contains(&format!("package {package};")), "{file} still declares {package}");
        assert_eq!(
            wit_digest(&text),
            digest,
            "{file} ({package}) changed, and version {version} is released: put the change in a new version \
             beside it (docs/policies.md, \"Versions\") and keep this one loading"
        );
    }
}

#[tokio::test]
async fn components_built_against_each_released_version_keep_loading() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/released");
    let (host, _) = PluginHost::load(SandboxLimits::default(), None, None, Default::default()).await.unwrap();

    // switchyard:adapter@0.1.0: the openai adapter as built when that version was released.
    let wasm = std::fs::read(fixtures.join("adapter-0.1.0-openai.wasm")).unwrap();
    let name = AdapterName::new("released-openai");
    let adapter =
        host.check(&name, switchyard::plugin::AdapterOrigin::File("released-openai.wasm".into()), &wasm).await.unwrap();
    let mut session = adapter.open_session(&context()).await.unwrap();
    let request = session.transform_request(UNIFIED).await.unwrap().unwrap();
    assert_eq!(request.url, "http://127.0.0.1:9/v1/chat/completions");

    // switchyard:policy@0.1.0: the limits policy as built then.
    let wasm = std::fs::read(fixtures.join("policy-0.1.0-limits.wasm")).unwrap();
    let policy = host.load_policy("released-limits", &wasm, SandboxLimits::default()).await.unwrap();
    assert!(policy.has(switchyard::plugin::Hooks::REQUEST));
    let context = switchyard::plugin::PolicyContext {
        request_id: "r".into(),
        key: "k".into(),
        route: None,
        requested_model: "m".into(),
        source: None,
        resolved_model: None,
        settings: vec![("max_tokens".into(), "10".into())],
    };
    let verdict = policy.on_request(&context, r#"{"model":"m","max_tokens":99,"messages":[]}"#).await.unwrap();
    let switchyard::plugin::Verdict::Deny(denial) = verdict else { panic!("{verdict:?}") };
    assert_eq!((denial.status, denial.code.as_str()), (400, "max_tokens_too_high"));
}
