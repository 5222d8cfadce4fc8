# Checks the gateway's Responses bodies against the typed models of the openai Python SDK
# (pinned in requirements.txt); run by tests/it/sdk_python.rs with the bodies on stdin.
"""stdin: {"response": <a whole response object, or null>, "events": [<SSE event objects>]}.

The response is validated as openai.types.responses.Response, each event as the member of the
ResponseStreamEvent union its `type` names (an unknown type is a failure). Every failure is one
line on stderr and the exit status is 1; otherwise prints `ok N events`."""

import json
import sys
import typing

from pydantic import ValidationError
from openai.types.responses import Response, ResponseStreamEvent


def event_models():
    """`type` literal -> event model, from the SDK's Annotated[Union[...], PropertyInfo(discriminator='type')]."""
    union = typing.get_args(ResponseStreamEvent)[0]
    models = {}
    for model in typing.get_args(union):
        for literal in typing.get_args(model.model_fields["type"].annotation):
            models[literal] = model
    return models


def errors(where, exc):
    """One line per pydantic error: where, the field path, the error type and message."""
    for e in exc.errors(include_url=False):
        path = ".".join(map(str, e["loc"])) or "<root>"
        given = json.dumps(e.get("input"), default=str)
        given = given if len(given) <= 120 else given[:117] + "..."
        yield f"{where}: {path}: {e['type']}: {e['msg']} (input: {given})"


def main():
    doc = json.load(sys.stdin)
    failures = []
    response = doc.get("response")
    if response is not None:
        try:
            Response.model_validate(response, strict=False)
        except ValidationError as e:
            failures.extend(errors("response", e))
    models = event_models()
    events = doc.get("events") or []
    for i, event in enumerate(events):
        kind = event.get("type") if isinstance(event, dict) else None
        model = models.get(kind)
        if model is None:
            failures.append(f"event {i} ({kind!r}): not a type of the SDK's ResponseStreamEvent")
            continue
        try:
            model.model_validate(event, strict=False)
        except ValidationError as e:
            failures.extend(errors(f"event {i} ({kind}, {model.__name__})", e))
    if response is None and not events:
        failures.append("nothing to validate: no response and no events")
    for line in failures:
        print(line, file=sys.stderr)
    if failures:
        sys.exit(1)
    print(f"ok {len(events)} events")


if __name__ == "__main__":
    main()
