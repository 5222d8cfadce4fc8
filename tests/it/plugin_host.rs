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
    assert_eq!(adapter.pool_stats(), (1, 0), "nothing is preallocated");

    let ctx = context();
    let first = adapter.open_session(&ctx).await.unwrap();
    let mut second = Box::pin(adapter.open_session(&ctx));
    assert!(futures::poll!(&mut second).is_pending(), "the bound holds while a session is open");
    drop(first);
    assert_eq!(adapter.pool_stats().1, 1, "a clean session returns its instance");
    let second = second.await.unwrap();
    assert_eq!(adapter.pool_stats().1, 0, "the waiting session got the warm instance");
    drop(second);

    adapter.set_pool_capacity(3);
    let sessions: Vec<_> = futures::future::join_all((0..3).map(|_| adapter.open_session(&ctx))).await;
    assert!(sessions.iter().all(Result::is_ok));
    drop(sessions);
    assert_eq!(adapter.pool_stats(), (3, 3));
}

#[tokio::test]
async fn pool_capacity_is_the_summed_max_concurrent_of_its_sources() {
    let yaml = crate::support::config_with(
        "sources:\n  - name: a\n    base_url: http://127.0.0.1:9\n    max_concurrent: 3\n    models: [{name: m1}]\n  - name: b\n    base_url: http://127.0.0.1:9\n    max_concurrent: 4\n    models: [{name: m2}]\n",
    );
    let gw = crate::support::TestGateway::start(&yaml).await;
    let adapter = gw.gateway.plugins.adapter(&AdapterName::new("openai")).unwrap();
    assert_eq!(adapter.pool_stats(), (7, 0));
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
