-- Ollama native chat API (legacy built-in, Lua 5.1): base_url e.g. http://localhost:11434;
-- streams as NDJSON.
local stream_state = {}

local function text_of(content)
  if type(content) == "string" then return content end
  local parts = {}
  for _, p in ipairs(content or {}) do
    if p.type == "text" then parts[#parts + 1] = p.text end
  end
  return table.concat(parts)
end

local function calls_of(message, streaming)
  if message.tool_calls == nil then return nil end
  local calls = {}
  for _, tc in ipairs(message.tool_calls) do
    local index = stream_state.calls or 0
    stream_state.calls = index + 1
    local fn = tc["function"] or {}
    local args = json.encode(fn.arguments or {})
    local call = { id = "call_" .. index, type = "function", name = fn.name }
    if streaming then call.raw_arguments, call.stream_index = args, index else call.arguments = args end
    calls[#calls + 1] = call
  end
  return calls
end

local function finish_of(resp)
  if (stream_state.calls or 0) > 0 then return "tool_calls" end
  if resp.done_reason == "length" then return "length" end
  return "stop"
end

return {
  name = "ollama",
  version = "1.0",
  endpoint = "/api/chat",
  stream_format = "ndjson",

  transform_request = function(raw_json)
    local req = json.decode(raw_json)
    stream_state = { calls = 0 }
    local messages = {}
    for i, m in ipairs(req.messages or {}) do
      local out = { role = m.role, content = text_of(m.content) }
      if type(m.content) == "table" then
        for _, p in ipairs(m.content) do
          if p.type == "image_url" then
            local url = type(p.image_url) == "table" and p.image_url.url or p.image_url
            local data = string.match(url, "^data:[^;]+;base64,(.*)$")
            if data then
              out.images = out.images or {}
              out.images[#out.images + 1] = data
            end
          end
        end
      end
      if m.tool_calls then
        out.tool_calls = {}
        for j, tc in ipairs(m.tool_calls) do
          local fn = tc["function"] or {}
          out.tool_calls[j] = { ["function"] = { name = fn.name, arguments = json.decode(fn.arguments or "{}") or {} } }
        end
      end
      messages[i] = out
    end
    local body = { model = req.model, messages = messages, stream = req.stream == true, tools = req.tools }
    body.options = { temperature = req.temperature, top_p = req.top_p, num_predict = req.max_tokens or req.max_completion_tokens }
    return json.encode(body)
  end,

  transform_response = function(raw_json)
    local resp = json.decode(raw_json)
    if resp == nil then error("upstream response is not JSON") end
    local m = resp.message or {}
    local out = { content = m.content or "", tool_calls = calls_of(m, false), finish_reason = finish_of(resp) }
    if m.thinking and m.thinking ~= "" then out.reasoning_content = m.thinking end
    out.token_usage = { prompt = resp.prompt_eval_count, completion = resp.eval_count }
    return json.encode(out)
  end,

  transform_stream_chunk = function(raw_line)
    local resp = json.decode(raw_line)
    if resp == nil then return "" end
    if resp.error then return json.encode({ error = resp.error }) end
    local m = resp.message or {}
    local out = { content = m.content, reasoning_content = m.thinking, tool_calls = calls_of(m, true) }
    if resp.done then
      out.done = true
      out.finish_reason = finish_of(resp)
      out.usage = { prompt = resp.prompt_eval_count, completion = resp.eval_count }
    end
    return json.encode(out)
  end,
}
