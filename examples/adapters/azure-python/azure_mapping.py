"""Azure OpenAI <-> Switchyard's unified form (OpenAI Chat Completions JSON).

Pure Python: no componentize-py bindings are imported here, so this module runs and is
tested in plain CPython (`python3 -m unittest test_azure_mapping`). `app.py` is the thin
layer that turns these plain values into the WIT types.

Errors are raised as `Failure(kind, message, status, retry_after_ms, code)`, where `kind`
is the WIT `error-kind` spelled as in the WIT (`rate-limit`, `content-policy`, ...).
"""

import json
import re
from urllib.parse import quote

ADAPTER_NAME = "azure"
ADAPTER_VERSION = "0.1.0"
PROTOCOL = "azure-openai-chat"

# The latest GA version of Azure OpenAI's data-plane inference API
# (learn.microsoft.com/azure/ai-services/openai/reference): stream_options.include_usage is
# supported from this version on.
DEFAULT_API_VERSION = "2024-10-21"

# Gateway-only request fields an Azure deployment would reject (the same set the built-in
# `openai` adapter drops; `thinking` and `top_k` arrive through the /v1/messages front door).
GATEWAY_FIELDS = ("disable_thinking", "thinking", "top_k")

# Azure's content-filter annotations. Dropped from responses and chunks by default, because
# the unified form is OpenAI's shape; kept with the setting `content_filter_results: keep`.
TOP_LEVEL_FILTER_FIELDS = ("prompt_filter_results", "prompt_annotations")
CHOICE_FILTER_FIELDS = ("content_filter_results", "content_filter_offsets", "content_filter_raw")

OPERATION_PATHS = {
    "chat": "chat/completions",
    "embedding": "embeddings",
    "image": "images/generations",
}

ERROR_KINDS = (
    "bad-request", "auth", "permission", "not-found", "rate-limit", "quota", "overloaded",
    "server", "content-policy", "invalid-response", "truncated", "unsupported",
)


class Failure(Exception):
    """A classified failure; `app.py` turns it into the WIT `adapter-error`."""

    def __init__(self, kind, message, status=None, retry_after_ms=None, code=None):
        assert kind in ERROR_KINDS, kind
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after_ms = retry_after_ms
        self.code = code

    def __repr__(self):
        return "Failure(%r, %r, status=%r, retry_after_ms=%r, code=%r)" % (
            self.kind, self.message, self.status, self.retry_after_ms, self.code)


class Context:
    """The session's `source-context`, as plain values."""

    def __init__(self, operation="chat", source_name="test", base_url="", api_key="",
                 upstream_model="", settings=()):
        self.operation = operation
        self.source_name = source_name
        self.base_url = base_url
        self.api_key = api_key
        self.upstream_model = upstream_model
        # Settings arrive as a list of pairs; the last one of a key wins.
        self.settings = dict(settings)

    def setting(self, key, default=None):
        value = self.settings.get(key)
        return default if value is None or value == "" else value

    @property
    def keep_filter_results(self):
        return self.setting("content_filter_results", "strip").lower() == "keep"


def _dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _truncate(text, limit):
    return text if len(text) <= limit else text[:limit] + "\u2026"


# --- the request ---------------------------------------------------------------------------

def deployment_url(ctx, operation=None):
    """`{base}/openai/deployments/{deployment}/{path}?api-version={version}`."""
    operation = operation or ctx.operation
    path = OPERATION_PATHS.get(operation)
    if path is None:
        raise Failure("unsupported", "the azure adapter cannot do the `%s` operation" % operation)
    deployment = ctx.setting("deployment", ctx.upstream_model)
    if not deployment:
        # The operator's setting is missing, not the client's request wrong: `server` (502
        # naming the adapter), never `bad-request` (a 400 that blames the client).
        raise Failure("server", "no Azure deployment: the source has no upstream model "
                      "and no `deployment` setting")
    base = ctx.base_url.rstrip("/")
    # Tolerate a base_url written with Azure's `/openai` suffix.
    if base.endswith("/openai"):
        base = base[: -len("/openai")]
    version = ctx.setting("api_version", DEFAULT_API_VERSION)
    return "%s/openai/deployments/%s/%s?api-version=%s" % (
        base, quote(deployment, safe=""), path, quote(version, safe=""))


def request_headers(ctx, streaming):
    headers = [("content-type", "application/json")]
    if ctx.api_key:
        if ctx.setting("auth", "api-key").lower() == "bearer":
            # A Microsoft Entra ID token.
            headers.append(("authorization", "Bearer " + ctx.api_key))
        else:
            headers.append(("api-key", ctx.api_key))
    if streaming:
        headers.append(("accept", "text/event-stream"))
    for key, value in ctx.settings.items():
        if key.startswith("header.") and len(key) > len("header."):
            headers.append((key[len("header."):], value))
    return headers


def parse_request(request):
    try:
        body = json.loads(request)
    except ValueError as e:
        raise Failure("bad-request", "request body is not JSON: %s" % e)
    if not isinstance(body, dict):
        raise Failure("bad-request", "request body must be a JSON object")
    return body


def build_request(ctx, request):
    """Unified request JSON -> (method, url, headers, body bytes)."""
    body = parse_request(request)
    # The deployment in the URL names the model; the client's model name is the gateway's.
    body.pop("model", None)
    for field in GATEWAY_FIELDS:
        body.pop(field, None)
    streaming = False
    if ctx.operation == "chat":
        streaming = body.get("stream") is True
        if not streaming:
            # Azure refuses stream_options on a request that does not stream.
            body.pop("stream_options", None)
        elif ctx.setting("stream_usage", "true").lower() == "false":
            # For api-versions before 2024-09-01-preview, which reject the field: the gateway
            # then estimates the stream's tokens.
            body.pop("stream_options", None)
        else:
            # Usage arrives on a stream only when asked for; the gateway's books need it.
            options = body.get("stream_options")
            if not isinstance(options, dict):
                options = {}
            options["include_usage"] = True
            body["stream_options"] = options
    else:
        # Embeddings and images are never streamed.
        body.pop("stream", None)
        body.pop("stream_options", None)
    url = deployment_url(ctx)
    return "POST", url, request_headers(ctx, streaming), _dumps(body).encode("utf-8")


# --- errors --------------------------------------------------------------------------------

def header(headers, name):
    name = name.lower()
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def _number(value):
    try:
        number = float(value.strip())
    except (AttributeError, ValueError):
        return None
    if number != number or number in (float("inf"), float("-inf")) or number < 0:
        return None
    return number


_RETRY_IN_MESSAGE = re.compile(r"retry after (\d+(?:\.\d+)?) second", re.IGNORECASE)


def retry_after_ms(headers, message=""):
    """Azure's `retry-after-ms` (or `x-ms-retry-after-ms`) first, then `retry-after` in
    seconds (an HTTP date is ignored), then the "Please retry after N seconds" of its 429
    messages."""
    for name in ("retry-after-ms", "x-ms-retry-after-ms"):
        ms = _number(header(headers, name))
        if ms is not None:
            return int(ms)
    seconds = _number(header(headers, "retry-after"))
    if seconds is not None:
        return int(seconds * 1000)
    found = _RETRY_IN_MESSAGE.search(message or "")
    if found:
        return int(float(found.group(1)) * 1000)
    return None


def _text(value):
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return str(value)
    return None


def error_fields(value):
    """(message, code, inner code, filtered categories) from the error bodies Azure sends:
    `{"error": {"code", "message", "innererror": {"code", "content_filter_result"}}}`,
    `{"error": "..."}`, and the API-gateway shape `{"statusCode": 401, "message": "..."}`."""
    if not isinstance(value, dict):
        return None, None, None, []
    error = value.get("error")
    if isinstance(error, str):
        return error, None, None, []
    if not isinstance(error, dict):
        return _text(value.get("message")), _text(value.get("code")), None, []
    message = _text(error.get("message"))
    code = _text(error.get("code")) or _text(error.get("type"))
    inner = error.get("innererror") or error.get("inner_error")
    inner_code = None
    filtered = []
    if isinstance(inner, dict):
        inner_code = _text(inner.get("code"))
        results = inner.get("content_filter_result")
        if isinstance(results, dict):
            for category, verdict in sorted(results.items()):
                if isinstance(verdict, dict) and verdict.get("filtered") is True:
                    filtered.append(category)
                elif isinstance(verdict, list) and any(
                        isinstance(v, dict) and v.get("filtered") is True for v in verdict):
                    filtered.append(category)
    return message, code, inner_code, filtered


def classify(status, code, inner_code, message):
    code_l = (code or "").lower()
    inner_l = (inner_code or "").lower()
    message_l = (message or "").lower()
    if ("content_filter" in code_l or "content_policy" in code_l
            or inner_l == "responsibleaipolicyviolation"
            or "content management policy" in message_l):
        return "content-policy"
    quota = ("insufficient_quota" in code_l or "quota" in code_l or "billing" in code_l
             or "exceeded your current quota" in message_l)
    if status == 401:
        return "auth"
    if status == 402:
        return "quota"
    if status == 403:
        return "permission"
    if status == 404:
        return "not-found"
    if status == 429:
        return "quota" if quota else "rate-limit"
    if status == 408:
        return "server"
    if status in (400, 409, 413, 415, 422):
        return "bad-request"
    if 300 <= status < 400:
        # A redirect the host would not follow: the source's base_url is wrong.
        return "server"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server"
    return "bad-request"


def upstream_error(status, headers, body):
    """Classifies a non-2xx upstream response."""
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else body
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    message, code, inner_code, filtered = error_fields(parsed)
    kind = classify(status, code, inner_code, message)
    if not message:
        if kind == "content-policy":
            message = "the request was blocked by Azure OpenAI's content filter"
            if inner_code:
                message += " (%s)" % inner_code
            if filtered:
                message += "; filtered: " + ", ".join(filtered)
        else:
            trimmed = text.strip()
            message = _truncate(trimmed, 512) if trimmed else "upstream returned HTTP %d" % status
    return Failure(
        kind,
        message,
        status=status,
        retry_after_ms=retry_after_ms(headers, message),
        code=_truncate(code or inner_code, 64) if (code or inner_code) else None,
    )


def stream_error(value):
    """An `{"error": ...}` event inside a 200 stream."""
    message, code, inner_code, _ = error_fields(value)
    error = value.get("error") if isinstance(value, dict) else None
    status = None
    if isinstance(error, dict) and isinstance(error.get("status"), int):
        status = error["status"]
    if classify(400, code, inner_code, message) == "content-policy":
        kind = "content-policy"
    elif (code or "") in ("429", "rate_limit_exceeded"):
        kind = "rate-limit"
    else:
        kind = "server"
    return Failure(kind, message or "upstream sent an error event", status=status,
                   retry_after_ms=retry_after_ms((), message or ""),
                   code=_truncate(code or inner_code, 64) if (code or inner_code) else None)


# --- responses -----------------------------------------------------------------------------

def _strip_filter_fields(value):
    changed = False
    for field in TOP_LEVEL_FILTER_FIELDS:
        if field in value:
            del value[field]
            changed = True
    for list_name in ("choices", "data"):
        items = value.get(list_name)
        if isinstance(items, list):
            for item in items:
                if isinstance(item, dict):
                    for field in CHOICE_FILTER_FIELDS + TOP_LEVEL_FILTER_FIELDS:
                        if field in item:
                            del item[field]
                            changed = True
    return changed


def transform_response(ctx, status, headers, body):
    """A complete upstream response -> unified response JSON (or raises Failure)."""
    if not 200 <= status < 300:
        raise upstream_error(status, headers, body)
    try:
        text = body.decode("utf-8") if isinstance(body, (bytes, bytearray)) else body
        value = json.loads(text)
    except ValueError as e:
        raise Failure("invalid-response", "upstream body is not JSON: %s" % e, status=status)
    if not isinstance(value, dict):
        raise Failure("invalid-response", "upstream body is not a JSON object", status=status)
    list_name = "choices" if ctx.operation == "chat" else "data"
    if not isinstance(value.get(list_name), list):
        if "error" in value:
            failure = stream_error(value)
            failure.status = status
            raise failure
        raise Failure("invalid-response", "upstream response has no `%s` array" % list_name,
                      status=status)
    changed = False
    if not ctx.keep_filter_results:
        changed = _strip_filter_fields(value)
    # Azure's own examples leave out `object` and `model`; the unified shapes have them.
    if ctx.operation == "chat":
        changed |= _fill(value, "object", "chat.completion")
        changed |= _fill(value, "model", ctx.upstream_model)
        for choice in value["choices"]:
            # A completion the content filter cut off comes as `{"role": "assistant"}`; OpenAI
            # always sends `content` (null when there is none).
            message = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(message, dict) and "content" not in message:
                message["content"] = None
                changed = True
    elif ctx.operation == "embedding":
        changed |= _fill(value, "object", "list")
        changed |= _fill(value, "model", ctx.upstream_model)
        for item in value["data"]:
            if isinstance(item, dict):
                changed |= _fill(item, "object", "embedding")
    return _dumps(value) if changed else text


def _fill(value, key, default):
    if value.get(key) in (None, "") and default:
        value[key] = default
        return True
    return False


# --- streams -------------------------------------------------------------------------------

class StreamState:
    """What one stream's session remembers between events."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.done = False        # `data: [DONE]` arrived
        self.finished = False    # a choice reported its finish_reason
        self.id = None           # the completion's id, model and created, from its first chunk
        self.model = None
        self.created = None

    def chunk(self, data):
        """One SSE `data:` payload -> (unified chunks, done)."""
        data = data.strip()
        if not data:
            return [], False
        if data == "[DONE]":
            self.done = True
            return [], True
        try:
            value = json.loads(data)
        except ValueError as e:
            raise Failure("invalid-response", "stream event is not JSON: %s" % e)
        if not isinstance(value, dict):
            raise Failure("invalid-response", "stream event is not a JSON object")
        if "error" in value and not value.get("choices"):
            raise stream_error(value)
        changed = False
        if value.get("id"):
            if self.id is None:
                self.id = value.get("id")
                self.model = value.get("model")
                self.created = value.get("created")
        choices = value.get("choices")
        if not isinstance(choices, list):
            choices = []
            changed = True
        kept = []
        for choice in choices:
            if not isinstance(choice, dict):
                raise Failure("invalid-response", "stream event has a choice that is not an object")
            finish = choice.get("finish_reason")
            if finish is not None:
                self.finished = True
            if "delta" not in choice:
                if finish is None:
                    # An annotation (Azure's asynchronous content filter): no tokens.
                    changed = True
                    continue
                # Azure's asynchronous filter ends a blocked stream with an annotation that
                # carries `finish_reason: content_filter` and no delta.
                choice["delta"] = {}
                changed = True
            kept.append(choice)
        usage = value.get("usage")
        if not kept and usage is None:
            # Azure's first event (`prompt_filter_results`, empty id, no choices), annotation
            # events, and anything else with neither tokens nor usage.
            return [], False
        if len(kept) != len(choices):
            value["choices"] = kept
        elif "choices" not in value:
            value["choices"] = kept
        if not self.ctx.keep_filter_results:
            changed |= _strip_filter_fields(value)
        # Annotation events carry an empty id, object, model and created: give them the
        # stream's own.
        if not value.get("id") and self.id:
            value["id"] = self.id
            changed = True
        changed |= _fill(value, "object", "chat.completion.chunk")
        changed |= _fill(value, "model", self.model or self.ctx.upstream_model)
        if not value.get("created") and self.created:
            value["created"] = self.created
            changed = True
        return [_dumps(value) if changed else data], False

    def finish(self):
        """The upstream body ended: complete only if it signalled its end."""
        if self.done or self.finished:
            return [], True
        raise Failure("truncated", "upstream stream ended before [DONE] or a finish_reason")
