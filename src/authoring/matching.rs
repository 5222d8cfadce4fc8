//! Compares a recorded case's expectations with what an adapter produced: "every field the
//! expectation lists, equal" or "equal as JSON", each difference named by its JSON path.

use serde_json::Value;

/// How strictly an expectation is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// Every field of the expectation is in the actual value and matches; others are ignored.
    Subset,
    /// Equal as JSON: the same fields, no more.
    Exact,
}

/// The differences between `expected` and `actual`, each as `PATH: what differs`; empty when
/// they match. Arrays match element by element and must have the same length.
pub fn differences(expected: &Value, actual: &Value, how: Match) -> Vec<String> {
    let mut out = Vec::new();
    compare("$", expected, actual, how, &mut out);
    out
}

/// Stops listing after this many: one wrong field in every chunk of a long stream says enough.
const MAX_DIFFERENCES: usize = 20;

fn compare(path: &str, expected: &Value, actual: &Value, how: Match, out: &mut Vec<String>) {
    if out.len() >= MAX_DIFFERENCES {
        return;
    }
    match (expected, actual) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, want_value) in want {
                let at = format!("{path}.{key}");
                match got.get(key) {
                    Some(got_value) => compare(&at, want_value, got_value, how, out),
                    None => out.push(format!("{at}: missing (expected {})", short(want_value))),
                }
            }
            if how == Match::Exact {
                for (key, got_value) in got {
                    if !want.contains_key(key) {
                        out.push(format!("{path}.{key}: not expected (got {})", short(got_value)));
                    }
                }
            }
        }
        (Value::Array(want), Value::Array(got)) => {
            if want.len() != got.len() {
                out.push(format!("{path}: expected {} elements, got {}", want.len(), got.len()));
            }
            for (i, (w, g)) in want.iter().zip(got).enumerate() {
                compare(&format!("{path}[{i}]"), w, g, how, out);
            }
        }
        (Value::Number(want), Value::Number(got)) if want.as_f64() == got.as_f64() => {}
        _ if expected == actual => {}
        _ => out.push(format!("{path}: expected {}, got {}", short(expected), short(actual))),
    }
}

/// A value as it reads in a one-line message, cut when long.
pub fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= 120 {
        return text;
    }
    let cut: String = text.chars().take(117).collect();
    format!("{cut}...")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_subset_ignores_fields_the_expectation_leaves_out() {
        let want = json!({"choices": [{"delta": {"content": "Hi"}}]});
        let got = json!({"id": "x", "choices": [{"index": 0, "delta": {"content": "Hi"}}]});
        assert!(differences(&want, &got, Match::Subset).is_empty());
        assert_eq!(
            differences(&want, &got, Match::Exact),
            vec!["$.choices[0].index: not expected (got 0)", "$.id: not expected (got \"x\")"]
        );
    }

    #[test]
    fn each_difference_is_named_by_its_path() {
        let want = json!({"a": {"b": [1, 2]}, "c": "x", "d": null});
        let got = json!({"a": {"b": [1, 3, 4]}, "c": "y"});
        assert_eq!(
            differences(&want, &got, Match::Subset),
            vec![
                "$.a.b: expected 2 elements, got 3",
                "$.a.b[1]: expected 2, got 3",
                "$.c: expected \"x\", got \"y\"",
                "$.d: missing (expected null)"
            ]
        );
    }

    #[test]
    fn numbers_compare_by_value_and_long_values_are_cut() {
        assert!(differences(&json!({"n": 1.0}), &json!({"n": 1}), Match::Exact).is_empty());
        let long = Value::String("x".repeat(500));
        assert_eq!(short(&long).len(), 120);
        let many: Vec<Value> = (0..100).map(|i| json!(i)).collect();
        let other: Vec<Value> = (0..100).map(|i| json!(i + 1)).collect();
        assert_eq!(differences(&Value::Array(many), &Value::Array(other), Match::Exact).len(), MAX_DIFFERENCES);
    }
}
