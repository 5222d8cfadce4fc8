//! Checks of gateway keys: names and values unique, a quota's period, a model list, and the
//! example config's public development key refused off loopback.

use std::collections::HashSet;
use std::net::SocketAddr;

use super::{Collector, EXAMPLE_KEY};
use crate::config::KeyConfig;

impl Collector<'_> {
    /// The shipped example's development key is public: it serves on loopback only.
    pub(super) fn check_public_keys(&mut self, keys: &[KeyConfig], listen: SocketAddr) {
        if listen.ip().is_loopback() {
            return;
        }
        for (i, k) in keys.iter().enumerate() {
            if k.key.expose() == EXAMPLE_KEY {
                self.error(
                    &format!("keys[{i}].key"),
                    format!("is the example config's public development key, and listen ({listen}) is not loopback"),
                    "set a key of your own (e.g. SWITCHYARD_KEY=$(openssl rand -hex 24)), or listen on 127.0.0.1",
                );
            }
        }
    }

    pub(super) fn check_keys(&mut self, keys: &[KeyConfig]) {
        let mut names = HashSet::new();
        let mut values = HashSet::new();
        for (i, k) in keys.iter().enumerate() {
            if k.token_quota.is_some() {
                self.period(&format!("keys[{i}]"), k.period, k.hours);
            }
            if k.name.as_str().is_empty() {
                self.error(&format!("keys[{i}].name"), "is empty", "give the key a name, e.g. alice");
            } else {
                self.unique_key_name(&format!("keys[{i}]"), &k.name, &mut names);
            }
            if k.key.is_empty() {
                self.error(&format!("keys[{i}].key"), "is empty", "set the key, e.g. key: ${ALICE_KEY}");
            } else if !values.insert(k.key.expose().to_string()) {
                self.error(
                    &format!("keys[{i}].key"),
                    "the same key value is configured twice",
                    "give every key its own secret",
                );
            }
            if k.models.is_empty() {
                self.error(
                    &format!("keys[{i}].models"),
                    "is empty, so the key could use no model",
                    "list the models it may use, or [\"*\"] for all",
                );
            }
        }
    }
}
