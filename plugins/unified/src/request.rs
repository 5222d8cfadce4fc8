//! The unified request (OpenAI Chat Completions shape, and the embeddings and images bodies) as
//! adapters read it: every field a translation reads, typed; values passed on as given stay JSON.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::read::{count, each, flag, items, lenient, strings, text};

/// A chat request in the unified form. A field of the wrong type reads as absent, as the
/// translations always treated it; what a translation refuses (no `messages`) is its own to say.
#[derive(Debug, Default, Deserialize)]
pub struct ChatRequest {
    /// `None` when absent or not a list; unreadable turns (not objects) are skipped.
    #[serde(default, deserialize_with = "items")]
    pub messages: Option<Vec<ChatMessage>>,
    #[serde(default, deserialize_with = "flag")]
    pub stream: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, deserialize_with = "count")]
    max_tokens: Option<u64>,
    #[serde(default, deserialize_with = "count")]
    max_completion_tokens: Option<u64>,
    /// `stop`, one string or a list.
    #[serde(default, deserialize_with = "strings")]
    pub stop: Option<Vec<String>>,
    /// Sampling knobs, passed on as the client gave them.
    pub temperature: Option<Value>,
    pub top_p: Option<Value>,
    /// From Anthropic clients, through the Messages door.
    pub top_k: Option<Value>,
    pub seed: Option<Value>,
    pub n: Option<Value>,
    /// `None` when absent or not a list.
    #[serde(default, deserialize_with = "items")]
    pub tools: Option<Vec<ToolDef>>,
    #[serde(default, deserialize_with = "tool_choice")]
    pub tool_choice: Option<ToolChoice>,
    #[serde(default, deserialize_with = "flag")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default, deserialize_with = "text")]
    pub user: Option<String>,
    #[serde(default, deserialize_with = "text")]
    reasoning_effort: Option<String>,
    /// The effort the gateway derived from an Anthropic client's adaptive thinking.
    #[serde(default, deserialize_with = "text")]
    reasoning_effort_hint: Option<String>,
    /// `thinking.budget_tokens`, from Anthropic clients.
    #[serde(default, deserialize_with = "lenient")]
    thinking: Option<Thinking>,
    #[serde(default, deserialize_with = "flag")]
    disable_thinking: Option<bool>,
    #[serde(default, deserialize_with = "lenient")]
    pub response_format: Option<ResponseFormat>,
    /// Passed on to upstreams that take them (Responses).
    pub prompt_cache_key: Option<Value>,
    /// The cache key the gateway derived from an Anthropic client's cache markers.
    #[serde(default, deserialize_with = "text")]
    pub prompt_cache_key_hint: Option<String>,
    pub safety_identifier: Option<Value>,
    pub metadata: Option<Value>,
}

impl ChatRequest {
    /// A unified request as the host hands it over: a JSON object, or an error saying what it is.
    pub fn parse(json: &str) -> Result<ChatRequest, String> {
        object(json)
    }

    /// The turns; none when `messages` is absent or not a list.
    pub fn messages(&self) -> &[ChatMessage] {
        self.messages.as_deref().unwrap_or_default()
    }

    /// The client asked for a stream.
    pub fn streams(&self) -> bool {
        self.stream == Some(true)
    }

    /// The client asked for the usage chunk (`stream_options.include_usage`).
    pub fn wants_stream_usage(&self) -> bool {
        self.stream_options.as_ref().and_then(|o| o.include_usage) == Some(true)
    }

    /// `max_tokens`, or its newer name `max_completion_tokens`.
    pub fn max_tokens(&self) -> Option<u64> {
        self.max_tokens.or(self.max_completion_tokens)
    }

    /// `disable_thinking: true`: the client turned thinking off (it wins over any budget).
    pub fn thinking_off(&self) -> bool {
        self.disable_thinking == Some(true)
    }

    /// The effort a request asks for: the client's `reasoning_effort`, else the gateway's
    /// `reasoning_effort_hint` (what an Anthropic client's adaptive thinking asked for).
    pub fn effort(&self) -> Option<&str> {
        self.reasoning_effort.as_deref().or(self.reasoning_effort_hint.as_deref())
    }

    /// The thinking budget a request asks for: an explicit `thinking.budget_tokens` (Anthropic
    /// style) or the effort (low/medium/high); none when thinking is off.
    pub fn thinking_budget(&self) -> Option<u64> {
        if self.thinking_off() {
            return None;
        }
        if let Some(budget) = self.thinking.as_ref().and_then(|t| t.budget_tokens) {
            return Some(budget);
        }
        match self.effort()? {
            "minimal" => Some(1024),
            "low" => Some(2048),
            "medium" => Some(8192),
            "high" => Some(24576),
            "xhigh" | "max" => Some(32768),
            _ => None,
        }
    }

    /// `response_format: {type: json_object}`.
    pub fn wants_json_object(&self) -> bool {
        self.response_format.as_ref().and_then(|f| f.kind.as_deref()) == Some("json_object")
    }
}

/// A JSON object read as `T`; a body of another JSON kind is refused (a struct would otherwise
/// read a list positionally).
fn object<T: for<'de> Deserialize<'de>>(json: &str) -> Result<T, String> {
    if !json.trim_start().starts_with('{') {
        return Err(match serde_json::from_str::<Value>(json) {
            Ok(_) => "request body must be a JSON object".to_string(),
            Err(e) => format!("request body is not JSON: {e}"),
        });
    }
    serde_json::from_str(json).map_err(|e| format!("request body is not JSON: {e}"))
}

#[derive(Debug, Default, Deserialize)]
pub struct StreamOptions {
    #[serde(default, deserialize_with = "flag")]
    pub include_usage: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct Thinking {
    #[serde(default, deserialize_with = "count")]
    budget_tokens: Option<u64>,
}

/// One turn. Its fields read leniently, so a turn always reads (a turn without a role is the user's).
#[derive(Debug, Default, Deserialize)]
pub struct ChatMessage {
    #[serde(default, deserialize_with = "role")]
    pub role: Role,
    #[serde(default)]
    pub content: Content,
    /// A `function` turn's function name.
    #[serde(default, deserialize_with = "text")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "text")]
    pub tool_call_id: Option<String>,
    #[serde(default, deserialize_with = "each")]
    pub tool_calls: Vec<crate::ToolCall>,
    #[serde(default, deserialize_with = "text")]
    pub reasoning_content: Option<String>,
    /// The upstream's signature of the reasoning (Anthropic), sent back with it.
    #[serde(default, deserialize_with = "text")]
    pub reasoning_signature: Option<String>,
}

/// Who speaks a turn; an unknown role is kept by name, a missing one is the user's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Role {
    System,
    Developer,
    #[default]
    User,
    Assistant,
    Tool,
    /// The legacy form of a tool result.
    Function,
    Other(String),
}

impl Role {
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Function => "function",
            Role::Other(name) => name,
        }
    }

    /// `system` or `developer`: instructions rather than conversation.
    pub fn instructs(&self) -> bool {
        matches!(self, Role::System | Role::Developer)
    }
}

impl From<String> for Role {
    fn from(name: String) -> Role {
        match name.as_str() {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            _ => Role::Other(name),
        }
    }
}

fn role<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Role, D::Error> {
    Ok(text(deserializer)?.map(Role::from).unwrap_or_default())
}

/// A turn's `content`.
#[derive(Debug, Default)]
pub enum Content {
    /// Missing or `null`.
    #[default]
    Absent,
    Text(String),
    Parts(Vec<Part>),
    /// Any other JSON (a number, an object): no text a translation can use.
    Other(Value),
}

impl Content {
    /// Its text: the string, or the text of its parts joined ("" for anything else).
    pub fn text(&self) -> String {
        match self {
            Content::Text(text) => text.clone(),
            Content::Parts(parts) => parts.iter().filter_map(Part::text).collect(),
            Content::Absent | Content::Other(_) => String::new(),
        }
    }

    /// Its parts; none for a string or no content.
    pub fn parts(&self) -> &[Part] {
        match self {
            Content::Parts(parts) => parts,
            _ => &[],
        }
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Content, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::Null => Content::Absent,
            Value::String(text) => Content::Text(text),
            Value::Array(parts) => Content::Parts(
                parts.into_iter().map(serde_json::from_value).collect::<Result<_, _>>().map_err(D::Error::custom)?,
            ),
            other => Content::Other(other),
        })
    }
}

/// One part of a turn's content.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// `{type: text, text}` (a text that is not a string reads as "").
    Text(String),
    /// `{type: image_url, image_url: {url, detail} | url}`.
    ImageUrl { url: String, detail: Option<String> },
    /// Any other part, as sent: its `type` if it has one (an Anthropic `image` or `document`).
    Other { kind: Option<String>, raw: Value },
}

impl Part {
    /// The part's text: a text part's, or any other part's `text` string.
    pub fn text(&self) -> Option<&str> {
        match self {
            Part::Text(text) => Some(text),
            Part::Other { raw, .. } => raw.get("text").and_then(Value::as_str),
            Part::ImageUrl { .. } => None,
        }
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Part, D::Error> {
        let raw = Value::deserialize(deserializer)?;
        Ok(match raw.get("type").and_then(Value::as_str) {
            Some("text") => Part::Text(raw.get("text").and_then(Value::as_str).unwrap_or_default().to_string()),
            Some("image_url") => {
                let image = raw.get("image_url");
                let url = image.and_then(|i| i.as_str().or_else(|| i.get("url")?.as_str()));
                let detail = image.and_then(|i| i.get("detail")?.as_str());
                Part::ImageUrl { url: url.unwrap_or_default().to_string(), detail: detail.map(str::to_string) }
            }
            kind => Part::Other { kind: kind.map(str::to_string), raw },
        })
    }
}

/// A tool the client offers: `{type, function: {name, description, parameters, strict}}`.
#[derive(Debug, Default, Deserialize, Serialize)]
pub struct ToolDef {
    #[serde(rename = "type", default, deserialize_with = "text", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "lenient", skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionDef>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
pub struct FunctionDef {
    #[serde(default, deserialize_with = "text", skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Value>,
    /// The JSON schema of the arguments, passed on as given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<Value>,
}

/// `tool_choice`.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    Auto,
    None,
    Required,
    /// `{type: function, function: {name}}`; a name that is not a string reads as absent.
    Function(Option<String>),
    /// Any other value, as sent.
    Unknown(Value),
}

fn tool_choice<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<ToolChoice>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Null => None,
        Value::String(mode) if mode == "auto" => Some(ToolChoice::Auto),
        Value::String(mode) if mode == "none" => Some(ToolChoice::None),
        Value::String(mode) if mode == "required" => Some(ToolChoice::Required),
        Value::Object(choice) => Some(ToolChoice::Function(
            choice.get("function").and_then(|f| f.get("name")).and_then(Value::as_str).map(str::to_string),
        )),
        other => Some(ToolChoice::Unknown(other)),
    })
}

/// `response_format`.
#[derive(Debug, Default, Deserialize)]
pub struct ResponseFormat {
    #[serde(rename = "type", default, deserialize_with = "text")]
    pub kind: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub json_schema: Option<JsonSchemaFormat>,
}

/// `response_format.json_schema`, its values passed on as given.
#[derive(Debug, Default, Deserialize)]
pub struct JsonSchemaFormat {
    pub name: Option<Value>,
    pub schema: Option<Value>,
    pub strict: Option<Value>,
}

/// An embeddings request.
#[derive(Debug, Default, Deserialize)]
pub struct EmbeddingsRequest {
    /// The texts of `input` (a string or a list of strings; other entries skipped).
    #[serde(default, deserialize_with = "strings")]
    input: Option<Vec<String>>,
    /// Passed on as given.
    pub dimensions: Option<Value>,
}

impl EmbeddingsRequest {
    pub fn parse(json: &str) -> Result<EmbeddingsRequest, String> {
        object(json)
    }

    pub fn inputs(&self) -> &[String] {
        self.input.as_deref().unwrap_or_default()
    }
}

/// An images (generation) request.
#[derive(Debug, Default, Deserialize)]
pub struct ImagesRequest {
    #[serde(default, deserialize_with = "text")]
    pub prompt: Option<String>,
    #[serde(default, deserialize_with = "count")]
    pub n: Option<u64>,
    /// `WxH`.
    #[serde(default, deserialize_with = "text")]
    pub size: Option<String>,
    /// `url` or `b64_json`.
    #[serde(default, deserialize_with = "text")]
    pub response_format: Option<String>,
}

impl ImagesRequest {
    pub fn parse(json: &str) -> Result<ImagesRequest, String> {
        object(json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_request_reads_its_turns_parts_tools_and_knobs() {
        let request = ChatRequest::parse(
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_completion_tokens":50,
            "stop":"END","temperature":0.2,"reasoning_effort_hint":"high","tool_choice":{"type":"function","function":{"name":"w"}},
            "tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object"}}},{"type":"web_search"}],
            "messages":[{"role":"developer","content":"Be terse."},
              {"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA","detail":"low"}},{"type":"document","text":"b"}]},
              {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{}"}}]},
              {"role":"tool","tool_call_id":"c1","content":"sunny"},"not a turn",{"role":"critic","content":7}]}"#,
        )
        .unwrap();
        assert!(request.streams() && request.wants_stream_usage());
        assert_eq!((request.max_tokens(), request.stop.as_deref()), (Some(50), Some(&["END".to_string()][..])));
        assert_eq!((request.effort(), request.thinking_budget()), (Some("high"), Some(24576)));
        assert_eq!(request.tool_choice, Some(ToolChoice::Function(Some("w".into()))));
        let tools = request.tools.as_deref().unwrap();
        assert_eq!((tools.len(), tools[1].function.is_none()), (2, true));
        let turns = request.messages();
        assert_eq!(turns.len(), 5, "the string turn is skipped");
        assert!(turns[0].role.instructs());
        assert_eq!(turns[1].content.text(), "ab");
        assert_eq!(
            turns[1].content.parts()[1],
            Part::ImageUrl { url: "data:image/png;base64,AA".into(), detail: Some("low".into()) }
        );
        assert!(matches!(&turns[1].content.parts()[2], Part::Other { kind: Some(k), .. } if k == "document"));
        assert_eq!(turns[2].tool_calls[0].function.name.as_deref(), Some("w"));
        assert_eq!(turns[3].tool_call_id.as_deref(), Some("c1"));
        assert_eq!((turns[4].role.as_str(), matches!(turns[4].content, Content::Other(_))), ("critic", true));
    }

    #[test]
    fn odd_values_read_as_absent_and_thinking_off_wins() {
        let request = ChatRequest::parse(
            r#"{"messages":{"not":"a list"},"stream":"yes","max_tokens":-3,"max_completion_tokens":9,"stop":7,
            "tools":"none","tool_choice":"auto","thinking":{"budget_tokens":4000},"disable_thinking":true,"temperature":null}"#,
        )
        .unwrap();
        assert!(request.messages.is_none() && request.messages().is_empty());
        assert!(
            !request.streams() && request.stop.is_none() && request.tools.is_none() && request.temperature.is_none()
        );
        assert_eq!(request.max_tokens(), Some(9), "an unreadable max_tokens falls back to the newer name");
        assert_eq!((request.thinking_budget(), request.tool_choice), (None, Some(ToolChoice::Auto)));
        let budget = ChatRequest::parse(r#"{"thinking":{"budget_tokens":4000},"reasoning_effort":"low"}"#).unwrap();
        assert_eq!(budget.thinking_budget(), Some(4000));
    }

    #[test]
    fn only_a_json_object_is_a_request() {
        assert_eq!(ChatRequest::parse("[1,2]").unwrap_err(), "request body must be a JSON object");
        assert!(ChatRequest::parse("{oops").unwrap_err().starts_with("request body is not JSON"));
        let embeddings = EmbeddingsRequest::parse(r#"{"input":["a",3,"b"],"dimensions":8}"#).unwrap();
        assert_eq!(
            (embeddings.inputs(), embeddings.dimensions.clone()),
            (&["a".to_string(), "b".into()][..], Some(8.into()))
        );
        let images = ImagesRequest::parse(r#"{"prompt":"a cat","n":"2","size":"1024x1024"}"#).unwrap();
        assert_eq!(
            (images.prompt.as_deref(), images.n, images.size.as_deref()),
            (Some("a cat"), None, Some("1024x1024"))
        );
    }
}
