//! Lenient field readers shared by the unified types: a value of the wrong shape reads as
//! absent (or is skipped in a list) instead of failing the whole body; never a panic.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A count: a negative, fractional or non-number value reads as not reported.
pub(crate) fn count<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    Ok(Value::deserialize(deserializer)?.as_u64())
}

/// A list that may be written `null` (as empty).
pub(crate) fn list<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// A string: anything but a string (a number, an object) reads as absent.
pub(crate) fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// A boolean: anything else reads as absent.
pub(crate) fn flag<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<bool>, D::Error> {
    Ok(Value::deserialize(deserializer)?.as_bool())
}

/// Any typed value: what does not read as `T` is absent.
pub(crate) fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(deserializer: D) -> Result<Option<T>, D::Error> {
    Ok(serde_json::from_value(Value::deserialize(deserializer)?).ok())
}

/// A list whose unreadable entries are skipped; `None` when it is not a list at all.
pub(crate) fn items<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<Option<Vec<T>>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(values) => Some(values.into_iter().filter_map(|v| serde_json::from_value(v).ok()).collect()),
        _ => None,
    })
}

/// As [`items`], with anything but a list read as empty.
pub(crate) fn each<'de, D: Deserializer<'de>, T: DeserializeOwned>(deserializer: D) -> Result<Vec<T>, D::Error> {
    Ok(items(deserializer)?.unwrap_or_default())
}

/// Strings given as one string or a list of them (`stop`, an embeddings `input`); other entries
/// are skipped, and any other value reads as absent.
pub(crate) fn strings<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<String>>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(s) => Some(vec![s]),
        Value::Array(values) => Some(
            values
                .into_iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    })
}
