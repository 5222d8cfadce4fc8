//! `GET /metrics` scraped after JSON, streamed and failing requests, parsed by a Prometheus
//! text parser: the GenAI histograms count each attempt and its tokens, the slot state follows
//! a failing upstream, and a hostile upstream's error codes cannot grow the series.

use std::sync::atomic::Ordering;

use prometheus_parse::{Sample, Scrape, Value as Metric};
use serde_json::json;

use crate::support::{MockUpstream, TestGateway, body_text, chat_body, mock_source};

async fn scrape(gw: &TestGateway) -> Scrape {
    let response = gw.scrape_metrics().await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let lines = text.lines().map(|l| Ok(l.to_string()));
    Scrape::parse(lines).unwrap_or_else(|e| panic!("not Prometheus text: {e}\n{text}"))
}

fn find<'a>(scrape: &'a Scrape, name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .collect()
}

fn value(sample: &Sample) -> f64 {
    match &sample.value {
        Metric::Counter(v) | Metric::Gauge(v) | Metric::Untyped(v) => *v,
        Metric::Histogram(buckets) => buckets.iter().map(|b| b.count).fold(0.0, f64::max),
        Metric::Summary(_) => panic!("no summaries here"),
    }
}

fn total(scrape: &Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    find(scrape, name, labels).iter().map(|s| value(s)).sum()
}

#[tokio::test]
async fn metrics_count_attempts_tokens_and_slot_state_in_the_genai_names() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&crate::support::config_with(&mock_source(&mock, &["say:four score", "flaky"]))).await;
    // One JSON answer, one streamed, one failure.
    assert_eq!(gw.chat(chat_body("say:four score", false)).await.status(), 200);
    let streamed = gw.chat(chat_body("say:four score", true)).await;
    assert_eq!(streamed.status(), 200);
    body_text(streamed).await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    assert!(gw.chat(chat_body("flaky", false)).await.status().is_server_error());

    let m = scrape(&gw).await;
    let served = [("source", "mock"), ("gen_ai_request_model", "say:four score"), ("error_type", "")];
    assert_eq!(total(&m, "gen_ai_server_request_duration_seconds_count", &served), 2.0, "two served attempts");
    assert_eq!(total(&m, "switchyard_attempts_total", &served), 2.0);
    let failed = [("gen_ai_request_model", "flaky"), ("error_type", "upstream_server_error")];
    assert_eq!(total(&m, "switchyard_attempts_total", &failed), 1.0, "the failure, by its kind");
    let operation = &find(&m, "switchyard_attempts_total", &served)[0].labels;
    assert_eq!(operation.get("gen_ai_operation_name"), Some("chat"));
    assert_eq!(operation.get("gen_ai_provider_name"), Some("openai-chat"), "the adapter's protocol");
    // The mock reports 10 prompt tokens and len/4 completion tokens for each answer.
    let input = [("gen_ai_token_type", "input"), ("gen_ai_request_model", "say:four score")];
    assert_eq!(total(&m, "gen_ai_client_token_usage_sum", &input), 20.0);
    let output = [("gen_ai_token_type", "output"), ("gen_ai_request_model", "say:four score")];
    assert_eq!(total(&m, "gen_ai_client_token_usage_sum", &output), 2.0 * ("four score".len() / 4) as f64);
    assert_eq!(total(&m, "gen_ai_server_time_to_first_token_seconds_count", &[]), 1.0, "the stream's first chunk");
    // The failing slot cools; the other stays ok.
    assert_eq!(total(&m, "switchyard_slot_state", &[("model", "flaky")]), 1.0);
    assert_eq!(total(&m, "switchyard_slot_state", &[("model", "say:four score")]), 0.0);
    assert!(total(&m, "switchyard_cooldown_remaining_seconds", &[("model", "flaky")]) > 0.0);
    assert_eq!(total(&m, "switchyard_build_info", &[("version", env!("CARGO_PKG_VERSION"))]), 1.0);
    assert_eq!(total(&m, "switchyard_requests_in_flight", &[]), 0.0);
    assert_eq!(total(&m, "switchyard_source_in_flight", &[("source", "mock")]), 0.0);
    assert_eq!(total(&m, "switchyard_source_queued", &[("source", "mock")]), 0.0);
    let translated = [("adapter", "openai"), ("call", "transform_request")];
    assert_eq!(total(&m, "switchyard_adapter_call_duration_seconds_count", &translated), 3.0, "one per attempt");
    let chunks = [("adapter", "openai"), ("call", "transform_stream_chunk")];
    assert!(total(&m, "switchyard_adapter_call_duration_seconds_count", &chunks) >= 3.0, "the stream's chunks");
    assert_eq!(find(&m, "switchyard_state_journal_backlog", &[]).len(), 1);
    assert_eq!(total(&m, "switchyard_pool_in_use", &[("adapter", "openai")]), 0.0, "every session ended");
    assert!(total(&m, "switchyard_pool_capacity", &[("adapter", "openai")]) >= 1.0);
    assert_eq!(total(&m, "switchyard_failovers_total", &[]), 0.0, "nothing failed over");
}

#[tokio::test]
async fn a_request_served_after_a_failure_counts_as_a_failover() {
    let mock = MockUpstream::start().await;
    let yaml = format!(
        "sources:\n  - {{name: a, base_url: '{url}', models: [{{name: shared, upstream: flaky}}]}}\n  - {{name: b, base_url: '{url}', models: [{{name: shared, upstream: 'say:from b'}}]}}\nchannel_selection: order\n",
        url = mock.url
    );
    let gw = TestGateway::start(&crate::support::config_with(&yaml)).await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    assert_eq!(gw.chat(chat_body("shared", false)).await.status(), 200);
    let m = scrape(&gw).await;
    assert_eq!(total(&m, "switchyard_failovers_total", &[("gen_ai_request_model", "shared")]), 1.0);
    assert_eq!(
        total(&m, "switchyard_attempts_total", &[("source", "a"), ("error_type", "upstream_server_error")]),
        1.0
    );
    assert_eq!(total(&m, "switchyard_attempts_total", &[("source", "b"), ("error_type", "")]), 1.0);
}

#[tokio::test]
async fn labels_stay_bounded_whatever_clients_and_upstreams_send() {
    let mock = MockUpstream::start().await;
    let gw = TestGateway::start(&crate::support::config_with(&mock_source(&mock, &["say:hi"]))).await;
    // Unknown models are refused before any attempt: they never become a label.
    for i in 0..20 {
        let response =
            gw.chat(json!({"model": format!("made-up-{i}"), "messages": [{"role": "user", "content": "x"}]})).await;
        assert_eq!(response.status(), 404);
    }
    assert_eq!(gw.chat(chat_body("say:hi", false)).await.status(), 200);
    let m = scrape(&gw).await;
    let models: std::collections::BTreeSet<&str> =
        m.samples.iter().filter_map(|s| s.labels.get("gen_ai_request_model")).collect();
    assert_eq!(models.into_iter().collect::<Vec<_>>(), ["say:hi"]);
    assert!(!m.samples.iter().any(|s| s.labels.values().any(|v| v.contains("made-up"))));
}

#[tokio::test]
async fn an_upstreams_own_error_codes_do_not_become_new_series() {
    use crate::support::faulty::{Behaviour, FaultyUpstream, error_body};
    let upstream = FaultyUpstream::start(|arrival| {
        let code = format!("hostile-code-{}", arrival.number);
        Behaviour::json(400, error_body("refused", Some("invalid_request_error"), None, Some(&code)))
    })
    .await;
    let yaml = format!("sources:\n  - {{name: up, base_url: '{}', models: [{{name: m}}]}}\n", upstream.url);
    let gw = TestGateway::start(&crate::support::config_with(&yaml)).await;
    for _ in 0..10 {
        assert_eq!(gw.chat(chat_body("m", false)).await.status(), 400);
    }
    let m = scrape(&gw).await;
    let kinds: std::collections::BTreeSet<&str> = find(&m, "switchyard_attempts_total", &[("source", "up")])
        .iter()
        .filter_map(|s| s.labels.get("error_type"))
        .collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["other"], "ten codes, one series");
    assert_eq!(total(&m, "switchyard_attempts_total", &[("source", "up")]), 10.0);
}

#[tokio::test]
async fn metrics_can_move_to_their_own_address_or_be_turned_off() {
    let mock = MockUpstream::start().await;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let yaml = format!("metrics: {{listen: '127.0.0.1:{port}'}}\n{}", mock_source(&mock, &["say:hi"]));
    let gw = TestGateway::start(&crate::support::config_with(&yaml)).await;
    assert_eq!(gw.chat(chat_body("say:hi", false)).await.status(), 200);
    assert_eq!(gw.scrape_metrics().await.status(), 404, "not on the main listener");
    let text = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await.unwrap().text().await.unwrap();
    assert!(text.contains("switchyard_attempts_total{"), "{text}");

    let off = TestGateway::start(&crate::support::config_with(&format!(
        "metrics: {{enabled: false}}\n{}",
        mock_source(&mock, &["say:hi"])
    )))
    .await;
    assert_eq!(off.chat(chat_body("say:hi", false)).await.status(), 200);
    assert_eq!(off.scrape_metrics().await.status(), 404);
}
