//! The Anthropic door's translations against golden files: requests to the unified form,
//! unified answers back to Anthropic messages.

use serde_json::{Map, Value, json};

use crate::server::golden;

#[test]
fn requests_translate_to_the_unified_form_as_the_golden_files_say() {
    let dir = golden::dir("messages");
    for (name, request) in golden::cases(&dir, "request") {
        let body: Map<String, Value> = serde_json::from_value(request).expect("an object");
        let actual = match super::request::to_unified(&body) {
            Ok(unified) => unified,
            Err(e) => json!({"error": e.message, "param": e.param}),
        };
        golden::check(&dir, &name, "unified", &actual);
    }
}

#[test]
fn unified_answers_encode_to_anthropic_messages_as_the_golden_files_say() {
    let dir = golden::dir("replies");
    for (name, reply) in golden::cases(&dir, "unified") {
        let reply: switchyard_unified::Reply = serde_json::from_value(reply).expect("a unified reply");
        golden::check(&dir, &name, "anthropic", &super::encode::message(&reply));
    }
}
