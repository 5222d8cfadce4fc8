"""The names policy's logic, plain Python (no bindings imported, tested in CPython): redacts a
configured list of customer or person names in requests, whole answers and streams.

Verdicts are plain tuples here, turned into WIT values by `app.py`:
`("allow",)`, `("rewrite", text)`, `("deny", status, code, message)`.
"""

import json
import re

POLICY_NAME = "names"
POLICY_VERSION = "0.1.0"

# Characters of streamed text the host holds back: a name up to this long that arrives split
# across chunks is seen whole by a later call before any of it reaches the client.
HOLD_BACK = 48

DEFAULT_REPLACEMENT = "[NAME]"

ALLOW = ("allow",)


def setting(settings, key):
    """A setting by key, from the `(key, value)` pairs of the context; the first wins."""
    for k, v in settings or ():
        if k == key:
            return v
    return None


def comma_list(value):
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _is_word(c):
    return c.isalnum() or c == "_"


def name_pattern(name):
    """One name as a regex: any run of whitespace between its words, and whole words (a boundary
    only where the name starts or ends with a letter or digit, so `O'Brien` or `Zoë` work)."""
    words = name.split()
    start = r"(?<!\w)" if _is_word(name[0]) else ""
    end = r"(?!\w)" if _is_word(name[-1]) else ""
    return start + r"\s+".join(re.escape(w) for w in words) + end


class Config:
    def __init__(self, settings):
        names = comma_list(setting(settings, "names"))
        # Longest first: the alternation takes the first that matches, so `Alice Smith` wins
        # over `Alice` where both would.
        names = sorted(set(names), key=lambda n: (-len(n), n))
        self.pattern = (
            re.compile("|".join(name_pattern(n) for n in names), re.IGNORECASE) if names else None
        )
        replacement = setting(settings, "replacement")
        self.replacement = DEFAULT_REPLACEMENT if replacement is None else replacement

    def redact(self, text, settled=lambda start: True):
        """`text` with every (settled) name replaced, or None when nothing changed."""
        if self.pattern is None or not text:
            return None
        changed = False
        out = []
        at = 0
        for m in self.pattern.finditer(text):
            if not settled(m.start()):
                continue
            out.append(text[at:m.start()])
            out.append(self.replacement)
            at = m.end()
            changed = True
        if not changed:
            return None
        out.append(text[at:])
        new = "".join(out)
        return new if new != text else None


_cache = (None, None)


def compiled(settings):
    """The config for these settings; the host calls every hook (and every stream chunk) with
    the same settings, so the last one is kept."""
    global _cache
    key = tuple(tuple(pair) for pair in settings or ())
    if _cache[0] != key:
        _cache = (key, Config(settings))
    return _cache[1]


def _rewrite_content(holder, redact):
    """Redacts `holder["content"]`: a string, or the `text` of each text part; True if changed."""
    if not isinstance(holder, dict):
        return False
    content = holder.get("content")
    if isinstance(content, str):
        new = redact(content)
        if new is not None:
            holder["content"] = new
            return True
        return False
    changed = False
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict) or part.get("type", "text") != "text":
                continue
            text = part.get("text")
            if isinstance(text, str):
                new = redact(text)
                if new is not None:
                    part["text"] = new
                    changed = True
    return changed


def _dump(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _messages(request):
    messages = request.get("messages") if isinstance(request, dict) else None
    return messages if isinstance(messages, list) else []


def _choice_messages(answer):
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list):
        return []
    return [c.get("message") for c in choices if isinstance(c, dict)]


def _rewrite(settings, body, holders):
    config = compiled(settings)
    if config.pattern is None:
        return ALLOW
    try:
        value = json.loads(body)
    except ValueError:
        return ALLOW  # not JSON: the host's to refuse, not ours
    changed = False
    for holder in holders(value):
        changed |= _rewrite_content(holder, config.redact)
    return ("rewrite", _dump(value)) if changed else ALLOW


def check_request(settings, request):
    """`on-request`: every message's text (string content and text parts)."""
    return _rewrite(settings, request, _messages)


def check_answer(settings, answer):
    """`on-answer`: each `choices[].message.content`."""
    return _rewrite(settings, answer, _choice_messages)


def settled(text, start, last, hold_back=HOLD_BACK):
    """Whether a match starting at `start` of a stream's held `text` can be acted on now. One
    that starts within the last `hold_back` characters may still grow with the next delta
    (`Bob` may become `Bobby`); the host keeps that tail held back, so it waits for a later call,
    unless this is the `last`."""
    return last or len(text) - start > hold_back


def check_stream(settings, text, last):
    """`on-stream`: the held text, with every name that cannot grow any more replaced."""
    config = compiled(settings)
    new = config.redact(text, lambda start: settled(text, start, last))
    return ALLOW if new is None else ("rewrite", new)
