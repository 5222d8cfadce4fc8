//! The Responses door's translations against golden files: requests to the unified form (with
//! what was left out), unified answers back to Responses objects.

use serde_json::{Map, Value, json};

use super::encode::Echo;
use super::request::{Namespaces, ResponsesRequest};
use crate::server::golden;

#[test]
fn requests_translate_to_the_unified_form_as_the_golden_files_say() {
    let dir = golden::dir("responses");
    for (name, request) in golden::cases(&dir, "request") {
        let body: Map<String, Value> = serde_json::from_value(request).expect("an object");
        let request: ResponsesRequest = crate::server::request::check(&body).expect("a valid request");
        let actual = match super::request::to_unified(&request) {
            Ok((unified, dropped)) => {
                json!({"unified": unified, "dropped": {"tools": dropped.tools, "items": dropped.items}})
            }
            Err(e) => json!({"error": e.message, "param": e.param}),
        };
        golden::check(&dir, &name, "unified", &actual);
    }
}

#[test]
fn unified_answers_encode_to_responses_objects_as_the_golden_files_say() {
    let dir = golden::dir("replies");
    let request = json!({"model": "m", "tools": [{"type": "namespace", "name": "tools", "tools": [{"type": "function", "name": "search"}]}], "temperature": 0.5});
    let request: Map<String, Value> = serde_json::from_value(request).expect("an object");
    let namespaces = Namespaces::of(&crate::server::request::check(&request).expect("a valid request"));
    for (name, reply) in golden::cases(&dir, "unified") {
        let echo = Echo {
            model: "m".into(),
            id: "resp_golden".into(),
            created_at: 1_733_500_000,
            namespaces: namespaces.clone(),
            request: request.clone(),
            ..Echo::default()
        };
        let reply: switchyard_unified::Reply = serde_json::from_value(reply).expect("a unified reply");
        golden::check(&dir, &name, "responses", &super::encode::response_object(&echo, &reply));
    }
}
