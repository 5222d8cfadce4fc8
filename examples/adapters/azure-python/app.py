"""Switchyard adapter for Azure OpenAI, as a componentize-py component.

The WIT glue only: the mapping itself is in `azure_mapping.py` (plain Python, tested in
CPython). componentize-py conventions this file relies on (0.25.1, bindings in `wit_world`):

- the exported interface `adapter` is the class `Adapter` in this module (`describe` is a
  method of an instance componentize-py creates);
- the exported resource `session` is the class `Session`, looked up in a module named after
  the interface: `adapter.py` beside this file re-exports it;
- `result<T, adapter-error>`: return T, or `raise Err(AdapterError(...))`. The exception's
  type must be `componentize_py_types.Err` itself; any other exception traps the instance;
- records are dataclasses, enums are `Enum`s, `option<T>` is `T | None`, `list<u8>` is
  `bytes`, `u16`/`u64` are `int`.
"""

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports import adapter as adapter_exports
from wit_world.imports import types

import azure_mapping as mapping

_OPERATIONS = {
    types.Operation.CHAT: "chat",
    types.Operation.EMBEDDING: "embedding",
    types.Operation.IMAGE: "image",
}


def _error(failure):
    return Err(types.AdapterError(
        kind=types.ErrorKind[failure.kind.upper().replace("-", "_")],
        message=failure.message,
        status=failure.status,
        retry_after_ms=failure.retry_after_ms,
        code=failure.code,
    ))


def _unreadable(e):
    """An exception the mapping did not expect: the upstream sent something it cannot read."""
    return _error(mapping.Failure(
        "invalid-response", "azure adapter could not read the upstream answer: %s: %s"
        % (type(e).__name__, e)))


class Adapter(exports.Adapter):
    def describe(self) -> types.Metadata:
        return types.Metadata(
            name=mapping.ADAPTER_NAME,
            version=mapping.ADAPTER_VERSION,
            protocol=mapping.PROTOCOL,
            stream_framing=types.StreamFraming.SSE,
        )


class Session(adapter_exports.Session):
    def __init__(self, context: types.SourceContext) -> None:
        self.ctx = mapping.Context(
            operation=_OPERATIONS.get(context.operation, "chat"),
            source_name=context.source_name,
            base_url=context.base_url,
            api_key=context.api_key,
            upstream_model=context.upstream_model,
            settings=context.settings,
        )
        self.stream = mapping.StreamState(self.ctx)

    def transform_request(self, request: str) -> types.HttpRequest:
        try:
            method, url, headers, body = mapping.build_request(self.ctx, request)
        except mapping.Failure as failure:
            raise _error(failure)
        return types.HttpRequest(method=method, url=url, headers=headers, body=body)

    def transform_response(self, response: types.HttpResponse) -> str:
        try:
            return mapping.transform_response(
                self.ctx, response.status, response.headers, response.body)
        except mapping.Failure as failure:
            raise _error(failure)
        except Exception as e:  # noqa: BLE001 - anything else is an unreadable answer
            raise _unreadable(e)

    def transform_stream_chunk(self, event: types.StreamEvent) -> types.StreamOutput:
        try:
            chunks, done = self.stream.chunk(event.data)
        except mapping.Failure as failure:
            raise _error(failure)
        except Exception as e:  # noqa: BLE001
            raise _unreadable(e)
        return types.StreamOutput(chunks=chunks, done=done)

    def finish_stream(self) -> types.StreamOutput:
        try:
            chunks, done = self.stream.finish()
        except mapping.Failure as failure:
            raise _error(failure)
        return types.StreamOutput(chunks=chunks, done=done)
