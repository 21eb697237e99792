"""The size of the reliability suite's runs: the CI form (seconds per test) unless ``HOTSPAN_RELIABILITY=long``.

A plain module (not ``conftest``) so the tests import it by a name no other folder shares.
"""

from __future__ import annotations

import os

LONG = os.environ.get("HOTSPAN_RELIABILITY", "ci") == "long"
"""Whether the long forms run (``HOTSPAN_RELIABILITY=long``)."""


def sized(ci: int, long: int) -> int:
    """``ci`` in the CI form, ``long`` in the long one."""
    return long if LONG else ci
