-- Google Gemini generateContent (legacy built-in, Lua 5.1): base_url e.g.
-- https://generativelanguage.googleapis.com/v1beta.
local stream_state = {}

local function text_of(content)
  if type(content) == "string" then return content end
  local parts = {}
  for _, p in ipairs(content or {}) do
    if p.type == "text" then parts[#parts + 1] = p.text end
  end
  return table.concat(parts)
end

local function parts_of(content)
  if type(content) == "string" then return { { text = content } } end
  local parts = {}
  for _, p in ipairs(content or {}) do
    if p.type == "text" then
      parts[#parts + 1] = { text = p.text }
    elseif p.type == "image_url" then
      local url = type(p.image_url) == "table" and p.image_url.url or p.image_url
      local media, data = string.match(url, "^data:([^;]+);base64,(.*)$")
      if media then parts[#parts + 1] = { inlineData = { mimeType = media, data = data } } end
    end
  end
  return parts
end

local finish_reasons = { STOP = "stop", MAX_TOKENS = "length", SAFETY = "content_filter", RECITATION = "content_filter" }

-- The parts of one GenerateContentResponse, in the legacy shapes.
local function read(resp, streaming)
  local cand = (resp.candidates or {})[1] or {}
  local out = { content = "", reasoning_content = "" }
  local calls = {}
  for _, p in ipairs((cand.content or {}).parts or {}) do
    if p.functionCall then
      local index = stream_state.calls or 0
      stream_state.calls = index + 1
      local call = { id = "call_" .. index, type = "function", name = p.functionCall.name }
      local args = json.encode(p.functionCall.args or {})
      if streaming then call.raw_arguments, call.stream_index = args, index else call.arguments = args end
      calls[#calls + 1] = call
    elseif p.thought then
      out.reasoning_content = out.reasoning_content .. (p.text or "")
    elseif p.text then
      out.content = out.content .. p.text
    end
  end
  if #calls > 0 then out.tool_calls = calls end
  if cand.finishReason then
    local called = (stream_state.calls or 0) > 0
    out.finish_reason = called and "tool_calls" or (finish_reasons[cand.finishReason] or "stop")
  end
  local u = resp.usageMetadata
  if u then
    local usage = { prompt = u.promptTokenCount, completion = (u.candidatesTokenCount or 0) + (u.thoughtsTokenCount or 0) }
    if streaming then out.usage = usage else out.token_usage = usage end
  end
  return out
end

return {
  name = "gemini",
  version = "1.0",
  endpoint = "/models/{model}:generateContent",
  stream_endpoint = "/models/{model}:streamGenerateContent?alt=sse",

  build_headers = function(meta)
    return { ["x-goog-api-key"] = meta.api_key, ["content-type"] = "application/json" }
  end,

  transform_request = function(raw_json)
    local req = json.decode(raw_json)
    stream_state = { calls = 0 }
    local body = { contents = {} }
    local system = {}
    local names = {}
    for _, m in ipairs(req.messages or {}) do
      if m.role == "system" or m.role == "developer" then
        system[#system + 1] = { text = text_of(m.content) }
      elseif m.role == "assistant" then
        local parts = {}
        local text = text_of(m.content)
        if text ~= "" then parts[#parts + 1] = { text = text } end
        for _, tc in ipairs(m.tool_calls or {}) do
          local fn = tc["function"] or {}
          names[tc.id or ""] = fn.name
          parts[#parts + 1] = { functionCall = { name = fn.name, args = json.decode(fn.arguments or "{}") or {} } }
        end
        body.contents[#body.contents + 1] = { role = "model", parts = parts }
      elseif m.role == "tool" then
        local result = json.decode(text_of(m.content)) or { result = text_of(m.content) }
        body.contents[#body.contents + 1] = { role = "user", parts = { { functionResponse = { name = names[m.tool_call_id or ""] or "tool", response = result } } } }
      else
        body.contents[#body.contents + 1] = { role = "user", parts = parts_of(m.content) }
      end
    end
    if #system > 0 then body.systemInstruction = { parts = system } end
    local config = { temperature = req.temperature, topP = req.top_p, maxOutputTokens = req.max_tokens or req.max_completion_tokens }
    if type(req.stop) == "string" then config.stopSequences = { req.stop } elseif req.stop then config.stopSequences = req.stop end
    body.generationConfig = config
    if req.tools then
      local decls = {}
      for i, t in ipairs(req.tools) do
        local fn = t["function"] or {}
        decls[i] = { name = fn.name, description = fn.description, parameters = fn.parameters }
      end
      body.tools = { { functionDeclarations = decls } }
    end
    return json.encode(body)
  end,

  transform_response = function(raw_json)
    local resp = json.decode(raw_json)
    if resp == nil then error("upstream response is not JSON") end
    local out = read(resp, false)
    if out.reasoning_content == "" then out.reasoning_content = nil end
    return json.encode(out)
  end,

  transform_stream_chunk = function(raw_line)
    local resp = json.decode(raw_line)
    if resp == nil then return "" end
    local out = read(resp, true)
    if out.finish_reason then out.done = true end
    return json.encode(out)
  end,
}
