"""Precompiled glob matching (``fnmatch`` syntax, case-sensitive on every platform).

Rules are matched on every span, so each pattern is compiled once into the cheapest predicate that
implements it: ``*`` matches everything, a pattern without wildcards is a string comparison, anything
else a compiled regular expression from :func:`fnmatch.translate`.
"""

import fnmatch
import re
from collections.abc import Callable

GlobMatcher = Callable[[str], bool]
"""Takes a string, returns whether the pattern matches all of it."""

_WILDCARDS = frozenset("*?[")


def _match_anything(_text: str) -> bool:
    return True


def compile_glob(pattern: str) -> GlobMatcher:
    """Compile an ``fnmatch`` pattern (``*``, ``?``, ``[seq]``, ``[!seq]``) into a predicate.

    Matching is case-sensitive (``fnmatch.fnmatchcase`` semantics) so a rule behaves the same on
    every OS. Thread-safe: the returned predicate holds no mutable state.
    """
    if pattern == "*":
        return _match_anything
    if _WILDCARDS.isdisjoint(pattern):
        return pattern.__eq__
    regex = re.compile(fnmatch.translate(pattern))

    def matches(text: str) -> bool:
        return regex.match(text) is not None

    return matches
