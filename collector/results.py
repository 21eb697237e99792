"""The answer to one export request: what was stored, what was refused and why (OTLP ``partial_success``)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from collector.rejections import Rejection, summarize

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExportResult:
    """What an export stored and refused; ``error_message`` goes into OTLP ``partial_success``.

    Attributes:
        accepted: spans stored.
        rejected: spans refused, each listed in ``rejections``.
        error_message: empty when everything was stored cleanly; otherwise the reasons (a warning
            only, with ``rejected`` 0, when spans were stored with a note such as a missing service name).
    """

    accepted: int
    rejected: int
    error_message: str
    rejections: tuple[Rejection, ...] = ()


def export_result(accepted: int, rejections: list[Rejection], warnings: list[str]) -> ExportResult:
    """The :class:`ExportResult` of a request: its ``error_message`` names the first rejections and
    then the warnings."""
    message = summarize(rejections)
    if warnings:
        message = "; ".join([message, *warnings] if message else warnings)
    return ExportResult(accepted, len(rejections), message, tuple(rejections))


def log_answer(result: ExportResult) -> None:
    """Log the first rejection of an answered request (INFO); the ingest pipeline calls it once per answer,
    while :func:`export_result` also runs where nothing is answered (the batch writer's check)."""
    if result.rejections:
        log.info("%s", summarize(result.rejections, 1))
