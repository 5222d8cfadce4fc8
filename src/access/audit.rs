//! The audit trail's entries: who changed what through the admin API, when, from where, with
//! the changed objects before and after (secrets masked, sizes bounded), and how to filter them.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::{Role, mask};

/// Most entries one page of the trail holds.
pub const MAX_AUDIT_PAGE: u32 = 500;
/// Most changed objects one entry records; more are counted in its note.
const MAX_CHANGES: usize = 64;
/// Larger objects are recorded by size only.
const MAX_OBJECT_BYTES: usize = 16 << 10;
/// Longest path, note or actor name kept.
const MAX_TEXT: usize = 512;

/// One thing an operator did, or tried to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Random, so replicas' entries never collide and one copied twice is stored once.
    pub id: String,
    pub at_ms: u64,
    /// The identity (`admin`, a token's owner, `telegram:<id>`); `unknown` for a failed login.
    pub actor: String,
    /// `admin_token`, `token`, `telegram`; empty for a failed login.
    pub via: String,
    pub role: Option<Role>,
    /// The client's address (as the throttle sees it); none in-process.
    pub peer: Option<String>,
    /// The replica it happened on (`shared_state.replica_id`).
    pub replica: Option<String>,
    pub method: String,
    pub path: String,
    pub outcome: Outcome,
    pub status: u16,
    pub changes: Vec<ChangeRecord>,
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Made (a 2xx answer).
    Done,
    /// Allowed but refused by the API (an invalid change, a conflict).
    Failed,
    /// The actor's role does not allow it.
    Refused,
    /// A wrong token.
    FailedLogin,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Failed => "failed",
            Outcome::Refused => "refused",
            Outcome::FailedLogin => "failed_login",
        }
    }

    pub fn of_status(status: u16) -> Outcome {
        if (200..300).contains(&status) { Outcome::Done } else { Outcome::Failed }
    }
}

impl std::str::FromStr for Outcome {
    type Err = String;

    fn from_str(s: &str) -> Result<Outcome, String> {
        [Outcome::Done, Outcome::Failed, Outcome::Refused, Outcome::FailedLogin]
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| format!("`{s}` is not an outcome: done, failed, refused or failed_login"))
    }
}

/// One object a change touched: `before` is none when it was made, `after` when it was deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChangeRecord {
    /// The runtime file's section (`sources`, `keys`, `channel_selection`...).
    pub section: String,
    /// The object's name or id in its section; none for a section that is one value.
    pub name: Option<String>,
    pub before: Option<Value>,
    pub after: Option<Value>,
}

/// Which entries `GET /admin/api/audit` returns, newest first.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditQuery {
    pub actor: Option<String>,
    pub outcome: Option<Outcome>,
    /// A part of the path (`/sources/`).
    pub path: Option<String>,
    pub since_ms: Option<u64>,
    /// Exclusive: the previous page's `next_until_ms`.
    pub until_ms: Option<u64>,
    pub limit: Option<u32>,
}

impl AuditEntry {
    /// Cuts what a client sent (the path) and what a change wrote (notes) to size.
    pub fn bounded(mut self) -> AuditEntry {
        self.path = cut(self.path);
        self.actor = cut(self.actor);
        self.note = self.note.map(cut);
        self
    }
}

fn cut(mut text: String) -> String {
    if text.len() > MAX_TEXT {
        let mut at = MAX_TEXT;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push('…');
    }
    text
}

/// What changed from one runtime file to the next (both as JSON): each named object made,
/// changed or deleted, masked and bounded; the second value counts records left out.
pub fn changes_between(before: &Value, after: &Value) -> (Vec<ChangeRecord>, usize) {
    let empty = Map::new();
    let (b, a) = (before.as_object().unwrap_or(&empty), after.as_object().unwrap_or(&empty));
    let mut sections: Vec<&String> = b.keys().chain(a.keys()).collect();
    sections.sort();
    sections.dedup();
    let mut out = Vec::new();
    for section in sections {
        let (old, new) = (b.get(section), a.get(section));
        if old == new {
            continue;
        }
        section_changes(section, old, new, &mut out);
    }
    let left_out = out.len().saturating_sub(MAX_CHANGES);
    out.truncate(MAX_CHANGES);
    (out, left_out)
}

fn section_changes(section: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<ChangeRecord>) {
    let record = |name: Option<String>, before: Option<&Value>, after: Option<&Value>| ChangeRecord {
        section: section.to_string(),
        name,
        before: before.map(|v| shown(v.clone())),
        after: after.map(|v| shown(v.clone())),
    };
    let as_list = |v: Option<&Value>| -> Option<Vec<(String, Value)>> {
        match v {
            None | Some(Value::Null) => Some(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(|i| Some((identity(i)?, i.clone()))).collect(),
            _ => None,
        }
    };
    let as_map = |v: Option<&Value>| -> Option<Map<String, Value>> {
        match v {
            None | Some(Value::Null) => Some(Map::new()),
            Some(Value::Object(m)) => Some(m.clone()),
            _ => None,
        }
    };
    // Lists of named objects and maps by name: one record per object that changed.
    let named = match (as_list(old), as_list(new)) {
        (Some(o), Some(n)) => Some((o, n)),
        _ => match (as_map(old), as_map(new)) {
            (Some(o), Some(n)) => Some((o.into_iter().collect(), n.into_iter().collect())),
            _ => None,
        },
    };
    let Some((o, n)) = named else {
        out.push(record(None, old, new));
        return;
    };
    let mut names: Vec<&String> = o.iter().chain(n.iter()).map(|(name, _)| name).collect();
    names.sort();
    names.dedup();
    for name in names {
        let find = |list: &[(String, Value)]| list.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
        let (before, after) = (find(&o), find(&n));
        if before != after {
            out.push(record(Some(name.clone()), before.as_ref(), after.as_ref()));
        }
    }
}

/// What an object in a list is known by: its name, id, or (routes) group and alias; a plain
/// string (a tombstone's name) is its own.
fn identity(item: &Value) -> Option<String> {
    match item {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => {
            let text = |k: &str| o.get(k).and_then(Value::as_str);
            if let Some(name) = text("name").or_else(|| text("id")) {
                return Some(name.to_string());
            }
            match (text("alias"), text("group")) {
                (Some(alias), group) => Some(format!("{}/{alias}", group.unwrap_or("default"))),
                (None, _) => match (text("source"), text("model")) {
                    (Some(source), Some(model)) => Some(format!("{source}/{model}")),
                    (None, Some(model)) => Some(model.to_string()),
                    _ => None,
                },
            }
        }
        _ => None,
    }
}

/// An object as the trail shows it: secrets masked, and by size only when it is large.
fn shown(value: Value) -> Value {
    let masked = masked(value);
    let bytes = masked.to_string().len();
    if bytes > MAX_OBJECT_BYTES {
        return serde_json::json!({"omitted": "too large to record", "bytes": bytes});
    }
    masked
}

/// Field names whose values are secrets, or digests of them.
const SECRET_FIELDS: &[&str] = &[
    "api_key",
    "api_keys",
    "key",
    "key_sha256",
    "sha256",
    "token",
    "secret",
    "password",
    "client_secret",
    "bot_token",
    "authorization",
    "headers",
];

/// `value` with every secret field's strings masked (`sk-…1234`), however deep.
pub fn masked(value: Value) -> Value {
    fn all_masked(value: Value) -> Value {
        match value {
            Value::String(s) => Value::String(mask(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(all_masked).collect()),
            Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, all_masked(v))).collect()),
            other => other,
        }
    }
    match value {
        Value::Array(items) => Value::Array(items.into_iter().map(masked).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| {
                    let secret = SECRET_FIELDS.contains(&k.to_ascii_lowercase().as_str());
                    let v = if secret { all_masked(v) } else { masked(v) };
                    (k, v)
                })
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_changed_source_is_one_record_with_its_key_masked() {
        let before = json!({"sources": [
            {"name": "a", "base_url": "http://a", "api_key": "sk-live-aaaaaaaaaaaa1111"},
            {"name": "b", "base_url": "http://b", "api_key": "sk-live-bbbbbbbbbbbb2222"}]});
        let after = json!({"sources": [
            {"name": "a", "base_url": "http://a", "api_key": "sk-live-aaaaaaaaaaaa1111"},
            {"name": "b", "base_url": "http://b2", "api_key": "sk-live-bbbbbbbbbbbb3333"}]});
        let (changes, left_out) = changes_between(&before, &after);
        assert_eq!(left_out, 0);
        assert_eq!(changes.len(), 1, "{changes:?}");
        let change = &changes[0];
        assert_eq!((change.section.as_str(), change.name.as_deref()), ("sources", Some("b")));
        assert_eq!(change.before.as_ref().unwrap()["api_key"], "sk-…2222");
        assert_eq!(change.after.as_ref().unwrap()["api_key"], "sk-…3333");
        assert_eq!(change.after.as_ref().unwrap()["base_url"], "http://b2");
        assert!(!format!("{changes:?}").contains("bbbbbbbbbbbb"));
    }

    #[test]
    fn made_and_deleted_objects_have_one_side_and_scalars_are_one_record() {
        let before = json!({"keys": [{"name": "old", "key_sha256": "ab".repeat(32)}], "deleted_sources": ["x"]});
        let after = json!({"keys": [{"name": "new", "key_sha256": "cd".repeat(32)}], "channel_selection": "order"});
        let (changes, _) = changes_between(&before, &after);
        let find = |section: &str, name: Option<&str>| {
            changes.iter().find(|c| c.section == section && c.name.as_deref() == name).unwrap_or_else(|| {
                panic!("no change {section}/{name:?} in {changes:?}");
            })
        };
        let old = find("keys", Some("old"));
        assert!(old.before.is_some() && old.after.is_none());
        assert_eq!(old.before.as_ref().unwrap()["key_sha256"], "aba…abab");
        let new = find("keys", Some("new"));
        assert!(new.before.is_none() && new.after.is_some());
        let tomb = find("deleted_sources", Some("x"));
        assert!(tomb.before.is_some() && tomb.after.is_none());
        let mode = find("channel_selection", None);
        assert_eq!((mode.before.clone(), mode.after.clone()), (None, Some(json!("order"))));
        assert_eq!(changes.len(), 4, "{changes:?}");
    }

    #[test]
    fn maps_by_name_and_headers_are_masked_and_bounds_hold() {
        let before = json!({"key_scopes": {"k1": ["a"], "k2": ["b"]}});
        let after = json!({"key_scopes": {"k1": ["a"], "k2": ["c"]},
            "sources": [{"name": "s", "headers": {"X-Custom-Auth": "Bearer verysecretvalue9"}}]});
        let (changes, _) = changes_between(&before, &after);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes[0].name.as_deref(), Some("k2"));
        assert_eq!(changes[1].after.as_ref().unwrap()["headers"]["X-Custom-Auth"], "Bea…lue9");

        let many: Vec<Value> = (0..100).map(|i| json!({"name": format!("s{i}"), "note": "x".repeat(20_000)})).collect();
        let (changes, left_out) = changes_between(&json!({}), &json!({ "sources": many }));
        assert_eq!((changes.len(), left_out), (MAX_CHANGES, 100 - MAX_CHANGES));
        assert_eq!(changes[0].after.as_ref().unwrap()["omitted"], "too large to record");
    }

    #[test]
    fn long_client_text_is_cut_on_a_character_boundary() {
        let entry = AuditEntry {
            id: "1".into(),
            at_ms: 0,
            actor: "é".repeat(400),
            via: String::new(),
            role: None,
            peer: None,
            replica: None,
            method: "PUT".into(),
            path: "/".repeat(2000),
            outcome: Outcome::Failed,
            status: 400,
            changes: vec![],
            note: None,
        }
        .bounded();
        assert!(entry.path.len() <= MAX_TEXT + 3 && entry.actor.len() <= MAX_TEXT + 3);
        assert!(entry.actor.ends_with('…'));
    }
}
