"""A diagnosis finding's evidence in words: ``queue_ms_p95: 812.5`` reads "Queue, p95 · 812.50 ms".

Evidence keys follow one naming rule (``diagnosis.findings.EVIDENCE_UNIT_SUFFIXES``, then optionally one of
``EVIDENCE_STATISTICS``), so the unit and the statistic come from the key: ``_ms`` and ``_s`` are durations,
``_tokens`` token counts, ``_count`` counts, ``_share`` shares in [0, 1] shown in %, ``_ratio`` a factor,
``_per_s`` a rate, ``_bytes`` a size, ``_ids``/``_names`` lists, ``_name``/``_key``/``_source`` text.
"""

from __future__ import annotations

from dashboards.format import format_duration_ns, format_share, format_tokens
from diagnosis.findings import EVIDENCE_STATISTICS

STATISTIC_WORDS = {
    "_p50": "median",
    "_p95": "p95",
    "_p99": "p99",
    "_min": "min",
    "_max": "max",
    "_mean": "mean",
    "_total": "total",
}
"""How each statistic suffix reads."""
ACRONYMS = {"llm": "LLM", "kv": "KV", "tls": "TLS", "tpot": "TPOT", "ttft": "TTFT", "cpu": "CPU", "id": "ID"}
"""Words written in capitals."""
_BYTES_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
NAMED = {"cpu_contention_level_ratio": ("Host CPU contention", "_share")}
"""Evidence keys whose words or unit read wrong by the naming rule, with their label and the unit suffix whose
format they take: the contention level is a fraction in [0, 1] (PSI, utilisation, or share of spans delayed;
diagnosis/README.md), not a growth factor, so it reads as a percentage."""


def evidence_row(key: str, value: object) -> tuple[str, str]:
    """``(label, value text)`` of one evidence item (module docstring); an unknown key reads as words and its
    value as stored."""
    if key in NAMED:
        label, unit = NAMED[key]
        return label, _format(unit, value)
    base, statistic = key, ""
    for suffix in EVIDENCE_STATISTICS:
        if key.endswith(suffix):
            base, statistic = key[: -len(suffix)], STATISTIC_WORDS.get(suffix, suffix.strip("_"))
            break
    unit = next((suffix for suffix in _UNIT_FORMATS if base.endswith(suffix)), "")
    words = base[: -len(unit)] if unit in _HIDDEN_UNITS else base
    label = " ".join(ACRONYMS.get(word, word) for word in words.strip("_").split("_"))
    label = label[:1].upper() + label[1:]
    if statistic:
        label = f"{label}, {statistic}"
    return label, _format(unit, value)


def _format(unit: str, value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return _UNIT_FORMATS.get(unit, _plain)(float(value))


def _plain(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:.4g}"


def _bytes(value: float) -> str:
    unit = 0
    while abs(value) >= 1024 and unit < len(_BYTES_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    return f"{value:.1f} {_BYTES_UNITS[unit]}" if unit else f"{value:.0f} B"


_UNIT_FORMATS = {
    "_ms": lambda value: format_duration_ns(value * 1e6),
    "_per_s": lambda value: f"{value:,.3g}/s",
    "_s": lambda value: format_duration_ns(value * 1e9),
    "_tokens": format_tokens,
    "_count": lambda value: f"{value:,.0f}" if value == int(value) else f"{value:,.1f}",
    "_share": format_share,
    "_ratio": lambda value: f"×{value:.2f}" if value == 0 or abs(value) >= 0.01 else f"×{value:.1g}",
    "_correlation": lambda value: f"{value:+.2f}",
    "_bytes": _bytes,
}
"""Value formats by unit suffix (``_per_s`` before ``_s``: the first suffix that matches wins)."""
_HIDDEN_UNITS = ("_ms", "_s", "_tokens", "_bytes", "_per_s", "_ratio")
"""Unit suffixes the value's format already says (a ratio's ``×``), left out of the label (a count or share keeps
its word)."""
