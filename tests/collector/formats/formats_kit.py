"""Helpers for the converters' tests that read a saved file back as OTLP JSON: its spans with their resources, and
its rejections."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from collector.formats import Payload, Rejected, read_payloads


def json_spans(path: Path) -> tuple[list[dict[str, Any]], list[Rejected]]:
    """The OTLP-JSON spans of `path`, each with its resource's attributes as `resource`, and the rejections."""
    spans, rejected = [], []
    for item in read_payloads(path):
        if isinstance(item, Rejected):
            rejected.append(item)
            continue
        assert isinstance(item, Payload) and isinstance(item.body, dict)
        for resource_spans in item.body["resourceSpans"]:
            resource = {kv["key"]: kv["value"] for kv in resource_spans["resource"]["attributes"]}
            spans += [
                {**span, "resource": resource} for scope in resource_spans["scopeSpans"] for span in scope["spans"]
            ]
    return spans, rejected


def saved(tmp_path: Path, document: object, name: str = "trace.json") -> Path:
    """`document` written as JSON to `name` under `tmp_path`."""
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path
