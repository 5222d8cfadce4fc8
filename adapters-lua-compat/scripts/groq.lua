-- Groq (legacy built-in, Lua 5.1): OpenAI-compatible at https://api.groq.com/openai/v1.
return {
  name = "groq",
  version = "1.0",
  endpoint = "/chat/completions",

  transform_request = function(raw_json)
    local req = json.decode(raw_json)
    req.disable_thinking = nil
    -- Groq rejects these OpenAI fields.
    req.logprobs = nil
    req.top_logprobs = nil
    req.logit_bias = nil
    return json.encode(req)
  end,
}
