-- Mistral (legacy built-in, Lua 5.1): OpenAI-compatible at https://api.mistral.ai/v1.
return {
  name = "mistral",
  version = "1.0",
  endpoint = "/chat/completions",

  transform_request = function(raw_json)
    local req = json.decode(raw_json)
    req.disable_thinking = nil
    -- Mistral names the seed differently and has no stream_options.
    if req.seed ~= nil then
      req.random_seed = req.seed
      req.seed = nil
    end
    req.stream_options = nil
    return json.encode(req)
  end,
}
