//! Money end to end: what each built-in adapter's answers cost (JSON and streamed, from the
//! recorded fixtures), cached and written prompt tokens at their rates, the table's long-context
//! tiers, unpriced models never billed as $0, budgets that parallel requests overrun by at most
//! one, spend that survives a restart, the client's price limit and cheapest-first ordering.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::{Value, json};
use switchyard::domain::Usd;
use switchyard::scheduler::ManualClock;
use switchyard::state::LogQuery;

use crate::support::faulty::{Answer, Behaviour, FaultyUpstream};
use crate::support::{KEY, MockUpstream, TestGateway, config_with};

/// One price for every fixture model: $3 in, $0.30 cached, $3.75 cache writes, $15 out per 1M.
const PRICES: &str = "prices:\n  - {source: claude, model: '*', input: '3', cached_input: '0.30', cache_write: '3.75', output: '15'}\n  - {source: google, model: '*', input: '3', cached_input: '0.30', output: '15'}\n  - {source: ds, model: '*', input: '3', cached_input: '0.30', output: '15'}\n  - {source: local, model: '*', input: '3', output: '15'}\n  - {source: oai, model: fixture, input: '3', output: '15'}\n";

async fn every_adapter(mock: &MockUpstream) -> TestGateway {
    let root = mock.url.trim_end_matches("/v1");
    let sources = format!(
        "sources:\n\
         \x20 - {{name: oai, base_url: '{url}', stream_whole_answers: false, api_key: sk-oai-0123456789, models: [{{name: fixture}}, {{name: mystery-model}}]}}\n\
         \x20 - {{name: claude, base_url: '{url}', stream_whole_answers: false, api_key: sk-ant-0123456789, adapter: anthropic, models: [{{name: claude-text}}]}}\n\
         \x20 - {{name: google, base_url: '{root}/v1beta', stream_whole_answers: false, api_key: AIza-0123456789, adapter: gemini, models: [{{name: gemini-text}}]}}\n\
         \x20 - {{name: ds, base_url: '{url}', stream_whole_answers: false, api_key: sk-ds-0123456789, adapter: deepseek, models: [{{name: deepseek-fixture}}]}}\n\
         \x20 - {{name: local, base_url: '{root}', stream_whole_answers: false, adapter: ollama, models: [{{name: llama-text}}]}}\n\
         {PRICES}",
        url = mock.url
    );
    TestGateway::start(&config_with(&sources)).await
}

/// The log rows of the request that got `response`.
async fn rows_of(gw: &TestGateway, response: &reqwest::Response) -> Vec<switchyard::state::LogRow> {
    let id = response.headers()["x-request-id"].to_str().unwrap().to_string();
    let query = LogQuery { request_id: Some(id), ..LogQuery::default() };
    gw.gateway.state.query_logs(&query).unwrap().rows
}

fn ask(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "Hello"}]})
}

#[tokio::test]
async fn each_built_in_adapters_answers_cost_their_usage_json_and_streamed() {
    let mock = MockUpstream::start().await;
    let gw = every_adapter(&mock).await;
    // (model, cost of the JSON fixture, cost of the streamed one), worked out by hand from
    // each fixture's usage at the prices above.
    let cases = [
        // 9 in, 12 out / stream: 9 in, 3 out.
        ("fixture", "0.000207", "0.000072"),
        // 2095 in + 1800 cache reads + 100 cache writes, 503 out / stream: 25 in, 15 out.
        ("claude-text", "0.014745", "0.0003"),
        // 8 in (4 cached), 9 out / stream: 8 in, 5 out.
        ("gemini-text", "0.0001482", "0.000099"),
        // 16 in (12 cache hits), 10 out, both ways.
        ("deepseek-fixture", "0.0001656", "0.0001656"),
        // 26 in, 298 out / stream: 26 in, 282 out.
        ("llama-text", "0.004548", "0.004308"),
    ];
    for (model, whole, streamed) in cases {
        let response = gw.chat(ask(model, false)).await;
        assert_eq!(response.status(), 200, "{model}");
        assert_eq!(response.headers()["x-switchyard-cost"], whole, "{model}: the header");
        assert!(response.headers().get("x-switchyard-cost-status").is_none(), "{model}: exact");
        let rows = rows_of(&gw, &response).await;
        assert_eq!(rows[0].cost_usd.map(|c| c.to_string()).as_deref(), Some(whole), "{model}: the log row");
        assert!(!rows[0].cost_estimated && !rows[0].cost_unknown);

        let response = gw.chat(ask(model, true)).await;
        assert!(response.headers().get("x-switchyard-cost").is_none(), "a stream's head leaves before its cost");
        let id = response.headers()["x-request-id"].to_str().unwrap().to_string();
        // Its books close when it ends: read to the end first.
        response.text().await.unwrap();
        let query = LogQuery { request_id: Some(id), ..LogQuery::default() };
        let rows = gw.gateway.state.query_logs(&query).unwrap().rows;
        assert_eq!(rows[0].cost_usd.map(|c| c.to_string()).as_deref(), Some(streamed), "{model}: streamed");
    }
    let claude = gw.gateway.state.query_logs(&LogQuery { model: Some("claude-text".into()), ..LogQuery::default() });
    let row = claude.unwrap().rows.pop().unwrap();
    assert_eq!((row.tokens_cached, row.tokens_cache_write), (Some(1800), Some(100)), "cache reads and writes kept");

    // The Anthropic door says what its whole answers cost too.
    let response = gw
        .post("/v1/messages")
        .header("x-api-key", KEY)
        .json(&json!({"model": "claude-text", "max_tokens": 100, "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-switchyard-cost"], "0.014745");

    // By source, exactly summed.
    let admin = gw.admin_token();
    let spend = gw.admin_json(&admin, "/admin/api/spend?by=source").await;
    let claude = spend["rows"].as_array().unwrap().iter().find(|r| r["name"] == "claude").unwrap();
    assert_eq!(claude["cost_usd"], "0.02979", "0.014745 × 2 + 0.0003, no float drift: {claude}");
}

#[tokio::test]
async fn an_unpriced_model_is_unknown_listed_and_never_zero() {
    let mock = MockUpstream::start().await;
    let gw = every_adapter(&mock).await;
    let response = gw.chat(ask("mystery-model", false)).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-switchyard-cost"], "unknown");
    assert_eq!(response.headers()["x-switchyard-cost-status"], "unknown");
    let row = rows_of(&gw, &response).await.pop().unwrap();
    assert_eq!((row.cost_usd, row.cost_unknown), (None, true));

    let prices = gw.admin_json(&gw.admin_token(), "/admin/api/prices").await;
    let listed = |field: &str| prices[field].as_array().unwrap().iter().any(|m| m["model"] == "mystery-model");
    assert!(listed("unpriced"), "configured without a price: {prices}");
    assert!(listed("unpriced_serving"), "and serving traffic: {prices}");
    assert_eq!(prices["unpriced_serving"][0]["attempts"], 1);
    let fixture = prices["models"].as_array().unwrap().iter().find(|m| m["model"] == "fixture").unwrap();
    assert_eq!((fixture["price"]["input"].as_str(), fixture["origin"]["from"].as_str()), (Some("3"), Some("config")));

    let metrics = gw.scrape_metrics().await.text().await.unwrap();
    assert!(
        metrics.contains(r#"switchyard_unpriced_attempts_total{key="tester",source="oai",model="mystery-model"} 1"#),
        "{metrics}"
    );

    // Priced at run time: the next answer has a cost, and the price says where it came from.
    let set = reqwest::Client::new()
        .put(format!("{}/admin/api/prices", gw.url))
        .bearer_auth(gw.admin_token())
        .json(&json!({"source": "oai", "model": "mystery-model", "input": "1", "output": "2"}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    // A price that leaves output out would make it free: refused.
    let partial = reqwest::Client::new()
        .put(format!("{}/admin/api/prices", gw.url))
        .bearer_auth(gw.admin_token())
        .json(&json!({"source": "oai", "model": "fixture", "input": "1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(partial.status(), 400);
    let error: Value = partial.json().await.unwrap();
    assert_eq!(error["error"]["param"], "output", "{error}");
    let response = gw.chat(ask("mystery-model", false)).await;
    // 9 in × $1 + 12 out × $2 per 1M.
    assert_eq!(response.headers()["x-switchyard-cost"], "0.000033");
    let prices = gw.admin_json(&gw.admin_token(), "/admin/api/prices").await;
    let mystery = prices["models"].as_array().unwrap().iter().find(|m| m["model"] == "mystery-model").unwrap();
    assert_eq!(mystery["origin"]["from"], "runtime");
    let metrics = gw.scrape_metrics().await.text().await.unwrap();
    assert!(
        metrics.contains(r#"switchyard_cost_usd_total{key="tester",source="oai",model="mystery-model"} 0.000033"#),
        "{metrics}"
    );
}

/// An upstream answering `prompt` input and `completion` output tokens to everything.
async fn counting(prompt: u64, completion: u64) -> FaultyUpstream {
    FaultyUpstream::healthy(Answer {
        model: "m",
        text: "Hi there",
        prompt_tokens: prompt,
        completion_tokens: completion,
    })
    .await
}

#[tokio::test]
async fn the_tables_long_context_tier_prices_every_token_of_a_long_prompt() {
    let long = counting(300_000, 1_000).await;
    let short = counting(100_000, 1_000).await;
    let sources = format!(
        "sources:\n\
         \x20 - {{name: long, base_url: '{}', api_key: sk-0123456789ab, models: [{{name: big, upstream: gpt-6.2-astra}}]}}\n\
         \x20 - {{name: short, base_url: '{}', api_key: sk-0123456789ab, models: [{{name: small, upstream: gpt-6.2-astra}}]}}\n",
        long.url, short.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    // $8 in / $40 out per 1M; above 272k input: $16 / $60 for every token.
    let cost = |model: &str| {
        let gw = &gw;
        let model = model.to_string();
        async move { gw.chat(ask(&model, false)).await.headers()["x-switchyard-cost"].to_str().unwrap().to_string() }
    };
    assert_eq!(cost("small").await, "0.84", "100k × $8 + 1k × $40");
    assert_eq!(cost("big").await, "4.86", "300k × $16 + 1k × $60");
    let prices = gw.admin_json(&gw.admin_token(), "/admin/api/prices").await;
    let big = prices["models"].as_array().unwrap().iter().find(|m| m["model"] == "big").unwrap();
    assert_eq!(big["origin"]["from"], "table");
    assert_eq!(big["origin"]["model"], "gpt-6.2-astra");
    assert_eq!(big["price"]["tiers"][0]["above_input_tokens"], 272000);
}

/// A key with a budget of $0.10 a day; each answer costs $0.02 (10 + 10 tokens at $1000 per
/// 1M) and sets aside at most a few cents (its prompt estimate and `max_tokens: 10`).
fn budget_config(upstream: &FaultyUpstream) -> String {
    format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\n\
         keys:\n  - {{name: spender, key: {KEY}, models: ['*'], budget: {{usd: '0.10', period: day}}}}\n\
         sources:\n  - {{name: pricey, base_url: '{url}', api_key: sk-0123456789ab, models: [{{name: m}}]}}\n\
         prices:\n  - {{model: m, input: '1000', output: '1000'}}\n",
        cache = crate::support::gateway::shared_cache().display(),
        url = upstream.url
    )
}

fn small_ask() -> Value {
    json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]})
}

#[tokio::test]
async fn twenty_parallel_requests_overrun_a_budget_by_at_most_one() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let held = gate.clone();
    let answer = Answer { model: "m", text: "Hi there", prompt_tokens: 10, completion_tokens: 10 };
    let upstream = FaultyUpstream::start(move |arrival| Behaviour::Gated {
        gate: held.clone(),
        then: Box::new(answer.to(arrival)),
    })
    .await;
    let gw = TestGateway::start(&budget_config(&upstream)).await;

    let mut refused = Vec::new();
    let mut served = 0;
    // Rounds of 20 at once until the budget refuses a whole round.
    for round in 0.. {
        assert!(round < 10, "the budget never ran out");
        let mut pending: futures::stream::FuturesUnordered<_> = (0..20).map(|_| gw.chat(small_ask())).collect();
        let before = upstream.attempts();
        let mut done = Vec::new();
        // Those refused answer at once; the admitted ones wait at the upstream. Once every
        // request is one or the other, the upstream lets them through.
        loop {
            tokio::select! {
                response = pending.next() => match response {
                    Some(r) => done.push(r),
                    None => break,
                },
                _ = upstream.until_attempts(before + 20 - done.len()), if done.len() < 20 => {
                    gate.add_permits(20);
                    while let Some(r) = pending.next().await {
                        done.push(r);
                    }
                    break;
                }
            }
        }
        let admitted = upstream.attempts() - before;
        for response in done {
            match response.status().as_u16() {
                200 => served += 1,
                429 => {
                    let wait: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
                    assert!(wait <= 86_400, "until the day's window ends: {wait}");
                    refused.push(response.json::<Value>().await.unwrap());
                }
                other => panic!("unexpected {other}"),
            }
        }
        assert!(admitted <= 5, "round {round}: {admitted} admitted at once with $0.02 each against $0.10");
        if admitted == 0 {
            break;
        }
    }
    let spent = gw.admin_json(&gw.admin_token(), "/admin/api/budgets").await;
    let key = &spent["keys"][0];
    let usd = |text: &str| Usd::parse(text).unwrap();
    let spent_usd = usd(key["spent_usd"].as_str().unwrap());
    assert!((usd("0.10")..=usd("0.12")).contains(&spent_usd), "overrun by one request at most: {key}");
    assert_eq!(usd("0.02").times(served), spent_usd, "every served answer charged");
    let error = &refused[0]["error"];
    assert_eq!(error["code"], "budget_exceeded");
    assert_eq!(error["type"], "insufficient_quota");
    assert!(error["message"].as_str().unwrap().contains("key `spender` has spent its budget"), "{error}");
}

#[tokio::test]
async fn spend_survives_a_restart_and_a_budget_refuses_in_each_protocol() {
    let upstream = counting(10, 10).await;
    let yaml = budget_config(&upstream);
    let clock = Arc::new(ManualClock::at(1_765_000_000_000));
    let dir = tempfile::tempdir().unwrap();
    let gw = TestGateway::start_with_clock(dir, &yaml, clock.clone()).await;
    for _ in 0..3 {
        assert_eq!(gw.chat(small_ask()).await.status(), 200);
    }
    let before = gw.admin_json(&gw.admin_token(), "/admin/api/budgets").await;
    assert_eq!(before["keys"][0]["spent_usd"], "0.06");
    let gw = gw.restart(&yaml, clock.clone()).await;
    let after = gw.admin_json(&gw.admin_token(), "/admin/api/budgets").await;
    assert_eq!(after["keys"][0]["spent_usd"], "0.06", "kept across the restart");
    assert_eq!(after["keys"][0]["percent"], 60);
    while gw.chat(small_ask()).await.status() == 200 {}
    // The Anthropic door refuses in its own error format.
    let response = gw
        .post("/v1/messages")
        .header("x-api-key", KEY)
        .json(&json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "Hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    assert!(response.headers().contains_key("retry-after"));
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert!(body["error"]["message"].as_str().unwrap().contains("has spent its budget"), "{body}");
    // A new day: the budget starts over.
    clock.advance(std::time::Duration::from_secs(86_400));
    assert_eq!(gw.chat(small_ask()).await.status(), 200, "the next day's budget");
}

#[tokio::test]
async fn a_clients_price_limit_and_cheapest_first() {
    let cheap = counting(10, 10).await;
    let dear = counting(10, 10).await;
    let sources = format!(
        "channel_selection: cheapest\n\
         sources:\n\
         \x20 - {{name: dear, base_url: '{}', api_key: sk-0123456789ab, models: [{{name: m}}]}}\n\
         \x20 - {{name: cheap, base_url: '{}', api_key: sk-0123456789ab, models: [{{name: m}}]}}\n\
         prices:\n  - {{source: dear, model: m, input: '15', output: '75'}}\n  - {{source: cheap, model: m, input: '3', output: '15'}}\n",
        dear.url, cheap.url
    );
    let gw = TestGateway::start(&config_with(&sources)).await;
    let served = gw.chat(small_ask()).await;
    assert_eq!(served.headers()["x-switchyard-source"], "cheap", "cheapest first, though configured second");
    let limited = |limit: &'static str| {
        gw.post("/v1/chat/completions").header("x-switchyard-max-price", limit).json(&small_ask()).send()
    };
    let response = limited("input=5, output=20").await.unwrap();
    assert_eq!(response.headers()["x-switchyard-source"], "cheap");
    let response = limited("output=10").await.unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "no_candidate_under_max_price");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("cheap/m: its output price $15 per 1M tokens is over $10"),
        "{body}"
    );
    let response = limited("output=ten").await.unwrap();
    assert_eq!(response.status(), 400, "a limit read wrong is refused, not ignored");
    assert_eq!(dear.attempts(), 0);
}

#[tokio::test]
async fn a_groups_budget_is_shared_by_its_keys() {
    let upstream = counting(10, 10).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\ndata_dir: {{data}}\ncache_dir: {cache}\nadmin_token: costs-admin-token-0123456789abcdef\n\
         keys:\n  - {{name: alice, key: sk-alice-0123456789, models: ['*'], group: team}}\n\
         \x20 - {{name: bob, key: sk-bob-0123456789ab, models: ['*'], group: team}}\n\
         \x20 - {{name: carol, key: {KEY}, models: ['*']}}\n\
         budgets:\n  - {{group: team, usd: '0.05', period: day}}\n\
         sources:\n  - {{name: pricey, base_url: '{url}', api_key: sk-0123456789ab, models: [{{name: m}}]}}\n\
         prices:\n  - {{model: m, input: '1000', output: '1000'}}\n",
        cache = crate::support::gateway::shared_cache().display(),
        url = upstream.url
    );
    let gw = TestGateway::start(&yaml).await;
    let url = format!("{}/v1/chat/completions", gw.url);
    let ask_as = |key: &'static str| reqwest::Client::new().post(&url).bearer_auth(key).json(&small_ask()).send();
    for key in ["sk-alice-0123456789", "sk-alice-0123456789", "sk-bob-0123456789ab"] {
        assert_eq!(ask_as(key).await.unwrap().status(), 200, "$0.02 each under $0.05");
    }
    for key in ["sk-alice-0123456789", "sk-bob-0123456789ab"] {
        let response = ask_as(key).await.unwrap();
        assert_eq!(response.status(), 429);
        let body: Value = response.json().await.unwrap();
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("group `team` has spent its budget ($0.06 of $0.05 per day"),
            "{body}"
        );
    }
    assert_eq!(gw.chat(small_ask()).await.status(), 200, "a key of another group is not held back");
    let budgets = gw.admin_json("costs-admin-token-0123456789abcdef", "/admin/api/budgets").await;
    assert_eq!(
        (budgets["groups"][0]["spent_usd"].as_str(), budgets["groups"][0]["percent"].as_u64()),
        (Some("0.06"), Some(120))
    );
}
