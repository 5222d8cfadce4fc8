-- OpenAI Chat Completions (legacy built-in, Lua 5.1). The unified request is OpenAI's own
-- shape; the response and stream are read into the legacy unified shapes.
local function usage_of(u)
  if u == nil then return nil end
  return { prompt = u.prompt_tokens, completion = u.completion_tokens, total = u.total_tokens }
end

return {
  name = "openai",
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

  transform_response = function(raw_json)
    local resp = json.decode(raw_json)
    if resp == nil then error("upstream response is not JSON") end
    local choice = (resp.choices or {})[1] or {}
    local msg = choice.message or {}
    local out = {
      content = msg.content or "",
      reasoning_content = msg.reasoning_content,
      finish_reason = choice.finish_reason,
      token_usage = usage_of(resp.usage),
    }
    if msg.tool_calls then
      out.tool_calls = {}
      for i, tc in ipairs(msg.tool_calls) do
        local fn = tc["function"] or {}
        out.tool_calls[i] = { id = tc.id, type = "function", name = fn.name, arguments = fn.arguments }
      end
    end
    return json.encode(out)
  end,

  transform_stream_chunk = function(raw_line)
    if raw_line == "[DONE]" then return json.encode({ done = true }) end
    local c = json.decode(raw_line)
    if c == nil then return "" end
    local out = { usage = usage_of(c.usage) }
    local choice = (c.choices or {})[1]
    if choice then
      local d = choice.delta or {}
      out.content = d.content
      out.reasoning_content = d.reasoning_content
      out.finish_reason = choice.finish_reason
      if d.tool_calls then
        out.tool_calls = {}
        for i, tc in ipairs(d.tool_calls) do
          local fn = tc["function"] or {}
          out.tool_calls[i] = {
            id = tc.id, type = tc.type, name = fn.name,
            raw_arguments = fn.arguments or "", stream_index = tc.index,
          }
        end
      end
    end
    return json.encode(out)
  end,
}
