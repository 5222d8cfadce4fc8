"""{{name}}: a Switchyard policy in Python, started by `switchyard policy new {{name}} --lang python`.

It refuses a request whose last user message is empty (400 `empty_message`), and replaces the
value after `password:` with `[REDACTED]` in answers and streamed answers. Change it to check
what you need (wit/policy.wit is the contract).

How componentize-py maps the WIT (bindings in the `wit_world` package; `./build.sh` writes a
copy to bindings/ for your editor):
  exported interface `policy` -> the class `Policy` below (componentize-py makes one instance
                                 and calls its methods: describe, on_request, ...)
  variant `verdict`           -> types.Verdict_Allow(), types.Verdict_Rewrite(text),
                                 types.Verdict_Deny(types.Denial(status=..., message=..., code=...))
  flags `hooks`               -> types.Hooks.REQUEST | types.Hooks.ANSWER | ...
  record                      -> dataclass;  list<tuple<string, string>> -> list of 2-tuples
An exception escaping a hook traps the call: the policy's `on_error` decides what then. The
component has no files, network or environment at run time: import everything at the top of
the module. For a log line, use the host: host.log(host.LogLevel.WARN, "...").
"""

import json
import re

from wit_world import exports
from wit_world.imports import host, types

NAME = "{{name}}"
VERSION = "0.1.0"

# Characters of streamed text the host holds back: a `password: value` up to this long that
# arrives split across chunks is still seen whole before any of it is sent.
HOLD_BACK = 32
REDACTED = "[REDACTED]"
PASSWORD = re.compile(r"(password:[ \t]*)(\S+)", re.IGNORECASE)


def setting(settings, key, default=None):
    """A setting by key, from the (key, value) pairs of the context; the first wins."""
    for k, v in settings or ():
        if k == key:
            return v
    return default


def text_of(content):
    """A message's text: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def redact(text, last):
    """`text` with the value after each `password:` (any case) replaced, or None when nothing
    changed. A value running to the end of the text may still grow with the next delta: unless
    this is the `last` text, it is left for a later call (the host keeps it held back)."""
    changed = False

    def replace(m):
        nonlocal changed
        if m.group(2) == REDACTED or (not last and m.end() == len(text)):
            return m.group(0)
        changed = True
        return m.group(1) + REDACTED

    out = PASSWORD.sub(replace, text)
    return out if changed else None


def check_request(request):
    try:
        body = json.loads(request)
    except ValueError:
        return types.Verdict_Allow()  # not JSON: the host's to refuse, not ours
    messages = body.get("messages") if isinstance(body, dict) else None
    users = [m for m in messages or [] if isinstance(m, dict) and m.get("role") == "user"]
    if users and not text_of(users[-1].get("content")).strip():
        return types.Verdict_Deny(types.Denial(status=400, message="the last user message is empty", code="empty_message"))
    return types.Verdict_Allow()


def check_answer(answer):
    try:
        body = json.loads(answer)
    except ValueError:
        return types.Verdict_Allow()
    changed = False
    for choice in body.get("choices") or [] if isinstance(body, dict) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(message, dict) and isinstance(message.get("content"), str):
            redacted = redact(message["content"], True)
            if redacted is not None:
                message["content"] = redacted
                changed = True
    if not changed:
        return types.Verdict_Allow()
    return types.Verdict_Rewrite(json.dumps(body, ensure_ascii=False, separators=(",", ":")))


def check_stream(text, last):
    redacted = redact(text, last)
    return types.Verdict_Allow() if redacted is None else types.Verdict_Rewrite(redacted)


def guarded(hook, call):
    """Runs a hook; anything raised is logged through the host (the component has no stdio) and
    raised again, which traps the call."""
    try:
        return call()
    except Exception as e:
        host.log(host.LogLevel.ERROR, "%s: %s failed: %s: %s" % (NAME, hook, type(e).__name__, e))
        raise


class Policy(exports.Policy):
    def describe(self) -> types.Metadata:
        return types.Metadata(
            name=NAME,
            version=VERSION,
            hooks=types.Hooks.REQUEST | types.Hooks.ANSWER | types.Hooks.STREAM,
            hold_back=HOLD_BACK,
        )

    def on_request(self, context: types.Context, request: str) -> types.Verdict:
        return guarded("on-request", lambda: check_request(request))

    def on_answer(self, context: types.Context, answer: str) -> types.Verdict:
        return guarded("on-answer", lambda: check_answer(answer))

    def on_stream(self, context: types.Context, text: str, last: bool) -> types.Verdict:
        return guarded("on-stream", lambda: check_stream(text, last))

    def on_finish(self, context: types.Context, finish: types.Finish) -> None:
        # Not in describe's hooks: the host never calls it; the world still needs it.
        pass
