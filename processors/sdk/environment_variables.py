"""Environment variables read by ``hotspan_sdk`` (precedence: argument > environment > default)."""

from typing import Final

HOTSPAN_SAMPLING_POLICIES: Final = "HOTSPAN_SAMPLING_POLICIES"
"""
.. envvar:: HOTSPAN_SAMPLING_POLICIES

The policy table of :class:`hotspan_sdk.BaggageSampler`, read by ``BaggageSampler.from_env()``.
Either a path to a ``.json``/``.yaml``/``.yml`` file, or the table inline: JSON, or YAML when PyYAML
is installed. Text that starts with ``{`` or spans several lines is inline; anything else is a path.
Default: unset, which means no policies and ``default_ratio`` 1.0 (the SDK's ParentBased(AlwaysOn)).
"""
