"""Which process runs the background work (``hotspan.roles.owns_background``): ``all``, or pipeline worker 0 of N,
so a split deployment judges each minute once (the incident lifecycle, ``runs_incidents``; none with
``HOTSPAN_ANOMALY`` off) and alerts each burning SLO once (the SLO evaluator, ``runs_slo_evaluator``; none without
an SLO file); query nodes only read."""

from __future__ import annotations

from pathlib import Path

import pytest

from hotspan.roles import runs_incidents, runs_slo_evaluator
from hotspan.settings import load_settings


@pytest.mark.parametrize(
    ("role", "shard", "owns"),
    [
        ("all", "0/1", True),
        ("collector", "0/1", False),
        ("query", "0/1", False),
        ("pipeline", "0/3", True),
        ("pipeline", "2/3", False),
    ],
)
def test_one_role_and_shard_owns_the_background_work(tmp_path: Path, role: str, shard: str, owns: bool) -> None:
    slo_file = tmp_path / "slo.yaml"
    settings = load_settings(data_dir=tmp_path, role=role, pipeline_shard=shard, alerts_path=slo_file)
    assert runs_incidents(settings) is owns
    assert runs_slo_evaluator(settings) is owns


def test_with_anomaly_off_no_process_runs_it(tmp_path: Path) -> None:
    assert not runs_incidents(load_settings(data_dir=tmp_path, anomaly=False))


def test_without_an_slo_file_no_process_evaluates(tmp_path: Path) -> None:
    assert not runs_slo_evaluator(load_settings(data_dir=tmp_path))
