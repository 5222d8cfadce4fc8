//! The Anthropic door's translations against golden files: requests to the unified form,
//! unified answers back to Anthropic messages.

use serde_json::json;

use crate::server::golden;

#[test]
fn requests_translate_to_the_unified_form_as_the_golden_files_say() {
    let dir = golden::dir("messages");
    for (name, request) in golden::cases(&dir, "request") {
        let bytes = request.to_string();
        let request = super::parsed(bytes.as_bytes()).unwrap_or_else(|e| panic!("{name}: {}", e.message));
        let actual = match super::request::to_unified(&request) {
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
