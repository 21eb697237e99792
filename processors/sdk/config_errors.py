"""One error type for every configuration problem in ``hotspan_sdk``.

Validation collects every problem before raising, so a user fixes a config file in one pass.
"""

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    """One problem in a configuration.

    Attributes:
        key: Where the problem is, as a path into the config (``"policies[2].ratio"``), or the
            config's origin (a file path, an environment variable) when the whole document is bad.
        message: What is wrong and what is expected.
    """

    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}"


class ConfigError(ValueError):
    """A configuration is invalid; ``issues`` lists every problem found, each naming its key.

    Subclasses ``ValueError`` so callers that already catch bad values keep working.
    """

    def __init__(self, what: str, issues: Iterable[ConfigIssue]) -> None:
        self.issues: tuple[ConfigIssue, ...] = tuple(issues)
        lines = "\n".join(f"  - {issue}" for issue in self.issues)
        count = len(self.issues)
        super().__init__(f"invalid {what} ({count} error{'s' if count != 1 else ''}):\n{lines}")
