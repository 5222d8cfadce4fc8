//! The `fusion` mode: every enabled provider answers in parallel (each bounded by the route's
//! `timeout_seconds`, failures tolerated), then the judge route writes the answer by the route's
//! strategy. The judge streams to streaming clients; `ranked` returns the best answer verbatim.
//! Every call logs its row under one fusion id, named in the response headers.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize as _;
use serde_json::{Value, json};

use crate::config::{FusionConfig, FusionStrategy, RouteConfig};
use crate::provider::ChunkStream;
use crate::router::Planned;
use crate::server::auth::KeyEntry;
use crate::server::books::{LogContext, LogMode};
use crate::server::call::{Answer, Call, CallBody, Reply};
use crate::server::error::{ApiError, ErrorType};

use super::Dispatcher;

pub const FUSION_HEADER: &str = "x-switchyard-fusion";
pub const FUSION_ID_HEADER: &str = "x-switchyard-fusion-id";

/// One candidate's answer: its provider and the unified response.
struct Answered {
    provider: String,
    response: Value,
}

pub async fn fuse(
    gw: &dyn Dispatcher,
    key: &KeyEntry,
    call: &Call<'_>,
    route: &RouteConfig,
    config: &FusionConfig,
    candidates: Vec<Planned<'_>>,
) -> Result<Reply, ApiError> {
    let fusion_id = uuid::Uuid::new_v4().simple().to_string();
    let per_candidate = config.timeout_seconds.duration();
    // Candidates answer whole, whatever the client asked: the judge needs every answer.
    let mut request: Value = call.body.unified().and_then(|u| serde_json::from_str(u).ok()).unwrap_or_default();
    if let Some(fields) = request.as_object_mut() {
        fields.insert("stream".into(), Value::Bool(false));
        fields.remove("stream_options");
    }
    let whole_body = request.to_string();
    let whole = Call {
        stream: false,
        body: CallBody::Unified(&whole_body),
        fusion_id: Some(&fusion_id),
        native: None,
        ..*call
    };
    let attempts = candidates.into_iter().map(|planned| {
        let provider = planned.resolved.qualified();
        let log = LogContext::of(&whole, key, Some(route.alias.clone()), LogMode::Fusion, &route.alias);
        async move {
            let served = tokio::time::timeout(per_candidate, gw.serve(key, &whole, vec![planned], log)).await;
            let outcome = match served {
                Err(_) => Err(format!("no answer within {} s", config.timeout_seconds)),
                Ok(Err(e)) => Err(e.message),
                Ok(Ok(Reply { answer: Answer::Complete(body), .. })) => {
                    serde_json::from_str::<Value>(&body).map_err(|e| format!("answer is not JSON: {e}"))
                }
                Ok(Ok(_)) => unreachable!("a non-streaming call answers whole"),
            };
            (provider, outcome)
        }
    });
    let mut answered = Vec::new();
    let mut failed = Vec::new();
    for (provider, outcome) in futures::future::join_all(attempts).await {
        match outcome {
            Ok(response) => answered.push(Answered { provider, response }),
            Err(why) => failed.push(format!("{provider}: {why}")),
        }
    }
    if answered.len() < config.min_candidates {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Upstream,
            format!(
                "fusion route `{}` needs {} answers and got {}: {}",
                route.alias,
                config.min_candidates,
                answered.len(),
                if failed.is_empty() { "too few providers".to_string() } else { failed.join("; ") }
            ),
        )
        .code("fusion_failed"));
    }
    tracing::info!(fusion_id, answered = answered.len(), failed = failed.len(), "fusion candidates gathered");

    let mut headers = HeaderMap::new();
    let used = answered.iter().map(|a| a.provider.as_str()).collect::<Vec<_>>().join(",");
    headers.insert(FUSION_HEADER, HeaderValue::from_str(&used).unwrap_or(HeaderValue::from_static("")));
    headers.insert(FUSION_ID_HEADER, HeaderValue::from_str(&fusion_id).expect("hex is a header value"));

    let conversation = request;
    let judge_stream = call.stream && config.strategy != FusionStrategy::Ranked;
    let judge_body = judge_request(config, &conversation, &answered, judge_stream).to_string();
    let judge = Call {
        model: &config.judge_alias,
        body: CallBody::Unified(&judge_body),
        stream: judge_stream,
        depth: call.depth + 1,
        fusion_id: Some(&fusion_id),
        native: None,
        ..*call
    };
    let verdict = gw.dispatch(&key.internal(), judge).await.map_err(|e| ApiError {
        message: format!("fusion judge `{}` failed: {}", config.judge_alias, e.message),
        ..e
    })?;
    if config.strategy != FusionStrategy::Ranked {
        return Ok(Reply { answer: verdict.answer, headers });
    }
    let Answer::Complete(ranking) = verdict.answer else { unreachable!("the ranking call is not streamed") };
    let ranking = switchyard_unified::Reply::parse(&ranking).map(|r| r.text()).unwrap_or_default();
    let best = best_index(&ranking, answered.len());
    let best = best.unwrap_or_else(|| {
        tracing::warn!(fusion_id, "the judge named no candidate; answering with the first");
        0
    });
    let chosen = &answered[best].response;
    let answer = if call.stream {
        Answer::Stream(ChunkStream::replay(crate::provider::as_chunks(&chosen.to_string()).unwrap_or_default()))
    } else {
        Answer::Complete(chosen.to_string())
    };
    Ok(Reply { answer, headers })
}

/// What the judge is told: the conversation, the numbered answers, and the strategy's task.
fn judge_request(config: &FusionConfig, conversation: &Value, answers: &[Answered], stream: bool) -> Value {
    let task = match config.strategy {
        FusionStrategy::CompareAndSynthesize => {
            "Compare the candidate answers below. Write the single best answer to the user's last message, \
             combining the correct and useful parts of each and leaving out their mistakes. \
             Reply with that answer only, as if you were answering the user directly."
        }
        FusionStrategy::MajorityVote => {
            "Find the answer that most of the candidate answers below agree on. \
             Reply with that consensus answer only, as if you were answering the user directly."
        }
        FusionStrategy::Ranked => {
            "Rank the candidate answers below from best to worst for the user's last message. \
             Reply with only the number of the best answer."
        }
    };
    let conversation = switchyard_unified::ChatRequest::deserialize(conversation).unwrap_or_default();
    let transcript = conversation
        .messages()
        .iter()
        .map(|m| format!("{}: {}", m.role.as_str(), m.content.text()))
        .collect::<Vec<_>>()
        .join("\n");
    let candidates = answers
        .iter()
        .enumerate()
        .map(|(i, a)| format!("[{}]\n{}", i + 1, answer_text(&a.response)))
        .collect::<Vec<_>>()
        .join("\n\n");
    let mut request = json!({
        "model": config.judge_alias,
        "stream": stream,
        "messages": [
            {"role": "system", "content": task},
            {"role": "user", "content": format!("Conversation:\n{transcript}\n\nCandidate answers:\n{candidates}")},
        ],
    });
    if stream {
        request["stream_options"] = json!({"include_usage": true});
    }
    request
}

/// The text of a candidate's whole answer ("" when it has none).
fn answer_text(response: &Value) -> String {
    switchyard_unified::Reply::deserialize(response).map(|r| r.text()).unwrap_or_default()
}

/// The first candidate number (1-based) in the judge's reply, as a 0-based index.
fn best_index(reply: &str, count: usize) -> Option<usize> {
    reply
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<usize>().ok())
        .find(|n| (1..=count).contains(n))
        .map(|n| n - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_index_is_the_first_valid_number_in_the_reply() {
        assert_eq!(best_index("2", 3), Some(1));
        assert_eq!(best_index("The best is [3], then 1.", 3), Some(2));
        assert_eq!(best_index("Answer 7 is out of range; 1 wins", 3), Some(0));
        assert_eq!(best_index("none of them", 3), None);
    }
}
