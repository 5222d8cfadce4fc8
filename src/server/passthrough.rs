//! What a native pass-through forwards of a client's request on the operator's account: the
//! `anthropic-beta` flags, top-level fields and tool types a source allows; the rest is left
//! out (logged).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::value::RawValue;

use crate::config::PassthroughConfig;

/// A client protocol an adapter may forward natively, by the name adapters declare it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    OpenAiChat,
    AnthropicMessages,
    AnthropicCountTokens,
    OpenAiResponses,
}

impl Protocol {
    pub const fn as_str(self) -> &'static str {
        match self {
            Protocol::OpenAiChat => "openai-chat",
            Protocol::AnthropicMessages => "anthropic-messages",
            Protocol::AnthropicCountTokens => "anthropic-count-tokens",
            Protocol::OpenAiResponses => "openai-responses",
        }
    }
}

/// Top-level Messages (and count_tokens) fields forwarded by default: what an ordinary request
/// carries. Not among them: `mcp_servers`, `container`, `service_tier` (server-side tools,
/// code containers and priority capacity, billed to the operator).
const MESSAGES_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "metadata",
    "stop_sequences",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "thinking",
    "context_management",
    "output_format",
    "output_config",
];

/// Responses fields forwarded by default (what Codex and the SDKs send). Not among them:
/// `service_tier`, `background`, `conversation`, `prompt` (account-side state and capacity).
const RESPONSES_FIELDS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "max_output_tokens",
    "max_tool_calls",
    "temperature",
    "top_p",
    "top_logprobs",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "store",
    "stream",
    "stream_options",
    "metadata",
    "reasoning",
    "text",
    "truncation",
    "user",
    "include",
    "prompt_cache_key",
    "safety_identifier",
];

/// `anthropic-beta` flags forwarded by default: the ones Claude Code and the SDKs send for
/// ordinary requests. Not among them: MCP, code execution, files, skills, computer use and
/// the 1M context (which is priced higher).
const BETAS: &[&str] = &[
    "claude-code-20250219",
    "token-counting-2024-11-01",
    "interleaved-thinking-2025-05-14",
    "fine-grained-tool-streaming-2025-05-14",
    "token-efficient-tools-2025-02-19",
    "prompt-caching-2024-07-31",
    "output-128k-2025-02-19",
    "context-management-2025-06-27",
    "structured-outputs-2025-11-13",
    "effort-2025-11-24",
];

/// Tools the upstream runs on the operator's account that an ordinary client does not ask for:
/// a tool whose `type` starts with one of these is left out by default — remote MCP servers the
/// upstream would connect to with the operator's key, and code containers billed by the hour.
/// The server tools Claude Code and Codex use (web search and fetch) go through.
const HELD_BACK_TOOLS: &[&str] = &["mcp", "code_execution", "code_interpreter"];

/// What a client request loses on its way through a source's native pass-through.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Left {
    pub fields: Vec<String>,
    pub betas: Vec<String>,
    pub tools: Vec<String>,
}

impl Left {
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty() && self.betas.is_empty() && self.tools.is_empty()
    }
}

/// Whether a tool of `kind` (its `type`; `None` when it has none: a client's own) goes through.
fn tool_allowed(kind: Option<&str>, policy: &PassthroughConfig) -> bool {
    let Some(kind) = kind else { return true };
    policy.tools.iter().any(|t| t == "*" || t == kind) || !HELD_BACK_TOOLS.iter().any(|held| kind.starts_with(held))
}

fn allowed(defaults: &[&str], extra: &[String], name: &str) -> bool {
    extra.iter().any(|e| e == "*" || e == name) || defaults.contains(&name)
}

/// The body as forwarded for `protocol`: the original bytes when every top-level field is
/// allowed, else a copy without the others. A protocol without a list (chat) passes whole.
pub fn body<'a>(protocol: Protocol, body: &'a [u8], policy: &PassthroughConfig, left: &mut Left) -> Cow<'a, [u8]> {
    let defaults = match protocol {
        Protocol::AnthropicMessages | Protocol::AnthropicCountTokens => MESSAGES_FIELDS,
        Protocol::OpenAiResponses => RESPONSES_FIELDS,
        Protocol::OpenAiChat => return Cow::Borrowed(body),
    };
    // Only the top-level names are read; the values stay raw text.
    let Ok(fields) = serde_json::from_slice::<BTreeMap<Cow<'_, str>, &RawValue>>(body) else {
        return Cow::Borrowed(body);
    };
    let refused: Vec<&str> =
        fields.keys().map(|k| k.as_ref()).filter(|k| !allowed(defaults, &policy.fields, k)).collect();
    // Only the tools' types are read, and only when some would be left out is anything copied.
    // Of each tool only its `type` is read (schemas stay unparsed): a request's tools are large.
    #[derive(serde::Deserialize)]
    struct Typed {
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    let kinds: Vec<Typed> =
        fields.get("tools").and_then(|raw| serde_json::from_str(raw.get()).ok()).unwrap_or_default();
    let server_tools: Vec<String> =
        kinds.into_iter().filter_map(|t| t.kind).filter(|k| !tool_allowed(Some(k), policy)).collect();
    if refused.is_empty() && server_tools.is_empty() {
        return Cow::Borrowed(body);
    }
    let Ok(mut map) = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(body) else {
        return Cow::Borrowed(body);
    };
    for name in &refused {
        map.remove(*name);
    }
    if let Some(serde_json::Value::Array(tools)) = map.get_mut("tools") {
        tools.retain(|t| tool_allowed(t.get("type").and_then(serde_json::Value::as_str), policy));
    }
    left.fields.extend(refused.iter().map(|f| f.to_string()));
    left.tools.extend(server_tools);
    Cow::Owned(serde_json::to_vec(&map).expect("a JSON map serialises"))
}

/// One `anthropic-beta` header value as forwarded: only the allowed flags; `None` when none is.
pub fn betas(value: &str, policy: &PassthroughConfig, left: &mut Left) -> Option<String> {
    let mut kept = Vec::new();
    for flag in value.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        if allowed(BETAS, &policy.betas, flag) {
            kept.push(flag);
        } else {
            left.betas.push(flag.to_string());
        }
    }
    (!kept.is_empty()).then(|| kept.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_requests_pass_whole_and_costly_fields_are_left_out() {
        let policy = PassthroughConfig::default();
        let mut left = Left::default();
        let plain = br#"{"model":"m","max_tokens":5,"messages":[],"thinking":{"type":"enabled"}}"#;
        assert!(matches!(body(Protocol::AnthropicMessages, plain, &policy, &mut left), Cow::Borrowed(_)));
        assert!(left.is_empty());
        let costly =
            br#"{"model":"m","mcp_servers":[{"url":"x"}],"messages":[],"container":"c","service_tier":"priority"}"#;
        let sent = body(Protocol::AnthropicMessages, costly, &policy, &mut left);
        let sent: serde_json::Value = serde_json::from_slice(&sent).unwrap();
        assert_eq!(sent, serde_json::json!({"model": "m", "messages": []}));
        assert_eq!(left.fields, ["container", "mcp_servers", "service_tier"]);
        let chat = br#"{"model":"m","service_tier":"flex"}"#;
        assert!(matches!(body(Protocol::OpenAiChat, chat, &policy, &mut Left::default()), Cow::Borrowed(_)));
    }

    #[test]
    fn mcp_and_code_containers_are_left_out_and_ordinary_tools_kept() {
        let policy = PassthroughConfig::default();
        let mut left = Left::default();
        let anthropic = br#"{"model":"m","messages":[],"tools":[{"name":"f","input_schema":{}},{"type":"web_search_20250305","name":"web_search"},{"type":"code_execution_20250825","name":"code_execution"}]}"#;
        let sent: serde_json::Value =
            serde_json::from_slice(&body(Protocol::AnthropicMessages, anthropic, &policy, &mut left)).unwrap();
        let names: Vec<&str> = sent["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["f", "web_search"]);
        assert_eq!(left.tools, ["code_execution_20250825"]);
        let responses = br#"{"model":"m","tools":[{"type":"function","name":"f"},{"type":"web_search"},{"type":"mcp","server_url":"x"}]}"#;
        let mut left = Left::default();
        let sent: serde_json::Value =
            serde_json::from_slice(&body(Protocol::OpenAiResponses, responses, &policy, &mut left)).unwrap();
        assert_eq!(sent["tools"], serde_json::json!([{"type": "function", "name": "f"}, {"type": "web_search"}]));
        let allowed = PassthroughConfig { tools: vec!["mcp".into()], ..PassthroughConfig::default() };
        let sent = body(Protocol::OpenAiResponses, responses, &allowed, &mut Left::default());
        assert!(matches!(sent, Cow::Borrowed(_)), "mcp allowed: the body goes as sent");
    }

    #[test]
    fn a_source_can_allow_more_fields_and_betas() {
        let policy = PassthroughConfig {
            fields: vec!["service_tier".into()],
            betas: vec!["mcp-client-2025-04-04".into()],
            tools: vec![],
        };
        let mut left = Left::default();
        let sent = body(Protocol::OpenAiResponses, br#"{"model":"m","service_tier":"priority"}"#, &policy, &mut left);
        assert!(matches!(sent, Cow::Borrowed(_)));
        let kept = betas("claude-code-20250219, mcp-client-2025-04-04,files-api-2025-04-14", &policy, &mut left);
        assert_eq!(kept.as_deref(), Some("claude-code-20250219,mcp-client-2025-04-04"));
        assert_eq!(left.betas, ["files-api-2025-04-14"]);
        let all = PassthroughConfig { fields: vec!["*".into()], betas: vec!["*".into()], tools: vec!["*".into()] };
        assert_eq!(betas("anything-2030", &all, &mut Left::default()).as_deref(), Some("anything-2030"));
        assert_eq!(betas("files-api-2025-04-14", &PassthroughConfig::default(), &mut Left::default()), None);
    }
}
