//! `switchyard check` and startup on bad config: every error, each with file, line, field
//! and fix; exit codes a script can act on.

use std::process::Command;

fn switchyard(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard")).args(args).env("SWITCHYARD_LOG", "warn").output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const BAD: &str = "listen: localhost
data_dir: {data}
sourcs: []
keys:
  - name: a
    key: ${SWITCHYARD_TEST_SURELY_UNSET}
    models: [\"*\"]
sources:
  - name: s1
    base_url: not-a-url
    adapter: nosuch
    models:
      - name: m
  - name: s2
    base_url: http://127.0.0.1:1
    max_concurent: 3
    models: [{name: m}]
  - name: s3
    base_url: http://127.0.0.1:1
    models:
      - name: m
        kind: video
  - name: s4
    base_url: http://127.0.0.1:1
    http_version: h3
    models: [{name: m}]
server: {http2_max_streams: 0}
";

#[test]
fn check_reports_every_error_with_file_line_field_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, BAD.replace("{data}", &dir.path().display().to_string())).unwrap();
    let path = file.display().to_string();
    let (code, _, err) = switchyard(&["check", "--config", &path]);
    assert_eq!(code, 2, "{err}");
    let expect = [
        format!("{path}:1: listen: `localhost` is not an address with a port"),
        format!("{path}:3: sourcs: unknown setting `sourcs`"),
        format!("{path}:6: keys[0].key: environment variable SWITCHYARD_TEST_SURELY_UNSET is not set"),
        format!("{path}:10: sources[0].base_url: `not-a-url` is not an http(s) URL"),
        format!("{path}:11: sources[0].adapter: no adapter named `nosuch`"),
        format!("{path}:16: sources[1].max_concurent: unknown field `max_concurent`"),
        format!("{path}:22: sources[2].models[0].kind: unknown variant `video`"),
        format!("{path}:25: sources[3].http_version: unknown variant `h3`, expected one of `auto`, `http1`, `http2`"),
        format!("{path}:27: server.http2_max_streams: must be at least 1"),
    ];
    let mut at = 0;
    for line in &expect {
        let found =
            err[at..].find(line.as_str()).unwrap_or_else(|| panic!("missing {line:?} (in line order) in:\n{err}"));
        at += found + line.len();
    }
    assert!(err.contains("has 9 errors"), "{err}");
    assert!(err.contains("did you mean `sources`?"), "{err}");
    assert_eq!(err.matches("      fix: ").count(), 9, "every error carries a fix:\n{err}");
}

#[test]
fn check_accepts_the_shipped_example_and_serve_refuses_bad_config() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/config.example.yaml");
    let dir = tempfile::tempdir().unwrap();
    let text =
        std::fs::read_to_string(example).unwrap().replace("./data", &dir.path().join("data").display().to_string());
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, text).unwrap();
    let (code, out, err) = switchyard(&["check", "--config", &file.display().to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with(
            "config OK: 2 sources, 1 keys, adapters: anthropic, deepseek, gemini, lua-anthropic, lua-deepseek, \
             lua-gemini, lua-groq, lua-mistral, lua-ollama, lua-openai, ollama, openai"
        ),
        "{out}"
    );
    assert!(!out.contains("warning:"), "every model of the example has a price: {out}");

    // A model the price table does not know: named, with the fix, and not an error.
    let unpriced = std::fs::read_to_string(&file)
        .unwrap()
        .replace("      - name: llama3.2\n", "      - name: llama3.2\n      - name: house-model-7b\n");
    std::fs::write(&file, &unpriced).unwrap();
    let (code, out, err) = switchyard(&["check", "--config", &file.display().to_string()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("warning: local/house-model-7b has no price: its cost is logged as unknown"), "{out}");
    assert!(out.contains("fix: add it under `prices:`"), "{out}");

    // Its development key is public: on an address others can reach it is refused.
    let exposed = std::fs::read_to_string(&file).unwrap().replace("listen: 127.0.0.1:8080", "listen: 0.0.0.0:8080");
    std::fs::write(&file, exposed).unwrap();
    let (code, _, err) = switchyard(&["check", "--config", &file.display().to_string()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("keys[0].key: is the example config's public development key"), "{err}");

    let (code, _, err) = switchyard(&["--config", &dir.path().join("missing.yaml").display().to_string()]);
    assert_eq!(code, 2);
    assert!(err.contains("cannot read config file") && err.contains("fix:"), "{err}");
}

#[test]
fn a_misspelt_adapter_name_is_answered_with_the_nearest_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typo.yaml");
    let yaml = format!(
        "data_dir: {}\nsources:\n  - {{name: s, base_url: 'http://127.0.0.1:1', adapter: opeani, models: [{{name: m}}]}}\n",
        dir.path().display()
    );
    std::fs::write(&file, yaml).unwrap();
    let (code, _, err) = switchyard(&["check", "--config", &file.display().to_string()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no adapter named `opeani`") && err.contains("did you mean `openai`?"), "{err}");
}
