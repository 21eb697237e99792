"""A path-parameter convertor for the Jaeger routes that matches every character.

Starlette's ``path`` convertor is ``.*``, which stops at a newline: a trace ID or service name holding ``%0A``
then matches no route and gets the app's generic 404 instead of Jaeger's envelope (found by schemathesis).
``{name:any_path}`` matches the rest of the path whatever it holds, so the route answers it in its own shape.
"""

from __future__ import annotations

from starlette.convertors import Convertor, register_url_convertor

ANY_PATH = "any_path"
"""The convertor's name in route paths: ``/traces/{trace_id:any_path}``."""


class AnyPathConvertor(Convertor[str]):
    """Like Starlette's ``path``, newlines included."""

    regex = "(?s:.*)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor(ANY_PATH, AnyPathConvertor())
