"""The REST, Jaeger and Tempo routes, the UI's pages and the SLO alerts read through
:class:`query.service.QueryService`'s methods only: none of them touches a store reader the room holds (its
``store``, ``incident_store``, ``engines``, ``engine_metrics``), so two handlers cannot read the same data two ways.
The import contract keeps ``storage`` itself out of ``api/``, ``dashboards/`` and ``alerts/``; this keeps the
readers the room hands out out of them too."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from query.service import QueryService

REPO = Path(__file__).resolve().parents[2]
HANDLERS = ("api", "dashboards", "alerts")
READERS = ("store", "incident_store", "engines", "engine_metrics")
"""The room's fields that are store readers, for its own services and the background work beside it."""


def reader_uses(path: Path) -> list[str]:
    """``line: .field`` for every attribute read of a :data:`READERS` name in the module at ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{node.lineno}: .{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in READERS
    ]


def test_the_reader_names_are_the_rooms_fields() -> None:
    assert set(READERS) <= {field.name for field in dataclasses.fields(QueryService)}


@pytest.mark.parametrize("package", HANDLERS)
def test_no_handler_reaches_a_reader(package: str) -> None:
    found = {
        str(path.relative_to(REPO)): uses
        for path in sorted((REPO / package).rglob("*.py"))
        if (uses := reader_uses(path))
    }
    assert found == {}


def test_the_check_sees_a_reader_use(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def handler(query):\n    return query.store.search_spans(None, tenant=None)\n")
    assert reader_uses(probe) == ["2: .store"]
