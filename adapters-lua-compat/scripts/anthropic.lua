-- Anthropic Messages API (legacy built-in, Lua 5.1): base_url e.g. https://api.anthropic.com/v1.
local stream_state = {}

local function text_of(content)
  if type(content) == "string" then return content end
  local parts = {}
  for _, p in ipairs(content or {}) do
    if p.type == "text" then parts[#parts + 1] = p.text end
  end
  return table.concat(parts)
end

local function user_blocks(content)
  if type(content) == "string" then return { { type = "text", text = content } } end
  local blocks = {}
  for _, p in ipairs(content or {}) do
    if p.type == "text" then
      blocks[#blocks + 1] = { type = "text", text = p.text }
    elseif p.type == "image_url" then
      local url = type(p.image_url) == "table" and p.image_url.url or p.image_url
      local media, data = string.match(url, "^data:([^;]+);base64,(.*)$")
      if media then
        blocks[#blocks + 1] = { type = "image", source = { type = "base64", media_type = media, data = data } }
      else
        blocks[#blocks + 1] = { type = "image", source = { type = "url", url = url } }
      end
    end
  end
  return blocks
end

local function assistant_blocks(m)
  local blocks = {}
  local text = text_of(m.content)
  if text ~= "" then blocks[#blocks + 1] = { type = "text", text = text } end
  for _, tc in ipairs(m.tool_calls or {}) do
    local fn = tc["function"] or {}
    blocks[#blocks + 1] = { type = "tool_use", id = tc.id, name = fn.name, input = json.decode(fn.arguments or "{}") or {} }
  end
  return blocks
end

-- Prompt tokens as OpenAI counts them: cache reads and writes included.
local function prompt_tokens(u)
  if u == nil or u.input_tokens == nil then return nil end
  return u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
end

local stop_reasons = { end_turn = "stop", stop_sequence = "stop", max_tokens = "length", tool_use = "tool_calls", refusal = "content_filter" }

return {
  name = "anthropic",
  version = "1.0",
  endpoint = "/messages",
  headers = { ["anthropic-version"] = "2023-06-01" },

  build_headers = function(meta)
    return { ["x-api-key"] = meta.api_key, ["anthropic-version"] = "2023-06-01", ["content-type"] = "application/json" }
  end,

  transform_request = function(raw_json)
    local req = json.decode(raw_json)
    stream_state = { tools = {}, next_tool = 0, input_tokens = nil }
    local system, turns = {}, {}
    for _, m in ipairs(req.messages or {}) do
      local role, blocks
      if m.role == "system" or m.role == "developer" then
        system[#system + 1] = text_of(m.content)
      else
        if m.role == "assistant" then
          role, blocks = "assistant", assistant_blocks(m)
        elseif m.role == "tool" then
          role, blocks = "user", { { type = "tool_result", tool_use_id = m.tool_call_id, content = text_of(m.content) } }
        else
          role, blocks = "user", user_blocks(m.content)
        end
        local last = turns[#turns]
        if last and last.role == role then
          for _, b in ipairs(blocks) do last.content[#last.content + 1] = b end
        elseif #blocks > 0 then
          turns[#turns + 1] = { role = role, content = blocks }
        end
      end
    end
    local body = { model = req.model, messages = turns, max_tokens = req.max_tokens or req.max_completion_tokens or 4096 }
    if #system > 0 then body.system = table.concat(system, "\n\n") end
    body.temperature = req.temperature
    body.top_p = req.top_p
    if req.stream then body.stream = true end
    if type(req.stop) == "string" then body.stop_sequences = { req.stop } elseif req.stop then body.stop_sequences = req.stop end
    if req.tools then
      body.tools = {}
      for i, t in ipairs(req.tools) do
        local fn = t["function"] or {}
        body.tools[i] = { name = fn.name, description = fn.description, input_schema = fn.parameters or { type = "object" } }
      end
    end
    return json.encode(body)
  end,

  transform_response = function(raw_json)
    local resp = json.decode(raw_json)
    if resp == nil then error("upstream response is not JSON") end
    local out = { content = "", tool_calls = {}, finish_reason = stop_reasons[resp.stop_reason] or "stop" }
    local thinking = ""
    for _, block in ipairs(resp.content or {}) do
      if block.type == "text" then
        out.content = out.content .. block.text
      elseif block.type == "thinking" then
        thinking = thinking .. (block.thinking or "")
      elseif block.type == "tool_use" then
        out.tool_calls[#out.tool_calls + 1] = { id = block.id, type = "function", name = block.name, arguments = json.encode(block.input or {}) }
      end
    end
    if thinking ~= "" then out.reasoning_content = thinking end
    if #out.tool_calls == 0 then out.tool_calls = nil end
    local u = resp.usage or {}
    out.token_usage = { prompt = prompt_tokens(u), completion = u.output_tokens }
    return json.encode(out)
  end,

  transform_stream_chunk = function(raw_line)
    local e = json.decode(raw_line)
    if e == nil then return "" end
    if e.type == "message_start" then
      stream_state.input_tokens = prompt_tokens(e.message and e.message.usage)
      return ""
    elseif e.type == "content_block_start" and e.content_block and e.content_block.type == "tool_use" then
      local ordinal = stream_state.next_tool
      stream_state.next_tool = ordinal + 1
      stream_state.tools[e.index] = ordinal
      return json.encode({ tool_calls = { { id = e.content_block.id, type = "function", name = e.content_block.name, raw_arguments = "", stream_index = ordinal } } })
    elseif e.type == "content_block_delta" then
      local d = e.delta or {}
      if d.type == "text_delta" then return json.encode({ content = d.text }) end
      if d.type == "thinking_delta" then return json.encode({ reasoning_content = d.thinking }) end
      if d.type == "input_json_delta" then
        return json.encode({ tool_calls = { { raw_arguments = d.partial_json, stream_index = stream_state.tools[e.index] } } })
      end
      return ""
    elseif e.type == "message_delta" then
      local u = e.usage or {}
      return json.encode({
        finish_reason = stop_reasons[e.delta and e.delta.stop_reason] or "stop",
        usage = { prompt = prompt_tokens(u) or stream_state.input_tokens, completion = u.output_tokens },
      })
    elseif e.type == "message_stop" then
      return json.encode({ done = true })
    elseif e.type == "error" then
      return json.encode({ error = (e.error and e.error.message) or "upstream stream error" })
    end
    return ""
  end,
}
