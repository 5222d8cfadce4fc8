//! The log the real binary writes: one access line per answered or refused request when asked
//! for, as JSON objects with `log_format: json`, and plain (uncoloured) text when stderr is not
//! a terminal.

use std::time::Duration;

use serde_json::Value;

use crate::support::binary::Binary;
use crate::support::{MockUpstream, chat_body};

/// Log lines until one satisfies `done` (all of them, that one included).
async fn lines_until(binary: &mut Binary, done: impl Fn(&str) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(10), binary.log.recv())
            .await
            .expect("the awaited log line in time")
            .expect("the gateway keeps logging");
        let stop = done(&line);
        seen.push(line);
        if stop {
            return seen;
        }
    }
}

fn sources(mock: &MockUpstream) -> String {
    format!(
        "sources:\n  - {{name: mock, base_url: '{}', stream_whole_answers: false, models: [{{name: fixture}}]}}\n",
        mock.url
    )
}

#[tokio::test]
async fn json_logs_carry_one_access_line_per_request() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut binary = Binary::start(dir.path(), &format!("log_format: json\n{}", sources(&mock)));
    assert_eq!(binary.chat(&chat_body("fixture", false)).await.status(), 200);
    assert_eq!(binary.chat(&chat_body("no-such-model", false)).await.status(), 404);

    let lines = lines_until(&mut binary, |l| l.contains("refused")).await;
    let json: Vec<Value> =
        lines.iter().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: not a JSON line: {l}"))).collect();
    let access: Vec<&Value> = json.iter().filter(|l| l["target"] == "switchyard::access").collect();
    assert_eq!(access.len(), 2, "{json:#?}");
    let answered = &access[0]["fields"];
    assert_eq!((answered["status"].as_u64(), answered["source"].as_str()), (Some(200), Some("mock")), "{answered}");
    assert_eq!((answered["tokens_in"].as_u64(), answered["tokens_out"].as_u64()), (Some(9), Some(12)), "{answered}");
    assert!(answered["id"].as_str().is_some_and(|id| id.len() == 32), "{answered}");
    let refused = &access[1];
    assert_eq!(refused["fields"]["status"], 404, "{refused}");
    assert_eq!(refused["span"]["model"], "no-such-model", "the request's span: {refused}");
}

#[tokio::test]
async fn text_logs_are_plain_when_stderr_is_not_a_terminal() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut binary = Binary::start(dir.path(), &sources(&mock));
    assert_eq!(binary.chat(&chat_body("fixture", false)).await.status(), 200);
    let lines = lines_until(&mut binary, |l| l.contains("answered")).await;
    assert!(lines.iter().all(|l| !l.contains('\u{1b}')), "no ANSI escapes: {lines:#?}");
    let access = lines.last().unwrap();
    assert!(access.contains("switchyard::access") && access.contains("status=200"), "{access}");
}

/// Every line the process writes until it ends, stopping it as an operator would (SIGTERM).
async fn lines_to_the_end(mut binary: Binary) -> Vec<String> {
    binary.terminate();
    let mut lines = Vec::new();
    while let Some(line) = tokio::time::timeout(Duration::from_secs(10), binary.log.recv()).await.expect("the log ends")
    {
        lines.push(line);
    }
    lines
}

#[tokio::test]
async fn access_lines_are_off_by_default_and_on_with_access_log() {
    let mock = MockUpstream::start().await;
    for (access_log, expected) in [("", 0), ("access_log: true\n", 2)] {
        let dir = tempfile::tempdir().unwrap();
        let binary =
            Binary::start_env(dir.path(), &format!("{access_log}{}", sources(&mock)), &[("SWITCHYARD_LOG", "")]);
        assert_eq!(binary.chat(&chat_body("fixture", false)).await.status(), 200);
        assert_eq!(binary.chat(&chat_body("no-such-model", false)).await.status(), 404);
        let lines = lines_to_the_end(binary).await;
        assert!(lines.iter().any(|l| l.contains("listening on")), "the rest of the log is kept: {lines:#?}");
        let access = lines.iter().filter(|l| l.contains("switchyard::access")).count();
        assert_eq!(access, expected, "{access_log:?}: {lines:#?}");
    }
}
