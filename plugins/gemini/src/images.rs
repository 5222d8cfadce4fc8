//! Image generation on Gemini: Imagen models through `:predict`, Gemini image models through
//! `generateContent` with image output; both answered in OpenAI's images shape.

use adapter_kit::errors::adapter_error;
use adapter_kit::unified::ImagesRequest;
use adapter_kit::{AdapterError, ErrorKind};
use serde_json::{Value, json};

/// (path under base_url, body) for an OpenAI images request.
pub fn request(model: &str, images: &ImagesRequest) -> (String, Value) {
    let prompt = images.prompt.as_deref().unwrap_or_default();
    let n = images.n.unwrap_or(1);
    if model.starts_with("imagen") {
        let mut parameters = json!({"sampleCount": n});
        if let Some(ratio) = images.size.as_deref().and_then(aspect_ratio) {
            parameters["aspectRatio"] = json!(ratio);
        }
        return (
            format!("models/{model}:predict"),
            json!({"instances": [{"prompt": prompt}], "parameters": parameters}),
        );
    }
    let body = json!({
        "contents": [{"role": "user", "parts": [{"text": prompt}]}],
        "generationConfig": {"responseModalities": ["TEXT", "IMAGE"]},
    });
    (format!("models/{model}:generateContent"), body)
}

/// The Imagen aspect ratio nearest to an OpenAI `WxH` size.
fn aspect_ratio(size: &str) -> Option<&'static str> {
    let (w, h) = size.split_once('x')?;
    let ratio = w.parse::<f64>().ok()? / h.parse::<f64>().ok()?;
    [("1:1", 1.0), ("3:4", 0.75), ("4:3", 4.0 / 3.0), ("9:16", 9.0 / 16.0), ("16:9", 16.0 / 9.0)]
        .into_iter()
        .min_by(|a, b| (a.1 - ratio).abs().total_cmp(&(b.1 - ratio).abs()))
        .map(|(name, _)| name)
}

/// OpenAI's images response from a `:predict` or `generateContent` answer. `as_url`: the
/// client asked for `response_format: url`; Gemini returns bytes, so they go as data: URLs.
pub fn response(value: &Value, as_url: bool) -> Result<String, AdapterError> {
    let mut images: Vec<(String, String)> = Vec::new();
    for p in value["predictions"].as_array().into_iter().flatten() {
        if let Some(data) = p["bytesBase64Encoded"].as_str() {
            images.push((p["mimeType"].as_str().unwrap_or("image/png").to_string(), data.to_string()));
        }
    }
    for part in value["candidates"][0]["content"]["parts"].as_array().into_iter().flatten() {
        let inline = if part["inlineData"].is_object() { &part["inlineData"] } else { &part["inline_data"] };
        if let Some(data) = inline["data"].as_str() {
            let mime = inline["mimeType"].as_str().or(inline["mime_type"].as_str()).unwrap_or("image/png");
            images.push((mime.to_string(), data.to_string()));
        }
    }
    if images.is_empty() {
        let reason = value["candidates"][0]["finishReason"].as_str().unwrap_or("no image in the answer");
        return Err(adapter_error(ErrorKind::ContentPolicy, &format!("Gemini returned no image: {reason}")));
    }
    let data: Vec<Value> = images
        .into_iter()
        .map(
            |(mime, b64)| {
                if as_url { json!({"url": format!("data:{mime};base64,{b64}")}) } else { json!({"b64_json": b64}) }
            },
        )
        .collect();
    Ok(json!({"created": adapter_kit::host::now_unix_ms() / 1000, "data": data}).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_map_to_the_nearest_imagen_ratio() {
        assert_eq!(aspect_ratio("1024x1024"), Some("1:1"));
        assert_eq!(aspect_ratio("1792x1024"), Some("16:9"));
        assert_eq!(aspect_ratio("1024x1792"), Some("9:16"));
        assert_eq!(aspect_ratio("1536x1024"), Some("4:3"));
        assert_eq!(aspect_ratio("big"), None);
    }
}
