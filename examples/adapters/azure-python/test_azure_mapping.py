"""Tests of azure_mapping in plain CPython (no component, no gateway):

    python3 -m unittest test_azure_mapping    # from this folder

Besides the unit tests, `CasesReplay` plays every `cases/*.json` through the mapping with a
small reimplementation of `switchyard adapter test` (subset matching, SSE splitting), so the
cases are checked even where the gateway binary is not at hand.
"""

import json
import os
import unittest

import azure_mapping as m

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "cases")


def ctx(**kw):
    kw.setdefault("base_url", "https://contoso.openai.azure.com")
    kw.setdefault("api_key", "k")
    kw.setdefault("upstream_model", "gpt-4o")
    return m.Context(**kw)


def request(c, body):
    method, url, headers, raw = m.build_request(c, json.dumps(body))
    return method, url, dict(headers), json.loads(raw)


class RequestTests(unittest.TestCase):
    def test_chat_goes_to_the_deployment_with_the_default_api_version(self):
        method, url, headers, body = request(ctx(), {"model": "alias", "messages": []})
        self.assertEqual(method, "POST")
        self.assertEqual(
            url, "https://contoso.openai.azure.com/openai/deployments/gpt-4o/chat/completions"
            "?api-version=2024-10-21")
        self.assertEqual(headers["api-key"], "k")
        self.assertNotIn("authorization", headers)
        self.assertEqual(body, {"messages": []})

    def test_settings_pick_deployment_version_auth_and_headers(self):
        c = ctx(settings=[("deployment", "eu one"), ("api_version", "2025-01-01-preview"),
                          ("auth", "Bearer"), ("header.x-ms-client-request-id", "r1"),
                          ("header.", "ignored")])
        _, url, headers, _ = request(c, {"messages": []})
        self.assertEqual(
            url, "https://contoso.openai.azure.com/openai/deployments/eu%20one/chat/completions"
            "?api-version=2025-01-01-preview")
        self.assertEqual(headers["authorization"], "Bearer k")
        self.assertNotIn("api-key", headers)
        self.assertEqual(headers["x-ms-client-request-id"], "r1")
        self.assertNotIn("", headers)

    def test_a_base_url_with_the_openai_suffix_or_a_slash_is_tolerated(self):
        for base in ("https://r.openai.azure.com/", "https://r.openai.azure.com/openai",
                     "https://r.openai.azure.com/openai/"):
            _, url, _, _ = request(ctx(base_url=base), {})
            self.assertTrue(url.startswith("https://r.openai.azure.com/openai/deployments/"), url)

    def test_no_key_no_auth_header(self):
        _, _, headers, _ = request(ctx(api_key=""), {})
        self.assertNotIn("api-key", headers)
        self.assertNotIn("authorization", headers)

    def test_gateway_fields_and_model_are_dropped(self):
        _, _, _, body = request(ctx(), {"model": "x", "disable_thinking": True, "top_k": 3,
                                        "thinking": {"type": "enabled"}, "temperature": 0.2})
        self.assertEqual(body, {"temperature": 0.2})

    def test_streams_ask_for_usage_and_keep_other_options(self):
        _, _, headers, body = request(ctx(), {"stream": True, "stream_options": {"x": 1}})
        self.assertEqual(body["stream_options"], {"x": 1, "include_usage": True})
        self.assertEqual(headers["accept"], "text/event-stream")
        _, _, _, body = request(ctx(), {"stream": True, "stream_options": {"include_usage": False}})
        self.assertEqual(body["stream_options"], {"include_usage": True})

    def test_stream_usage_false_and_non_streams_send_no_stream_options(self):
        c = ctx(settings=[("stream_usage", "false")])
        _, _, _, body = request(c, {"stream": True, "stream_options": {"include_usage": True}})
        self.assertEqual(body, {"stream": True})
        _, _, headers, body = request(ctx(), {"stream": False, "stream_options": {"include_usage": True}})
        self.assertEqual(body, {"stream": False})
        self.assertNotIn("accept", headers)

    def test_embeddings_and_images_have_their_own_paths_and_never_stream(self):
        _, url, headers, body = request(ctx(operation="embedding", upstream_model="ada"),
                                        {"model": "e", "input": "hi", "stream": True})
        self.assertTrue(url.endswith("/openai/deployments/ada/embeddings?api-version=2024-10-21"))
        self.assertEqual(body, {"input": "hi"})
        self.assertNotIn("accept", headers)
        _, url, _, _ = request(ctx(operation="image", upstream_model="dall-e-3"), {"prompt": "p"})
        self.assertTrue(url.endswith("/openai/deployments/dall-e-3/images/generations?api-version=2024-10-21"))

    def test_refusals(self):
        with self.assertRaises(m.Failure) as e:
            m.build_request(ctx(), "[1]")
        self.assertEqual(e.exception.kind, "bad-request")
        with self.assertRaises(m.Failure) as e:
            m.build_request(ctx(), "{nope")
        self.assertEqual(e.exception.kind, "bad-request")
        with self.assertRaises(m.Failure) as e:
            m.build_request(ctx(upstream_model=""), "{}")
        self.assertEqual(e.exception.kind, "server", "the operator's missing setting, not the client's")
        with self.assertRaises(m.Failure) as e:
            m.build_request(ctx(operation="speech"), "{}")
        self.assertEqual(e.exception.kind, "unsupported")


def error(status, body, headers=()):
    raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
    if isinstance(raw, str):
        raw = raw.encode()
    return m.upstream_error(status, list(headers), raw)


class ErrorTests(unittest.TestCase):
    def test_status_classes(self):
        cases = {400: "bad-request", 401: "auth", 402: "quota", 403: "permission",
                 404: "not-found", 408: "server", 409: "bad-request", 413: "bad-request",
                 422: "bad-request", 429: "rate-limit", 500: "server", 502: "server",
                 503: "overloaded", 504: "server", 529: "overloaded", 307: "server",
                 418: "bad-request"}
        for status, kind in cases.items():
            self.assertEqual(error(status, {"error": {"message": "x"}}).kind, kind, status)

    def test_content_filter_wins_over_the_status(self):
        e = error(400, {"error": {"code": "content_filter", "message": "filtered"}})
        self.assertEqual((e.kind, e.code, e.status), ("content-policy", "content_filter", 400))
        e = error(400, {"error": {"code": "BadRequest", "innererror": {"code": "ResponsibleAIPolicyViolation"}}})
        self.assertEqual(e.kind, "content-policy")
        e = error(400, {"error": {"message": "...triggering Azure OpenAI's content management policy..."}})
        self.assertEqual(e.kind, "content-policy")

    def test_a_content_filter_without_message_gets_one(self):
        e = error(400, {"error": {"code": "content_filter", "innererror": {
            "code": "ResponsibleAIPolicyViolation", "content_filter_result": {
                "custom_blocklists": [{"filtered": True, "id": "b"}],
                "hate": {"filtered": False}, "violence": {"filtered": True}}}}})
        self.assertIn("ResponsibleAIPolicyViolation", e.message)
        self.assertIn("filtered: custom_blocklists, violence", e.message)

    def test_retry_after_ms_first_then_retry_after_then_the_message(self):
        body = {"error": {"code": "429", "message": "Please retry after 7 seconds."}}
        self.assertEqual(error(429, body, [("Retry-After-Ms", "1500.5"), ("Retry-After", "2")]).retry_after_ms, 1500)
        self.assertEqual(error(429, body, [("x-ms-retry-after-ms", "900")]).retry_after_ms, 900)
        self.assertEqual(error(429, body, [("retry-after", "2")]).retry_after_ms, 2000)
        self.assertEqual(error(429, body, [("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")]).retry_after_ms, 7000)
        self.assertEqual(error(429, body, [("retry-after-ms", "-1")]).retry_after_ms, 7000)
        self.assertIsNone(error(429, {"error": {"code": "429", "message": "slow down"}}).retry_after_ms)

    def test_quota_429(self):
        self.assertEqual(error(429, {"error": {"code": "insufficient_quota", "message": "x"}}).kind, "quota")
        self.assertEqual(error(429, {"error": {"code": "429", "message": "You exceeded your current quota"}}).kind, "quota")
        # Azure's own rate-limit text says "of your current ... pricing tier": not quota.
        self.assertEqual(error(429, {"error": {"code": "429", "message":
                         "have exceeded token rate limit of your current OpenAI S0 pricing tier"}}).kind, "rate-limit")

    def test_codes_and_messages_from_every_shape(self):
        e = error(500, {"error": {"message": "boom", "type": "server_error", "code": None}})
        self.assertEqual((e.message, e.code), ("boom", "server_error"))
        e = error(401, {"statusCode": 401, "message": "Access denied due to invalid subscription key."})
        self.assertEqual((e.kind, e.message, e.code), ("auth", "Access denied due to invalid subscription key.", None))
        e = error(404, {"error": "model not found"})
        self.assertEqual((e.message, e.code), ("model not found", None))
        e = error(400, {"error": {"code": 1234, "message": "numeric code"}})
        self.assertEqual(e.code, "1234")
        e = error(502, b"<html>Bad Gateway</html>")
        self.assertEqual((e.kind, e.message), ("server", "<html>Bad Gateway</html>"))
        self.assertEqual(error(500, b"").message, "upstream returned HTTP 500")
        self.assertEqual(len(error(500, b"x" * 2000).message), 513)
        self.assertEqual(len(error(400, {"error": {"code": "c" * 100}}).code), 65)


class ResponseTests(unittest.TestCase):
    def response(self, body, c=None, status=200):
        return m.transform_response(c or ctx(), status, [], json.dumps(body).encode())

    def test_filter_results_are_stripped_and_missing_fields_filled(self):
        out = json.loads(self.response({
            "id": "c", "prompt_filter_results": [{}],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                         "finish_reason": "stop", "content_filter_results": {}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}))
        self.assertEqual(out, {"id": "c", "object": "chat.completion", "model": "gpt-4o",
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                            "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}})

    def test_a_message_without_content_gets_a_null_one(self):
        out = json.loads(self.response({"object": "chat.completion", "model": "m", "choices": [
            {"index": 0, "finish_reason": "content_filter", "message": {"role": "assistant"}}]}))
        self.assertEqual(out["choices"][0]["message"], {"role": "assistant", "content": None})

    def test_keep_setting_keeps_them(self):
        c = ctx(settings=[("content_filter_results", "keep")])
        out = json.loads(self.response({"object": "chat.completion", "model": "m", "prompt_filter_results": [],
                                        "choices": [{"content_filter_results": {}}]}, c))
        self.assertIn("prompt_filter_results", out)
        self.assertIn("content_filter_results", out["choices"][0])

    def test_unchanged_bodies_pass_byte_for_byte_and_usage_is_never_invented(self):
        raw = '{"object":"chat.completion","model":"m","choices":[], "x": 1.50}'
        self.assertEqual(m.transform_response(ctx(), 200, [], raw.encode()), raw)
        out = json.loads(self.response({"choices": []}))
        self.assertNotIn("usage", out)

    def test_embeddings_are_filled_in_openai_shape(self):
        c = ctx(operation="embedding", upstream_model="ada")
        out = json.loads(self.response({"data": [{"index": 0, "embedding": [0.5]}],
                                        "usage": {"prompt_tokens": 4, "total_tokens": 4}}, c))
        self.assertEqual(out["object"], "list")
        self.assertEqual(out["model"], "ada")
        self.assertEqual(out["data"][0]["object"], "embedding")
        raw = b'{"object":"list","model":"ada","data":[{"object":"embedding","index":0,"embedding":[-8.432463e-05]}]}'
        self.assertEqual(m.transform_response(c, 200, [], raw), raw.decode())

    def test_unreadable_answers(self):
        for body in (b"not json", b"[1]", b'{"id": "x"}'):
            with self.assertRaises(m.Failure) as e:
                m.transform_response(ctx(), 200, [], body)
            self.assertEqual(e.exception.kind, "invalid-response", body)
        with self.assertRaises(m.Failure) as e:
            self.response({"error": {"code": "content_filter", "message": "x"}})
        self.assertEqual((e.exception.kind, e.exception.status), ("content-policy", 200))

    def test_errors_go_through_classification(self):
        with self.assertRaises(m.Failure) as e:
            m.transform_response(ctx(), 429, [("retry-after", "1")], b'{"error":{"code":"429","message":"x"}}')
        self.assertEqual((e.exception.kind, e.exception.retry_after_ms, e.exception.code), ("rate-limit", 1000, "429"))


def events(stream, *datas):
    chunks, done = [], False
    for data in datas:
        out, done = stream.chunk(data if isinstance(data, str) else json.dumps(data))
        chunks.extend(json.loads(c) for c in out)
    return chunks, done


class StreamTests(unittest.TestCase):
    def test_the_prompt_filter_event_is_dropped_unless_it_carries_usage(self):
        s = m.StreamState(ctx())
        first = {"id": "", "object": "", "created": 0, "model": "", "choices": [],
                 "prompt_filter_results": [{"prompt_index": 0}]}
        self.assertEqual(events(s, first), ([], False))
        first["usage"] = {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}
        chunks, _ = events(s, first)
        self.assertEqual(chunks[0]["usage"]["prompt_tokens"], 3)
        self.assertNotIn("prompt_filter_results", chunks[0])
        self.assertEqual(chunks[0]["object"], "chat.completion.chunk")

    def test_annotations_are_dropped_and_a_filter_finish_becomes_a_chunk(self):
        s = m.StreamState(ctx())
        token = {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "gpt-35",
                 "choices": [{"index": 0, "delta": {"content": "a"}, "finish_reason": None,
                              "content_filter_results": {"hate": {"filtered": False}}}]}
        note = {"id": "", "object": "", "created": 0, "model": "",
                "choices": [{"index": 0, "finish_reason": None, "content_filter_results": {},
                             "content_filter_offsets": {"check_offset": 1}}], "usage": None}
        stop = {"id": "", "object": "", "created": 0, "model": "",
                "choices": [{"index": 0, "finish_reason": "content_filter",
                             "content_filter_results": {"protected_material_text": {"filtered": True}}}]}
        chunks, done = events(s, token, note, stop)
        self.assertFalse(done)
        self.assertEqual(len(chunks), 2)
        self.assertEqual(chunks[0]["choices"][0], {"index": 0, "delta": {"content": "a"}, "finish_reason": None})
        self.assertEqual(chunks[1], {"id": "c1", "object": "chat.completion.chunk", "created": 5,
                                     "model": "gpt-35", "choices": [{"index": 0, "finish_reason": "content_filter",
                                                                    "delta": {}}]})
        self.assertEqual(s.finish(), ([], True))

    def test_unchanged_chunks_pass_byte_for_byte(self):
        s = m.StreamState(ctx())
        data = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]} '
        self.assertEqual(s.chunk(data), ([data.strip()], False))

    def test_done_and_finish(self):
        s = m.StreamState(ctx())
        self.assertEqual(s.chunk(" [DONE] "), ([], True))
        self.assertEqual(s.finish(), ([], True))
        s = m.StreamState(ctx())
        events(s, {"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self.assertEqual(s.finish(), ([], True))
        s = m.StreamState(ctx())
        self.assertEqual(s.chunk(""), ([], False))
        events(s, {"id": "c", "choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": None}]})
        with self.assertRaises(m.Failure) as e:
            s.finish()
        self.assertEqual(e.exception.kind, "truncated")

    def test_error_events_and_garbage(self):
        s = m.StreamState(ctx())
        with self.assertRaises(m.Failure) as e:
            s.chunk('{"error":{"code":"content_filter","message":"blocked","status":400}}')
        self.assertEqual((e.exception.kind, e.exception.code, e.exception.status), ("content-policy", "content_filter", 400))
        with self.assertRaises(m.Failure) as e:
            s.chunk('{"error":{"message":"The server had an error","type":"server_error"}}')
        self.assertEqual((e.exception.kind, e.exception.code), ("server", "server_error"))
        with self.assertRaises(m.Failure) as e:
            s.chunk('{"error":{"code":"429","message":"Please retry after 3 seconds."}}')
        self.assertEqual((e.exception.kind, e.exception.retry_after_ms), ("rate-limit", 3000))
        for bad in ("{not json", "[1]", '{"choices":[1]}'):
            with self.assertRaises(m.Failure) as e:
                s.chunk(bad)
            self.assertEqual(e.exception.kind, "invalid-response", bad)


# --- a small replay of the recorded cases -------------------------------------------------

def sse_events(body):
    """SSE as the gateway splits it: `data:` lines joined, a blank line dispatches."""
    out, data, has = [], [], False
    for line in body.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if has:
                out.append("\n".join(data))
            data, has = [], False
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            if field == "data":
                data.append(value[1:] if value.startswith(" ") else value)
                has = True
    if has:
        out.append("\n".join(data))
    return out


def subset(expected, actual, path="$"):
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return ["%s: expected an object, got %r" % (path, actual)]
        diffs = []
        for key, value in expected.items():
            if key not in actual:
                diffs.append("%s.%s: missing" % (path, key))
            else:
                diffs += subset(value, actual[key], "%s.%s" % (path, key))
        return diffs
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return ["%s: expected %d elements, got %r" % (path, len(expected), actual)]
        return [d for i, (e, a) in enumerate(zip(expected, actual)) for d in subset(e, a, "%s[%d]" % (path, i))]
    if isinstance(expected, (int, float)) and not isinstance(expected, bool) and isinstance(actual, (int, float)):
        return [] if float(expected) == float(actual) else ["%s: expected %r, got %r" % (path, expected, actual)]
    return [] if expected == actual else ["%s: expected %r, got %r" % (path, expected, actual)]


def play(case):
    c = case.get("context", {})
    context = m.Context(operation=c.get("operation", "chat"), source_name=c.get("source_name", "test"),
                        base_url=c.get("base_url", "https://api.example.com"), api_key=c.get("api_key", "test-key"),
                        upstream_model=c.get("upstream_model", "model-x"), settings=c.get("settings", {}).items())
    diffs = []
    error = None
    try:
        method, url, headers, body = m.build_request(context, json.dumps(case["request"]))
    except m.Failure as f:
        error = f
    else:
        want = case.get("upstream_request", {})
        if "method" in want and want["method"] != method:
            diffs.append("method %s" % method)
        if "url" in want and want["url"] != url:
            diffs.append("url %s" % url)
        for name, value in want.get("headers", {}).items():
            if (name.lower(), value) not in [(k.lower(), v) for k, v in headers]:
                diffs.append("header %s" % name)
        if "body" in want and json.loads(body) != want["body"]:
            diffs.append("upstream body %s" % body)
        up = case.get("upstream_response")
        if up is not None:
            if "body" in up:
                raw = json.dumps(up["body"]).encode()
            elif "body_text" in up:
                raw = up["body_text"].encode()
            else:
                with open(os.path.join(CASES, up["body_file"]), "rb") as f:
                    raw = f.read()
            status = up.get("status", 200)
            response_headers = [(k.lower(), v) for k, v in up.get("headers", {}).items()]
            if case["request"].get("stream") is True and 200 <= status < 300:
                stream = m.StreamState(context)
                chunks, done = [], False
                try:
                    for data in sse_events(raw.decode()):
                        out, done = stream.chunk(data)
                        chunks += out
                        if done:
                            break
                    if not done:
                        chunks += stream.finish()[0]
                except m.Failure as f:
                    error = f
                if "expect_chunks" in case:
                    diffs += subset(case["expect_chunks"], [json.loads(x) for x in chunks])
            else:
                try:
                    unified = m.transform_response(context, status, response_headers, raw)
                    if "expect" in case:
                        diffs += subset(case["expect"], json.loads(unified))
                except m.Failure as f:
                    error = f
    want_error = case.get("expect_error")
    if want_error is None:
        if error is not None:
            diffs.append("unexpected error %r" % error)
    elif error is None:
        diffs.append("expected an error")
    else:
        for field in ("kind", "status", "code", "retry_after_ms"):
            if field in want_error and getattr(error, field) != want_error[field]:
                diffs.append("error %s: %r" % (field, getattr(error, field)))
        if "message_contains" in want_error and want_error["message_contains"] not in error.message:
            diffs.append("error message %r" % error.message)
    return diffs


class CasesReplay(unittest.TestCase):
    def test_every_recorded_case(self):
        names = sorted(n for n in os.listdir(CASES) if n.endswith(".json"))
        self.assertGreater(len(names), 10)
        for name in names:
            with self.subTest(case=name):
                with open(os.path.join(CASES, name), encoding="utf-8") as f:
                    self.assertEqual(play(json.load(f)), [])


if __name__ == "__main__":
    unittest.main()
