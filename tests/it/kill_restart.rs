//! The real `switchyard` binary killed with SIGKILL and started again on the same data_dir:
//! every answered request's log row, cooldowns, quota use, scores and affinity bindings are back
//! (from the database, or replayed from the state journal).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;

use serde_json::{Value, json};

use crate::support::{KEY, MockUpstream, chat_body};

const ADMIN: &str = "adm-kill-token-0001";

/// Starts the binary and reads its log until it says where it listens.
fn spawn(config: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("--config")
        .arg(config)
        .env("SWITCHYARD_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("the switchyard binary starts");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("the gateway logs until it listens").unwrap();
        if let Some(at) = line.find("listening on ") {
            break line[at + "listening on ".len()..].trim().to_string();
        }
    };
    // Keep draining the log so the child never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

/// Rows in `table`, read through SQLite like any other reader of the WAL database.
fn rows(db: &Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0)).unwrap_or(0)
}

#[tokio::test]
async fn answered_requests_and_their_state_survive_kill_dash_nine() {
    let mock = MockUpstream::start().await;
    mock.state.flaky_fails.store(true, Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:0\ndata_dir: {data}\ncache_dir: {cache}\nadmin_token: {ADMIN}\nchannel_selection: order
cooldown: {{transient_base_ms: 600000}}
keys: [{{name: tester, key: {KEY}, models: ['*']}}]
sources:
  - {{name: a, base_url: '{url}', stream_whole_answers: false, models: [{{name: m, upstream: flaky}}]}}
  - {{name: b, base_url: '{url}', stream_whole_answers: false, models: [{{name: m, upstream: from-b}}]}}
",
            data = dir.path().display(),
            cache = crate::support::gateway::shared_cache().display(),
            url = mock.url
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("runtime.yaml"),
        "auto:\n  - {model: m, source: b, token_quota: 1000, period: month}\n",
    )
    .unwrap();
    let db = dir.path().join("state.db");
    let client = reqwest::Client::new();

    let (mut child, url) = spawn(&config);
    let chat =
        |url: &str, body: Value| client.post(format!("{url}/v1/chat/completions")).bearer_auth(KEY).json(&body).send();
    assert_eq!(chat(&url, chat_body("m", false)).await.unwrap().status(), 200, "a failed, b served");
    assert_eq!(chat(&url, chat_body("AUTO", false)).await.unwrap().status(), 200);
    // Everything a request changed is journaled before its answer leaves; the database may
    // trail the journal, and the restart replays what it had not committed.
    child.kill().unwrap(); // SIGKILL: no shutdown code runs
    child.wait().unwrap();
    let journal = std::fs::read_to_string(dir.path().join("state.journal")).unwrap();
    let journaled = journal.lines().filter(|l| l.contains("\"log\"")).count() as i64;
    assert_eq!(rows(&db, "request_logs") + journaled, 3, "every answered request is in the database or the journal");

    let (mut child, url) = spawn(&config);
    assert_eq!(rows(&db, "request_logs"), 3, "a's failed attempt, b's answer, the AUTO answer");
    assert_eq!((rows(&db, "cooldowns"), rows(&db, "quota_usage"), rows(&db, "scorer_stats")), (1, 1, 2));
    assert!(rows(&db, "affinity") >= 1);
    let health: Value =
        client.get(format!("{url}/admin/api/health")).bearer_auth(ADMIN).send().await.unwrap().json().await.unwrap();
    let a = &health["slots"][0];
    assert_eq!(
        (a["source"].as_str(), a["state"].as_str(), a["failures"].as_u64()),
        (Some("a"), Some("cooling"), Some(1))
    );
    let b = &health["slots"][1];
    assert_eq!(b["quotas"][0]["used"], 42, "two answers of 21 tokens");
    assert_eq!((b["requests"].as_u64(), b["successes"].as_u64()), (Some(2), Some(2)));
    assert_eq!(a["requests"], 1);
    mock.state.requests.lock().unwrap().clear();

    // a still rests, and the conversation is still bound to b.
    let turn2 = json!({"model": "m", "messages": [
        {"role": "user", "content": "Hello!"},
        {"role": "assistant", "content": "\n\nHello there, how may I assist you today?"},
        {"role": "user", "content": "More."}]});
    assert_eq!(chat(&url, turn2).await.unwrap().status(), 200);
    let seen: Vec<String> =
        mock.state.requests.lock().unwrap().iter().map(|r| r.body["model"].as_str().unwrap().to_string()).collect();
    assert_eq!(seen, ["from-b"]);
    child.kill().unwrap();
    child.wait().unwrap();
}
