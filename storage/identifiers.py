"""Plain SQL identifiers: the only names (databases, tables, clusters) Hotspan ever writes into SQL text."""

from __future__ import annotations

import re

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def validate_identifier(name: str) -> str:
    """Return ``name`` if it is a plain SQL identifier (database, table or cluster name).

    Raises:
        ValueError: ``name`` holds anything but letters, digits and underscores, or starts with a digit.
    """
    if not _IDENTIFIER.match(name):
        raise ValueError(f"not a plain identifier: {name!r}")
    return name
