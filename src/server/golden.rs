//! Golden files for the doors' translations, both ways (tests only): each case's output is
//! compared with the JSON kept beside its input in tests/fixtures/doors/; SWITCHYARD_BLESS=1 rewrites them.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The fixtures of one door (`messages`, `responses`, `replies`).
pub fn dir(door: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doors").join(door)
}

/// Every `*.{suffix}.json` case in `dir` as (name, parsed JSON), sorted by name.
pub fn cases(dir: &Path, suffix: &str) -> Vec<(String, Value)> {
    let ending = format!(".{suffix}.json");
    let mut cases: Vec<(String, Value)> = std::fs::read_dir(dir)
        .expect("the fixtures folder")
        .flatten()
        .filter_map(|entry| {
            let file = entry.file_name().to_string_lossy().to_string();
            let name = file.strip_suffix(&ending)?.to_string();
            let text = std::fs::read_to_string(entry.path()).expect("a readable fixture");
            Some((name, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"))))
        })
        .collect();
    cases.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!cases.is_empty(), "no *{ending} in {}", dir.display());
    cases
}

/// Compares `actual` with `dir/{name}.{suffix}.json`, or writes it there when blessing.
pub fn check(dir: &Path, name: &str, suffix: &str, actual: &Value) {
    let file = dir.join(format!("{name}.{suffix}.json"));
    let pretty = serde_json::to_string_pretty(actual).expect("JSON serialises") + "\n";
    if std::env::var_os("SWITCHYARD_BLESS").is_some() {
        std::fs::write(&file, pretty).expect("a writable fixtures folder");
        return;
    }
    let expected: Value = std::fs::read_to_string(&file)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("{} is missing: run with SWITCHYARD_BLESS=1 to write it", file.display()));
    assert!(
        &expected == actual,
        "{} differs from what the translation gives now:\n{pretty}\n(rerun with SWITCHYARD_BLESS=1 if the change is meant)",
        file.display()
    );
}
