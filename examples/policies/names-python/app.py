"""Switchyard policy redacting names, as a componentize-py component.

The WIT glue only: the logic is in `names.py` (plain Python, tested in CPython).
componentize-py conventions this file relies on (0.25.1, bindings in `wit_world`):

- the exported interface `policy` is the class `Policy` in this module (componentize-py makes
  one instance and calls its methods: `describe`, `on_request`, ...);
- the variant `verdict` is `Verdict_Allow()`, `Verdict_Rewrite(text)` or
  `Verdict_Deny(Denial(...))`; the flags `hooks` are a `Flag` (`Hooks.REQUEST | ...`);
- records are dataclasses, `list<tuple<string, string>>` is a list of 2-tuples, `u16`/`u32`
  are `int`;
- an exception escaping a hook traps the call: the policy's `on_error` decides what then.
"""

from wit_world import exports
from wit_world.imports import host, types

import names


def _verdict(decision):
    if decision[0] == "rewrite":
        return types.Verdict_Rewrite(decision[1])
    if decision[0] == "deny":
        _, status, code, message = decision
        return types.Verdict_Deny(types.Denial(status=status, message=message, code=code))
    return types.Verdict_Allow()


def _guarded(hook, call):
    """Runs a hook; anything raised is a bug, logged through the host (the component has no
    stdio) and raised again, which traps the call."""
    try:
        return _verdict(call())
    except Exception as e:
        host.log(host.LogLevel.ERROR, "names policy: %s failed: %s: %s" % (hook, type(e).__name__, e))
        raise


class Policy(exports.Policy):
    def describe(self) -> types.Metadata:
        return types.Metadata(
            name=names.POLICY_NAME,
            version=names.POLICY_VERSION,
            hooks=types.Hooks.REQUEST | types.Hooks.ANSWER | types.Hooks.STREAM,
            hold_back=names.HOLD_BACK,
        )

    def on_request(self, context: types.Context, request: str) -> types.Verdict:
        return _guarded("on-request", lambda: names.check_request(context.settings, request))

    def on_answer(self, context: types.Context, answer: str) -> types.Verdict:
        return _guarded("on-answer", lambda: names.check_answer(context.settings, answer))

    def on_stream(self, context: types.Context, text: str, last: bool) -> types.Verdict:
        return _guarded("on-stream", lambda: names.check_stream(context.settings, text, last))

    def on_finish(self, context: types.Context, finish: types.Finish) -> None:
        # Not in `describe`'s hooks: the host never calls it; the world still needs it.
        pass
