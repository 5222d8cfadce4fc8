//! The `adapter` (vision) mode: each image in the request is described by the vision route, in
//! parallel and bounded, and replaced by `[Image: description]`, so a text-only model can
//! answer. A request without images passes untouched.

use futures::StreamExt;
use serde_json::{Value, json};

use super::Dispatcher;
use crate::config::{ModelKind, VisionConfig, VisionFallback};
use crate::server::auth::KeyEntry;
use crate::server::call::{Answer, Call, CallBody};
use crate::server::error::ApiError;

/// Images described at once per request.
const PARALLEL: usize = 4;
const PROMPT: &str = "Describe this image in detail for someone who cannot see it: its content, any text in it, \
                      and anything a question about it might need. Reply with the description only.";
const UNAVAILABLE: &str = "[Image: description unavailable]";

/// The request with every image replaced by its description; `None` when it has no images.
pub async fn describe_images(
    gw: &dyn Dispatcher,
    key: &KeyEntry,
    call: &Call<'_>,
    vision: &VisionConfig,
) -> Result<Option<String>, ApiError> {
    // Most requests carry no image: skip the parse for them.
    let Some(unified) = call.body.unified() else { return Ok(None) };
    if !unified.contains("image") {
        return Ok(None);
    }
    let mut request: Value =
        serde_json::from_str(unified).map_err(|e| ApiError::invalid_request(format!("request is not JSON: {e}")))?;
    let images: Vec<Value> = image_blocks(&mut request).map(|b| b.clone()).collect();
    if images.is_empty() {
        return Ok(None);
    }
    if images.len() > vision.max_images as usize {
        return Err(ApiError::invalid_request(format!(
            "the request carries {} images; this route describes at most {} per request (adapter_config.max_images)",
            images.len(),
            vision.max_images
        ))
        .param("messages")
        .code("too_many_images"));
    }
    let internal = key.internal();
    let jobs: Vec<_> = images.iter().map(|image| describe(gw, &internal, call, vision, image)).collect();
    let descriptions: Vec<Result<String, ApiError>> = futures::stream::iter(jobs).buffered(PARALLEL).collect().await;

    let mut texts = Vec::with_capacity(descriptions.len());
    for (i, described) in descriptions.into_iter().enumerate() {
        texts.push(match (described, vision.fallback) {
            (Ok(text), _) => format!("[Image: {text}]"),
            (Err(e), VisionFallback::SkipImage) => {
                tracing::warn!(
                    image = i + 1,
                    "vision route `{}` failed, image skipped: {}",
                    vision.vision_alias,
                    e.message
                );
                UNAVAILABLE.to_string()
            }
            (Err(e), VisionFallback::Error) => {
                return Err(ApiError {
                    message: format!(
                        "vision route `{}` could not describe image {} of the request: {}",
                        vision.vision_alias,
                        i + 1,
                        e.message
                    ),
                    ..e
                });
            }
        });
    }
    for (block, text) in image_blocks(&mut request).zip(texts) {
        *block = json!({"type": "text", "text": text});
    }
    Ok(Some(request.to_string()))
}

/// One image's description from the vision route.
async fn describe(
    gw: &dyn Dispatcher,
    key: &KeyEntry,
    call: &Call<'_>,
    vision: &VisionConfig,
    image: &Value,
) -> Result<String, ApiError> {
    let body = json!({"model": vision.vision_alias, "stream": false, "messages": [
        {"role": "user", "content": [{"type": "text", "text": PROMPT}, as_openai_image(image)]}]})
    .to_string();
    let describe = Call {
        model: &vision.vision_alias,
        body: CallBody::Unified(&body),
        stream: false,
        kind: ModelKind::Chat,
        depth: call.depth + 1,
        fusion_id: None,
        native: None,
        ..*call
    };
    let reply = gw.dispatch(key, describe).await?;
    let Answer::Complete(answer) = reply.answer else { unreachable!("a non-streaming call answers whole") };
    Ok(switchyard_unified::Reply::parse(&answer).unwrap_or_default().text().trim().to_string())
}

/// Every image block in the messages, in order: OpenAI `image_url` and Anthropic `image`.
fn image_blocks(request: &mut Value) -> impl Iterator<Item = &mut Value> {
    request["messages"]
        .as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array_mut())
        .flatten()
        .filter(|b| matches!(b["type"].as_str(), Some("image_url" | "image")))
}

/// The vision call speaks the unified (OpenAI) form: an Anthropic image source becomes a URL.
fn as_openai_image(block: &Value) -> Value {
    if block["type"] == "image_url" {
        return block.clone();
    }
    let source = &block["source"];
    let url = serde_json::from_value::<switchyard_unified::AnthropicImageSource>(source.clone())
        .ok()
        .and_then(|source| source.url())
        .unwrap_or_else(|| source["url"].as_str().unwrap_or_default().to_string());
    json!({"type": "image_url", "image_url": {"url": url}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_openai_and_anthropic_image_blocks_in_order() {
        let mut request = json!({"messages": [
            {"role": "user", "content": "plain text, no blocks"},
            {"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/cat.png"}},
                {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}},
            ]},
        ]});
        let found: Vec<Value> = image_blocks(&mut request).map(|b| as_openai_image(b)).collect();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0]["image_url"]["url"], "https://x/cat.png");
        assert_eq!(found[1]["image_url"]["url"], "data:image/jpeg;base64,AAAA");
    }
}
