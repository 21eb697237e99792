"""Reading rule tables from YAML: the stage rules (:mod:`analysis.stage_rules`), the hotspot rules
(``processors.pipeline.hotspot_rules``) and the diagnosis rule table (``diagnosis.table``) share how a file or
the packaged default is read and how every problem is reported at once.

It lives in :mod:`analysis`, the lowest layer all three may import.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import ClassVar, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

Table = TypeVar("Table", bound=BaseModel)


class RuleFileError(ValueError):
    """A rule table is invalid. ``issues`` lists every problem as ``"<key path>: <message>"``.

    Each table's error subclasses this and names itself in ``table`` (``"stage rules"``), which the message
    starts with: ``invalid stage rules in <origin> (2 error(s)):`` and one ``  - <issue>`` line per problem.
    """

    table: ClassVar[str] = "rules"

    def __init__(self, origin: str, issues: list[str]) -> None:
        self.issues = tuple(issues)
        lines = "\n".join(f"  - {issue}" for issue in self.issues)
        super().__init__(f"invalid {self.table} in {origin} ({len(self.issues)} error(s)):\n{lines}")


def read_rule_file(path: str | Path, error: type[RuleFileError]) -> object:
    """The parsed YAML document at ``path`` (None for an empty file).

    Raises:
        error: the file cannot be read, is not UTF-8, or is not YAML (one issue naming the file).
    """
    origin = str(path)
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise error(origin, [f"{origin}: cannot be read as YAML: {exc}"]) from None


def read_packaged_rules(package: str, resource: str) -> tuple[object, str]:
    """The parsed YAML of a table packaged as ``resource`` in ``package``, and its origin for error messages
    (``analysis/stage_rules.yaml``). A packaged table that does not parse is a bug: what yaml raises."""
    text = resources.files(package).joinpath(resource).read_text(encoding="utf-8")
    return yaml.safe_load(text), f"{package.replace('.', '/')}/{resource}"


def validate_rules(model: type[Table], document: object, origin: str, error: type[RuleFileError]) -> Table:
    """``document`` (parsed YAML/JSON) validated as ``model``.

    Raises:
        error: every problem, each under its key path (:func:`validation_issues`).
    """
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise error(origin, validation_issues(exc)) from None


def validation_issues(error: ValidationError) -> list[str]:
    """Every problem of a pydantic validation, as ``"<key path>: <message>"`` (``rules[3].match.kind[0]``)."""
    return [f"{key_path(item['loc'])}: {item['msg']}" for item in error.errors()]


def key_path(location: tuple[int | str, ...]) -> str:
    """A pydantic error location as a key path: ``("rules", 3, "match")`` → ``rules[3].match``; the whole
    document is ``<document>``."""
    path = ""
    for part in location:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path or "<document>"
