-- DeepSeek (legacy built-in, Lua 5.1): OpenAI-compatible; answers (reasoning_content included)
-- pass through as they are.
return {
  name = "deepseek",
  version = "1.0",
  endpoint = "/chat/completions",

  transform_request = function(raw_json)
    local req = json.decode(raw_json)
    req.disable_thinking = nil
    if req.stream and req.stream_options == nil then
      req.stream_options = { include_usage = true }
    end
    return json.encode(req)
  end,
}
