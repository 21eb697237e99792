"""Turn a config argument or environment value into a parsed document (a mapping).

Accepted sources: a mapping (used as is); a :class:`os.PathLike` (a file); a ``str`` that is either
inline text or a path. Text is inline when, stripped, it starts with ``{`` or spans several lines
(a YAML document); anything else is a path, so a mistyped path reports "file not found" rather than
a parse error. Files ending ``.json`` are JSON, ``.yaml``/``.yml`` YAML; other files and inline text
are tried as JSON first, then YAML. YAML needs PyYAML, which ``hotspan_sdk`` does not require:
without it JSON still works and YAML input fails with a ConfigError that says so.
"""

import json
import os
from collections.abc import Mapping
from pathlib import Path

from hotspan_sdk.config_errors import ConfigError, ConfigIssue

ConfigSource = Mapping[str, object] | str | os.PathLike[str]
"""What ``from_config`` accepts: a parsed document, a path, or inline JSON/YAML text."""


def _yaml_load(text: str, origin: str) -> object:
    try:
        import yaml  # optional dependency: imported only when YAML is actually given
    except ImportError:
        raise ConfigError(
            "config source",
            [ConfigIssue(origin, "is YAML (or invalid JSON); YAML needs PyYAML: pip install pyyaml")],
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError("config source", [ConfigIssue(origin, f"invalid YAML: {error}")]) from None


def _parse(text: str, origin: str, fmt: str | None) -> object:
    if fmt != "yaml":
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            if fmt == "json":
                raise ConfigError("config source", [ConfigIssue(origin, f"invalid JSON: {error}")]) from None
    return _yaml_load(text, origin)


def _is_inline(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith("{") or "\n" in stripped


def source_name(source: ConfigSource) -> str:
    """How errors name ``source``: ``"<mapping>"``, ``"<inline>"`` or the path."""
    if isinstance(source, Mapping):
        return "<mapping>"
    if isinstance(source, str) and _is_inline(source):
        return "<inline>"
    return str(source)


def load_document(source: ConfigSource, origin: str | None = None) -> Mapping[str, object]:
    """Read ``source`` into a mapping.

    Args:
        source: A mapping, a path, or inline JSON/YAML text (see the module docstring).
        origin: Names the source in errors (e.g. the environment variable); default
            :func:`source_name`.

    Returns:
        The document's top-level mapping (not validated beyond being a mapping).

    Raises:
        ConfigError: Unreadable file, invalid JSON/YAML, YAML without PyYAML, or a top level that is
            not a mapping; the issue's key is ``origin``.
    """
    if isinstance(source, Mapping):
        return source
    where = origin or source_name(source)
    if isinstance(source, str) and _is_inline(source):
        document = _parse(source, where, None)
    else:
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError("config source", [ConfigIssue(where, f"cannot read {path}: {error}")]) from None
        suffix = path.suffix.lower()
        fmt = "json" if suffix == ".json" else "yaml" if suffix in (".yaml", ".yml") else None
        document = _parse(text, where, fmt)
    if not isinstance(document, Mapping):
        raise ConfigError("config source", [ConfigIssue(where, f"top level must be a mapping, got {document!r}")])
    return document
