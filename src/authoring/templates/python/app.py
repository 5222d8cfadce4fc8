"""{{name}}: a Switchyard adapter in Python, started by `switchyard adapter new {{name}} --lang python`.

It is an OpenAI-compatible pass-through: the unified form *is* OpenAI Chat Completions JSON,
so requests go upstream with the upstream model name and a bearer key, and answers come back
as they are. Change it to speak your upstream's protocol (wit/adapter.wit is the contract).

How componentize-py maps the WIT (bindings in the `wit_world` package; `./build.sh` writes a
copy to bindings/ for your editor):
  exported interface `adapter` -> the class `Adapter` below (`describe` is a method)
  resource `session`           -> the class `Session` below, found through adapter.py
  record                       -> dataclass (types.HttpRequest(method=..., url=..., ...))
  enum                         -> Enum (types.ErrorKind.RATE_LIMIT, types.Operation.CHAT)
  option<T>                    -> the value or None
  list<u8>                     -> bytes;  u16, u64 -> int
  list<tuple<string, string>>  -> list of 2-tuples (headers, settings)
  result<T, adapter-error>     -> return T, or `raise Err(types.AdapterError(...))`; any
                                  other exception would trap the call wordlessly, so
                                  @guarded (below) turns it into an adapter error that says
                                  what was raised and where
The component has no files, network or environment at run time (the gateway links an empty
WASI): import everything at the top of the module, never inside a function. For a log line
or the time, use the host: host.log(host.LogLevel.DEBUG, "..."), host.now_unix_ms().
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import adapter as adapter_exports
from wit_world.imports import host, types  # noqa: F401  (host: log, now_unix_ms)

NAME = "{{name}}"
VERSION = "0.1.0"


def setting(ctx, key, default=None):
    for k, v in ctx.settings:
        if k == key:
            return v
    return default


def header(headers, name):
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def failure(kind, message, status=None, retry_after_ms=None, code=None):
    """An `adapter-error`, ready to raise."""
    return Err(types.AdapterError(kind=kind, message=message, status=status,
                                  retry_after_ms=retry_after_ms, code=code))


def described(e):
    """An exception as an adapter error's message: what was raised on the first line (what a
    client sees), then where (the gateway logs it). traceback.format_exc() prints nothing
    inside the component, so the frames are walked by hand."""
    frames = []
    tb = e.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append('  File "%s", line %d, in %s' % (code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    return "\n".join(["%s: %s" % (type(e).__name__, e)] + frames[-8:])


def guarded(method):
    """A session call whose exceptions reach the gateway as adapter errors, not traps."""
    def call(self, *args):
        try:
            return method(self, *args)
        except Err:
            raise
        except Exception as e:  # every other exception: said, not trapped
            raise failure(types.ErrorKind.SERVER, described(e))
    call.__name__ = method.__name__
    return call


def classify(status, code):
    """HTTP status (and the upstream's error code) -> the error kind the gateway acts on."""
    if code == "insufficient_quota":
        return types.ErrorKind.QUOTA
    if code in ("content_filter", "content_policy_violation"):
        return types.ErrorKind.CONTENT_POLICY
    if status == 401:
        return types.ErrorKind.AUTH
    if status == 402:
        return types.ErrorKind.QUOTA
    if status == 403:
        return types.ErrorKind.PERMISSION
    if status == 404:
        return types.ErrorKind.NOT_FOUND
    if status == 429:
        return types.ErrorKind.RATE_LIMIT
    if status in (503, 529):
        return types.ErrorKind.OVERLOADED
    if status >= 500 or 300 <= status < 400:
        return types.ErrorKind.SERVER
    return types.ErrorKind.BAD_REQUEST


def upstream_error(response):
    """A non-2xx answer -> a classified error with the upstream's message, code and Retry-After."""
    text = response.body.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    message = None
    code = None
    if isinstance(error, dict):
        message = error.get("message") if isinstance(error.get("message"), str) else None
        code = error.get("code") if isinstance(error.get("code"), str) else None
    elif isinstance(error, str):
        message = error
    elif isinstance(body, dict) and isinstance(body.get("message"), str):
        message = body["message"]
    if not message:
        message = text.strip()[:512] or "upstream returned HTTP %d" % response.status
    retry_after_ms = None
    try:
        seconds = float(header(response.headers, "retry-after") or "")
        if seconds >= 0:
            retry_after_ms = int(seconds * 1000)
    except ValueError:
        pass  # absent, or an HTTP date
    return failure(classify(response.status, code), message, status=response.status,
                   retry_after_ms=retry_after_ms, code=code)


class Adapter(exports.Adapter):
    def describe(self) -> types.Metadata:
        return types.Metadata(name=NAME, version=VERSION, protocol="openai-chat",
                              stream_framing=types.StreamFraming.SSE)


class Session(adapter_exports.Session):
    """One request's translation state; a stream keeps its session until its last event."""

    def __init__(self, context: types.SourceContext) -> None:
        self.ctx = context
        self.done = False       # `data: [DONE]` arrived
        self.finished = False   # a choice reported its finish_reason

    @guarded
    def transform_request(self, request: str) -> types.HttpRequest:
        try:
            body = json.loads(request)
        except ValueError as e:
            raise failure(types.ErrorKind.BAD_REQUEST, "request body is not JSON: %s" % e)
        if not isinstance(body, dict):
            raise failure(types.ErrorKind.BAD_REQUEST, "request body must be a JSON object")
        body["model"] = self.ctx.upstream_model
        body.pop("disable_thinking", None)  # a gateway-only field
        if self.ctx.operation == types.Operation.CHAT:
            path = "/chat/completions"
            if body.get("stream") is True:
                # Usage arrives on a stream only when asked for; the gateway's books need it.
                options = body.get("stream_options")
                body["stream_options"] = dict(options if isinstance(options, dict) else {},
                                              include_usage=True)
        elif self.ctx.operation == types.Operation.EMBEDDING:
            path = "/embeddings"
        else:
            path = "/images/generations"
        headers = [("content-type", "application/json")]
        if self.ctx.api_key:
            headers.append(("authorization", "Bearer " + self.ctx.api_key))
        for key, value in self.ctx.settings:
            if key.startswith("header."):
                headers.append((key[len("header."):], value))
        return types.HttpRequest(
            method="POST",
            url=self.ctx.base_url.rstrip("/") + path,
            headers=headers,
            body=json.dumps(body, ensure_ascii=False).encode("utf-8"),
        )

    @guarded
    def transform_response(self, response: types.HttpResponse) -> str:
        if not 200 <= response.status < 300:
            raise upstream_error(response)
        try:
            text = response.body.decode("utf-8")
            value = json.loads(text)
        except ValueError as e:
            raise failure(types.ErrorKind.INVALID_RESPONSE, "upstream body is not JSON: %s" % e,
                          status=response.status)
        wanted = "choices" if self.ctx.operation == types.Operation.CHAT else "data"
        if not isinstance(value, dict) or not isinstance(value.get(wanted), list):
            raise failure(types.ErrorKind.INVALID_RESPONSE,
                          "upstream response has no `%s` array" % wanted, status=response.status)
        return text  # already the unified shape: passed on byte for byte

    @guarded
    def transform_stream_chunk(self, event: types.StreamEvent) -> types.StreamOutput:
        data = event.data.strip()
        if data == "[DONE]":
            self.done = True
            return types.StreamOutput(chunks=[], done=True)
        if not data:
            return types.StreamOutput(chunks=[], done=False)
        try:
            value = json.loads(data)
        except ValueError as e:
            raise failure(types.ErrorKind.INVALID_RESPONSE, "stream event is not JSON: %s" % e)
        if not isinstance(value, dict):
            raise failure(types.ErrorKind.INVALID_RESPONSE, "stream event is not a JSON object")
        if "error" in value:
            error = value["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise failure(types.ErrorKind.SERVER, message or "upstream sent an error event")
        for choice in value.get("choices") or []:
            if isinstance(choice, dict) and choice.get("finish_reason") is not None:
                self.finished = True
        return types.StreamOutput(chunks=[data], done=False)

    @guarded
    def finish_stream(self) -> types.StreamOutput:
        # Some servers close after the finish_reason without `[DONE]`: still complete.
        if self.done or self.finished:
            return types.StreamOutput(chunks=[], done=True)
        raise failure(types.ErrorKind.TRUNCATED, "upstream stream ended before [DONE] or a finish_reason")
