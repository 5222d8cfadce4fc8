//! Built-in `deepseek` adapter: DeepSeek's OpenAI dialect. `reasoning_content` already has the
//! unified name; cache hits (`prompt_cache_hit_tokens`) become `prompt_tokens_details.cached_tokens`.

use adapter_kit::openai_compat::{self, Dialect, Session};
use adapter_kit::{Guest, Metadata};
use serde_json::{Value, json};

struct DeepSeek;

impl Dialect for DeepSeek {
    const NAME: &'static str = "deepseek";

    fn normalize(value: &mut Value) -> bool {
        let Some(usage) = value.get_mut("usage").filter(|u| u.is_object()) else { return false };
        let Some(hits) = usage.get("prompt_cache_hit_tokens").and_then(Value::as_u64) else { return false };
        if usage.pointer("/prompt_tokens_details/cached_tokens").is_some() {
            return false;
        }
        match usage.get_mut("prompt_tokens_details").and_then(Value::as_object_mut) {
            Some(details) => {
                details.insert("cached_tokens".into(), json!(hits));
            }
            None => usage["prompt_tokens_details"] = json!({"cached_tokens": hits}),
        }
        true
    }
}

impl Guest for DeepSeek {
    type Session = Session<DeepSeek>;

    fn describe() -> Metadata {
        openai_compat::metadata::<DeepSeek>()
    }
}

adapter_kit::openai_models!(DeepSeek);
impl adapter_kit::NativeGuest for DeepSeek {
    type NativeSession = openai_compat::NativeSession<DeepSeek>;

    fn protocols() -> Vec<adapter_kit::NativeProtocol> {
        openai_compat::protocols()
    }
}
adapter_kit::export!(DeepSeek);
